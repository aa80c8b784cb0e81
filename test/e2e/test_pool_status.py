#!/usr/bin/python3
"""End-to-end (issue #21, "Events and status that explain"): a ResourcePool's
status says how many gangs wait and run and, in conditions, why it does not
admit (the rule and the numbers) and whether it borrows above its
reservation; the status is written only when it changes. pelotond with every
role on a real redis-server, kubelet-sim's nodes, real kubectl."""
import json
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all")
KUBECONFIG = services.kubeconfig(PORT)
wait_until = services.wait_until


def kubectl(*args, stdin=None):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin)


def apply(objs):
    services.kubectl_apply(KUBECONFIG, objs)


def pool(name, cpu_res, cpu_lim, parent=None):
    spec = {"resources": [{"kind": "cpu", "reservation": str(cpu_res), "limit": str(cpu_lim), "share": 1}]}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name}, "spec": spec}


def pod(name, pool_name, cpu):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"peloton.io/resource-pool": pool_name}},
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}]}}


def get_pool(name):
    return json.loads(kubectl("get", "resourcepool", name, "-o", "json"))


def condition(obj, ctype):
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return {}


KS, _ = services.start_kubelet_sim(KUBECONFIG, "--nodes=3", "--name-prefix=ps-", "--cpu=4", "--memory=32Gi",
                                   expect=3)
# jobs: 1 cpu, for a Job of two 1-cpu instances (one runs, one waits for admission)
# full (under org): 2 cpu reserved and its limit; borrow: 1 cpu reserved, up to 6
apply([pool("org", 4, 8), pool("full", 2, 2, "org"), pool("borrow", 1, 6), pool("jobs", 1, 1)])
apply([pod("full-run", "full", 2), pod("full-w1", "full", 1), pod("full-w2", "full", 1),
       pod("borrow-run", "borrow", 3)])


def test_a_pool_at_its_entitlement_says_why_and_how_many_wait():
    def held():
        p = get_pool("full")
        c = condition(p, "Admitting")
        return c.get("status") == "False" and p["status"].get("gangs", {}).get("pending") == 2 and \
            p["status"]["gangs"].get("running") == 1 and c
    c = wait_until(held, 20, "pool full: Admitting False with 2 gangs waiting and 1 running")
    assert c["reason"] == "AtEntitlement", c
    assert "cpu entitlement: 2 of 2 cores allocated" in c["message"] and "2 gangs wait" in c["message"], c
    assert c.get("lastTransitionTime"), c
    # the parent: the sums over its subtree, and its held leaf
    org = get_pool("org")
    assert org["status"]["gangs"] == {"pending": 2, "running": 1}, org["status"]
    c = condition(org, "Admitting")
    assert c["status"] == "False" and c["reason"] == "AtEntitlement" and "pool /org/full at its cpu entitlement" in c["message"], c
    # the printer column
    out = kubectl("get", "resourcepool", "full")
    head, row = out.splitlines()[:2]
    assert "PENDING" in head.split(), out
    assert head.split()[-2] == "PENDING" and row.split()[-2] == "2", out  # (PARENT is empty: count from the end)


def test_a_pool_above_its_reservation_says_it_borrows():
    def borrowing():
        c = condition(get_pool("borrow"), "Borrowing")
        return c.get("status") == "True" and c
    c = wait_until(borrowing, 20, "pool borrow: Borrowing True")
    assert c["reason"] == "AboveReservation", c
    assert "cpu: allocation 3 exceeds reservation 1 by 2" in c["message"], c
    c = condition(get_pool("full"), "Borrowing")
    assert c.get("status") == "False", c

apply([{"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "waits", "namespace": "default"},
        "spec": {"type": "BATCH", "resourcePool": "jobs", "instanceCount": 2,
                 "template": {"spec": {"containers": [{"name": "c", "image": "x",
                                                       "resources": {"requests": {"cpu": "1"}}}]}}}}])


def test_a_job_whose_pods_wait_for_admission_says_why():
    def why():
        j = json.loads(kubectl("get", "pj", "waits", "-o", "json"))
        c = condition(j, "Running")
        return c.get("reason") == "WaitingForAdmission" and c
    c = wait_until(why, 20, "job waits: Running False, WaitingForAdmission")
    assert c["status"] == "False", c
    assert c["message"].startswith("1 of 1 waiting pods: WaitingForAdmission; e.g. "), c
    # the pool, its numbers, the place in the queue and the way in (issue #21)
    # (a Job's pods are non-preemptible unless its sla says otherwise: the reservation holds them)
    assert c["message"].endswith("e.g. waiting for admission: pool /jobs at its cpu reservation: 1 of 1 core "
                                 "allocated to non-preemptible work, gang needs 1; position 1 of 1 in the pool's "
                                 "non-preemptible queue; admitted once its non-preemptible work frees 1 core or its "
                                 "reservation grows by 1 core"), c
    out = kubectl("describe", "pj", "waits")
    assert "WaitingForAdmission" in out and "pool /jobs at its cpu reservation" in out, out


def test_an_idle_cluster_writes_no_pool_status():
    wait_until(lambda: condition(get_pool("borrow"), "Borrowing").get("status") == "True", 20, "borrowing")
    time.sleep(1.5)  # a status tick after the last change
    before = {n: get_pool(n)["metadata"]["resourceVersion"] for n in ("full", "borrow", "jobs")}
    job_before = json.loads(kubectl("get", "pj", "waits", "-o", "json"))["metadata"]["resourceVersion"]
    ltt = condition(get_pool("full"), "Admitting")["lastTransitionTime"]
    time.sleep(3)
    after = {n: get_pool(n)["metadata"]["resourceVersion"] for n in ("full", "borrow", "jobs")}
    assert before == after, (before, after)
    job_after = json.loads(kubectl("get", "pj", "waits", "-o", "json"))["metadata"]["resourceVersion"]
    assert job_before == job_after, (job_before, job_after)
    assert condition(get_pool("full"), "Admitting")["lastTransitionTime"] == ltt


def test_a_job_says_running_once_every_instance_runs():
    kubectl("delete", "pod", "borrow-run", "--wait=false")
    apply([pool("jobs", 2, 2)])  # job pods are non-preemptible: held by the reservation
    def runs():
        c = condition(json.loads(kubectl("get", "pj", "waits", "-o", "json")), "Running")
        return c.get("status") == "True" and c
    c = wait_until(runs, 20, "job waits: Running True")
    assert c["reason"] == "AllRunning" and c["message"] == "2 of 2 instances run", c


def test_admitting_again_once_the_work_ends():
    kubectl("delete", "pod", "full-run", "full-w1", "full-w2", "--wait=false")
    def admitting():
        p = get_pool("full")
        return condition(p, "Admitting").get("status") == "True" and p["status"]["gangs"] == \
            {"pending": 0, "running": 0}
    wait_until(admitting, 20, "pool full: Admitting True, no gangs")


run_tests("test_pool_status", dict(globals()))
