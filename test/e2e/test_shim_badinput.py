"""End-to-end: hostile and malformed requests against pelotond (the ASan build
under test). Every reply must be a Kubernetes Status (or a valid object) with
a sensible code, and the server must keep serving. Bounded and seeded."""
import http.client
import json
import random
import socket

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)

PATHS = ["/api/v1/namespaces/default/pods", "/api/v1/namespaces/default/pods/x", "/api/v1/nodes/n1",
         "/api/v1/namespaces/default/configmaps/x/status", "/api/v1/namespaces/default/pods/x/binding",
         "/api/v1/namespaces", "/apis/coordination.k8s.io/v1/namespaces/default/leases", "/api/v1/namespaces/default/bindings",
         "/api", "/apis", "/openapi/v3/api/v1", "/api/v1/../../etc/passwd", "/api/v1/namespaces/%00/pods", "/" + "a/" * 300]
CTYPES = ["application/json", "application/merge-patch+json", "application/json-patch+json",
          "application/strategic-merge-patch+json", "application/apply-patch+yaml", "text/plain",
          "application/vnd.kubernetes.protobuf", ""]
QUERIES = ["", "?watch=true&timeoutSeconds=1", "?labelSelector=a+in+(", "?fieldSelector=spec.x%3D1", "?limit=-5",
           "?limit=abc&continue=zzz", "?continue=eyJ2IjoxfQ", "?dryRun=All", "?dryRun=Nope", "?resourceVersion=abc&watch=1",
           "?gracePeriodSeconds=-1", "?labelSelector=" + "a," * 500]


def bodies(rng):
    yield b""
    yield b"{"
    yield b"[" * 5000 + b"]" * 5000
    yield b'{"metadata":' * 3000 + b"{}" + b"}" * 3000
    yield json.dumps({"metadata": {"name": "x" * 300}}).encode()
    yield json.dumps({"kind": "Pod", "apiVersion": "v2", "metadata": {"name": "x"}}).encode()
    yield json.dumps({"metadata": {"name": "ok-1", "namespace": "other"}}).encode()
    yield json.dumps([{"op": "replace", "path": "/metadata/name", "value": "y"}]).encode()
    yield json.dumps([{"op": "move", "from": "/a", "path": "/a/b"}]).encode()
    yield json.dumps({"metadata": {"name": "b"}, "target": {"name": ""}}).encode()
    yield json.dumps({"spec": {"containers": [{"name": "c", "$patch": "delete"}]}, "$setElementOrder/containers": [1]}).encode()
    yield bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2000)))
    yield b'{"metadata":{"name":"\\ud800"}}'


def request(method, path, body, ctype):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    headers = {"Content-Type": ctype} if ctype else {}
    c.request(method, path, body=body or None, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("Content-Type") or "", data


def test_random_hostile_requests_get_status_and_the_server_survives():
    rng = random.Random(1234)
    all_bodies = list(bodies(rng))
    count = 0
    for _ in range(600):
        method = rng.choice(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"])
        path = rng.choice(PATHS) + rng.choice(QUERIES)
        body = rng.choice(all_bodies) if method in ("POST", "PUT", "PATCH", "DELETE") else b""
        st, ctype, data = request(method, path, body, rng.choice(CTYPES))
        count += 1
        assert 200 <= st < 600 and st != 500, (method, path, st, data[:200])
        if st >= 400 and method != "HEAD" and data and ctype.startswith("application/json"):
            doc = json.loads(data)
            assert doc.get("kind") == "Status" and doc.get("code") == st, (method, path, doc)
    assert count == 600
    assert PROC.poll() is None, open(LOG).read()[-2000:]
    assert request("GET", "/healthz", b"", "")[0] == 200


def test_raw_garbage_on_the_socket():
    for junk in [b"\x00\x01\x02\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"POST /api HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                 b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 5000 + b"\r\n"]:
        s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
        try:
            s.sendall(junk)
            s.recv(4096)
        except OSError:
            pass
        s.close()
    assert PROC.poll() is None, open(LOG).read()[-2000:]
    assert request("GET", "/healthz", b"", "")[0] == 200


def test_exit_clean_under_asan():
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]


run_tests("shim-badinput", dict(globals()))
