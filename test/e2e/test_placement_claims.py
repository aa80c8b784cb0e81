#!/usr/bin/python3
"""End-to-end: placement engines run active-active (pelotond
--placement-active-active) claim host capacity in Redis before binding
(src/ctl/placement_claim.h, docs/lifecycle.md, "Fencing and claims"), so
two engines never commit the same free capacity. One API server, kubelet-sim
with 4 nodes of 2 cpus, and three controller processes: the resource manager,
and two placement engines:
- 48 pods of 500m (room for 16) admitted at once: both engines place from
  their own copies of the nodes, yet no pod is refused by its Kubelet
  (OutOfcpu) and exactly 16 run; without the claims the engines book the same
  room twice (kubelet-sim then fails the pods OutOfcpu);
- a claim never bound (planted, owner "ghost", filling a node) keeps that
  node's room from the engines until it expires, then a pod lands there.
Every wait is bounded; every process is stopped."""
import json
import os
import subprocess
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
API_PROC, PORT, API_LOG = services.start_pelotond(REDIS, "--roles=apiserver")
KUBECONFIG = services.kubeconfig(PORT)
SIM, SIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=4", "--name-prefix=aa-", "--cpu=2", "--memory=8Gi",
                                          expect=4)
wait_until = services.wait_until
CTL = []


def redis(*args):
    return services.redis_call(REDIS, *args)


def start_ctl(name, roles):
    log = os.path.join(services.tempdir(), f"{name}.log")
    # admission and placement every millisecond: each engine gets some of each burst, while the
    # other's bindings are still on their way into its copy of the nodes
    p = subprocess.Popen([services.PELOTOND, f"--roles={roles}", f"--server=http://127.0.0.1:{PORT}",
                          f"--redis=127.0.0.1:{REDIS}", "--placement-active-active", "--lease-ms=3000",
                          "--admission-round-ms=1", "--placement-tick-ms=1"],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT)
    services._procs.append(p)
    CTL.append((p, log))
    wait_until(lambda: "controllers running" in open(log).read() or p.poll() is not None, 15, f"{name} to start")
    assert p.poll() is None, open(log).read()


def kubectl(*args, check=True):
    return services.kubectl(KUBECONFIG, *args, check=check)


def pod(name, cpu="500m", selector=None):
    spec = {"schedulerName": "peloton", "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"peloton.io/resource-pool": "aa", "t": name.split("-")[0]}},
            "spec": spec}


def pods(label):
    return json.loads(kubectl("get", "pods", "-l", label, "-o", "json"))["items"]


def counts(label):
    items = pods(label)
    bound = [p for p in items if p["spec"].get("nodeName")]
    out_of = [p["metadata"]["name"] for p in items if (p.get("status") or {}).get("reason", "").startswith("OutOf")]
    running = [p for p in items if (p.get("status") or {}).get("phase") == "Running"]
    return len(bound), out_of, len(running)


def test_two_engines_never_book_the_same_room():
    start_ctl("rm", "resmgr")
    start_ctl("a", "placement")
    start_ctl("b", "placement")
    services.kubectl_apply(KUBECONFIG, [{"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool",
                                         "metadata": {"name": "aa"},
                                         "spec": {"resources": [{"kind": "cpu", "reservation": "64", "limit": "64",
                                                                 "share": 1}]}}])
    time.sleep(1)  # both engines' caches hold the nodes
    services.kubectl_apply(KUBECONFIG, [pod(f"many-{i}") for i in range(48)])
    wait_until(lambda: counts("t=many")[0] >= 16, 60, "the room filled")
    time.sleep(3)  # Kubelets admit or refuse what was bound; late bindings land
    bound, out_of, running = counts("t=many")
    assert not out_of, f"{len(out_of)} pods refused by their Kubelet: {out_of[:5]}"
    assert bound == 16 and running == 16, (bound, running)
    print(f"48 pods, room for 16: {bound} bound, {running} running, 0 OutOfcpu")
    kubectl("delete", "pods", "-l", "t=many", "--wait=false")
    wait_until(lambda: not pods("t=many"), 60, "the pods gone")


def test_a_claim_never_bound_expires():
    sec, usec = redis("TIME")
    now = int(sec) * 1000 + int(usec) // 1000
    # a claim of all of aa-3's cpu by an engine that never binds, expiring in 4 s
    redis("HSET", "peloton:claims:aa-3", "ghost-pod-uid", f"ghost 2000 0 0 {now + 4000}")
    t0 = time.monotonic()
    services.kubectl_apply(KUBECONFIG, [pod("pinned-0", cpu="1", selector={"kubernetes.io/hostname": "aa-3"})])
    time.sleep(2)
    assert not (pods("t=pinned")[0]["spec"].get("nodeName")), "placed on room another engine claimed"
    wait_until(lambda: pods("t=pinned")[0]["spec"].get("nodeName") == "aa-3", 15, "placed once the claim expired")
    took = time.monotonic() - t0
    assert took >= 3.5, took
    assert "ghost-pod-uid" not in (redis("HKEYS", "peloton:claims:aa-3") or [])
    assert counts("t=pinned")[1] == []


def test_clean_shutdown():
    for p, log in CTL:
        assert services.stop(p) == 0, open(log).read()[-2000:]
    services.stop(SIM)
    assert services.stop(API_PROC) == 0, open(API_LOG).read()[-2000:]


run_tests("placement-claims", dict(globals()))
