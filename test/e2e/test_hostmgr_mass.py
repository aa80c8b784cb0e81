#!/usr/bin/python3
"""End-to-end: the host manager's mass-event rule (docs/lifecycle.md, "When a
node is lost"). pelotond --roles=apiserver,hostmgr with two kubelet-sims, one
serving 8 nodes and one serving 2, and a bound pod on every node. SIGSTOP of
the 8-node kubelet-sim lapses 80 % of the leases at once: evictions pause (a
NodeEvictionsPaused Event, peloton_hostmgr_evictions_paused 1) and no pod is
deleted; SIGCONT brings the leases back and nothing was lost. One node going
down alone afterwards is still lost and its pod deleted, as before. Every wait
is bounded; every process is stopped."""
import re
import signal
import time
import urllib.request

from kubernetes import client

import services
from simlib import run_tests

DOWN = "kubelet-sim.peloton.io/down"

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver,hostmgr")
KUBECONFIG = services.kubeconfig(PORT)
cfg = client.Configuration()
cfg.host = f"http://127.0.0.1:{PORT}"
API = client.CoreV1Api(client.ApiClient(cfg))
wait_until = services.wait_until

LEASE = ("--lease-seconds=3", "--renew-seconds=1", "--status-seconds=1")
MANY, MANY_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=8", "--name-prefix=mm-", *LEASE, expect=8)
FEW, FEW_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=2", "--name-prefix=mf-", *LEASE, expect=2)


def node_names(prefix):
    return sorted(n.metadata.name for n in API.list_node().items if n.metadata.name.startswith(prefix))


def pod_names():
    return sorted(p.metadata.name for p in API.list_namespaced_pod("default").items)


def new_bound_pod(name, node):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "hostmgr-test", "containers": [{"name": "main", "image": "busybox"}]}}
    API.create_namespaced_pod("default", body)
    b = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
         "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    API.create_namespaced_pod_binding(name, "default", b, _preload_content=False)


def events(reason):
    return [e for e in API.list_namespaced_event("default").items if e.reason == reason]


def metric(name):
    """The value of an unlabelled sample on pelotond's /metrics, or None."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def held(reason):
    text = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=5).read().decode()
    key = f'peloton_hostmgr_judgements_held_total{{reason="{reason}"}} '
    return next((float(line[len(key):]) for line in text.splitlines() if line.startswith(key)), 0.0)


def tainted(node):
    return any(t.key == "node.kubernetes.io/unreachable" for t in API.read_node(node).spec.taints or [])


NODES = []


def test_pods_run_everywhere():
    NODES.extend(node_names("mm-") + node_names("mf-"))
    assert len(NODES) == 10, NODES
    for i, n in enumerate(NODES):
        new_bound_pod(f"mp-{i}", n)
    wait_until(lambda: all(p.status.phase == "Running" for p in API.list_namespaced_pod("default").items),
               what="every pod Running")
    assert metric("peloton_hostmgr_evictions_paused") == 0


def test_mass_event_pauses_evictions():
    before = pod_names()
    assert len(before) == 10
    MANY.send_signal(signal.SIGSTOP)  # 8 of 10 kubelets stop renewing at once
    try:
        wait_until(lambda: metric("peloton_hostmgr_evictions_paused") == 1, what="evictions paused")
        ev = wait_until(lambda: events("NodeEvictionsPaused"), what="a NodeEvictionsPaused Event")
        assert ev[0].type == "Warning" and ev[0].source.component == "peloton-hostmgr", ev[0]
        assert ev[0].involved_object.kind == "Namespace", ev[0].involved_object
        # the rule holds from 6 of 10 (0.55): the Event counts the leases lapsed when it first held, 6 to 8 (the
        # eight kubelets' last renewals are up to a second apart, more on a loaded machine)
        lapsed = re.match(r"(\d+) of 10 nodes have lapsed leases", ev[0].message)
        assert lapsed and 6 <= int(lapsed.group(1)) <= 8, ev[0].message
        # the nodes are marked down (NotReady, tainted) but their pods stay
        wait_until(lambda: all(tainted(n) for n in NODES if n.startswith("mm-")), what="the 8 nodes tainted")
        wait_until(lambda: held("evictions-paused") > 0, what="held evictions counted")
        time.sleep(2)
        assert pod_names() == before
        assert not events("NodeLost")
    finally:
        MANY.send_signal(signal.SIGCONT)
    wait_until(lambda: metric("peloton_hostmgr_evictions_paused") == 0, what="evictions resumed")
    wait_until(lambda: not any(tainted(n) for n in NODES), what="the taints removed")
    assert events("NodeEvictionsResumed")
    time.sleep(1)
    assert pod_names() == before
    assert not events("NodeLost")


def test_whole_process_stall_loses_nothing():
    """pelotond itself (API server and host manager) stopped past the lease
    period: when it resumes, its check runs late with the events of the stall
    still unread and every lease lapsed in storage (the kubelets could not
    renew). It holds, and the leases get one more period: no node down."""
    before, start = pod_names(), len(open(LOG).read())
    PROC.send_signal(signal.SIGSTOP)
    try:
        time.sleep(7)
    finally:
        PROC.send_signal(signal.SIGCONT)
    wait_until(lambda: "loop stalled" in open(LOG).read()[start:], what="the late check noticed")
    time.sleep(5)  # the kubelets renew; more than a lease period
    log = open(LOG).read()[start:]
    assert "node down" not in log, log[-3000:]
    assert pod_names() == before
    assert not events("NodeLost")


def test_one_node_down_still_lost():
    node = NODES[-1]  # an mf- node: 1 of 10 is no mass event
    pod = f"mp-{len(NODES) - 1}"
    API.patch_node(node, {"metadata": {"annotations": {DOWN: "true"}}})
    wait_until(lambda: pod not in pod_names(), what=f"{pod} deleted as lost")
    ev = wait_until(lambda: events("NodeLost"), what="a NodeLost Event")
    assert len(ev) == 1 and ev[0].involved_object.name == pod, ev
    assert len(pod_names()) == 9
    assert metric("peloton_hostmgr_evictions_paused") == 0


def test_stop_cleanly():
    for p, err in ((MANY, MANY_ERR), (FEW, FEW_ERR)):
        assert services.stop(p) == 0, open(err).read()[-3000:]
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]


def dump_logs():
    for what, path in (("pelotond", LOG), ("kubelet-sim 8", MANY_ERR), ("kubelet-sim 2", FEW_ERR)):
        try:
            print(f"--- {what} log (tail)\n" + open(path).read()[-4000:])
        except OSError:
            pass


try:
    run_tests("test_hostmgr_mass", dict(globals()))
except SystemExit as e:
    if e.code:
        dump_logs()
    raise
finally:
    services.stop_all()
