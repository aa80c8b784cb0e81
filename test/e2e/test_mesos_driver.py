#!/usr/bin/python3
"""End-to-end: the host manager's Mesos driver (pelotond --mesos-master=URL,
kubelet-hostmgr/mesosdrv.c) with a real redis-server, mesos-master-sim and
kubelet-sim (a mixed fleet). Agents appear as Nodes beside the Kubelets'; a
Job's pods run on Mesos agents as tasks and reach Running then Succeeded;
a deleted pod's task is killed; a lost agent's pods run again elsewhere;
a restarted pelotond resubscribes as the same framework and neither loses nor
duplicates a task; updates are acknowledged. Every wait is bounded; every
process is stopped (the sim must exit 0 under ASan)."""
import json
import socket
import subprocess

import services
from mesosclient import FAST, hook, master_flag, operator, start_sim, start_stack, stop_sim
from simlib import run_tests

wait_until = services.wait_until
SIM, SIM_PORT, _ = start_sim(*FAST, "--agents=3", "--agent-cpus=4", "--agent-mem=8192",
                             "--zones=2", "--agent-attributes=rack=r1", "--hostname-prefix=mesos-agent-")
S = start_stack(SIM_PORT, kubelet=["--nodes=2", "--name-prefix=kube-", "--cpu=4", "--memory=8Gi"])
REDIS, PROC, PORT, LOG, KUBECONFIG, KSIM = S.redis, S.proc, S.port, S.log, S.kubeconfig, S.ksim
MASTER = master_flag(SIM_PORT)


def kubectl(*args, stdin=None, check=True):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin, check=check)


def get(path):
    return services.get(PORT, path)


def redis_get(key):
    with socket.create_connection(("127.0.0.1", REDIS), timeout=5) as s:
        s.sendall(f"*2\r\n$3\r\nGET\r\n${len(key)}\r\n{key}\r\n".encode())
        data = s.recv(4096).decode()
    if data.startswith("$-1"):
        return None
    return data.split("\r\n")[1]


def mesos_nodes():
    return {n["metadata"]["name"]: n for n in
            get("/api/v1/nodes?labelSelector=peloton.io%2Fbackend%3Dmesos")["items"]}


def ready(node):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))


def sim_state():
    st, text, _ = __import__("mesosclient").call(SIM_PORT, {}, path="/sim/state", method="GET")
    assert st == 200, (st, text)
    return json.loads(text)


def sim_tasks():
    r = operator(SIM_PORT, {"type": "GET_TASKS"})["get_tasks"]
    return r.get("tasks", []), r.get("completed_tasks", [])


def job(name, n, run_seconds, cpu="1", typ="BATCH", node_selector=None):
    spec = {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c"], "args": ["sleep 1000"],
                            "env": [{"name": "MESOS_SIM_RUN_SECONDS", "value": str(run_seconds)}],
                            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
    if node_selector is None:
        node_selector = {"peloton.io/backend": "mesos"}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"type": typ, "instanceCount": n, "resourcePool": "mesos-pool",
                     "template": {"metadata": {"labels": {"t": name}}, "spec": spec}}}


def apply(obj):
    kubectl("apply", "-f", "-", stdin=json.dumps(obj))


def pods(name):
    return [p for p in get(f"/api/v1/namespaces/default/pods?labelSelector=t%3D{name}")["items"]]


def live(name):
    return [p for p in pods(name) if not p["metadata"].get("deletionTimestamp")]


def phases(name):
    return sorted(p.get("status", {}).get("phase", "") for p in live(name))


def task_ids(name):
    return {f"{p['metadata']['uid']}-{p['metadata'].get('annotations', {}).get('peloton.io/run', '1')}"
            for p in live(name)}


apply({"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "mesos-pool"},
       "spec": {"resources": [{"kind": "cpu", "reservation": "32", "limit": "32", "share": 1}, {"kind": "memory", "reservation": "64Gi", "limit": "64Gi", "share": 1}]}})


def test_flags_are_checked():
    """The mesos role without a master, a master that is no http:// URL, or a master without the role: exit 2."""
    for args, msg in ((["--roles=apiserver,mesos"], "needs --mesos-master"),
                      (["--mesos-master=https://127.0.0.1:1"], "needs --mesos-master=http://"),
                      (["--roles=apiserver", MASTER], "needs the hostmgr or mesos role")):
        r = subprocess.run([services.PELOTOND, *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and msg in r.stderr, (args, r.returncode, r.stderr)


def test_agents_become_nodes():
    nodes = wait_until(lambda: len(mesos_nodes()) == 3 and all(ready(n) for n in mesos_nodes().values())
                       and mesos_nodes(), 20, "3 Mesos Nodes Ready")
    assert sorted(nodes) == ["mesos-agent-0", "mesos-agent-1", "mesos-agent-2"], sorted(nodes)
    n = nodes["mesos-agent-1"]
    assert n["status"]["capacity"]["cpu"] == "4", n["status"]
    assert n["status"]["allocatable"]["memory"] == "8192Mi", n["status"]
    assert n["status"]["capacity"]["pods"] == "110" and "nvidia.com/gpu" not in n["status"]["capacity"], n["status"]
    labels = n["metadata"]["labels"]
    assert labels["zone"] == "zone-1" and labels["topology.kubernetes.io/zone"] == "zone-1", labels
    assert labels["rack"] == "r1" and labels["kubernetes.io/hostname"] == "mesos-agent-1", labels
    assert n["metadata"]["annotations"]["peloton.io/mesos-agent-id"].endswith("-S1"), n["metadata"]
    # one fleet: the Kubelets' Nodes are there too, without the label
    names = {x["metadata"]["name"] for x in get("/api/v1/nodes")["items"]}
    assert {"kube-0", "kube-1"} <= names, names
    # the framework id is kept in Redis, and it is the master's only framework
    fid = wait_until(lambda: redis_get("peloton:mesos:framework-id"), 10, "framework id in Redis")
    fws = operator(SIM_PORT, {"type": "GET_FRAMEWORKS"})["get_frameworks"]["frameworks"]
    assert [f["framework_info"]["id"]["value"] for f in fws] == [fid], fws
    caps = {c["type"] for c in fws[0]["framework_info"].get("capabilities", [])}
    assert {"GPU_RESOURCES", "PARTITION_AWARE", "TASK_KILLING_STATE", "MULTI_ROLE"} <= caps, caps
    assert fws[0]["framework_info"]["failover_timeout"] >= 7 * 86400, fws[0]


def test_driver_shares_the_pod_feed():
    """The driver follows pods through the controllers' shared feed: pelotond
    opens two pod watches (that feed, and the job manager's of labelled
    pods) beside kubelet-sim's one, not a third of its own that decodes
    every pod event again (the driver's own feed made it 4)."""
    import time
    import urllib.request

    def pod_watches():
        text = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith('peloton_apiserver_watches{resource="pods"}'):
                return int(float(line.split()[-1]))
        return 0
    wait_until(lambda: pod_watches() >= 3, 10, "the pod watches open")
    time.sleep(0.5)  # a late one would show by now
    n = pod_watches()
    assert n == 3, f"{n} pod watches open"


def test_batch_job_runs_then_succeeds():
    apply(job("mb", 4, 3))
    seen = set()

    def all_running():
        ph = phases("mb")
        seen.update(ph)
        return len(ph) == 4 and all(p == "Running" for p in ph) and ph
    wait_until(all_running, 30, "4 pods Running")
    for p in live("mb"):
        assert p["spec"]["nodeName"].startswith("mesos-agent-"), p["spec"]
    tasks, _ = sim_tasks()
    ids = task_ids("mb")
    running = {t["task_id"]["value"] for t in tasks if t["state"] == "TASK_RUNNING"}
    assert ids <= running, (ids, running)
    info = next(t for t in tasks if t["task_id"]["value"] in ids)
    assert info["container"]["mesos"]["image"]["docker"]["name"] == "busybox:1.36", info
    labels = {l["key"]: l.get("value") for l in info["labels"]["labels"]}
    assert labels["t"] == "mb" and labels["peloton.io/job"] == "mb", labels
    res = {r["name"]: r["scalar"]["value"] for r in info["resources"]}
    assert res == {"cpus": 1, "mem": 256}, res
    wait_until(lambda: phases("mb") == ["Succeeded"] * 4, 30, "4 pods Succeeded")
    # every update with a uuid was acknowledged: none waits at the master
    st = wait_until(lambda: (lambda st: st["tasks_with_pending_updates"] == 0 and st["acks"] == st["updates_sent"]
                             and st)(sim_state()), 10, "every update acknowledged")
    assert st["tasks_launched"] == 4 and st["bad_calls"] == 0, st
    # the driver's metrics (docs/metrics.md) say the same: 4 tasks launched, every update acknowledged
    want = {"peloton_mesos_tasks_launched_total": 4, 'peloton_mesos_calls_total{call="ACKNOWLEDGE"}': st["acks"],
            "peloton_mesos_agents": 3, "peloton_mesos_subscribed": 1}

    def metrics():
        text = __import__("urllib.request").request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=10).read()
        got = {l.rpartition(" ")[0]: float(l.rpartition(" ")[2]) for l in text.decode().splitlines()
               if l.startswith("peloton_mesos_")}
        return got if all(got.get(k) == v for k, v in want.items()) else None
    got = wait_until(metrics, 10, f"the driver's metrics at {want}")
    assert got['peloton_mesos_calls_total{call="ACCEPT"}'] >= 1 and got["peloton_mesos_status_updates_total"] >= 8, got
    kubectl("delete", "jobs.peloton.io", "mb", "--wait=false")
    wait_until(lambda: not pods("mb"), 30, "mb's pods gone")


def test_failed_task_fails_the_pod():
    """TASK_FAILED: the pod is Failed with reason TaskFailed and the master's reason and message."""
    j = job("mf", 1, 1)
    j["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "MESOS_SIM_FAIL", "value": "1"})
    apply(j)

    def failed():
        return [p for p in pods("mf") if p.get("status", {}).get("phase") == "Failed"]
    p = wait_until(failed, 30, "a pod Failed")[0]
    assert p["status"]["reason"] == "TaskFailed", p["status"]
    assert "TASK_FAILED" in p["status"]["message"] and "REASON_COMMAND_EXECUTOR_FAILED" in p["status"]["message"], \
        p["status"]
    kubectl("delete", "jobs.peloton.io", "mf", "--wait=false")
    wait_until(lambda: not pods("mf"), 30, "mf's pods gone")


def test_deleted_pod_is_killed():
    apply(job("mk", 2, -1, typ="STATELESS"))
    wait_until(lambda: phases("mk") == ["Running", "Running"], 30, "2 pods Running")
    victim = live("mk")[0]
    tid = f"{victim['metadata']['uid']}-{victim['metadata'].get('annotations', {}).get('peloton.io/run', '1')}"
    kubectl("delete", "pod", victim["metadata"]["name"], "--wait=false")

    def killed():
        _, done = sim_tasks()
        return [t for t in done if t["task_id"]["value"] == tid and t["state"] == "TASK_KILLED"]
    wait_until(killed, 20, "the deleted pod's task KILLED")
    wait_until(lambda: victim["metadata"]["uid"] not in {p["metadata"]["uid"] for p in pods("mk")}, 20,
               "the killed pod gone")
    # the job manager replaces it; the replacement runs
    wait_until(lambda: phases("mk") == ["Running", "Running"], 30, "2 pods Running again")
    kubectl("delete", "jobs.peloton.io", "mk", "--wait=false")
    wait_until(lambda: not pods("mk"), 30, "mk's pods gone")
    wait_until(lambda: not [t for t in sim_tasks()[0] if t["state"] in ("TASK_RUNNING", "TASK_KILLING")], 20,
               "no task left running")


def test_mixed_fleet():
    """Kubelets and Mesos agents are one fleet: a Job of 5 pods of 3 cpus needs all 5 nodes of 4 cpus."""
    apply(job("mx", 5, -1, cpu="3", typ="STATELESS", node_selector={}))
    wait_until(lambda: phases("mx") == ["Running"] * 5, 40, "5 pods Running")
    on = sorted(p["spec"]["nodeName"] for p in live("mx"))
    assert on == ["kube-0", "kube-1", "mesos-agent-0", "mesos-agent-1", "mesos-agent-2"], on
    running = {t["task_id"]["value"] for t in sim_tasks()[0] if t["state"] == "TASK_RUNNING"}
    assert running == {i for i in task_ids("mx") if i in running} and len(running) == 3, running
    kubectl("delete", "jobs.peloton.io", "mx", "--wait=false")
    wait_until(lambda: not pods("mx"), 30, "mx's pods gone")
    wait_until(lambda: not [t for t in sim_tasks()[0] if t["state"] in ("TASK_RUNNING", "TASK_KILLING")], 20,
               "no task left running")


def test_drain_moves_work_off_an_agent():
    """The Node annotation peloton.io/mesos-drain=true cordons the agent's Node and drains the agent
    (DRAIN_AGENT); its tasks killed by the drain are lost, so their pods run again elsewhere."""
    apply(job("md", 4, -1, cpu="3", typ="STATELESS", node_selector={}))  # 4 of the 5 nodes
    wait_until(lambda: phases("md") == ["Running"] * 4, 40, "4 pods Running")
    victim = next(p for p in live("md") if p["spec"]["nodeName"].startswith("mesos-agent-"))
    node, uid = victim["spec"]["nodeName"], victim["metadata"]["uid"]
    agent = mesos_nodes()[node]["metadata"]["annotations"]["peloton.io/mesos-agent-id"]
    kubectl("annotate", "node", node, "peloton.io/mesos-drain=true")
    wait_until(lambda: mesos_nodes()[node]["spec"].get("unschedulable") is True, 20, f"{node} cordoned")

    def drained():
        for a in operator(SIM_PORT, {"type": "GET_AGENTS"})["get_agents"]["agents"]:
            if a["agent_info"]["id"]["value"] == agent:
                return a.get("drain_info", {}).get("state") == "DRAINED"
    wait_until(drained, 30, f"{agent} DRAINED")
    wait_until(lambda: uid not in {p["metadata"]["uid"] for p in pods("md")}, 20, "the drained pod gone")
    events = get("/api/v1/namespaces/default/events")["items"]
    assert any(e["reason"] == "TaskLost" and e["involvedObject"].get("uid") == uid for e in events)
    q = wait_until(lambda: phases("md") == ["Running"] * 4 and live("md"), 40, "4 pods Running again")
    assert node not in {p["spec"]["nodeName"] for p in q}, [p["spec"]["nodeName"] for p in q]
    kubectl("delete", "jobs.peloton.io", "md", "--wait=false")
    wait_until(lambda: not pods("md"), 30, "md's pods gone")
    # undone: the annotation removed uncordons the Node; the agent is reactivated by hand (the driver does not)
    kubectl("annotate", "node", node, "peloton.io/mesos-drain-")
    wait_until(lambda: not mesos_nodes()[node]["spec"].get("unschedulable"), 20, f"{node} uncordoned")
    st, text, _ = __import__("mesosclient").call(SIM_PORT, {"type": "REACTIVATE_AGENT",
                                                           "reactivate_agent": {"agent_id": {"value": agent}}},
                                                 path="/api/v1")
    assert st == 200, (st, text)


def test_lost_agent_pods_run_elsewhere():
    apply(job("ml", 1, -1, typ="STATELESS"))
    wait_until(lambda: phases("ml") == ["Running"], 30, "1 pod Running")
    p = live("ml")[0]
    node, uid = p["spec"]["nodeName"], p["metadata"]["uid"]
    agent = mesos_nodes()[node]["metadata"]["annotations"]["peloton.io/mesos-agent-id"]
    hook(SIM_PORT, "agent-unreachable", {"agent_id": agent})
    # the agent's Node goes NotReady with the unreachable taint, so placement avoids it
    wait_until(lambda: not ready(mesos_nodes()[node]), 20, f"{node} NotReady")
    taints = mesos_nodes()[node]["spec"].get("taints", [])
    assert any(t["key"] == "node.kubernetes.io/unreachable" for t in taints), taints
    # its pod is lost (deleted, a TaskLost Event) and the job manager runs it again elsewhere
    wait_until(lambda: uid not in {q["metadata"]["uid"] for q in pods("ml")}, 20, "the lost pod gone")
    events = get("/api/v1/namespaces/default/events")["items"]
    assert any(e["reason"] == "TaskLost" and e["involvedObject"].get("uid") == uid for e in events), \
        [e["reason"] for e in events]
    q = wait_until(lambda: [q for q in live("ml") if q.get("status", {}).get("phase") == "Running"], 30,
                   "the replacement Running")[0]
    assert q["spec"]["nodeName"] != node and q["spec"]["nodeName"].startswith("mesos-agent-"), q["spec"]
    assert q["metadata"].get("annotations", {}).get("peloton.io/lost") == "1", q["metadata"]
    # an agent the operator marks gone (one without tasks, active till then): its Node goes
    idle = next(n for n in mesos_nodes() if n not in (node, q["spec"]["nodeName"]))
    hook(SIM_PORT, "agent-gone", {"agent_id": mesos_nodes()[idle]["metadata"]["annotations"]["peloton.io/mesos-agent-id"]})
    wait_until(lambda: idle not in mesos_nodes(), 20, f"{idle} deleted")
    kubectl("delete", "jobs.peloton.io", "ml", "--wait=false")
    wait_until(lambda: not pods("ml"), 30, "ml's pods gone")


def test_restart_resubscribes_as_same_framework():
    global PROC, PORT, LOG
    fid = redis_get("peloton:mesos:framework-id")
    apply(job("ms", 2, -1, cpu="500m", typ="STATELESS"))
    wait_until(lambda: phases("ms") == ["Running", "Running"], 30, "2 pods Running")
    before = task_ids("ms")
    uids = {p["metadata"]["uid"] for p in live("ms")}
    assert services.stop(PROC) == 0
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", MASTER, f"--port={PORT}")
    fws = wait_until(lambda: [f for f in operator(SIM_PORT, {"type": "GET_FRAMEWORKS"})["get_frameworks"]["frameworks"]
                              if f.get("connected", True) and f.get("active", True)], 20, "resubscribed")
    assert [f["framework_info"]["id"]["value"] for f in fws] == [fid], fws
    assert redis_get("peloton:mesos:framework-id") == fid
    # nothing lost or duplicated: the same pods, the same tasks, running once each
    import time
    time.sleep(3)  # a few allocation intervals and a reconciliation
    assert {p["metadata"]["uid"] for p in live("ms")} == uids
    assert phases("ms") == ["Running", "Running"]
    running = [t["task_id"]["value"] for t in sim_tasks()[0] if t["state"] == "TASK_RUNNING"]
    assert sorted(t for t in running if t in before) == sorted(before), (running, before)
    assert len(running) == len(set(running)) == 2, running
    kubectl("delete", "jobs.peloton.io", "ms", "--wait=false")
    wait_until(lambda: not pods("ms"), 30, "ms's pods gone")


def test_unknown_task_is_killed():
    """A task the master runs that no pod names (its pod went while the driver was down) is killed."""
    global PROC, PORT, LOG
    apply(job("mu", 1, -1, cpu="500m", typ="STATELESS"))
    wait_until(lambda: phases("mu") == ["Running"], 30, "1 pod Running")
    p = live("mu")[0]
    tid = next(iter(task_ids("mu")))
    assert services.stop(PROC) == 0
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver", f"--port={PORT}")
    st, body = services.api(PORT, "DELETE", f"/api/v1/namespaces/default/pods/{p['metadata']['name']}",
                            {"gracePeriodSeconds": 0})
    assert st == 200, (st, body)
    assert services.stop(PROC) == 0
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", MASTER, f"--port={PORT}")
    wait_until(lambda: [t for t in sim_tasks()[1] if t["task_id"]["value"] == tid and t["state"] == "TASK_KILLED"],
               20, "the unknown task KILLED")
    # the job manager ran the instance again
    wait_until(lambda: phases("mu") == ["Running"] and tid not in task_ids("mu"), 30, "a new run Running")
    assert "unknown task killed" in open(LOG).read()
    kubectl("delete", "jobs.peloton.io", "mu", "--wait=false")
    wait_until(lambda: not pods("mu"), 30, "mu's pods gone")


def test_starting_shows_pending_with_a_reason():
    """TASK_STARTING is written as the pod's status, Pending with the reason TaskStarting, and acknowledged
    once stored; RUNNING then keeps placement's PodScheduled condition (a merge patch replaces the list).
    Seen through a watch of the Job's pods."""
    import http.client
    import threading
    events = []
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    conn.request("GET", "/api/v1/namespaces/default/pods?watch=1&labelSelector=t%3Dms")
    resp = conn.getresponse()
    assert resp.status == 200, resp.status

    def read():
        try:
            for line in resp:
                if line.strip():
                    events.append(json.loads(line))
        except Exception:  # the stream cut when the server stops (http.client can raise several kinds, racing its close)
            pass
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    acks = sim_state()["acks"]
    apply(job("ms", 2, -1, cpu="500m", typ="STATELESS"))
    wait_until(lambda: phases("ms") == ["Running", "Running"], 30, "2 pods Running")
    st = wait_until(lambda: (lambda st: st["tasks_with_pending_updates"] == 0 and st)(sim_state()), 10,
                    "every update acknowledged")
    assert st["acks"] == acks + 4, (acks, st)  # STARTING and RUNNING of each
    wait_until(lambda: sum(1 for e in events if e["object"].get("status", {}).get("phase") == "Running") >= 2, 10,
               "the watch sees both pods Running")
    services.end_watch(conn)
    statuses = [e["object"].get("status", {}) for e in events]
    starting = [x for x in statuses if x.get("reason") == "TaskStarting"]
    assert starting and all(x.get("phase") == "Pending" for x in starting), statuses
    # the Running write keeps placement's PodScheduled condition (a merge patch replaces the list)
    for p in live("ms"):
        conds = {c["type"]: c["status"] for c in p["status"].get("conditions", [])}
        assert conds.get("PodScheduled") == "True" and conds.get("Ready") == "True", p["status"]
    kubectl("delete", "jobs.peloton.io", "ms", "--wait=false")
    wait_until(lambda: not pods("ms"), 30, "ms's pods gone")
    wait_until(lambda: not [t for t in sim_tasks()[0] if t["state"] in ("TASK_RUNNING", "TASK_KILLING")], 20,
               "ms's tasks killed")


def test_leftover_offer_comes_back_without_revive():
    """An ACCEPT leaves no refuse filter: what the launch left of the agent is offered again at the next
    allocation (held for pods still to come, then declined), with no REVIVE between."""
    wait_until(lambda: sim_state()["offers"] == 0, 10, "no offer outstanding")
    apply(job("mo", 1, -1, cpu="500m", typ="STATELESS"))
    wait_until(lambda: phases("mo") == ["Running"], 30, "1 pod Running")
    agent = next(t["agent_id"]["value"] for t in sim_tasks()[0] if t["task_id"]["value"] in task_ids("mo"))
    st0 = sim_state()

    def offered_again():
        r = operator(SIM_PORT, {"type": "GET_AGENTS"})["get_agents"]["agents"]
        a = next(x for x in r if x["agent_info"]["id"]["value"] == agent)
        cpus = sum(x["scalar"]["value"] for x in a.get("offered_resources", []) if x["name"] == "cpus")
        return cpus > 0 and sim_state()
    st = wait_until(offered_again, 5, "the agent's leftover offered again")
    assert st["revives"] == st0["revives"], (st0, st)
    kubectl("delete", "jobs.peloton.io", "mo", "--wait=false")
    wait_until(lambda: not pods("mo"), 30, "mo's pods gone")


def test_ack_waits_for_the_status_write():
    """An update is acknowledged only once the pod's status is stored: with the API server down, the
    master keeps re-sending TASK_FINISHED; once it is back the pod is Succeeded and the update acknowledged.
    The controllers run in a process of their own here (--server), the API server in another."""
    global PROC, PORT, LOG
    assert services.stop(PROC) == 0
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver", f"--port={PORT}")
    d = services.tempdir()
    clog = f"{d}/controllers.log"
    ctl = subprocess.Popen([services.PELOTOND, "--roles=resmgr,placement,jobmgr,hostmgr", MASTER,
                            f"--server=http://127.0.0.1:{PORT}", f"--redis=127.0.0.1:{REDIS}"],
                           stdout=open(clog, "w"), stderr=subprocess.STDOUT)
    services._procs.append(ctl)
    apply(job("ma", 1, 5, cpu="500m"))
    wait_until(lambda: phases("ma") == ["Running"], 30, "1 pod Running")
    tid = next(iter(task_ids("ma")))
    wait_until(lambda: sim_state()["tasks_with_pending_updates"] == 0, 10, "RUNNING acknowledged")
    acks = sim_state()["acks"]
    assert services.stop(PROC) == 0  # the API server goes; the driver's writes fail
    st = wait_until(lambda: (lambda st: st["tasks_with_pending_updates"] == 1 and st)(sim_state()), 20,
                    "TASK_FINISHED sent and not acknowledged")
    resends = st["update_resends"]
    wait_until(lambda: sim_state()["update_resends"] >= resends + 2, 20, "TASK_FINISHED re-sent")
    st = sim_state()
    assert st["acks"] == acks and st["tasks_with_pending_updates"] == 1, (acks, st)
    assert [t for t in sim_tasks()[0] if t["task_id"]["value"] == tid and t["state"] == "TASK_FINISHED"]
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver", f"--port={PORT}")
    wait_until(lambda: phases("ma") == ["Succeeded"], 30, "the pod Succeeded")
    wait_until(lambda: sim_state()["tasks_with_pending_updates"] == 0, 20, "TASK_FINISHED acknowledged")
    assert sim_state()["acks"] == acks + 1, (acks, sim_state())
    kubectl("delete", "jobs.peloton.io", "ma", "--wait=false")
    wait_until(lambda: not pods("ma"), 30, "ma's pods gone")
    assert services.stop(ctl) == 0, open(clog).read()[-3000:]
    text = open(clog).read()
    assert "AddressSanitizer" not in text and "runtime error:" not in text, text[-4000:]
    assert services.stop(PROC) == 0
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", MASTER, f"--port={PORT}")


def test_resent_update_waits_for_its_write():
    """One status write per task at a time, in the order the updates came: while the API server hangs
    (stopped, its connections left open), the master re-sends TASK_FINISHED; the resends start no second
    write of the pod (two writes in flight land in any order: an older state could be stored over a newer
    one), and the one write, once it lands, is acknowledged. Seen through a watch of the Job's pods."""
    global PROC, PORT, LOG
    import http.client
    import os
    import signal
    import threading
    assert services.stop(PROC) == 0
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver", f"--port={PORT}")
    d = services.tempdir()
    clog = f"{d}/controllers.log"
    ctl = subprocess.Popen([services.PELOTOND, "--roles=resmgr,placement,jobmgr,hostmgr", MASTER,
                            f"--server=http://127.0.0.1:{PORT}", f"--redis=127.0.0.1:{REDIS}"],
                           stdout=open(clog, "w"), stderr=subprocess.STDOUT)
    services._procs.append(ctl)
    events = []
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    conn.request("GET", "/api/v1/namespaces/default/pods?watch=1&labelSelector=t%3Dmw")
    resp = conn.getresponse()
    assert resp.status == 200, resp.status

    def read():
        try:
            for line in resp:
                if line.strip():
                    events.append(json.loads(line))
        except Exception:  # the stream cut when the server stops (http.client can raise several kinds, racing its close)
            pass
    threading.Thread(target=read, daemon=True).start()
    apply(job("mw", 1, 3, cpu="500m"))
    wait_until(lambda: phases("mw") == ["Running"], 30, "1 pod Running")
    wait_until(lambda: sim_state()["tasks_with_pending_updates"] == 0, 10, "RUNNING acknowledged")
    acks = sim_state()["acks"]
    os.kill(PROC.pid, signal.SIGSTOP)  # the API server hangs: the driver's next write stays in flight
    try:
        st = wait_until(lambda: (lambda st: st["tasks_with_pending_updates"] == 1 and st)(sim_state()), 20,
                        "TASK_FINISHED sent")
        resends = st["update_resends"]
        wait_until(lambda: sim_state()["update_resends"] >= resends + 2, 20, "TASK_FINISHED re-sent twice")
    finally:
        os.kill(PROC.pid, signal.SIGCONT)
    wait_until(lambda: phases("mw") == ["Succeeded"], 30, "the pod Succeeded")
    wait_until(lambda: sim_state()["tasks_with_pending_updates"] == 0, 20, "TASK_FINISHED acknowledged")
    assert sim_state()["acks"] == acks + 1, (acks, sim_state())
    wait_until(lambda: [e for e in events if e["object"].get("status", {}).get("reason") == "TaskFinished"], 10,
               "the watch sees the pod Succeeded")
    kubectl("delete", "jobs.peloton.io", "mw", "--wait=false")
    wait_until(lambda: not pods("mw"), 30, "mw's pods gone")
    services.end_watch(conn)
    # each status write stamps the Ready condition with its own time: one write, one stamp
    writes = {c.get("lastTransitionTime") for e in events if e["object"].get("status", {}).get("reason") == "TaskFinished"
              for c in e["object"]["status"].get("conditions", []) if c.get("type") == "Ready"}
    assert len(writes) == 1, writes
    assert services.stop(ctl) == 0, open(clog).read()[-3000:]
    text = open(clog).read()
    assert "AddressSanitizer" not in text and "runtime error:" not in text, text[-4000:]
    assert services.stop(PROC) == 0
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", MASTER, f"--port={PORT}")


def inject_update(tid, agent, state):
    """Writes one UPDATE of task tid into the driver's stream (/sim/inject), with a uuid the master never
    sent: what a master's resend of an older update looks like to the driver."""
    import base64
    import os
    fid = redis_get("peloton:mesos:framework-id")
    ev = json.dumps({"type": "UPDATE", "update": {"status": {
        "task_id": {"value": tid}, "agent_id": {"value": agent}, "state": state, "source": "SOURCE_EXECUTOR",
        "uuid": base64.b64encode(os.urandom(16)).decode()}}}, separators=(",", ":"))
    hook(SIM_PORT, "inject", {"framework_id": fid, "data": f"{len(ev.encode())}\n{ev}"})


def test_stale_update_is_not_stored():
    """A task never steps back: an update older than the state stored (TASK_STARTING for a Running pod, as
    the master's resend of an update whose write failed) is acknowledged and not stored, the pod stays
    Running; after a restart the state stored is read back from the pod (reconciliation's RUNNING then
    writes nothing: the Ready condition keeps its time), and the same holds."""
    global PROC, PORT, LOG
    apply(job("mb", 1, -1, cpu="500m", typ="STATELESS"))
    wait_until(lambda: phases("mb") == ["Running"], 30, "1 pod Running")
    wait_until(lambda: sim_state()["tasks_with_pending_updates"] == 0, 10, "RUNNING acknowledged")
    tid = next(iter(task_ids("mb")))
    agent = next(t["agent_id"]["value"] for t in sim_tasks()[0] if t["task_id"]["value"] == tid)
    def ready_time():
        p = live("mb")[0]
        return next(c["lastTransitionTime"] for c in p["status"]["conditions"] if c["type"] == "Ready")
    for restart in (False, True):
        if restart:
            import time
            stamp, sent = ready_time(), sim_state()["updates_sent"]
            time.sleep(1)  # a status write after the restart would stamp another second
            assert services.stop(PROC) == 0
            PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", MASTER, f"--port={PORT}")
            wait_until(lambda: sim_state()["updates_sent"] > sent, 20, "reconciliation answered")
            time.sleep(1)  # what the driver makes of the answer lands
            assert ready_time() == stamp, (stamp, live("mb")[0]["status"])
        ignored = sim_state()["acks_ignored"]
        inject_update(tid, agent, "TASK_STARTING")
        # acknowledged (the master ignores the uuid it never sent); the driver acknowledges only after
        # what it stores is stored, so the pod read now shows what it did
        wait_until(lambda: sim_state()["acks_ignored"] == ignored + 1, 10, "the stale update acknowledged")
        assert phases("mb") == ["Running"], (restart, [p["status"] for p in live("mb")])
    kubectl("delete", "jobs.peloton.io", "mb", "--wait=false")
    wait_until(lambda: not pods("mb"), 30, "mb's pods gone")


def test_pelotond_log_is_clean():
    assert PROC.poll() is None, "pelotond exited"
    text = open(LOG).read()
    assert "AddressSanitizer" not in text and "runtime error:" not in text, text[-4000:]


def test_stops_cleanly():
    """pelotond and the sim stop with exit 0 (ASan: no leak in either)."""
    import os
    import shutil
    if os.environ.get("MDRV_KEEP_LOG"):
        shutil.copy(LOG, os.environ["MDRV_KEEP_LOG"])
    services.stop(KSIM)
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    stop_sim(SIM)


run_tests("test_mesos_driver", dict(globals()))
