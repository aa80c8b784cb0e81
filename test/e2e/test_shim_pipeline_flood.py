# run.sh: in the pool (its bound, /healthz within 1 s, leaves room: 101 ms at worst beside integ, load 7-8)
"""End-to-end: a client that pipelines list requests and never reads its
replies must not grow pelotond. 60 lists of 5 MB each (300 MB of replies)
are sent at once on one connection, on the plain port and over TLS
(HTTP/1.1); while they wait, /healthz on another connection answers within
a second and pelotond's resident memory stays within a bound; when the
client reads, all 60 replies arrive whole, in order. Before: RSS grew by
the whole 300 MB (66 -> 612 MB with larger lists) and /healthz took 4.6 s.

pelotond is the release binary here (jemalloc, as deployed): the ASan
build's quarantine keeps freed memory and would hide what is held."""
import json
import os
import socket
import ssl
import time
import urllib.request

import services
from simlib import run_tests

services.PELOTOND = os.environ.get("PELOTOND_REL", os.path.join(services.ROOT, "bin", "pelotond"))
REDIS = services.start_redis()
D = services.tempdir()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--tls-port=0", f"--tls-dir={D}/tls")
TPORT = services.start_pelotond.tls_port
CERT = os.path.join(D, "tls", "apiserver.crt")
LISTS = 60
ITEMS, ITEM_BYTES = 100, 50000
LIST = b"GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\r\n"


def rss_mb():
    with open(f"/proc/{PROC.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def healthz_seconds():
    t0 = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=10) as r:
        assert r.read() == b"ok"
    return time.monotonic() - t0


def setup():
    payload = "x" * ITEM_BYTES
    for i in range(ITEMS):
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{i:03d}"},
                           "data": {"d": payload}}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{PORT}/api/v1/namespaces/default/configmaps", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 201


def read_replies(sock, n):
    """Reads n HTTP/1.1 replies with Content-Length bodies; returns their bodies."""
    buf, bodies = b"", []
    sock.settimeout(30)
    while len(bodies) < n:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(1 << 20)
            assert chunk, f"closed after {len(bodies)} replies"
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head[:80]
        length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length"))
        parts = [buf]
        have = len(buf)
        while have < length:
            chunk = sock.recv(1 << 20)
            assert chunk, f"closed inside reply {len(bodies)}"
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        bodies.append(data[:length])
        buf = data[length:]
    return bodies


def flood(tls):
    s = socket.create_connection(("127.0.0.1", TPORT if tls else PORT), timeout=10)
    if tls:
        ctx = ssl.create_default_context(cafile=CERT)
        ctx.check_hostname = False
        ctx.set_alpn_protocols(["http/1.1"])
        s = ctx.wrap_socket(s)
    before = rss_mb()
    s.sendall(LIST * LISTS)
    # while the replies wait, for 3 s: /healthz answers at once, memory stays bounded
    peak, worst = before, 0.0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        worst = max(worst, healthz_seconds())
        peak = max(peak, rss_mb())
        time.sleep(0.05)
    held = peak - before
    print(f"{'tls' if tls else 'plain'}: RSS {before:.0f} -> peak {peak:.0f} MB, /healthz worst {worst * 1000:.0f} ms")
    assert held < 120, f"pelotond grew by {held:.0f} MB for a client that reads nothing"
    assert worst < 1.0, f"/healthz took {worst:.2f} s"
    bodies = read_replies(s, LISTS)
    s.close()
    for b in bodies:
        doc = json.loads(b)
        assert doc["kind"] == "ConfigMapList" and len(doc["items"]) == ITEMS


def test_unread_pipelined_lists_are_bounded_on_the_plain_port():
    setup()
    flood(False)


def test_unread_pipelined_lists_are_bounded_over_tls():
    flood(True)


def test_survives():
    assert PROC.poll() is None, open(LOG).read()[-2000:]
    assert healthz_seconds() < 1.0
    assert services.stop(PROC) == 0, open(LOG).read()[-2000:]


run_tests("shim-pipeline-flood", dict(globals()))
