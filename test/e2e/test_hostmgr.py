#!/usr/bin/python3
"""End-to-end: the host manager role (pelotond --roles=apiserver,hostmgr) with
kubelet-sim (build/asan/kubelet-sim) and redis-server. A node whose kubelet
stops renewing its lease goes NotReady (Ready=Unknown), gets the unreachable
taint, and its pods are deleted with a NodeLost Event; when the kubelet comes
back the taint goes. Checked with the Python client and kubectl. Every wait is
bounded; every process is stopped."""
import sys
import time

from kubernetes import client

import services
from simlib import run_tests

DOWN = "kubelet-sim.peloton.io/down"
TAINT = "node.kubernetes.io/unreachable"

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver,hostmgr")
KUBECONFIG = services.kubeconfig(PORT)
cfg = client.Configuration()
cfg.host = f"http://127.0.0.1:{PORT}"
API = client.CoreV1Api(client.ApiClient(cfg))


wait_until = services.wait_until



def start_ksim(*flags, expect=None):
    return services.start_kubelet_sim(KUBECONFIG, *flags, expect=expect)


SIM, SIM_ERR = start_ksim("--nodes=3", "--name-prefix=hm-", "--lease-seconds=3", "--renew-seconds=1",
                          "--status-seconds=1", expect=3)


def kubectl(*args, timeout=30):
    return services.kubectl(KUBECONFIG, *args, timeout=timeout)


def new_bound_pod(name, node):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "hostmgr-test",
                     "containers": [{"name": "main", "image": "busybox"}]}}
    API.create_namespaced_pod("default", body)
    b = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
         "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    API.create_namespaced_pod_binding(name, "default", b, _preload_content=False)


def pod_phase(name):
    try:
        return API.read_namespaced_pod(name, "default").status.phase
    except client.rest.ApiException as e:
        if e.status == 404:
            return None
        raise


def ready(node):
    for c in API.read_node(node).status.conditions or []:
        if c.type == "Ready":
            return c.status
    return None


def tainted(node):
    return any(t.key == TAINT and t.effect == "NoExecute" for t in API.read_node(node).spec.taints or [])


def lost_events():
    return [e for e in API.list_namespaced_event("default").items if e.reason == "NodeLost"]


def test_lapsed_lease_loses_pods():
    new_bound_pod("hm-a", "hm-1")
    new_bound_pod("hm-b", "hm-1")
    new_bound_pod("hm-c", "hm-2")
    for p in ("hm-a", "hm-b", "hm-c"):
        wait_until(lambda p=p: pod_phase(p) == "Running", what=f"{p} Running")
    assert ready("hm-1") == "True" and not tainted("hm-1")
    API.patch_node("hm-1", {"metadata": {"annotations": {DOWN: "true"}}})
    t0 = time.monotonic()
    wait_until(lambda: ready("hm-1") == "Unknown", what="hm-1 Ready=Unknown")
    wait_until(lambda: tainted("hm-1"), what="the unreachable taint on hm-1")
    wait_until(lambda: pod_phase("hm-a") is None and pod_phase("hm-b") is None, what="hm-1's pods deleted")
    print(f"  hm-1 lost its pods {time.monotonic() - t0:.1f}s after its kubelet stopped", file=sys.stderr)
    ev = wait_until(lambda: len(lost_events()) == 2 and lost_events(), what="two NodeLost events")
    for e in ev:
        assert e.type == "Warning" and e.source.component == "peloton-hostmgr", e
        assert e.involved_object.kind == "Pod" and e.involved_object.name in ("hm-a", "hm-b"), e
        assert "hm-1" in e.message, e.message
    # the other nodes and their pods are untouched
    assert pod_phase("hm-c") == "Running"
    assert ready("hm-2") == "True" and not tainted("hm-2")
    n = next(c for c in API.read_node("hm-1").status.conditions if c.type == "Ready")
    assert n.reason == "NodeStatusUnknown", n
    # kubectl shows the node NotReady and the events
    assert "NotReady" in kubectl("get", "node", "hm-1")
    assert "NodeLost" in kubectl("get", "events", "--field-selector", "reason=NodeLost")


def test_node_back_loses_taint():
    API.patch_node("hm-1", {"metadata": {"annotations": {DOWN: None}}})
    wait_until(lambda: not tainted("hm-1"), what="the taint removed from hm-1")
    wait_until(lambda: ready("hm-1") == "True", what="hm-1 Ready again")
    # a pod bound to it now runs and stays
    new_bound_pod("hm-d", "hm-1")
    wait_until(lambda: pod_phase("hm-d") == "Running", what="hm-d Running")
    time.sleep(2)
    assert pod_phase("hm-d") == "Running"
    assert len(lost_events()) == 2


def test_stop_cleanly():
    assert services.stop(SIM) == 0, open(SIM_ERR).read()[-3000:]
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]


def dump_logs():
    for what, path in (("pelotond", LOG), ("kubelet-sim", SIM_ERR)):
        try:
            print(f"--- {what} log (tail)\n" + open(path).read()[-4000:])
        except OSError:
            pass


try:
    run_tests("test_hostmgr", dict(globals()))
except SystemExit as e:
    if e.code:
        dump_logs()
    raise
finally:
    services.stop_all()
