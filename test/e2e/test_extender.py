#!/usr/bin/python3
"""End-to-end: peloton-extender (the ASan build under test) against pelotond's
apiserver role, driven by a harness that calls the endpoints exactly as
kube-scheduler does (extender_harness.py): filter -> prioritize -> bind in a
chain with a second extender, weights, ignorable extenders, preempt; both
nodeCacheCapable modes; entitlement across two pools; a gang of 4; bad input.
Objects are made with the Python Kubernetes client (Debian's python3-kubernetes,
hence /usr/bin/python3). Every wait is bounded; every process is stopped."""
import http.client
import json
import os
import random
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request

from kubernetes import client

import services
import threading

from extender_harness import Extender, ExtenderError, FakeExtender, FitError, HoldingProxy, Scheduler, node_name, post
from simlib import run_tests

ROOT = services.ROOT
EXTENDER = os.environ.get("PELOTON_EXTENDER", os.path.join(ROOT, "build", "asan", "peloton-extender"))
MAX_BODY = 1 << 20

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)
KUBECONFIG = services.kubeconfig(PORT)
cfg = client.Configuration()
cfg.host = f"http://127.0.0.1:{PORT}"
API = client.ApiClient(cfg)
CORE = client.CoreV1Api(API)
CUSTOM = client.CustomObjectsApi(API)
NODES = ["n1", "n2", "n3", "n4"]


def start_extender(*extra, name="extender"):
    d = services.tempdir()
    port_file = os.path.join(d, "port")
    log = os.path.join(d, f"{name}.log")
    p = subprocess.Popen([EXTENDER, "--port=0", f"--port-file={port_file}", *extra],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT)
    services._procs.append(p)
    services.wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip() != "", what=name)
    return p, int(open(port_file).read()), log


def healthz(port, scheme="http", context=None):
    try:
        r = urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/healthz", timeout=2, context=context)
        return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_until(check, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} within {timeout}s")


# ---- the cluster: 4 nodes of 2 cpu, two teams, a namespace per team ----

def make_node(name, cpu="2", memory="8Gi"):
    CORE.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name, labels={"kubernetes.io/hostname": name})))
    CORE.patch_node_status(name, {"status": {
        "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
        "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})


def make_pool(name, reservation, limit):
    CUSTOM.create_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", {
        "apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name},
        "spec": {"resources": [{"kind": "cpu", "reservation": reservation, "limit": limit},
                               {"kind": "memory", "reservation": "1Gi", "limit": "32Gi"}]}})


for n in NODES:
    make_node(n)
make_pool("team-a", "2", "6")
make_pool("team-b", "2", "8")
# team-a's pods name their pool by label; team-b's namespace names it by annotation
CORE.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team-a")))
CORE.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
    name="team-b", annotations={"peloton.io/resource-pool": "team-b"})))

EXT, EXT_PORT, EXT_LOG = start_extender(f"--kubeconfig={KUBECONFIG}", f"--max-body={MAX_BODY}")
URL = f"http://127.0.0.1:{EXT_PORT}/peloton"
wait_until(lambda: healthz(EXT_PORT)[0] == 200 and healthz(EXT_PORT)[1]["nodes"] == 4, "extender ready with 4 nodes")


def make_pod(ns, name, cpu="1", labels=None, annotations=None, priority=0):
    labels = dict(labels or {})
    if ns == "team-a":
        labels.setdefault("peloton.io/resource-pool", "team-a")
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations or {}},
            "spec": {"schedulerName": "default-scheduler", "priority": priority,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}}
    return API.sanitize_for_serialization(CORE.create_namespaced_pod(ns, body))


def pods_seen():
    return healthz(EXT_PORT)[1]["pods"]


def node_objs(names=None):
    items = API.sanitize_for_serialization(CORE.list_node()).get("items", [])
    return [n for n in items if names is None or n["metadata"]["name"] in names]


def read_pod(ns, name):
    return API.sanitize_for_serialization(CORE.read_namespaced_pod(name, ns))


def delete_pods(ns):
    for p in CORE.list_namespaced_pod(ns).items:
        CORE.delete_namespaced_pod(p.metadata.name, ns, grace_period_seconds=0)
    wait_until(lambda: not CORE.list_namespaced_pod(ns).items, f"pods of {ns} deleted")
    wait_until(lambda: pods_seen() == len(CORE.list_pod_for_all_namespaces().items), "extender sees the deletions")


def ours(node_cache=True, weight=1, bind=True):
    return Extender(URL, bind_verb="bind" if bind else "", weight=weight, node_cache_capable=node_cache)


def schedule_and_bind(pod, extenders, nodes=None):
    s = Scheduler(extenders)
    node = s.schedule(pod, nodes or node_objs())
    s.binder().bind(pod, node)
    return node


# ---- bad input first, on a fresh server ----

def raw(method, path, body=b"", port=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port or EXT_PORT, timeout=10)
    c.request(method, path, body=body or None, headers=headers or {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def test_bad_input_gets_json_errors_and_the_server_keeps_serving():
    pod = {"metadata": {"name": "x", "namespace": "team-a"}, "spec": {"containers": []}}
    for verb in ["filter", "prioritize", "preempt", "bind"]:
        for body in [b"{", b"", b"[1,2]", b"null", b'{"Pod": 5, "NodeNames": ["n1"]}',
                     json.dumps({"Pod": pod, "NodeNames": [1, 2]}).encode(),
                     json.dumps({"Pod": pod, "Nodes": {"items": []}, "NodeNames": ["n1"]}).encode(),
                     json.dumps({"PodName": 7, "Node": "n1"}).encode(),
                     json.dumps({"Pod": pod, "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": ""}]}}}).encode(),
                     b'{"a":1,"a":2}', b"[" * 4000 + b"]" * 4000]:
            st, data = raw("POST", f"/peloton/{verb}", body)
            assert st == 400, (verb, body[:60], st, data[:200])
            doc = json.loads(data)
            assert doc["Error"], (verb, doc)
    st, data = raw("POST", "/peloton/unknown", b"{}")
    assert st == 404 and json.loads(data)["Error"], (st, data)
    st, data = raw("GET", "/peloton/filter")
    assert st == 405 and json.loads(data)["Error"], (st, data)
    st, data = raw("POST", "/elsewhere/filter", b"{}")
    assert st == 404 and json.loads(data)["Error"]
    # a body over --max-body: 413 (a JSON Status from the HTTP layer), on a connection that stays usable
    st, data = raw("POST", "/peloton/filter", b'{"Pod":{},"NodeNames":["' + b"n" * (MAX_BODY + 10) + b'"]}')
    assert st == 413 and json.loads(data)["code"] == 413, (st, data[:200])
    # lowercase keys decode (Go's case-insensitive match) and null lists are fine
    st, data = raw("POST", "/peloton/filter", json.dumps({"pod": pod, "nodes": None, "nodenames": ["n1"]}).encode())
    assert st == 200 and json.loads(data)["Error"] == "", data
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(0, 300)
        junk = bytes(rng.getrandbits(8) for _ in range(n))
        st, data = raw("POST", "/peloton/" + rng.choice(["filter", "prioritize", "preempt", "bind"]), junk)
        assert st == 400 and json.loads(data)["Error"], (st, data[:200])
    assert EXT.poll() is None, open(EXT_LOG).read()[-2000:]
    assert healthz(EXT_PORT)[0] == 200


def test_filter_both_modes_and_unknown_nodes():
    try:
        filter_modes()
    finally:
        delete_pods("team-a")


def filter_modes():
    pod = make_pod("team-a", "modes")
    for cache in (True, False):
        e = ours(cache)
        passing, failed, unres = e.filter(pod, node_objs())
        assert sorted(n["metadata"]["name"] for n in passing) == NODES, (cache, failed, unres)
    # a node the extender does not know
    r = post(URL + "/filter", {"Pod": pod, "NodeNames": ["n1", "ghost"], "Nodes": None})[1]
    assert r["NodeNames"] == ["n1"] and "ghost not in the extender's cache" in r["FailedAndUnresolvableNodes"]["ghost"], r
    # exact PascalCase keys on the wire
    assert list(r.keys()) == ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"], r


def chain_cases(cache):
    """Upstream's extender tests (pkg/scheduler/extender_test.go) with ours in the chain."""
    pod = make_pod("team-b", f"chain-{int(cache)}", cpu="500m")
    nodes = node_objs()
    fakes = []

    def fake(**kw):
        f = FakeExtender(**kw)
        fakes.append(f)
        return f
    try:
        # an error predicate fails the cycle
        bad = fake(filter_error=True)
        try:
            Scheduler([ours(cache), Extender(bad.url, node_cache_capable=cache)]).schedule(pod, nodes)
            raise AssertionError("error predicate did not fail the cycle")
        except ExtenderError as e:
            assert "filter error" in str(e)
        # ... unless that extender is ignorable
        node = Scheduler([ours(cache), Extender(bad.url, node_cache_capable=cache, ignorable=True)]).schedule(pod, nodes)
        assert node in NODES
        # intersection of filters
        only2 = fake(allow={"n2"})
        node = Scheduler([ours(cache), Extender(only2.url, node_cache_capable=cache)]).schedule(pod, nodes)
        assert node == "n2"
        # disjoint filters: no node
        only3 = fake(allow={"n3"})
        try:
            Scheduler([Extender(only2.url, node_cache_capable=cache), Extender(only3.url, node_cache_capable=cache),
                       ours(cache)]).schedule(pod, nodes)
            raise AssertionError("disjoint filters found a node")
        except FitError as e:
            assert "n3" in e.failed
        # a failing prioritizer is ignored
        perr = fake(prioritize_error=True)
        node = Scheduler([ours(cache), Extender(perr.url, node_cache_capable=cache, weight=5)]).schedule(pod, nodes)
        assert node in NODES and perr.calls.get("prioritize") == 1
        # weights decide: ours packs onto the fullest node; a heavier fake prefers n4
        prefer4 = fake(scores={"n4": 10})
        occupied = make_pod("team-b", f"occupy-{int(cache)}", cpu="1")
        ours(cache).bind(occupied, "n1")
        wait_until(lambda: Scheduler([ours(cache)]).schedule(pod, nodes) == "n1", "PACK prefers the used node n1")
        assert Scheduler([ours(cache, weight=5), Extender(prefer4.url, node_cache_capable=cache, weight=1)]).schedule(
            pod, nodes) == "n1"
        assert Scheduler([ours(cache, weight=1), Extender(prefer4.url, node_cache_capable=cache, weight=5)]).schedule(
            pod, nodes) == "n4"
        # managedResources: a pod not asking for the resource is not sent
        managed = fake(allow=set())
        Scheduler([ours(cache), Extender(managed.url, node_cache_capable=cache,
                                         managed_resources=["example.com/foo"])]).schedule(pod, nodes)
        assert not managed.calls
    finally:
        for f in fakes:
            f.close()
        delete_pods("team-b")


def test_chain_like_upstream_node_names():
    chain_cases(True)


def test_chain_like_upstream_full_nodes():
    chain_cases(False)


def test_bind_sets_node_name_and_is_idempotent():
    try:
        bind_cases()
    finally:
        delete_pods("team-a")


def bind_cases():
    for cache in (True, False):
        pod = make_pod("team-a", f"bind-{int(cache)}")
        fake = FakeExtender()
        try:
            node = schedule_and_bind(pod, [ours(cache), Extender(fake.url, node_cache_capable=cache)])
        finally:
            fake.close()
        assert read_pod("team-a", pod["metadata"]["name"])["spec"]["nodeName"] == node
        ours(cache).bind(pod, node)  # the same bind again: success
        other = [n for n in NODES if n != node][0]
        try:
            ours(cache).bind(pod, other)
            raise AssertionError("bind to another node succeeded")
        except ExtenderError as e:
            assert node in str(e), str(e)
    # a stale UID (the pod was recreated): the API server's 409, read back, is an Error
    stale = dict(pod, metadata=dict(pod["metadata"], uid="00000000-stale"))
    try:
        ours(True).bind(stale, node)
        raise AssertionError("bind with a stale UID succeeded")
    except ExtenderError as e:
        assert "UID" in str(e) or "precondition" in str(e), str(e)
    # a pod the API server does not have: an Error, not a crash
    r = post(URL + "/bind", {"PodName": "nope", "PodNamespace": "team-a", "PodUID": "", "Node": "n1"})[1]
    assert r["Error"], r


def test_bind_reply_is_one_write_with_its_length():
    """A bind's answer waits for the API server; it then goes out whole, with
    Content-Length, in one write: not as a chunked stream whose head leaves
    first and whose body follows a loop turn later (two segments, and a
    reply kube-scheduler reads in pieces)."""
    pod = make_pod("team-a", "bind-once")
    try:
        wait_until(lambda: pods_seen() >= 1, "extender sees the pod")
        s = socket.create_connection(("127.0.0.1", EXT_PORT), timeout=10)
        body = json.dumps({"PodName": "bind-once", "PodNamespace": "team-a", "PodUID": pod["metadata"]["uid"],
                           "Node": "n1"}).encode()
        s.sendall(b"POST /peloton/bind HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        first = s.recv(65536)  # the first segment: it must hold the whole reply
        s.close()
        head, _, rest = first.partition(b"\r\n\r\n")
        lines = head.decode().lower().split("\r\n")
        assert lines[0].startswith("http/1.1 200"), head
        assert "transfer-encoding: chunked" not in lines, head
        length = [int(x.split(":")[1]) for x in lines if x.startswith("content-length:")]
        assert length and len(rest) == length[0], (head, rest)
        assert json.loads(rest) == {"Error": ""}, rest
        assert read_pod("team-a", "bind-once")["spec"]["nodeName"] == "n1"
    finally:
        delete_pods("team-a")


def test_gang_of_4_held_until_whole_then_admitted_together():
    try:
        gang_of_4()
    finally:
        delete_pods("team-b")


def gang_of_4():
    e = ours(True)
    gang = {"peloton.io/gang": "g4", "peloton.io/gang-size": "4"}
    members = [make_pod("team-b", f"g4-{i}", cpu="1", labels=gang) for i in range(3)]
    wait_until(lambda: pods_seen() >= 3, "extender sees 3 gang pods")
    for i, m in enumerate(members):
        passing, failed, unres = ours(i % 2 == 0).filter(m, node_objs())
        assert not passing and "3 of 4" in unres["n1"], (failed, unres)
    members.append(make_pod("team-b", "g4-3", cpu="1", labels=gang))
    wait_until(lambda: pods_seen() >= 4, "extender sees 4 gang pods")
    placed = {}
    for i, m in enumerate(members):
        passing, failed, _ = ours(i % 2 == 1).filter(m, node_objs())
        assert len(passing) == 1, (m["metadata"]["name"], failed)
        assert all("planned on node" in why or "insufficient" in why for why in failed.values()), failed
        node = passing[0]["metadata"]["name"]
        e.bind(m, node)
        placed[m["metadata"]["name"]] = node
    for name, node in placed.items():
        assert read_pod("team-b", name)["spec"]["nodeName"] == node


def test_entitlement_across_two_pools_and_preempt():
    try:
        entitlement_and_preempt()
    finally:
        delete_pods("team-a")
        delete_pods("team-b")


def entitlement_and_preempt():
    e = ours(True)
    s = Scheduler([e])
    # team-b idle: team-a borrows beyond its reservation (2) up to its limit (6)
    a_pods = []
    for i in range(6):
        p = make_pod("team-a", f"a{i}", cpu="1")
        wait_until(lambda: pods_seen() >= i + 1, "extender sees team-a pod")
        schedule_and_bind(p, [e])
        a_pods.append(p)
    # the next team-a pod is refused by its pool, naming the pool and the resource
    a7 = make_pod("team-a", "a6", cpu="1")
    try:
        s.schedule(a7, node_objs())
        raise AssertionError("team-a exceeded its limit")
    except FitError as err:
        why = (err.failed or err.unresolvable)["n1"]
        assert "team-a" in why and "cpu" in why, why
    # team-b still schedules (the 2 free cpus)
    b1 = make_pod("team-b", "b1", cpu="2")
    node_b1 = schedule_and_bind(b1, [e])
    # the nodes are full; team-b wants more: team-a is now over its entitlement
    b2 = make_pod("team-b", "b2", cpu="2", priority=0)
    wait_until(lambda: pods_seen() >= 9, "extender sees b2")
    try:
        s.schedule(b2, node_objs())
        raise AssertionError("b2 fit on full nodes")
    except FitError as err:
        assert "insufficient cpu" in err.failed["n1"], err.failed
    # preemption as the scheduler asks it: candidate victims = every pod on each node
    on = {}
    for p in API.sanitize_for_serialization(CORE.list_pod_for_all_namespaces())["items"]:
        if p["spec"].get("nodeName"):
            on.setdefault(p["spec"]["nodeName"], []).append(p)
    a_uids = {read_pod("team-a", p["metadata"]["name"])["metadata"]["uid"] for p in a_pods}
    for cache in (True, False):
        victims = Extender(URL, node_cache_capable=cache).preempt(b2, on)
        assert victims, "no victims"
        assert node_b1 not in victims, victims  # b1's node: b1 is team-b's own, equal priority
        for node, uids in victims.items():
            assert set(uids) <= a_uids and len(uids) == 2, (node, uids)
    # evict the victims on one node; b2 then schedules there
    node, uids = sorted(victims.items())[0]
    for p in on[node]:
        if p["metadata"]["uid"] in uids:
            CORE.delete_namespaced_pod(p["metadata"]["name"], p["metadata"]["namespace"], grace_period_seconds=0)
    wait_until(lambda: pods_seen() == 7, "extender sees the victims gone")
    assert schedule_and_bind(b2, [e]) == node


def test_binds_in_flight_count_against_the_reservation():
    """kube-scheduler binds asynchronously: it filters the next pod while the
    Binding of the previous is still with the API server. A pod counts against
    its pool from the moment the extender accepts its bind, so a burst of
    non-preemptible pods never goes past the pool's reservation; a bind that
    fails gives the room back."""
    make_pool("team-r", "2", "8")
    proxy = HoldingProxy(PORT)
    # no bind timeout here: the Bindings stay held as long as the test needs (the next test times them out)
    p, port, log = start_extender(f"--kubeconfig={services.kubeconfig(proxy.port)}", "--bind-timeout-ms=0",
                                  name="held")
    threads = []
    try:
        wait_until(lambda: healthz(port)[0] == 200 and healthz(port)[1]["nodes"] == 4, "held extender ready")
        e = Extender(f"http://127.0.0.1:{port}/peloton", bind_verb="bind", timeout=30)
        s = Scheduler([e])
        fixed = {"peloton.io/preemptible": "false"}
        pods = [make_pod("team-a", f"r{i}", cpu="1", labels={"peloton.io/resource-pool": "team-r"},
                         annotations=fixed) for i in range(5)]
        wait_until(lambda: healthz(port)[1]["pods"] >= 5, "held extender sees the burst")
        proxy.hold()
        results, passed, refused = {}, [], []

        def bind(pod, node):
            try:
                e.bind(pod, node)
                results[pod["metadata"]["name"]] = None
            except (ExtenderError, OSError) as err:
                results[pod["metadata"]["name"]] = str(err)
        for pod in pods:  # back to back: each bind still in flight when the next pod is filtered
            try:
                node = s.schedule(pod, node_objs())
            except FitError as err:
                refused.append((pod["metadata"]["name"], err.unresolvable.get("n1", "")))
                continue
            passed.append(pod["metadata"]["name"])
            t = threading.Thread(target=bind, args=(pod, node), daemon=True)
            t.start()
            threads.append(t)
            wait_until(lambda: proxy.waiting() == len(passed), "the bind reaches the API server and is held")
        assert passed == ["r0", "r1"], (passed, refused)
        assert all("reservation" in why and "team-r" in why for _, why in refused), refused
        # the second bind fails at the API server: its room comes back at once
        proxy.release("fail", count=1)
        wait_until(lambda: len(results) == 1, "the failed bind answered")
        assert results["r0"] and "held binding failed" in results["r0"], results
        node = s.schedule(pods[2], node_objs())
        t = threading.Thread(target=bind, args=(pods[2], node), daemon=True)
        t.start()
        threads.append(t)
        wait_until(lambda: proxy.waiting() == 2, "r2's bind is held")
        try:
            s.schedule(pods[3], node_objs())
            raise AssertionError("r3 passed with two binds in flight at the reservation")
        except FitError as err:
            assert "reservation" in err.unresolvable["n1"], err.unresolvable
        proxy.release("forward")
        for t in threads:
            t.join(10)
        assert results.get("r1") is None and results.get("r2") is None, results
        bound = [x.metadata.name for x in CORE.list_namespaced_pod("team-a").items if x.spec.node_name]
        assert sorted(bound) == ["r1", "r2"], bound
        # once the watch shows them bound the count is the same: r3 still refused
        wait_until(lambda: healthz(port)[1]["binds"] >= 3, "binds counted")
        try:
            s.schedule(pods[3], node_objs())
            raise AssertionError("r3 passed at the reservation")
        except FitError:
            pass
    finally:
        proxy.release("forward")
        for t in threads:
            t.join(10)
        assert services.stop(p) == 0, open(log).read()[-2000:]
        proxy.close()
        delete_pods("team-a")
        CUSTOM.delete_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", "team-r")


def test_a_bind_not_answered_in_time_gives_the_room_back():
    """--bind-timeout-ms: a Binding the API server has not answered by then is
    an Error to kube-scheduler and the pod stops counting; if it takes later,
    the watch counts the pod again."""
    make_pool("team-t", "1", "8")
    proxy = HoldingProxy(PORT)
    p, port, log = start_extender(f"--kubeconfig={services.kubeconfig(proxy.port)}", "--bind-timeout-ms=800",
                                  name="timeout")
    try:
        wait_until(lambda: healthz(port)[0] == 200 and healthz(port)[1]["nodes"] == 4, "extender ready")
        e = Extender(f"http://127.0.0.1:{port}/peloton", bind_verb="bind", timeout=30)
        s = Scheduler([e])
        fixed = {"peloton.io/preemptible": "false"}
        t0, t1 = [make_pod("team-a", f"t{i}", cpu="1", labels={"peloton.io/resource-pool": "team-t"},
                           annotations=fixed) for i in range(2)]
        wait_until(lambda: healthz(port)[1]["pods"] >= 2, "extender sees t0 and t1")
        proxy.hold()
        node = s.schedule(t0, node_objs())
        started = time.monotonic()
        try:
            e.bind(t0, node)
            raise AssertionError("a held Binding was answered")
        except ExtenderError as err:
            assert "has not answered within 800 ms" in str(err), str(err)
        assert 0.7 < time.monotonic() - started < 10
        # the room is back: t1 passes the reservation of 1
        assert s.schedule(t1, node_objs())
        # the Binding takes after all: the watch counts t0 again, and t1 no longer fits
        proxy.release("forward")
        wait_until(lambda: read_pod("team-a", "t0")["spec"].get("nodeName") == node, "t0 bound by the late Binding")

        def refused():
            try:
                s.schedule(t1, node_objs())
                return False
            except FitError as err:
                return "reservation" in err.unresolvable.get("n1", "")
        wait_until(refused, "t1 refused once the watch shows t0 bound")
    finally:
        proxy.release("forward")
        assert services.stop(p) == 0, open(log).read()[-2000:]
        proxy.close()
        delete_pods("team-a")
        CUSTOM.delete_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", "team-t")


def test_nominated_pod_holds_the_room_freed_for_it():
    """kube-scheduler writes status.nominatedNodeName on a preemptor; the
    extender sees it through the watch and keeps that node's room for it."""
    try:
        nom = make_pod("team-b", "nom", cpu="2", priority=10)
        CORE.patch_namespaced_pod_status("nom", "team-b", {"status": {"nominatedNodeName": "n3"}})
        low = make_pod("team-b", "low", cpu="1", priority=1)

        def held():
            _, failed, _ = ours(True).filter(low, node_objs())
            return "held for nominated pod team-b/nom" in failed.get("n3", "")
        wait_until(held, "n3 held for the nominated pod")
        passing, failed, _ = ours(False).filter(low, node_objs())
        assert sorted(node_name(n) for n in passing) == ["n1", "n2", "n4"], failed
        # the nominated pod itself may go there
        passing, _, _ = ours(True).filter(nom, node_objs())
        assert "n3" in [node_name(n) for n in passing]
        # once bound, it counts as a pod on n3 and nothing is held for it any more
        ours(True).bind(nom, "n3")
        _, failed, _ = ours(True).filter(low, node_objs())
        assert failed.get("n3") == "insufficient cpu", failed
    finally:
        delete_pods("team-b")


def test_pool_status_written_in_extender_mode():
    """No resource manager runs here (pelotond is the API server alone): the
    extender writes the pools' status, which `kubectl get rp` shows."""
    try:
        e = ours(True)
        for i in range(2):
            p = make_pod("team-a", f"st{i}", cpu="1")
            wait_until(lambda: pods_seen() >= i + 1, "extender sees the pod")
            e.bind(p, "n1" if i == 0 else "n2")

        def status():
            return CUSTOM.get_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", "team-a").get("status")
        wait_until(lambda: (status() or {}).get("allocation", {}).get("cpu") == "2", "team-a's allocation written")
        st = status()
        assert st["path"] == "/team-a" and st["summary"]["cpu"]["allocation"] == "2", st
        assert st["summary"]["cpu"]["reservation"] == "2" and st["entitlement"]["cpu"], st
        (cond,) = st["conditions"]
        assert cond["type"] == "TreeValid" and cond["status"] == "True" and cond["lastTransitionTime"], cond
        first = cond["lastTransitionTime"]
        # a change of numbers keeps the condition's transition time
        CORE.delete_namespaced_pod("st1", "team-a", grace_period_seconds=0)
        wait_until(lambda: status()["allocation"]["cpu"] == "1", "team-a's allocation back to 1")
        assert status()["conditions"][0]["lastTransitionTime"] == first
        # kubectl's columns come from the CRD's printer columns over status.summary
        out = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", "get", "rp", "team-a"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        head, row = out.stdout.splitlines()[:2]
        starts = [m.start() for m in re.finditer(r"\S+", head)]
        cells = {head[a:b].strip(): row[a:b].strip() for a, b in zip(starts, starts[1:] + [None])}
        assert cells["NAME"] == "team-a" and cells["CPU-RES"] == "2" and cells["CPU-ALLOC"] == "1", out.stdout
        assert cells["CPU-ENT"] not in ("", "<none>") and cells["CPU-DEMAND"] == "1", out.stdout
    finally:
        delete_pods("team-a")


def test_preempt_never_breaks_a_running_gang():
    """A gang is one preemption unit: kube-scheduler deletes the victims of one
    node, so a gang spread over nodes is never a victim, and a gang on one
    node goes whole."""
    try:
        e = ours(True)
        uids = {}

        def member(name, gang, node):
            p = make_pod("team-b", name, cpu="1", labels={"peloton.io/gang": gang, "peloton.io/gang-size": "2"},
                         priority=1)
            uids[name] = p["metadata"]["uid"]
            return p, node
        placed = [member("gs-0", "gs", "n1"), member("gs-1", "gs", "n2"), member("gw-0", "gw", "n3"),
                  member("gw-1", "gw", "n3")]
        lone = make_pod("team-b", "lone", cpu="1", priority=1)
        uids["lone"] = lone["metadata"]["uid"]
        placed.append((lone, "n1"))
        wait_until(lambda: pods_seen() >= 5, "extender sees the gangs")
        for p, node in placed:
            e.bind(p, node)
        objs = {p["metadata"]["name"]: read_pod("team-b", p["metadata"]["name"]) for p, _ in placed}
        big = make_pod("team-b", "big", cpu="2", priority=10)
        small = make_pod("team-b", "small", cpu="1", priority=10)
        wait_until(lambda: pods_seen() >= 7, "extender sees the preemptors")
        # n1 holds gs-0 and lone: both would make room, but gs-0 alone would leave gang gs 1/2
        assert e.preempt(big, {"n1": [objs["gs-0"], objs["lone"]]}) == {}
        # n3 holds gang gw whole: one member would do for 1 cpu, the gang goes as a unit
        v = e.preempt(small, {"n3": [objs["gw-0"], objs["gw-1"]]})
        assert sorted(v["n3"]) == sorted([uids["gw-0"], uids["gw-1"]]), v
        # on n1 a 1-cpu preemptor takes the single pod, never the gang's member
        assert e.preempt(small, {"n1": [objs["gs-0"], objs["lone"]]}) == {"n1": [uids["lone"]]}
    finally:
        delete_pods("team-b")


def test_strategy_follows_the_job_type():
    try:
        job_strategy()
    finally:
        delete_pods("team-b")
        for j in CUSTOM.list_namespaced_custom_object("peloton.io", "v1alpha1", "team-b", "jobs")["items"]:
            CUSTOM.delete_namespaced_custom_object("peloton.io", "v1alpha1", "team-b", "jobs", j["metadata"]["name"])


def job_strategy():
    e = ours(True, bind=True)
    web0 = make_pod("team-b", "web-0", cpu="500m", labels={"peloton.io/job": "web"})
    e.bind(web0, "n1")
    web1 = make_pod("team-b", "web-1", cpu="500m", labels={"peloton.io/job": "web"})
    nodes = node_objs()
    # no Job known: PACK, next to web-0
    wait_until(lambda: Scheduler([e]).schedule(web1, nodes) == "n1", "PACK puts web-1 next to web-0")
    CUSTOM.create_namespaced_custom_object("peloton.io", "v1alpha1", "team-b", "jobs", {
        "apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "web", "namespace": "team-b"},
        "spec": {"type": "STATELESS", "resourcePool": "team-b", "instanceCount": 2,
                 "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
    # a STATELESS job spreads: away from web-0
    wait_until(lambda: Scheduler([e]).schedule(web1, nodes) != "n1", "SPREAD_JOB moves web-1 off n1")


def test_not_synced_answers_an_error():
    dead = services.free_port()
    p, port, log = start_extender(f"--server=http://127.0.0.1:{dead}", name="unsynced")
    try:
        st, doc = healthz(port)
        assert st == 503 and doc["ready"] is False, doc
        r = post(f"http://127.0.0.1:{port}/peloton/filter",
                 {"Pod": {"metadata": {"name": "x"}}, "NodeNames": ["n1"]})[1]
        assert r["Error"] == "extender cache not synced", r
        st, _ = post(f"http://127.0.0.1:{port}/peloton/prioritize",
                     {"Pod": {"metadata": {"name": "x"}}, "NodeNames": ["n1"]})
        assert st == 503
    finally:
        assert services.stop(p) == 0, open(log).read()[-2000:]


def test_https_and_prefix():
    if not shutil.which("openssl"):
        return
    d = services.tempdir()
    cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True, timeout=60)
    p, port, log = start_extender(f"--kubeconfig={KUBECONFIG}", f"--tls-cert={cert}", f"--tls-key={key}",
                                  "--prefix=/x/", name="tls")
    ctx = ssl.create_default_context(cafile=cert)
    ctx.check_hostname = False
    try:
        wait_until(lambda: healthz(port, "https", ctx)[0] == 200, "TLS extender ready")
        pod = make_pod("team-a", "tls")
        e = Extender(f"https://127.0.0.1:{port}/x", context=ctx)
        passing, _, _ = e.filter(pod, node_objs())
        assert len(passing) == 4
    finally:
        assert services.stop(p) == 0, open(log).read()[-2000:]
        delete_pods("team-a")


def test_pelotond_runs_the_extender_as_a_role():
    """The same binary serves both deployments: pelotond --roles=extender, a client
    of the API server (here the shim), filters like peloton-extender does."""
    port = services.free_port()
    d = services.tempdir()
    log = os.path.join(d, "role.log")
    p = subprocess.Popen([services.PELOTOND, "--roles=extender", f"--kubeconfig={KUBECONFIG}",
                          f"--extender-port={port}"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    services._procs.append(p)
    try:
        # connection refused until it listens: services.wait_for treats OSError as "not yet"
        services.wait_for(lambda: p.poll() is not None or (lambda r: r[0] == 200 and r[1]["ready"])(healthz(port)),
                          timeout=20, what="the extender role")
        assert p.poll() is None, open(log).read()[-2000:]
        pod = make_pod("team-a", "role")
        e = Extender(f"http://127.0.0.1:{port}/peloton")
        passing, _, _ = e.filter(pod, node_objs())
        assert len(passing) == 4, passing
    finally:
        assert services.stop(p) == 0, open(log).read()[-2000:]
        delete_pods("team-a")


PROM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
PROM_SAMPLE = re.compile(r'^(' + PROM_NAME + r')(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\})? '
                         r'(\S+)$')
PROM_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def parse_prometheus(text):
    """A strict reader of the text format 0.0.4: every family's HELP then
    TYPE before its samples, samples only of declared families (histograms:
    _bucket with le, _sum, _count), values floats, label values escaped,
    buckets cumulative up to le="+Inf" == _count. Returns
    {family: {"type", "samples": [(name, {label: value}, float)]}}."""
    fams, current = {}, None
    assert text.endswith("\n"), "the text ends with a newline"
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            assert re.fullmatch(PROM_NAME, name) and help_ and name not in fams, line
            assert "\n" not in help_ and not re.search(r"\\[^\\n]", help_), line
            fams[name] = {"help": help_, "type": None, "samples": []}
            current = name
        elif line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            assert name == current and fams[name]["type"] is None, f"TYPE right after its HELP: {line}"
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            fams[name]["type"] = typ
        else:
            assert not line.startswith("#") and line, f"unexpected line {line!r}"
            m = PROM_SAMPLE.match(line)
            assert m, f"not a sample: {line!r}"
            name, labels, value = m.group(1), dict(PROM_LABEL.findall(m.group(3) or "")), m.group(4)
            float(value)  # "+Inf", "NaN" and Go floats parse too
            fam = fams.get(current)
            assert fam and fam["type"], f"sample before its HELP/TYPE: {line}"
            if fam["type"] == "histogram":
                assert name in (current + "_bucket", current + "_sum", current + "_count"), line
                assert (name == current + "_bucket") == ("le" in labels), line
            else:
                assert name == current and "le" not in labels, line
            fam["samples"].append((name, labels, float(value)))
    for name, fam in fams.items():
        if fam["type"] != "histogram":
            continue
        series = {}
        for n, labels, v in fam["samples"]:
            key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
            series.setdefault(key, {"buckets": [], "sum": None, "count": None})
            if n.endswith("_bucket"):
                series[key]["buckets"].append((float(labels["le"]), v))
            else:
                series[key][n.rsplit("_", 1)[1]] = v
        for key, sr in series.items():
            les = [le for le, _ in sr["buckets"]]
            counts = [c for _, c in sr["buckets"]]
            assert les == sorted(les) and les[-1] == float("inf"), (name, key, les)
            assert counts == sorted(counts), (name, key, counts)
            assert sr["count"] == counts[-1] and sr["sum"] is not None, (name, key, sr)
    return fams


def sample(fams, family, name=None, **labels):
    for n, lb, v in fams[family]["samples"]:
        if n == (name or family) and all(lb.get(k) == x for k, x in labels.items()):
            return v
    return None


def test_metrics_in_prometheus_text():
    r = urllib.request.urlopen(f"http://127.0.0.1:{EXT_PORT}/metrics", timeout=5)
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8", r.headers["Content-Type"]
    text = r.read().decode()
    fams = parse_prometheus(text)
    promtool = shutil.which("promtool")  # Debian's prometheus package: its linter too
    if promtool:
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
        assert p.returncode == 0, (p.stdout + p.stderr).decode()
    lat = "peloton_extender_request_duration_seconds"
    assert fams[lat]["type"] == "histogram"
    for verb in ("filter", "prioritize", "preempt", "bind"):
        assert sample(fams, lat, lat + "_count", verb=verb) > 0, verb
    assert sample(fams, lat, lat + "_bucket", verb="filter", le="+Inf") == sample(fams, lat, lat + "_count",
                                                                                  verb="filter")
    dec = "peloton_extender_filter_decisions_total"
    assert sample(fams, dec, pool="team-a", reason="admitted") > 0
    assert sample(fams, dec, pool="team-a", reason="limit") or sample(fams, dec, pool="team-a", reason="entitlement")
    assert sample(fams, dec, pool="team-b", reason="gang_incomplete") >= 3
    assert sample(fams, "peloton_extender_preempt_victims_total") >= 2
    assert sample(fams, "peloton_extender_binds_total", result="bound") > 0
    assert sample(fams, "peloton_extender_binds_total", result="already") > 0
    assert sample(fams, "peloton_extender_model_nodes") == 4
    assert sample(fams, "peloton_extender_model_pods") == len(CORE.list_pod_for_all_namespaces().items)
    assert sample(fams, "peloton_extender_gangs_held") is not None
    assert sample(fams, "peloton_extender_cache_synced", kind="Pod") == 1
    age = "peloton_extender_watch_event_age_seconds"
    n = sample(fams, age, age + "_count", kind="Pod")
    assert n > 0, "pod events after the sync carry a creation or deletion time"
    # the shim is on loopback: nearly every event is younger than 2 s (1 s resolution)
    assert sample(fams, age, age + "_bucket", kind="Pod", le="2") >= 0.9 * n, fams[age]["samples"]
    # the standalone binary's registry also carries the process's figures
    assert sample(fams, "process_cpu_seconds_total") > 0
    assert sample(fams, "process_resident_memory_bytes") > 0
    # GET only
    st, _ = raw("POST", "/metrics", b"{}")
    assert st == 405


def test_exit_clean_under_asan():
    assert EXT.poll() is None, open(EXT_LOG).read()[-3000:]
    assert services.stop(EXT) == 0, open(EXT_LOG).read()[-3000:]
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]


run_tests("extender", dict(globals()))
