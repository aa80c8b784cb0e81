"""End-to-end: what whole lists hold while they are served is bounded
(issue #25, "Scale without cascades"; apiserver-shim/shim_slices.c).

A list without a limit, and a watch without a resourceVersion, keep every
item until it is sent: at a million pods that was gigabytes per request, and
two such requests took pelotond from 6.7 to 13.5 GiB before it died. Now the
items are kept packed, and `--list-memory-mb` bounds what all of them hold
together, which `peloton_apiserver_list_memory_bytes` shows:

- a whole list whose reader does not read keeps its unsent items, packed;
- while the lists being served hold half of the bound or more, a new whole
  list longer than a page, and a watch without a resourceVersion, get 429
  TooManyRequests with Retry-After (kube-apiserver's answer to what it cannot
  serve now); a small list, a paged list (what kubectl and client-go send)
  and `kubectl get pods -A` are served as usual;
- the reader gone, the memory is given back and a whole list is served whole;
- with a bound smaller than one list, the list ends cut short (the client
  sees a broken body: HTTP/1.1 without its last chunk, an HTTP/2 stream
  reset), a watch without a resourceVersion gets 410 Expired,
  the memory is given back, and pelotond goes on serving.

40,000 pods are written straight into Redis in the store's layout before
pelotond starts (as test_shim_slices does), so the test takes seconds."""
import http.client
import json
import os
import socket
import subprocess
import time

import services
import storefill
from simlib import run_tests

services.PELOTOND = os.environ.get("PELOTOND_REL", os.path.join(services.ROOT, "bin", "pelotond"))
N = 40000
BOUND_MB = 9  # one whole list of N fits (about 7.6 MB at its most); a held one keeps over half of it


def fill(redis):
    """N web pods in namespace default and 5 in namespace small, versions 1..N+5."""
    pods = [storefill.web_pod(i, i + 1, 100) for i in range(N + 5)]
    for p in pods[N:]:
        p["metadata"]["namespace"] = "small"
    storefill.fill_pods(redis, pods)


REDIS = services.start_redis(fsync="everysec")
fill(REDIS)


def start(bound_mb, *flags):
    proc, port, log = services.start_pelotond(REDIS, f"--list-memory-mb={bound_mb}", *flags)
    return proc, port, log


AUTH = {}  # the bearer token, for a pelotond started with one


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics", headers=AUTH)
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        if line.startswith("peloton_apiserver_list_memory"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def held(port):
    return metrics(port).get("peloton_apiserver_list_memory_bytes", 0)


def refusals(port, when):
    return metrics(port).get(f'peloton_apiserver_list_memory_refusals_total{{when="{when}"}}', 0)


def get(port, path, headers=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path, headers={**AUTH, **(headers or {})})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r, body


def stalled_list(port):
    """A whole list of pods from a client that reads nothing: its items stay held."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\n\r\n")
    last = [-1.0]

    def steady():  # read, given back to history, and as much sent as the stream takes: held stops moving
        h = held(port)
        done = h > 0 and h == last[0]
        last[0] = h
        return done
    services.wait_until(steady, timeout=60, what="the stalled list's items held", every=0.5)
    return s, last[0]


def expect_429(r, body, what):
    assert r.status == 429, (what, r.status, body[:300])
    st = json.loads(body)
    assert st["kind"] == "Status" and st["reason"] == "TooManyRequests" and st["code"] == 429, st
    assert r.getheader("Retry-After") == "1", r.getheaders()
    assert st["details"]["retryAfterSeconds"] == 1, st
    assert "--list-memory-mb" in st["message"] and "limit" in st["message"], st["message"]


def test_a_held_list_keeps_its_items_packed_and_new_whole_lists_wait():
    proc, port, log = start(BOUND_MB)
    try:
        s, h = stalled_list(port)
        # 40,000 pods of ~470 bytes as JSON: several thousand sent into the stream's 4 MiB, the rest held
        # packed (about a quarter of their JSON, with their names and slots); unpacked they would be >12 MB
        assert BOUND_MB / 2 * (1 << 20) <= h < 10e6, h
        print(f"held by the stalled list: {h / 1e6:.2f} MB for at most {N} pods "
              f"(bound {BOUND_MB} MiB: new whole lists wait from {BOUND_MB / 2} MiB)")
        r, body = get(port, "/api/v1/pods")
        expect_429(r, body, "a second whole list")
        r, body = get(port, "/api/v1/pods?watch=true")
        expect_429(r, body, "a watch without a resourceVersion")
        assert refusals(port, "start") == 2
        r, body = get(port, "/api/v1/namespaces/small/pods")  # one page: served whole, as ever
        assert r.status == 200 and len(json.loads(body)["items"]) == 5, (r.status, body[:200])
        r, body = get(port, "/api/v1/pods?limit=500")
        page = json.loads(body)
        assert r.status == 200 and len(page["items"]) == 500 and page["metadata"]["continue"], r.status
        kc = services.kubeconfig(port)
        out = services.kubectl(kc, "get", "pods", "-A", "--no-headers", timeout=120)
        assert len(out.splitlines()) == N + 5, len(out.splitlines())
        s.close()
        services.wait_until(lambda: held(port) == 0, timeout=30, what="the memory given back")
        r, body = get(port, "/api/v1/pods")
        assert r.status == 200 and len(json.loads(body)["items"]) == N + 5, r.status
        assert held(port) == 0
    finally:
        services.stop(proc)


def test_a_list_past_the_bound_ends_and_gives_its_memory_back():
    d = services.tempdir()
    with open(os.path.join(d, "token"), "w") as f:
        f.write("tok\n")
    proc, port, log = start(1, "--tls-port=0", f"--tls-dir={d}/tls", f"--token-file={d}/token")
    tport = services.start_pelotond.tls_port
    AUTH["Authorization"] = "Bearer tok"
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/api/v1/pods", headers=AUTH)
        r = c.getresponse()
        assert r.status == 200  # the head went with the first page
        try:
            body = r.read()
            broken = False
        except http.client.IncompleteRead:
            broken = True
        c.close()
        assert broken, "the list past the bound was sent whole: %d bytes" % len(body)
        assert refusals(port, "reading") == 1
        # over HTTP/2 (TLS, ALPN) the stream is reset: curl reports a stream error, not a short body
        out = os.path.join(d, "body")
        p = subprocess.run(["curl", "-s", "--http2", "--cacert", f"{d}/tls/apiserver.crt", "-H",
                            "Authorization: Bearer tok", "-o", out, "-w", "%{http_version} %{http_code}",
                            f"https://127.0.0.1:{tport}/api/v1/pods"], capture_output=True, text=True, timeout=60)
        assert p.stdout.split() == ["2", "200"] and p.returncode != 0, (p.returncode, p.stdout, p.stderr)
        assert refusals(port, "reading") == 2
        services.wait_until(lambda: held(port) == 0, timeout=30, what="the memory given back")
        # a watch without a resourceVersion: 410 Expired, as client-go expects (it lists again, in pages)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/api/v1/pods?watch=true", headers=AUTH)
        r = c.getresponse()
        assert r.status == 200
        ev = json.loads(r.readline())
        c.close()
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 410, ev
        assert ev["object"]["reason"] == "Expired" and "--list-memory-mb" in ev["object"]["message"], ev
        assert refusals(port, "reading") == 3
        services.wait_until(lambda: held(port) == 0, timeout=30, what="the memory given back")
        r, body = get(port, "/healthz")
        assert r.status == 200 and body == b"ok"
        r, body = get(port, "/api/v1/namespaces/small/pods")
        assert r.status == 200 and len(json.loads(body)["items"]) == 5
        assert "list of pods ended: its items passed --list-memory-mb" in open(log).read()
        # a list whose first page alone passes the bound: 429 at once, in the Status shape
        blob = os.urandom(4500).hex()  # 9,000 bytes that do not pack
        for i in range(150):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("POST", "/api/v1/namespaces/default/configmaps", headers={**AUTH, "Content-Type": "application/json"},
                      body=json.dumps({"metadata": {"name": f"big-{i}"}, "data": {"blob": blob}}))
            assert c.getresponse().status == 201
            c.close()
        r, body = get(port, "/api/v1/namespaces/default/configmaps")
        expect_429(r, body, "a one-page list past the bound")
    finally:
        AUTH.clear()
        services.stop(proc)


def test_a_table_watch_without_resource_version_sends_every_row():
    """A Table watch (kubectl get -w's Accept) keeps its items packed too and
    makes each row when it sends it."""
    proc, port, log = start(BOUND_MB)
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/api/v1/namespaces/small/pods?watch=true",
                  headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        r = c.getresponse()
        assert r.status == 200
        names = []
        for _ in range(5):
            ev = json.loads(r.readline())
            assert ev["type"] == "ADDED" and ev["object"]["kind"] == "Table", ev
            names += [row["cells"][0] for row in ev["object"]["rows"]]
        c.close()
        assert names == [f"p{i:06d}" for i in range(N, N + 5)], names
    finally:
        services.stop(proc)


if __name__ == "__main__":
    run_tests("test_list_memory", globals())
