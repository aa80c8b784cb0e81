#!/usr/bin/python3
"""End-to-end (issue #16 items 13 and 14): every pod that waits can say why,
truly. pelotond with every role on a real redis-server, kubelet-sim's nodes
and one Node with no kubelet (NotReady, tainted not-ready as Kubernetes'
node controller marks such nodes), driven with real kubectl.

- FailedScheduling names the real reason of each node: cordoned
  (unschedulable), the untolerated taint by key and value (also on the
  NotReady node), Insufficient cpu; in kube-scheduler's shape.
- A gang that does not fit says how many members fit and where.
- Every pod waiting for admission (not only the head of its pool's queue),
  and every member of a gang that waits for its other members, gets an Event
  and PodScheduled=False with a reason; bound pods have PodScheduled=True.
- Events are aggregated: the same Event again bumps count, no new object."""
import json
import re
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
# an unplaceable gang is tried again after 100 ms doubling to 400 ms, not 5 s: its tenth attempt, which counts
# the Event again, comes after about 3 s instead of 26 s (7.5 s with 1 s)
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", "--placement-retry-max-ms=400")
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


def pod(name, pool_name, cpu, labels=None, prio=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"peloton.io/resource-pool": pool_name, **(labels or {})},
                         "annotations": {"peloton.io/priority": str(prio)} if prio is not None else {}},
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}]}}


def get_pod(name):
    return json.loads(kubectl("get", "pod", name, "-o", "json"))


def scheduled(name):
    """The PodScheduled condition of a pod, or None."""
    for c in get_pod(name).get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c
    return None


def events_for(name, reason="FailedScheduling"):
    return services.events(KUBECONFIG, name=name, reason=reason)


def delete(selector):
    kubectl("delete", "pods", "-l", selector, "--wait=false")
    wait_until(lambda: not json.loads(kubectl("get", "pods", "-l", selector, "-o", "json"))["items"], 60,
               f"pods {selector} gone")


KS, _ = services.start_kubelet_sim(KUBECONFIG, "--nodes=3", "--name-prefix=t-", "--cpu=4", "--memory=32Gi",
                                   expect=3)
# A node whose kubelet is not ready, tainted not-ready as Kubernetes' node controller marks such nodes
# (not the host manager's unreachable taint, which it takes off again while the node is new).
apply([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gone-1"},
        "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                   "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}}])
apply([pool("sr", 0, 64)])


def test_failed_scheduling_names_each_nodes_real_reason():
    kubectl("cordon", "t-0")
    kubectl("taint", "nodes", "t-1", "dedicated=ml:NoSchedule")
    try:
        apply([pod("big-1", "sr", 6, labels={"t": "big"})])  # no node of 4 cpu takes it
        want = ("0/4 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: ml}, "
                "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
                "1 node(s) were unschedulable.")
        ev = wait_until(lambda: [e for e in events_for("big-1") if e["message"] == want], 20,
                        "a FailedScheduling Event naming each node's reason")
        assert ev[0]["source"]["component"] == "peloton-placement", ev
        c = wait_until(lambda: scheduled("big-1") if (scheduled("big-1") or {}).get("reason") == "Unschedulable"
                       else None, 20, "PodScheduled=False, Unschedulable")
        assert c["status"] == "False" and c["message"] == want, c
    finally:
        kubectl("uncordon", "t-0")
        kubectl("taint", "nodes", "t-1", "dedicated=ml:NoSchedule-")
    delete("t=big")


def test_a_repeated_event_is_counted_not_posted_again():
    """Kubernetes' recorder: the same Event again bumps count and lastTimestamp on the one posted.
    Placement repeats FailedScheduling at every tenth attempt (backoff to 400 ms here: about 3 s)."""
    apply([pod("huge-1", "sr", 12, labels={"t": "huge"})])
    want = ("0/4 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
            "3 Insufficient cpu.")
    wait_until(lambda: [e for e in events_for("huge-1") if e["message"] == want], 20, "the first FailedScheduling")
    ev = wait_until(lambda: [e for e in events_for("huge-1") if e.get("count", 1) >= 2], 30,
                    "the repeated Event counted (count 2)")
    same = [e for e in events_for("huge-1") if e["message"] == want]
    assert len(same) == 1, [(e["metadata"]["name"], e.get("count")) for e in same]
    assert ev[0]["lastTimestamp"] > ev[0]["firstTimestamp"], ev[0]
    desc = kubectl("describe", "pod", "huge-1")  # kubectl shows the count: "(x2 over 8s)"
    assert re.search(r"\(x\d+ over \d+s\)\s+peloton-placement\s+" + re.escape(want), desc), desc
    delete("t=huge")


def test_gang_failure_says_how_many_members_fit_and_where():
    g = {"t": "g4", "peloton.io/gang": "g4", "peloton.io/gang-size": "4"}
    apply([pod(f"g4-{i}", "sr", 3, labels=g) for i in range(4)])  # 3 nodes of 4 cpu: one member each
    pat = re.compile(r"^gang of 4: 3 members fit \(on (t-\d), (t-\d), (t-\d)\), 1 does not: 0/4 nodes are "
                     r"available: 1 node\(s\) had untolerated taint \{node.kubernetes.io/not-ready: \}, "
                     r"3 Insufficient cpu\.$")

    def told():
        out = []
        for i in range(4):
            out += [e["message"] for e in events_for(f"g4-{i}") if pat.match(e["message"])]
        return out if len(out) >= 4 else None
    msgs = wait_until(told, 20, "every member told what of the gang fits")
    assert sorted(pat.match(msgs[0]).groups()) == ["t-0", "t-1", "t-2"], msgs[0]
    assert all(not get_pod(f"g4-{i}")["spec"].get("nodeName") for i in range(4)), "all or nothing"
    for i in range(4):
        c = scheduled(f"g4-{i}")
        assert c and c["status"] == "False" and c["reason"] == "Unschedulable" and pat.match(c["message"]), c
    delete("t=g4")


def test_every_pod_waiting_for_admission_says_why_and_binding_clears_it():
    """Issue #21: the pool and its numbers, the place in the pool's queue and what would let it in;
    kubectl describe shows it."""
    apply([pool("adm", 0, 2)])
    apply([pod(f"run-{i}", "adm", 1, labels={"t": "adm", "r": "run"}) for i in range(2)])
    wait_until(lambda: all(get_pod(f"run-{i}")["spec"].get("nodeName") for i in range(2)), 20, "two pods bound")
    for i in range(3):  # one at a time, so that their order in the queue is known
        apply([pod(f"wait-{i}", "adm", 1, labels={"t": "adm"})])
        wait_until(lambda: scheduled(f"wait-{i}"), 20, f"wait-{i} to have PodScheduled")
    # the head, with the numbers and the way in; those behind with their place (the queue's length is that of
    # the moment each was told: wait-1 may have been told before wait-2 came)
    want = {0: re.escape("waiting for admission: pool /adm at its cpu entitlement: 2 of 2 cores allocated, gang "
                         "needs 1; position 1 of ") + "[1-3]" +
               re.escape(" in the pool's queue; admitted once its work frees 1 core or its entitlement grows by 1 "
                         "core")}
    for i in (1, 2):
        want[i] = (re.escape("waiting for admission: pool /adm: queued behind higher-priority or earlier gangs, "
                             f"position {i + 1} of ") + f"[{i + 1}-3]" +
                   re.escape(f" in the pool's queue; admitted after the {i} ahead of it"))

    def told(i):
        c = scheduled(f"wait-{i}")
        return c if re.fullmatch(want[i], c["message"]) else None
    for i in range(3):
        c = wait_until(lambda: told(i), 20, f"wait-{i} told {want[i]!r} (has {scheduled(f'wait-{i}')})")
        assert c["status"] == "False" and c["reason"] == "WaitingForAdmission", c
        ev = wait_until(lambda: [e for e in events_for(f"wait-{i}") if e["message"] == c["message"]], 10,
                        f"an Event for wait-{i}")
        assert ev[0]["source"]["component"] == "peloton-resmgr", ev
        want[i] = c["message"]
    desc = kubectl("describe", "pod", "wait-0")
    assert re.search(r"Warning\s+FailedScheduling\s+.*peloton-resmgr\s+" + re.escape(want[0]), desc), desc
    assert "PodScheduled      False" in desc or re.search(r"PodScheduled\s+False", desc), desc
    time.sleep(2)  # a hundred rounds: no new Event while the reason stays
    for i in range(3):
        assert len(events_for(f"wait-{i}")) <= 2, events_for(f"wait-{i}")
        assert len([e for e in events_for(f"wait-{i}") if e["message"] == want[i]]) == 1, events_for(f"wait-{i}")
        assert all(e.get("count", 1) == 1 for e in events_for(f"wait-{i}")), events_for(f"wait-{i}")
    for i in range(2):
        assert scheduled(f"run-{i}")["status"] == "True", scheduled(f"run-{i}")
    delete("r=run")
    wait_until(lambda: sum(1 for i in range(3) if get_pod(f"wait-{i}")["spec"].get("nodeName")) == 2, 30,
               "two waiting pods admitted and bound")
    assert get_pod("wait-0")["spec"].get("nodeName") and get_pod("wait-1")["spec"].get("nodeName"), "queue order"
    for i in range(2):
        assert scheduled(f"wait-{i}")["status"] == "True", scheduled(f"wait-{i}")
    # wait-2 is the head now: told again, at position 1 of 1
    c = wait_until(lambda: scheduled("wait-2") if "position 1 of 1 " in scheduled("wait-2")["message"] else None, 20,
                   "wait-2 told it heads the queue")
    assert c["message"].startswith("waiting for admission: pool /adm at its cpu entitlement: 2 of 2 cores"), c
    delete("t=adm")


def test_preempted_pod_says_who_and_why_and_the_preemptor_names_it():
    """Intra-pool: a priority 9 pod of a full pool preempts lower-priority pods of that pool; the victims say
    the gang and the rule (priority), the preemptor's Event names each victim."""
    apply([pool("pri", 0, 4)])
    apply([pod(f"lo-{i}", "pri", 1, labels={"t": "pri"}, prio=1) for i in range(4)])
    wait_until(lambda: all(get_pod(f"lo-{i}")["spec"].get("nodeName") for i in range(4)), 20, "4 low pods bound")
    apply([pod("hi-0", "pri", 2, labels={"t": "pri"}, prio=9)])
    vic = wait_until(lambda: [e for e in services.events(KUBECONFIG, reason="Preempted")
                              if e["involvedObject"]["name"].startswith("lo-")], 30, "victims' Preempted Events")
    pat = re.compile(r"^priority 9 gang (\S+) preempts priority 1 \(pool /pri short of cpu entitlement by 2\)$")
    assert all(pat.match(e["message"]) for e in vic), [e["message"] for e in vic]
    assert pat.match(vic[0]["message"]).group(1).endswith("hi-0"), vic[0]["message"]
    names = {e["involvedObject"]["name"] for e in vic}
    mine = wait_until(lambda: [e["message"] for e in events_for("hi-0", reason="Preempting")], 20,
                      "the preemptor's Preempting Events")
    for n in names:  # the preemptor names each victim
        assert any(m.startswith(f"preempting default/{n}: priority 9 gang ") for m in mine), (n, mine)
    # kubectl get events shows the victims' side (they are gone), kubectl describe the preemptor's
    table = kubectl("get", "events")
    for n in names:
        assert re.search(r"Warning\s+Preempted\s+pod/" + n + r"\s+priority 9 gang \S+ preempts priority 1", table), \
            table
    desc = kubectl("describe", "pod", "hi-0")
    for n in names:
        assert re.search(r"Normal\s+Preempting\s+.*peloton-resmgr\s+preempting default/" + n + ": priority 9", desc), \
            desc
    wait_until(lambda: get_pod("hi-0")["spec"].get("nodeName"), 30, "the preemptor bound")
    delete("t=pri")


def test_inter_pool_victims_name_the_pool_they_make_room_for():
    """Inter-pool: the borrowing pool's pods say by how much it is over its entitlement and for which pool;
    the gaining pool's Event names the victims."""
    apply([pool("org", 8, 8), pool("ia", 4, 8, "org"), pool("ib", 4, 8, "org")])
    apply([pod(f"ia-{i}", "ia", 1, labels={"t": "ia"}) for i in range(8)])
    wait_until(lambda: sum(1 for i in range(8) if get_pod(f"ia-{i}")["spec"].get("nodeName")) == 8, 30,
               "ia borrowing all of org's 8 cores")
    # the nodes' last 4 cores go to other work: ib's pods, admitted, wait for ia's to leave the nodes
    apply([pod("fill-0", "sr", 4, labels={"t": "ib"})])
    wait_until(lambda: get_pod("fill-0")["spec"].get("nodeName"), 30, "the filler bound")
    apply([pod(f"ib-{i}", "ib", 1, labels={"t": "ib"}) for i in range(4)])
    vic = wait_until(lambda: [e for e in services.events(KUBECONFIG, reason="Preempted")
                              if e["involvedObject"]["name"].startswith("ia-")], 40, "ia's victims told")
    pat = re.compile(r"^pool /org/ia over cpu entitlement by 4 for \d+ checks; for the work of pool\(s\) /org/ib$")
    assert all(pat.match(e["message"]) for e in vic), [e["message"] for e in vic]
    gain = wait_until(lambda: services.events(KUBECONFIG, name="ib", kind="ResourcePool", reason="Preempting"), 20,
                      "ib told it gains")
    m = re.match(r"^preempting (\d+) pod\(s\) of pool /org/ia, over its cpu entitlement by 4 for \d+ checks, "
                 r"for this pool's work \(cpu entitlement 4, running 0\): (.*)$", gain[0]["message"])
    assert m, gain[0]["message"]
    named = set(x.strip() for x in m.group(2).split(","))
    assert int(m.group(1)) == len(named) and named <= {f"default/{e['involvedObject']['name']}" for e in vic} | \
        {f"default/ia-{i}" for i in range(8)}, (named, [e["involvedObject"]["name"] for e in vic])
    wait_until(lambda: sum(1 for i in range(4) if get_pod(f"ib-{i}")["spec"].get("nodeName")) == 4, 40,
               "ib's pods bound after the preemption")
    delete("t=ia")
    delete("t=ib")


def test_pods_of_an_incomplete_gang_say_they_wait_for_it():
    g = {"t": "g3", "peloton.io/gang": "g3", "peloton.io/gang-size": "3"}
    apply([pod(f"g3-{i}", "sr", 1, labels=g) for i in range(2)])
    want = ("gang g3: 2/3 members, waiting for 1 more (peloton.io/gang-size: a gang is admitted and placed all or "
            "nothing)")
    for i in range(2):
        c = wait_until(lambda: scheduled(f"g3-{i}"), 20, f"g3-{i} to have PodScheduled")
        assert c["status"] == "False" and c["reason"] == "WaitingForGang" and c["message"] == want, c
        assert [e["message"] for e in events_for(f"g3-{i}")] == [want], events_for(f"g3-{i}")
    apply([pod("g3-2", "sr", 1, labels=g)])
    wait_until(lambda: all(get_pod(f"g3-{i}")["spec"].get("nodeName") for i in range(3)), 20, "the gang bound")
    for i in range(3):
        assert scheduled(f"g3-{i}")["status"] == "True", scheduled(f"g3-{i}")
    assert not events_for("g3-2"), "the last member never waited for the gang"
    delete("t=g3")


run_tests("test_sched_reasons", dict(globals()))
