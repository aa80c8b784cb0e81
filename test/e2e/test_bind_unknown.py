#!/usr/bin/python3
"""End-to-end: a Binding whose outcome is unknown is not taken back blindly
(docs/placement.md, "Bindings whose answer is lost").

A write can be stored and still answered with an error: the API server here
runs with --redis-wait-replicas=1 and its replica is paused (SIGSTOP), so
every write lands on the primary and is answered 500 once WAIT times out (as
when a connection to Redis is lost after the script ran). The controllers
(resmgr, placement) reach the API server through a proxy that holds back
their watches by 3 s, so their copy of the pods lags what is
stored. Two nodes of 2 cpus (kubelet-sim), four pods of 1 cpu that may run
on the first node only (a nodeSelector; the second node's room lets the
resource manager admit all four):
- the placement engine binds two of them; both Bindings are stored and
  answered 500. Taking them back at once (the old behaviour) freed the node
  in the engine's copy while the pods were bound, and the two others were
  bound onto it too: 4 cpus on a node of 2. The engine now reads the pod
  before it gives the room back: the node stays full, and the two others
  wait, unbound;
- once the replica runs again, the two bound pods run and the others are
  still pending with no node.
Every wait is bounded; every process is stopped."""
import os
import signal
import subprocess
import time

import netproxy
import redis_ha
import services
from simlib import run_tests

wait_until = services.wait_until

PRIMARY, REPLICA, REPLICA_PORT = redis_ha.start_with_replica()
PROC, PORT, LOG = services.start_pelotond(PRIMARY, "--redis-wait-replicas=1", "--redis-wait-timeout-ms=300")
KUBECONFIG = services.kubeconfig(PORT)
LAG = 3.0  # seconds the controllers' watches are held back
PROXY = netproxy.Proxy(PORT, watch_delay=LAG)
SIM, SIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=2", "--name-prefix=bu-", "--cpu=2", expect=2)
NODE = "bu-0"


def start_controllers():
    d = services.tempdir()
    log = os.path.join(d, "ctl.log")
    p = subprocess.Popen([services.PELOTOND, "--roles=resmgr,placement", f"--server=http://127.0.0.1:{PROXY.port}",
                          f"--redis=127.0.0.1:{PRIMARY}", "--restart-backoff-ms=200"],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT)
    services._procs.append(p)
    wait_until(lambda: "controllers running" in open(log).read() or p.poll() is not None, 20, "controllers to start")
    assert p.poll() is None, open(log).read()[-3000:]
    return p, log


CTL, CTL_LOG = start_controllers()


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"peloton.io/resource-pool": "bu"}},
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": NODE},
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}


def pods():
    st, body = services.api(PORT, "GET", "/api/v1/namespaces/default/pods")
    assert st == 200, (st, body)
    return {p["metadata"]["name"]: p for p in body["items"] if p["metadata"]["name"].startswith("bu-pod-")}


def test_a_binding_answered_500_but_stored_keeps_its_room():
    services.kubectl_apply(KUBECONFIG, [{"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool",
                                         "metadata": {"name": "bu"},
                                         "spec": {"resources": [{"kind": "cpu", "reservation": "2", "limit": "8",
                                                                 "share": 1}]}}])
    wait_until(lambda: PROXY.watches > 0, 15, "the controllers' watches through the proxy")
    time.sleep(LAG + 1)  # the pool and the nodes reach the controllers' copies
    REPLICA.send_signal(signal.SIGSTOP)
    try:
        for i in range(4):
            st, body = services.api(PORT, "POST", "/api/v1/namespaces/default/pods", pod(f"bu-pod-{i}"))
            assert st >= 500, ("a write the replica cannot acknowledge is answered with an error", st, body)
        assert len(pods()) == 4, "the pods are stored on the primary all the same"
        # the engine binds two; their answers are 500 (stored all the same), and
        # the engine's copy hears of the bindings only LAG seconds later
        wait_until(lambda: sum(1 for p in pods().values() if p["spec"].get("nodeName")) >= 2, 20, "two pods bound")
        time.sleep(LAG + 2)  # the engine's retries of the two others (100 ms and up) within the lag and after it
        bound = sorted(n for n, p in pods().items() if p["spec"].get("nodeName") == NODE)
    finally:
        REPLICA.send_signal(signal.SIGCONT)
    assert len(bound) == 2, f"{len(bound)} pods of 1 cpu bound to a node of 2 cpus: {bound}"
    assert "bind outcome unknown" in open(CTL_LOG).read(), "the engine said why it read the pods"
    wait_until(lambda: sum(1 for p in pods().values() if p.get("status", {}).get("phase") == "Running") == 2, 30,
               "the two bound pods running")
    time.sleep(2)
    now = pods()
    assert sorted(n for n, p in now.items() if p["spec"].get("nodeName")) == bound, now.keys()
    for n, p in now.items():
        assert p.get("status", {}).get("reason") not in ("OutOfcpu", "OutOfpods"), (n, p["status"])


def test_clean_shutdown():
    services.stop(SIM)
    assert services.stop(CTL) == 0, open(CTL_LOG).read()[-3000:]
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    PROXY.stop()


run_tests("bind_unknown", dict(globals()))
