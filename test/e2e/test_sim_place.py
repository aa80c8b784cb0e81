"""End-to-end: `peloton-sim place` on the example fleet and on random fleets."""
import os
import random

from simlib import ROOT, run_tests, sim

EX = os.path.join(ROOT, "examples", "sim", "place.yaml")


def test_example_fleet():
    r = sim("place", EX)
    assert r.rc == 0, r.err
    out = r.json()
    placed = {p["gang"]: [t["host"] for t in p["tasks"]] for p in out["placements"]}
    assert len(set(placed["web"])) == 3           # SPREAD_JOB: one per host
    assert not {"g1", "ml1"} & set(placed["web"])  # GPU host kept for GPU work; taint not tolerated
    assert placed["train"] == ["g1"]
    assert placed["db-0"] == ["k2"]                # the hint, which also matches the selector
    fail = {f["gang"]: f for f in out["failures"]}
    assert "too-big" in fail and "too-big" not in placed
    assert fail["too-big"]["reason"].startswith("0/5 hosts:")
    assert fail["too-big"]["rejected"]["taint"] == 1


def test_failure_messages_name_true_reasons():
    """Issue #16 item 14 through the simulator: a cordoned host, a not-ready tainted host and a draining
    host each counted against what is true of it; a gang says what of it fits and where."""
    hosts = [{"name": "c1", "allocatable": {"cpu": 8}, "unschedulable": True},
             {"name": "nr1", "allocatable": {"cpu": 8}, "notReady": True,
              "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
             {"name": "nr2", "allocatable": {"cpu": 8}, "notReady": True},
             {"name": "m1", "allocatable": {"cpu": 8}, "draining": True},
             {"name": "n1", "allocatable": {"cpu": 4}}, {"name": "n2", "allocatable": {"cpu": 4}}]
    doc = {"hosts": hosts, "gangs": [{"id": "one", "task": {"resources": {"cpu": 5}}},
                                     {"id": "g4", "count": 4, "task": {"resources": {"cpu": 3}}}]}
    r = sim("place", "-", stdin=doc)
    assert r.rc == 0, r.err
    fail = {f["gang"]: f for f in r.json()["failures"]}
    assert fail["one"]["rejected"] == {"unschedulable": 1, "taint": 1, "not ready": 1, "draining": 1,
                                       "insufficient cpu": 2}, fail["one"]
    assert fail["one"]["message"] == (
        "0/6 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
        "1 node(s) were draining, 1 node(s) were not ready, 1 node(s) were unschedulable, 2 Insufficient cpu."), fail
    assert fail["g4"]["message"].startswith("gang of 4: 2 members fit (on n1, n2), 2 do not: 0/6 nodes are "
                                            "available: "), fail["g4"]


def random_fleet(seed):
    rng = random.Random(seed)
    hosts = [{"name": f"h{i}", "allocatable": {"cpu": rng.randint(1, 32), "memory": f"{rng.randint(1, 64)}Gi"},
              "labels": {"zone": rng.choice("abc")}} for i in range(rng.randint(5, 200))]
    gangs = []
    for g in range(rng.randint(1, 60)):
        gangs.append({"id": f"g{g}", "strategy": rng.choice(["PACK", "SPREAD_JOB", "LEAST_LOADED"]),
                      "count": rng.randint(1, 8),
                      "task": {"resources": {"cpu": f"{rng.randint(100, 16000)}m", "memory": f"{rng.randint(1, 16)}Gi"}}})
    return {"hosts": hosts, "gangs": gangs}


def test_random_fleets_never_overcommit_and_gangs_atomic():
    for seed in range(20):
        doc = random_fleet(seed)
        r = sim("place", "-", stdin=doc)
        assert r.rc == 0, r.err
        out = r.json()
        cap = {h["name"]: (h["allocatable"]["cpu"] * 1000, int(h["allocatable"]["memory"][:-2]) << 30) for h in doc["hosts"]}
        for h in out["hosts"]:
            assert h["allocated"]["cpu"] <= cap[h["name"]][0], (seed, h)
            assert h["allocated"]["memory"] <= cap[h["name"]][1], (seed, h)
        sizes = {g["id"]: g["count"] for g in doc["gangs"]}
        for p in out["placements"]:
            assert len(p["tasks"]) == sizes[p["gang"]]  # all or nothing
        assert len(out["placements"]) + len(out["failures"]) == len(doc["gangs"])
        again = sim("place", "-", stdin=doc).json()
        assert again == out, f"seed {seed}: not deterministic"


def test_bad_place_input():
    for doc, needle in [({"hosts": [{"name": "a"}, {"name": "a"}], "gangs": []}, "hosts[1]"),
                        ({"hosts": [{"name": "a", "allocatable": {"cpu": "x"}}], "gangs": []}, 'quantity "x"'),
                        ({"hosts": [], "gangs": [{"strategy": "RANDOM", "count": 1, "task": {}}]}, "strategy"),
                        ({"hosts": [], "gangs": [], "bogus": 1}, "bogus")]:
        r = sim("place", "-", stdin=doc)
        assert r.rc == 1 and r.out == "" and needle in r.err, (needle, r.rc, r.err)


run_tests("sim-place", dict(globals()))
