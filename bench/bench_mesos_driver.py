"""Benchmark: pods launched on Mesos agents through pelotond's Mesos driver
(release build, every role, --mesos-master) against a release
mesos-master-sim (agents of 16 cpus and 64 GiB, allocation every 100 ms,
20 ms staging and starting) and a redis-server on loopback (appendfsync
everysec). Prints figures; passes or fails nothing.

Each run: the agents' Nodes are waited for, then N pods (500m, 256Mi each,
schedulerName peloton, in a resource pool) are created through the API
over 8 pipelined connections, as bench_e2e creates its pods for the Kubelet
path: each admitted, placed, bound, launched by ACCEPT/LAUNCH, its STARTING
and RUNNING written to the pod and acknowledged.

  pods/s   N / (t1 - t0): t0 the wall time just before the first create is
           sent, t1 the wall
           time at which the master took the acknowledgement of the N-th
           TASK_RUNNING update (mesos-master-sim's running_acks and
           last_running_ack, polled every 20 ms on the sim, not on
           pelotond). The driver acknowledges an update only once its status
           write is stored, so t1 is also when the N-th pod was Running in
           the API (checked once at the end).
  cpu/pod  each process's CPU time (utime + stime from /proc) over
           [t0, t1], divided by N: pelotond, mesos-master-sim, redis-server,
           and this script (the creates and the sim's polling).
  memory   pelotond's RSS (/proc VmRSS) with the agents' Nodes written and
           no pods, and again once every pod is Running. Per agent: the
           slope of the first against the agent count between the runs'
           sizes; per task: the second minus the first over N (the whole
           process: the job manager's and models' per-pod state is in it).

pelotond runs as bench_e2e runs it (docs/benchmarks.md): its controllers,
the Mesos driver among them, reach its API server over a Unix-domain socket
(--unix-socket) and Redis over Redis's (--redis=unix://), as `make run`
does; the creates and the master are on loopback TCP. BENCH_MESOS_TCP=1
puts the controllers and Redis on loopback TCP instead (the method before
2026-11-28).

BENCH_MESOS_RUNS="pods:agents,..." (default 10000:1000,20000:5000) and
BENCH_MESOS_REPEAT (default 3) change the runs; BENCH_MESOS_TIMELINE=1 prints
the tasks launched and RUNNING acknowledged every 0.5 s of a run;
BENCH_MESOS_KEEP_LOG=PATH keeps (a copy of) pelotond's log of the last run.
"""
import asyncio
import json
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402
import mesosclient  # noqa: E402

ROOT = services.ROOT
services.PELOTOND = os.environ.get("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
mesosclient.MSIM = os.environ.get("MESOS_MASTER_SIM", os.path.join(ROOT, "bin", "mesos-master-sim"))
RUNS = [tuple(int(x) for x in r.split(":"))
        for r in os.environ.get("BENCH_MESOS_RUNS", "10000:1000,20000:5000").split(",")]
REPEAT = int(os.environ.get("BENCH_MESOS_REPEAT", "3"))
TIMELINE = os.environ.get("BENCH_MESOS_TIMELINE") == "1"
TCP = os.environ.get("BENCH_MESOS_TCP") == "1"


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def create_request(i, spec):
    body = json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"p{i}", "labels": {"peloton.io/resource-pool": "p", "t": "b"}},
                       "spec": spec}).encode()
    return (b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


async def create_conn(port, reqs, window=16):
    """Sends reqs on one connection, pipelined, at most window unanswered; the 201s."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = got = ok = 0
    while got < len(reqs):
        while sent < len(reqs) and sent - got < window:
            writer.write(reqs[sent])
            sent += 1
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        length = 0
        while True:
            h = await reader.readline()
            if h in (b"\r\n", b""):
                break
            if h.lower().startswith(b"content-length:"):
                length = int(h.split(b":")[1])
        await reader.readexactly(length)
        got += 1
        ok += status == 201
    writer.close()
    return ok


async def create_pods(port, reqs, conns=8):
    """Creates the pods over conns pipelined connections (as bench_e2e's loader);
    (pods created, wall time when the last was answered)."""
    oks = await asyncio.gather(*(create_conn(port, reqs[i::conns]) for i in range(conns)))
    return sum(oks), time.time()


def sim_state(port):
    return json.loads(mesosclient.call(port, {}, path="/sim/state", method="GET")[1])


def run(n, agents):
    sim, sim_port, _ = mesosclient.start_sim("--allocation-interval-ms=100", "--heartbeat-seconds=5",
                                             f"--agents={agents}", "--agent-cpus=16", "--agent-mem=65536")
    redis = services.start_redis("everysec")
    rproc, rdir, _ = services.start_redis.last
    local = [] if TCP else [f"--unix-socket={services.tempdir()}/api.sock", f"--redis=unix://{rdir}/redis.sock"]
    proc, port, log = services.start_pelotond(redis, "--roles=all", f"--mesos-master=http://127.0.0.1:{sim_port}",
                                              *local)
    try:
        services.wait_until(lambda: len(services.api(port, "GET", "/api/v1/nodes")[1]["items"]) == agents, 120,
                            "the agents' Nodes")
        res = [{"kind": "cpu", "reservation": "100000", "limit": "100000", "share": 1},
               {"kind": "memory", "reservation": "100000Gi", "limit": "100000Gi", "share": 1}]
        services.api(port, "POST", "/apis/peloton.io/v1alpha1/resourcepools",
                     {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "p"},
                      "spec": {"resources": res}})
        spec = {"schedulerName": "peloton", "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1000"],
                                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}
        time.sleep(1.5)  # the Nodes' writes and the first declines settle
        rss0 = rss_kib(proc.pid)
        pids = {"pelotond": proc.pid, "master-sim": sim.pid, "redis": rproc.pid, "bench": os.getpid()}
        cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
        st0 = sim_state(sim_port)
        reqs = [create_request(i, spec) for i in range(n)]
        t0 = time.time()
        loader = threading.Thread(target=lambda: created.append(asyncio.run(create_pods(port, reqs))))
        created = []
        loader.start()
        deadline = time.monotonic() + 600
        timeline = []
        while True:
            st = sim_state(sim_port)
            timeline.append((time.time() - t0, st["tasks_launched"], st["running_acks"]))
            if st["running_acks"] >= n:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{st['running_acks']} of {n} TASK_RUNNING acknowledged")
            time.sleep(0.02)
        cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
        loader.join()
        ok, t_created = created[0]
        dt = st["last_running_ack"] - t0
        rss1 = rss_kib(proc.pid)
        items = services.api(port, "GET", "/api/v1/namespaces/default/pods")[1]["items"]
        running = sum(1 for p in items if p.get("status", {}).get("phase") == "Running")
        if TIMELINE:
            step, nxt = 0.5, 0.5
            for t, launched, acked in timeline:
                if t >= nxt:
                    print(f"  {t:6.2f} s: {launched:6d} launched, {acked:6d} RUNNING acknowledged")
                    nxt += step
        cpu = ", ".join(f"{k} {(cpu1[k] - cpu0[k]) / n * 1e6:4.0f}" for k in pids)
        print(f"launch {n:6d} pods on {agents:5d} agents: {dt:6.2f} s, {n / dt:6.0f} pods/s to TASK_RUNNING "
              f"acknowledged ({running} Running; {ok} created in {t_created - t0:.2f} s); cpu/pod µs: {cpu}; pelotond RSS {rss0 / 1024:6.1f} MiB with the "
              f"agents, +{(rss1 - rss0) / n:4.2f} KiB/task; master: {st['tasks_launched']} launched, "
              f"{st['acks']}/{st['updates_sent']} updates acknowledged, {st['offers_sent']} offers, "
              f"{st['offers_declined']} declined, {st['revives'] - st0['revives']} REVIVEs, "
              f"{(st['calls'] - st0['calls']) / n:.2f} calls and {(st.get('writes', 0) - st0.get('writes', 0)) / n:.2f} "
              f"writes of the master per pod; "
              f"load {open('/proc/loadavg').read().split()[0]}", flush=True)
        return n / dt, rss0
    finally:
        services.stop(proc)
        if os.environ.get("BENCH_MESOS_KEEP_LOG"):
            shutil.copy(log, os.environ["BENCH_MESOS_KEEP_LOG"])
        services.stop(sim)
        services.stop(rproc)


try:
    idle = {}
    for n, agents in RUNS:
        rates = []
        for _ in range(REPEAT):
            rate, rss0 = run(n, agents)
            rates.append(rate)
            idle.setdefault(agents, []).append(rss0)
        rates.sort()
        print(f"== {n} pods on {agents} agents: median {rates[len(rates) // 2]:.0f} pods/s "
              f"(spread {rates[0]:.0f}-{rates[-1]:.0f}, {len(rates)} runs)", flush=True)
    sizes = sorted(idle)
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        med = {a: sorted(v)[len(v) // 2] for a, v in idle.items()}
        print(f"== pelotond RSS per agent: {(med[hi] - med[lo]) / (hi - lo):.2f} KiB "
              f"(medians {med[lo] / 1024:.1f} MiB at {lo}, {med[hi] / 1024:.1f} MiB at {hi} agents)", flush=True)
finally:
    services.stop_all()
