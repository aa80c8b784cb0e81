# run.sh: alone (it bounds wall-clock times)
"""End-to-end: strategic merge patches of long lists against pelotond (the
ASan build under test) and redis. Lists merge by key in linear time, so a
patch that updates every element of a long list is accepted, answers within
a second and leaves the server's loop free for /healthz meanwhile; merging by
scanning took seconds for 10,000 x 10,000, and the work budget refused
5,000 x 5,000 with 413. The results are checked element by element."""
import subprocess
import threading
import time
import urllib.request

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)
KUBECONFIG = services.kubeconfig(PORT)
PODS = "/api/v1/namespaces/default/pods"
CM = "/api/v1/namespaces/default/configmaps"
SMP = "application/strategic-merge-patch+json"
NCONT = 1024  # the most containers the API server's validation lets a pod have
NENV = 10000  # the most elements of a strategic list (PATCH_MAX_LIST)


def api(method, path, body=None, ctype="application/json"):
    return services.api(PORT, method, path, body, timeout=60, ctype=ctype)


class HealthPoller:
    """Asks /healthz over and over while it runs; keeps each answer's latency."""

    def __init__(self):
        self.stop = threading.Event()
        self.answers = []  # (latency s, status, body)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=10) as r:
                    self.answers.append((time.monotonic() - t0, r.status, r.read()))
            except OSError as e:
                self.answers.append((time.monotonic() - t0, 0, str(e).encode()))
            time.sleep(0.005)

    def __enter__(self):
        self.thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(15)


def timed_patch(path, patch):
    """The strategic merge patch with /healthz polled meanwhile: (status,
    body, seconds, the poller)."""
    with HealthPoller() as hp:
        t0 = time.monotonic()
        st, body = api("PATCH", path, patch, SMP)
        took = time.monotonic() - t0
    worst = max((lat for lat, _, _ in hp.answers), default=0)
    print(f"{path}: {st} in {took * 1000:.0f} ms, /healthz worst {worst * 1000:.0f} ms of {len(hp.answers)}")
    return st, body, took, hp


def assert_healthy_meanwhile(hp, bound):
    assert hp.answers, "no /healthz answer"
    assert all(st == 200 and b == b"ok" for _, st, b in hp.answers), hp.answers[:5]
    worst = max(lat for lat, _, _ in hp.answers)
    assert worst < bound, f"/healthz waited {worst:.3f} s"


def containers(image, value):
    cs = [{"name": f"c{i:04d}", "image": image} for i in range(NCONT)]
    cs[0]["env"] = [{"name": f"E{i:05d}", "value": value} for i in range(NENV)]
    return cs


def test_every_container_and_variable_updated_fast():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wide"},
           "spec": {"containers": containers("img:1", "a")}}
    st, body = api("POST", PODS, pod)
    assert st == 201, (st, str(body)[:300])
    # what `kubectl set image` sends for every container, and every variable of the first
    patch = {"spec": {"containers": containers("img:2", "b")}}
    st, body, took, hp = timed_patch(f"{PODS}/wide", patch)
    assert st == 200, (st, str(body)[:300])
    assert took < 1.0, f"the patch took {took:.3f} s"
    assert_healthy_meanwhile(hp, 1.0)
    st, got = api("GET", f"{PODS}/wide")
    assert st == 200
    for obj in (body, got):
        cs = obj["spec"]["containers"]
        assert [c["name"] for c in cs] == [f"c{i:04d}" for i in range(NCONT)]
        assert all(c["image"] == "img:2" for c in cs)
        env = cs[0]["env"]
        assert [e["name"] for e in env] == [f"E{i:05d}" for i in range(NENV)]
        assert all(e["value"] == "b" for e in env)
        assert all("env" not in c for c in cs[1:])
    # kubectl sends the same as a strategic merge with $setElementOrder of all 1,024
    p = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", "set", "image", "pod/wide", "*=img:3"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    st, got = api("GET", f"{PODS}/wide")
    cs = got["spec"]["containers"]
    assert [c["name"] for c in cs] == [f"c{i:04d}" for i in range(NCONT)]
    assert all(c["image"] == "img:3" for c in cs) and len(cs[0]["env"]) == NENV, str(cs[:2])[:300]


def test_list_directives_on_10000_owner_references():
    # metadata.ownerReferences merges by uid on every kind: of 10,000, delete
    # every fourth, update the next, and add 5,000, in one patch of 10,000
    refs = [{"apiVersion": "v1", "kind": "Pod", "name": f"o{i:05d}", "uid": f"u{i:05d}"} for i in range(NENV)]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned", "ownerReferences": refs},
          "data": {"a": "x"}}
    st, body = api("POST", CM, cm)
    assert st == 201, (st, str(body)[:300])
    mine = [{"uid": f"u{i:05d}", "$patch": "delete"} for i in range(0, NENV, 4)]
    mine += [{"uid": f"u{i:05d}", "controller": True} for i in range(1, NENV, 4)]
    mine += [{"apiVersion": "v1", "kind": "Pod", "name": f"n{i:05d}", "uid": f"v{i:05d}"} for i in range(NENV // 2)]
    st, body, took, hp = timed_patch(f"{CM}/owned", {"metadata": {"ownerReferences": mine}})
    assert st == 200, (st, str(body)[:300])
    assert took < 1.0, f"the patch took {took:.3f} s"
    assert_healthy_meanwhile(hp, 1.0)
    # Kubernetes' order: the references the patch names, in its order, with
    # the others placed before the next named one that followed them in the
    # live list; the new ones followed none, so the last two old ones come
    # after them
    got = body["metadata"]["ownerReferences"]
    kept = [f"u{i:05d}" for i in range(NENV) if i % 4]
    assert [r["uid"] for r in got] == kept[:-2] + [f"v{i:05d}" for i in range(NENV // 2)] + kept[-2:]
    for r in got:
        i = int(r["uid"][1:])
        if r["uid"][0] == "u":
            assert r["name"] == f"o{i:05d}" and r.get("controller") == (True if i % 4 == 1 else None), r
        else:
            assert r["name"] == f"n{i:05d}" and "controller" not in r, r
    st, stored = api("GET", f"{CM}/owned")
    assert st == 200 and stored["metadata"]["ownerReferences"] == got


def test_hostile_list_still_refused():
    # merge keys no hash can tell apart (distinct integers equal to one
    # double) cost a comparison each along their bucket: refused for the work
    ports = [{"containerPort": 2 ** 62 + (i // 512) * 2 ** 20 + i % 512} for i in range(NENV)]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "collide"},
           "spec": {"containers": [{"name": "a", "image": "x", "ports": ports},
                                   {"name": "b", "image": "x", "ports": ports}]}}
    st, before = api("POST", PODS, pod)
    assert st == 201, (st, str(before)[:300])
    patch = {"spec": {"containers": [{"name": n, "ports": [dict(p, name="p") for p in ports]} for n in "ab"]}}
    st, body, took, hp = timed_patch(f"{PODS}/collide", patch)
    assert st == 413 and body["reason"] == "RequestEntityTooLarge", (st, str(body)[:300])
    assert "strategic merge patch: the patch needs more than 12582912 steps of work" in body["message"], body
    assert took < 5.0, f"the refusal took {took:.3f} s"  # 0.3 s under ASan, 0.1 s in a release build
    assert_healthy_meanwhile(hp, 5.0)
    st, now = api("GET", f"{PODS}/collide")
    assert st == 200 and now == before


def test_exit_clean_under_asan():
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]


run_tests("shim-smp-linear", dict(globals()))
