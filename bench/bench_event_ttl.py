#!/usr/bin/python3
"""What the Event TTL costs (docs/benchmarks.md, "The Event TTL").

A private redis-server (AOF, fsync everysec) and pelotond --roles=apiserver
--event-ttl=TTL (release build, bin/pelotond unless PELOTOND is set); N
Events are created over keep-alive connections (BENCH_TTL_EVENTS, default
20,000; BENCH_TTL_SECONDS, default 3), then the run waits until the sweeper
has deleted them all. Printed, with the load average: the time from the
last create to the last delete, and pelotond's and redis-server's CPU (from
/proc/PID/stat) over that window per Event removed (which includes the
sweeper's scans and the deletes' watch events; nobody watches), with the
sweeper's own counters from /metrics. BENCH_TTL_ROUNDS (default 2) rounds
on fresh servers."""
import http.client
import json
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
import services  # noqa: E402  (after PELOTOND is chosen)

N = int(os.environ.get("BENCH_TTL_EVENTS", "20000"))
TTL = int(os.environ.get("BENCH_TTL_SECONDS", "3"))
ROUNDS = int(os.environ.get("BENCH_TTL_ROUNDS", "2"))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def load():
    return open("/proc/loadavg").read().split()[0]


def metric(port, name):
    for line in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def create_many(port, first, count):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in range(first, first + count):
        body = json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"pod-{i}.1"},
                           "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": f"pod-{i}",
                                              "namespace": "default"},
                           "reason": "Scheduled", "type": "Normal", "message": f"Successfully assigned pod-{i}",
                           "source": {"component": "bench"}, "count": 1})
        c.request("POST", "/api/v1/namespaces/default/events", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        assert r.status == 201, r.status
    c.close()


def one_round():
    d = services.tempdir()
    redis = services.start_redis(fsync="everysec", d=d)
    rproc = services.start_redis.last[0]
    proc, port, log = services.start_pelotond(redis, f"--event-ttl={TTL}s")
    threads = [threading.Thread(target=create_many, args=(port, k * (N // 4), N // 4)) for k in range(4)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = time.monotonic()
    p0, r0, l0 = cpu_s(proc.pid), cpu_s(rproc.pid), load()
    # the first delete comes about TTL + 1 s after the first create; the CPU
    # before it is the writes' (counted from the last create on, the window
    # holds only the sweeper's work and the idle loop)
    deadline = made + TTL + 120
    while time.monotonic() < deadline:
        if services.redis_call(redis, "ZCARD", "pc:idx:events") == 0:
            break
        time.sleep(0.05)
    gone = time.monotonic()
    p1, r1, l1 = cpu_s(proc.pid), cpu_s(rproc.pid), load()
    deleted = metric(port, "peloton_apiserver_event_ttl_deleted_total")
    scanned = metric(port, "peloton_apiserver_event_ttl_scanned_total")
    print(f"  created {N} in {made - t0:.1f} s; all deleted {gone - made:.1f} s after the last create "
          f"(TTL {TTL} s); deleted {deleted:.0f}, scanned {scanned:.0f}; per Event removed: pelotond "
          f"{(p1 - p0) / N * 1e6:.1f} µs, redis-server {(r1 - r0) / N * 1e6:.1f} µs; load {l0} -> {l1}",
          flush=True)
    services.stop(proc)
    services.stop(rproc)


for r in range(ROUNDS):
    print(f"round {r + 1} of {ROUNDS}", flush=True)
    one_round()
services.stop_all()
