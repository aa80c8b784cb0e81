"""Benchmark: the native API (pelotond role native, release build) with h2load
(nghttp2-client) as the gRPC driver and curl-less YARPC over http.client.
Prints figures; passes or fails nothing.

  unary gRPC calls/s   ResourceManager.LookupResourcePoolID (a list of the
                       pools through the API server), v0 JobManager.Get and
                       v1alpha JobService.GetJob (from the native role's read
                       cache: docs/native-api.md "Read cache"), on 1 HTTP/2
                       connection and on 16, 100 streams in flight per
                       connection; with each: latency p50/p90/p99 (h2load's
                       per-request log) and the load average beside it
  unary YARPC calls/s  the same lookup over HTTP/1.1 keep-alive, JSON
  streaming gRPC       v1alpha JobService.ListPods of a 1,000-instance job
                       (10 messages of 100 PodSummaries per call; no job
                       manager runs, so every instance reads INITIALIZED),
                       calls/s and pod summaries/s, 1 connection
  gRPC over TLS        the lookup on a second pelotond with --native-tls
                       (a self-signed certificate, ALPN h2), 1 and 16
                       connections: what TLS costs the native port
"""
import http.client
import json
import os
import re
import ssl
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402

ROOT = services.ROOT
os.environ.setdefault("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
services.PELOTOND = os.environ["PELOTOND"]

REDIS = services.start_redis("everysec")
NPORT = services.free_port()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver,native", f"--native-port={NPORT}")
D = services.tempdir()
SECONDS = int(os.environ.get("BENCH_NATIVE_SECONDS", "5"))  # each unary series' length


def report(name, value, unit, target=""):
    print(f"bench {name:<46} {value:12.3f} {unit:<10} {target}")


def yarpc(proc, body, tls_port=None):
    c = (http.client.HTTPSConnection("127.0.0.1", tls_port, timeout=30, context=ssl._create_unverified_context())
         if tls_port else http.client.HTTPConnection("127.0.0.1", NPORT, timeout=30))
    c.request("POST", "/api/v1", body=json.dumps(body), headers={
        "Rpc-Procedure": proc, "Rpc-Encoding": "json", "Rpc-Caller": "bench", "Rpc-Service": "peloton"})
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def grpc_body(msg):
    return b"\0" + struct.pack(">I", len(msg)) + msg


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def h2load(path, body, n, conns, streams=100, lat=None, seconds=None, base=None):
    """calls/s and the count of 2xx answers; lat (a list) gets each call's
    latency in microseconds. seconds: run that long (after 1 s of warm-up)
    instead of n calls."""
    f = os.path.join(D, "body.bin")
    open(f, "wb").write(body)
    log = os.path.join(D, "h2load.log")
    count = ["-D", str(seconds), "--warm-up-time=1"] if seconds else ["-n", str(n)]
    out = subprocess.run(["h2load", *count, "-c", str(conns), "-m", str(streams), "-d", f,
                          "-H", "content-type: application/grpc", "-H", "te: trailers", f"--log-file={log}",
                          f"{base or f'http://127.0.0.1:{NPORT}'}{path}"], capture_output=True, text=True,
                         timeout=300).stdout
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    ok = int(re.search(r"(\d+) succeeded", out).group(1))
    n = int(re.search(r"requests: (\d+) total", out).group(1))
    if lat is not None:
        lat.extend(int(line.split("\t")[2]) for line in open(log) if line.count("\t") >= 2)
    return rps, ok, n


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] / 1000.0 if xs else float("nan")


def call_ok(path, msg):
    """One call of path answers OK (over YARPC's proto encoding, the same
    handler: h2load counts HTTP statuses, not grpc-status)."""
    svc, method = path.strip("/").split("/")
    c = http.client.HTTPConnection("127.0.0.1", NPORT, timeout=30)
    c.request("POST", "/api/v1", body=msg, headers={
        "Rpc-Procedure": f"{svc}::{method}", "Rpc-Encoding": "proto", "Rpc-Caller": "bench", "Rpc-Service": "peloton"})
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        print(f"bench {path}: HTTP {r.status} {body[:200]!r}")
    return r.status == 200


def main():
    services.wait_for(lambda: yarpc("peloton.api.respool.ResourceManager::Query", {})[0] == 200, what="native")
    st, r = yarpc("peloton.api.respool.ResourceManager::CreateResourcePool",
                  {"config": {"name": "bench", "resources": [{"kind": "cpu", "reservation": 1, "limit": 2, "share": 1}]}})
    assert st == 200 and r.get("result"), r
    st, r = yarpc("peloton.api.job.JobManager::Create",
                  {"config": {"name": "bench-job", "instanceCount": 1, "respoolID": {"value": "bench"},
                              "defaultConfig": {"resource": {"cpuLimit": 0.1, "memLimitMb": 16},
                                                "command": {"value": "true"}}}})
    assert st == 200 and r.get("jobId"), r
    jid = r["jobId"]["value"]
    # field 1 (path) holding field 1 (value) "/bench"
    lookup = bytes([0x0a, 8, 0x0a, 6]) + b"/bench"
    get = bytes([0x0a, 2 + len(jid), 0x0a, len(jid)]) + jid.encode()
    calls = [("LookupResourcePoolID", "/peloton.api.respool.ResourceManager/LookupResourcePoolID", lookup),
             ("JobManager.Get", "/peloton.api.job.JobManager/Get", get),
             ("JobService.GetJob", "/peloton.api.v1alpha.job.stateless.svc.JobService/GetJob", get)]
    for name, path, msg in calls:
        assert call_ok(path, msg), name
        for conns in (1, 16):
            lat = []
            rps, ok, n = h2load(path, grpc_body(msg), 0, conns, lat=lat, seconds=SECONDS)
            target = "target >= 20000" if "Get" in name else ""  # issue 18
            report(f"grpc {name} ({conns} conn, 100 streams each)", rps, "calls/s",
                   f"{ok}/{n} ok, load {loadavg()} {target}")
            report(f"grpc {name} ({conns} conn) latency p50/p90/p99", pct(lat, 50), "ms",
                   f"p90 {pct(lat, 90):.2f} ms, p99 {pct(lat, 99):.2f} ms")
    st, r = yarpc("peloton.api.v1alpha.job.stateless.svc.JobService::CreateJob",
                  {"spec": {"name": "bench-stream", "instanceCount": 1000, "respoolId": {"value": "bench"},
                            "defaultSpec": {"containers": [{"resource": {"cpuLimit": 0.01, "memLimitMb": 1},
                                                            "command": {"value": "true"}}]}}})
    assert st == 200 and r.get("jobId"), r
    sid = r["jobId"]["value"]
    lp = bytes([0x0a, 2 + len(sid), 0x0a, len(sid)]) + sid.encode()  # ListPodsRequest.job_id
    n = 500
    rps, ok, n = h2load("/peloton.api.v1alpha.job.stateless.svc.JobService/ListPods", grpc_body(lp), n, 1, 10)
    report("grpc stream ListPods 1000 pods (1 conn, 10 streams)", rps, "calls/s", f"{ok}/{n} ok")
    report("grpc stream ListPods pod summaries", rps * 1000, "pods/s")
    c = http.client.HTTPConnection("127.0.0.1", NPORT, timeout=30)
    n = 2000
    t0 = time.monotonic()
    for _ in range(n):
        c.request("POST", "/api/v1", body='{"path":{"value":"/bench"}}', headers={
            "Rpc-Procedure": "peloton.api.respool.ResourceManager::LookupResourcePoolID", "Rpc-Encoding": "json",
            "Rpc-Caller": "bench", "Rpc-Service": "peloton"})
        r = c.getresponse()
        r.read()
        assert r.status == 200
    report("yarpc json LookupResourcePoolID (1 client)", n / (time.monotonic() - t0), "calls/s")
    assert services.stop(PROC) == 0
    tport = services.free_port()
    tproc, _, tlog = services.start_pelotond(services.start_redis("everysec"), "--roles=apiserver,native",
                                              f"--native-port={tport}", "--native-tls", f"--tls-dir={D}/tls")
    services.wait_port(tport, "native TLS port")
    services.wait_for(lambda: yarpc("peloton.api.respool.ResourceManager::Query", {}, tport)[0] == 200,
                      what="native TLS")
    st, r = yarpc("peloton.api.respool.ResourceManager::CreateResourcePool",
                  {"config": {"name": "bench", "resources": [{"kind": "cpu", "reservation": 1, "limit": 2, "share": 1}]}},
                  tport)
    assert st == 200 and r.get("result"), r
    for conns in (1, 16):
        n = 20000
        rps, ok, n = h2load("/peloton.api.respool.ResourceManager/LookupResourcePoolID", grpc_body(lookup), n, conns,
                         base=f"https://127.0.0.1:{tport}")
        report(f"grpc TLS LookupResourcePoolID ({conns} conn, 100 streams each)", rps, "calls/s",
               f"{ok}/{n} ok")
    assert services.stop(tproc) == 0, open(tlog).read()[-2000:]


main()
