#!/usr/bin/python3
"""End-to-end: scheduling correctness of Jobs (issue #16 items 5, 9, 11) with
pelotond (every role) on a real redis-server, kubelet-sim's Kubelets and real
kubectl. Gang members lost with a node run again as a gang of their own; a
gang short of members says so; a DAEMON gets instances only where its pod can
be placed, following taints and labels; a Job naming a pool that does not
exist yet says so in a condition and Events, and proceeds when it appears."""
import json
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", "--gang-wait-event-ms=500")
KUBECONFIG = services.kubeconfig(PORT)
wait_until = services.wait_until


def kubectl(*args, stdin=None, check=True):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin, check=check)


def apply(objs):
    services.kubectl_apply(KUBECONFIG, objs)


def ksim(nodes, prefix, cpu, *flags):
    return services.start_kubelet_sim(KUBECONFIG, f"--nodes={nodes}", f"--name-prefix={prefix}", f"--cpu={cpu}",
                                      "--memory=32Gi", *flags, expect=nodes)[0]


def drop_nodes(proc, *names):
    services.stop(proc)
    kubectl("delete", "node", *names, "--wait=false", check=False)


def pool(name):
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name},
            "spec": {"resources": [{"kind": "cpu", "reservation": "64", "limit": "64", "share": 1}]}}  # room for non-preemptible Jobs


def job(name, typ, n, pool_name, cpu="500m", extra=None, pod_spec=None):
    spec = {"type": typ, "resourcePool": pool_name,
            "template": {"metadata": {"labels": {"t": name}},
                         "spec": {"containers": [{"name": "c", "image": "x",
                                                  "resources": {"requests": {"cpu": cpu}}}], **(pod_spec or {})}}}
    if typ != "DAEMON":
        spec["instanceCount"] = n
    spec.update(extra or {})
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def pods(selector):
    return [p for p in json.loads(kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]
            if not p["metadata"].get("deletionTimestamp")]


def running(selector):
    return [p for p in pods(selector) if p.get("status", {}).get("phase") == "Running"]


def events_for(name, kind=None):
    return services.events(KUBECONFIG, name=name, kind=kind)


def delete_job(name):
    kubectl("delete", "jobs.peloton.io", name, "--wait=false")
    wait_until(lambda: not json.loads(kubectl("get", "pods", "-l", f"peloton.io/job={name}", "-o", "json"))["items"],
               60, f"{name}'s pods gone")


apply([pool("sched")])


def test_lost_gang_members_run_again_as_a_gang_of_their_own():
    # before, the two members lost with their node came back labelled with the whole gang's size (4) while
    # the other two still ran: the resource manager waited for four unbound members, Pending forever
    keep, lose = ksim(1, "gk-", "2"), ksim(1, "gl-", "2")
    apply([job("gj", "BATCH", 4, "sched", cpu="1", extra={"sla": {"minimumRunningInstances": 4}})])
    wait_until(lambda: len(running("peloton.io/job=gj")) == 4, 60, "the gang of 4 running")
    assert {p["spec"]["nodeName"] for p in running("peloton.io/job=gj")} == {"gk-0", "gl-0"}
    spare = ksim(1, "gs-", "2")
    drop_nodes(lose, "gl-0")
    wait_until(lambda: (lambda ps: len(ps) == 4 and all(p["spec"]["nodeName"] != "gl-0" for p in ps))(
        running("peloton.io/job=gj")), 60, "the lost members running again on the spare node")
    again = [p for p in running("peloton.io/job=gj") if p["spec"]["nodeName"] == "gs-0"]
    assert len(again) == 2, again
    first = min(int(p["metadata"]["labels"]["peloton.io/instance"]) for p in again)
    for p in again:
        assert p["metadata"]["labels"]["peloton.io/gang-size"] == "2", p["metadata"]["labels"]
        assert p["metadata"]["labels"]["peloton.io/gang"] == f"gj-gang-{first}-2", p["metadata"]["labels"]
    delete_job("gj")
    drop_nodes(keep, "gk-0")
    drop_nodes(spare, "gs-0")


def test_a_gang_short_of_members_says_so():
    ks = ksim(1, "gw-", "4")
    g = {"peloton.io/resource-pool": "sched", "peloton.io/gang": "gw", "peloton.io/gang-size": "3", "t": "gw"}

    def member(i):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gw-{i}", "labels": g},
                "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}
    apply([member(0), member(1)])
    ev = wait_until(lambda: [e["message"] for e in events_for("gw-0") if e["reason"] == "FailedScheduling"], 20,
                    "an Event saying the gang waits for members")
    assert "gang gw: 2/3 members, waiting for 1 more" in ev[0], ev
    assert not any(p["spec"].get("nodeName") for p in pods("t=gw"))
    apply([member(2)])
    wait_until(lambda: len(running("t=gw")) == 3, 60, "the whole gang running")
    kubectl("delete", "pods", "-l", "t=gw", "--wait=false")
    drop_nodes(ks, "gw-0")


def test_daemon_only_where_its_pod_can_be_placed_and_follows_taints_and_labels():
    # before, a DAEMON put an instance on the GPU host (kept for GPU pods) and on nodes its node affinity
    # excluded: those pods stayed Pending forever ("0/4 nodes: 3 node affinity, 1 gpu host reserved")
    ks = ksim(4, "dn-", "4", "--gpu-nodes=1", "--gpu-per-node=1")  # dn-0 has a GPU
    apply([job("agent", "DAEMON", 0, "sched", cpu="100m")])
    wait_until(lambda: len(running("peloton.io/job=agent")) == 3, 60, "one agent per non-GPU node")
    time.sleep(2)
    ps = pods("peloton.io/job=agent")
    assert sorted(p["spec"].get("nodeName") for p in ps) == ["dn-1", "dn-2", "dn-3"], [
        (p["metadata"]["name"], p["spec"].get("nodeName"), p.get("status", {}).get("phase")) for p in ps]
    # a taint takes a node away, its removal gives it back
    kubectl("taint", "nodes", "dn-1", "maint=now:NoSchedule")
    wait_until(lambda: sorted(p["spec"].get("nodeName") for p in pods("peloton.io/job=agent")) == ["dn-2", "dn-3"],
               60, "the agent gone from the tainted node")
    kubectl("taint", "nodes", "dn-1", "maint=now:NoSchedule-")
    wait_until(lambda: len(running("peloton.io/job=agent")) == 3, 60, "the agent back on the untainted node")
    # required node affinity: no node matches until one is labelled
    aff = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "role", "operator": "In", "values": ["edge"]}]}]}}}}
    apply([job("edge", "DAEMON", 0, "sched", cpu="100m", pod_spec=aff)])
    time.sleep(2)
    assert not pods("peloton.io/job=edge"), pods("peloton.io/job=edge")
    kubectl("label", "nodes", "dn-0", "dn-2", "role=edge")
    wait_until(lambda: [p["spec"]["nodeName"] for p in running("peloton.io/job=edge")] == ["dn-2"], 60,
               "an edge agent on the labelled non-GPU node only")
    kubectl("label", "nodes", "dn-2", "role-")
    wait_until(lambda: not pods("peloton.io/job=edge"), 60, "the edge agent gone with the label")
    delete_job("edge")
    delete_job("agent")
    drop_nodes(ks, "dn-0", "dn-1", "dn-2", "dn-3")


def test_a_job_waits_for_its_pool_and_says_so():
    ks = ksim(1, "pw-", "4")
    apply([job("later", "BATCH", 2, "not-yet", cpu="100m")])

    def pool_ready():
        st = json.loads(kubectl("get", "jobs.peloton.io", "later", "-o", "json")).get("status", {})
        return next((c for c in st.get("conditions", []) if c.get("type") == "PoolReady"), None)
    cond = wait_until(lambda: (lambda c: c if c and c["status"] == "False" else None)(pool_ready()), 30,
                      "condition PoolReady False")
    assert cond["reason"] == "PoolNotFound", cond
    assert cond["message"] == 'resource pool "not-yet" not found: the job\'s pods are created once it exists', cond
    assert not pods("peloton.io/job=later")
    out = kubectl("describe", "pj", "later")
    assert "PoolNotFound" in out and 'resource pool "not-yet" not found' in out, out
    assert "Warning" in out.split("Events:")[-1], out  # the Event, under Events
    apply([pool("not-yet")])
    wait_until(lambda: (lambda c: c and c["status"] == "True" and c["reason"] == "PoolFound")(pool_ready()), 30,
               "condition PoolReady True")
    wait_until(lambda: len(running("peloton.io/job=later")) == 2, 60, "the job's pods running")
    reasons = [e["reason"] for e in events_for("later", "Job")]
    assert reasons == ["PoolNotFound", "PoolFound"], reasons
    delete_job("later")
    drop_nodes(ks, "pw-0")


def test_pelotond_log_is_clean():
    """No sanitizer report and no crash in pelotond (an ASan build) after all of the above."""
    assert PROC.poll() is None, "pelotond exited"
    text = open(LOG).read()
    assert "AddressSanitizer" not in text and "runtime error:" not in text, text[-4000:]


run_tests("test_job_scheduling", dict(globals()))
