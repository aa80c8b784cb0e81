#!/usr/bin/python3
"""End-to-end: a Lease renewal written as an edit of the Lease's stored
bytes (apiserver-shim/shim_lease.c, issue #25) is what a client sees from
the generic write: the reply, the resourceVersion bump, the watch events a
lease informer (the Python client's watch) and `kubectl get lease -w` get,
409 for a stale resourceVersion and 422 for bad input, also when another API
server sharing Redis wrote the Lease in between (the kept copy is stale).
Renewals by merge PATCH (kubelet-sim's) and by PUT of the Lease last got
back (a Kubelet's). That the renewal took the short way is read from
Redis's command counts:
one HGET a renewal (the script's), where the generic write reads the object
first (two)."""
import json
import os
import subprocess
import threading
import time

from kubernetes import client, watch

import services
from simlib import run_tests

NS = "kube-node-lease"
PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
MERGE = "application/merge-patch+json"

REDIS = services.start_redis()
PROC, PORT, _ = services.start_pelotond(REDIS)
KC = services.kubeconfig(PORT)
cfg = client.Configuration()
cfg.host = f"http://127.0.0.1:{PORT}"
COORD = client.CoordinationV1Api(client.ApiClient(cfg))
assert services.api(PORT, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})[0] in (201, 409)


def hgets():
    for line in services.redis_cmd(REDIS, "INFO", "commandstats").split("\n"):
        if line.startswith("cmdstat_hget:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def new_lease(name):
    st, obj = services.api(PORT, "POST", PATH, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": NS},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": "2026-11-27T00:00:00.000000Z"}})
    assert st == 201, obj
    return obj


def renew(port, name, t, rv=None, ctype=MERGE):
    body = {"spec": {"renewTime": t}}
    if rv:
        body["metadata"] = {"resourceVersion": rv}
    return services.api(port, "PATCH", f"{PATH}/{name}", body, ctype=ctype)


def stored(name):
    return json.loads(services.redis_cmd(REDIS, "HGET", "pc:obj:leases.coordination.k8s.io", f"o:{NS}/{name}"))


def test_renewals_seen_by_informer_and_kubectl_watch():
    new_lease("w1")
    events, stop = [], threading.Event()

    def informer():
        w = watch.Watch()
        for ev in w.stream(COORD.list_namespaced_lease, NS, timeout_seconds=60):
            o = ev["object"]
            events.append((ev["type"], o.metadata.name, o.metadata.resource_version,
                           o.spec.renew_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if o.spec.renew_time else None))
            if stop.is_set():
                w.stop()
    th = threading.Thread(target=informer, daemon=True)
    th.start()
    kw = subprocess.Popen(["kubectl", f"--kubeconfig={KC}", "get", "lease", "w1", "-n", NS, "-w",
                           "-o", "jsonpath={.metadata.resourceVersion} {.spec.renewTime}{\"\\n\"}"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    threading.Thread(target=lambda: [lines.append(x.strip()) for x in kw.stdout], daemon=True).start()
    services.wait_until(lambda: events and lines, 30, "the informer's and kubectl's first events")
    h0, replies = hgets(), []
    for i in range(1, 6):
        t = f"2026-11-27T00:00:0{i}.123456Z"
        st, obj = renew(PORT, "w1", t)
        assert st == 200, obj
        assert obj["spec"]["renewTime"] == t and obj["kind"] == "Lease", obj
        replies.append((obj["metadata"]["resourceVersion"], t))
    h1 = hgets()
    # the short way: the script's HGET alone, no read of the object before it
    assert h1 - h0 == 5, f"{h1 - h0} HGETs for 5 renewals: the generic write reads each Lease first"
    rvs = [int(rv) for rv, _ in replies]
    assert rvs == sorted(rvs) and len(set(rvs)) == 5, rvs
    got = stored("w1")
    assert got["metadata"]["resourceVersion"] == replies[-1][0] and got["metadata"]["generation"] == 6, got
    want = [("MODIFIED", "w1", rv, t) for rv, t in replies]
    services.wait_until(lambda: all(w in events for w in want), 30, "the informer to see every renewal")
    services.wait_until(lambda: all(f"{rv} {t}" in lines for rv, t in replies), 30,
                        f"kubectl get -w to print every renewal (it printed {lines})")
    stop.set()
    renew(PORT, "w1", "2026-11-27T00:00:09.000000Z")  # wakes the informer to stop
    th.join(30)
    kw.terminate()
    kw.wait(10)


def test_put_renewal_as_a_kubelet_does():
    """A Kubelet PUTs the Lease it last got back with renewTime moved: the
    short way too (one HGET), and a later PUT of that same old copy is 409."""
    new_lease("p1")
    lease = COORD.read_namespaced_lease("p1", NS)
    for i in range(1, 4):
        lease.spec.renew_time = f"2026-11-27T00:00:0{i}.250000Z"
        h0 = hgets()
        out = COORD.replace_namespaced_lease("p1", NS, lease)
        assert hgets() - h0 == 1, "a PUT renewal read the Lease first"
        assert int(out.metadata.resource_version) > int(lease.metadata.resource_version), out.metadata
        assert out.spec.renew_time.strftime("%S.%f") == f"0{i}.250000" and out.metadata.generation == 1 + i, out
        old, lease = lease, out
    try:
        COORD.replace_namespaced_lease("p1", NS, old)
        raise AssertionError("a PUT of an old copy was taken")
    except client.ApiException as e:
        assert e.status == 409 and json.loads(e.body)["reason"] == "Conflict", e.body
    got = stored("p1")
    assert got["metadata"]["resourceVersion"] == lease.metadata.resource_version, got
    assert got["spec"]["renewTime"] == "2026-11-27T00:00:03.250000Z", got


def test_stale_resource_version_409_and_current_200():
    obj = new_lease("c1")
    rv0 = obj["metadata"]["resourceVersion"]
    st, obj = renew(PORT, "c1", "2026-11-27T00:00:01.000000Z", rv=rv0)
    assert st == 200, obj
    st, err = renew(PORT, "c1", "2026-11-27T00:00:02.000000Z", rv=rv0)
    assert st == 409 and err["kind"] == "Status" and err["reason"] == "Conflict" and err["code"] == 409, err
    assert "the object has been modified" in err["message"], err
    # PUT with the stale version, from the Python client and kubectl
    lease = COORD.read_namespaced_lease("c1", NS)
    lease.metadata.resource_version = rv0
    try:
        COORD.replace_namespaced_lease("c1", NS, lease)
        raise AssertionError("a PUT with a stale resourceVersion was taken")
    except client.ApiException as e:
        assert e.status == 409 and json.loads(e.body)["reason"] == "Conflict", e.body
    doc = json.loads(services.kubectl(KC, "get", "lease", "c1", "-n", NS, "-o", "json"))
    doc["metadata"]["resourceVersion"] = rv0
    rc, out = services.kubectl_rc(KC, "replace", "-f", "-", stdin=json.dumps(doc))
    assert rc != 0 and "the object has been modified" in out, out


def test_bad_input_422():
    new_lease("b1")
    cases = [{"metadata": {"labels": {"-bad key": "x"}}, "spec": {"renewTime": "2026-11-27T00:00:03.000000Z"}},
             {"metadata": {"name": "other"}, "spec": {"renewTime": "2026-11-27T00:00:04.000000Z"}}]
    for body in cases:
        st, err = services.api(PORT, "PATCH", f"{PATH}/b1", body, ctype=MERGE)
        assert st == 422 and err["kind"] == "Status" and err["reason"] == "Invalid" and err["code"] == 422, err
    try:
        COORD.patch_namespaced_lease("b1", NS, cases[0])
        raise AssertionError("a patch with an invalid label was taken")
    except client.ApiException as e:
        assert e.status == 422 and json.loads(e.body)["reason"] == "Invalid", e.body
    rc, out = services.kubectl_rc(KC, "patch", "lease", "b1", "-n", NS, "--type=merge", "-p",
                                  json.dumps(cases[0]))
    assert rc != 0 and "is invalid" in out, out
    # and a renewal through the Python client is taken (merge or strategic, both short)
    h0 = hgets()
    out = COORD.patch_namespaced_lease("b1", NS, {"spec": {"renewTime": "2026-11-27T00:00:05.000000Z"}})
    assert out.spec.renew_time.strftime("%S.%f") == "05.000000", out.spec
    assert hgets() - h0 == 1


def test_written_by_another_server_in_between():
    """A second API server on the same Redis changes the Lease: the first
    one's copy is stale. A renewal naming no version is applied over the
    other server's change (read again, the generic way); one naming the
    version the first server last wrote is stale: 409."""
    obj = new_lease("s1")
    st, obj = renew(PORT, "s1", "2026-11-27T00:00:01.000000Z")
    assert st == 200, obj
    mine = obj["metadata"]["resourceVersion"]
    _, port2, _ = services.start_pelotond(REDIS)
    st, other = services.api(port2, "PATCH", f"{PATH}/s1", {"spec": {"holderIdentity": "someone-else"}}, ctype=MERGE)
    assert st == 200, other
    st, err = renew(PORT, "s1", "2026-11-27T00:00:02.000000Z", rv=mine)
    assert st == 409 and err["reason"] == "Conflict", err
    st, obj = renew(PORT, "s1", "2026-11-27T00:00:03.000000Z")
    assert st == 200, obj
    assert obj["spec"]["holderIdentity"] == "someone-else" and obj["spec"]["renewTime"] == "2026-11-27T00:00:03.000000Z"
    assert int(obj["metadata"]["resourceVersion"]) > int(other["metadata"]["resourceVersion"]), (obj, other)
    assert stored("s1") == obj
    # the copy is current again: the next renewal takes the short way
    h0 = hgets()
    st, obj = renew(PORT, "s1", "2026-11-27T00:00:04.000000Z")
    assert st == 200 and hgets() - h0 == 1, obj
    # deleted by the other server: 404, as from the generic path
    assert services.api(port2, "DELETE", f"{PATH}/s1")[0] == 200
    st, err = renew(PORT, "s1", "2026-11-27T00:00:05.000000Z")
    assert st == 404 and err["reason"] == "NotFound", err


def test_big_lease_stays_packed_when_renewed():
    """A Lease large enough to be stored packed (docs/store.md, "Packed
    objects": a long holderIdentity here, as labels and annotations send a
    renewal the generic way) is packed again when renewed the short way, and
    reads back whole."""
    holder = "node-holder-" + "ab12" * 150
    st, obj = services.api(PORT, "POST", PATH, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "big1", "namespace": NS},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 40, "renewTime": "2026-11-27T00:00:00.000000Z"}})
    assert st == 201, obj

    def raw():
        return services.redis_cmd(REDIS, "HGET", "pc:obj:leases.coordination.k8s.io", f"o:{NS}/big1")
    assert raw()[:1] == "\x01", raw()[:40]
    before = hgets()
    for i in range(3):
        t = f"2026-11-27T00:00:0{i + 1}.000000Z"
        st, got = renew(PORT, "big1", t)
        assert st == 200 and got["spec"]["renewTime"] == t, (st, got)
    assert hgets() - before == 3, f"renewed the short way: one HGET each, not {hgets() - before} for 3"
    assert raw()[:1] == "\x01", raw()[:40]
    st, got = services.api(PORT, "GET", f"{PATH}/big1")
    assert st == 200 and got["spec"]["renewTime"] == "2026-11-27T00:00:03.000000Z", got
    assert got["spec"]["holderIdentity"] == holder and got["metadata"]["generation"] == 4, got

try:
    run_tests("test_lease_renew", globals())
finally:
    services.stop_all()
