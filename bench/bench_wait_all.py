#!/usr/bin/python3
"""The cost of waiting for every online replica (issue #22): a primary with
two replicas (real redis-servers, loopback, AOF fsync always), and two
pelotond API servers with --redis-wait-replicas=1 taken in alternating
pairs: BENCH_OLD (the binary before: WAIT 1) and BENCH_NEW (after: WAIT 2,
the replicas online). Each run creates BENCH_CREATES ConfigMaps with
BENCH_THREADS clients and prints the creates per second, the median and
95th percentile of a create's latency, and the CPU per create of pelotond
and of the primary (from /proc/PID/stat), with the load average.
  BENCH_OLD=/path/pelotond BENCH_NEW=build/asan/pelotond python3 bench/bench_wait_all.py"""
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import redis_ha  # noqa: E402
import services  # noqa: E402

OLD, NEW = os.environ.get("BENCH_OLD"), os.environ.get("BENCH_NEW", services.PELOTOND)
CREATES, THREADS, PAIRS = (int(os.environ.get(k, d)) for k, d in
                           (("BENCH_CREATES", "400"), ("BENCH_THREADS", "4"), ("BENCH_PAIRS", "3")))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def run(binary, primary_port, primary_pid, tag):
    services.PELOTOND = binary
    p, port, log = services.start_pelotond(primary_port, "--redis-wait-replicas=1", "--redis-wait-timeout-ms=1000")
    lat, fails, lock = [], [0], threading.Lock()

    def client(k):
        for i in range(CREATES // THREADS):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{tag}-{k}-{i}"},
                    "data": {"k": "x" * 200}}
            t = time.monotonic()
            code, _ = services.api(port, "POST", "/api/v1/namespaces/default/configmaps", body, timeout=30)
            with lock:
                lat.append(time.monotonic() - t)
                fails[0] += code != 201
    c0, r0, t0 = cpu_s(p.pid), cpu_s(primary_pid), time.monotonic()
    ts = [threading.Thread(target=client, args=(k,)) for k in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall, c1, r1 = time.monotonic() - t0, cpu_s(p.pid), cpu_s(primary_pid)
    services.stop_clean(p, log)
    lat.sort()
    n = len(lat)
    return {"rate": n / wall, "p50": lat[n // 2] * 1000, "p95": lat[int(n * 0.95)] * 1000,
            "pelotond": (c1 - c0) / n * 1e6, "primary": (r1 - r0) / n * 1e6, "fails": fails[0]}


def main():
    assert OLD and os.path.exists(OLD), "BENCH_OLD: the pelotond to compare with"
    h = redis_ha.start(replicas=2)
    pport, ppid = h.ports["primary"], h.procs["primary"].pid
    res = {"old": [], "new": []}
    try:
        for i in range(PAIRS):
            order = [("old", OLD), ("new", NEW)] if i % 2 == 0 else [("new", NEW), ("old", OLD)]
            for side, binary in order:
                r = run(binary, pport, ppid, f"{side}{i}")
                res[side].append(r)
                print(f"pair {i + 1} {side}: {r['rate']:.0f} creates/s, latency p50 {r['p50']:.1f} ms p95 "
                      f"{r['p95']:.1f} ms, CPU per create: pelotond {r['pelotond']:.0f} us, primary "
                      f"{r['primary']:.0f} us, failed {r['fails']}; load {open('/proc/loadavg').read().split()[0]}",
                      flush=True)
        for k in ("rate", "p50", "p95", "pelotond", "primary"):
            o, n = statistics.median(x[k] for x in res["old"]), statistics.median(x[k] for x in res["new"])
            print(f"median {k}: old {o:.1f}, new {n:.1f}", flush=True)
    finally:
        services.stop_all()


main()
