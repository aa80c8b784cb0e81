"""End-to-end oracle: `peloton-sim entitlement` against an independent exact
implementation of the rule (docs/concepts.md) using rational arithmetic.

For every parent, the oracle takes the engine's entitlement of that parent,
splits it among the children exactly (Fractions), and requires each child's
integer entitlement to be within one unit of the exact value, and the
children's sum to equal the exact total. Random trees, fixed seeds.
"""
import random
from fractions import Fraction as F

from simlib import run_tests, sim

KINDS = ["cpu", "memory", "disk", "gpu"]
INF = None


def waterfill(amount, weights, caps):
    """Exact max-min by weight: each slot gets min(cap, lam * w)."""
    out = [F(0)] * len(weights)
    live = [i for i in range(len(weights)) if weights[i] > 0 and caps[i] > 0]
    if amount <= 0 or not live:
        return out
    if sum(caps[i] for i in live) <= amount:
        for i in live:
            out[i] = F(caps[i])
        return out
    live.sort(key=lambda i: F(caps[i]) / weights[i])
    R, W = F(amount), sum(weights[i] for i in live)
    for n, i in enumerate(live):
        if F(caps[i]) * W <= R * weights[i]:
            out[i] = F(caps[i])
            R -= caps[i]
            W -= weights[i]
        else:
            for j in live[n:]:
                out[j] = R * weights[j] / W
            break
    return out


def gen_tree(rng, n):
    pools = []  # dicts with path, reservation, limit, share, static, demand (milli cpu / bytes as ints)
    nodes = [{"path": "", "depth": 0, "res": {k: 10**7 for k in KINDS}, "lim": {k: INF for k in KINDS},
              "eff": {k: INF for k in KINDS}, "kids": []}]
    for i in range(n):
        parent = rng.choice(nodes)
        if parent["depth"] >= 4 or parent.get("leafwork"):
            parent = nodes[0]
        node = {"path": f"{parent['path']}/p{i}", "depth": parent["depth"] + 1, "kids": [], "res": {}, "lim": {},
                "eff": {}, "share": {}, "static": []}
        for k in KINDS:
            room = parent["res"][k] - sum(c["res"][k] for c in parent["kids"]) if parent["depth"] else 10**7
            node["res"][k] = 0 if rng.random() < 0.3 else rng.randint(0, max(0, room) // 2)
            plim = parent["eff"][k]  # the tightest ancestor limit
            if rng.random() < 0.3:
                hi = plim if plim is not None else 3 * 10**7
                node["lim"][k] = rng.randint(node["res"][k], max(node["res"][k], hi))
            else:
                node["lim"][k] = INF
            node["eff"][k] = node["lim"][k] if plim is None else (plim if node["lim"][k] is None else min(plim, node["lim"][k]))
            node["share"][k] = 0 if rng.random() < 0.15 else rng.randint(1, 9)
            if rng.random() < 0.2:
                node["static"].append(k)
        parent["kids"].append(node)
        nodes.append(node)
    for node in nodes[1:]:
        if not node["kids"]:
            node["demand"] = {k: rng.randint(0, 4 * 10**6) for k in KINDS}
    return nodes


def to_doc(nodes, cap):
    pools = []
    for n in nodes[1:]:
        p = {"path": n["path"],
             "reservation": {k: f"{n['res'][k]}m" if k in ("cpu", "gpu") else n["res"][k] for k in KINDS},
             "limit": {k: (f"{n['lim'][k]}m" if k in ("cpu", "gpu") else n["lim"][k]) for k in KINDS if n["lim"][k] is not None},
             "share": n["share"], "static": n["static"]}
        if "demand" in n:
            p["demand"] = {k: f"{n['demand'][k]}m" if k in ("cpu", "gpu") else n["demand"][k] for k in KINDS}
        pools.append(p)
    return {"capacity": {k: f"{cap[k]}m" if k in ("cpu", "gpu") else cap[k] for k in KINDS}, "pools": pools}


def demand_of(n, k):
    lim = n["lim"][k]
    if not n["kids"]:
        d = n.get("demand", {}).get(k, 0)
    else:
        d = sum(max(demand_of(c, k), c["res"][k]) if k in c["static"] else demand_of(c, k) for c in n["kids"])
    return d if lim is None else min(d, lim)


def check_split(parent_ent, kids, k, got, where):
    a = [c["res"][k] if k in c["static"] else min(c["res"][k], demand_of(c, k)) for c in kids]
    a = [F(x) for x in a]
    if sum(a) > parent_ent:
        a = waterfill(parent_ent, [c["res"][k] for c in kids], a)
    R = parent_ent - sum(a)
    gaps = [max(F(0), demand_of(c, k) - a[i]) for i, c in enumerate(kids)]
    x = waterfill(R, [c["share"][k] for c in kids], gaps)
    R -= sum(x)
    caps = [R if c["lim"][k] is None else max(F(0), c["lim"][k] - a[i] - x[i]) for i, c in enumerate(kids)]
    y = waterfill(R, [c["share"][k] for c in kids], caps)
    exact = [a[i] + x[i] + y[i] for i in range(len(kids))]
    for i, c in enumerate(kids):
        g = got[c["path"]]["entitlement"][k]
        assert abs(g - exact[i]) < 1, f"{where} {c['path']} {k}: engine {g}, exact {float(exact[i])}"
    total = sum(got[c["path"]]["entitlement"][k] for c in kids)
    assert total == sum(exact), f"{where} children of {k}: {total} != {sum(exact)}"


def run_seed(seed):
    rng = random.Random(seed)
    nodes = gen_tree(rng, rng.randint(1, 40))
    cap = {k: rng.randint(0, 3 * 10**7) for k in KINDS}
    r = sim("entitlement", "-", stdin=to_doc(nodes, cap))
    assert r.rc == 0, r.err
    got = {p["path"]: p for p in r.json()["pools"]}
    for n in nodes:
        if not n["kids"]:
            continue
        for k in KINDS:
            pe = cap[k] if n["path"] == "" else got[n["path"]]["entitlement"][k]
            check_split(F(pe), n["kids"], k, got, f"seed {seed}")
        for c in n["kids"]:
            for k in KINDS:
                assert got[c["path"]]["demand"][k] == demand_of(c, k), f"seed {seed} {c['path']} demand {k}"


def test_oracle_random_trees():
    for seed in range(150):
        run_seed(seed)


run_tests("sim-oracle", dict(globals()))
