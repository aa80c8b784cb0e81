"""End-to-end: `peloton-sim entitlement` on files and stdin, good and bad input."""
import copy
import os

from simlib import ROOT, pools_by_path, run_tests, sim

EX = os.path.join(ROOT, "examples", "sim")
GI = 1 << 30


def test_issue_example_yaml():
    r = sim("entitlement", os.path.join(EX, "entitlement.yaml"))
    assert r.rc == 0, r.err
    pools = pools_by_path(r.json())
    assert list(pools) == ["/org1", "/org1/team1"]
    # static reservation 40 covers the demand 30; idle capacity fills to the limit 80
    assert pools["/org1"]["entitlement"] == {"cpu": 80000, "memory": 400 * GI, "disk": 2 << 40, "gpu": 8000}
    assert pools["/org1/team1"]["entitlement"]["cpu"] == 80000
    assert pools["/org1/team1"]["demand"] == {"cpu": 30000, "memory": 8 * GI, "disk": 0, "gpu": 0}


def blog_doc(team2_cpu):
    return {
        "capacity": {"cpu": 100, "memory": "400Gi"},
        "pools": [
            {"path": "/org", "reservation": {"cpu": 100, "memory": "400Gi"}},
            {"path": "/org/team1", "reservation": {"cpu": 50, "memory": "200Gi"}, "demand": {"cpu": 80}},
            {"path": "/org/team2", "reservation": {"cpu": 50, "memory": "200Gi"}, "demand": {"cpu": team2_cpu}},
        ],
    }


def test_blog_borrow_then_return_via_stdin_json():
    r = sim("entitlement", "-", stdin=blog_doc(10))
    assert r.rc == 0, r.err
    p = pools_by_path(r.json())
    assert p["/org/team1"]["entitlement"]["cpu"] == 85000
    assert p["/org/team2"]["entitlement"]["cpu"] == 15000
    r = sim("entitlement", "-", stdin=blog_doc(50))
    p = pools_by_path(r.json())
    assert p["/org/team1"]["entitlement"]["cpu"] == 50000
    assert p["/org/team2"]["entitlement"]["cpu"] == 50000


def test_blog_example_file():
    r = sim("entitlement", os.path.join(EX, "blog.yaml"))
    assert r.rc == 0, r.err
    p = pools_by_path(r.json())
    assert p["/org/team1"]["entitlement"]["cpu"] == 85000
    assert p["/org/team2"]["entitlement"]["cpu"] == 15000
    assert p["/org"]["entitlement"]["cpu"] == 100000


def test_capacity_below_reservations_is_not_an_error():
    doc = blog_doc(50)
    doc["capacity"]["cpu"] = 60  # hosts were lost
    r = sim("entitlement", "-", stdin=doc)
    assert r.rc == 0, r.err
    p = pools_by_path(r.json())
    assert p["/org/team1"]["entitlement"]["cpu"] + p["/org/team2"]["entitlement"]["cpu"] == 60000
    assert p["/org/team1"]["entitlement"]["cpu"] == 30000


def test_quantities_as_strings_and_numbers_agree():
    a = sim("entitlement", "-", stdin={"capacity": {"cpu": "1.5", "memory": "1Gi"}, "pools": [{"path": "/a", "demand": {"cpu": "250m"}}]})
    b = sim("entitlement", "-", stdin={"capacity": {"cpu": 1.5, "memory": GI}, "pools": [{"path": "/a", "demand": {"cpu": 0.25}}]})
    assert a.rc == 0 and b.rc == 0, (a.err, b.err)
    assert a.json() == b.json()
    assert a.json()["pools"][0]["entitlement"]["cpu"] == 1500


def expect_refused(doc, needle, stdin=True):
    r = sim("entitlement", "-", stdin=doc)
    assert r.rc == 1, (r.rc, r.out, r.err)
    assert r.out == "", r.out  # nothing on stdout
    assert needle in r.err, r.err


def test_validation_rules_refused_with_the_rule():
    base = {"capacity": {"cpu": 10}}
    expect_refused({**base, "pools": [{"path": "/a", "reservation": {"cpu": 5}, "limit": {"cpu": 4}}]},
                   "pool /a: cpu reservation 5 exceeds its limit 4")
    expect_refused({**base, "pools": [{"path": "/a", "limit": {"cpu": 4}}, {"path": "/a/b", "limit": {"cpu": 5}}]},
                   "pool /a/b: cpu limit 5 exceeds parent /a limit 4")
    expect_refused({**base, "pools": [{"path": "/a", "reservation": {"cpu": 4}},
                                      {"path": "/a/b", "reservation": {"cpu": 3}},
                                      {"path": "/a/c", "reservation": {"cpu": 2}}]},
                   "children of /a would reserve 5 cpu, more than its reservation 4")
    expect_refused({**base, "pools": [{"path": "/a"}, {"path": "/a"}]}, "pool /a: already exists")
    expect_refused({**base, "pools": [{"path": "/root"}]}, "reserved for the root pool")
    expect_refused({**base, "pools": [{"path": "/a", "controllerLimit": 101}]}, "controller limit 101.000%")
    expect_refused({**base, "pools": [{"path": "/a", "share": -2}]}, "pools[0].share")
    expect_refused({**base, "pools": [{"path": "/x/y"}]}, "parent /x does not exist")


def test_bad_documents():
    for text, needle in [("{", "JSON line"), ("a: [", "YAML line"), ("", "empty document"),
                         ("[" * 500 + "]" * 500, "nested deeper"), ("pools: 3", "pools: expected a list"),
                         ('{"capacity": {"cpu": "1x"}, "pools": []}', 'quantity "1x"'),
                         ('{"capacity": {}, "pools": [], "extra": 1}', 'unknown field "extra"')]:
        r = sim("entitlement", "-", stdin=text)
        assert r.rc == 1 and r.out == "" and needle in r.err, (text[:40], r.rc, r.err)


def test_usage_errors():
    assert sim().rc == 2
    assert sim("nope", "-", stdin="{}").rc == 2
    r = sim("--help")
    assert r.rc == 0 and "entitlement" in r.out
    r = sim("entitlement", "/nonexistent.yaml")
    assert r.rc == 1 and "No such file" in r.err


def test_ten_thousand_pools():
    pools = []
    for o in range(10):
        pools.append({"path": f"/o{o}", "reservation": {"cpu": 10}})
        for t in range(1000):
            pools.append({"path": f"/o{o}/t{t}", "demand": {"cpu": "%dm" % (t + 1)}})
    r = sim("entitlement", "-", stdin={"capacity": {"cpu": 100}, "pools": pools})
    assert r.rc == 0, r.err
    out = r.json()["pools"]
    assert len(out) == 10010
    per_org = [p["entitlement"]["cpu"] for p in out if p["path"].count("/") == 1]
    assert sum(per_org) == 100000
    leaves = [p for p in out if p["path"].startswith("/o0/")]
    assert sum(p["entitlement"]["cpu"] for p in leaves) == per_org[0]


run_tests("sim-entitlement", dict(globals()))
