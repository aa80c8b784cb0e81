"""The chaos test's checker (test_chaos.py): reads its JSON-lines history of
client operations ("op"), watch lists and events per watcher ("list", "ev",
"watch-end"), faults ("fault") and the final lists ("final") and verifies, in
the way etcd's robustness tests do:

- acked-writes: every acknowledged write is in the history its watchers saw
  (a create's or an update's resourceVersion appears for that object, with
  the update's label), and in the final state: an acknowledged create not
  deleted since is there (unless a watcher saw the system delete it:
  preemption deletes plain pods), an
  acknowledged delete's object is not;
- rv-unique: resourceVersions are unique (no two different changes, of any
  object, with one resourceVersion; no two acknowledged writes with one);
- watch-order: every watcher saw resourceVersions strictly increasing, and
  each change once;
- watch-complete: every change some watcher saw in a span another watcher
  covered without a 410 was seen by that one too;
- single-bind: no pod was bound twice or to two nodes;
- node-capacity: no node was ever overcommitted by the pods bound to it
  that had not ended: their CPU requests, their memory requests, their
  number (the node's allocatable pods);
- pool-limit: no pool's pods (bound and not ended) ever held more CPU or
  memory than the pool's limit in that kind, and no pool status ever
  reported an allocation above it (the most pods a pool held at once, and
  the most a node held, are printed as figures);
- node-capacity-unknown-bind: node-capacity, told apart when the node held
  a pod whose Binding the API server answered "outcome unknown"
  (test_chaos records those from the engines' logs), and a BATCH instance
  never done because that node's kubelet refused its pod (OutOf…): a
  known gap until the Bindings were fenced by the placement term's epoch
  (below);
- batch-complete: every instance of every BATCH Job the load did not delete
  succeeded at least once (a pod of it reached Succeeded);
- instance-once: no instance of a Job had two pods running at once;
- final-allocation: each pool's final allocation, in CPU and in memory,
  equals what its pods bound and not ended request, plus what those of its
  waiting pods that are admitted request (which is not observable: it must
  lie between the two sums).

Run alone: python3 test/e2e/chaos_check.py build/chaos/history-N.jsonl.
"""
import json
import sys

# Invariants that fail on main because of a known deep bug: their violations
# are printed as known gaps (never silently skipped) and do not fail the test.
# None now. Earlier: node-capacity-unknown-bind (a node overcommitted while it
# held a pod whose Binding's outcome the API server called unknown: a
# Binding of an engine whose term had ended, stored after the next engine
# had caught up and filled the node) until the API server refused a
# Binding of an ended placement term (test_late_binding.py); node-capacity
# and batch-complete before ad0418f (a controller role started again in a
# new term joined a keys-only informer feed and got keys without objects:
# placement's model of the nodes was empty of their pods, so it
# overcommitted them, and pods waiting then were never placed).
KNOWN_GAPS = {}

ENDED = ("Succeeded", "Failed")


def millicores(q):
    """A Kubernetes CPU quantity in millicores."""
    q = str(q)
    try:
        if q.endswith("m"):
            return int(float(q[:-1]))
        return int(round(float(q) * 1000))
    except ValueError:
        return 0


_BIN = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}
_DEC = {"k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "m": 10 ** -3}


def mebibytes(q):
    """A Kubernetes memory quantity ("512Mi", "1Gi", "1073741824", "1e9", "1G") in Mi (a float)."""
    q = str(q).strip()
    try:
        for suf, mul in _BIN.items():
            if q.endswith(suf):
                return float(q[:-2]) * mul / 2 ** 20
        if q and q[-1] in _DEC:
            return float(q[:-1]) * _DEC[q[-1]] / 2 ** 20
        return float(q) / 2 ** 20
    except ValueError:
        return 0.0


def limits_of(rec):
    """The pool limits as the history holds them: {pool: {"cpu": m, "mem": Mi}} (older histories: CPU alone)."""
    return {n: (v if isinstance(v, dict) else {"cpu": v}) for n, v in rec.items()}


def rvint(rv):
    try:
        return int(rv)
    except (TypeError, ValueError):
        return None


class Report:
    def __init__(self, hist):
        self.hist = hist
        self.violations = {}  # invariant -> [(message, context lines)]
        self.figures = {}

    def bad(self, inv, msg, uid=None, rv=None, name=None):
        lst = self.violations.setdefault(inv, [])
        if len(lst) < 20:
            lst.append((msg, self.context(uid, rv, name)))
        else:
            lst.append((msg, []))

    def context(self, uid, rv, name, n=10):
        """The records about the object (by uid or name), and those nearest to rv, in history order."""
        rows = []
        rvi = rvint(rv)
        for i, r in enumerate(self.hist):
            about = (uid and r.get("uid") == uid) or (name and r.get("name") == name)
            near = rvi is not None and rvint(r.get("rv")) is not None and abs(rvint(r.get("rv")) - rvi) <= 3
            if about or near or r["k"] == "fault":
                rows.append((i, r))
        # the faults only near the object's records
        keep = [i for i, r in rows if r["k"] != "fault"]
        if keep:
            lo, hi = min(keep), max(keep)
            rows = [(i, r) for i, r in rows if r["k"] != "fault" or lo - 200 <= i <= hi + 200]
        if len(rows) > n * 2:
            rows = rows[:n] + [(-1, {"k": "…"})] + rows[-n:]
        out = []
        for _, r in rows:
            rr = {k: v for k, v in r.items() if k not in ("items", "spec")}
            out.append("      " + json.dumps(rr, separators=(",", ":"))[:300])
        return out

    def ok(self):
        return all(inv in KNOWN_GAPS for inv in self.violations)

    def text(self):
        lines = ["checker: " + ", ".join(f"{k} {v}" for k, v in self.figures.items())]
        for inv in INVARIANTS:
            v = self.violations.get(inv, [])
            if not v:
                lines.append(f"  ok        {inv}")
                continue
            tag = "KNOWN GAP" if inv in KNOWN_GAPS else "VIOLATED "
            lines.append(f"  {tag} {inv}: {len(v)} violation(s)" + (f" — {KNOWN_GAPS[inv]}" if inv in KNOWN_GAPS else ""))
            for j, (msg, ctx) in enumerate(v[:8]):
                lines.append(f"    - {msg}")
                if j < 2:  # the history around the first two
                    lines.extend(ctx)
            if len(v) > 8:
                lines.append(f"    … and {len(v) - 8} more")
        return "\n".join(lines)


INVARIANTS = ["acked-writes", "rv-unique", "watch-order", "watch-complete", "single-bind", "node-capacity",
              "node-capacity-unknown-bind", "pool-limit", "batch-complete", "instance-once", "final-allocation"]


def allocation_mismatches(pools, pods, limits):
    """(pool, message) for each pool in limits whose allocation, in CPU or in
    memory, is not what its pods bound and not ended request, plus what those
    of its waiting pods that are admitted request (not observable: it must
    lie between the two sums). pools and pods are summaries
    (test_chaos.summary)."""
    out = []
    for pool in pools:
        if pool["name"] not in limits:
            continue
        alloc = pool.get("alloc") if isinstance(pool.get("alloc"), dict) else {}
        mine = [p for p in pods if p.get("pool") == pool["name"] and p.get("phase") not in ENDED]
        waiting = [p for p in mine if not p.get("node")]
        for kind, unit, a in (("cpu", "m CPU", millicores(alloc.get("cpu", 0))),
                              ("mem", "Mi memory", mebibytes(alloc.get("memory", 0)))):
            bound = sum(p.get(kind, 0) for p in mine if p.get("node"))
            wait = sum(p.get(kind, 0) for p in waiting)
            if not bound - 0.5 <= a <= bound + wait + 0.5:
                out.append((pool["name"], f"pool {pool['name']}: final allocation {a:g}{unit}; its pods bound and not "
                                          f"ended request {bound:g}{unit}, and {len(waiting)} waiting pods {wait:g}{unit}"))
    return out


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check(path):
    hist = load(path)
    rep = Report(hist)
    ops = [r for r in hist if r["k"] == "op"]
    evs = [r for r in hist if r["k"] == "ev" and r["type"] != "ERROR"]
    finals = {r["kind"]: r for r in hist if r["k"] == "final"}
    limits = limits_of(next((r["limits"] for r in hist if r["k"] == "pool-limits"), {}))
    rep.figures = {"operations": len(ops), "acknowledged": sum(1 for o in ops if 200 <= o["code"] < 300),
                   "watch events": len(evs), "410s": sum(1 for r in hist if r["k"] == "ev" and r["type"] == "ERROR"),
                   "faults": sum(1 for r in hist if r["k"] == "fault" and not r["what"].startswith("SIGCONT"))}

    # the union of the changes the watchers saw: rv -> the change (kind, uid, type)
    changes = {}
    for e in evs:
        key = (e["kind"], e["uid"], e["type"])
        prev = changes.get(e["rv"])
        if prev is None:
            changes[e["rv"]] = (key, e)
        elif prev[0] != key or prev[1].get("gen") != e.get("gen") or prev[1].get("phase") != e.get("phase") \
                or prev[1].get("node") != e.get("node"):
            rep.bad("rv-unique", f"resourceVersion {e['rv']} names two changes: {prev[0]} and {key}", e["uid"], e["rv"])
    acked_rv = {}
    for o in ops:
        if 200 <= o["code"] < 300 and o.get("rv") and o["m"] != "DELETE":
            if o["rv"] in acked_rv and acked_rv[o["rv"]]["uid"] != o["uid"]:
                rep.bad("rv-unique", f"two acknowledged writes answered resourceVersion {o['rv']}", o["uid"], o["rv"])
            acked_rv[o["rv"]] = o
    by_uid_rv = {(e["uid"], e["rv"]): e for e in evs}
    seen_uids = {e["uid"] for e in evs}

    # acked-writes
    final_by = {k: {i["name"]: i for i in f["items"]} for k, f in finals.items()}
    deleted_names = {}
    for o in ops:
        if o.get("op") == "delete" and o["code"] in (200, 202):
            deleted_names.setdefault(o["kind"], set()).add(o["name"])
    for o in ops:
        if not (200 <= o["code"] < 300) or o.get("op") not in ("create", "update"):
            continue
        if o["kind"] == "ResourcePool":
            continue
        if o["uid"] not in seen_uids and o["uid"] not in {i.get("uid") for i in final_by.get(o["kind"], {}).values()}:
            rep.bad("acked-writes", f"acknowledged {o['op']} of {o['kind']} {o['name']} (rv {o['rv']}) seen by no "
                    f"watcher and not in the final list", o["uid"], o["rv"], o["name"])
            continue
        if o["uid"] in seen_uids and (o["uid"], o["rv"]) not in by_uid_rv:
            rep.bad("acked-writes", f"acknowledged {o['op']} of {o['kind']} {o['name']} answered rv {o['rv']}, which "
                    f"no watcher saw for it", o["uid"], o["rv"], o["name"])
        elif o.get("gen") is not None and (o["uid"], o["rv"]) in by_uid_rv and \
                by_uid_rv[(o["uid"], o["rv"])].get("gen") != str(o["gen"]):
            rep.bad("acked-writes", f"update of {o['name']} to chaos-gen {o['gen']} answered rv {o['rv']}, but the "
                    f"watchers saw chaos-gen {by_uid_rv[(o['uid'], o['rv'])].get('gen')} there", o["uid"], o["rv"],
                    o["name"])
    # objects the system deleted (preemption deletes plain pods): DELETED seen, no acknowledged delete of it
    sys_deleted = {e["uid"] for e in evs if e["type"] == "DELETED"}
    if "Pod" in final_by:
        last_gen = {}
        for o in ops:
            if o["kind"] == "Pod" and o.get("op") == "update" and o["code"] == 200:
                last_gen[o["name"]] = o["gen"]
        for o in ops:
            if o["kind"] != "Pod" or o.get("op") != "create" or o["code"] != 201:
                continue
            name = o["name"]
            gone = name in deleted_names.get("Pod", set())
            f = final_by["Pod"].get(name)
            if not gone and f is None and o["uid"] not in sys_deleted:
                rep.bad("acked-writes", f"pod {name}: created (acknowledged) and never deleted by the client, but not "
                        "in the final list", o["uid"], o["rv"], name)
            elif gone and f is not None and not f.get("del"):
                rep.bad("acked-writes", f"pod {name}: its delete was acknowledged, but it is in the final list",
                        o["uid"], o["rv"], name)
            elif f is not None and name in last_gen and int(f.get("gen") or 0) < last_gen[name]:
                rep.bad("acked-writes", f"pod {name}: chaos-gen {last_gen[name]} acknowledged, the final list has "
                        f"{f.get('gen')}", o["uid"], o["rv"], name)
    # a Job's delete answered 5xx ("its outcome is unknown", e.g. in a Redis failover) may have been done: its
    # absence from the final list is no lost write (whether the watchers saw it go is watch-complete's to say)
    unknown_deletes = {o["name"] for o in ops if o["kind"] == "Job" and o.get("op") == "delete" and o["code"] >= 500}
    if "Job" in final_by:
        for o in ops:
            if o["kind"] == "Job" and o.get("op") == "create" and o["code"] == 201:
                if o["name"] in unknown_deletes:
                    continue
                if o["name"] not in deleted_names.get("Job", set()) and o["name"] not in final_by["Job"]:
                    rep.bad("acked-writes", f"job {o['name']}: created (acknowledged), never deleted by the client, "
                            "not in the final list", o["uid"], o["rv"], o["name"])

    # watch-order and watch-complete, per watcher: spans covered without a break in continuity
    watchers = sorted({r["w"] for r in hist if r["k"] in ("ev", "list")})
    spans = {}  # watcher -> [(from rv exclusive, to rv inclusive, set of rvs seen)]
    kind_of = {}
    for w in watchers:
        cur = None
        last = None
        seen = set()
        for r in hist:
            if r.get("w") != w:
                continue
            if r["k"] == "list" and r["code"] == 200:
                if cur is not None:
                    spans.setdefault(w, []).append(cur)
                cur = [rvint(r["rv"]), rvint(r["rv"]), set()]
                last = rvint(r["rv"])
            elif r["k"] == "ev" and r["type"] == "ERROR":
                if cur is not None:
                    spans.setdefault(w, []).append(cur)
                cur = None
            elif r["k"] == "ev":
                kind_of[w] = r["kind"]
                v = rvint(r["rv"])
                if last is not None and v <= last:
                    rep.bad("watch-order", f"watcher {w}: resourceVersion {v} after {last}"
                            + (" (the same change twice)" if v in seen else ""), r["uid"], r["rv"])
                seen.add(v)
                last = v
                if cur is not None:
                    cur[1] = max(cur[1], v)
                    cur[2].add(v)
        if cur is not None:
            spans.setdefault(w, []).append(cur)
    union_by_kind = {}
    for rv, (key, e) in changes.items():
        union_by_kind.setdefault(key[0], []).append(rvint(rv))
    for w, sp in spans.items():
        kind = kind_of.get(w)
        for lo, hi, got in sp:
            for v in union_by_kind.get(kind, []):
                if lo < v <= hi and v not in got:
                    e = changes[str(v)][1]
                    rep.bad("watch-complete", f"watcher {w} missed {e['type']} {kind} {e['name']} at rv {v} "
                            f"(it covered {lo}..{hi} without a 410)", e["uid"], str(v))

    # the pods' timeline, in resourceVersion order
    pod_evs = sorted((e for e in evs if e["kind"] == "Pod"), key=lambda e: rvint(e["rv"]))
    seen_rv = set()
    state = {}  # uid -> last event
    node_cap = {n["name"]: n for n in finals.get("Node", {}).get("items", [])}
    bound_to = {}
    running_inst = {}
    succeeded = set()  # (job, inst)
    node_use, pool_use = {}, {}  # name -> {"cpu": m, "mem": Mi, "pods": n}
    most_node_pods, most_pool_pods = {}, {}
    most_node = {"cpu": 0, "mem": 0}
    reported = set()
    kinds = (("cpu", "m CPU requested"), ("mem", "Mi memory requested"), ("pods", " pods"))
    unknown_binds = {(r["pod"], r["node"]) for r in hist if r["k"] == "unknown-bind"}
    refused = {}  # job -> nodes whose kubelet refused a pod of it (OutOfpods, OutOfcpu, ...)

    def add(use, name, e, sign):
        u = use.setdefault(name, {"cpu": 0, "mem": 0, "pods": 0})
        u["cpu"] += sign * e.get("cpu", 0)
        u["mem"] += sign * e.get("mem", 0)
        u["pods"] += sign
        return u

    def holds(e):
        return e is not None and e["type"] != "DELETED" and e.get("node") and e.get("phase") not in ENDED

    for e in pod_evs:
        if e["rv"] in seen_rv:
            continue
        seen_rv.add(e["rv"])
        uid = e["uid"]
        prev = state.get(uid)
        if e.get("node"):
            b = bound_to.setdefault(uid, e["node"])
            if b != e["node"]:
                rep.bad("single-bind", f"pod {e['name']} bound to {b}, then to {e['node']}", uid, e["rv"])
        if holds(prev):
            add(node_use, prev["node"], prev, -1)
            add(pool_use, prev.get("pool"), prev, -1)
        if holds(e):
            nu, pu = add(node_use, e["node"], e, 1), add(pool_use, e.get("pool"), e, 1)
            most_node_pods[e["node"]] = max(most_node_pods.get(e["node"], 0), nu["pods"])
            for kind in ("cpu", "mem"):
                most_node[kind] = max(most_node[kind], nu[kind])
            most_pool_pods[e.get("pool")] = max(most_pool_pods.get(e.get("pool"), 0), pu["pods"])
            cap = node_cap.get(e["node"], {})
            for kind, what in kinds:
                if cap.get(kind) and nu[kind] > cap[kind] + 0.5 and ("n", kind, e["node"], e["rv"]) not in reported:
                    reported.add(("n", kind, e["node"], e["rv"]))
                    on = [s for u, s in state.items() if u != uid and holds(s) and s["node"] == e["node"]] + [e]
                    unknown = sorted(s["name"] for s in on if ("default/" + s["name"], e["node"]) in unknown_binds)
                    rep.bad("node-capacity-unknown-bind" if unknown else "node-capacity",
                            f"node {e['node']}: {nu[kind]:g}{what} of {cap[kind]:g} by its pods at rv {e['rv']} (pod "
                            f"{e['name']} {e.get('phase')})" + (f"; bound with an unknown outcome: {', '.join(unknown)}"
                                                               if unknown else ""), uid, e["rv"])
            lim = limits.get(e.get("pool"), {})
            for kind, what in kinds[:2]:
                if lim.get(kind) and pu[kind] > lim[kind] + 0.5:
                    rep.bad("pool-limit", f"pool {e['pool']}: its bound pods hold {pu[kind]:g}{what} at rv "
                            f"{e['rv']}, above its limit {lim[kind]:g}", uid, e["rv"])
        state[uid] = e
        if e.get("job") is not None and e.get("phase") == "Failed" and str(e.get("reason") or "").startswith("OutOf"):
            refused.setdefault(e["job"], set()).add(e.get("node"))
        if e.get("job") is not None and e.get("inst") is not None:
            key = (e["job"], e["inst"])
            if e.get("phase") == "Succeeded":
                succeeded.add(key)
            runs = running_inst.setdefault(key, set())
            if e["type"] != "DELETED" and e.get("phase") == "Running":
                runs.add(uid)
            else:
                runs.discard(uid)
            if len(runs) > 1:
                rep.bad("instance-once", f"job {key[0]} instance {key[1]}: pods {sorted(state[u]['name'] for u in runs)} "
                        f"Running at once at rv {e['rv']}", uid, e["rv"])
    rep.figures["most on a node: CPU"] = f"{most_node['cpu']}m"
    rep.figures["memory"] = f"{most_node['mem']:g}Mi"
    rep.figures["pods"] = max(most_node_pods.values(), default=0)
    rep.figures["most pods of a pool"] = max((v for k, v in most_pool_pods.items() if k in limits), default=0)
    for e in (e for e in evs if e["kind"] == "ResourcePool"):
        if not isinstance(e.get("alloc"), dict):
            continue
        lim = limits.get(e["name"], {})
        for kind, unit, a in (("cpu", "m CPU", millicores(e["alloc"].get("cpu") or 0)),
                              ("mem", "Mi memory", mebibytes(e["alloc"].get("memory") or 0))):
            if lim.get(kind) and a > lim[kind] + 0.5:
                rep.bad("pool-limit", f"pool {e['name']}: status allocation {a:g}{unit} at rv {e['rv']}, above its "
                        f"limit {lim[kind]:g}", e["uid"], e["rv"])

    # batch-complete
    jobs_created = {o["name"]: o for o in ops if o["kind"] == "Job" and o.get("op") == "create" and o["code"] == 201}
    nbatch = 0
    for name, o in jobs_created.items():
        spec = o.get("spec") or {}
        if spec.get("type") != "BATCH" or name in deleted_names.get("Job", set()):
            continue
        nbatch += 1
        missing = [i for i in range(spec.get("instanceCount", 1)) if (name, str(i)) not in succeeded]
        if missing:
            fj = final_by.get("Job", {}).get(name, {})
            # refused by a kubelet on a node overfilled after an unknown-outcome bind: that gap's consequence
            why = refused.get(name, set()) & {n for _, n in unknown_binds}
            rep.bad("node-capacity-unknown-bind" if why else "batch-complete",
                    f"BATCH job {name}: instances {missing} never succeeded (job state {fj.get('state')})" +
                    (f"; a pod of it refused by the kubelet of {', '.join(sorted(why))}" if why else ""),
                    o["uid"], None, name)
    rep.figures["BATCH jobs checked"] = nbatch

    # final-allocation
    for pool_name, msg in allocation_mismatches(finals.get("ResourcePool", {}).get("items", []),
                                                finals.get("Pod", {}).get("items", []), limits):
        pool = next(p for p in finals["ResourcePool"]["items"] if p["name"] == pool_name)
        rep.bad("final-allocation", msg, pool.get("uid"), None, pool_name)
    return rep


if __name__ == "__main__":
    r = check(sys.argv[1])
    print(r.text())
    sys.exit(0 if r.ok() else 1)
