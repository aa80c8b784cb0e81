"""End-to-end: watch on pelotond's apiserver role (real redis-server), by raw
HTTP streaming and by `kubectl get -w`."""
import http.client
import json
import subprocess
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--history-max=40", "--watch-bookmark-ms=200")
KUBECONFIG = services.kubeconfig(PORT)
NS = "/api/v1/namespaces/default/configmaps"


def call_at(port, method, path, body=None, ctype="application/json"):
    """One request to the API server on port: (status, decoded body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": ctype} if body is not None else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data or b"null")


def call(method, path, body=None, ctype="application/json"):
    return call_at(PORT, method, path, body, ctype)


class Watch:
    """A watch stream read line by line, each read bounded by a timeout."""

    def __init__(self, path, timeout=5):
        self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
        self.conn.request("GET", path)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status

    def next(self):
        line = self.resp.readline()
        return json.loads(line) if line else None

    def until(self, pred, limit=200):
        for _ in range(limit):
            ev = self.next()
            if ev is None or pred(ev):
                return ev
        return None

    def close(self):
        self.conn.close()


def cm(name, labels=None, data=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data or {}}


def test_initial_events_then_changes_in_order():
    assert call("POST", NS, cm("pre-1"))[0] == 201
    w = Watch(NS + "?watch=true")
    ev = w.until(lambda e: e["object"]["metadata"]["name"] == "pre-1")
    assert ev and ev["type"] == "ADDED" and ev["object"]["kind"] == "ConfigMap"
    t0 = time.monotonic()
    st, made = call("POST", NS, cm("w-1", data={"v": "1"}))
    assert st == 201
    made["data"] = {"v": "2"}
    assert call("PUT", NS + "/w-1", made)[0] == 200
    assert call("DELETE", NS + "/w-1")[0] == 200
    seen = []
    while len(seen) < 3:
        ev = w.next()
        assert ev is not None, seen
        if ev["object"]["metadata"]["name"] == "w-1":
            seen.append((ev["type"], ev["object"].get("data", {}).get("v")))
    assert seen == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")], seen
    assert time.monotonic() - t0 < 3
    w.close()


def test_resume_from_resource_version_and_selectors():
    st, a = call("POST", NS, cm("r-1", {"app": "web"}))
    rv = a["metadata"]["resourceVersion"]
    call("POST", NS, cm("r-2", {"app": "db"}))
    call("POST", NS, cm("r-3", {"app": "web"}))
    w = Watch(NS + f"?watch=true&resourceVersion={rv}&labelSelector=app%3Dweb")
    ev = w.next()
    assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "r-3", ev  # after rv, matching only
    call("POST", NS, cm("r-4", {"app": "db"}))
    call("POST", NS, cm("r-5", {"app": "web"}))
    ev = w.until(lambda e: e["type"] != "BOOKMARK")
    assert ev["object"]["metadata"]["name"] == "r-5", ev
    w.close()


def test_timeout_seconds_ends_the_stream():
    t0 = time.monotonic()
    w = Watch(NS + "?watch=1&timeoutSeconds=1&resourceVersion=" + str(current_rv()))
    while w.next() is not None:
        pass
    assert 0.8 < time.monotonic() - t0 < 4
    w.close()


def current_rv():
    return int(call("GET", NS)[1]["metadata"]["resourceVersion"])


def test_bookmarks():
    w = Watch(NS + f"?watch=true&allowWatchBookmarks=true&resourceVersion={current_rv()}")
    ev = w.until(lambda e: e["type"] == "BOOKMARK")
    assert ev and int(ev["object"]["metadata"]["resourceVersion"]) > 0 and ev["object"]["kind"] == "ConfigMap"
    w.close()


def test_expired_resource_version_gets_410():
    for i in range(60):  # the history keeps about 40 events
        call("POST", NS, cm(f"fill-{i}"))
    w = Watch(NS + "?watch=true&resourceVersion=1")
    ev = w.next()
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired", ev
    assert "too old resource version" in ev["object"]["message"]
    assert w.next() is None  # and the stream ends
    w.close()


def test_fan_out_to_many_watchers():
    rv = current_rv()
    ws = [Watch(NS + f"?watch=true&resourceVersion={rv}") for _ in range(50)]
    assert call("POST", NS, cm("fan"))[0] == 201
    for w in ws:
        ev = w.until(lambda e: e["type"] != "BOOKMARK")
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "fan", ev
        w.close()


def test_kubectl_get_watch():
    p = subprocess.Popen(["kubectl", f"--kubeconfig={KUBECONFIG}", "get", "configmaps", "-n", "default", "-w",
                          "--output-watch-events"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        time.sleep(1.0)  # kubectl lists, then watches
        st, made = call("POST", NS, cm("kw"))
        made["data"] = {"x": "y"}
        call("PUT", NS + "/kw", made)
        call("DELETE", NS + "/kw")
        time.sleep(1.0)
    finally:
        p.terminate()
        out, err = p.communicate(timeout=10)
    # table rows: EVENT NAME DATA AGE
    lines = [l.split() for l in out.splitlines() if len(l.split()) > 1 and l.split()[1] == "kw"]
    assert [l[0] for l in lines] == ["ADDED", "MODIFIED", "DELETED"], (out, err)


def test_watch_over_websocket():
    from wsclient import WebSocket
    w = WebSocket(PORT, NS + f"?watch=true&resourceVersion={current_rv()}&labelSelector=ws%3Dyes")
    assert w.status == 101, w.status_line
    call("POST", NS, cm("ws-no", {"ws": "no"}))
    call("POST", NS, cm("ws-yes", {"ws": "yes"}))
    ev = json.loads(w.message())  # one event per text message
    assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "ws-yes", ev
    w.close()
    bad = WebSocket(PORT, "/api/v1/namespaces/default/widgets?watch=true")
    st = json.loads(bad.message())
    assert bad.status == 101 and st["kind"] == "Status" and st["code"] == 404, st
    assert bad.message() is None  # then closed
    bad.close()


def test_watch_errors():
    st, b = call("GET", NS + "?watch=true&resourceVersion=abc")
    assert st == 400 and b["reason"] == "BadRequest", b
    st, b = call("GET", NS + "?watch=true&sendInitialEvents=true")
    assert st == 422, b
    st, b = call("GET", NS + "?watch=true&labelSelector=a+in+%28")
    assert st == 400, b


def test_writes_by_another_api_server_sharing_redis():
    """Events from memory must not hide another writer: a second API server on
    the same Redis writes in between this one's writes; both servers' watchers
    see every change once, in resourceVersion order, the last (foreign) one too."""
    other, oport, _ = services.start_pelotond(REDIS, "--history-max=40")
    via = call_at

    path = "/api/v1/namespaces/default/configmaps"
    st, first = via(PORT, "POST", path, cm("x-0"))
    assert st == 201
    rv0 = first["metadata"]["resourceVersion"]
    ours = Watch(f"{path}?watch=true&resourceVersion={rv0}", timeout=10)
    theirs_c = http.client.HTTPConnection("127.0.0.1", oport, timeout=10)
    theirs_c.request("GET", f"{path}?watch=true&resourceVersion={rv0}")
    theirs = theirs_c.getresponse()
    names = [f"x-{i}" for i in range(1, 41)]
    for i, n in enumerate(names):  # alternate servers; the last write is the other server's
        assert via(oport if i % 2 else PORT, "POST", path, cm(n))[0] == 201
    for label, read in (("ours", ours.next), ("theirs", lambda: json.loads(theirs.readline()))):
        got, last_rv = [], int(rv0)
        t0 = time.monotonic()
        while len(got) < len(names):
            ev = read()
            assert ev is not None, (label, got)
            name = ev["object"]["metadata"]["name"]
            rv = int(ev["object"]["metadata"]["resourceVersion"])
            assert rv > last_rv, (label, name, rv, last_rv)  # in order, none twice
            last_rv = rv
            if name.startswith("x-"):
                got.append(name)
        assert got == names, (label, got)
        assert time.monotonic() - t0 < 5, label  # the trailing foreign write arrives promptly
    ours.close()
    theirs_c.close()
    assert services.stop(other) == 0


def test_two_api_servers_write_one_pod():
    """Two API servers on one Redis write the same pod in turns: no write is
    lost (each read-modify-write starts from what the other stored), a PUT
    naming the other's resourceVersion is no Conflict, a Binding of a pod the
    other deleted is NotFound, and of the pod it created again, bound."""
    other, oport, _ = services.start_pelotond(REDIS)
    via = call_at
    pods = "/api/v1/namespaces/default/pods"
    merge = "application/merge-patch+json"

    def pod(name):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}

    st, _ = via(PORT, "POST", pods, pod("two-a"))
    assert st == 201
    st, b = via(oport, "PATCH", f"{pods}/two-a", {"metadata": {"labels": {"from": "other"}}}, merge)
    assert st == 200, b
    # status through this server: the other server's label is kept, not lost
    st, b = via(PORT, "PATCH", f"{pods}/two-a/status", {"status": {"phase": "Running"}}, merge)
    assert st == 200, b
    assert b["metadata"]["labels"] == {"from": "other"}, b["metadata"]
    assert b["status"]["phase"] == "Running", b
    # a PUT naming the other server's current resourceVersion is no Conflict here
    st, b = via(oport, "PATCH", f"{pods}/two-a", {"metadata": {"labels": {"from": "other", "n": "2"}}}, merge)
    assert st == 200, b
    b["metadata"]["annotations"] = {"put": "here"}
    st, put = via(PORT, "PUT", f"{pods}/two-a", b)
    assert st == 200, put
    assert put["metadata"]["labels"] == {"from": "other", "n": "2"}, put["metadata"]
    assert int(put["metadata"]["resourceVersion"]) > int(b["metadata"]["resourceVersion"])
    # bound here, then deleted by the other server: binding again is NotFound, not "already assigned"
    bind = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "two-a"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
    st, b = via(PORT, "POST", f"{pods}/two-a/binding", bind)
    assert st == 201, b
    st, b = via(oport, "POST", f"{pods}/two-a/binding", bind)
    assert st == 409 and "already assigned" in b["message"], b
    st, b = via(oport, "DELETE", f"{pods}/two-a?gracePeriodSeconds=0")
    assert st == 200, b
    assert via(oport, "GET", f"{pods}/two-a")[0] == 404
    st, b = via(PORT, "POST", f"{pods}/two-a/binding", bind)
    assert st == 404 and b["reason"] == "NotFound", b
    # created again by the other server: this server binds the new pod
    st, b = via(oport, "POST", pods, pod("two-a"))
    assert st == 201, b
    st, b = via(PORT, "POST", f"{pods}/two-a/binding", bind)
    assert st == 201, b
    st, b = via(oport, "GET", f"{pods}/two-a")
    assert b["spec"]["nodeName"] == "n1", b
    assert services.stop(other) == 0


def test_clean_shutdown_with_open_watchers():
    ws = [Watch(NS + "?watch=true") for _ in range(3)]
    assert services.stop(PROC) == 0, open(LOG).read()
    for w in ws:
        w.close()
    assert "msg=stopped" in open(LOG).read()


run_tests("shim-watch", dict(globals()))
