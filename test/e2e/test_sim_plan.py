"""End-to-end: `peloton-sim plan` on the example round and on variations."""
import json
import os

from simlib import ROOT, pools_by_path, run_tests, sim

EX = os.path.join(ROOT, "examples", "sim", "plan.yaml")


def test_example_round():
    r = sim("plan", EX)
    assert r.rc == 0, r.err
    out = r.json()
    p = pools_by_path(out)
    assert p["/org/team1"]["entitlement"]["cpu"] == 50000
    assert p["/org/team2"]["entitlement"]["cpu"] == 50000
    assert out["admitted"] == ["g1"]
    assert [g["gang"] for g in out["pending"]] == ["g2", "g3"]
    assert out["pending"][0]["check"] == "entitlement"
    # team1 is 30 over for the 3rd check: newest preemptible first, never the service
    assert [v["task"] for v in out["preemptions"]] == ["t1-b", "t1-c"]
    assert all(v["kind"] == "over-entitlement" for v in out["preemptions"])
    assert "over cpu entitlement by 30 for 3 checks" in out["preemptions"][0]["reason"]


def base():
    return {
        "capacity": {"cpu": 100},
        "pools": [{"path": "/org", "reservation": {"cpu": 100}},
                  {"path": "/org/team1", "reservation": {"cpu": 50}},
                  {"path": "/org/team2", "reservation": {"cpu": 50}}],
        "tasks": [{"id": f"t{i}", "pool": "/org/team1", "resources": {"cpu": 10}, "priority": 1,
                   "preemptible": True, "startTime": i} for i in range(8)],
        "gangs": [{"id": "g", "pool": "/org/team2", "preemptible": True, "count": 5, "resources": {"cpu": 10}}],
    }


def test_sustained_rule_counts_checks():
    doc = base()
    doc["preemptionChecks"] = 2
    r = sim("plan", "-", stdin=doc)
    assert r.rc == 0, r.err
    out = r.json()
    assert out["preemptions"] == []  # first check over: not yet
    assert out["overEntitlementChecks"] == {"/org/team1": 1}
    doc["overEntitlementChecks"] = out["overEntitlementChecks"]
    out = sim("plan", "-", stdin=doc).json()
    # second consecutive check: give back 30, newest first
    assert [v["task"] for v in out["preemptions"]] == ["t7", "t6", "t5"]


def test_intra_pool_priority():
    doc = base()
    doc["tasks"] = [{"id": "low", "pool": "/org/team2", "resources": {"cpu": 50}, "priority": 1, "preemptible": True}]
    doc["capacity"] = {"cpu": 50}
    doc["pools"] = [{"path": "/org", "reservation": {"cpu": 50}}, {"path": "/org/team2", "reservation": {"cpu": 50}}]
    doc["gangs"] = [{"id": "high", "pool": "/org/team2", "priority": 9, "preemptible": True, "count": 2,
                     "resources": {"cpu": 10}}]
    out = sim("plan", "-", stdin=doc).json()
    assert out["admitted"] == []
    assert [(v["task"], v["kind"], v.get("gang")) for v in out["preemptions"]] == [("low", "priority", "high")]


def test_bad_plan_input():
    for mutate, needle in [
        (lambda d: d["tasks"][0].update(pool="/nope"), 'tasks[0].pool: no pool "/nope"'),
        (lambda d: d["gangs"][0].update(count=0), "gangs[0].count"),
        (lambda d: d["tasks"][0].update(state="FLYING"), "tasks[0].state"),
        (lambda d: d.update(preemptionChecks=0), "preemptionChecks"),
        (lambda d: d["gangs"][0].update(pool="/org"), "gangs[0]"),
    ]:
        doc = base()
        mutate(doc)
        r = sim("plan", "-", stdin=doc)
        assert r.rc == 1 and r.out == "" and needle in r.err, (needle, r.rc, r.err)


run_tests("sim-plan", dict(globals()))
