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
  (test/e2e/netproxy.py, hold()); A binds two pods of 1 cpu onto a node of
  2 cpus, and is killed while the proxy holds them. Engine B takes the
  lease, catches up and binds two more pods there (all four ask for that
  node; the other nodes give the pool the room to admit them). Then the
  proxy lets A's Bindings go: before the fence they were stored (four pods
  of 1 cpu on a node of 2, the kubelet refusing two OutOfcpu); now they are
  refused 409 and the node holds B's two.
- A live engine whose term moved on: engine C (through the proxy) leads
  once B is killed; its Binding is held while the epoch is moved on behind
  its back (the lease key left its own), then refused: C logs it, the pod
  stays unbound, C's term ends at its next fenced Redis write, and C takes
  the lease again at once (the key holds its own id) in a new term.

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
SIM, SIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=3", "--name-prefix=lb-", "--cpu=2", expect=3)
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


def answers():
    """(code, body) of each answer the API server gave on the connections the proxy held."""
    return [(int(code), json.loads(body)) for a in PROXY.held_answers()
            for code, body in re.findall(rb"HTTP/1\.1 (\d{3}) .*?\r\n\r\n(\{.*?\})(?=HTTP/|$)", a, re.S)]


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

    wait_until(lambda: len(answers()) >= 2, 20, "the API server's answers to A's late Bindings")
    got = answers()
    print("  A's late Bindings:", [(c, st.get("message")) for c, st in got])
    for code, st in got:
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


def test_a_live_engine_whose_term_moved_on_gets_its_binding_refused():
    (b, b_log), = [(p, log) for p, log in CTLS if log.endswith("b.log")]
    c, c_log = start_ctl("c", PROXY.port, "--roles=placement")
    b.send_signal(signal.SIGKILL)
    b.wait(timeout=10)
    wait_until(lambda: log_has(c_log, "placement: caught up with the store"), 20, "engine C to lead and catch up")
    e = int(epoch())
    held = PROXY.held_binds
    PROXY.hold()
    create(pod("late-4", "lb-1"))
    wait_until(lambda: PROXY.held_binds > held, 20, "C's Binding, held by the proxy")
    # a newer term's epoch, as a new holder would write it (the lease key left as it is: C's)
    assert services.redis_call(REDIS, "INCR", EPOCH_KEY) == e + 1
    PROXY.release()

    def refusal():
        return [st for code, st in answers() if code == 409 and '"late-4"' in st.get("message", "")]
    wait_until(refusal, 20, "the API server's answer to C's Binding")
    assert f"epoch {e} has ended" in refusal()[0]["message"] and f"holds {e + 1}" in refusal()[0]["message"], refusal()
    # C's next fenced Redis write (its retry-queue mover, every 100 ms) is
    # refused too: the term ends, and the key, still C's, is taken again at once
    wait_until(lambda: log_has(c_log, f'msg="placement: leader" epoch={e + 2}'), 20, "C's next term")
    assert 'msg="placement: lost the lease" epoch=%d reason=stale-epoch' % e in open(c_log).read()
    assert node_of("late-4") is None
    # the engine logs the refusal when the answer comes before that write
    # (the usual order: milliseconds against up to 100 ms); else its term
    # has stopped and the answer is dropped with it
    line = [x for x in open(c_log) if "placement: binding refused: this term has ended" in x]
    if line:
        assert "pod=default/late-4" in line[0] and f"epoch={e} " in line[0] and f"holds {e + 1}" in line[0], line
    print("  C:", line[0].strip() if line else "(its term ended before the answer came)")


def test_clean_shutdown():
    services.stop(SIM)
    for p, log in CTLS:
        if p.poll() is None:
            assert services.stop(p) == 0, open(log).read()[-3000:]
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    PROXY.stop()


run_tests("late_binding", dict(globals()))
