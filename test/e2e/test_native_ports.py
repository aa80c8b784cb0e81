#!/usr/bin/python3
"""End-to-end: the native API's listeners (docs/native-api.md, "Running
it"): --native-daemon-ports opens Peloton's six ports (a gRPC and a YARPC
HTTP port per daemon), each serving its daemon's services and naming the
right daemon for the others; --native-tls serves gRPC over TLS (ALPN h2)
and YARPC over HTTPS with the API server's certificate, a bearer token in
the authorization metadata, and client certificates verified against
--client-ca-file. grpcio and curl are the clients; the certificates are
made here with openssl."""
import os
import signal
import socket
import subprocess

import grpc

import nativeclient
import services
from simlib import run_tests

nativeclient.generate_stubs()
from peloton.api.v0.host.svc import host_svc_pb2 as hs, host_svc_pb2_grpc as hsg  # noqa: E402
from peloton.api.v0.job import job_pb2 as jb, job_pb2_grpc as jbg  # noqa: E402
from peloton.api.v0.respool import respool_pb2 as rp, respool_pb2_grpc as rpg  # noqa: E402

D = services.tempdir()
T = 20
DAEMONS = ("jobmgr", "resmgr", "hostmgr")
PORTS = {f"{d}{k}": services.free_port() for d in DAEMONS for k in ("", "-http")}
REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(
    REDIS, "--roles=apiserver,native",
    "--native-daemon-ports=" + ",".join(f"{k}={v}" for k, v in PORTS.items()))
for p in PORTS.values():
    services.wait_port(p, "native daemon port")


def yarpc(port, procedure, body="{}", scheme="http", extra=()):
    """A YARPC JSON call by curl: (HTTP status, Rpc-Status, Rpc-Error-Code, body)."""
    hf = os.path.join(D, "h")
    out = subprocess.run(["curl", "-s", "-D", hf, "-o", "-", "-w", "\n%{http_code}", *extra,
                          f"{scheme}://127.0.0.1:{port}/api/v1", "-H", "Rpc-Caller: t", "-H", "Rpc-Service: s",
                          "-H", "Rpc-Encoding: json", "-H", f"Rpc-Procedure: {procedure}", "-d", body],
                         capture_output=True, text=True, timeout=30).stdout
    body, _, code = out.rpartition("\n")
    heads = {}
    for line in open(hf).read().splitlines():
        k, _, v = line.partition(":")
        heads[k.strip().lower()] = v.strip()
    return code, heads.get("rpc-status"), heads.get("rpc-error-code"), body


def test_each_daemon_serves_its_services_over_grpc():
    rm = rpg.ResourceManagerStub(grpc.insecure_channel(f"127.0.0.1:{PORTS['resmgr']}"))
    assert rm.Query(rp.QueryRequest(), timeout=T, wait_for_ready=True) is not None
    hm = hsg.HostServiceStub(grpc.insecure_channel(f"127.0.0.1:{PORTS['hostmgr']}"))
    assert hm.QueryHosts(hs.QueryHostsRequest(), timeout=T, wait_for_ready=True) is not None
    jm = jbg.JobManagerStub(grpc.insecure_channel(f"127.0.0.1:{PORTS['jobmgr']}"))
    assert jm.Query(jb.QueryRequest(), timeout=T, wait_for_ready=True) is not None


def test_a_service_on_another_daemons_port_is_unimplemented_naming_it():
    for port, stub, call, want in (
            ("jobmgr", rpg.ResourceManagerStub, lambda s: s.Query(rp.QueryRequest(), timeout=T), "resmgr"),
            ("resmgr", jbg.JobManagerStub, lambda s: s.Query(jb.QueryRequest(), timeout=T), "jobmgr"),
            ("jobmgr", hsg.HostServiceStub, lambda s: s.QueryHosts(hs.QueryHostsRequest(), timeout=T), "hostmgr")):
        try:
            call(stub(grpc.insecure_channel(f"127.0.0.1:{PORTS[port]}")))
            raise AssertionError(f"{want}'s service answered on {port}'s port")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e
            assert f"ask {want}: gRPC port {PORTS[want]}, YARPC HTTP port {PORTS[want + '-http']}" in e.details(), \
                e.details()


def test_yarpc_http_ports_route_the_same_way():
    code, st, _, body = yarpc(PORTS["resmgr-http"], "peloton.api.respool.ResourceManager::Query")
    assert (code, st) == ("200", "success"), (code, st, body)
    code, st, err, body = yarpc(PORTS["jobmgr-http"], "peloton.api.respool.ResourceManager::Query")
    assert (code, st, err) == ("501", "error", "unimplemented") and "ask resmgr" in body, (code, st, err, body)
    code, st, _, body = yarpc(PORTS["hostmgr-http"], "peloton.api.v0.host.svc.HostService::QueryHosts")
    assert (code, st) == ("200", "success"), (code, st, body)


def test_grpc_port_takes_yarpc_too_but_http_port_no_grpc():
    # the CLI's YARPC calls go to the gRPC ports Peloton's clients default to
    code, st, _, body = yarpc(PORTS["jobmgr"], "peloton.api.job.JobManager::Query")
    assert (code, st) == ("200", "success"), (code, st, body)
    try:
        rpg.ResourceManagerStub(grpc.insecure_channel(f"127.0.0.1:{PORTS['resmgr-http']}")).Query(
            rp.QueryRequest(), timeout=3)
        raise AssertionError("gRPC answered on a YARPC HTTP port")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e


CLI = os.environ.get("PELOTON_CLI", os.path.join(services.ROOT, "build", "asan", "peloton"))


def cli(*args):
    env = {k: v for k, v in os.environ.items() if not k.endswith("MGR_URL") and not k.startswith("PELOTON_")}
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60, env=env)
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    return p.returncode, p.stdout, p.stderr


def test_cli_with_each_daemons_port():
    m, v, u = (f"127.0.0.1:{PORTS[d]}" for d in DAEMONS)
    rc, out, err = cli("-m", m, "-v", v, "-u", u, "respool", "dump", "--format", "json")
    assert rc == 0 and "root" in out, (rc, out, err)
    rc, out, err = cli("-m", m, "-v", v, "-u", u, "host", "query")
    assert rc == 0 and out.startswith("HOSTNAME"), (rc, out, err)
    rc, out, err = cli("-m", m, "-v", v, "-u", u, "watch", "job", "-n", "1")  # gRPC streaming on jobmgr's port
    assert rc == 0 and out.startswith("revision=") and " watch=" in out, (rc, out, err)
    # the resource manager's calls sent to the job manager: one line naming where they go
    rc, out, err = cli("-m", m, "respool", "dump")
    assert rc == 1 and err.startswith("peloton: error: unimplemented: ") and f"ask resmgr: gRPC port {PORTS['resmgr']}" \
        in err, (rc, err)
    rc, out, err = cli("-m", v, "watch", "job", "-n", "1")
    assert rc == 1 and err.startswith("peloton: error: unimplemented: ") and "ask jobmgr" in err, (rc, err)


def test_bad_port_flags_are_usage_errors():
    for flag in ("--native-daemon-ports=jobmgr=x", "--native-daemon-ports=nomgr=1", "--native-daemon-ports=jobmgr",
                 "--native-daemon-ports=jobmgr=70000"):
        p = subprocess.run([services.PELOTOND, flag], capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and "--native-daemon-ports takes" in p.stderr, (flag, p.returncode, p.stderr)
    p = subprocess.run([services.PELOTOND, "--native-port=1", "--native-daemon-ports"], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 2 and "exclude each other" in p.stderr, p.stderr


def test_a_taken_daemon_port_fails_the_role_and_closes_the_others():
    ports = {k: services.free_port() for k in PORTS}
    ports["hostmgr-http"] = PORTS["resmgr"]  # taken: the last of the six opened
    log = os.path.join(D, "taken.log")
    with open(log, "w") as f:
        p = subprocess.Popen([services.PELOTOND, "--roles=native", f"--server=http://127.0.0.1:{PORT}",
                              "--native-daemon-ports=" + ",".join(f"{k}={v}" for k, v in ports.items())],
                             stdout=f, stderr=subprocess.STDOUT)
    try:
        services.wait_until(lambda: "cannot listen" in open(log).read(), 15, "the listen error")
        assert f"native: cannot listen on 127.0.0.1:{PORTS['resmgr']}" in open(log).read()

        def refused(port):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return False
            except OSError:
                return True
        # the five opened before it are closed again
        services.wait_until(lambda: all(refused(ports[k]) for k in ports if k != "hostmgr-http"), 10,
                            "the opened ports closed")
        # and the process stops by itself, exit status 1: a supervisor sees the failure
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=20)
    out = open(log).read()
    assert p.returncode == 1 and "a role could not start; stopping" in out and "Sanitizer" not in out, out


def test_a_role_that_cannot_start_stops_the_api_server_too():
    """With the API server in the same process: the native role's port is taken, the whole process stops
    (its API port closed) and exits 1, rather than serving the API without the role."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    log = os.path.join(D, "taken-api.log")
    api = services.free_port()
    try:
        with open(log, "w") as f:
            p = subprocess.Popen([services.PELOTOND, "--roles=apiserver,native", f"--port={api}",
                                  f"--redis=127.0.0.1:{REDIS}", f"--native-port={taken.getsockname()[1]}"],
                                 stdout=f, stderr=subprocess.STDOUT)
        try:
            p.wait(timeout=20)
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=10)
    finally:
        taken.close()
    out = open(log).read()
    assert p.returncode == 1 and "cannot listen" in out and "a role could not start; stopping" in out, out
    assert "level=info msg=stopped" in out and "Sanitizer" not in out, out


# ---- TLS ----

def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


CA, CA_KEY = os.path.join(D, "ca.crt"), os.path.join(D, "ca.key")
SRV, SRV_KEY, SRV_CSR = os.path.join(D, "srv.crt"), os.path.join(D, "srv.key"), os.path.join(D, "srv.csr")
CL, CL_KEY, CL_CSR = os.path.join(D, "cl.crt"), os.path.join(D, "cl.key"), os.path.join(D, "cl.csr")
openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", CA_KEY, "-out", CA, "-days", "2",
        "-subj", "/CN=native-test-ca")
EXT = os.path.join(D, "ext")
with open(EXT, "w") as f:
    f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", SRV_KEY, "-out", SRV_CSR, "-subj", "/CN=127.0.0.1")
openssl("x509", "-req", "-in", SRV_CSR, "-CA", CA, "-CAkey", CA_KEY, "-CAcreateserial", "-out", SRV, "-days", "2",
        "-extfile", EXT)
openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", CL_KEY, "-out", CL_CSR, "-subj", "/O=system:masters/CN=carol")
openssl("x509", "-req", "-in", CL_CSR, "-CA", CA, "-CAkey", CA_KEY, "-CAcreateserial", "-out", CL, "-days", "2")
with open(os.path.join(D, "token"), "w") as f:
    f.write("nat-tok,admin,1,system:masters\n")
TNPORT = services.free_port()
TPROC, TPORT, TLOG = services.start_pelotond(
    services.start_redis(), "--roles=apiserver,native", f"--native-port={TNPORT}", "--native-tls",
    f"--tls-cert={SRV}", f"--tls-key={SRV_KEY}", f"--client-ca-file={CA}", f"--token-file={D}/token")
services.wait_port(TNPORT, "native TLS port")


def tls_channel(cert=None, key=None):
    creds = grpc.ssl_channel_credentials(root_certificates=open(CA, "rb").read(),
                                         private_key=open(key, "rb").read() if key else None,
                                         certificate_chain=open(cert, "rb").read() if cert else None)
    return grpc.secure_channel(f"127.0.0.1:{TNPORT}", creds)


def test_grpc_over_tls_with_a_token():
    rm = rpg.ResourceManagerStub(tls_channel())
    r = rm.Query(rp.QueryRequest(), timeout=T, wait_for_ready=True, metadata=[("authorization", "Bearer nat-tok")])
    assert r is not None
    try:
        rm.Query(rp.QueryRequest(), timeout=T)
        raise AssertionError("a call without credentials was answered")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e


def test_grpc_over_tls_with_a_client_certificate():
    rm = rpg.ResourceManagerStub(tls_channel(CL, CL_KEY))
    assert rm.Query(rp.QueryRequest(), timeout=T, wait_for_ready=True) is not None


def test_plaintext_client_gets_no_answer_from_the_tls_port():
    try:
        rpg.ResourceManagerStub(grpc.insecure_channel(f"127.0.0.1:{TNPORT}")).Query(rp.QueryRequest(), timeout=3)
        raise AssertionError("cleartext gRPC answered on the TLS port")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e


def test_yarpc_over_https():
    code, st, _, body = yarpc(TNPORT, "peloton.api.respool.ResourceManager::Query", scheme="https",
                              extra=("--http1.1", "--cacert", CA, "-H", "Authorization: Bearer nat-tok"))
    assert (code, st) == ("200", "success"), (code, st, body)
    code, st, err, body = yarpc(TNPORT, "peloton.api.respool.ResourceManager::Query", scheme="https",
                                extra=("--http1.1", "--cacert", CA))
    assert (code, err) == ("401", "unauthenticated"), (code, st, err, body)


def test_cli_over_tls():
    url = f"https://127.0.0.1:{TNPORT}"
    rc, out, err = cli("-m", url, "--cacert", CA, "--token", "nat-tok", "respool", "dump", "--format", "json")
    assert rc == 0 and "root" in out, (rc, out, err)  # YARPC over HTTPS (HTTP/1.1 by ALPN)
    rc, out, err = cli("-m", url, "--cacert", CA, "--token", "nat-tok", "watch", "job", "-n", "1")
    assert rc == 0 and out.startswith("revision="), (rc, out, err)  # gRPC over TLS (h2 by ALPN)
    rc, out, err = cli("-m", url, "--cacert", CA, "--cert", CL, "--key", CL_KEY, "watch", "job", "-n", "1")
    assert rc == 0 and out.startswith("revision="), (rc, out, err)  # the client certificate is the user
    rc, out, err = cli("-m", url, "--cacert", CA, "respool", "dump")
    assert rc == 1 and err.startswith("peloton: error: unauthenticated: "), (rc, err)
    rc, out, err = cli("-m", url, "--cacert", CA, "watch", "job", "-n", "1")
    assert rc == 1 and err.startswith("peloton: error: unauthenticated: "), (rc, err)
    rc, out, err = cli("-m", url, "--token", "nat-tok", "respool", "dump")  # not signed by a CA it knows
    assert rc == 3 and err.startswith("peloton: no answer: "), (rc, err)
    rc, out, err = cli("-m", url, "--cert", CL, "respool", "dump")
    assert rc == 2 and "--cert and --key go together" in err, (rc, err)


def test_exit_clean_under_asan():
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    assert services.stop(TPROC) == 0, open(TLOG).read()[-3000:]


run_tests("native-ports", dict(globals()))
