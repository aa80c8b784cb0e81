"""Benchmark: a 10,000-instance BATCH job through the native API, from
JobManager.Create to every instance Running on kubelet-sim (issue 18's
target: <= 3 s, the Kubernetes path's end-to-end rate: bench_e2e).

Release binaries; redis-server (appendfsync everysec), pelotond with every
role, kubelet-sim with 1,000 nodes (64 cpu, 500 pods each; its Events off, as
bench_e2e runs it). The job is created over YARPC (JSON); Running is counted
from a watch of the pods (each pod once, by name), and the job's own view
(JobManager.Get runtime.taskStats RUNNING) is polled beside it. Prints the
figures and the load average; passes or fails nothing. BENCH_NATIVE_JOB_N
sets the instance count, BENCH_NATIVE_JOB_RUNS the runs (default 1).
"""
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402

ROOT = services.ROOT
os.environ.setdefault("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
services.PELOTOND = os.environ["PELOTOND"]
services.KUBELET_SIM = os.environ.get("KUBELET_SIM", os.path.join(ROOT, "bin", "kubelet-sim"))
N = int(os.environ.get("BENCH_NATIVE_JOB_N", "10000"))
RUNS = int(os.environ.get("BENCH_NATIVE_JOB_RUNS", "1"))
NODES = 1000


def report(name, value, unit, extra=""):
    print(f"bench {name:<52} {value:12.3f} {unit:<8} {extra}", flush=True)


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def yarpc(nport, proc, body, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", nport, timeout=timeout)
    c.request("POST", "/api/v1", body=json.dumps(body), headers={
        "Rpc-Procedure": proc, "Rpc-Encoding": "json", "Rpc-Caller": "bench", "Rpc-Service": "peloton"})
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"{}")


class PodWatch(threading.Thread):
    """Counts pods seen Running (each once), with the time each count was reached."""

    def __init__(self, port, rv):
        super().__init__(daemon=True)
        self.port, self.rv = port, rv
        self.running, self.first, self.last = set(), None, None
        self.done = threading.Event()

    def run(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request("GET", f"/api/v1/pods?watch=1&resourceVersion={self.rv}")
        r = c.getresponse()
        while not self.done.is_set():
            line = r.readline()
            if not line:
                return
            if b'"Running"' not in line:
                continue
            ev = json.loads(line)
            o = ev.get("object", {})
            if o.get("status", {}).get("phase") == "Running" and ev.get("type") != "DELETED":
                name = o["metadata"]["name"]
                if name not in self.running:
                    self.running.add(name)
                    now = time.monotonic()
                    self.first = self.first or now
                    self.last = now
                    if len(self.running) >= N:
                        self.done.set()


def one_run(run):
    redis = services.start_redis("everysec")
    nport = services.free_port()
    proc, port, _log = services.start_pelotond(redis, "--roles=all", f"--native-port={nport}")
    services.wait_port(nport, "native port")
    kcfg = services.kubeconfig(port)
    ksim, _ = services.start_kubelet_sim(kcfg, f"--nodes={NODES}", "--cpu=64", "--memory=256Gi", "--pods=500",
                                         "--quiet", "--events=false", expect=NODES)
    st, r = yarpc(nport, "peloton.api.respool.ResourceManager::CreateResourcePool",
                  {"config": {"name": "bench", "resources": [
                      {"kind": "cpu", "reservation": 64000, "limit": 64000, "share": 1},
                      {"kind": "memory", "reservation": 1 << 26, "limit": 1 << 26, "share": 1}]}})
    assert st == 200 and r.get("result"), r
    time.sleep(2)  # the controllers see the pool and the nodes (as bench_e2e waits)
    st, lst = services.api(port, "GET", "/api/v1/pods?limit=1")
    w = PodWatch(port, lst["metadata"]["resourceVersion"])
    w.start()
    t0 = time.monotonic()
    st, r = yarpc(nport, "peloton.api.job.JobManager::Create",
                  {"config": {"name": "bench-10k", "type": "BATCH", "instanceCount": N, "respoolID": {"value": "bench"},
                              "defaultConfig": {"resource": {"cpuLimit": 0.01, "memLimitMb": 1},
                                                "command": {"value": "true"}}}})
    t_create = time.monotonic() - t0
    assert st == 200 and r.get("jobId"), r
    jid = r["jobId"]["value"]
    t_job = None
    deadline = t0 + 120
    while time.monotonic() < deadline and (t_job is None or not w.done.is_set()):
        if t_job is None:
            st, g = yarpc(nport, "peloton.api.job.JobManager::Get", {"id": {"value": jid}})
            stats = g.get("jobInfo", {}).get("runtime", {}).get("taskStats", {})
            if stats.get("RUNNING", 0) >= N:
                t_job = time.monotonic() - t0
        w.done.wait(0.05)
    t_pods = (w.last - t0) if w.done.is_set() else None
    la = loadavg()
    if t_pods is None:
        print(f"bench native job {N}: {len(w.running)} of {N} Running in 120 s (load {la})")
    else:
        report(f"native BATCH job {N} instances: Create -> all Running (run {run})", t_pods, "s",
               f"{N / t_pods:.0f} pods/s, load {la}, target <= 3 s")
        report(f"... first pod Running after", (w.first - t0) * 1000, "ms")
    report("... Create answered after", t_create * 1000, "ms")
    if t_job is not None:
        report("... JobManager.Get taskStats RUNNING = N after", t_job, "s")
    w.done.set()
    services.stop(ksim)
    assert services.stop(proc) == 0
    services.stop_all()


def main():
    for run in range(1, RUNS + 1):
        one_run(run)


main()
