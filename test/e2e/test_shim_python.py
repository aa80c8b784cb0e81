#!/usr/bin/python3
"""End-to-end: the real Python Kubernetes client (Debian's python3-kubernetes
22.6, so /usr/bin/python3) against pelotond's apiserver role and redis-server."""
import threading

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)
cfg = client.Configuration()
cfg.host = f"http://127.0.0.1:{PORT}"
API = client.CoreV1Api(client.ApiClient(cfg))


def expect_api_error(fn, status, reason):
    try:
        fn()
    except ApiException as e:
        body = e.body.decode() if isinstance(e.body, bytes) else e.body
        assert e.status == status and reason in body, (e.status, body)
        return
    raise AssertionError("no error")


def test_list_create_and_already_exists():
    names = [n.metadata.name for n in API.list_namespace().items]
    assert "default" in names and "kube-system" in names
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-1", labels={"app": "py"}), data={"k": "v"})
    made = API.create_namespaced_config_map("default", cm)
    assert made.metadata.uid and made.metadata.resource_version
    expect_api_error(lambda: API.create_namespaced_config_map("default", cm), 409, "AlreadyExists")
    expect_api_error(lambda: API.read_namespaced_config_map("nope", "default"), 404, "NotFound")
    got = API.list_namespaced_config_map("default", label_selector="app=py")
    assert [c.metadata.name for c in got.items] == ["py-1"]


def test_watch_with_timeout():
    rv = API.list_namespaced_config_map("default").metadata.resource_version
    threading.Timer(0.3, lambda: API.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-w")))).start()
    seen = []
    for ev in watch.Watch().stream(API.list_namespaced_config_map, "default", resource_version=rv,
                                   timeout_seconds=2):
        seen.append((ev["type"], ev["object"].metadata.name))
    assert ("ADDED", "py-w") in seen, seen


def test_pod_binding_and_status():
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="py-pod"),
                       spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]))
    made = API.create_namespaced_pod("default", pod)
    assert made.status.phase == "Pending" and made.spec.scheduler_name == "default-scheduler"
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="py-pod"),
                            target=client.V1ObjectReference(kind="Node", name="node-1"))
    r = API.create_namespaced_pod_binding("py-pod", "default", body, _preload_content=False)
    assert r.status == 201
    got = API.read_namespaced_pod("py-pod", "default")
    assert got.spec.node_name == "node-1"
    assert [(c.type, c.status) for c in got.status.conditions] == [("PodScheduled", "True")]
    expect_api_error(lambda: API.create_namespaced_pod_binding("py-pod", "default", body, _preload_content=False),
                     409, "already assigned to node")
    # the status subresource changes status only; the main resource leaves it alone
    API.patch_namespaced_pod_status("py-pod", "default", {"status": {"phase": "Running"}})
    API.patch_namespaced_pod("py-pod", "default", {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}})
    got = API.read_namespaced_pod("py-pod", "default")
    assert got.status.phase == "Running" and got.metadata.labels == {"a": "b"}, got.status.phase
    # a strategic merge patch of status merges conditions by type and leaves metadata and spec alone
    rv = got.metadata.resource_version
    API.patch_namespaced_pod_status("py-pod", "default", {
        "metadata": {"labels": {"a": "changed"}}, "spec": {"nodeName": "elsewhere"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.1.2.3"}})
    got = API.read_namespaced_pod("py-pod", "default")
    assert sorted((c.type, c.status) for c in got.status.conditions) == [("PodScheduled", "True"), ("Ready", "True")]
    assert got.status.pod_ip == "10.1.2.3" and got.status.phase == "Running"
    assert got.metadata.labels == {"a": "b"} and got.spec.node_name == "node-1"
    assert int(got.metadata.resource_version) > int(rv)
    # a JSON merge patch replaces the list; null removes a field
    API.api_client.call_api("/api/v1/namespaces/default/pods/py-pod/status", "PATCH",
                            header_params={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
                            body={"status": {"conditions": [{"type": "Ready", "status": "False"}], "podIP": None}},
                            _preload_content=False)
    got = API.read_namespaced_pod("py-pod", "default")
    assert [(c.type, c.status) for c in got.status.conditions] == [("Ready", "False")]
    assert got.status.pod_ip is None and got.status.phase == "Running"
    # a status patch that changes nothing writes nothing
    rv = got.metadata.resource_version
    API.patch_namespaced_pod_status("py-pod", "default", {"status": {"phase": "Running"}})
    assert API.read_namespaced_pod("py-pod", "default").metadata.resource_version == rv


def test_graceful_pod_deletion():
    def new_pod(name, node=None):
        API.create_namespaced_pod("default", client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")],
                                  termination_grace_period_seconds=20)))
        if node:
            API.create_namespaced_pod_binding(name, "default", client.V1Binding(
                metadata=client.V1ObjectMeta(name=name), target=client.V1ObjectReference(kind="Node", name=node)),
                _preload_content=False)
    new_pod("gone-at-once")  # not bound: deleted immediately
    API.delete_namespaced_pod("gone-at-once", "default")
    expect_api_error(lambda: API.read_namespaced_pod("gone-at-once", "default"), 404, "NotFound")
    new_pod("graceful", node="node-1")
    API.delete_namespaced_pod("graceful", "default")
    p = API.read_namespaced_pod("graceful", "default")  # still there, terminating
    assert p.metadata.deletion_timestamp is not None and p.metadata.deletion_grace_period_seconds == 20
    API.patch_namespaced_pod_status("graceful", "default", {"status": {"phase": "Succeeded"}})
    assert API.read_namespaced_pod("graceful", "default").status.phase == "Succeeded"  # status writes keep it
    API.delete_namespaced_pod("graceful", "default", grace_period_seconds=0)  # the node confirms
    expect_api_error(lambda: API.read_namespaced_pod("graceful", "default"), 404, "NotFound")


def test_custom_objects():
    co = client.CustomObjectsApi(client.ApiClient(cfg))
    pool = {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "py-org"},
            "spec": {"resources": [{"kind": "cpu", "reservation": "10"}]}}
    made = co.create_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", pool)
    assert made["metadata"]["uid"]
    got = co.list_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools")
    assert "py-org" in [i["metadata"]["name"] for i in got["items"]]
    job = {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "py-job"},
           "spec": {"type": "BATCH", "resourcePool": "py-org", "instanceCount": 2,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    co.create_namespaced_custom_object("peloton.io", "v1alpha1", "default", "jobs", job)
    assert co.get_namespaced_custom_object("peloton.io", "v1alpha1", "default", "jobs", "py-job")["spec"]["instanceCount"] == 2
    bad = dict(pool, metadata={"name": "py-bad"}, spec={"resources": [{"kind": "cpu", "reservation": "5", "limit": "1"}]})
    expect_api_error(lambda: co.create_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", bad),
                     422, "exceeds its limit")


def test_legacy_bindings_route():
    API.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="py-pod-2"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="py-pod-2"),
                            target=client.V1ObjectReference(kind="Node", name="node-2"))
    r = API.create_namespaced_binding("default", body, _preload_content=False)
    assert r.status == 201
    assert API.read_namespaced_pod("py-pod-2", "default").spec.node_name == "node-2"


run_tests("shim-python", dict(globals()))
