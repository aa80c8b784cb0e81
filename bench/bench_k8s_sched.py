#!/usr/bin/python3
"""kube-scheduler's scheduling rate on a real control plane, alone and with
peloton-extender (issue #17): the same nodes and the same pods each time.

The control plane is scripts/k8s-real.sh's (etcd, kube-apiserver and
kube-scheduler v1.20.2 built from Debian's kubernetes source package, cached
in ~/.cache/peloton-k8s); without those binaries this benchmark says so and
exits 0 (`make bench` goes on). The nodes are Node objects made through the
API (NODES of 32 cores, Ready), with no kubelet: pods are only bound, never
run, so only kube-scheduler, the extender and the API server work.

One round: kube-scheduler (re)started with or without the extender in its
configuration and healthy, then PODS pods created at once (8 client
threads); the figures are

  create to all bound   the first create request to the last pod's bind as
                        a watch (started before the creates) sees it:
                        PODS / that time is the rate reported;
  first to last bind    kube-scheduler's own pace once pods are there.

Rounds alternate (alone, extender, alone, extender, ...) so that both see the
same machine load, and the pods of a round are deleted before the next.
kube-scheduler alone binds through its own client, which v1beta1 limits to
qps 50 / burst 100 by default (the manifest keeps the defaults); with the
extender's bind verb the extender posts the Bindings. So each configuration
runs twice: with the manifest's defaults, and with clientConnection qps and
burst raised to 5000 (K8S_SCHEDULER_QPS, scripts/k8s-real.sh), where the
limit is out of the way and the scheduling work itself is compared.

Environment: K8S_BENCH_NODES (default 1000), K8S_BENCH_PODS (1000),
K8S_BENCH_ROUNDS (2 of each), K8S_BENCH_QPS ("default 5000": the
clientConnection settings to run). Prints one line per round, a summary and
the load (/proc/loadavg)."""
import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "k8s-real.sh")


def skip(why):
    print(f"bench_k8s_sched: skipped: {why}")
    sys.exit(0)


try:
    from kubernetes import client, config, watch
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.access("/usr/bin/python3", os.X_OK):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    skip("the Python kubernetes client is not installed")

BIN = subprocess.run([SCRIPT, "bindir"], capture_output=True, text=True).stdout.strip()
for b in ("kube-apiserver", "kube-scheduler", "kube-scheduler-preempt", "kubectl"):
    if not os.access(os.path.join(BIN, b), os.X_OK):
        skip(f"{BIN}/{b} missing (scripts/k8s-real.sh build makes the cache, about 20 minutes once)")
if not os.access(os.path.join(ROOT, "bin", "peloton-extender"), os.X_OK):
    skip("bin/peloton-extender missing (make build)")
if subprocess.run(["sh", "-c", "command -v etcd"], capture_output=True).returncode:
    skip("etcd is not installed (apt-get install etcd-server)")

sys.path.insert(0, os.path.join(ROOT, "test", "k8s"))
import k8sreal  # noqa: E402
from k8sreal import wait_until  # noqa: E402

NODES = int(os.environ.get("K8S_BENCH_NODES", "1000"))
PODS = int(os.environ.get("K8S_BENCH_PODS", "1000"))
ROUNDS = int(os.environ.get("K8S_BENCH_ROUNDS", "2"))
QPS = os.environ.get("K8S_BENCH_QPS", "default 5000").split()

if not os.path.isdir(k8sreal.CRDS):  # build/crds-pre1.25, made by `make build`
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "crds-nocel.py"), os.path.join(ROOT, "crds"),
                    k8sreal.CRDS], check=True, cwd=ROOT)

C = k8sreal.Cluster()
API = config.new_client_from_config(config_file=C.kubeconfig)
API.configuration.connection_pool_maxsize = 16
CORE = client.CoreV1Api(API)
CUSTOM = client.CustomObjectsApi(API)
C.kubectl("apply", "-f", k8sreal.CRDS)
C.kubectl("wait", "--for=condition=established", "--timeout=30s", "crd/resourcepools.peloton.io")
C.forget_discovery()
C.kubectl("apply", "-k", os.path.join(ROOT, "manifests"))  # the extender's RBAC
C.kubectl("create", "namespace", "bench")
CUSTOM.create_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", {
    "apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "bench"},
    "spec": {"resources": [{"kind": "cpu", "reservation": str(NODES * 32), "limit": str(NODES * 32)},
                           {"kind": "memory", "reservation": "1Ti", "limit": f"{NODES * 128}Gi"}]}})


def in_threads(fn, items, n=8):
    """fn(item) for every item, in n threads."""
    def some(k):
        for x in items[k::n]:
            fn(x)
    ts = [threading.Thread(target=some, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)


def make_node(i):
    name = f"node-{i:05d}"
    res = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    CORE.create_node({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                      "status": {"capacity": res, "allocatable": res,
                                 "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                                 "message": "no kubelet: a benchmark's node"}]}})


t0 = time.monotonic()
in_threads(make_node, list(range(NODES)))
wait_until(lambda: len(CORE.list_node().items) == NODES, 120, f"{NODES} nodes")
print(f"bench_k8s_sched: {NODES} nodes made in {time.monotonic() - t0:.1f} s", flush=True)
EXT, EXT_PORT, _ = k8sreal.start_extender(C)
URL = f"http://127.0.0.1:{EXT_PORT}/peloton"


def pod(j):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p-{j}", "labels": {"peloton.io/resource-pool": "bench"}},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}


SERVER = C.env["K8S_SERVER"]
TOKEN = open(C.path("tokens.csv")).readline().split(",")[0]
CTX = ssl.create_default_context(cafile=C.path("ca.crt"))


def create_pods(names):
    """POSTs the pods from 8 threads, each on its keep-alive connection, the
    bodies made beforehand (the Python client's own encoding would be the
    bottleneck)."""
    host, port = SERVER.split("//")[1].split(":")
    bodies = [json.dumps(pod(j)).encode() for j in names]
    hdrs = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    errors = []

    def some(k):
        c = http.client.HTTPSConnection(host, int(port), context=CTX, timeout=60)
        for b in bodies[k::8]:
            c.request("POST", "/api/v1/namespaces/bench/pods", body=b, headers=hdrs)
            r = c.getresponse()
            r.read()
            if r.status != 201:
                errors.append(r.status)
        c.close()
    ts = [threading.Thread(target=some, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    assert not errors, f"pod creates failed: {errors[:5]}"


def healthz_pods():
    import urllib.request
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{EXT_PORT}/healthz", timeout=5).read())["pods"]


def one_round(with_extender, qps, queued):
    """queued: the pods are created while kube-scheduler is stopped, then it
    starts (its pace alone); else it runs and the pods come as a burst."""
    C.stop_scheduler()
    CORE.delete_collection_namespaced_pod("bench", grace_period_seconds=0)
    wait_until(lambda: not CORE.list_namespaced_pod("bench").items, 120, "bench pods deleted", every=0.5)
    wait_until(lambda: healthz_pods() == 0, 60, "extender without pods", every=0.5)
    if qps == "default":
        os.environ.pop("K8S_SCHEDULER_QPS", None)
    else:
        os.environ["K8S_SCHEDULER_QPS"] = qps
    if not queued:
        C.start_scheduler(URL if with_extender else None, "preempt")
        time.sleep(1)  # its informers have listed (healthz answers before they have)
    rv = CORE.list_namespaced_pod("bench").metadata.resource_version
    seen = {}
    done = threading.Event()

    def watch_binds():  # each pod's first event with a node is its bind, timed on arrival
        w = watch.Watch()
        for ev in w.stream(CORE.list_namespaced_pod, "bench", resource_version=rv, timeout_seconds=600):
            p = ev["object"]
            if p.spec.node_name and p.metadata.name not in seen:
                seen[p.metadata.name] = time.monotonic()
                if len(seen) == PODS:
                    break
        w.stop()
        done.set()
    t = threading.Thread(target=watch_binds, daemon=True)
    t.start()
    time.sleep(0.3)  # the watch is open
    t_create = time.monotonic()
    create_pods(list(range(PODS)))
    t_created = time.monotonic()
    create_s = t_created - t_create
    if queued:
        C.start_scheduler(URL if with_extender else None, "preempt")
        t_create = time.monotonic()  # the clock starts with kube-scheduler
    assert done.wait(600), f"only {len(seen)} of {PODS} pods bound in 600 s"
    times = sorted(seen.values())
    first, last = times[0], times[-1]
    rate = PODS / (last - t_create)
    pace = (PODS - 1) / (last - first) if last > first else float("inf")
    what = "kube-scheduler start to all bound" if queued else "create to all bound"
    print(f"{'extender' if with_extender else 'alone   '} qps={qps:<7} {'queued' if queued else 'burst '}: {PODS} pods "
          f"on {NODES} nodes: {rate:6.1f} pods/s {what} ({last - t_create:.2f} s; the creates took "
          f"{create_s:.2f} s), {pace:6.1f} pods/s first to last bind", flush=True)
    return rate, pace


results = {}
try:
    for _ in range(ROUNDS):
        for queued in (False, True):
            for qps in QPS:
                for ext in (False, True):
                    results.setdefault((queued, qps, ext), []).append(one_round(ext, qps, queued))
    for (queued, qps, ext), r in results.items():
        rates = [x[0] for x in r]
        paces = [x[1] for x in r]
        print(f"bench k8s sched {'queued' if queued else 'burst'} {'with extender' if ext else 'alone'} qps={qps}: "
              f"median {statistics.median(rates):.1f} pods/s "
              f"{'kube-scheduler start' if queued else 'create'} to all bound (runs: "
              f"{', '.join(f'{x:.1f}' for x in rates)}); first to last bind median {statistics.median(paces):.1f} "
              f"pods/s (runs: {', '.join(f'{x:.1f}' for x in paces)})")
    print("bench k8s sched load:", open("/proc/loadavg").read().strip())
finally:
    k8sreal.stop_all()
