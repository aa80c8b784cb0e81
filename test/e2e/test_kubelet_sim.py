#!/usr/bin/python3
"""End-to-end: kubelet-sim (build/asan/kubelet-sim) against pelotond's API
server and redis-server, checked with kubectl and the Python client (Debian's
python3-kubernetes). Every wait is bounded; every process is stopped."""
import json
import signal
import time

from kubernetes import client
from kubernetes.client.rest import ApiException

import services
from simlib import run_tests

ANN = "kubelet-sim.peloton.io/"

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver")
KUBECONFIG = services.kubeconfig(PORT)
cfg = client.Configuration()
cfg.host = f"http://127.0.0.1:{PORT}"
API = client.CoreV1Api(client.ApiClient(cfg))
COORD = client.CoordinationV1Api(client.ApiClient(cfg))


wait_until = services.wait_until



def start_ksim(*flags, expect=None):
    return services.start_kubelet_sim(KUBECONFIG, *flags, expect=expect)


SIM, SIM_ERR = start_ksim("--nodes=4", "--name-prefix=ksim-", "--cpu=2", "--memory=4Gi", "--pods=20",
                          "--labels=team=a,tier=sim", "--zones=2", "--gpu-nodes=1", "--gpu-per-node=2",
                          "--lease-seconds=10", "--renew-seconds=1", "--status-seconds=2", "--restart-backoff=0.2",
                          "--restart-backoff-max=0.4", "--down=ksim-3", expect=4)


def kubectl(*args, timeout=30):
    return services.kubectl(KUBECONFIG, *args, timeout=timeout)


def new_pod(name, node=None, annotations=None, restart="Always", cpu=None, memory=None, grace=30):
    res = {}
    if cpu:
        res["cpu"] = cpu
    if memory:
        res["memory"] = memory
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {ANN + k: v for k, v in (annotations or {}).items()}},
            "spec": {"schedulerName": "kubelet-sim-test", "restartPolicy": restart,
                     "terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "main", "image": "busybox", "resources": {"requests": res}}]}}
    API.create_namespaced_pod("default", body)
    if node:
        bind(name, node)


def bind(name, node):
    r = API.create_namespaced_pod_binding(name, "default", client.V1Binding(
        metadata=client.V1ObjectMeta(name=name), target=client.V1ObjectReference(kind="Node", name=node)),
        _preload_content=False)
    assert r.status == 201


def pod(name):
    return API.read_namespaced_pod(name, "default")


def phase_is(name, phase):
    return lambda: pod(name).status.phase == phase


def renew_time(node):
    """The lease's renewTime, or None while the lease does not exist yet."""
    try:
        return COORD.read_namespaced_lease(node, "kube-node-lease").spec.renew_time
    except ApiException as e:
        if e.status != 404:
            raise
        return None


def test_nodes_registered():
    nodes = {n.metadata.name: n for n in API.list_node().items}
    assert {"ksim-0", "ksim-1", "ksim-2", "ksim-3"} <= set(nodes), list(nodes)
    for i in range(4):
        n = nodes[f"ksim-{i}"]
        a = n.status.allocatable
        assert a["cpu"] == "2" and a["memory"] == "4Gi" and a["pods"] == "20", a
        assert n.status.capacity == a
        assert ("nvidia.com/gpu" in a) == (i == 0), a
        l = n.metadata.labels
        assert l["team"] == "a" and l["tier"] == "sim" and l["kubernetes.io/hostname"] == f"ksim-{i}", l
        assert l["kubernetes.io/os"] == "linux" and l["topology.kubernetes.io/zone"] == f"zone-{i % 2}", l
        assert n.status.node_info.kubelet_version.endswith("-sim")
        assert any(ad.type == "InternalIP" for ad in n.status.addresses)
        ready = [c for c in n.status.conditions if c.type == "Ready"][0]
        assert ready.status == ("Unknown" if i == 3 else "True"), (i, ready)
        assert ready.last_heartbeat_time is not None
    assert nodes["ksim-0"].status.allocatable["nvidia.com/gpu"] == "2"
    assert nodes["ksim-3"].metadata.annotations[ANN + "down"] == "true"
    out = kubectl("get", "nodes", "-l", "tier=sim", "--no-headers")
    assert out.count(" Ready ") == 3, out


def test_leases_renewed():
    lease = COORD.read_namespaced_lease("ksim-1", "kube-node-lease")
    assert lease.spec.holder_identity == "ksim-1" and lease.spec.lease_duration_seconds == 10
    first = lease.spec.renew_time
    wait_until(lambda: renew_time("ksim-1") > first, 5, "the lease to be renewed")


def test_pod_runs_then_succeeds():
    new_pod("run-ok", "ksim-0", {"start-seconds": "0.5", "run-seconds": "2"}, restart="Never", cpu="500m")
    wait_until(phase_is("run-ok", "Running"), 10, "Running")
    p = pod("run-ok")
    assert p.status.pod_ip and p.status.host_ip and p.status.start_time
    cs = p.status.container_statuses[0]
    assert cs.name == "main" and cs.ready and cs.state.running.started_at and cs.restart_count == 0
    conds = {c.type: c.status for c in p.status.conditions}
    assert conds["Ready"] == "True" and conds["PodScheduled"] == "True" and conds["ContainersReady"] == "True"
    wait_until(phase_is("run-ok", "Succeeded"), 10, "Succeeded")
    cs = pod("run-ok").status.container_statuses[0]
    assert cs.state.terminated.exit_code == 0 and not cs.ready
    out = kubectl("get", "pod", "run-ok", "--no-headers")
    assert "Completed" in out or "Succeeded" in out, out


def test_exit_code_never_fails():
    new_pod("exit-3", "ksim-1", {"run-seconds": "0.5", "exit-code": "3"}, restart="Never")
    wait_until(phase_is("exit-3", "Failed"), 10, "Failed")
    assert pod("exit-3").status.container_statuses[0].state.terminated.exit_code == 3


def test_on_failure_restarts():
    new_pod("crashy", "ksim-1", {"run-seconds": "0.3", "exit-code": "1"}, restart="OnFailure")
    wait_until(lambda: (pod("crashy").status.container_statuses or [None])[0] is not None and
               pod("crashy").status.container_statuses[0].restart_count >= 2, 15, "restarts")
    p = pod("crashy")
    assert p.status.phase == "Running"
    assert p.status.container_statuses[0].last_state.terminated.exit_code == 1


def test_on_failure_succeeds_on_zero():
    new_pod("once", "ksim-1", {"run-seconds": "0.3"}, restart="OnFailure")
    wait_until(phase_is("once", "Succeeded"), 10, "Succeeded")
    assert pod("once").status.container_statuses[0].restart_count == 0


def test_graceful_delete():
    new_pod("victim", "ksim-2", grace=30)
    wait_until(phase_is("victim", "Running"), 10, "Running")
    kubectl("delete", "pod", "victim", "--timeout=20s")  # waits until the pod is gone

    def gone():
        try:
            pod("victim")
            return False
        except ApiException as e:
            return e.status == 404
    wait_until(gone, 5, "the pod to disappear")


def kubelet_events(name):
    """The Events kubectl lists for a pod, as kubectl prints them (oldest first)."""
    out = kubectl("get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json")
    return [e for e in json.loads(out)["items"] if e["source"].get("component") == "kubelet"]


def wait_events(name, reasons, timeout=10):
    wait_until(lambda: reasons <= {e["reason"] for e in kubelet_events(name)}, timeout, f"{reasons} of {name}")
    return kubelet_events(name)


def test_events_of_a_run():
    evs = wait_events("run-ok", {"Pulled", "Created", "Started"})
    assert [e["reason"] for e in evs][:3] == ["Pulled", "Created", "Started"], evs
    pod_uid = pod("run-ok").metadata.uid
    for e in evs:
        assert e["source"] == {"component": "kubelet", "host": "ksim-0"}, e
        o = e["involvedObject"]
        assert o["kind"] == "Pod" and o["uid"] == pod_uid and o["fieldPath"] == "spec.containers{main}", o
        assert e["type"] == "Normal" and e["count"] == 1, e
    msgs = {e["reason"]: e["message"] for e in evs}
    assert msgs["Pulled"] == 'Container image "busybox" already present on machine', msgs
    assert msgs["Created"] == "Created container main" and msgs["Started"] == "Started container main", msgs
    out = kubectl("describe", "pod", "run-ok")
    events = out[out.index("Events:"):]
    for reason, msg in msgs.items():
        assert reason in events and msg in events, events
    assert events.index("Pulled") < events.index("Created") < events.index("Started"), events
    assert "kubelet" in events, events


def test_events_killing_on_delete():
    evs = wait_events("victim", {"Killing"})
    kill = [e for e in evs if e["reason"] == "Killing"]
    assert len(kill) == 1 and kill[0]["message"] == "Stopping container main", kill
    assert kill[0]["source"]["host"] == "ksim-2", kill


def test_events_backoff_counted_on_one():
    wait_until(lambda: any(e["reason"] == "BackOff" and e["count"] > 1 for e in kubelet_events("crashy")), 10,
               "a BackOff counted twice")
    evs = kubelet_events("crashy")
    backoff = [e for e in evs if e["reason"] == "BackOff"]
    assert len(backoff) == 1, backoff  # one Event, counted; not one per restart
    uid = pod("crashy").metadata.uid
    assert backoff[0]["type"] == "Warning", backoff
    assert backoff[0]["message"] == f"Back-off restarting failed container main in pod crashy_default({uid})", backoff
    assert backoff[0]["lastTimestamp"] >= backoff[0]["firstTimestamp"], backoff
    started = [e for e in evs if e["reason"] == "Started"]
    assert len(started) == 1 and started[0]["count"] > 1, started  # each restart starts it again


def test_events_off():
    p, err = start_ksim("--nodes=1", "--name-prefix=noev-", "--events=false", "--quiet", expect=1)
    try:
        new_pod("quiet-pod", "noev-0", restart="Never")
        wait_until(phase_is("quiet-pod", "Running"), 10, "Running")
        API.delete_namespaced_pod("quiet-pod", "default")
        wait_until(lambda: not any(x.metadata.name == "quiet-pod" for x in API.list_namespaced_pod("default").items),
                   10, "the pod to go")
        assert kubelet_events("quiet-pod") == []
    finally:
        assert services.stop(p) == 0, open(err).read()


def test_out_of_cpu_and_memory():
    new_pod("too-big", "ksim-2", restart="Never", cpu="3")
    wait_until(phase_is("too-big", "Failed"), 10, "Failed")
    p = pod("too-big")
    assert p.status.reason == "OutOfcpu" and "cpu" in p.status.message, (p.status.reason, p.status.message)
    new_pod("too-much-mem", "ksim-2", restart="Never", memory="5Gi")
    wait_until(phase_is("too-much-mem", "Failed"), 10, "Failed")
    assert pod("too-much-mem").status.reason == "OutOfmemory"
    # admission counts what already runs on the node
    new_pod("half-1", "ksim-2", cpu="1500m")
    wait_until(phase_is("half-1", "Running"), 10, "Running")
    new_pod("half-2", "ksim-2", cpu="1500m")
    wait_until(phase_is("half-2", "Failed"), 10, "Failed")
    assert pod("half-2").status.reason == "OutOfcpu"


def test_node_down_and_back():
    kubectl("annotate", "node", "ksim-2", ANN + "down=true")
    time.sleep(1.5)  # a renewal in flight may still land
    frozen = renew_time("ksim-2")
    new_pod("on-dead-node", "ksim-2")
    time.sleep(2.5)
    assert renew_time("ksim-2") == frozen, "a down node renewed its lease"
    assert pod("on-dead-node").status.phase == "Pending"
    assert pod("half-1").status.phase == "Running"  # its pods stay as they were
    kubectl("annotate", "node", "ksim-2", ANN + "down-")
    wait_until(lambda: renew_time("ksim-2") > frozen, 5, "renewals to resume")
    wait_until(phase_is("on-dead-node", "Running"), 10, "the held pod to run")


def test_started_down_node_comes_up():
    try:
        COORD.read_namespaced_lease("ksim-3", "kube-node-lease")
        assert False, "a node started down has a lease"
    except ApiException as e:
        assert e.status == 404
    kubectl("annotate", "node", "ksim-3", ANN + "down-")
    wait_until(lambda: [c.status for c in API.read_node("ksim-3").status.conditions if c.type == "Ready"] == ["True"],
               10, "ksim-3 Ready")
    wait_until(lambda: renew_time("ksim-3"), 10, "ksim-3's lease")


def test_pod_status_lands_after_an_api_server_outage():
    """A pod that ends while the API server is down shows its end once the
    server is back, as with a Kubelet: its status write is retried until it
    lands (with --retries=5 it used to give up after about 3 s and the pod
    stayed Running for good)."""
    redis = services.start_redis()
    port = services.free_port()

    def api_server():
        return services.start_pelotond(redis, "--roles=apiserver", f"--port={port}")[0]

    server = api_server()
    kc = services.kubeconfig(port)
    sim, err = services.start_kubelet_sim(kc, "--nodes=1", "--name-prefix=outage-", "--cpu=2", "--pods=10",
                                          "--lease-seconds=60", "--renew-seconds=5", expect=1)
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "through-outage", "annotations": {ANN + "run-seconds": "3"}},
            "spec": {"nodeName": "outage-0", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox"}]}}
    code, _ = services.api(port, "POST", "/api/v1/namespaces/default/pods", body)
    assert code == 201, code

    def phase():
        code, obj = services.api(port, "GET", "/api/v1/namespaces/default/pods/through-outage")
        return obj.get("status", {}).get("phase") if code == 200 else None

    wait_until(lambda: phase() == "Running", 15, "Running before the outage")
    services.stop(server)
    time.sleep(8)  # the pod ends meanwhile (3 s); its writes fail for about 5 s
    server = api_server()
    wait_until(lambda: phase() == "Succeeded", 15, "Succeeded after the outage")
    assert sim.poll() is None, open(err).read()[-2000:]
    services.stop(sim)
    services.stop(server)


def test_delete_nodes_on_exit():
    p, err = start_ksim("--nodes=2", "--name-prefix=gone-", "--delete-nodes-on-exit", "--quiet", expect=2)
    assert {"gone-0", "gone-1"} <= {n.metadata.name for n in API.list_node().items}
    assert services.stop(p) == 0, open(err).read()
    assert not {"gone-0", "gone-1"} & {n.metadata.name for n in API.list_node().items}


def test_clean_stop():
    SIM.send_signal(signal.SIGTERM)
    rc = SIM.wait(15)
    assert rc == 0, open(SIM_ERR).read()[-3000:]


def dump_logs():
    for what, path in (("pelotond", LOG), ("kubelet-sim", SIM_ERR)):
        try:
            print(f"--- {what} log (tail)\n" + open(path).read()[-4000:])
        except OSError:
            pass


try:
    run_tests("test_kubelet_sim", dict(globals()))
except SystemExit as e:
    if e.code:
        dump_logs()
    raise
finally:
    services.stop_all()
