#!/usr/bin/python3
"""End-to-end: the native API (pelotond role "native") serving v0
peloton.api.respool.ResourceManager over gRPC and YARPC HTTP, as a facade over
ResourcePool objects. The gRPC client is grpcio with Python code generated at
test time from the project's protos (protoc + grpc_python_plugin); YARPC calls
go through curl in both encodings; hostile HTTP/2 through nghttp (nghttp2's
client). Cross-checks with kubectl both ways. Bad input of every kind gets its
status and the server keeps serving; the process exits clean under ASan."""
import json
import os
import signal
import subprocess
import time

import nativeclient
import services
from simlib import run_tests

ROOT = services.ROOT
GEN = nativeclient.generate_stubs()
import grpc  # noqa: E402
from peloton.api.v0 import peloton_pb2 as pb  # noqa: E402
from peloton.api.v0.respool import respool_pb2 as rp, respool_pb2_grpc as rpg  # noqa: E402

S = services.start_stack("--roles=apiserver,native,resmgr", native=True)
PROC, PORT, LOG, NPORT, KUBECONFIG = S.proc, S.port, S.log, S.nport, S.kubeconfig
CH = nativeclient.channel(NPORT)
STUB = rpg.ResourceManagerStub(CH)  # the proto's package name: peloton.api.v0.respool.ResourceManager
WIRE = "/peloton.api.respool.ResourceManager/"  # what Peloton's own clients send


def answers(stub):
    try:
        return stub.Query(rp.QueryRequest(), timeout=2) is not None
    except grpc.RpcError:
        return False


services.wait_for(lambda: answers(STUB), what="native API")


def call(method, req, resp_type):
    """A call on the wire name Peloton's clients use."""
    f = CH.unary_unary(WIRE + method, request_serializer=type(req).SerializeToString,
                       response_deserializer=resp_type.FromString)
    return f(req, timeout=10)


def kubectl(*args, stdin=None):
    return services.kubectl_rc(KUBECONFIG, *args, stdin=stdin)


def cfg(name, parent, cpu=(0, 0), mem=(0, 0), share=1.0, **kw):
    res = [rp.ResourceConfig(kind="cpu", reservation=cpu[0], limit=cpu[1], share=share),
           rp.ResourceConfig(kind="memory", reservation=mem[0], limit=mem[1], share=share)]
    return rp.ResourcePoolConfig(name=name, parent=pb.ResourcePoolID(value=parent), resources=res, **kw)


def alive():
    assert PROC.poll() is None, open(LOG).read()[-3000:]
    assert STUB.Query(rp.QueryRequest(), timeout=5) is not None


def test_create_tree_natively_kubectl_sees_it():
    r = call("CreateResourcePool", rp.CreateRequest(config=cfg("org", "root", (40, 100), (4096, 16384),
                                                              owningTeam="ml", description="an org")),
             rp.CreateResponse)
    assert r.result.value == "org" and not r.HasField("error"), r
    r = STUB.CreateResourcePool(rp.CreateRequest(config=cfg("team1", "org", (10, 50), (1024, 8192),
                                                            policy=rp.PriorityFIFO)), timeout=10)
    assert r.result.value == "team1", r
    rc, out = kubectl("get", "rp", "team1", "-o", "json")
    assert rc == 0, out
    obj = json.loads(out)
    assert obj["spec"]["parent"] == "org"
    res = {x["kind"]: x for x in obj["spec"]["resources"]}
    assert res["cpu"]["reservation"] == "10" and res["cpu"]["limit"] == "50", res
    assert res["memory"]["reservation"] == "1Gi" and res["memory"]["limit"] == "8Gi", res  # MB are MiB
    rc, out = kubectl("get", "rp")
    assert rc == 0 and "org" in out and "team1" in out, out
    # lookup by path, get with children, query
    assert call("LookupResourcePoolID", rp.LookupRequest(path=rp.ResourcePoolPath(value="/org/team1")),
                rp.LookupResponse).id.value == "team1"
    assert STUB.LookupResourcePoolID(rp.LookupRequest(path=rp.ResourcePoolPath(value="/")), timeout=5).id.value == "root"
    g = call("GetResourcePool", rp.GetRequest(id=pb.ResourcePoolID(value="org"), includeChildPools=True), rp.GetResponse)
    assert g.poolinfo.path.value == "/org" and g.poolinfo.parent.value == "root", g
    assert [c.value for c in g.poolinfo.children] == ["team1"]
    assert [c.id.value for c in g.childPools] == ["team1"] and g.childPools[0].path.value == "/org/team1"
    assert g.poolinfo.config.owningTeam == "ml" and g.poolinfo.config.description == "an org"
    kinds = {x.kind: x for x in g.poolinfo.config.resources}
    assert kinds["cpu"].reservation == 40 and kinds["cpu"].limit == 100 and kinds["memory"].limit == 16384
    assert kinds["gpu"].limit == float("inf")  # no limit of its own
    root = STUB.GetResourcePool(rp.GetRequest(), timeout=5)  # no id: the root
    assert root.poolinfo.id.value == "root" and root.poolinfo.path.value == "/" and \
        [c.value for c in root.poolinfo.children] == ["org"], root
    q = call("Query", rp.QueryRequest(), rp.QueryResponse)
    assert sorted(p.id.value for p in q.resourcePools) == ["org", "root", "team1"]


def test_kubectl_applied_pool_is_returned_by_get():
    doc = {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "kpool"},
           "spec": {"parent": "org", "resources": [{"kind": "cpu", "reservation": "500m", "limit": 2, "share": 3,
                                                    "type": "STATIC"},
                                                   {"kind": "memory", "reservation": "512Mi", "limit": "2Gi"}],
                    "slackLimit": {"maxPercent": 30}}}
    rc, out = kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    assert rc == 0, out
    g = call("GetResourcePool", rp.GetRequest(id=pb.ResourcePoolID(value="kpool")), rp.GetResponse)
    assert not g.HasField("error"), g
    kinds = {x.kind: x for x in g.poolinfo.config.resources}
    assert kinds["cpu"].reservation == 0.5 and kinds["cpu"].limit == 2 and kinds["cpu"].share == 3
    assert kinds["cpu"].type == rp.STATIC and kinds["memory"].type == rp.ELASTIC
    assert kinds["memory"].reservation == 512 and kinds["memory"].limit == 2048
    assert g.poolinfo.config.slackLimit.maxPercent == 30 and g.poolinfo.config.controllerLimit.maxPercent == 100
    assert g.poolinfo.path.value == "/org/kpool" and g.poolinfo.config.parent.value == "org"
    assert g.poolinfo.config.changeLog.version == 1 and g.poolinfo.config.changeLog.createdAt > 1500000000000


def test_errors_in_pelotons_response_shape():
    r = call("CreateResourcePool", rp.CreateRequest(config=cfg("org", "root", (1, 2))), rp.CreateResponse)
    assert r.error.alreadyExists.id.value == "org" and "already exists" in r.error.alreadyExists.message, r
    # the core's rules, through the API server's validation
    r = call("CreateResourcePool", rp.CreateRequest(config=cfg("big", "org", (50, 40))), rp.CreateResponse)
    assert "cpu reservation 50 exceeds its limit 40" in r.error.invalidResourcePoolConfig.message, r
    r = call("CreateResourcePool", rp.CreateRequest(config=cfg("wide", "org", (1, 500))), rp.CreateResponse)
    assert "cpu limit 500 exceeds parent /org limit 100" in r.error.invalidResourcePoolConfig.message, r
    r = call("CreateResourcePool", rp.CreateRequest(config=cfg("orphan", "nope", (1, 2))), rp.CreateResponse)
    assert 'parent "nope" does not exist' in r.error.invalidResourcePoolConfig.message, r
    bad = rp.ResourcePoolConfig(name="k", resources=[rp.ResourceConfig(kind="bogus")])
    r = call("CreateResourcePool", rp.CreateRequest(config=bad), rp.CreateResponse)
    assert 'resources[0].kind: "bogus"' in r.error.invalidResourcePoolConfig.message, r
    r = call("CreateResourcePool", rp.CreateRequest(config=cfg("a/b", "root")), rp.CreateResponse)
    assert "is not a pool name" in r.error.invalidResourcePoolConfig.message, r
    g = call("GetResourcePool", rp.GetRequest(id=pb.ResourcePoolID(value="nope")), rp.GetResponse)
    assert g.error.notFound.id.value == "nope", g
    lk = call("LookupResourcePoolID", rp.LookupRequest(path=rp.ResourcePoolPath(value="/org/none")), rp.LookupResponse)
    assert lk.error.notFound.path.value == "/org/none", lk
    lk = call("LookupResourcePoolID", rp.LookupRequest(path=rp.ResourcePoolPath(value="org")), rp.LookupResponse)
    assert lk.error.invalidPath.path.value == "org", lk
    for name in ["big", "wide", "orphan"]:  # none of the refused ones was stored
        assert kubectl("get", "rp", name)[0] != 0


def test_update_then_delete():
    u = call("UpdateResourcePool", rp.UpdateRequest(id=pb.ResourcePoolID(value="team1"),
                                                    config=cfg("team1", "org", (20, 60), (2048, 8192))),
             rp.UpdateResponse)
    assert not u.HasField("error"), u
    rc, out = kubectl("get", "rp", "team1", "-o", "jsonpath={.spec.resources[0].reservation}")
    assert rc == 0 and out == "20", out
    u = call("UpdateResourcePool", rp.UpdateRequest(id=pb.ResourcePoolID(value="team1"),
                                                    config=cfg("team1", "kpool", (20, 60))), rp.UpdateResponse)
    assert "spec.parent is immutable" in u.error.invalidResourcePoolConfig.message, u
    u = call("UpdateResourcePool", rp.UpdateRequest(id=pb.ResourcePoolID(value="ghost"), config=cfg("", "org")),
             rp.UpdateResponse)
    assert u.error.notFound.id.value == "ghost", u
    d = call("DeleteResourcePool", rp.DeleteRequest(path=rp.ResourcePoolPath(value="/org")), rp.DeleteResponse)
    assert d.error.isNotLeaf.id.value == "org", d
    d = call("DeleteResourcePool", rp.DeleteRequest(path=rp.ResourcePoolPath(value="/org/team1")), rp.DeleteResponse)
    assert not d.HasField("error"), d
    # DELETE marks the pool (finalizer peloton.io/pool-protection); the resource
    # manager removes it at its next status tick once it holds no work
    services.wait_until(lambda: kubectl("get", "rp", "team1")[0] != 0, 15, "team1 gone")
    d = call("DeleteResourcePool", rp.DeleteRequest(path=rp.ResourcePoolPath(value="/org/team1")), rp.DeleteResponse)
    assert d.error.notFound.path.value == "/org/team1", d


def curl(proc, body, enc="json", extra=(), path="/api/v1", method="POST"):
    """A YARPC call with curl: (status, headers dict, body bytes)."""
    hdr = os.path.join(GEN, "h.txt")
    cmd = ["curl", "-s", "-o", "-", "-D", hdr, "-X", method, f"http://127.0.0.1:{NPORT}{path}",
           "-H", "Rpc-Caller: test", "-H", "Rpc-Service: peloton-resmgr", "-H", f"Rpc-Encoding: {enc}",
           "--data-binary", "@-"]
    if proc:
        cmd += ["-H", f"Rpc-Procedure: {proc}"]
    for e in extra:
        cmd += ["-H", e]
    p = subprocess.run(cmd, input=body, capture_output=True, timeout=30)
    blocks = [b for b in open(hdr, "rb").read().decode().split("\r\n\r\n") if b.strip()]
    lines = blocks[-1].split("\r\n")  # the final answer, after any "100 Continue"
    status = int(lines[0].split()[1])
    h = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if ":" in x)}
    return status, h, p.stdout


def test_yarpc_json_and_proto_with_curl():
    st, h, body = curl("peloton.api.respool.ResourceManager::CreateResourcePool",
                       json.dumps({"config": {"name": "yj", "parent": {"value": "org"},
                                              "resources": [{"kind": "cpu", "reservation": 1, "limit": 2, "share": 1}]}
                                   }).encode())
    assert st == 200 and h["rpc-status"] == "success" and json.loads(body) == {"result": {"value": "yj"}}, (st, h, body)
    st, h, body = curl("peloton.api.respool.ResourceManager::GetResourcePool", b'{"id":{"value":"yj"}}',
                       extra=["Context-TTL-Ms: 5000"])
    doc = json.loads(body)
    assert st == 200 and doc["poolinfo"]["path"] == {"value": "/org/yj"}, doc
    cpu = [r for r in doc["poolinfo"]["config"]["resources"] if r["kind"] == "cpu"][0]
    assert cpu["limit"] == 2 and cpu["type"] == "ELASTIC", cpu
    assert doc["poolinfo"]["config"]["changeLog"]["version"] == "1"  # 64-bit integers as strings
    # proto encoding: the same call with protobuf bodies
    req = rp.LookupRequest(path=rp.ResourcePoolPath(value="/org/yj")).SerializeToString()
    st, h, body = curl("peloton.api.respool.ResourceManager::LookupResourcePoolID", req, enc="proto")
    assert st == 200 and h["content-type"] == "application/x-protobuf", (st, h)
    assert rp.LookupResponse.FromString(body).id.value == "yj"
    # a body over 1 MiB (JSON padded with spaces): curl asks "Expect: 100-continue" and would
    # wait a second for the answer before sending it
    t0 = time.monotonic()
    st, h, body = curl("peloton.api.respool.ResourceManager::GetResourcePool",
                       b'{"id":{"value":"yj"}}' + b" " * (2 << 20))
    assert st == 200 and json.loads(body)["poolinfo"]["id"] == {"value": "yj"}, (st, body[:200])
    assert time.monotonic() - t0 < 0.9
    # the proto's own package name works too, and "/" as the path
    st, h, body = curl("peloton.api.v0.respool.ResourceManager::Query", b"", enc="proto", path="/")
    assert st == 200 and "yj" in [p.id.value for p in rp.QueryResponse.FromString(body).resourcePools]


def test_yarpc_bad_requests():
    P = "peloton.api.respool.ResourceManager::Query"
    cases = [
        (dict(proc=None, body=b"{}"), 400, "invalid-argument", "missing Rpc-Procedure"),
        (dict(proc=P, body=b"{}", enc="thrift"), 400, "invalid-argument", 'Rpc-Encoding "thrift"'),
        (dict(proc="peloton.api.respool.ResourceManager::Nope", body=b"{}"), 501, "unimplemented", "not served"),
        (dict(proc="no.Such::Service", body=b"{}"), 501, "unimplemented", "not served"),
        (dict(proc=P, body=b"{}", extra=["Context-TTL-Ms: soon"]), 400, "invalid-argument", "Context-TTL-Ms"),
        (dict(proc=P, body=b"{}", method="PUT"), 501, "unimplemented", "YARPC takes POST"),
        (dict(proc=P, body=b"{}", path="/api/v2"), 404, "not-found", "/api/v1"),
        (dict(proc=P, body=b"{not json"), 400, "invalid-argument", "invalid JSON"),
        (dict(proc=P, body=b'{"bogus":1}'), 400, "invalid-argument", "bogus: unknown field"),
        (dict(proc="peloton.api.respool.ResourceManager::GetResourcePool", body=b"\x0a\x05\x0a\x01", enc="proto"),
         400, "invalid-argument", "malformed protobuf"),
    ]
    for kw, status, code, msg in cases:
        st, h, body = curl(kw.pop("proc"), kw.pop("body"), **kw)
        assert st == status and h.get("rpc-status") == "error" and h.get("rpc-error-code") == code, (kw, st, h, body)
        assert msg in body.decode(), (kw, body)
    # oversize: refused from Content-Length alone, the connection closed
    st, h, body = curl(P, b"x" * (4 * 1024 * 1024 + 1))
    assert st == 429 and h["rpc-error-code"] == "resource-exhausted", (st, h, body)
    alive()


def nghttp(path, body, *headers):
    """A raw HTTP/2 request with nghttp: the response's header lines (grpc-status, ...)."""
    f = os.path.join(GEN, "body.bin")
    open(f, "wb").write(body)
    cmd = ["nghttp", "-v", "-t", "10", "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", f]
    for h in headers:
        cmd += ["-H", h]
    p = subprocess.run(cmd + [f"http://127.0.0.1:{NPORT}{path}"], capture_output=True, timeout=30)
    out = p.stdout.decode("latin-1")
    return {l.split(") ", 1)[1].split(": ", 1)[0]: l.split(": ", 1)[1] for l in out.splitlines()
            if "recv (stream_id=" in l and ": " in l.split(") ", 1)[1]}


def frame(msg, length=None, flag=0):
    return bytes([flag]) + (len(msg) if length is None else length).to_bytes(4, "big") + msg


def test_grpc_bad_input_each_gets_its_status():
    Q = WIRE + "Query"
    G = WIRE + "GetResourcePool"
    ok = nghttp(Q, frame(b""))
    assert ok.get("grpc-status") == "0", ok
    cases = [
        (Q, frame(b"")[:3], "13", "ended inside a message"),  # truncated prefix
        (Q, frame(b"abc", length=10), "13", "ended inside a message"),  # length past the data
        (Q, frame(b"abcdefgh", length=1), "13", "more than one request message"),  # short: the rest reads as a 2nd
        (Q, b"", "13", "no request message"),
        (Q, frame(b"", flag=1), "13", "compressed flag"),
        (G, frame(b"\xff\xff\xff"), "3", "malformed protobuf"),  # garbage protobuf
        (G, frame(b"\x0a\x02\x08\x01"), "3", "cannot decode"),  # a string field holding a varint
        (WIRE + "Nope", frame(b""), "12", "not served"),
        ("/no.Such/Service", frame(b""), "12", "not served"),
        (Q, frame(b"", length=64 << 20), "8", "larger than 4194304 bytes"),  # refused on the prefix alone
    ]
    for path, body, status, msg in cases:
        h = nghttp(path, body)
        assert h.get("grpc-status") == status and msg in h.get("grpc-message", ""), (path, body[:16], h)
    h = nghttp(Q, frame(b""), "grpc-timeout: 1x")
    assert h.get("grpc-status") == "13" and "grpc-timeout" in h.get("grpc-message", ""), h
    h = nghttp(Q, frame(b""), "grpc-encoding: gzip")
    assert h.get("grpc-status") == "12", h
    # a real oversize message from grpcio, and garbage through grpcio's raw bytes
    raw = CH.unary_unary(G)
    try:
        raw(b"\x0a" * 10, timeout=10)
        assert False
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    try:
        raw(b"\x0a\x80\x80\x80\x02" + b"a" * (4 << 20), timeout=30)
        assert False
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
    try:
        CH.unary_unary("/peloton.api.respool.ResourceManager/Nope")(b"", timeout=10)
        assert False
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e
    alive()


def test_many_concurrent_calls_on_one_connection():
    q = CH.unary_unary(WIRE + "LookupResourcePoolID", request_serializer=rp.LookupRequest.SerializeToString,
                       response_deserializer=rp.LookupResponse.FromString)
    futs = [q.future(rp.LookupRequest(path=rp.ResourcePoolPath(value="/org")), timeout=30) for _ in range(300)]
    assert all(f.result().id.value == "org" for f in futs)


def test_deadline_from_grpc_timeout_and_ttl():
    """A native role in its own process, against an API server that is
    stopped (SIGSTOP): the deadline, not the API, ends the call. JobManager.Query
    reads through the API server (pool reads may come from the read cache,
    whose watch a stopped server does not break)."""
    nport = services.free_port()
    d = services.tempdir()
    log = open(os.path.join(d, "native.log"), "w")
    p = subprocess.Popen([services.PELOTOND, "--roles=native", f"--native-port={nport}",
                          f"--server=http://127.0.0.1:{PORT}"], stdout=log, stderr=subprocess.STDOUT)
    services._procs.append(p)
    services.wait_port(nport, "native role alone")
    ch = nativeclient.channel(nport)
    stub = rpg.ResourceManagerStub(ch)
    try:
        assert stub.Query(rp.QueryRequest(), timeout=10, wait_for_ready=True) is not None
    except grpc.RpcError as e:
        raise AssertionError(f"{e}: " + open(os.path.join(d, "native.log")).read()[-3000:])
    os.kill(PROC.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        h = {}
        f = os.path.join(d, "q.bin")
        open(f, "wb").write(frame(b""))
        out = subprocess.run(["nghttp", "-v", "-H", "content-type: application/grpc", "-H", "grpc-timeout: 300m",
                              "-d", f, f"http://127.0.0.1:{nport}/peloton.api.job.JobManager/Query"],
                             capture_output=True, timeout=30)
        for l in out.stdout.decode("latin-1").splitlines():
            if "recv (stream_id=" in l and "grpc-" in l:
                k, v = l.split(") ", 1)[1].split(": ", 1)
                h[k] = v
        assert h.get("grpc-status") == "4", h  # DEADLINE_EXCEEDED
        assert 0.25 < time.monotonic() - t0 < 5
        st = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                             f"http://127.0.0.1:{nport}/api/v1", "-H", "Rpc-Caller: t", "-H", "Rpc-Service: s",
                             "-H", "Rpc-Encoding: json", "-H", "Context-TTL-Ms: 200", "-H",
                             "Rpc-Procedure: peloton.api.job.JobManager::Query", "-d", "{}"],
                            capture_output=True, text=True, timeout=30).stdout
        assert st == "504", st
    finally:
        os.kill(PROC.pid, signal.SIGCONT)
    assert stub.Query(rp.QueryRequest(), timeout=10) is not None  # the API is back: served again
    ch.close()
    assert services.stop(p) == 0, open(os.path.join(d, "native.log")).read()[-3000:]


def test_bearer_token_when_the_api_has_one():
    """pelotond with --token-file: the native port asks for the same token."""
    p, plog, nport, _ = nativeclient.start_with_token("s3cret-token")
    ch = nativeclient.channel(nport)
    stub = rpg.ResourceManagerStub(ch)
    for md in [None, [("authorization", "Bearer wrong")], [("authorization", "s3cret-token")]]:
        try:
            stub.Query(rp.QueryRequest(), timeout=10, wait_for_ready=True, metadata=md)
            assert False, md
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAUTHENTICATED, (md, e)
    ok = stub.Query(rp.QueryRequest(), timeout=10, metadata=[("authorization", "Bearer s3cret-token")])
    assert ok.resourcePools[0].id.value == "root"
    for extra, code in [([], "401"), (["-H", "Authorization: Bearer s3cret-token"], "200")]:
        st = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                             f"http://127.0.0.1:{nport}/api/v1", "-H", "Rpc-Caller: t", "-H", "Rpc-Service: s",
                             "-H", "Rpc-Encoding: json", "-H", "Rpc-Procedure: peloton.api.respool.ResourceManager::Query",
                             *extra, "-d", "{}"], capture_output=True, text=True, timeout=30).stdout
        assert st == code, (extra, st)
    ch.close()
    assert services.stop(p) == 0, open(plog).read()[-3000:]


def test_exit_clean_under_asan():
    alive()
    CH.close()
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]


run_tests("native-respool", dict(globals()))
