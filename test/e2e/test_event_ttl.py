#!/usr/bin/python3
"""End-to-end: pelotond --event-ttl (docs/operations.md), kube-apiserver's
flag of that name: an Event is deleted once its last write is older than
the TTL, as kube-apiserver lets the Event's etcd lease expire.

Two API servers (pelotond --roles=apiserver --event-ttl=3s) share one
redis-server, a third with --event-ttl=0 has its own.

- Events past the TTL disappear from `kubectl get events` and the Python
  client's list; watchers on both API servers (kubectl get events -w, the
  Python client's watch) get each as DELETED once, with its last state and
  a resourceVersion above its own.
- The Scheduled Event the API server stores with a binding goes too.
- An Event written again within the TTL (its count bumped, as the
  recorders do) stays while one left alone beside it goes.
- Under churn (Events created without pause for longer than the TTL) their
  count stays bounded by the rate times the TTL and the sweeper's wait, and
  falls to none once the churn stops.
- One sweeper at a time: the two API servers' deletions add up to the
  Events deleted, and their metrics say so.
- --event-ttl=0 keeps Events; a bad value is refused at start.
- SIGTERM stops each pelotond cleanly (the sweeper's timer does not hold
  its loop)."""
import json
import os
import subprocess
import threading
import time
import urllib.request

from kubernetes import client, watch

import services
from simlib import run_tests

TTL = 3
REDIS = services.start_redis()
A_PROC, A_PORT, A_LOG = services.start_pelotond(REDIS, f"--event-ttl={TTL}s")
B_PROC, B_PORT, B_LOG = services.start_pelotond(REDIS, "--event-ttl=3000ms")
KEEP_REDIS = services.start_redis()
K_PROC, K_PORT, K_LOG = services.start_pelotond(KEEP_REDIS, "--event-ttl=0")
A_KUBECONFIG = services.kubeconfig(A_PORT)
B_KUBECONFIG = services.kubeconfig(B_PORT)
T0 = time.monotonic()
# what a test may wait for an Event past the TTL to go: the TTL, the mark's
# second and one more, the sweeper's wait between passes (1 s at this TTL),
# and room for a loaded machine
GONE_WITHIN = TTL + 2 + 1 + 10


def api_for(port):
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    return client.CoreV1Api(client.ApiClient(cfg))


A_API, B_API = api_for(A_PORT), api_for(B_PORT)


def event(ns, name, reason="Tested", count=1):
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name.split(".")[0], "namespace": ns},
            "reason": reason, "message": f"event {name}", "type": "Normal", "source": {"component": "ttl-test"},
            "firstTimestamp": now, "lastTimestamp": now, "count": count}


def create(port, ns, name, **kw):
    st, body = services.api(port, "POST", f"/api/v1/namespaces/{ns}/events", event(ns, name, **kw))
    assert st == 201, (st, body)
    return body


def names(port, ns="default"):
    return {e["metadata"]["name"] for e in services.get(port, f"/api/v1/namespaces/{ns}/events")["items"]}


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


# made first, checked last: by then it is far older than the TTL
KEPT = create(K_PORT, "default", "kept.1")


def test_events_past_the_ttl_go_and_watchers_see_deleted():
    rv = A_API.list_namespaced_event("default").metadata.resource_version
    mine = [f"old-{i}.1" for i in range(5)]
    seen = {"py-a": [], "py-b": []}

    def py_watch(api, key):
        for ev in watch.Watch().stream(api.list_namespaced_event, "default", resource_version=rv,
                                       timeout_seconds=GONE_WITHIN + 5):
            o = ev["object"]
            if o.metadata.name in mine:
                seen[key].append((ev["type"], o.metadata.name, int(o.metadata.resource_version)))
            if sum(1 for t, _, _ in seen[key] if t == "DELETED") == len(mine):
                return

    # kubectl get events -w on the other API server: a line per change, the
    # DELETED ones included (--output-watch-events: columns of the watch events); it is
    # watching once it printed an Event made after it started
    kw = subprocess.Popen(["kubectl", f"--kubeconfig={B_KUBECONFIG}", "get", "events", "-w",
                           "--output-watch-events", "-o",
                           "custom-columns=TYPE:.type,NAME:.object.metadata.name,RV:.object.metadata.resourceVersion"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    klines = []

    def read_kubectl():
        for ln in iter(kw.stdout.readline, ""):
            klines.append(ln)
    reader = threading.Thread(target=read_kubectl, daemon=True)
    reader.start()
    try:
        watch_and_expire(rv, mine, seen, py_watch, klines)
    finally:
        kw.kill()
        kw.wait(10)
    for n in mine:
        lines = [ln.split() for ln in klines if n in ln.split()]
        assert [ln[0] for ln in lines] == ["ADDED", "DELETED"], (n, klines)
        assert int(lines[1][2]) > int(lines[0][2]), lines


def watch_and_expire(rv, mine, seen, py_watch, klines):
    probe = 0

    def kubectl_watching():
        nonlocal probe
        probe += 1
        create(A_PORT, "default", f"probe-{probe}.1")
        time.sleep(0.2)
        return any(f"probe-{probe}.1" in ln for ln in list(klines))
    services.wait_until(kubectl_watching, timeout=20, what="kubectl get events -w", every=0.3)
    threads = [threading.Thread(target=py_watch, args=(A_API, "py-a"), daemon=True),
               threading.Thread(target=py_watch, args=(B_API, "py-b"), daemon=True)]
    for t in threads:
        t.start()
    first_create = time.monotonic()
    made = {n: create(A_PORT, "default", n) for n in mine}
    last_create = time.monotonic()
    assert set(mine) <= names(A_PORT) and set(mine) <= names(B_PORT)
    # never early: each was written after first_create, so all are there a
    # second before first_create + TTL (the second leaves the list time to answer)
    time.sleep(max(0.0, first_create + TTL - 1 - time.monotonic()))
    if time.monotonic() < first_create + TTL - 0.5:
        assert set(mine) <= names(A_PORT), "deleted before the TTL"
    services.wait_until(lambda: not set(mine) & names(A_PORT), timeout=GONE_WITHIN, what="the old Events to go")
    assert time.monotonic() - last_create >= TTL - 0.5
    for t in threads:
        t.join(GONE_WITHIN + 10)
    # kubectl and the Python client list them no more, on either server
    got = json.loads(services.kubectl(A_KUBECONFIG, "get", "events", "-o", "json"))["items"]
    assert not set(mine) & {e["metadata"]["name"] for e in got}, got
    assert not set(mine) & {e.metadata.name for e in B_API.list_namespaced_event("default").items}
    for key, evs in seen.items():
        for n in mine:
            mine_evs = [e for e in evs if e[1] == n]
            types = [e[0] for e in mine_evs]
            assert types == ["ADDED", "DELETED"], (key, n, evs)
            added_rv, deleted_rv = mine_evs[0][2], mine_evs[1][2]
            assert added_rv == int(made[n]["metadata"]["resourceVersion"]) and deleted_rv > added_rv, (key, mine_evs)
    services.wait_until(lambda: sum(1 for ln in list(klines) if ln.startswith("DELETED")
                                    and ln.split()[1] in mine) == len(mine), timeout=10,
                        what="kubectl to print the DELETED events")


def test_an_event_written_within_the_ttl_stays():
    create(A_PORT, "default", "busy.1")
    create(A_PORT, "default", "idle.1")
    path = "/api/v1/namespaces/default/events/busy.1"
    # bump busy's count every half second for twice the TTL, as a recorder
    # counts the same Event again
    end = time.monotonic() + 2 * TTL + 2
    count = 1
    while time.monotonic() < end:
        count += 1
        st, body = services.api(A_PORT, "PATCH", path, {"count": count,
                                                        "lastTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                       time.gmtime())},
                                ctype="application/merge-patch+json")
        assert st == 200, (st, body)
        time.sleep(0.5)
    assert "busy.1" in names(A_PORT) and "busy.1" in names(B_PORT)
    services.wait_until(lambda: "idle.1" not in names(A_PORT), timeout=GONE_WITHIN, what="the idle Event to go")
    # left alone, busy goes too
    services.wait_until(lambda: "busy.1" not in names(A_PORT), timeout=GONE_WITHIN, what="the busy Event to go")


def test_the_ttl_bounds_the_count_under_churn():
    ns = "churn"
    st, body = services.api(A_PORT, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                   "metadata": {"name": ns}})
    assert st == 201, (st, body)
    rate, seconds = 40, 4 * TTL + 4
    counts = []
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds:
        # alternate servers: both write, one sweeps
        create(A_PORT if i % 2 else B_PORT, ns, f"churn-{i}.1")
        i += 1
        if i % rate == 0:
            counts.append(len(names(A_PORT, ns)))
        time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
    made_per_s = i / (time.monotonic() - t0)
    # kept at most TTL + 1 (the mark's second) + 1 (the wait between passes)
    # + some slack, at the rate made
    bound = made_per_s * (TTL + 2 + 2)
    late = counts[len(counts) // 2:]
    assert max(late) <= bound, (counts, bound, made_per_s)
    assert max(late) < i / 2, (counts, i)  # far fewer than were made
    services.wait_until(lambda: not names(A_PORT, ns), timeout=GONE_WITHIN, what="every churned Event to go")


def test_the_scheduled_event_made_with_a_binding_goes_too():
    # the Event the API server stores in the binding's own script call
    # (docs/store.md, "Attached creates") carries its version like any other
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    st, body = services.api(A_PORT, "POST", "/api/v1/namespaces/default/pods", pod)
    assert st == 201, (st, body)
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound", "namespace": "default"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    st, body = services.api(A_PORT, "POST",
                            "/api/v1/namespaces/default/pods/bound/binding?scheduledEvent=peloton-placement", binding)
    assert st == 201, (st, body)

    def scheduled():
        return [e for e in services.get(A_PORT, "/api/v1/namespaces/default/events")["items"]
                if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "bound"]
    assert len(scheduled()) == 1, scheduled()
    services.wait_until(lambda: not scheduled(), timeout=GONE_WITHIN, what="the Scheduled Event to go")
    assert services.get(A_PORT, "/api/v1/namespaces/default/pods/bound")["spec"]["nodeName"] == "node-1"


def test_one_sweeper_and_its_metrics():
    a = metric(A_PORT, "peloton_apiserver_event_ttl_deleted_total") or 0
    b = metric(B_PORT, "peloton_apiserver_event_ttl_deleted_total") or 0
    skipped = (metric(A_PORT, "peloton_apiserver_event_ttl_skipped_total") or 0) + (
        metric(B_PORT, "peloton_apiserver_event_ttl_skipped_total") or 0)
    # every Event the tests above made went by the TTL (the first test's 5,
    # busy and idle, the churn's), each once: the two servers' deletions add
    # up to the DELETED events in the Events' history
    assert a + b >= 5 + 2, (a, b)
    assert (a == 0) != (b == 0), ("one sweeper at a time", a, b)
    assert skipped <= 2, skipped  # at most a bumped Event found between its scan and its delete
    scanned = (metric(A_PORT, "peloton_apiserver_event_ttl_scanned_total") or 0) + (
        metric(B_PORT, "peloton_apiserver_event_ttl_scanned_total") or 0)
    assert scanned >= a + b, (scanned, a, b)


def test_ttl_0_keeps_events_and_bad_values_are_refused():
    time.sleep(max(0.0, T0 + GONE_WITHIN - time.monotonic()))
    assert "kept.1" in names(K_PORT)
    assert metric(K_PORT, "peloton_apiserver_event_ttl_scanned_total") is None
    for bad in ("1d", "-1s", "soon", ""):
        r = subprocess.run([services.PELOTOND, f"--event-ttl={bad}", "--roles=apiserver", "--port=0",
                            f"--redis=127.0.0.1:{KEEP_REDIS}"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "--event-ttl takes a duration" in r.stderr, (bad, r.returncode, r.stderr)



def test_clean_shutdown():
    # the sweeper's handles must not keep the loop running after SIGTERM
    services.stop_clean(A_PROC, A_LOG)
    services.stop_clean(B_PROC, B_LOG)
    services.stop_clean(K_PROC, K_LOG)


run_tests("test_event_ttl", dict(globals()))
