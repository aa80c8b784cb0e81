#!/usr/bin/python3
"""End-to-end: the Scheduled Event of every pod the placement engine binds,
made by the API server with the binding (docs/metrics.md, "Events"), as
users see it. pelotond with every role on a real redis-server, kubelet-sim
with two nodes.

- A watch of /api/v1/events opened before the pods exist gets one ADDED
  Scheduled Event per pod, in kube-scheduler's words, each with its own name
  and a resourceVersion above the last (the same Events a list returns).
- `kubectl describe pod` and `kubectl get events` show it.
- pelotond --events=false (a second pelotond on its own redis) binds the
  pods and makes none."""
import http.client
import json
import re
import time

import services
from simlib import run_tests

STACK = services.start_stack("--roles=all", kubelet=["--nodes=2"])
PODS = "/api/v1/namespaces/default/pods"
N = 20


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "10m"}}}]}}


class Watch:
    """A watch stream read line by line, each read bounded by a timeout."""

    def __init__(self, port, path, timeout=10):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("GET", path)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status

    def next(self):
        line = self.resp.readline()
        return json.loads(line) if line else None

    def close(self):
        self.conn.close()


def test_one_scheduled_event_per_bound_pod_on_the_watch():
    rv = services.get(STACK.port, "/api/v1/events")["metadata"]["resourceVersion"]
    w = Watch(STACK.port, f"/api/v1/events?watch=true&resourceVersion={rv}")
    names = [f"ev-{i}" for i in range(N)]
    for n in names:
        st, body = services.api(STACK.port, "POST", PODS, pod(n))
        assert st == 201, (st, body)
    seen = {}
    last_rv = int(rv)
    deadline = time.monotonic() + 60
    try:
        while len(seen) < N and time.monotonic() < deadline:
            ev = w.next()
            assert ev is not None, seen
            o = ev["object"]
            if o.get("reason") != "Scheduled":
                continue
            assert ev["type"] == "ADDED", ev
            erv = int(o["metadata"]["resourceVersion"])
            assert erv > last_rv, (erv, last_rv)
            last_rv = erv
            io = o["involvedObject"]
            assert io["kind"] == "Pod" and io["apiVersion"] == "v1" and io["namespace"] == "default", o
            assert io["name"] not in seen, ("a second Scheduled Event", o, seen[io["name"]])
            seen[io["name"]] = o
    finally:
        w.close()
    assert sorted(seen) == sorted(names), sorted(seen)
    assert len({o["metadata"]["name"] for o in seen.values()}) == N
    for n, o in seen.items():
        p = services.get(STACK.port, f"{PODS}/{n}")
        assert o["involvedObject"]["uid"] == p["metadata"]["uid"], (o, p["metadata"])
        assert o["message"] == f"Successfully assigned default/{n} to {p['spec']['nodeName']}", o
        assert o["type"] == "Normal" and o["source"] == {"component": "peloton-placement"}, o
        assert o["count"] == 1 and o["firstTimestamp"] == o["lastTimestamp"], o
        assert o["metadata"]["name"].startswith(n + "."), o
    listed = {e["metadata"]["name"]: e for e in services.get(STACK.port, "/api/v1/events")["items"]}
    for o in seen.values():
        assert listed[o["metadata"]["name"]] == o, (o, listed.get(o["metadata"]["name"]))


def test_kubectl_shows_it():
    services.wait_until(lambda: services.get(STACK.port, f"{PODS}/ev-0")["spec"].get("nodeName"), what="ev-0 bound")
    out = services.kubectl(STACK.kubeconfig, "describe", "pod", "ev-0")
    assert re.search(r"Normal\s+Scheduled\s+.*peloton-placement\s+Successfully assigned default/ev-0 to sim-node-\d",
                     out), out
    out = services.kubectl(STACK.kubeconfig, "get", "events", "--field-selector", "involvedObject.name=ev-0")
    assert re.search(r"Normal\s+Scheduled\s+pod/ev-0\s+Successfully assigned default/ev-0 to sim-node-\d", out), out


def test_none_with_events_off():
    s = services.start_stack("--roles=all", "--events=false", kubelet=["--nodes=1"])
    st, body = services.api(s.port, "POST", PODS, pod("quiet"))
    assert st == 201, (st, body)
    services.wait_until(lambda: services.get(s.port, f"{PODS}/quiet")["spec"].get("nodeName"), what="quiet bound")
    time.sleep(0.5)  # an Event made with the binding would be stored by now
    evs = [e for e in services.get(s.port, "/api/v1/events")["items"] if e["reason"] == "Scheduled"]
    assert evs == [], evs


run_tests("test_events_scheduled", dict(globals()))
