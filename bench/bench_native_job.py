"""Benchmark: a 10,000-instance BATCH job through the native API, from
JobManager.Create to every instance Running on kubelet-sim (issue 18's
target: <= 3 s, the Kubernetes path's end-to-end rate: bench_e2e).

Release binaries; redis-server (appendfsync everysec), pelotond with every
role, kubelet-sim with 1,000 nodes (64 cpu, 500 pods each; its Events off, as
bench_e2e runs it). The job is created over YARPC (JSON); Running is counted
from a watch of the pods (each pod once, by name), and the job's own view
(JobManager.Get runtime.taskStats RUNNING) is polled beside it. Prints the
figures and the load average; passes or fails nothing. Each run is followed
by the same Job created through the Kubernetes API (a Job object POSTed, as
kubectl apply does) on a fresh stack: after the create both take the same
path (the job manager makes the pods), so the two figures side by side show
what the native door costs. BENCH_NATIVE_JOB_N
sets the instance count, BENCH_NATIVE_JOB_RUNS the runs (default 1).
"""
import http.client
import json
import os
import signal
import subprocess
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


def thread_cpu(pid):
    """{thread: CPU seconds} of process pid: "main" (pelotond: the API server's loop), the others by name and
    thread id."""
    out, hz = {}, os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            st = open(f"/proc/{pid}/task/{tid}/stat").read()
        except OSError:
            continue
        name = "main" if int(tid) == pid else f"{st[st.index('(') + 1:st.rindex(')')]}-{tid}"
        f = st[st.rindex(")") + 2:].split()
        out[name] = out.get(name, 0) + (int(f[11]) + int(f[12])) / hz
    return out


def cpu_of(procs):
    """{"process/thread": CPU seconds} of the processes named in procs {name: pid}."""
    out = {}
    for pname, pid in procs.items():
        for t, v in thread_cpu(pid).items():
            out[f"{pname}/{t}"] = v
    return out


def metric(port, name):
    """The value of an unlabelled series on pelotond's /metrics, or None."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
    except OSError:
        return None
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


class PodWatch(threading.Thread):
    """Counts pods seen Running (each once), with the time each count was reached."""

    def __init__(self, port, rv):
        super().__init__(daemon=True)
        self.port, self.rv = port, rv
        self.running, self.first, self.last = set(), None, None
        self.added, self.added_at = 0, []  # pods created; the times the count passed each tenth
        self.running_at = []
        self.done = threading.Event()

    def run(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request("GET", f"/api/v1/pods?watch=1&resourceVersion={self.rv}")
        r = c.getresponse()
        while not self.done.is_set():
            line = r.readline()
            if not line:
                return
            if line.startswith(b'{"type":"ADDED"'):
                self.added += 1
                if self.added % (N // 10 or 1) == 0:
                    self.added_at.append(time.monotonic())
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
                    if len(self.running) % (N // 10 or 1) == 0:
                        self.running_at.append(now)
                    if len(self.running) >= N:
                        self.done.set()


def k8s_job(n):
    """The same job as a Job object (what kubectl apply sends)."""
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "bench-10k", "namespace": "default"},
            "spec": {"type": "BATCH", "instanceCount": n, "resourcePool": "bench",
                     "template": {"spec": {"restartPolicy": "Never", "containers": [{
                         "name": "w", "image": "busybox", "command": ["/bin/sh", "-c", "true"],
                         "resources": {"requests": {"cpu": "10m", "memory": "1Mi"}}}]}}}}


def one_run(run, via):
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
    procs = {"pelotond": proc.pid, "kubelet-sim": ksim.pid, "redis": services.start_redis.last[0].pid}
    cpu0 = cpu_of(procs)
    rec0 = metric(port, "peloton_jobmgr_reconciles_total")
    perf = None
    if os.environ.get("BENCH_NATIVE_JOB_PERF"):  # a profile of pelotond over the run: perf report -i <file>.<via>
        perf = subprocess.Popen(["perf", "record", "-q", "-F", "199", "--call-graph", "dwarf,16384", "-p",
                                 str(proc.pid), "-o", f"{os.environ['BENCH_NATIVE_JOB_PERF']}.{via}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    t0 = time.monotonic()
    if via == "native":
        st, r = yarpc(nport, "peloton.api.job.JobManager::Create",
                      {"config": {"name": "bench-10k", "type": "BATCH", "instanceCount": N, "respoolID": {"value": "bench"},
                                  "defaultConfig": {"resource": {"cpuLimit": 0.01, "memLimitMb": 1},
                                                    "command": {"value": "true"}}}})
        assert st == 200 and r.get("jobId"), r
        jid = r["jobId"]["value"]
    else:
        st, r = services.api(port, "POST", "/apis/peloton.io/v1alpha1/namespaces/default/jobs", k8s_job(N))
        assert st == 201, r
        jid = r["metadata"]["uid"]
    t_create = time.monotonic() - t0
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
    cpu1 = cpu_of(procs)
    rec1 = metric(port, "peloton_jobmgr_reconciles_total")
    if perf:
        perf.send_signal(signal.SIGINT)
        perf.wait(30)
    if t_pods is None:
        print(f"bench native job {N}: {len(w.running)} of {N} Running in 120 s (load {la})")
    else:
        report(f"{via} BATCH job {N} instances: Create -> all Running (run {run})", t_pods, "s",
               f"{N / t_pods:.0f} pods/s, load {la}, target <= 3 s")
        report(f"... first pod Running after", (w.first - t0) * 1000, "ms")
    report("... Create answered after", t_create * 1000, "ms")
    print("timeline: s after Create at each tenth of the pods created / Running")
    print("  created ", " ".join(f"{t - t0:.2f}" for t in w.added_at))
    print("  Running ", " ".join(f"{t - t0:.2f}" for t in w.running_at), flush=True)
    if t_job is not None:
        report("... JobManager.Get taskStats RUNNING = N after", t_job, "s")
    if rec0 is not None and rec1 is not None:  # each one walks the job's 10,000 records
        report("... job manager reconciles during the run", rec1 - rec0, "")
    used = sorted(((cpu1.get(k, 0) - v, k) for k, v in cpu0.items()), reverse=True)
    print("CPU per pod by thread (us): " + ", ".join(f"{k} {d / N * 1e6:.0f}" for d, k in used if d > 0.005),
          flush=True)
    w.done.set()
    services.stop(ksim)
    assert services.stop(proc) == 0
    services.stop_all()


def main():
    for run in range(1, RUNS + 1):
        one_run(run, "native")
        one_run(run, "kubernetes")  # the same Job POSTed to the API server: the same path after the create


main()
