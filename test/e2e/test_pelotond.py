#!/usr/bin/python3
"""End-to-end: pelotond with every role (apiserver, resmgr, placement, jobmgr,
hostmgr) on a real redis-server, scheduling onto kubelet-sim's simulated
Kubelets, driven with real kubectl. Pools, borrowing and giving back by
preemption, gangs, reservations for non-preemptible work, priority preemption
inside a pool, kill -9 recovery.

The roles' leases are 3 s (--lease-ms; 10 s by default): after the kill -9
the new pelotond takes each role once the dead one's lease has run out, and
the tests after it waited for that (7 s of the batch job's 9 s)."""
import json
import os
import signal
import subprocess
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
# as `make run` deploys it: the controllers reach the API server, and pelotond
# Redis, through Unix-domain sockets (kubectl and kubelet-sim come over TCP)
UNIX = [f"--unix-socket={services.tempdir()}/api.sock",
        f"--redis=unix://{os.path.join(services.start_redis.last[1], 'redis.sock')}"]
LEASE = "--lease-ms=3000"
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", LEASE, *UNIX)
KUBECONFIG = services.kubeconfig(PORT)
RUN = "kubelet-sim.peloton.io/run-seconds"


def kubectl(*args, stdin=None, check=True):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin, check=check)


def apply(objs):
    services.kubectl_apply(KUBECONFIG, objs)


def start_ksim(nodes, prefix, cpu="8"):
    return services.start_kubelet_sim(KUBECONFIG, f"--nodes={nodes}", f"--name-prefix={prefix}", f"--cpu={cpu}",
                                      "--memory=32Gi", expect=nodes)[0]


def pool(name, cpu_res, cpu_lim, parent=None):
    spec = {"resources": [{"kind": "cpu", "reservation": str(cpu_res), "limit": str(cpu_lim), "share": 1}]}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name}, "spec": spec}


def pod(name, pool_name, cpu, ns="default", run=None, labels=None, ann=None, prio=None):
    md = {"name": name, "namespace": ns, "labels": {"peloton.io/resource-pool": pool_name, **(labels or {})},
          "annotations": dict(ann or {})}
    if run is not None:
        md["annotations"][RUN] = str(run)
    if prio is not None:
        md["annotations"]["peloton.io/priority"] = str(prio)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}]}}


def pods(selector):
    out = kubectl("get", "pods", "-l", selector, "-o", "json")
    return json.loads(out)["items"]


def phases(selector):
    res = {}
    for p in pods(selector):
        ph = p.get("status", {}).get("phase", "Pending")
        if p["metadata"].get("deletionTimestamp"):
            ph = "Terminating"
        res[ph] = res.get(ph, 0) + 1
    return res


wait_until = services.wait_until


def events_for(name):
    return services.events(KUBECONFIG, name=name)


KS = start_ksim(4, "n-")  # 4 nodes x 8 cpu = 32 cpu


def clean():
    """Each test starts from an empty default namespace: no Jobs, no pods."""
    kubectl("delete", "jobs.peloton.io", "--all", "--wait=false")
    kubectl("delete", "pods", "--all", "--wait=false")
    wait_until(lambda: not json.loads(kubectl("get", "pods", "-o", "json"))["items"], 60, "an empty namespace")


def test_controllers_use_the_unix_sockets():
    wait_until(lambda: "controllers running" in open(LOG).read(), 10, "the controllers to start")
    line = next(l for l in open(LOG) if "controllers running" in l)
    assert f"api=unix://{UNIX[0].split('=', 1)[1]}" in line and "redis=unix://" in line, line


def test_pod_in_a_pool_runs_and_completes():
    clean()
    apply([pool("solo", 4, 32), pod("solo-1", "solo", 1, run=1, labels={"t": "solo"})])
    wait_until(lambda: phases("t=solo").get("Succeeded") == 1, 20, "solo-1 to succeed")
    p = pods("t=solo")[0]
    assert p["spec"]["nodeName"].startswith("n-")
    kubectl("delete", "pods", "-l", "t=solo", "--wait=false")


def test_gang_of_8_waits_until_complete_then_all_run():
    clean()
    apply([pool("gangs", 0, 32)])
    g = {"t": "gang", "peloton.io/gang": "g8", "peloton.io/gang-size": "8"}
    apply([pod(f"g8-{i}", "gangs", 1, labels=g) for i in range(7)])
    time.sleep(2)
    assert all(not p["spec"].get("nodeName") for p in pods("t=gang")), "an incomplete gang got a node"
    apply([pod("g8-7", "gangs", 1, labels=g)])
    wait_until(lambda: phases("t=gang").get("Running") == 8, 30, "all 8 gang members running")
    kubectl("delete", "pods", "-l", "t=gang", "--wait=false")
    wait_until(lambda: not pods("t=gang"), 30, "gang pods gone")


def test_gang_too_big_waits_for_room_all_or_nothing():
    clean()
    apply([pool("big", 0, 32)])
    apply([pod(f"blk-{i}", "big", 7, labels={"t": "blk"}) for i in range(4)])  # 28 of 32 cpu
    wait_until(lambda: phases("t=blk").get("Running") == 4, 30, "blockers running")
    g = {"t": "gbig", "peloton.io/gang": "gbig", "peloton.io/gang-size": "4"}
    apply([pod(f"gbig-{i}", "big", 2, labels=g) for i in range(4)])  # 8 cpu: 4 free in 1-cpu pieces
    time.sleep(3)
    assert all(not p["spec"].get("nodeName") for p in pods("t=gbig")), "part of a gang was placed"
    assert phases("t=blk").get("Running") == 4, "the blockers keep running (the pool is within its entitlement)"
    kubectl("delete", "pods", "-l", "t=blk", "--wait=false")
    wait_until(lambda: phases("t=gbig").get("Running") == 4, 40, "the gang running once room is free")
    kubectl("delete", "pods", "-l", "t=gbig", "--wait=false")
    wait_until(lambda: not pods("t=gbig") and not pods("t=blk"), 30, "pods gone")


def test_non_preemptible_work_stays_within_reservation():
    clean()
    apply([pool("np", 4, 32)])
    ann = {"peloton.io/preemptible": "false"}
    apply([pod(f"np-{i}", "np", 2, labels={"t": "np"}, ann=ann) for i in range(3)])
    wait_until(lambda: phases("t=np").get("Running") == 2, 30, "two non-preemptible pods running")
    time.sleep(2)
    assert phases("t=np").get("Running") == 2, phases("t=np")
    waiting = [p["metadata"]["name"] for p in pods("t=np") if not p["spec"].get("nodeName")]
    assert len(waiting) == 1, "the third should wait"
    ev = wait_until(lambda: [e["message"] for e in events_for(waiting[0]) if e["reason"] == "FailedScheduling"], 10,
                    "an Event saying why it waits")
    assert ("pool /np at its cpu reservation: 4 of 4 cores allocated to non-preemptible work, gang needs 2" in ev[0]
            and "admitted once its non-preemptible work frees 2 cores or its reservation grows by 2 cores" in ev[0]), ev
    kubectl("delete", "pods", "-l", "t=np", "--wait=false")
    wait_until(lambda: not pods("t=np"), 30, "np pods gone")


def test_two_teams_borrow_and_give_back_by_preemption():
    clean()
    apply([pool("org", 32, 32), pool("team-a", 16, 32, "org"), pool("team-b", 16, 32, "org")])
    apply([pod(f"a-{i}", "team-a", 4, labels={"t": "a"}) for i in range(8)])
    # team-b is idle: team-a borrows everything
    wait_until(lambda: phases("t=a").get("Running") == 8, 40, "team-a borrowing all 32 cpu")
    apply([pod(f"b-{i}", "team-b", 4, labels={"t": "b"}) for i in range(4)])
    # entitlement becomes 16/16: team-a gives back 16 cpu by preemption, team-b runs 4 pods
    wait_until(lambda: phases("t=b").get("Running") == 4, 60, "team-b running after preemption")
    wait_until(lambda: len(pods("t=a")) == 4, 30, "team-a down to its entitlement")
    assert phases("t=a").get("Running") == 4
    victims = [e for e in json.loads(kubectl("get", "events", "-o", "json"))["items"] if e["reason"] == "Preempted"]
    assert len(victims) >= 4 and all(v["involvedObject"]["name"].startswith("a-") for v in victims), victims
    # the gaining pool is told too (before, only the victims heard of it)
    gain = [e for e in events_for("team-b") if e["reason"] == "Preempting"]
    assert gain and gain[0]["involvedObject"]["kind"] == "ResourcePool", gain
    assert "of pool /org/team-a, over its cpu entitlement by 16" in gain[0]["message"], gain[0]["message"]
    st = json.loads(kubectl("get", "resourcepool", "team-a", "-o", "json"))["status"]
    assert st["entitlement"]["cpu"] == "16", st
    # kubectl get rp reads like a person would write it: cores, binary units, demand beside entitlement.
    # Pool status is written once a second: the row may lag the preemption by that much.
    def team_a_row():
        out = kubectl("get", "rp", "-o", "wide")
        head = out.splitlines()[0].split()
        assert head[2:] == ["CPU-RES", "CPU-ENT", "CPU-ALLOC", "CPU-DEMAND", "MEM-RES", "MEM-ENT", "MEM-ALLOC",
                            "MEM-DEMAND", "GPU-ENT", "GPU-ALLOC", "PENDING", "RUNNING", "AGE"], head
        row = next(l.split() for l in out.splitlines() if l.startswith("team-a "))
        return row if row[2:6] == ["16", "16", "16", "16"] else None
    row = wait_until(team_a_row, 10, "team-a's row at 16 cpu reserved, entitled, allocated and demanded")
    assert row[2:6] == ["16", "16", "16", "16"] and row[7].endswith("Gi") and not any(
        c.isdigit() and len(c) > 6 for c in row), row
    kubectl("delete", "pods", "-l", "t in (a,b)", "--wait=false")
    wait_until(lambda: not pods("t in (a,b)"), 40, "team pods gone")


def test_a_pool_created_again_gets_its_status():
    # before, a pool deleted and created again under its name never got status until its numbers changed
    def status_of(name):
        out = kubectl("get", "rp", name, "-o", "json", check=False)
        return json.loads(out).get("status", {}) if out.strip() else {}
    apply([pool("phoenix", 2, 4)])
    wait_until(lambda: status_of("phoenix").get("entitlement"), 30, "phoenix's status")
    kubectl("delete", "rp", "phoenix")
    wait_until(lambda: not kubectl("get", "rp", "-o", "name", check=False).count("/phoenix"), 30, "phoenix gone")
    apply([pool("phoenix", 2, 4)])
    wait_until(lambda: status_of("phoenix").get("entitlement"), 30, "the new phoenix's status")
    kubectl("delete", "rp", "phoenix")


def test_priority_preemption_inside_a_pool():
    clean()
    apply([pool("prio", 0, 8)])
    apply([pod(f"lo-{i}", "prio", 2, labels={"t": "lo"}, prio=1) for i in range(4)])
    wait_until(lambda: phases("t=lo").get("Running") == 4, 30, "low priority pods filling the pool")
    apply([pod("hi-0", "prio", 2, labels={"t": "hi"}, prio=10)])
    wait_until(lambda: phases("t=hi").get("Running") == 1, 40, "the high priority pod running")
    assert len(pods("t=lo")) == 3, phases("t=lo")
    kubectl("delete", "pods", "-l", "t in (lo,hi)", "--wait=false")
    wait_until(lambda: not pods("t in (lo,hi)"), 30, "prio pods gone")


def test_kill_9_recovery_runs_every_pod_once():
    global PROC
    clean()
    apply([pool("rec", 0, 32)])
    apply([pod(f"rec-{i}", "rec", 1, run=2, labels={"t": "rec"}) for i in range(30)])
    time.sleep(0.3)
    PROC.send_signal(signal.SIGKILL)
    PROC.wait(timeout=10)
    services._procs.remove(PROC)
    PROC, port, _ = services.start_pelotond(REDIS, "--roles=all", LEASE, f"--port={PORT}", *UNIX)  # a stale socket file
    assert port == PORT
    wait_until(lambda: phases("t=rec").get("Succeeded") == 30, 90, "all 30 pods succeeding after kill -9")
    for p in pods("t=rec"):  # each ran once: one node, one start
        cs = p["status"]["containerStatuses"][0]
        assert cs["restartCount"] == 0 and p["spec"]["nodeName"]
    kubectl("delete", "pods", "-l", "t=rec", "--wait=false")


def job(name, typ, n, pool_name, run=None, exit_code=None, cpu="500m", extra=None):
    ann = {}
    if run is not None:
        ann[RUN] = str(run)
    if exit_code is not None:
        ann["kubelet-sim.peloton.io/exit-code"] = str(exit_code)
    spec = {"type": typ, "resourcePool": pool_name,
            "template": {"metadata": {"labels": {"t": name}, "annotations": ann},
                         "spec": {"containers": [{"name": "c", "image": "x",
                                                  "resources": {"requests": {"cpu": cpu}}}]}}}
    if typ != "DAEMON":
        spec["instanceCount"] = n
    spec.update(extra or {})
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def job_status(name):
    return json.loads(kubectl("get", "jobs.peloton.io", name, "-o", "json")).get("status", {})


def test_batch_job_completes():
    clean()
    apply([pool("jobs", 4, 32), job("train", "BATCH", 3, "jobs", run=1)])
    st = wait_until(lambda: (lambda s: s if s.get("state") == "SUCCEEDED" else None)(job_status("train")), 60,
                    "the BATCH job SUCCEEDED")
    assert st["taskStats"]["SUCCEEDED"] == 3, st
    names = sorted(p["metadata"]["name"] for p in pods("peloton.io/job=train"))
    assert names == ["train-0", "train-1", "train-2"], names
    kubectl("delete", "jobs.peloton.io", "train")
    wait_until(lambda: not pods("peloton.io/job=train"), 30, "the job's pods deleted with it")


def test_a_batch_pod_deleted_under_its_job_runs_again():
    # before, the deleted pod's containers ended 0 and the job counted the run SUCCEEDED, never to run again
    clean()
    apply([pool("jobs", 4, 32), job("once", "BATCH", 1, "jobs")])
    wait_until(lambda: phases("peloton.io/job=once").get("Running") == 1, 60, "the job's pod running")
    first = pods("peloton.io/job=once")[0]["metadata"]["name"]
    kubectl("delete", "pod", first)
    wait_until(lambda: any(p["metadata"]["name"] != first and p.get("status", {}).get("phase") == "Running"
                           for p in pods("peloton.io/job=once")), 60, "a new run of the instance")
    st = job_status("once")
    assert st.get("state") != "SUCCEEDED" and st.get("taskStats", {}).get("SUCCEEDED", 0) == 0, st
    kubectl("delete", "jobs.peloton.io", "once")
    wait_until(lambda: not pods("peloton.io/job=once"), 30, "the job's pods deleted with it")


def test_daemon_job_follows_nodes():
    clean()
    apply([pool("daemons", 4, 64), job("agent", "DAEMON", 0, "daemons", cpu="100m")])
    wait_until(lambda: phases("peloton.io/job=agent").get("Running") == 4, 60, "one daemon pod per node")
    nodes = {p["spec"]["nodeName"] for p in pods("peloton.io/job=agent")}
    assert len(nodes) == 4, nodes
    extra = start_ksim(2, "d-")
    wait_until(lambda: phases("peloton.io/job=agent").get("Running") == 6, 60, "daemon pods on the new nodes")
    services.stop(extra)
    kubectl("delete", "node", "d-0", "d-1")
    wait_until(lambda: len(pods("peloton.io/job=agent")) == 4, 60, "daemon pods gone with their nodes")
    kubectl("delete", "jobs.peloton.io", "agent")
    wait_until(lambda: not pods("peloton.io/job=agent"), 30, "daemon pods deleted")


def test_services_spread_by_default_batch_packs():
    # before, a STATELESS job's instances were packed onto one node unless annotated
    clean()
    apply([pool("spread", 4, 32), job("svc4", "STATELESS", 4, "spread", cpu="500m"),
           job("bat4", "BATCH", 4, "spread", cpu="500m")])
    wait_until(lambda: phases("peloton.io/job=svc4").get("Running") == 4 and
               phases("peloton.io/job=bat4").get("Running") == 4, 60, "both jobs running")
    svc_nodes = {p["spec"]["nodeName"] for p in pods("peloton.io/job=svc4")}
    bat_nodes = {p["spec"]["nodeName"] for p in pods("peloton.io/job=bat4")}
    assert len(svc_nodes) == 4, svc_nodes  # one instance per node
    assert len(bat_nodes) == 1, bat_nodes  # packed
    kubectl("delete", "jobs.peloton.io", "svc4", "bat4")
    wait_until(lambda: not pods("peloton.io/job in (svc4,bat4)"), 30, "the jobs' pods deleted")


def test_stateless_job_survives_the_loss_of_a_node():
    clean()
    lone = start_ksim(1, "lone-")  # the job's instances are steered to this node by a node selector first
    apply([pool("svc", 4, 32), job("web", "STATELESS", 2, "svc", cpu="1")])
    wait_until(lambda: phases("peloton.io/job=web").get("Running") == 2, 60, "web running")
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods("peloton.io/job=web")}
    victim_node = next(iter(before.values()))
    services.stop(lone) if victim_node == "lone-0" else None
    # take the node of the first instance away: its pods are lost and run again elsewhere
    kubectl("delete", "node", victim_node)
    wait_until(lambda: (lambda ps: len(ps) == 2 and all(p.get("status", {}).get("phase") == "Running" and
                                                       p["spec"].get("nodeName") != victim_node for p in ps))(
        pods("peloton.io/job=web")), 90, "both instances running away from the lost node")
    if victim_node != "lone-0":
        services.stop(lone)
        kubectl("delete", "node", "lone-0", check=False)
    kubectl("delete", "jobs.peloton.io", "web")
    wait_until(lambda: not pods("peloton.io/job=web"), 30, "web pods deleted")


def test_rolling_update_to_a_failing_template_rolls_back():
    clean()
    # the failing template fails on start, never Running: minReadySeconds (default 10) only delays the rollback
    upd = {"updateStrategy": {"batchSize": 1, "maxFailureInstances": 1, "rollbackOnFailure": True,
                              "minReadySeconds": 1}}
    apply([pool("upd", 4, 32), job("api", "STATELESS", 3, "upd", cpu="500m", extra=upd)])
    wait_until(lambda: phases("peloton.io/job=api").get("Running") == 3, 60, "api running")
    bad = job("api", "STATELESS", 3, "upd", cpu="500m", run=0, exit_code=1, extra=upd)  # fails on start
    apply([bad])
    def rolled_back():
        st = job_status("api")
        conds = [c for c in st.get("conditions", []) if c.get("type") == "Update"]
        return conds and conds[0].get("reason") == "ROLLED_BACK" and conds[0]
    cond = wait_until(rolled_back, 120, "the update rolled back")
    wait_until(lambda: phases("peloton.io/job=api").get("Running") == 3, 60, "api back to 3 running")
    for p in pods("peloton.io/job=api"):
        if p.get("status", {}).get("phase") == "Running":
            assert RUN not in p["metadata"].get("annotations", {}), "a running pod has the failing template"
    kubectl("delete", "jobs.peloton.io", "api")
    wait_until(lambda: not pods("peloton.io/job=api"), 30, "api pods deleted")


def test_preempted_job_instances_follow_kill_on_preempt():
    clean()
    sla = {"sla": {"priority": 1, "preemptible": True}}
    apply([pool("kp", 0, 4),
           job("keep", "STATELESS", 2, "kp", cpu="1", extra=dict(sla)),
           job("drop", "STATELESS", 2, "kp", cpu="1", extra={**sla, "preemptionPolicy": {"killOnPreempt": True}})])
    wait_until(lambda: phases("peloton.io/job in (keep,drop)").get("Running") == 4, 60, "4 low-priority instances")
    # four higher-priority pods need the whole pool: every low-priority instance is preempted
    apply([pod(f"vip-{i}", "kp", 1, labels={"t": "vip"}, prio=10) for i in range(4)])
    wait_until(lambda: phases("t=vip").get("Running") == 4, 90, "four high-priority pods running")
    # killOnPreempt: drop's instances stay KILLED; keep's are queued again as new runs
    wait_until(lambda: job_status("drop").get("taskStats", {}).get("KILLED") == 2, 30, "drop's instances KILLED")
    def keep_requeued():
        ps = [p for p in pods("peloton.io/job=keep") if not p["metadata"].get("deletionTimestamp")]
        return len(ps) == 2 and all(p["metadata"]["name"].count("-") == 2 for p in ps) and ps
    wait_until(keep_requeued, 30, "keep's instances queued again as new runs")
    time.sleep(2)
    assert not [p for p in pods("peloton.io/job=drop") if not p["metadata"].get("deletionTimestamp")], \
        "a killOnPreempt instance was run again"
    reasons = [e["message"] for e in json.loads(kubectl("get", "events", "-o", "json"))["items"]
               if e["reason"] == "Preempted" and e["involvedObject"]["name"].startswith(("keep", "drop"))]
    assert len(reasons) == 4 and all("priority 10" in m for m in reasons), reasons


def test_a_pod_at_an_idle_scheduler_does_not_wait_for_the_period():
    """With admission rounds and placement ticks 6 s apart, a pod created
    while they are idle still runs within seconds: the first pod of an idle
    spell brings the round forward and the round tells placement at once.
    A second pod, created while the first round is recent, waits for the
    period as before and runs too."""
    redis = services.start_redis()
    proc, port, log = services.start_pelotond(redis, "--roles=all", "--admission-round-ms=6000",
                                              "--placement-tick-ms=6000")
    kc = services.kubeconfig(port)
    ks, _ = services.start_kubelet_sim(kc, "--nodes=1", "--name-prefix=idle-", "--cpu=8", expect=1)

    def k(*args, stdin=None):
        r = subprocess.run(["kubectl", f"--kubeconfig={kc}", *args], input=stdin, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def phase(name):
        return json.loads(k("get", "pod", name, "-o", "json")).get("status", {}).get("phase")

    k("apply", "-f", "-", stdin=json.dumps(pool("idle", 0, 8)))
    wait_until(lambda: "controllers running" in open(log).read(), 10, "the controllers")
    time.sleep(1.0)  # the informers have the pool; no pod has come yet: idle
    t0 = time.monotonic()
    k("apply", "-f", "-", stdin=json.dumps(pod("idle-1", "idle", "100m")))
    wait_until(lambda: phase("idle-1") == "Running", 4.5, "idle-1 Running well before a 6 s round")
    first = time.monotonic() - t0
    k("apply", "-f", "-", stdin=json.dumps(pod("idle-2", "idle", "100m")))
    wait_until(lambda: phase("idle-2") == "Running", 20, "idle-2 Running at the next round")
    print(f"  idle pod Running after {first:.2f}s with 6 s rounds and ticks")
    for p in (ks, proc):
        services.stop(p)
        services._procs.remove(p)


run_tests("test_pelotond", dict(globals()))
