#!/usr/bin/python3
"""kube-scheduler's scheduling rate on the real control plane
(scripts/k8s-real.sh), alone and with peloton-extender (issue #17): the same
nodes and the same pods each time. Per round: kube-scheduler stopped, PODS
pending pods created, kube-scheduler started; the rate is the pods bound
between the first and the last bind a watch sees, over that time. Rounds alternate
(alone, extender, alone, extender, ...) so both see the same machine load.

Environment: K8S_BENCH_NODES (default 50), K8S_BENCH_PODS (300),
K8S_BENCH_ROUNDS (2 of each). Prints one line per round and a summary."""
import os
import statistics
import sys
import threading
import time

from kubernetes import client, config, watch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8sreal  # noqa: E402
from k8sreal import wait_until  # noqa: E402

NODES = int(os.environ.get("K8S_BENCH_NODES", "50"))
PODS = int(os.environ.get("K8S_BENCH_PODS", "300"))
ROUNDS = int(os.environ.get("K8S_BENCH_ROUNDS", "2"))

C = k8sreal.Cluster()
API = config.new_client_from_config(config_file=C.kubeconfig)
CORE = client.CoreV1Api(API)
CUSTOM = client.CustomObjectsApi(API)
C.kubectl("apply", "-f", k8sreal.CRDS)
C.kubectl("wait", "--for=condition=established", "--timeout=30s", "crd/resourcepools.peloton.io")
C.forget_discovery()
C.kubectl("apply", "-k", os.path.join(k8sreal.ROOT, "manifests"))  # the extender's RBAC
C.kubectl("create", "namespace", "bench")
CUSTOM.create_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", {
    "apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "bench"},
    "spec": {"resources": [{"kind": "cpu", "reservation": str(NODES * 32), "limit": str(NODES * 32)},
                           {"kind": "memory", "reservation": "1Ti", "limit": "64Ti"}]}})
k8sreal.start_kubelet_sim(C, NODES, 32, memory="128Gi")
EXT, EXT_PORT, _ = k8sreal.start_extender(C)
URL = f"http://127.0.0.1:{EXT_PORT}/peloton"


def create_pods():
    def some(k):
        for j in range(k, PODS, 4):
            CORE.create_namespaced_pod("bench", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"p-{j}", "labels": {"peloton.io/resource-pool": "bench"}},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}})
    ts = [threading.Thread(target=some, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)


def bound_count():
    return sum(1 for p in CORE.list_namespaced_pod("bench").items if p.spec.node_name)


def one_round(with_extender):
    C.stop_scheduler()
    CORE.delete_collection_namespaced_pod("bench", grace_period_seconds=0)
    wait_until(lambda: not CORE.list_namespaced_pod("bench").items, 120, "bench pods deleted", every=0.5)
    wait_until(lambda: k8sreal_healthz_pods() == 0, 60, "extender without pods", every=0.5)
    create_pods()
    rv = CORE.list_namespaced_pod("bench").metadata.resource_version
    # a watch from the list on, started before kube-scheduler: each pod's
    # first event with a node is its bind, timed on arrival
    seen = {}
    done = threading.Event()

    def watch_binds():
        w = watch.Watch()
        for ev in w.stream(CORE.list_namespaced_pod, "bench", resource_version=rv, timeout_seconds=600):
            pod = ev["object"]
            if pod.spec.node_name and pod.metadata.name not in seen:
                seen[pod.metadata.name] = time.monotonic()
                if len(seen) == PODS:
                    break
        w.stop()
        done.set()
    t = threading.Thread(target=watch_binds, daemon=True)
    t.start()
    t_start = time.monotonic()
    C.start_scheduler(URL if with_extender else None, "preempt")
    assert done.wait(600), f"only {len(seen)} of {PODS} pods bound in 600 s"
    times = sorted(seen.values())
    first, last = times[0], times[-1]
    rate = (PODS - 1) / (last - first) if last > first else float("inf")
    print(f"{'extender' if with_extender else 'alone   '}: {PODS} pods on {NODES} nodes, {rate:.1f} pods/s "
          f"(first bind to last: {last - first:.2f} s; kube-scheduler start to last bind: {last - t_start:.2f} s)",
          flush=True)
    return rate


def k8sreal_healthz_pods():
    import json
    import urllib.request
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{EXT_PORT}/healthz", timeout=5).read())["pods"]


rates = {False: [], True: []}
try:
    for _ in range(ROUNDS):
        for ext in (False, True):
            rates[ext].append(one_round(ext))
    for ext in (False, True):
        r = rates[ext]
        print(f"summary {'with the extender' if ext else 'kube-scheduler alone'}: median {statistics.median(r):.1f} "
              f"pods/s (runs: {', '.join(f'{x:.1f}' for x in r)})")
finally:
    k8sreal.stop_all()
