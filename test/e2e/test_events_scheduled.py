#!/usr/bin/python3
"""End-to-end: the Scheduled Event of every pod the placement engine binds,
made by the API server with the binding (docs/metrics.md, "Events"), as
users see it. pelotond with every role on a real redis-server, kubelet-sim
with two nodes.

- A watch of /api/v1/events opened before the pods exist gets one ADDED
  Scheduled Event per pod, in kube-scheduler's words, each with its own name
  and a resourceVersion above the last (the same Events a list returns).
- The Event is stored with the binding, in one script call: a watch of pods
  sees the binding's MODIFIED at the version just before the Event's.
- `kubectl describe pod` and `kubectl get events` show it.
- pelotond --events=false (a second pelotond on its own redis) binds the
  pods and makes none.
- Placement talking to an API server that does not make the Event (a
  proxy takes the query parameter off its Bindings) posts it itself: still
  one Event a pod."""
import http.client
import json
import os
import re
import socket
import subprocess
import threading
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


def test_event_and_binding_on_the_watches_together():
    """The Event is stored in the binding's own write: on a watch of pods and
    one of events opened at the same resourceVersion, each pod's Scheduled
    Event comes at the version right after the MODIFIED that bound it."""
    rv = services.get(STACK.port, "/api/v1/events")["metadata"]["resourceVersion"]
    we = Watch(STACK.port, f"/api/v1/events?watch=true&resourceVersion={rv}")
    wp = Watch(STACK.port, f"{PODS}?watch=true&resourceVersion={rv}")
    names = [f"wt-{i}" for i in range(N)]
    for n in names:
        st, body = services.api(STACK.port, "POST", PODS, pod(n))
        assert st == 201, (st, body)
    events, bound = {}, {}  # pod name -> the Event's version; -> the version that bound it
    deadline = time.monotonic() + 60
    try:
        while len(events) < N and time.monotonic() < deadline:
            ev = we.next()
            assert ev is not None, events
            o = ev["object"]
            if o.get("reason") == "Scheduled" and o["involvedObject"]["name"] in names:
                events[o["involvedObject"]["name"]] = int(o["metadata"]["resourceVersion"])
        while len(bound) < N and time.monotonic() < deadline:
            ev = wp.next()
            assert ev is not None, bound
            o = ev["object"]
            n = o["metadata"]["name"]
            if ev["type"] == "MODIFIED" and n in names and n not in bound and o["spec"].get("nodeName"):
                bound[n] = int(o["metadata"]["resourceVersion"])
    finally:
        we.close()
        wp.close()
    assert sorted(events) == sorted(names) and sorted(bound) == sorted(names), (events, bound)
    for n in names:
        assert events[n] == bound[n] + 1, (n, events[n], bound[n])


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


def strip_proxy(upstream, needle):
    """A loopback TCP proxy to upstream that removes the bytes needle from
    what clients send (a request line's query parameter) and passes
    everything else through: its port. Daemon threads, gone with the test."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)

    def pipe(src, dst, strip):
        keep = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if strip:  # the needle may straddle two reads: hold back an end that begins it
                    data = (keep + data).replace(needle, b"")
                    held = next((k for k in range(min(len(needle) - 1, len(data)), 0, -1)
                                 if needle.startswith(data[-k:])), 0)
                    data, keep = data[:len(data) - held], data[len(data) - held:]
                dst.sendall(data)
            if keep:
                dst.sendall(keep)
        except OSError:
            pass
        finally:
            for sck in (src, dst):
                try:
                    sck.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve():
        while True:
            c, _ = lsock.accept()
            u = socket.create_connection(("127.0.0.1", upstream))
            threading.Thread(target=pipe, args=(c, u, True), daemon=True).start()
            threading.Thread(target=pipe, args=(u, c, False), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return lsock.getsockname()[1]


def test_placement_posts_it_when_the_server_does_not():
    redis = services.start_redis()
    _, port, _ = services.start_pelotond(redis, "--roles=apiserver")
    proxy = strip_proxy(port, b"?scheduledEvent=peloton-placement")
    d = services.tempdir()
    port_file = os.path.join(d, "port")
    ctl = subprocess.Popen([services.PELOTOND, "--roles=resmgr,placement,jobmgr,hostmgr",
                            f"--server=http://127.0.0.1:{proxy}", f"--redis=127.0.0.1:{redis}", "--leader-elect=false",
                            "--metrics-port=0", f"--port-file={port_file}"],
                           stdout=open(os.path.join(d, "ctl.log"), "w"), stderr=subprocess.STDOUT)
    services._procs.append(ctl)
    services.wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip() != "", what="controllers")
    services.start_kubelet_sim(services.kubeconfig(port), "--nodes=1", expect=1)
    names = [f"px-{i}" for i in range(5)]
    for n in names:
        st, body = services.api(port, "POST", PODS, pod(n))
        assert st == 201, (st, body)

    def scheduled():
        return [e for e in services.get(port, "/api/v1/events")["items"] if e["reason"] == "Scheduled"]
    try:
        services.wait_until(lambda: len(scheduled()) >= len(names), 60, "a Scheduled Event for every pod")
    except AssertionError:
        bound = {n: services.get(port, f"{PODS}/{n}")["spec"].get("nodeName") for n in names}
        raise AssertionError((bound, scheduled(), open(os.path.join(d, "ctl.log")).read()[-3000:]))
    time.sleep(0.5)  # a second Event, were there one, would be stored by now
    evs = scheduled()
    assert sorted(e["involvedObject"]["name"] for e in evs) == names, evs
    for e in evs:
        n = e["involvedObject"]["name"]
        p = services.get(port, f"{PODS}/{n}")
        assert e["message"] == f"Successfully assigned default/{n} to {p['spec']['nodeName']}", e
        assert e["source"] == {"component": "peloton-placement"} and e["count"] == 1, e
        assert e["involvedObject"]["uid"] == p["metadata"]["uid"], (e, p["metadata"])


run_tests("test_events_scheduled", dict(globals()))
