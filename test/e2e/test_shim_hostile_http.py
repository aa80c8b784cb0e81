"""End-to-end: hostile request heads against a real pelotond (the ASan build),
on the plain port and on the TLS port (HTTP/1.1 by ALPN over a raw TLS
socket and with curl, HTTP/2 with curl). Each case once did harm: parameters past the
64th were dropped (a DELETE behind 64 pads lost its labelSelector and took
every configmap; a dryRun=All POST really wrote), a path was cut at 2,047
bytes and its empty segments collapsed (another object was deleted), a name
that is not UTF-8 got an empty 422, and a NUL in a header value cut the
token short and let it in. Now: a Status with a 4xx code, nothing written
or deleted. Header values with NUL or control bytes go over HTTP/2 too, by a
hand-built client (curl would not send them). Bounded waits only."""
import json
import os
import socket
import ssl
import subprocess
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
D = services.tempdir()
TOKEN = "hostile-tok"
with open(os.path.join(D, "token"), "w") as f:
    f.write(TOKEN + "\n")
# plain and TLS ports; the token is asked for over TLS only
PROC, PORT, LOG = services.start_pelotond(REDIS, "--tls-port=0", f"--tls-dir={D}/tls", f"--token-file={D}/token")
TPORT = services.start_pelotond.tls_port
CERT = os.path.join(D, "tls", "apiserver.crt")
# plain only: the token is asked for on the plain port too
PROC2, PORT2, LOG2 = services.start_pelotond(REDIS, f"--token-file={D}/token")
AUTH = f"Authorization: Bearer {TOKEN}\r\n"
CM = "/api/v1/namespaces/default/configmaps"
PADS = "&".join(f"pad{i}=1" for i in range(64))


def read_reply(recv):
    """Reads one HTTP/1.1 reply (status, body) with recv(n) -> bytes; the body by Content-Length."""
    data = b""
    deadline = time.monotonic() + 10
    while b"\r\n\r\n" not in data and time.monotonic() < deadline:
        chunk = recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head:
        return 0, b""
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length and time.monotonic() < deadline:
        chunk = recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ")[1]), body[:length]


def raw(port, req, tls=False):
    """Sends the bytes of one request on a new connection; returns (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if tls:
        ctx = ssl.create_default_context(cafile=CERT)
        ctx.check_hostname = False
        ctx.set_alpn_protocols(["http/1.1"])
        s = ctx.wrap_socket(s)
    try:
        s.sendall(req)
        return read_reply(s.recv)
    finally:
        s.close()


def request(method, path, body=b"", tls=False, port=None, auth=True):
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n{AUTH if auth else ''}Content-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return raw(port or (TPORT if tls else PORT), head.encode() + body, tls)


def curl_h(version, method, path):
    """curl over TLS with --http1.1 or --http2, the path sent as given."""
    p = subprocess.run(["curl", "-s", version, "--path-as-is", "-g", "--cacert", CERT, "-X", method, "-H",
                        f"Authorization: Bearer {TOKEN}", "-w", "\n%{http_version} %{http_code}",
                        f"https://127.0.0.1:{TPORT}{path}"], capture_output=True, timeout=30)
    body, _, tail = p.stdout.rpartition(b"\n")
    ver, code = tail.decode().split()
    assert ver == {"--http2": "2", "--http1.1": "1.1"}[version], tail
    return int(code), body


def curl_h2(method, path):
    return curl_h("--http2", method, path)


def status_doc(code, body, want_code=None, reason=None):
    doc = json.loads(body)
    assert doc["kind"] == "Status" and doc["apiVersion"] == "v1" and doc["status"] == "Failure", doc
    assert doc["code"] == code and doc["metadata"] == {} and doc["message"], doc
    if want_code:
        assert code == want_code, (code, doc)
    if reason:
        assert doc["reason"] == reason, doc
    return doc


def make_cm(name, labels=None):
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}}
    st, body = request("POST", CM, json.dumps(obj).encode())
    assert st in (201, 409), (st, body)


def exists(name):
    return request("GET", f"{CM}/{name}")[0] == 200


def via_all_ports(method, path, body=b""):
    """(transport, status, body) over plain HTTP/1.1, TLS HTTP/1.1 and HTTP/2."""
    yield "plain", *request(method, path, body)
    yield "tls-h1", *request(method, path, body, tls=True)
    if not body:
        yield "h2", *curl_h2(method, path)


def test_parameters_past_the_limit_are_refused_not_dropped():
    make_cm("grp-a", {"grp": "a"})
    make_cm("grp-b", {"grp": "b"})
    for how, st, body in via_all_ports("DELETE", f"{CM}?{PADS}&labelSelector=grp%3Da"):
        status_doc(st, body, 414, "RequestURITooLong")
        assert exists("grp-a") and exists("grp-b"), how  # before: both deleted
    obj = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}}).encode()
    for how, st, body in via_all_ports("POST", f"{CM}?{PADS}&dryRun=All", obj):
        status_doc(st, body, 414, "RequestURITooLong")
        assert not exists("dry"), how  # before: really written
    # 64 of them still pass, the selector among them
    st, body = request("GET", f"{CM}?{'&'.join(f'pad{i}=1' for i in range(63))}&labelSelector=grp%3Da")
    assert st == 200 and [i["metadata"]["name"] for i in json.loads(body)["items"]] == ["grp-a"], body


def test_long_paths_and_empty_or_dot_segments_reach_no_object():
    for n in ("victim", "victim3", "victim4", "other-object-name"):
        make_cm(n)
    # 2,060 slashes: cut at 2,047 bytes, this deleted "victim"; on the TLS
    # port lws collapsed them and resolved "..", so the path reached another
    # object there too. Every port now hands the handler the target as sent.
    for how, st, body in via_all_ports("DELETE", f"{CM}/victim" + "/" * 2060 + "other-object-name"):
        status_doc(st, body, 404, "NotFound")
        assert exists("victim") and exists("other-object-name"), how
    for path in ("/api//v1///namespaces/default/configmaps//victim3", f"{CM}/victim3/", f"{CM}//victim3",
                 f"{CM}/x/../victim3", f"{CM}/./victim3", f"{CM}/x%2F..%2Fvictim3", f"{CM}/victim3%2F",
                 f"{CM}/%2E%2E/configmaps/victim3", f"{CM}/.."):
        for how, st, body in via_all_ports("DELETE", path):
            status_doc(st, body)
            assert st in (400, 404), (how, path, st)
            assert exists("victim3"), (how, path)
    # curl's own HTTP/1.1 over TLS, as a client would send it
    for path in ("/api//v1///namespaces/default/configmaps//victim3", f"{CM}/victim" + "/" * 2060 + "other-object-name"):
        st, body = curl_h("--http1.1", "DELETE", path)
        status_doc(st, body, 404, "NotFound")
    # a path over the limit is refused whole, on every port
    for how, st, body in via_all_ports("DELETE", f"{CM}/victim4/" + "x" * 5000):
        status_doc(st, body, 414, "RequestURITooLong")
    for n in ("victim", "victim3", "victim4", "other-object-name"):
        assert exists(n), n


def test_a_name_that_is_not_utf8_gets_a_status():
    for how, st, body in via_all_ports("GET", f"{CM}/%ff"):
        doc = status_doc(st, body)  # before: 422 with an empty body
        assert 400 <= st < 500 and "\ufffd" in doc["message"], (how, doc)
    st, body = request("GET", "/api/v1/namespaces/%fe%ff/configmaps/x")
    assert "\ufffd" in status_doc(st, body)["message"]


def test_nul_or_control_characters_in_a_header_are_refused():
    ok = f"GET {CM} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}".encode()
    assert raw(PORT2, ok + b"\r\n\r\n")[0] == 200  # the token is needed here, and works
    assert raw(TPORT, ok + b"\r\n\r\n", tls=True)[0] == 200
    for tail in (b"\x00junk", b"\x01junk", b"\x7f", b"\rjunk"):
        # lws ends a header line at a bare CR (the rest of the line is
        # skipped, never read as part of the value): plain port only
        for port, tls in ((PORT2, False), (TPORT, True)) if tail != b"\rjunk" else ((PORT2, False),):
            st, body = raw(port, ok + tail + b"\r\n\r\n", tls)
            status_doc(st, body, 400, "BadRequest")  # before: 200 (cut at the NUL)


class RawH2:
    """A hand-built HTTP/2 client over TLS (ALPN h2) that can send any bytes
    in a header value: fields are HPACK literals without indexing and without
    Huffman coding, so nothing on the way checks or changes them."""

    def __init__(self, port):
        ctx = ssl.create_default_context(cafile=CERT)
        ctx.check_hostname = False
        ctx.set_alpn_protocols(["h2"])
        self.s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))
        assert self.s.selected_alpn_protocol() == "h2"
        self.buf = b""
        self.next_id = 1
        self.s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + self.frame(4, 0, 0, b""))

    @staticmethod
    def frame(ftype, flags, sid, payload):
        return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload

    @staticmethod
    def literal(name, value):
        def length(n):  # a 7-bit prefix integer, Huffman bit clear
            if n < 127:
                return bytes([n])
            out, n = [127], n - 127
            while n >= 128:
                out.append(n & 127 | 128)
                n >>= 7
            return bytes(out + [n])
        return b"\x00" + length(len(name)) + name + length(len(value)) + value

    def read_frame(self, deadline):
        while time.monotonic() < deadline:
            if len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + n:
                    f, self.buf = self.buf[:9 + n], self.buf[9 + n:]
                    return f[3], f[4], int.from_bytes(f[5:9], "big") & 0x7FFFFFFF, f[9:]
            chunk = self.s.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        return None

    def get(self, path, fields):
        """One GET with the extra (name, value) fields: (status, body), or
        ("reset", code) or ("goaway", code) or (None, b"") when the server went quiet."""
        sid, self.next_id = self.next_id, self.next_id + 2
        block = b"\x82\x87" + self.literal(b":authority", b"x") + self.literal(b":path", path.encode())
        block += b"".join(self.literal(n, v) for n, v in fields)
        self.s.sendall(self.frame(1, 0x5, sid, block))  # END_STREAM | END_HEADERS
        status, body, deadline = None, b"", time.monotonic() + 10
        while True:
            f = self.read_frame(deadline)
            if f is None:
                return None, b""
            ftype, flags, fsid, payload = f
            if ftype == 4 and not flags & 1:
                self.s.sendall(self.frame(4, 1, 0, b""))  # SETTINGS ack
            elif ftype == 7:
                return "goaway", int.from_bytes(payload[4:8], "big")
            elif fsid == sid and ftype == 3:
                return "reset", int.from_bytes(payload, "big")
            elif fsid == sid and ftype == 1:
                # nghttp2 sends :status first; 200 and 400 are static-table entries 8 and 12
                status = {0x88: 200, 0x8C: 400}.get(payload[0], payload[0])
            elif fsid == sid and ftype == 0:
                body += payload
            if fsid == sid and ftype in (0, 1) and flags & 1:
                return status, body

    def close(self):
        self.s.close()


def test_nul_or_control_characters_in_an_h2_header_are_refused_and_the_connection_serves_on():
    auth = (b"authorization", f"Bearer {TOKEN}".encode())
    c = RawH2(TPORT)
    try:
        assert c.get(CM, [auth])[0] == 200  # the token is needed here, and works
        for tail in (b"\x00junk", b"\x01junk", b"\x7f", b"\rjunk", b"\njunk"):
            st, body = c.get(CM, [(auth[0], auth[1] + tail)])
            status_doc(st, body, 400, "BadRequest")
            # an ignored header with such a value is refused too
            st, body = c.get("/healthz", [(b"x-junk", b"a" + tail)])
            status_doc(st, body, 400, "BadRequest")
            assert c.get(CM, [auth])[0] == 200, tail  # the same connection serves on
    finally:
        c.close()


def test_servers_survive_and_exit_clean_under_asan():
    for p, port, log in ((PROC, PORT, LOG), (PROC2, PORT2, LOG2)):
        assert p.poll() is None, open(log).read()[-2000:]
        assert raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200
        assert services.stop(p) == 0, open(log).read()[-3000:]


run_tests("shim-hostile-http", dict(globals()))
