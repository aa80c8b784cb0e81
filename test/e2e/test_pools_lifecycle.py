#!/usr/bin/python3
"""End-to-end (issue #16): pelotond with every role on a real redis-server,
kubelet-sim's Kubelets and real kubectl.

- Revocable work runs on slack, the cpu that non-revocable work leaves: in an
  idle cluster it is not preempted (before, each revocable pod shrank its own
  slack and six of ten preempted themselves); non-revocable work that needs
  the room still takes it back by preemption.
- A ResourcePool is deleted the Kubernetes way: DELETE marks it
  (deletionTimestamp, the peloton.io/pool-protection finalizer); a marked pool
  admits no new work and goes once it has no child pools and holds no work,
  so its usage never falls out of its ancestors' allocation; `kubectl delete
  -f` of a whole tree succeeds in one run and `--wait` returns when it is gone.
"""
import json
import os
import subprocess
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all")
KUBECONFIG = services.kubeconfig(PORT)
EX = os.path.join(services.ROOT, "examples")
FINALIZER = "peloton.io/pool-protection"
wait_until = services.wait_until


def kubectl(*args, stdin=None, check=True, timeout=60):
    r = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", *args], input=stdin, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr}")
    return r


def apply(objs):
    services.kubectl_apply(KUBECONFIG, objs)


def pool(name, cpu_res, cpu_lim, parent=None):
    spec = {"resources": [{"kind": "cpu", "reservation": str(cpu_res), "limit": str(cpu_lim), "share": 1}]}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name}, "spec": spec}


def pod(name, pool_name, cpu, labels=None, revocable=False):
    md = {"name": name, "namespace": "default", "labels": {"peloton.io/resource-pool": pool_name, **(labels or {})},
          "annotations": {"peloton.io/revocable": "true"} if revocable else {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}]}}


def pods(selector):
    return json.loads(kubectl("get", "pods", "-l", selector, "-o", "json").stdout)["items"]


def phases(selector):
    res = {}
    for p in pods(selector):
        ph = "Terminating" if p["metadata"].get("deletionTimestamp") else p.get("status", {}).get("phase", "Pending")
        res[ph] = res.get(ph, 0) + 1
    return res


def pod_scheduled(name):
    p = json.loads(kubectl("get", "pod", name, "-o", "json").stdout)
    return next((c for c in p.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), None)


def events(reason=None, name=None):
    return services.events(KUBECONFIG, name=name, reason=reason)


def get_pool(name):
    r = kubectl("get", "rp", name, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def pool_names():
    return {i["metadata"]["name"] for i in json.loads(kubectl("get", "rp", "-o", "json").stdout)["items"]}


def delete_pods(selector):
    kubectl("delete", "pods", "-l", selector, "--wait=false")
    wait_until(lambda: not pods(selector), 60, f"pods {selector} gone")


KS = services.start_kubelet_sim(KUBECONFIG, "--nodes=4", "--name-prefix=lc-", "--cpu=8", "--memory=32Gi",
                                expect=4)[0]  # 4 x 8 cpu = 32 cpu


# ---- item 1: slack ----

def test_revocable_work_in_an_idle_cluster_is_not_preempted():
    apply([pool("slack", 0, 32)])
    apply([pod(f"rv-{i}", "slack", 4, labels={"t": "rv"}, revocable=True) for i in range(10)])
    wait_until(lambda: phases("t=rv").get("Running") == 8, 60, "eight revocable pods running on 32 cpu")
    # preemption checks run every second and a pool gives back after 3 over in a row:
    # before, six of the eight were preempted within seconds ("over cpu slack entitlement by 24")
    time.sleep(6)
    assert phases("t=rv") == {"Running": 8, "Pending": 2}, phases("t=rv")
    assert not events("Preempted"), [e["message"] for e in events("Preempted")]
    st = get_pool("slack")["status"]
    assert st["slackEntitlement"]["cpu"] == "32" and st["allocation"]["cpu"] == "32", st


def test_non_revocable_demand_takes_slack_back_by_preemption():
    # continues from the test above: eight revocable pods hold the whole cluster
    apply([pool("batch", 0, 32)])
    apply([pod(f"bt-{i}", "batch", 4, labels={"t": "bt"}) for i in range(4)])
    wait_until(lambda: phases("t=bt").get("Running") == 4, 90, "non-revocable pods running after preemption")
    victims = events("Preempted")
    assert len(victims) >= 4 and all(v["involvedObject"]["name"].startswith("rv-") for v in victims), victims
    assert all("over cpu slack entitlement" in v["message"] for v in victims), [v["message"] for v in victims]
    # what is left of the revocable work fits the 16 cpu the batch pool leaves
    wait_until(lambda: phases("t=rv").get("Running") == 4 and "Terminating" not in phases("t=rv"), 60,
               "four revocable pods left running")
    delete_pods("t in (rv,bt)")
    kubectl("delete", "rp", "slack", "batch")


# ---- items 2 and 3: deletion ----

def alloc_cpu(name):
    return (get_pool(name) or {}).get("status", {}).get("allocation", {}).get("cpu")


def test_a_pool_holding_work_is_kept_until_it_is_empty():
    apply([pool("dept", 0, 32), pool("squad", 0, 16, "dept")])
    apply([pod(f"sq-{i}", "squad", 2, labels={"t": "sq"}) for i in range(2)])
    wait_until(lambda: phases("t=sq").get("Running") == 2, 60, "squad's pods running")
    wait_until(lambda: alloc_cpu("dept") == "4", 30, "dept's allocation to count squad's pods")
    r = kubectl("delete", "rp", "squad", "--wait=false")
    assert 'resourcepool.peloton.io "squad" deleted' in r.stdout, r.stdout
    # before, it was gone at once: its pods ran on and their 4 cpu left dept's allocation
    time.sleep(3)  # three status ticks of the resource manager
    sq = get_pool("squad")
    assert sq and sq["metadata"].get("deletionTimestamp") and FINALIZER in sq["metadata"]["finalizers"], sq
    assert alloc_cpu("dept") == "4" and alloc_cpu("squad") == "4", (get_pool("dept")["status"], sq["status"])
    assert phases("t=sq") == {"Running": 2}, phases("t=sq")
    ev = [e["message"] for e in events("Terminating", "squad")]
    assert ev and "no child pools (now 0) and no pod holds work in it (now 2)" in ev[0], ev
    # it admits no new work: a new pod waits and says why; a new Job is refused
    # (a gang of two: every member says why, in an Event and in PodScheduled)
    late = {"t": "late", "peloton.io/gang": "sq-late", "peloton.io/gang-size": "2"}
    apply([pod(f"sq-late-{i}", "squad", 1, labels=late) for i in range(2)])
    for i in range(2):
        ev = wait_until(lambda: [e["message"] for e in events("FailedScheduling", f"sq-late-{i}")], 30,
                        f"sq-late-{i}'s Event")
        assert "pool /dept/squad: is being deleted; it admits no new work" in ev[0], ev
        c = wait_until(lambda: pod_scheduled(f"sq-late-{i}"), 30, f"sq-late-{i}'s PodScheduled condition")
        assert c["status"] == "False" and c["reason"] == "WaitingForAdmission" and "is being deleted" in c["message"], c
    job = {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "late-job"},
           "spec": {"type": "BATCH", "resourcePool": "squad", "instanceCount": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    r = kubectl("apply", "-f", "-", stdin=json.dumps(job), check=False)
    assert r.returncode != 0 and "(Forbidden)" in r.stderr and 'resource pool "squad" is being deleted' in r.stderr, \
        r.stderr
    # nor child pools
    r = kubectl("apply", "-f", "-", stdin=json.dumps(pool("subsquad", 0, 1, "squad")), check=False)
    assert r.returncode != 0 and "(Forbidden)" in r.stderr, r.stderr
    # `kubectl delete --wait` returns once the pool is gone, not before
    waiter = subprocess.Popen(["kubectl", f"--kubeconfig={KUBECONFIG}", "delete", "rp", "squad", "--timeout=90s"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    assert waiter.poll() is None, waiter.communicate()
    assert get_pool("squad")
    delete_pods("t=sq")
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, (out, err)
    assert get_pool("squad") is None
    wait_until(lambda: alloc_cpu("dept") == "0", 30, "dept's allocation back to 0 once the work ended")
    # the held gang is told the pool's new state, not left saying "being deleted"
    for i in range(2):
        c = wait_until(lambda: "not found" in (pod_scheduled(f"sq-late-{i}") or {}).get("message", "") and
                       pod_scheduled(f"sq-late-{i}"), 30, f"sq-late-{i} told its pool is gone")
        assert c["status"] == "False" and c["reason"] == "WaitingForPool", c
        assert 'resource pool "squad" not found' in c["message"], c
        msgs = [e["message"] for e in events("FailedScheduling", f"sq-late-{i}")]
        assert any('resource pool "squad" not found' in m for m in msgs), msgs
    delete_pods("t=late")
    kubectl("delete", "rp", "dept", "--timeout=60s")
    assert get_pool("dept") is None


def test_kubectl_delete_f_of_a_whole_tree():
    tree = os.path.join(EX, "pools.yaml")  # ml, then its children training and serving
    kubectl("apply", "-f", tree)
    # before: the parent first got 409 "has 2 child pools"; a second run deleted it and failed on the children
    r = kubectl("delete", "-f", tree, "--timeout=90s", check=False)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.count("deleted") == 3, r.stdout
    assert not pool_names() & {"ml", "training", "serving"}, pool_names()
    # a tree with work in it: marked at once, gone when the work is
    kubectl("apply", "-f", tree)
    apply([pod("tr-0", "training", 1, labels={"t": "tr"})])
    wait_until(lambda: phases("t=tr").get("Running") == 1, 60, "a pod running in training")
    r = kubectl("delete", "-f", tree, "--wait=false", check=False)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: "serving" not in pool_names(), 30, "the empty leaf gone")
    time.sleep(2)
    assert {"ml", "training"} <= pool_names(), pool_names()
    delete_pods("t=tr")
    wait_until(lambda: not pool_names() & {"ml", "training"}, 30, "the rest of the tree gone with its work")


run_tests("test_pools_lifecycle", dict(globals()))
