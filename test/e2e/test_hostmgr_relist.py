#!/usr/bin/python3
"""End-to-end: the host manager judges nodes only from fresh information
(docs/lifecycle.md, "When a node is lost"). The API server (pelotond
--roles=apiserver) and the host manager (pelotond --roles=hostmgr, a client of
it; mass events off, so that they do not hide anything) run as two processes
with kubelet-sim serving 3 nodes, a bound pod on each.
- The API server is killed for longer than a lease and started again on the
  same port and Redis: the host manager's lease informer re-lists meanwhile and
  its frozen cache shows every lease lapsed, but it declares no node down and
  deletes no pod; the kubelets renew as soon as the server is back.
- The API server is stopped (SIGSTOP) for longer than a lease, its connections
  open: the lease watch is silent, the direct read of a lease answers only when
  the server resumes, too late to be evidence; nothing is lost either.
Every wait is bounded; every process is stopped."""
import os
import signal
import subprocess
import time

from kubernetes import client

import services
from simlib import run_tests

REDIS = services.start_redis()
APORT = services.free_port()
API_PROC, PORT, API_LOG = services.start_pelotond(REDIS, "--roles=apiserver", f"--port={APORT}")
assert PORT == APORT
KUBECONFIG = services.kubeconfig(PORT)
cfg = client.Configuration()
cfg.host = f"http://127.0.0.1:{PORT}"
API = client.CoreV1Api(client.ApiClient(cfg))
wait_until = services.wait_until


def start_hostmgr():
    d = services.tempdir()
    log = os.path.join(d, "hostmgr.log")
    p = subprocess.Popen([services.PELOTOND, "--roles=hostmgr", f"--server=http://127.0.0.1:{PORT}",
                          f"--redis=127.0.0.1:{REDIS}",  # its lease
                          "--metrics-port=0", f"--port-file={os.path.join(d, 'port')}",
                          "--hostmgr-mass-min-nodes=100"],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT)
    services._procs.append(p)
    wait_until(lambda: "hostmgr: started" in open(log).read() or p.poll() is not None, 15, "hostmgr to start")
    assert p.poll() is None, open(log).read()
    return p, log


HM, HM_LOG = start_hostmgr()
SIM, SIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=3", "--name-prefix=rl-", "--lease-seconds=3",
                                          "--renew-seconds=1", "--status-seconds=1", expect=3)
NODES = []


def pods():
    return sorted(p.metadata.name for p in API.list_namespaced_pod("default").items)


def test_pods_run():
    NODES.extend(sorted(n.metadata.name for n in API.list_node().items))
    assert len(NODES) == 3, NODES
    for i, n in enumerate(NODES):
        API.create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"rp-{i}"},
            "spec": {"schedulerName": "hostmgr-test", "containers": [{"name": "main", "image": "busybox"}]}})
        API.create_namespaced_pod_binding(f"rp-{i}", "default", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"rp-{i}"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": n}}, _preload_content=False)
    wait_until(lambda: all(p.status.phase == "Running" for p in API.list_namespaced_pod("default").items)
               and len(pods()) == 3, what="every pod Running")
    time.sleep(2)  # the host manager has judged them all up
    assert "node down" not in open(HM_LOG).read()


def test_api_server_restart_loses_nothing():
    global API_PROC
    API_PROC.send_signal(signal.SIGKILL)
    API_PROC.wait(10)
    time.sleep(5)  # longer than the 3 s leases: the host manager's cache shows them lapsed
    API_PROC, port, _ = services.start_pelotond(REDIS, "--roles=apiserver", f"--port={APORT}")
    assert port == APORT
    # the informers re-list within their 5 s backoff, then the leases get one more period (3 s) before any node
    # is judged: watched from when the host manager says its informers are current again (at most about 5.5 s
    # after the restart, by the backoff's steps) to two seconds past that period, no longer a fixed 10 s
    wait_until(lambda: "informers current again" in open(HM_LOG).read(), 15,
               "the host manager's informers current again")
    time.sleep(3 + 2)
    log = open(HM_LOG).read()
    assert "node down" not in log, log[-3000:]
    assert "pod lost" not in log, log[-3000:]
    assert pods() == ["rp-0", "rp-1", "rp-2"]
    assert "informers current again" in log, log[-3000:]
    assert not [e for e in API.list_namespaced_event("default").items if e.reason == "NodeLost"]
    for n in NODES:
        assert not any(t.key == "node.kubernetes.io/unreachable" for t in API.read_node(n).spec.taints or []), n


def test_api_server_stall_loses_nothing():
    API_PROC.send_signal(signal.SIGSTOP)
    try:
        time.sleep(7)  # the 3 s leases lapse in every view; kubelet-sim's renewals wait with the rest
    finally:
        API_PROC.send_signal(signal.SIGCONT)
    time.sleep(6)  # the kubelets renew; more than a lease period
    log = open(HM_LOG).read()
    assert "node down" not in log, log[-3000:]
    assert "pod lost" not in log, log[-3000:]
    assert pods() == ["rp-0", "rp-1", "rp-2"]
    assert not [e for e in API.list_namespaced_event("default").items if e.reason == "NodeLost"]


def test_stop_cleanly():
    assert services.stop(SIM) == 0, open(SIM_ERR).read()[-3000:]
    assert services.stop(HM) == 0, open(HM_LOG).read()[-3000:]
    assert services.stop(API_PROC) == 0


def dump_logs():
    for what, path in (("hostmgr", HM_LOG), ("kubelet-sim", SIM_ERR)):
        try:
            print(f"--- {what} log (tail)\n" + open(path).read()[-4000:])
        except OSError:
            pass


try:
    run_tests("test_hostmgr_relist", dict(globals()))
except SystemExit as e:
    if e.code or os.environ.get("KEEP_LOGS"):
        dump_logs()
    raise
finally:
    services.stop_all()
