#!/usr/bin/python3
"""Benchmark: pelotond's memory per running pod (issue 25), at a size that
runs in minutes. Not part of `make test`; `make bench` runs it at its small
default size. docs/benchmarks.md, "Memory per pod", says how to read it.

Starts redis-server, bin/pelotond (every role, as bench_scale does) and
bin/kubelet-sim on loopback with free ports; kubelet-sim registers NODES
nodes; then Jobs of PODS pods in all (BURSTS of them, one after the other,
each once the one before is Running). RSS of every process is read from
/proc before the first Job (the fleet alone) and once every pod is Running
and the processes have settled (SETTLE_SECONDS); the difference divided by
PODS is the memory per running pod. Redis's own count (INFO memory's
used_memory) is read at the same two moments, and each of the store's keys
is measured (MEMORY USAGE, redis_breakdown.py): redis_used_bytes_per_pod
and redis_keys (bytes per pod by key, the count of its elements and the mean
length of the JSON it holds). The CPU of each process over the
bursts, per pod, is printed beside it, with the load average.

SPLIT=1 runs the roles in processes of their own against the API server
(apiserver; resmgr+placement; jobmgr+native; hostmgr) so that the memory of
each part shows: the sum is more than one process (each has its own
caches), each part's figure says where the bytes are.

Parameters (environment): NODES (1000), PODS (20000), BURSTS (2),
SETTLE_SECONDS (5), SPLIT (0), PELOTOND, KUBELET_SIM (binaries),
KEEP=1 (keep the temporary directory and its logs). Prints one JSON line
with the figures (and writes it to BENCH_MEM_JSON when set).
"""
import json
import os
import resource
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("NODES", "1000")
os.environ.setdefault("PODS", "20000")
os.environ.setdefault("BACKLOG", "0")
os.environ.setdefault("BURSTS", "2")
import bench_scale as bs  # noqa: E402  (its Stack, workload and /proc readers)
import redis_breakdown  # noqa: E402

SETTLE = float(os.environ.get("SETTLE_SECONDS") or 5)
SPLIT = os.environ.get("SPLIT") == "1"
SPLIT_ROLES = ["resmgr,placement", "jobmgr,native", "hostmgr"]


def start_split(st):
    """The API server alone on st.port, and the controller roles in processes of their own."""
    st.pd = bs.spawn([bs.PELOTOND, "--roles=apiserver", f"--port={st.port}",
                      f"--redis=127.0.0.1:{st.redis_port}", f"--crds={os.path.join(bs.ROOT, 'crds')}",
                      "--insecure-allow-anonymous", "--max-requests-per-user=none",
                      "--max-watches-per-user=none"], st.pd_log)
    bs.wait_until(st.healthz_ok, 30, "pelotond /healthz")
    procs = {"apiserver": st.pd}
    for roles in SPLIT_ROLES:
        argv = [bs.PELOTOND, f"--roles={roles}", f"--server=http://127.0.0.1:{st.port}",
                f"--redis=127.0.0.1:{st.redis_port}", f"--port-file={os.path.join(st.d, roles + '.port')}",
                "--metrics=false"]
        if "native" in roles:
            argv.append(f"--native-port={st.native_port}")
        procs[roles] = bs.spawn(argv, os.path.join(st.d, roles.replace(",", "+") + ".log"))
    return procs


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    d = tempfile.mkdtemp(prefix="bench-mem-")
    st = bs.Stack(d)
    res = {"nodes": bs.NODES, "pods": bs.PODS, "bursts": bs.BURSTS, "split": SPLIT,
           "pelotond": bs.PELOTOND, "load_start": bs.loadavg()}
    try:
        st.start_redis()
        if SPLIT:
            procs = start_split(st)
        else:
            st.start_pelotond()
            bs.wait_until(st.healthz_ok, 30, "pelotond /healthz")
            procs = {"pelotond": st.pd}
        api = st.api
        bs.create(api, bs.POOLS, bs.pool(bs.POOL, "100000000"))
        st.start_ksim()
        bs.wait_until(lambda: "nodes registered" in open(st.ksim_log).read() or st.ksim.poll() is not None,
                      bs.PHASE_TIMEOUT, "kubelet-sim registration", every=0.5)
        if st.ksim.poll() is not None:
            raise RuntimeError("kubelet-sim exited: " + open(st.ksim_log).read()[-2000:])
        procs.update({"redis": st.redis, "kubelet-sim": st.ksim})
        time.sleep(SETTLE)
        rss0 = {k: bs.rss_mib(p.pid) for k, p in procs.items()}
        used0 = redis_breakdown.breakdown(st.redis_port)
        cpu0 = {k: bs.cpu_s(p.pid) for k, p in procs.items()}
        bs.WATCH = bs.RunningWatch(st.port)
        per = bs.PODS // bs.BURSTS
        t0 = time.monotonic()
        bursts = []
        for i in range(bs.BURSTS):
            n = per if i < bs.BURSTS - 1 else bs.PODS - per * (bs.BURSTS - 1)
            fig = {"pods": n, "load": bs.loadavg()}
            t = bs.now()
            bs.create(api, bs.JOBS, bs.job(f"burst-{i}", bs.POOL, n))
            if not bs.wait_running(api, f"burst-{i}", n, t, fig):
                raise RuntimeError(f"burst {i} did not finish: {fig}")
            bursts.append({k: fig.get(k) for k in ("pods", "all_s", "rate_pods_s", "load")})
        res["running_s"] = round(time.monotonic() - t0, 2)
        cpu1 = {k: bs.cpu_s(p.pid) for k, p in procs.items()}
        bs.WATCH.close()
        time.sleep(SETTLE)
        rss1 = {k: bs.rss_mib(p.pid) for k, p in procs.items()}
        res["bursts"] = bursts
        res["rss_fleet_mib"] = {k: round(v, 1) for k, v in rss0.items()}
        res["rss_running_mib"] = {k: round(v, 1) for k, v in rss1.items()}
        res["kib_per_pod"] = {k: round((rss1[k] - rss0[k]) * 1024 / bs.PODS, 2) for k in procs}
        res["cpu_us_per_pod"] = {k: round((cpu1[k] - cpu0[k]) * 1e6 / bs.PODS, 1) for k in procs}
        used1 = redis_breakdown.breakdown(st.redis_port)
        res["redis_used_bytes_per_pod"] = round((used1["used_memory"] - used0["used_memory"]) / bs.PODS)
        before = {k["key"]: k["bytes"] for k in used0["keys"]}
        res["redis_keys"] = {k["key"]: {"type": k["type"], "n": k["n"], "mean_obj": k["mean_obj"],
                                        "bytes_per_pod": round((k["bytes"] - before.get(k["key"], 0)) / bs.PODS)}
                             for k in used1["keys"]}
        res["load_end"] = bs.loadavg()
        if os.environ.get("BENCH_MEM_PAUSE"):  # keep the stack up for a look (heap dumps), seconds
            time.sleep(float(os.environ["BENCH_MEM_PAUSE"]))
    finally:
        bs.stop_all()
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(d, ignore_errors=True)
        else:
            res["dir"] = d
    line = json.dumps(res)
    print(line, flush=True)
    if os.environ.get("BENCH_MEM_JSON"):
        with open(os.environ["BENCH_MEM_JSON"], "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
