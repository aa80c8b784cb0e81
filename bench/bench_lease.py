#!/usr/bin/python3
"""Benchmark: the API server's CPU per Lease renewal (issue #25).

One stack on loopback: redis-server (appendfsync everysec) and pelotond with
the API server alone (bin/pelotond, or PELOTOND; PELOTOND_OLD names a second
binary to compare with), and kubelet-sim (bin/kubelet-sim) with NODES nodes
renewing their Leases every RENEW seconds (merge PATCH of spec.renewTime, as
a Kubelet does; node status every 10 min, no Events, no pods). pelotond's
CPU (utime + stime from /proc/PID/stat) over SECS seconds with the renewals,
less the same with kubelet-sim stopped (SIGSTOP, within its 40 s leases),
divided by the renewals a second (NODES / RENEW; every Lease's renewTime
read from Redis before and after checks that each was renewed), is

  lease renewal   µs of pelotond CPU per renewal: reading the request,
                  the patch, the store's script, the answer

and the same for redis-server's CPU (its share of a renewal: the commands
pelotond sends for it), with the commands Redis ran per renewal in the
window (INFO commandstats: calls per renewal, a script's calls included,
and µs inside the top-level ones: the scripts and the reads before them).

With PELOTOND_OLD the two binaries run in alternating pairs (ROUNDS of
them, each on a fresh stack), so that the load of a shared machine falls on
both alike; the load (/proc/loadavg) is printed beside every figure.
Environment: BENCH_LEASE_NODES (2000), BENCH_LEASE_RENEW (2),
BENCH_LEASE_SECS (10), BENCH_LEASE_ROUNDS (2). Figures only; asserts nothing
about timing."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402

ROOT = services.ROOT
NEW = os.environ.get("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
OLD = os.environ.get("PELOTOND_OLD")
services.KUBELET_SIM = os.environ.get("KUBELET_SIM", os.path.join(ROOT, "bin", "kubelet-sim"))
NODES = int(os.environ.get("BENCH_LEASE_NODES", "2000"))
RENEW = float(os.environ.get("BENCH_LEASE_RENEW", "2"))
SECS = float(os.environ.get("BENCH_LEASE_SECS", "10"))
ROUNDS = int(os.environ.get("BENCH_LEASE_ROUNDS", "2"))
HZ = os.sysconf("SC_CLK_TCK")


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ


def commandstats(redis_port):
    """{command: (calls, usec)} from INFO commandstats."""
    out = subprocess.run(["redis-cli", "-p", str(redis_port), "INFO", "commandstats"], capture_output=True,
                         timeout=60).stdout.decode()
    st = {}
    for line in out.splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[8:].split(":", 1)
            kv = dict(x.split("=", 1) for x in rest.strip().split(","))
            st[name] = (int(kv["calls"]), int(kv["usec"]))
    return st


def renew_times(redis_port):
    """Every Lease's renewTime, by name, read from Redis (the store's layout, docs/store.md)."""
    out = subprocess.run(["redis-cli", "-p", str(redis_port), "--raw", "HGETALL", "pc:obj:leases.coordination.k8s.io"],
                         capture_output=True, timeout=60).stdout.decode().split("\n")
    rt = {}
    for k, v in zip(out[0::2], out[1::2]):
        if k.startswith("o:"):
            rt[k] = json.loads(v).get("spec", {}).get("renewTime")
    return rt


def one(binary):
    """µs of pelotond CPU per renewal on a fresh stack, with the CPU rates it comes from."""
    services.PELOTOND = binary
    redis = services.start_redis(fsync="everysec")
    proc, port, _ = services.start_pelotond(redis)
    kc = services.kubeconfig(port)
    sim, _ = services.start_kubelet_sim(kc, f"--nodes={NODES}", "--name-prefix=lease-", f"--renew-seconds={RENEW}",
                                        "--lease-seconds=40", "--status-seconds=600", "--events=false", "--quiet",
                                        expect=NODES)
    time.sleep(RENEW + 2)  # registration settled, renewals spread over their period
    rpid = services.start_redis.last[0].pid
    before = renew_times(redis)
    s0, c0, r0, t0 = commandstats(redis), cpu_s(proc.pid), cpu_s(rpid), time.monotonic()
    time.sleep(SECS)
    c1, r1, t1, s1 = cpu_s(proc.pid), cpu_s(rpid), time.monotonic(), commandstats(redis)
    after = renew_times(redis)
    renewed = sum(1 for k, v in after.items() if before.get(k) != v)
    assert renewed >= NODES * 0.99, f"only {renewed} of {NODES} Leases renewed in {SECS} s"
    busy, rbusy = (c1 - c0) / (t1 - t0), (r1 - r0) / (t1 - t0)
    os.kill(sim.pid, signal.SIGSTOP)
    time.sleep(1)
    c2, r2, t2 = cpu_s(proc.pid), cpu_s(rpid), time.monotonic()
    time.sleep(SECS)
    c3, r3, t3 = cpu_s(proc.pid), cpu_s(rpid), time.monotonic()
    os.kill(sim.pid, signal.SIGCONT)
    quiet, rquiet = (c3 - c2) / (t3 - t2), (r3 - r2) / (t3 - t2)
    rate = NODES / RENEW
    n = rate * (t1 - t0)
    # the window's commands, less the benchmark's own INFO (one call in s1)
    cmds = {k: (v[0] - s0.get(k, (0, 0))[0] - (k == "info"), v[1] - s0.get(k, (0, 0))[1]) for k, v in s1.items()}
    calls = ", ".join(f"{k} {c / n:.2f}" for k, (c, _) in sorted(cmds.items()) if c > 0)
    # a script's time includes the commands it calls (counted apart too): top-level ones only
    inside = sum(u for k, (c, u) in cmds.items() if k in ("evalsha", "eval", "get")) / n + \
        cmds.get("hget", (0, 0))[1] / max(cmds.get("hget", (0, 0))[0], 1) * max(
            cmds.get("hget", (0, 0))[0] - cmds.get("xadd", (0, 0))[0], 0) / n
    services.stop_all()
    return {"us": (busy - quiet) / rate * 1e6, "busy": busy * 1000, "quiet": quiet * 1000, "rate": rate,
            "rus": (rbusy - rquiet) / rate * 1e6, "rbusy": rbusy * 1000, "calls": calls, "inside": inside}


def main():
    print(f"bench_lease: {NODES} nodes renewing every {RENEW} s (load {load()})", flush=True)
    builds = [("new", NEW)] + ([("old", OLD)] if OLD else [])
    for r in range(ROUNDS):
        for name, binary in (builds if r % 2 == 0 else builds[::-1]):
            f = one(binary)
            print(f"  round {r + 1} {name}: lease renewal {f['us']:.1f} µs of pelotond CPU "
                  f"({f['busy']:.1f} ms/s with {f['rate']:.0f} renewals/s, {f['quiet']:.1f} ms/s without), "
                  f"{f['rus']:.1f} µs of redis-server CPU ({f['rbusy']:.1f} ms/s); redis commands per renewal: "
                  f"{f['calls']} ({f['inside']:.1f} µs inside the top-level ones) (load {load()})", flush=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        services.stop_all()
