#!/usr/bin/python3
"""Benchmark: what pelotond (every role, bin/pelotond) spends when nothing
happens, as pods grow (issue #25), and what a node's Lease renewal costs it.

One stack on loopback: redis-server, pelotond, kubelet-sim with NODES nodes
(their Leases renewed every 30 s, status every 10 min, no Events), twenty
ResourcePools and a BATCH Job in one of them whose instances run until
stopped. The Job grows through the pod counts in PODS; at each, once every
pod is Running and the stack has settled, pelotond's CPU (utime + stime from
/proc/PID/stat) over SECS seconds, the lower of two such windows, is the
idle cost:

  idle cost at N pods    ms of CPU per second: the per-second scans
                         (preemption, pool status, host checks), the job
                         manager's resyncs and the Leases; it should not
                         grow with N (the scans are per pool, not per pod)

Then a second kubelet-sim with LEASE_NODES nodes of its own renews their
Leases every LEASE_RENEW seconds (merge PATCH of spec.renewTime, as a
Kubelet does); pelotond's CPU per second with it (the lower of two windows
of SECS seconds, once registration has settled), less the same with that
kubelet-sim stopped (SIGSTOP, within its 40 s leases: the same fleet, no
renewals), divided by the renewals per second, is

  lease renewal          µs of pelotond CPU per renewal (the API server's
                         write, the store, the watch events to the host
                         manager's informer, the host manager's check);
                         the two CPU rates it comes from are printed too
                         (what is per node and per second, not per renewal,
                         shows in the second)

Environment: BENCH_IDLE_NODES (1000), BENCH_IDLE_PODS ("5000,20000"),
BENCH_IDLE_SECS (10), BENCH_LEASE_NODES (1000), BENCH_LEASE_RENEW (1),
BENCH_IDLE_HOLD (seconds to keep the stack up at the end, for perf; 0).
Figures only, with the load (/proc/loadavg) beside them; asserts nothing
about timing."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402

ROOT = services.ROOT
services.PELOTOND = os.environ.get("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
services.KUBELET_SIM = os.environ.get("KUBELET_SIM", os.path.join(ROOT, "bin", "kubelet-sim"))
NODES = int(os.environ.get("BENCH_IDLE_NODES", "1000"))
PODS = [int(x) for x in os.environ.get("BENCH_IDLE_PODS", "5000,20000").split(",") if x]
SECS = float(os.environ.get("BENCH_IDLE_SECS", "10"))
LEASE_NODES = int(os.environ.get("BENCH_LEASE_NODES", "1000"))
LEASE_RENEW = float(os.environ.get("BENCH_LEASE_RENEW", "1"))
HOLD = float(os.environ.get("BENCH_IDLE_HOLD", "0"))
HZ = os.sysconf("SC_CLK_TCK")
JOBS = "/apis/peloton.io/v1alpha1/namespaces/default/jobs"


def load():
    return open("/proc/loadavg").read().strip()


def report(name, value, unit, note=""):
    print(f"bench {name:<46} {value:12.3f} {unit:<10} {note}", flush=True)


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ


def cpu_per_s(pid, secs):
    a, t = cpu_s(pid), time.monotonic()
    time.sleep(secs)
    return (cpu_s(pid) - a) / (time.monotonic() - t)


def running(port):
    _, body = services.api(port, "GET", JOBS + "/idle")
    return ((body.get("status") or {}).get("taskStats") or {}).get("RUNNING", 0)


def wait_running(port, n, limit):
    t0, last, seen = time.monotonic(), -1, time.monotonic()
    while time.monotonic() - t0 < limit:
        r = running(port)
        if r >= n:
            return True
        if r != last:
            last, seen = r, time.monotonic()
        elif time.monotonic() - seen > 120:
            break  # no progress for two minutes
        time.sleep(2)
    print(f"bench_idle: only {last} of {n} pods Running", flush=True)
    return False


def main():
    redis = services.start_redis("everysec")
    proc, port, log = services.start_pelotond(redis, "--roles=all")
    kc = services.kubeconfig(port)
    services.start_kubelet_sim(kc, f"--nodes={NODES}", "--cpu=64", "--memory=256Gi", "--pods=500", "--quiet",
                               "--events=false", "--lease-seconds=40", "--renew-seconds=30",
                               "--status-seconds=600", expect=NODES)
    for i in range(20):
        services.api(port, "POST", "/apis/peloton.io/v1alpha1/resourcepools", {
            "apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": f"p{i}"},
            "spec": {"resources": [{"kind": "cpu", "reservation": "100000" if i == 0 else "1", "limit": "1000000"},
                                   {"kind": "memory", "reservation": "1000Ti" if i == 0 else "1Gi",
                                    "limit": "10000Ti"}]}})
    job = {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "idle"},
           "spec": {"type": "BATCH", "resourcePool": "p0", "instanceCount": PODS[0],
                    "sla": {"priority": 1, "preemptible": True},
                    "template": {"spec": {"restartPolicy": "Never", "containers": [
                        {"name": "w", "image": "busybox",
                         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}
    code, body = services.api(port, "POST", JOBS, job)
    if code != 201:
        sys.exit(f"bench_idle: Job create: {code} {body}")
    idle = {}
    for n in PODS:
        if n != PODS[0]:
            services.api(port, "PATCH", JOBS + "/idle", {"spec": {"instanceCount": n}},
                         ctype="application/merge-patch+json")
        if not wait_running(port, n, 1800):
            break
        time.sleep(15)  # the last writes and events settle
        idle[n] = min(cpu_per_s(proc.pid, SECS), cpu_per_s(proc.pid, SECS))  # the lower of two: less noise
        report(f"idle cost at {n} pods, {NODES} nodes", idle[n] * 1000, "ms/s", f"load {load()}")
    if len(idle) >= 2:
        a, b = min(idle), max(idle)
        report(f"idle cost ratio {b} / {a} pods", idle[b] / idle[a] if idle[a] else 0, "x", "(1 = flat)")
    if idle and LEASE_NODES:
        lease_sim, _ = services.start_kubelet_sim(kc, f"--nodes={LEASE_NODES}", "--name-prefix=lease-node-", "--cpu=1",
                                   "--quiet", "--events=false", "--lease-seconds=40",
                                   f"--renew-seconds={LEASE_RENEW}", "--status-seconds=3600",
                                   expect=LEASE_NODES)
        time.sleep(LEASE_RENEW * 2 + 20)  # registrations and their first statuses done; renewals at their pace
        with_leases = min(cpu_per_s(proc.pid, SECS), cpu_per_s(proc.pid, SECS))
        # the same fleet with those kubelets stopped (well within their 40 s
        # leases): what is left is everything but the renewals
        os.kill(lease_sim.pid, signal.SIGSTOP)
        time.sleep(2)
        base = min(cpu_per_s(proc.pid, SECS), cpu_per_s(proc.pid, SECS))
        os.kill(lease_sim.pid, signal.SIGCONT)
        per_s = LEASE_NODES / LEASE_RENEW
        nodes = NODES + LEASE_NODES
        report(f"pelotond at {nodes} nodes, {per_s:.0f} renewals/s", with_leases * 1000, "ms/s", f"load {load()}")
        report(f"pelotond at {nodes} nodes, renewals stopped", base * 1000, "ms/s")
        report(f"lease renewal ({LEASE_NODES} nodes, every {LEASE_RENEW:g} s)",
               (with_leases - base) / per_s * 1e6, "us", f"{per_s:.0f}/s; load {load()}")
    if HOLD:
        print(f"bench_idle: pelotond pid {proc.pid}, holding {HOLD:g} s", flush=True)
        time.sleep(HOLD)
    services.stop_all()


main()
