# run.sh: alone (it bounds wall-clock times)
"""End-to-end: deleting a namespace as kube-apiserver does it. The DELETE
answers at once with the namespace Terminating; creates in it are refused
(403, NamespaceTerminating); its contents go in bounded batches while the
server keeps answering (before, deleting a namespace holding 80 MB of
configmaps held the loop for 4.2 s); then the namespace goes. kubectl's
delete waits for it; a restart in the middle takes the work up again; the
cluster's own namespaces cannot be deleted."""
import subprocess
import time
import urllib.request

import services
from simlib import run_tests

REDIS = services.start_redis(fsync="everysec")
PROC, PORT, LOG = services.start_pelotond(REDIS)
KUBECONFIG = services.kubeconfig(PORT)


def call(method, path, body=None, port=None):
    return services.api(port or PORT, method, path, body)


def fill(ns, n, size, port=None):
    assert call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, port)[0] == 201
    for i in range(n):
        st, _ = call("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": f"c{i}"},
                                                                      "data": {"k": "x" * size}}, port)
        assert st == 201, st


def gone(ns, port=None):
    return call("GET", f"/api/v1/namespaces/{ns}", port=port)[0] == 404


def test_delete_answers_at_once_refuses_creates_and_empties_in_batches():
    fill("big", 1500, 20000)  # 30 MB
    t0 = time.monotonic()
    st, ns = call("DELETE", "/api/v1/namespaces/big")
    took = time.monotonic() - t0
    assert st == 200 and ns["status"]["phase"] == "Terminating" and ns["metadata"].get("deletionTimestamp"), ns
    assert took < 1.0, took
    # the server answers between batches while the namespace empties
    worst = 0.0
    while not gone("big"):
        t = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=5) as r:
            assert r.read() == b"ok"
        worst = max(worst, time.monotonic() - t)
        assert time.monotonic() - t0 < 120, "namespace never went"
    assert worst < 0.25, f"/healthz waited {worst:.3f} s"  # 24 ms here alone (ASan); 4.2 s before
    assert call("GET", "/api/v1/namespaces/big/configmaps")[1]["items"] == []
    # the name can be used again, and creates in it work
    fill("big", 1, 10)


def test_creates_are_refused_while_terminating_and_finalizers_hold_it():
    fill("held", 3, 100)
    st, _ = call("POST", "/api/v1/namespaces/held/configmaps",
                 {"metadata": {"name": "keep", "finalizers": ["example.com/hold"]}})
    assert st == 201
    assert call("DELETE", "/api/v1/namespaces/held")[0] == 200
    services.wait_until(lambda: len(call("GET", "/api/v1/namespaces/held/configmaps")[1]["items"]) == 1, 30,
                        "all but the held object to go")
    st, b = call("POST", "/api/v1/namespaces/held/configmaps", {"metadata": {"name": "late"}})
    assert st == 403 and b["reason"] == "Forbidden" and "being terminated" in b["message"], b
    assert b["details"]["causes"][0]["reason"] == "NamespaceTerminating", b
    time.sleep(1.5)  # held by the object's finalizer, the namespace stays, Terminating
    st, ns = call("GET", "/api/v1/namespaces/held")
    assert st == 200 and ns["status"]["phase"] == "Terminating", ns
    keep = call("GET", "/api/v1/namespaces/held/configmaps/keep")[1]
    assert keep["metadata"].get("deletionTimestamp"), keep
    st, _ = services.api(PORT, "PATCH", "/api/v1/namespaces/held/configmaps/keep", {"metadata": {"finalizers": None}},
                         ctype="application/merge-patch+json")
    assert st == 200
    services.wait_until(lambda: gone("held"), 30, "the namespace to go once its last object went")


def test_kubectl_delete_waits_for_the_namespace():
    fill("team", 50, 100)
    p = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", "delete", "ns", "team"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and 'namespace "team" deleted' in p.stdout, (p.stdout, p.stderr)
    assert gone("team")


def test_the_clusters_own_namespaces_stay():
    for ns in ("default", "kube-system", "kube-public"):
        st, b = call("DELETE", f"/api/v1/namespaces/{ns}")
        assert st == 403 and "may not be deleted" in b["message"], b
        assert not gone(ns)


def test_a_restart_takes_the_work_up_again():
    global PROC, PORT
    fill("halfway", 800, 20000)
    st, _ = call("DELETE", "/api/v1/namespaces/halfway")
    assert st == 200
    PROC.kill()  # in the middle of emptying it
    PROC.wait(10)
    PROC, PORT, _ = services.start_pelotond(REDIS)
    services.wait_until(lambda: gone("halfway"), 120, "the namespace to go after a restart")
    assert call("GET", "/api/v1/namespaces/halfway/configmaps")[1]["items"] == []


run_tests("shim-nsdelete", dict(globals()))
