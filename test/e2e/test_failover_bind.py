#!/usr/bin/python3
"""End-to-end (issue #22): a placement engine that takes the lease over
places nothing before its informers have caught up with the store as of
its term's start (docs/architecture.md, "Placement after a failover").

The placement engines (--roles=placement and --roles=jobmgr,placement, a
2 s lease) reach the API server through a proxy that holds their watches
back by LAG seconds (test/e2e/netproxy.py); lists and other requests pass
at once. The resource manager reaches it directly. Three nodes of 2 cpus
(kubelet-sim).

- A node cordoned just before the engine A is killed: the next engine
  (in the process of the job manager, whose node informer it shares, held
  back) must not bind a pod onto it. Before the catch-up rule it did: its
  copy of the nodes was that of the job manager's feed, LAG seconds late.
- Bindings answered 500 but stored (the API server runs with
  --redis-wait-replicas=1 and its replica is paused): the engine that made
  them is killed, and the next one, whose watch shows them LAG seconds
  late, must not fill the node with the two other pods. (This one held
  before the rule as well: a new term lists the pods afresh, and that list
  holds every binding stored before it.)

Every wait is bounded; every process is stopped."""
import signal
import time

import netproxy
import redis_ha
import services
from simlib import run_tests

wait_until = services.wait_until

PRIMARY, REPLICA, REPLICA_PORT = redis_ha.start_with_replica()
PROC, PORT, LOG = services.start_pelotond(PRIMARY, "--redis-wait-replicas=1", "--redis-wait-timeout-ms=300")
KUBECONFIG = services.kubeconfig(PORT)
LAG = 6.0  # seconds the engines' watches are held back: more than a takeover (a 2 s lease) and the catch-up (1 s)
PROXY = netproxy.Proxy(PORT, watch_delay=LAG)
SIM, SIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=3", "--name-prefix=fo-", "--cpu=2", expect=3)
LEASE_MS = 2000


def start_ctl(name, port, *roles):
    return services.start_controllers(name, port, PRIMARY, *roles, f"--lease-ms={LEASE_MS}", "--restart-backoff-ms=200")


def leads(log, role="placement"):
    return f'msg="{role}: leader"' in open(log).read()


def kill(p):
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)


RM, RM_LOG = start_ctl("rm", PORT, "--roles=resmgr", "--ready-timeout-ms=3000")
A, A_LOG = start_ctl("a", PROXY.port, "--roles=placement")
wait_until(lambda: leads(A_LOG), 15, "engine A to lead placement")
X, X_LOG = start_ctl("x", PROXY.port, "--roles=jobmgr,placement")
wait_until(lambda: leads(X_LOG, "jobmgr"), 15, "the job manager in X")
Y = Y_LOG = None


def pod(name, node):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"peloton.io/resource-pool": "fo"}},
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                     "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}


def pods(prefix):
    st, body = services.api(PORT, "GET", "/api/v1/namespaces/default/pods")
    assert st == 200, (st, body)
    return {p["metadata"]["name"]: p for p in body["items"] if p["metadata"]["name"].startswith(prefix)}


def cordon(node, on):
    st, body = services.api(PORT, "PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": on}},
                            ctype="application/merge-patch+json")
    assert st == 200, (st, body)


def test_setup():
    services.kubectl_apply(KUBECONFIG, [{"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool",
                                         "metadata": {"name": "fo"},
                                         "spec": {"resources": [{"kind": "cpu", "reservation": "2", "limit": "8",
                                                                 "share": 1}]}}])
    wait_until(lambda: PROXY.watches >= 4, 15, "the engines' watches through the proxy")
    time.sleep(LAG + 1)  # the pool and the nodes reach every copy


def test_the_next_engine_does_not_place_on_a_node_it_has_not_seen_cordoned():
    kill(A)  # no engine places now
    st, body = services.api(PORT, "POST", "/api/v1/namespaces/default/pods", pod("fo-late", "fo-2"))
    assert st >= 500 or st == 201, (st, body)  # stored either way (the replica acknowledges it)
    cordon("fo-2", True)
    t0 = time.monotonic()
    # X's term begins within a lease; its copy of the nodes (the job manager's
    # feed) shows the cordon LAG seconds after it was written
    wait_until(lambda: leads(X_LOG), 15, "engine X to take placement over")
    took = time.monotonic() - t0
    assert took < LAG - 1, f"the takeover ({took:.1f} s) must come well within the watch's lag ({LAG} s)"
    time.sleep(LAG + 2 - took)
    p = pods("fo-late")["fo-late"]
    assert not p["spec"].get("nodeName"), f"bound to the cordoned node {p['spec'].get('nodeName')}"
    line = [ln for ln in open(X_LOG) if "placement: caught up with the store as of the term's start" in ln]
    assert line and "relisted=1" in line[0], line or open(X_LOG).read()[-3000:]  # the nodes' feed, listed again
    print("  X:", line[0].strip())
    cordon("fo-2", False)
    wait_until(lambda: pods("fo-late")["fo-late"]["spec"].get("nodeName") == "fo-2", 30,
               "the pod bound once the node is schedulable again")


def test_the_next_engine_does_not_fill_a_node_its_predecessor_bound():
    global Y, Y_LOG
    Y, Y_LOG = start_ctl("y", PROXY.port, "--roles=placement")
    time.sleep(LAG + 1)  # Y's standby copy is of no use to it; its term lists again
    REPLICA.send_signal(signal.SIGSTOP)
    try:
        for i in range(4):
            st, body = services.api(PORT, "POST", "/api/v1/namespaces/default/pods", pod(f"fo-pod-{i}", "fo-0"))
            assert st >= 500, ("a write the replica cannot acknowledge is answered with an error", st, body)
        # X binds two (answered 500, stored) and counts the node full
        wait_until(lambda: sum(1 for p in pods("fo-pod-").values() if p["spec"].get("nodeName")) >= 2, 30,
                   "two pods bound")
        kill(X)
        wait_until(lambda: leads(Y_LOG), 15, "engine Y to take placement over")
        # Y places what the resource manager readies again (after 3 s) and
        # what waits for a retry; its watch shows X's bindings LAG s late
        time.sleep(LAG + 2)
        bound = sorted(n for n, p in pods("fo-pod-").items() if p["spec"].get("nodeName") == "fo-0")
    finally:
        REPLICA.send_signal(signal.SIGCONT)
    assert len(bound) == 2, f"{len(bound)} pods of 1 cpu bound to a node of 2 cpus: {bound}"
    wait_until(lambda: sum(1 for p in pods("fo-pod-").values() if p.get("status", {}).get("phase") == "Running") == 2,
               30, "the two bound pods running")
    time.sleep(2)
    now = pods("fo-pod-")
    assert sorted(n for n, p in now.items() if p["spec"].get("nodeName")) == bound, now.keys()
    for n, p in now.items():
        assert p.get("status", {}).get("reason") not in ("OutOfcpu", "OutOfpods"), (n, p["status"])


def test_clean_shutdown():
    services.stop(SIM)
    for p, log in ((Y, Y_LOG), (RM, RM_LOG)):
        if p:
            assert services.stop(p) == 0, open(log).read()[-3000:]
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    PROXY.stop()


run_tests("failover_bind", dict(globals()))
