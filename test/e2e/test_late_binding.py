#!/usr/bin/python3
"""End-to-end (issue #22): a Binding of a placement term that has ended is
never stored once a newer term has begun (docs/lifecycle.md, "Fencing and
claims").

A placement engine sends each Binding with its term's epoch
(?placementEpoch=N); the API server binds only while the placement lease's
epoch key, peloton:placement:epoch, still holds N, checked in the
binding's own Redis script call, and answers a stale one 409 Conflict.

- The API alone: a Binding without the epoch binds as in Kubernetes; one
  naming the current epoch binds; one naming an older epoch, or naming one
  while no term ever began, is refused 409 (reason Conflict, a cause
  PlacementTermEnded, the message naming both epochs) and the pod stays
  unbound; a malformed one is a 400.
- The late Binding: engine A (--roles=placement, a 2 s lease) reaches the
  API server through a proxy that holds its Bindings back
  (test/e2e/netproxy.py, hold()); A binds two pods of 1 cpu onto the one
  node of 2 cpus, and is killed while the proxy holds them. Engine B takes
  the lease, catches up and binds two more pods there (all four ask for
  that node; a second node gives the pool the room to admit them). Then the proxy lets
  A's Bindings go: before the fence they were stored (four pods of 1 cpu on
  a node of 2, the kubelet refusing two OutOfcpu); now they are refused 409
  and the node holds B's two.

Every wait is bounded; every process is stopped."""
import json
import re
import signal
import time

import netproxy
import services
from simlib import run_tests

wait_until = services.wait_until
EPOCH_KEY = "peloton:placement:epoch"
LEASE_MS = 2000

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)
KUBECONFIG = services.kubeconfig(PORT)
PROXY = netproxy.Proxy(PORT)
SIM, SIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=2", "--name-prefix=lb-", "--cpu=2", expect=2)
CTLS = []


def start_ctl(name, port, *roles):
    p, log = services.start_controllers(name, port, REDIS, *roles, f"--lease-ms={LEASE_MS}",
                                        "--restart-backoff-ms=200")
    CTLS.append((p, log))
    return p, log


def log_has(log, text):
    return text in open(log).read()


def epoch():
    return services.redis_cmd(REDIS, "GET", EPOCH_KEY)


def pod(name, node=None, scheduler="peloton"):
    spec = {"schedulerName": scheduler, "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    labels = {"peloton.io/resource-pool": "lb"} if scheduler == "peloton" else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": spec}


def create(p):
    st, body = services.api(PORT, "POST", "/api/v1/namespaces/default/pods", p)
    assert st == 201, (st, body)


def pods(prefix):
    st, body = services.api(PORT, "GET", "/api/v1/namespaces/default/pods")
    assert st == 200, (st, body)
    return {p["metadata"]["name"]: p for p in body["items"] if p["metadata"]["name"].startswith(prefix)}


def bind(name, node, query=""):
    return services.api(PORT, "POST", f"/api/v1/namespaces/default/pods/{name}/binding{query}",
                        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": node}})


def node_of(name):
    return pods(name)[name]["spec"].get("nodeName")


HAND = ("hand-0", "hand-1", "hand-2", "hand-3", "hand-4")


def test_api_binding_with_and_without_an_epoch():
    # pods of the default scheduler, bound by hand to a node nobody runs
    for n in HAND:
        create(pod(n, scheduler="default-scheduler"))
    try:
        api_bindings()
    finally:
        services.redis_cmd(REDIS, "DEL", EPOCH_KEY)
        for n in HAND:
            services.api(PORT, "DELETE", f"/api/v1/namespaces/default/pods/{n}?gracePeriodSeconds=0")


def api_bindings():
    assert epoch() == "", "no placement term has begun"
    st, body = bind("hand-0", "nowhere", "?placementEpoch=1")  # no term ever began: nothing to bind for
    assert st == 409 and body.get("reason") == "Conflict", (st, body)
    assert EPOCH_KEY + " holds nothing" in body["message"], body
    assert node_of("hand-0") is None
    st, body = bind("hand-0", "nowhere")  # no epoch: as in Kubernetes
    assert st == 201, (st, body)
    assert node_of("hand-0") == "nowhere"
    services.redis_cmd(REDIS, "SET", EPOCH_KEY, "7")
    st, body = bind("hand-1", "nowhere", "?placementEpoch=6")
    assert st == 409 and body.get("reason") == "Conflict" and body.get("code") == 409, (st, body)
    msg = body["message"]
    assert msg.startswith('Operation cannot be fulfilled on pods/binding "hand-1"'), msg
    assert "epoch 6 has ended" in msg and EPOCH_KEY + " holds 7" in msg, msg
    causes = body.get("details", {}).get("causes", [])
    assert causes and causes[0]["reason"] == "PlacementTermEnded", body
    assert node_of("hand-1") is None, "a refused Binding binds nothing"
    st, body = bind("hand-1", "nowhere", "?placementEpoch=7")
    assert st == 201, (st, body)
    assert node_of("hand-1") == "nowhere"
    # with the Scheduled Event asked for: refused, neither is stored
    st, body = bind("hand-2", "nowhere", "?scheduledEvent=peloton-placement&placementEpoch=5")
    assert st == 409, (st, body)
    st, evs = services.api(PORT, "GET", "/api/v1/namespaces/default/events")
    assert not [e for e in evs["items"] if e.get("involvedObject", {}).get("name") == "hand-2"], evs
    st, body = bind("hand-2", "nowhere", "?scheduledEvent=peloton-placement&placementEpoch=7")
    assert st == 201 and body.get("details", {}).get("kind") == "events", (st, body)
    for bad in ("0", "-3", "x7", "12345678901234567890", ""):
        st, body = bind("hand-3", "nowhere", f"?placementEpoch={bad}")
        assert st == 400 and body.get("reason") == "BadRequest", (bad, st, body)
    assert node_of("hand-3") is None
    # the legacy route (namespaces/NS/bindings) is fenced the same way
    st, body = services.api(PORT, "POST", "/api/v1/namespaces/default/bindings?placementEpoch=6",
                            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "hand-4"},
                             "target": {"apiVersion": "v1", "kind": "Node", "name": "nowhere"}})
    assert st == 409, (st, body)
    assert node_of("hand-4") is None


def test_late_binding_of_an_ended_term_is_refused():
    services.kubectl_apply(KUBECONFIG, [{"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool",
                                         "metadata": {"name": "lb"},
                                         "spec": {"resources": [{"kind": "cpu", "reservation": "2", "limit": "8",
                                                                 "share": 1}]}}])
    # the resource manager readies a gang again only after a minute: the
    # pods A popped stay A's, and B places only the ones created for it
    start_ctl("rm", PORT, "--roles=resmgr", "--ready-timeout-ms=60000")
    a, a_log = start_ctl("a", PROXY.port, "--roles=placement")
    wait_until(lambda: log_has(a_log, "placement: caught up with the store"), 20, "engine A to lead and catch up")
    epoch_a = epoch()
    b, b_log = start_ctl("b", PORT, "--roles=placement")
    PROXY.hold()
    create(pod("late-0", "lb-0"))
    create(pod("late-1", "lb-0"))
    wait_until(lambda: PROXY.held_binds >= 2, 20, "A's two Bindings, held by the proxy")
    a.send_signal(signal.SIGKILL)
    a.wait(timeout=10)
    t0 = time.monotonic()
    wait_until(lambda: log_has(b_log, "placement: caught up with the store"), 20, "engine B to lead and catch up")
    epoch_b = epoch()
    assert int(epoch_b) > int(epoch_a), (epoch_a, epoch_b)
    print(f"  B's term (epoch {epoch_b}) began {time.monotonic() - t0:.1f} s after A's (epoch {epoch_a}) death")
    assert not [n for n, p in pods("late-").items() if p["spec"].get("nodeName")], "A's Bindings are held"
    create(pod("late-2", "lb-0"))
    create(pod("late-3", "lb-0"))
    wait_until(lambda: {n for n, p in pods("late-").items() if p["spec"].get("nodeName") == "lb-0"} ==
               {"late-2", "late-3"}, 20, "B to bind its two pods")
    PROXY.release()

    def answers():
        return [(int(code), body) for a in PROXY.held_answers()
                for code, body in re.findall(rb"HTTP/1\.1 (\d{3}) .*?\r\n\r\n(\{.*?\})(?=HTTP/|$)", a, re.S)]
    wait_until(lambda: len(answers()) >= 2, 20, "the API server's answers to A's late Bindings")
    got = answers()
    print("  A's late Bindings:", [(c, json.loads(b).get("message")) for c, b in got])
    for code, body in got:
        st = json.loads(body)
        assert code == 409 and st.get("reason") == "Conflict", (code, st)
        assert f"epoch {epoch_a} has ended" in st["message"] and f"{EPOCH_KEY} holds {epoch_b}" in st["message"], st
    time.sleep(2)  # the kubelet runs what is bound
    now = pods("late-")
    bound = sorted(n for n, p in now.items() if p["spec"].get("nodeName"))
    assert bound == ["late-2", "late-3"], f"bound to the node of 2 cpus: {bound}"
    for n, p in now.items():
        assert p.get("status", {}).get("reason") not in ("OutOfcpu", "OutOfpods"), (n, p["status"])
    wait_until(lambda: all(pods("late-")[n].get("status", {}).get("phase") == "Running" for n in bound), 30,
               "B's two pods running")


def test_clean_shutdown():
    services.stop(SIM)
    for p, log in CTLS:
        if p.poll() is None:
            assert services.stop(p) == 0, open(log).read()[-3000:]
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    PROXY.stop()


run_tests("late_binding", dict(globals()))
