#!/usr/bin/python3
"""End-to-end: the Mesos driver through a master failover. pelotond is given
the master that does not lead (mesos-master-sim --standby-port): it follows
the 307 to the leader. After /sim/failover the stream breaks and the standby
leads: the driver resubscribes there as the same framework, its pods keep
running, a deleted pod's task is killed and its replacement launched on the
new leader's offers. Every wait is bounded; every process is stopped."""
import json

import services
from mesosclient import call, hook, operator, start_sim, start_stack, stop_sim
from simlib import run_tests

wait_until = services.wait_until
SIM, PORT_A, PORT_B = start_sim("--allocation-interval-ms=100", "--heartbeat-seconds=1", "--update-retry-ms=500",
                                "--staging-ms=20", "--starting-ms=20", "--kill-ms=20", "--agents=2",
                                "--agent-cpus=4", "--agent-mem=8192", standby=True)
S = start_stack(PORT_B)
PROC, PORT, LOG, KUBECONFIG = S.proc, S.port, S.log, S.kubeconfig


def kubectl(*args, stdin=None):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin)


def get(path):
    return services.get(PORT, path)


def live():
    return [p for p in get("/api/v1/namespaces/default/pods?labelSelector=t%3Dfo")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def phases():
    return sorted(p.get("status", {}).get("phase", "") for p in live())


def frameworks(port):
    return operator(port, {"type": "GET_FRAMEWORKS"})["get_frameworks"]["frameworks"]


def leader():
    st, text, _ = call(PORT_A, {}, path="/sim/state", method="GET")
    return json.loads(text)["leader_port"]


def test_follows_the_leader_and_survives_failover():
    assert leader() == PORT_A
    wait_until(lambda: len(get("/api/v1/nodes?labelSelector=peloton.io%2Fbackend%3Dmesos")["items"]) == 2, 20,
               "2 Mesos Nodes (through the 307 to the leader)")
    fid = frameworks(PORT_A)[0]["framework_info"]["id"]["value"]
    res = [{"kind": "cpu", "reservation": "8", "limit": "8", "share": 1},
           {"kind": "memory", "reservation": "16Gi", "limit": "16Gi", "share": 1}]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool",
                                                  "metadata": {"name": "fo"}, "spec": {"resources": res}}))
    spec = {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1000"],
                            "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]}
    kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "fo"},
        "spec": {"type": "STATELESS", "instanceCount": 2, "resourcePool": "fo",
                 "template": {"metadata": {"labels": {"t": "fo"}}, "spec": spec}}}))
    wait_until(lambda: phases() == ["Running", "Running"], 30, "2 pods Running")
    uids = {p["metadata"]["uid"] for p in live()}
    hook(PORT_A, "failover")
    wait_until(lambda: leader() == PORT_B, 10, "the standby leads")
    wait_until(lambda: [f for f in frameworks(PORT_B) if f["connected"]], 30, "resubscribed to the new leader")
    assert [f["framework_info"]["id"]["value"] for f in frameworks(PORT_B)] == [fid]
    assert {p["metadata"]["uid"] for p in live()} == uids and phases() == ["Running", "Running"]
    # a kill and a launch through the new leader
    victim = live()[0]
    tid = f"{victim['metadata']['uid']}-1"
    kubectl("delete", "pod", victim["metadata"]["name"], "--wait=false")

    def killed():
        done = operator(PORT_B, {"type": "GET_TASKS"})["get_tasks"]["completed_tasks"]
        return [t for t in done if t["task_id"]["value"] == tid and t["state"] == "TASK_KILLED"]
    wait_until(killed, 20, "the deleted pod's task KILLED")
    wait_until(lambda: phases() == ["Running", "Running"] and victim["metadata"]["uid"] not in
               {p["metadata"]["uid"] for p in live()}, 30, "the replacement Running")
    running = [t for t in operator(PORT_B, {"type": "GET_TASKS"})["get_tasks"]["tasks"] if t["state"] == "TASK_RUNNING"]
    assert len(running) == 2, running


def test_stops_cleanly():
    text = open(LOG).read()
    assert "AddressSanitizer" not in text and "runtime error:" not in text, text[-4000:]
    assert services.stop(PROC) == 0, text[-3000:]
    stop_sim(SIM)


try:
    run_tests("test_mesos_driver_failover", dict(globals()))
finally:
    services.stop_all()
