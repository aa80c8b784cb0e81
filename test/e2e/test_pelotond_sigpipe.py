"""End-to-end: a peer that goes away mid-write costs pelotond that write, not
its life. Without TLS (make run's default) nothing else ignored SIGPIPE, and
pelotond died with status 141 when a client closed a large list early or when
Redis died under its Unix-domain socket."""
import os
import signal
import socket
import time
import urllib.request

import services
from simlib import run_tests

REDIS = services.start_redis()
RPROC, RDIR, _ = services.start_redis.last
SOCK = os.path.join(RDIR, "redis.sock")
PROC, PORT, LOG = services.start_pelotond(REDIS, f"--redis=unix://{SOCK}")
CM = "/api/v1/namespaces/default/configmaps"


def request(method, path, body=None):
    return services.api(PORT, method, path, body, timeout=10)


def alive():
    assert PROC.poll() is None, f"pelotond exited with {PROC.returncode}; log: {open(LOG).read()[-2000:]}"


def test_clients_that_leave_a_large_list_early():
    for i in range(120):  # a list of about 2.4 MB: far more than a socket buffer
        st, _ = request("POST", CM, {"metadata": {"name": f"big-{i}"}, "data": {"k": "x" * 20000}})
        assert st == 201
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
        s.sendall(f"GET {CM} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * 3)
        s.recv(1024)
        s.close()  # unread data: the kernel answers the server's next segment with a reset
    time.sleep(0.3)
    alive()
    st, body = request("GET", CM + "?limit=1")
    assert st == 200 and body["items"], body


def test_redis_dying_under_the_unix_socket():
    RPROC.send_signal(signal.SIGKILL)
    RPROC.wait(10)
    for i in range(5):  # writes and reads on the dead connection
        try:
            request("POST", CM, {"metadata": {"name": f"after-{i}"}})
        except Exception:
            pass  # an error answer or a closed connection is fine; dying is not
        try:
            request("GET", CM + "/big-1")
        except Exception:
            pass
    time.sleep(0.3)
    alive()
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=5) as r:
        assert r.status in (200, 500, 503)


run_tests("pelotond-sigpipe", dict(globals()))
