"""End-to-end: pelotond's TLS listener (self-signed certificate made on first
start, HTTP/2 by ALPN, bearer token) with real kubectl and curl."""
import base64
import os
import re
import socket
import ssl
import subprocess
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
D = services.tempdir()
with open(os.path.join(D, "token"), "w") as f:
    f.write("tls-tok\n")
PROC, PORT, LOG = services.start_pelotond(REDIS, "--tls-port=0", f"--tls-dir={D}/tls", f"--token-file={D}/token")
TPORT = services.start_pelotond.tls_port
CERT = os.path.join(D, "tls", "apiserver.crt")


def kubeconfig(token):
    ca = base64.b64encode(open(CERT, "rb").read()).decode()
    path = os.path.join(D, f"kc-{token}")
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: pc, cluster: {{server: "https://127.0.0.1:{TPORT}", certificate-authority-data: {ca}}}}}]
users: [{{name: u, user: {{token: {token}}}}}]
contexts: [{{name: c, context: {{cluster: pc, user: u}}}}]
current-context: c
""")
    return path


def kubectl(token, *args, stdin=None):
    p = subprocess.run(["kubectl", f"--kubeconfig={kubeconfig(token)}", *args], input=stdin, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def curl(*args):
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", "--cacert", CERT,
                        *args], capture_output=True, text=True, timeout=30)
    return p.stdout.split()


def test_certificate_is_made_and_verifies():
    assert os.path.exists(CERT) and oct(os.stat(os.path.join(D, "tls", "apiserver.key")).st_mode & 0o777) == "0o600"
    assert curl(f"https://127.0.0.1:{TPORT}/healthz") == ["2", "200"]  # HTTP/2 by ALPN, verified against the cert


def test_answers_without_a_body_end_their_http2_streams():
    # HEAD, and a 404 without a body: before the fix each stream stayed open
    # until curl's timeout (kubectl 1.20's create waited 5 s for /openapi/v2)
    for args in (["-I", f"https://127.0.0.1:{TPORT}/healthz"],
                 ["-X", "DELETE", f"https://127.0.0.1:{TPORT}/api/v1/namespaces/default/configmaps/none"]):
        t0 = time.monotonic()
        got = curl("-m", "3", "-H", "Authorization: Bearer tls-tok", *args)
        assert got[0] == "2" and got[1] in ("200", "404") and time.monotonic() - t0 < 1.5, (args, got)


def test_kubectl_with_token_over_tls():
    rc, out, err = kubectl("tls-tok", "get", "ns", "-o", "name")
    assert rc == 0 and "namespace/default" in out, err
    rc, out, err = kubectl("tls-tok", "create", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t1}\n")
    assert rc == 0, err


def test_wrong_or_missing_token_is_unauthorized():
    rc, out, err = kubectl("wrong", "get", "ns")
    assert rc != 0 and "Unauthorized" in err, err
    assert curl(f"https://127.0.0.1:{TPORT}/api/v1/namespaces") == ["2", "401"]
    assert curl("-H", "Authorization: Bearer tls-tok", f"https://127.0.0.1:{TPORT}/api/v1/namespaces") == ["2", "200"]
    assert curl("--http1.1", "-H", "Authorization: Bearer tls-tok", f"https://127.0.0.1:{TPORT}/api/v1/namespaces") == ["1.1", "200"]


def test_watch_over_http2():
    w = subprocess.Popen(["kubectl", f"--kubeconfig={kubeconfig('tls-tok')}", "get", "cm", "-w", "--output-watch-events"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        kubectl("tls-tok", "create", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t2}\n")
        time.sleep(1.0)
    finally:
        w.terminate()
        out, err = w.communicate(timeout=10)
    assert any(l.split()[:2] == ["ADDED", "t2"] for l in out.splitlines()), (out, err)


def test_objects_larger_than_one_http2_frame():
    big = "x" * 60000  # HTTP/2 frames hold 16 KiB: responses and events must be split
    w = subprocess.Popen(["kubectl", f"--kubeconfig={kubeconfig('tls-tok')}", "get", "cm", "-w", "--output-watch-events"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        rc, out, err = kubectl("tls-tok", "create", "-f", "-",
                               stdin=f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata: {{k: {big}}}\n")
        assert rc == 0, err
        time.sleep(1.0)
    finally:
        w.terminate()
        out, err = w.communicate(timeout=10)
    assert any(l.split()[:2] == ["ADDED", "big"] for l in out.splitlines()), (out, err)
    rc, out, err = kubectl("tls-tok", "get", "cm", "big", "-o", "jsonpath={.data.k}")
    assert rc == 0 and out == big, (len(out), err)


def test_plain_port_asks_for_the_token_too():
    # before, with TLS on the plain port served everything, Secrets included, to any local user
    url = f"http://127.0.0.1:{PORT}/api/v1/namespaces/default/secrets"
    assert curl(url)[1] == "401"
    assert curl("-H", "Authorization: Bearer wrong", url)[1] == "401"
    assert curl("-H", "Authorization: Bearer tls-tok", url)[1] == "200"
    assert curl(f"http://127.0.0.1:{PORT}/healthz")[1] == "200"  # probes stay open


def test_operators_certificate():
    key = os.path.join(D, "tls", "apiserver.key")
    p, port, log = services.start_pelotond(REDIS, "--tls-port=0", f"--tls-cert={CERT}", f"--tls-key={key}")
    try:
        tport = services.start_pelotond.tls_port
        assert curl(f"https://127.0.0.1:{tport}/healthz") == ["2", "200"]
    finally:
        services.stop(p)
    r = subprocess.run([services.PELOTOND, "--tls-port=0", f"--tls-cert={CERT}", f"--redis=127.0.0.1:{REDIS}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "go together" in r.stderr, r.stderr


def openssl(*args, stdin=None):
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True, timeout=30)


def test_certificate_is_a_server_leaf_not_a_ca():
    text = openssl("x509", "-in", CERT, "-noout", "-text").stdout
    assert "CA:FALSE" in text and "TLS Web Server Authentication" in text and "Certificate Sign" not in text, text


def test_tls_1_2_at_least_and_aead_only():
    url = f"https://127.0.0.1:{TPORT}/healthz"
    assert curl("--tlsv1.2", "--tls-max", "1.2", url) == ["2", "200"]
    assert curl("--tlsv1.3", url) == ["2", "200"]
    assert curl("--tlsv1.1", "--tls-max", "1.1", url)[1] == "000"  # refused in the handshake
    # a CBC suite on TLS 1.2 is refused, a GCM one taken
    assert curl("--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES128-SHA256", url)[1] == "000"
    assert curl("--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256", url) == ["2", "200"]


def test_bearer_in_any_case_and_exact_tokens():
    url = f"https://127.0.0.1:{TPORT}/api/v1/namespaces"
    for auth, code in (("bearer tls-tok", "200"), ("BEARER tls-tok", "200"), ("Bearer tls-tok", "200"),
                       ("Bearer tls-to", "401"), ("Bearer tls-tokk", "401"), ("Bearer ", "401"),
                       ("Basic tls-tok", "401"), ("Bearertls-tok", "401")):
        assert curl("-H", f"Authorization: {auth}", url)[1] == code, auth


def test_certificates_near_expiry_are_renewed_or_warned_about():
    # a self-made certificate about to expire (or a CA, as older versions made) is renewed at start
    d = os.path.join(services.tempdir(), "tls")
    os.makedirs(d)
    crt, key = os.path.join(d, "apiserver.crt"), os.path.join(d, "apiserver.key")
    r = openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "10",
                "-subj", "/CN=old", "-keyout", key, "-out", crt)
    assert r.returncode == 0, r.stderr
    os.chmod(key, 0o644)
    p, port, log = services.start_pelotond(REDIS, "--tls-port=0", f"--tls-dir={d}")
    try:
        text = openssl("x509", "-in", crt, "-noout", "-subject", "-enddate").stdout
        assert "peloton-apiserver" in text, text  # a new certificate
        assert oct(os.stat(key).st_mode & 0o777) == "0o600"
        assert curl("--cacert", crt, f"https://127.0.0.1:{services.start_pelotond.tls_port}/healthz") == ["2", "200"]
    finally:
        services.stop(p)
    # an operator's certificate is never replaced: its expiry and a readable key are warned about
    d2 = services.tempdir()
    crt2, key2 = os.path.join(d2, "op.crt"), os.path.join(d2, "op.key")
    r = openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "5",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key2, "-out", crt2)
    assert r.returncode == 0, r.stderr
    os.chmod(key2, 0o644)
    before = open(crt2).read()
    p, port, log = services.start_pelotond(REDIS, "--tls-port=0", f"--tls-cert={crt2}", f"--tls-key={key2}")
    try:
        assert curl("--cacert", crt2, f"https://127.0.0.1:{services.start_pelotond.tls_port}/healthz") == ["2", "200"]
        text = open(log).read()
        assert "level=warn" in text and re.search(r"expires in [45] days", text) and "can be read by others" in text, text
        assert open(crt2).read() == before
    finally:
        services.stop(p)


def tls_socket(port, cert=None, alpn="http/1.1"):
    ctx = ssl.create_default_context(cafile=cert or CERT)
    ctx.check_hostname = False
    ctx.set_alpn_protocols([alpn])
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))


def get_on(sock, path="/healthz"):
    """GET path on a kept-alive connection: the status, or None when the server closed it."""
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tls-tok\r\n\r\n".encode())
        data = sock.recv(65536)
    except (ConnectionError, ssl.SSLError):
        return None
    return int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1 ") else None


def test_idle_tls_connection_is_kept_like_the_plain_ports():
    # lws closed an idle TLS connection after 5 s (the plain port keeps one
    # 120 s): a client reusing it after more met a closed connection
    s = tls_socket(TPORT)
    try:
        assert get_on(s) == 200
        time.sleep(6.5)
        assert get_on(s) == 200
    finally:
        s.close()


def test_idle_timeout_flag_on_both_ports():
    # --http-idle-timeout-ms: kept until then, closed after, TLS and plain alike
    p, port, log = services.start_pelotond(REDIS, "--tls-port=0", f"--tls-dir={D}/tls", f"--token-file={D}/token",
                                           "--http-idle-timeout-ms=2000")
    tport = services.start_pelotond.tls_port
    try:
        for make in (lambda: tls_socket(tport), lambda: socket.create_connection(("127.0.0.1", port), timeout=10)):
            s = make()
            try:
                assert get_on(s) == 200
                time.sleep(1.2)
                assert get_on(s) == 200  # kept while under the timeout
                t0 = time.monotonic()
                s.settimeout(6)
                try:
                    gone = s.recv(1) == b""
                except (ConnectionError, ssl.SSLError):
                    gone = True
                waited = time.monotonic() - t0
                assert gone and 1.7 < waited < 4.5, (gone, waited)  # closed once it passed
            finally:
                s.close()
    finally:
        assert services.stop(p) == 0, open(log).read()[-2000:]


def test_clean_shutdown():
    assert services.stop(PROC) == 0, open(LOG).read()[-2000:]


run_tests("shim-tls", dict(globals()))
