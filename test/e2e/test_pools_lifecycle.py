#!/usr/bin/python3
"""End-to-end (issue #16): pelotond with every role on a real redis-server,
kubelet-sim's Kubelets and real kubectl.

- Revocable work runs on slack, the cpu that non-revocable work leaves: in an
  idle cluster it is not preempted (before, each revocable pod shrank its own
  slack and six of ten preempted themselves); non-revocable work that needs
  the room still takes it back by preemption.
- A ResourcePool is deleted the Kubernetes way: DELETE marks it
  (deletionTimestamp, the peloton.io/resource-pool finalizer); a marked pool
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
FINALIZER = "peloton.io/resource-pool"
wait_until = services.wait_until


def kubectl(*args, stdin=None, check=True, timeout=60):
    r = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", *args], input=stdin, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr}")
    return r


def apply(objs):
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))


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


def events(reason=None, name=None):
    items = json.loads(kubectl("get", "events", "-o", "json").stdout)["items"]
    return [e for e in items if (reason is None or e.get("reason") == reason) and
            (name is None or e.get("involvedObject", {}).get("name") == name)]


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


run_tests("test_pools_lifecycle", dict(globals()))
