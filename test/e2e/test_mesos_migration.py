#!/usr/bin/python3
"""End-to-end: host maintenance and the migration of work from Mesos agents
to Kubelets (docs/migration.md), on one stack: a real redis-server, pelotond
(every role, --mesos-master, the native port), mesos-master-sim and
kubelet-sim.

A STATELESS job of 20 instances and a BATCH job run on Mesos agents; the
agents are put in maintenance (two with the native HostService, two with
kubectl annotate); the job's Running instances are counted after every pod
event of a watch, and never fall below 20 - maximumUnavailableInstances;
every instance ends on a Kubelet node, the BATCH tasks killed on the agents
run again there and succeed, the pool's entitlement is what it was at every
sample; a restarted pelotond leaves the agents in maintenance. Then
HostService on a Kubelet node: StartMaintenance moves its tasks (none lost,
no restart backoff) and its DAEMON instance, QueryHosts shows DRAINING then
DRAINED, CompleteMaintenance makes it UP and schedulable; and the errors for
bad input. Every wait is bounded."""
import http.client
import json
import socket
import subprocess
import threading
import time

import nativeclient
import services
from mesosclient import FAST, master_flag, operator, start_sim, start_stack, stop_sim
from simlib import run_tests

nativeclient.generate_stubs()
import grpc  # noqa: E402
from peloton.api.v0.host import host_pb2 as host  # noqa: E402
from peloton.api.v0.host.svc import host_svc_pb2 as hsvc, host_svc_pb2_grpc as hsvc_grpc  # noqa: E402
from peloton.api.v1alpha.host.svc import host_svc_pb2 as h1svc, host_svc_pb2_grpc as h1svc_grpc  # noqa: E402

wait_until = services.wait_until
BUDGET = 2
AGENTS = [f"mesos-agent-{i}" for i in range(4)]
KUBES = [f"kube-{i}" for i in range(4)]

SIM, SIM_PORT, _ = start_sim(*FAST, "--agents=4", "--agent-cpus=4", "--agent-mem=8192", "--hostname-prefix=mesos-agent-")
S = start_stack(SIM_PORT, kubelet=["--nodes=4", "--name-prefix=kube-", "--cpu=6", "--memory=8Gi"], native=True)
REDIS, PROC, PORT, LOG, NPORT, KUBECONFIG, KSIM = S.redis, S.proc, S.port, S.log, S.nport, S.kubeconfig, S.ksim
CH = nativeclient.channel(NPORT)
HOSTS = hsvc_grpc.HostServiceStub(CH)
HOSTS1 = h1svc_grpc.HostServiceStub(CH)


def kubectl(*args, stdin=None):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin)


def get(path):
    return services.get(PORT, path)


def node(name):
    return get(f"/api/v1/nodes/{name}")


def pods(name):
    return get(f"/api/v1/namespaces/default/pods?labelSelector=t%3D{name}")["items"]


def live(name):
    return [p for p in pods(name) if not p["metadata"].get("deletionTimestamp")]


def running(name):
    return [p for p in live(name) if p.get("status", {}).get("phase") == "Running"]


def query(*states, v1=False):
    if v1:
        r = HOSTS1.QueryHosts(h1svc.QueryHostsRequest(host_states=list(states)), timeout=20, wait_for_ready=True)
    else:
        r = HOSTS.QueryHosts(hsvc.QueryHostsRequest(host_states=list(states)), timeout=20, wait_for_ready=True)
    return {h.hostname: h for h in r.host_infos}


def rpc_error(fn, req):
    try:
        fn(req, timeout=20)
    except grpc.RpcError as e:
        return e.code(), e.details()
    raise AssertionError(f"{req} did not fail")


def job(name, typ, n, mesos_seconds=-1, kube_seconds=-1, **sla):
    """Each instance asks for half a core; its run lasts mesos_seconds on a Mesos agent, kube_seconds on a
    Kubelet (-1: until killed)."""
    meta = {"labels": {"t": name}}
    if kube_seconds >= 0:
        meta["annotations"] = {"kubelet-sim.peloton.io/run-seconds": str(kube_seconds)}
    spec = {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "1000"],
                            "env": [{"name": "MESOS_SIM_RUN_SECONDS", "value": str(mesos_seconds)}],
                            "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}}}]}
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"type": typ, "instanceCount": n, "resourcePool": "mig", "sla": sla,
                     "template": {"metadata": meta, "spec": spec}}}


class RunningWatch:
    """Counts a job's Running instances (pods Running and not being deleted) after every pod event of one
    watch: the minimum seen, and the events."""

    def __init__(self, name):
        self.name, self.pods, self.min, self.events, self.stop = name, {}, None, 0, False
        rv = get(f"/api/v1/namespaces/default/pods?labelSelector=t%3D{name}")["metadata"]["resourceVersion"]
        for p in pods(name):
            self.pods[p["metadata"]["name"]] = p
        self.min = self.count()
        self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
        self.conn.request("GET", f"/api/v1/namespaces/default/pods?watch=1&labelSelector=t%3D{name}"
                                 f"&resourceVersion={rv}&timeoutSeconds=110")
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def count(self):
        return len({p["metadata"]["labels"]["peloton.io/instance"] for p in self.pods.values()
                    if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")})

    def run(self):
        while not self.stop:
            try:
                line = self.resp.readline()
            except (OSError, AttributeError, ValueError):  # closed by close()
                break
            if not line:
                break
            ev = json.loads(line)
            p = ev["object"]
            if ev["type"] == "DELETED":
                self.pods.pop(p["metadata"]["name"], None)
            elif ev["type"] in ("ADDED", "MODIFIED"):
                self.pods[p["metadata"]["name"]] = p
            self.events += 1
            self.min = min(self.min, self.count())

    def close(self):
        """Ends the watch: a shutdown wakes the reader (closing the response first would wait for its lock)."""
        self.stop = True
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(10)
        self.conn.close()


def entitlement():
    st = get("/apis/peloton.io/v1alpha1/resourcepools/mig").get("status", {})
    return st.get("summary", {}).get("cpu", {}).get("entitlement")


kubectl("apply", "-f", "-", stdin=json.dumps(
    {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "mig"},
     "spec": {"resources": [{"kind": "cpu", "reservation": "16", "limit": "16", "share": 1},
                            {"kind": "memory", "reservation": "16Gi", "limit": "16Gi", "share": 1}]}}))


def test_hosts_are_up():
    """QueryHosts lists Kubelets and agents alike, UP, with the v0 goal state UP."""
    hosts = wait_until(lambda: (lambda h: set(AGENTS + KUBES) <= set(h) and h)(query()), 20, "8 hosts")
    assert all(hosts[n].state == host.HOST_STATE_UP for n in AGENTS + KUBES), hosts
    assert hosts["kube-0"].goal_state == host.HOST_STATE_UP, hosts["kube-0"]
    assert set(query(host.HOST_STATE_DRAINING)) == set(), query(host.HOST_STATE_DRAINING)


def test_migrate_jobs_from_mesos_to_kubelets():
    """The Kubelets cordoned while the jobs start, so everything runs on the agents; then the agents go in
    maintenance and every instance moves to a Kubelet, within the budget."""
    for k in KUBES:
        kubectl("cordon", k)
    kubectl("apply", "-f", "-", stdin=json.dumps(job("web", "STATELESS", 20,
                                                     maximumUnavailableInstances=BUDGET)))
    kubectl("apply", "-f", "-", stdin=json.dumps(job("bj", "BATCH", 3, mesos_seconds=300, kube_seconds=1)))
    one = job("one", "STATELESS", 4)
    one["spec"]["updateStrategy"] = {"batchSize": 1, "minReadySeconds": 0}
    kubectl("apply", "-f", "-", stdin=json.dumps(one))
    wait_until(lambda: len(running("web")) == 20 and len(running("bj")) == 3 and len(running("one")) == 4, 60,
               "27 pods Running on agents")
    assert all(p["spec"]["nodeName"] in AGENTS for p in live("web") + live("bj") + live("one"))
    before = wait_until(entitlement, 20, "the pool's entitlement")
    bj_uids = {p["metadata"]["uid"] for p in live("bj")}
    for k in KUBES:
        kubectl("uncordon", k)
    # one Job moved alone, as migration.md says: an affinity that keeps it off the agents (a rolling update)
    kubectl("patch", "pj", "one", "--type=merge", "-p", json.dumps({"spec": {"template": {"spec": {"affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "peloton.io/backend", "operator": "NotIn", "values": ["mesos"]}]}]}}}}}}}))
    wait_until(lambda: (lambda r: len(r) == 4 and all(p["spec"]["nodeName"] in KUBES for p in r))(running("one")),
               60, "the 4 instances of one on Kubelets")
    assert all(p["spec"]["nodeName"] in AGENTS for p in running("web")), "web moved too"

    watch = RunningWatch("web")
    samples, sampling = [], [True]

    def sample():  # the pool's entitlement, every 100 ms while the work moves
        while sampling[0]:
            samples.append(entitlement())
            time.sleep(0.1)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.time()
    try:
        # two agents through the native HostService, two as an operator would with kubectl
        for a in AGENTS[:2]:
            r = HOSTS.StartMaintenance(hsvc.StartMaintenanceRequest(hostname=a), timeout=20)
            assert r.hostname == a, r
        for a in AGENTS[2:]:
            kubectl("annotate", "node", a, "peloton.io/maintenance=draining")
        wait_until(lambda: all(node(a)["spec"].get("unschedulable") for a in AGENTS), 20, "agents cordoned")
        seen = query(host.HOST_STATE_DRAINING, host.HOST_STATE_DRAINED)
        assert set(AGENTS) <= set(seen), seen

        def moved():
            w = running("web")
            return len(w) == 20 and all(p["spec"]["nodeName"] in KUBES for p in w) and w
        wait_until(moved, 90, "20 web instances Running on Kubelets")
        took = time.time() - t0
        drained = wait_until(lambda: (lambda h: set(AGENTS) <= set(h) and h)(query(host.HOST_STATE_DRAINED)), 20,
                             "agents DRAINED")
        assert not set(KUBES) & set(drained), drained
    finally:
        watch.close()
        sampling[0] = False
        sampler.join(10)
    print(f"  migration: 20 instances in {took:.1f}s, {watch.events} pod events, "
          f"fewest Running {watch.min} (budget {BUDGET}); pool cpu entitlement {before} in "
          f"{sum(e == before for e in samples)} of {len(samples)} samples, others {sorted(set(samples) - {before})}")
    assert watch.min >= 20 - BUDGET, (watch.min, watch.events)
    assert watch.min < 20, "nothing was moved"  # the check could have failed
    # every instance 0..19 once, on a Kubelet; nothing left on an agent
    insts = sorted(int(p["metadata"]["labels"]["peloton.io/instance"]) for p in running("web"))
    assert insts == list(range(20)), insts
    tasks = operator(SIM_PORT, {"type": "GET_TASKS"})["get_tasks"].get("tasks", [])
    assert not [t for t in tasks if t["state"] in ("TASK_RUNNING", "TASK_STAGING", "TASK_STARTING")], tasks
    # the BATCH tasks killed on the agents ran again on Kubelets and succeeded: none lost
    wait_until(lambda: get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/bj").get("status", {})
               .get("state") == "SUCCEEDED", 60, "bj SUCCEEDED")
    done = [p for p in pods("bj") if p.get("status", {}).get("phase") == "Succeeded"]
    assert sorted(p["metadata"]["labels"]["peloton.io/instance"] for p in done) == ["0", "1", "2"], done
    assert all(p["spec"]["nodeName"] in KUBES and p["metadata"]["uid"] not in bj_uids for p in done), done
    assert all(int(p["metadata"]["annotations"]["peloton.io/run"]) >= 2 for p in done), done
    # one scheduler sees both backends: the pool's entitlement (its reservation, which holds its work) is
    # what it was at every sample while the work moved, and after
    assert samples and all(e == before for e in samples), (before, samples)
    assert entitlement() == before
    events = get("/api/v1/namespaces/default/events")["items"]
    assert any(e["reason"] == "NodeMaintenance" for e in events), {e["reason"] for e in events}


def test_maintenance_survives_a_restart():
    """A restarted pelotond writes the agents' Nodes again (POST, then a merge patch on 409): the Nodes in
    maintenance stay cordoned and DRAINED, and the web instances stay where they are."""
    global PROC, PORT, LOG, CH, HOSTS, HOSTS1
    where = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in running("web")}
    first_log = LOG
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", master_flag(SIM_PORT), f"--native-port={NPORT}",
                                              f"--port={PORT}")
    CH.close()  # a new channel: the old one's connection went with the old process
    CH = nativeclient.channel(NPORT)
    HOSTS, HOSTS1 = hsvc_grpc.HostServiceStub(CH), h1svc_grpc.HostServiceStub(CH)
    for text in (open(first_log).read(),):
        assert "AddressSanitizer" not in text and "runtime error:" not in text, text[-4000:]
    # the driver has written every agent's Node again once it has resubscribed and listed the agents
    wait_until(lambda: 'msg="mesos: subscribed"' in open(LOG).read(), 30, "the driver subscribed again")
    time.sleep(3)  # GET_AGENTS, then every agent's Node written again
    for a in AGENTS:
        n = node(a)
        assert n["spec"].get("unschedulable") is True, (a, n["spec"])
    assert set(AGENTS) <= set(query(host.HOST_STATE_DRAINED))
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in running("web")} == where


def test_maintenance_of_a_kubelet_node():
    """StartMaintenance on a Kubelet node with web instances: DRAINING, its instances move (none lost),
    DRAINED; CompleteMaintenance: UP and schedulable again."""
    by_node = {}
    for p in running("web"):
        by_node.setdefault(p["spec"]["nodeName"], []).append(p)
    victim = max(by_node, key=lambda n: len(by_node[n]))
    assert len(by_node[victim]) >= 3, {n: len(v) for n, v in by_node.items()}
    # a DAEMON job: one instance per schedulable Node, so on the four Kubelets (the agents are cordoned)
    kubectl("apply", "-f", "-", stdin=json.dumps(job("dm", "DAEMON", 0)))
    wait_until(lambda: sorted(p["spec"]["nodeName"] for p in running("dm")) == KUBES, 30, "a daemon per Kubelet")
    watch = RunningWatch("web")
    try:
        HOSTS.StartMaintenance(hsvc.StartMaintenanceRequest(hostname=victim), timeout=20)
        h = query(host.HOST_STATE_DRAINING)
        assert victim in h and h[victim].goal_state == host.HOST_STATE_DOWN, h
        assert node(victim)["spec"].get("unschedulable") is True
        assert node(victim)["metadata"]["annotations"]["peloton.io/maintenance"] in ("draining", "drained")
        # starting it again is refused: it is in maintenance already
        code, msg = rpc_error(HOSTS.StartMaintenance, hsvc.StartMaintenanceRequest(hostname=victim))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "already in maintenance" in msg, (code, msg)
        wait_until(lambda: victim in query(host.HOST_STATE_DRAINED), 60, f"{victim} DRAINED")
        w = wait_until(lambda: (lambda w: len(w) == 20 and w)(running("web")), 30, "20 web instances Running")
    finally:
        watch.close()
    assert victim not in {p["spec"]["nodeName"] for p in w}
    assert watch.min >= 20 - BUDGET, watch.min
    # the daemon's instance left with the host (a cordoned Node is not eligible)
    wait_until(lambda: sorted(p["spec"]["nodeName"] for p in live("dm")) == sorted(set(KUBES) - {victim}), 30,
               f"no daemon on {victim}")
    # a moved run is neither a failure nor a crash: no restart backoff (kubelet-sim ends a deleted pod's
    # containers with exit 0, which must not read as a service that exited)
    backoffs = [e for e in get("/api/v1/namespaces/default/events")["items"] if e["reason"] == "BackOff"]
    assert not backoffs, [e["message"] for e in backoffs]
    assert int(w[0]["metadata"]["annotations"].get("peloton.io/failures", "0")) == 0, w[0]["metadata"]
    print(f"  {victim}: {len(by_node[victim])} instances moved, fewest Running {watch.min} (budget {BUDGET})")
    # the same through v1alpha, which has no goal state
    h1 = query(host.HOST_STATE_DRAINED, v1=True)
    assert victim in h1 and set(AGENTS) <= set(h1), h1
    r = HOSTS.CompleteMaintenance(hsvc.CompleteMaintenanceRequest(hostname=victim), timeout=20)
    assert r.hostname == victim
    n = node(victim)
    assert not n["spec"].get("unschedulable") and "peloton.io/maintenance" not in n["metadata"].get(
        "annotations", {}), n
    assert query()[victim].state == host.HOST_STATE_UP
    wait_until(lambda: sorted(p["spec"]["nodeName"] for p in running("dm")) == KUBES, 30,
               f"the daemon back on {victim}")
    # schedulable again: a new job lands there
    j = job("back", "BATCH", 1)
    j["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": victim}
    kubectl("apply", "-f", "-", stdin=json.dumps(j))
    wait_until(lambda: [p for p in running("back") if p["spec"]["nodeName"] == victim], 30, f"a pod on {victim}")
    # the agents, completed through v1alpha, are UP again
    for a in AGENTS:
        HOSTS1.CompleteMaintenance(h1svc.CompleteMaintenanceRequest(hostname=a), timeout=20)
    assert all(query()[a].state == host.HOST_STATE_UP for a in AGENTS)


def test_bad_input():
    cases = [
        (HOSTS.StartMaintenance, hsvc.StartMaintenanceRequest(hostname="no-such-host"), grpc.StatusCode.NOT_FOUND,
         "host no-such-host not found"),
        (HOSTS.CompleteMaintenance, hsvc.CompleteMaintenanceRequest(hostname="no-such-host"),
         grpc.StatusCode.NOT_FOUND, "not found"),
        (HOSTS.StartMaintenance, hsvc.StartMaintenanceRequest(), grpc.StatusCode.INVALID_ARGUMENT,
         "hostname: required"),
        (HOSTS.StartMaintenance, hsvc.StartMaintenanceRequest(hostname="Bad Host/../x"),
         grpc.StatusCode.INVALID_ARGUMENT, "is not a host name"),
        (HOSTS.StartMaintenance, hsvc.StartMaintenanceRequest(hostname="x" * 300),
         grpc.StatusCode.INVALID_ARGUMENT, "is not a host name"),
        (HOSTS.StartMaintenance, hsvc.StartMaintenanceRequest(hostnames=["kube-1", "kube-1."]),
         grpc.StatusCode.INVALID_ARGUMENT, "hostnames[1]"),
        (HOSTS.StartMaintenance, hsvc.StartMaintenanceRequest(hostnames=["h"] * 101),
         grpc.StatusCode.INVALID_ARGUMENT, "at most 100"),
        (HOSTS.CompleteMaintenance, hsvc.CompleteMaintenanceRequest(hostname="kube-1"),
         grpc.StatusCode.FAILED_PRECONDITION, "not in maintenance"),
        (HOSTS.QueryHosts, hsvc.QueryHostsRequest(host_states=[host.HOST_STATE_INVALID]),
         grpc.StatusCode.INVALID_ARGUMENT, "hostStates[0]"),
        (HOSTS.QueryHosts, hsvc.QueryHostsRequest(host_states=[host.HOST_STATE_UP, 42]),
         grpc.StatusCode.INVALID_ARGUMENT, "hostStates[1]: 42"),
    ]
    for fn, req, want, text in cases:
        code, msg = rpc_error(fn, req)
        assert code == want and text in msg, (req, code, msg)
    # nothing of that changed a host
    assert all(h.state == host.HOST_STATE_UP for h in query().values()), query()
    # YARPC, JSON encoding, as Peloton's own clients call it
    r = subprocess.run(["curl", "-s", "-i", f"http://127.0.0.1:{NPORT}/api/v1",
                        "-H", "Rpc-Procedure: peloton.api.v0.host.svc.HostService::QueryHosts",
                        "-H", "Rpc-Encoding: json", "-H", "Rpc-Caller: test", "-H", "Rpc-Service: peloton-hostmgr",
                        "-d", json.dumps({"hostStates": ["HOST_STATE_UP"]})],
                       capture_output=True, text=True, timeout=20)
    assert "Rpc-Status: success" in r.stdout and '"hostname":"kube-0"' in r.stdout, r.stdout


def test_stops_cleanly():
    """pelotond and the sim stop with exit 0 (ASan: no leak); nothing in pelotond's log from the sanitizers."""
    text = open(LOG).read()
    assert "AddressSanitizer" not in text and "runtime error:" not in text, text[-4000:]
    services.stop(KSIM)
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    stop_sim(SIM)


run_tests("test_mesos_migration", dict(globals()))
