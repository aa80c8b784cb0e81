"""Benchmark: pods launched on Mesos agents through pelotond (release build,
every role, --mesos-master) against a release mesos-master-sim (agents of 16
cpus and 64 GiB, allocation every 100 ms) and a redis-server on loopback.
Prints figures; passes or fails nothing.

  launch   a STATELESS Job of N pods (500m, 256Mi each): seconds from its
           create to every pod Running (each launched by ACCEPT/LAUNCH, its
           STARTING and RUNNING written to the pod and acknowledged), pods/s,
           pelotond's CPU seconds, and the master's counters
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402
import mesosclient  # noqa: E402

ROOT = services.ROOT
services.PELOTOND = os.environ.get("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
mesosclient.MSIM = os.environ.get("MESOS_MASTER_SIM", os.path.join(ROOT, "bin", "mesos-master-sim"))
RUNS = [(300, 20), (2000, 100), (10000, 500)]  # (pods, agents)


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def run(n, agents):
    sim, sim_port, _ = mesosclient.start_sim("--allocation-interval-ms=100", "--heartbeat-seconds=5",
                                             f"--agents={agents}", "--agent-cpus=16", "--agent-mem=65536")
    redis = services.start_redis("everysec")
    proc, port, _ = services.start_pelotond(redis, "--roles=all", f"--mesos-master=http://127.0.0.1:{sim_port}")
    try:
        services.wait_until(lambda: len(services.api(port, "GET", "/api/v1/nodes")[1]["items"]) == agents, 60,
                            "the agents' Nodes")
        res = [{"kind": "cpu", "reservation": "100000", "limit": "100000", "share": 1},
               {"kind": "memory", "reservation": "100000Gi", "limit": "100000Gi", "share": 1}]
        services.api(port, "POST", "/apis/peloton.io/v1alpha1/resourcepools",
                     {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "p"},
                      "spec": {"resources": res}})
        spec = {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1000"],
                                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}
        cpu0 = cpu_seconds(proc.pid)
        t0 = time.monotonic()
        services.api(port, "POST", "/apis/peloton.io/v1alpha1/namespaces/default/jobs",
                     {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "b"},
                      "spec": {"type": "STATELESS", "instanceCount": n, "resourcePool": "p",
                               "template": {"metadata": {"labels": {"t": "b"}}, "spec": spec}}})

        def running():
            items = services.api(port, "GET", "/api/v1/namespaces/default/pods")[1]["items"]
            return sum(1 for p in items if p.get("status", {}).get("phase") == "Running")
        # polled by listing every pod (which costs pelotond too): less often for more pods
        services.wait_until(lambda: running() == n, 300, "every pod Running", every=max(0.05, n / 20000))
        dt = time.monotonic() - t0
        st = json.loads(mesosclient.call(sim_port, {}, path="/sim/state", method="GET")[1])
        print(f"launch {n:6d} pods on {agents:4d} agents: {dt:6.2f} s, {n / dt:5.0f} pods/s, "
              f"pelotond cpu {cpu_seconds(proc.pid) - cpu0:5.2f} s; master: {st['tasks_launched']} launched, "
              f"{st['acks']}/{st['updates_sent']} updates acknowledged, {st['offers_sent']} offers, "
              f"{st['offers_declined']} declined")
    finally:
        services.stop(proc)
        services.stop(sim)


try:
    for n, agents in RUNS:
        run(n, agents)
finally:
    services.stop_all()
