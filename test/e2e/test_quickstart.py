#!/usr/bin/python3
"""End-to-end: docs/quickstart.md's steps as written, with their manifests
from examples/, on `make run`'s default fleet (4 kubelet-sim nodes of 8 cpu
and 32Gi): the banner's examples/pools.yaml and the quickstart's own tree fit
side by side; eight 4-cpu pods in team-a borrow the whole fleet; four in
team-b take back team-b's entitlement of 16, team-a giving back four pods
(Preempted); the quickstart's Peloton Job completes (issue #20, First run)."""
import json
import os

import services
from simlib import run_tests

EX = os.path.join(services.ROOT, "examples")
S = services.start_stack("--roles=all", kubelet=["--nodes=4", "--cpu=8", "--memory=32Gi"])  # scripts/run.sh's fleet
POD = open(os.path.join(EX, "quickstart", "pod.yaml")).read()


def k(*args, stdin=None):
    return services.kubectl(S.kubeconfig, *args, stdin=stdin)


def phases(pool):
    items = json.loads(k("get", "pods", "-l", f"peloton.io/resource-pool={pool}", "-o", "json"))["items"]
    return [p["status"].get("phase") for p in items if not p["metadata"].get("deletionTimestamp")]


def pool(name):
    return services.get(S.port, f"/apis/peloton.io/v1alpha1/resourcepools/{name}")


def test_both_trees_fit_the_fleet():
    out = k("apply", "-f", os.path.join(EX, "pools.yaml"))  # what the banner suggests
    assert out.count("created") == 3, out
    out = k("apply", "-f", os.path.join(EX, "quickstart", "pools.yaml"))
    assert out.count("created") == 3, out
    reserved = 0
    for name in ("ml", "org"):
        cpu = [r for r in pool(name)["spec"]["resources"] if r["kind"] == "cpu"][0]
        reserved += int(cpu["reservation"])
    assert reserved <= 32, reserved  # the default fleet's cpu


def test_team_a_borrows_the_whole_fleet():
    # the quickstart's pod without its run-seconds annotation: they keep running
    forever = POD.replace('  annotations: {kubelet-sim.peloton.io/run-seconds: "30"}\n', "")
    assert forever != POD
    for i in range(8):
        k("apply", "-f", "-", stdin=forever.replace("a-0", f"a-{i}"))
    services.wait_until(lambda: phases("team-a").count("Running") == 8, 60, "8 team-a pods running (32 cpu)")
    globals()["FOREVER"] = forever


def test_team_b_takes_its_entitlement_back():
    for i in range(4):
        k("apply", "-f", "-", stdin=FOREVER.replace("a-0", f"b-{i}").replace("team-a", "team-b"))
    services.wait_until(lambda: phases("team-b").count("Running") == 4, 90, "4 team-b pods running")
    services.wait_until(lambda: phases("team-a") == ["Running"] * 4, 30, "team-a down to 4 pods")
    ent = pool("team-b")["status"]["summary"]["cpu"]["entitlement"]
    assert float(ent) == 16, pool("team-b")["status"]
    msgs = [e["message"] for e in services.events(S.kubeconfig, reason="Preempted")]
    assert len(msgs) == 4 and all("pool /org/team-a over cpu entitlement" in m for m in msgs), msgs


def test_the_quickstart_job_completes():
    k("delete", "pods", "-l", "peloton.io/resource-pool", "--wait=false")
    k("apply", "-f", os.path.join(EX, "quickstart", "job.yaml"))
    services.wait_until(lambda: json.loads(k("get", "jobs.peloton.io", "train", "-o", "json")).get("status", {})
                        .get("state") == "SUCCEEDED", 120, "job train SUCCEEDED")


def test_clean_shutdown():
    services.stop_clean(S.proc, S.log, S.ksim)


run_tests("quickstart", dict(globals()))
