"""End-to-end: mesos-master-sim (build/asan/mesos-master-sim) driven over real
HTTP by a scheduler written here (mesosclient.py): subscribe, offers,
launch, status updates retried until acknowledged, kill, reconcile, decline
filters, agent loss, drain, failover, and the master's error replies. Each
test starts its own sim on free loopback ports and stops it (exit 0 under
ASan). Every wait is bounded."""
import json
import socket
import time

import services
from mesosclient import Subscription, call, framework_info, hook, operator, start_sim, stop_sim, uuid_bytes
from simlib import run_tests

FAST = ["--allocation-interval-ms=50", "--heartbeat-seconds=0.5", "--update-retry-ms=300",
        "--update-retry-max-ms=600", "--staging-ms=10", "--starting-ms=10", "--kill-ms=10"]
AGENTS = ["--agents=3", "--agent-cpus=2", "--agent-mem=4096", "--agent-disk=10000", "--agent-gpus=1",
          "--agent-attributes=rack=r1,team=a", "--zones=2"]


class Sim:
    def __init__(self, *flags, standby=False):
        self.flags = [*FAST, *AGENTS, *flags]
        self.standby = standby

    def __enter__(self):
        self.proc, self.port, self.sport = start_sim(*self.flags, standby=self.standby)
        self.subs = []
        return self

    def subscribe(self, **kw):
        port = kw.pop("port", self.port)
        s = Subscription(port, framework_info(**kw))
        self.subs.append(s)
        return s

    def __exit__(self, *exc):
        for s in self.subs:
            s.close()
        stop_sim(self.proc)


def scalar(resources, name):
    return sum(r["scalar"]["value"] for r in resources if r["name"] == name)


def acked_run(sub, task_id, states):
    """Waits for states in order for task_id, acknowledging each; returns the statuses."""
    out = []
    for st in states:
        s = sub.update(task_id, st)
        assert s["source"] == "SOURCE_EXECUTOR" and len(uuid_bytes(s)) == 16, s
        sub.ack(s)
        out.append(s)
    return out


def test_subscribe_heartbeat_and_offers():
    with Sim() as sim:
        s = sim.subscribe()
        assert s.status == 200 and s.headers["content-type"] == "application/json"
        assert s.headers["transfer-encoding"] == "chunked"
        assert 0 < len(s.stream_id) <= 128
        sub = s.subscribed["subscribed"]
        assert sub["heartbeat_interval_seconds"] == 0.5
        s.next("HEARTBEAT", timeout=2)
        t0 = time.monotonic()
        s.next("HEARTBEAT", timeout=2)
        s.next("HEARTBEAT", timeout=2)
        assert time.monotonic() - t0 >= 0.7, "heartbeats come every heartbeat_interval_seconds"
        offers = s.offers()
        assert len(offers) == 3, offers
        hosts = sorted(o["hostname"] for o in offers)
        assert hosts == ["agent-0", "agent-1", "agent-2"], hosts
        o = offers[0]
        assert o["framework_id"]["value"] == s.framework_id
        assert (scalar(o["resources"], "cpus"), scalar(o["resources"], "mem"), scalar(o["resources"], "disk"),
                scalar(o["resources"], "gpus")) == (2, 4096, 10000, 1)
        attrs = {a["name"]: a["text"]["value"] for a in o["attributes"]}
        assert attrs["rack"] == "r1" and attrs["team"] == "a" and attrs["zone"].startswith("zone-"), attrs
        # outstanding offers are not offered again
        s.none("OFFERS", 0.4)
        fws = operator(sim.port, {"type": "GET_FRAMEWORKS"})["get_frameworks"]["frameworks"]
        assert [f["framework_info"]["id"]["value"] for f in fws] == [s.framework_id]
        assert fws[0]["connected"] is True


def test_launch_updates_retried_until_acknowledged():
    with Sim() as sim:
        s = sim.subscribe()
        o = s.offers()[0]
        s.launch(o, "t-1", labels={"mesos-sim/run-seconds": "2.5"}, refuse=0)
        first = s.update("t-1", "TASK_STARTING")
        assert first["agent_id"] == o["agent_id"] and first["source"] == "SOURCE_EXECUTOR"
        # not acknowledged: the same update (same uuid) comes again, and nothing after it
        again = s.update("t-1", "TASK_STARTING", timeout=3)
        assert again["uuid"] == first["uuid"]
        again2 = s.update("t-1", "TASK_STARTING", timeout=3)
        assert again2["uuid"] == first["uuid"]
        assert not [e for e in s.backlog if e["type"] == "UPDATE"
                    and e["update"]["status"]["state"] != "TASK_STARTING"], s.backlog
        state = hook(sim.port, "state", method="GET")
        assert state["update_resends"] >= 2 and state["tasks_with_pending_updates"] == 1, state
        tasks = operator(sim.port, {"type": "GET_TASKS"})["get_tasks"]
        # the master already knows the latest state (RUNNING) while STARTING waits for its ack
        assert [t["state"] for t in tasks["tasks"]] == ["TASK_RUNNING"], tasks
        s.ack(first)
        running = s.update("t-1", "TASK_RUNNING")
        assert running["uuid"] != first["uuid"]
        s.ack(running)
        fin = s.update("t-1", "TASK_FINISHED", timeout=5)
        # an acknowledgement with another uuid is ignored: FINISHED comes again
        s.ok({"type": "ACKNOWLEDGE", "acknowledge": {"agent_id": fin["agent_id"], "task_id": fin["task_id"],
                                                     "uuid": running["uuid"]}})
        assert s.update("t-1", "TASK_FINISHED", timeout=3)["uuid"] == fin["uuid"]
        s.ack(fin)
        services.wait_until(lambda: operator(sim.port, {"type": "GET_TASKS"})["get_tasks"]["tasks"] == [],
                            timeout=5, what="the finished task to leave the master")
        done = operator(sim.port, {"type": "GET_TASKS"})["get_tasks"]["completed_tasks"]
        assert [(t["task_id"]["value"], t["state"]) for t in done] == [("t-1", "TASK_FINISHED")], done
        # its resources went back to the agent: an offer there is whole again (what was
        # offered while the task ran is declined to make room)
        deadline = time.monotonic() + 6
        while True:
            assert time.monotonic() < deadline, "the whole agent was not offered again"
            mine = [x for x in s.offers(timeout=3) if x["agent_id"] == o["agent_id"]]
            if mine and scalar(mine[0]["resources"], "cpus") == 2:
                break
            s.ok({"type": "DECLINE", "decline": {"offer_ids": [x["id"] for x in mine],
                                                 "filters": {"refuse_seconds": 0}}})


def test_launch_checks_resources_and_offers():
    with Sim() as sim:
        s = sim.subscribe()
        offers = s.offers()
        o = offers[0]
        s.launch(o, "too-big", cpus=3)  # the agent has 2
        st = s.update("too-big", "TASK_ERROR")
        assert st["reason"] == "REASON_TASK_INVALID" and "more resources" in st["message"], st
        assert st["source"] == "SOURCE_MASTER" and "uuid" not in st, st
        # the offer is gone after the accept: using it again is an invalid offer
        s.launch(o, "stale")
        st = s.update("stale", "TASK_DROPPED")
        assert st["reason"] == "REASON_INVALID_OFFERS" and o["id"]["value"] in st["message"], st
        # resources the agent does not have (ports) are more than offered
        o2 = offers[1]
        s.launch(o2, "ports", extra_res=[{"name": "ports", "type": "RANGES", "ranges": {"range": [{"begin": 1,
                                                                                              "end": 2}]}}])
        assert s.update("ports", "TASK_ERROR")["reason"] == "REASON_TASK_INVALID"
        # a duplicate task id is refused
        o3 = offers[2]
        s.launch(o3, "dup")
        acked_run(s, "dup", ["TASK_STARTING", "TASK_RUNNING"])
        o4 = s.offers(timeout=8, pred=lambda ev: any(x["agent_id"] == o3["agent_id"] for x in ev["offers"]["offers"]))
        o4 = [x for x in o4 if x["agent_id"] == o3["agent_id"]][0]
        assert scalar(o4["resources"], "cpus") == 1.5, o4  # what the first task left
        s.launch(o4, "dup")
        st = s.update("dup", "TASK_ERROR")
        assert "duplicate" in st["message"], st


def test_kill_task():
    with Sim() as sim:
        s = sim.subscribe()
        o = s.offers()[0]
        s.launch(o, "k-1")
        acked_run(s, "k-1", ["TASK_STARTING", "TASK_RUNNING"])
        s.ok({"type": "KILL", "kill": {"task_id": {"value": "k-1"}, "agent_id": o["agent_id"]}})
        acked_run(s, "k-1", ["TASK_KILLING", "TASK_KILLED"])
        # killing an unknown task answers with what reconciliation says
        s.ok({"type": "KILL", "kill": {"task_id": {"value": "nope"}}})
        st = s.update("nope", "TASK_UNKNOWN")
        assert st["reason"] == "REASON_RECONCILIATION" and "uuid" not in st
        # without TASK_KILLING_STATE there is no TASK_KILLING
        s2 = sim.subscribe(caps=("PARTITION_AWARE",))
        o2 = s2.offers(timeout=8)[0]
        s2.launch(o2, "k-2")
        acked_run(s2, "k-2", ["TASK_STARTING", "TASK_RUNNING"])
        s2.ok({"type": "KILL", "kill": {"task_id": {"value": "k-2"}}})
        st = s2.update("k-2")
        assert st["state"] == "TASK_KILLED", st


def test_reconcile_explicit_and_implicit():
    with Sim() as sim:
        s = sim.subscribe()
        offers = s.offers()
        s.launch(offers[0], "r-1")
        s.launch(offers[1], "r-2", labels={"mesos-sim/run-seconds": "0"})
        acked_run(s, "r-1", ["TASK_STARTING", "TASK_RUNNING"])
        acked_run(s, "r-2", ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"])
        agent = offers[0]["agent_id"]
        s.ok({"type": "RECONCILE", "reconcile": {"tasks": [
            {"task_id": {"value": "r-1"}},
            {"task_id": {"value": "ghost"}, "agent_id": agent},
            {"task_id": {"value": "ghost2"}},
            {"task_id": {"value": "ghost3"}, "agent_id": {"value": "no-such-agent"}}]}})
        got = {}
        for _ in range(4):
            st = s.next("UPDATE")["update"]["status"]
            assert st["reason"] == "REASON_RECONCILIATION" and st["source"] == "SOURCE_MASTER" and "uuid" not in st
            got[st["task_id"]["value"]] = st["state"]
        assert got == {"r-1": "TASK_RUNNING", "ghost": "TASK_GONE", "ghost2": "TASK_UNKNOWN",
                       "ghost3": "TASK_UNKNOWN"}, got
        # implicit: every task the master knows (r-2 finished and was acknowledged: not known)
        s.ok({"type": "RECONCILE", "reconcile": {"tasks": []}})
        st = s.next("UPDATE")["update"]["status"]
        assert (st["task_id"]["value"], st["state"]) == ("r-1", "TASK_RUNNING"), st
        s.none("UPDATE", 0.5)
        # a framework without PARTITION_AWARE hears TASK_LOST for unknown tasks
        s2 = sim.subscribe(caps=())
        s2.ok({"type": "RECONCILE", "reconcile": {"tasks": [{"task_id": {"value": "ghost"}, "agent_id": agent}]}})
        assert s2.update("ghost")["state"] == "TASK_LOST"


def test_decline_filters_revive_suppress():
    with Sim() as sim:
        s = sim.subscribe()
        offers = s.offers()
        by_agent = {o["agent_id"]["value"]: o for o in offers}
        a0, a1, a2 = sorted(by_agent)
        s.ok({"type": "DECLINE", "decline": {"offer_ids": [by_agent[a0]["id"]], "filters": {"refuse_seconds": 1.5}}})
        s.ok({"type": "DECLINE", "decline": {"offer_ids": [by_agent[a1]["id"]], "filters": {"refuse_seconds": 0}}})
        t0 = time.monotonic()
        o = s.offers(timeout=3)
        assert [x["agent_id"]["value"] for x in o] == [a1], o  # a1 at once, a0 filtered
        o = s.offers(timeout=4)
        assert [x["agent_id"]["value"] for x in o] == [a0], o
        assert time.monotonic() - t0 >= 1.3, "a0 came back before its refuse_seconds"
        # REVIVE drops the filters
        ids = [x["id"] for x in o]
        s.ok({"type": "DECLINE", "decline": {"offer_ids": ids, "filters": {"refuse_seconds": 1000}}})
        s.none("OFFERS", 0.4)
        s.ok({"type": "REVIVE"})
        assert [x["agent_id"]["value"] for x in s.offers(timeout=2)] == [a0]
        # SUPPRESS stops offers (outstanding ones stay valid); REVIVE resumes them
        s.ok({"type": "SUPPRESS", "suppress": {"roles": ["*"]}})
        outstanding = [by_agent[a2]["id"]]
        s.ok({"type": "DECLINE", "decline": {"offer_ids": outstanding, "filters": {"refuse_seconds": 0}}})
        s.none("OFFERS", 0.5)
        s.ok({"type": "REVIVE", "revive": {"roles": ["*"]}})
        assert [x["agent_id"]["value"] for x in s.offers(timeout=2)] == [a2]
        st = hook(sim.port, "state", method="GET")
        assert st["offers_declined"] == 4, st


def test_agent_lost_unreachable_then_gone():
    with Sim() as sim:
        s = sim.subscribe()
        s_lost = sim.subscribe(caps=())  # not partition aware: TASK_LOST
        o = s.offers()[0]
        agent = o["agent_id"]
        s.launch(o, "u-1")
        acked_run(s, "u-1", ["TASK_STARTING", "TASK_RUNNING"])
        # the other framework gets an offer on the same agent too (it has room left)
        o2 = s_lost.offers(timeout=8, pred=lambda ev: any(x["agent_id"] == agent for x in ev["offers"]["offers"]))
        o2 = [x for x in o2 if x["agent_id"] == agent][0]
        s_lost.launch(o2, "u-2")
        acked_run(s_lost, "u-2", ["TASK_STARTING", "TASK_RUNNING"])
        hook(sim.port, "agent-unreachable", {"agent_id": agent["value"]})
        st = s.update("u-1", "TASK_UNREACHABLE")
        assert st["source"] == "SOURCE_MASTER" and "uuid" not in st and st["reason"] == "REASON_SLAVE_REMOVED", st
        assert s.next("FAILURE")["failure"]["agent_id"] == agent
        assert s_lost.update("u-2")["state"] == "TASK_LOST"
        ag = operator(sim.port, {"type": "GET_AGENTS"})["get_agents"]
        assert agent["value"] not in [a["agent_info"]["id"]["value"] for a in ag["agents"]]
        assert [a["id"] for a in ag["unreachable_agents"]] == [agent], ag["unreachable_agents"]
        tasks = operator(sim.port, {"type": "GET_TASKS"})["get_tasks"]
        assert [t["task_id"]["value"] for t in tasks["unreachable_tasks"]] == ["u-1"], tasks
        s.ok({"type": "RECONCILE", "reconcile": {"tasks": [{"task_id": {"value": "u-1"}, "agent_id": agent}]}})
        assert s.update("u-1")["state"] == "TASK_UNREACHABLE"
        # no offers for the agent any more, to either framework
        on_agent = lambda ev: any(x["agent_id"] == agent for x in ev["offers"]["offers"])  # noqa: E731
        s.ok({"type": "REVIVE"})
        s_lost.ok({"type": "REVIVE"})
        s.none("OFFERS", 0.5, pred=on_agent)
        s_lost.none("OFFERS", 0.2, pred=on_agent)
        # the operator marks it gone: the task is GONE_BY_OPERATOR
        operator(sim.port, {"type": "MARK_AGENT_GONE", "mark_agent_gone": {"agent_id": agent}})
        s.ok({"type": "RECONCILE", "reconcile": {"tasks": [{"task_id": {"value": "u-1"}, "agent_id": agent}]}})
        assert s.update("u-1")["state"] == "TASK_GONE_BY_OPERATOR"
        tasks = operator(sim.port, {"type": "GET_TASKS"})["get_tasks"]
        assert tasks["unreachable_tasks"] == [] and tasks["tasks"] == [], tasks


def test_drain_agent():
    with Sim() as sim:
        s = sim.subscribe()
        o = s.offers()[0]
        agent = o["agent_id"]
        s.launch(o, "d-1")
        acked_run(s, "d-1", ["TASK_STARTING", "TASK_RUNNING"])
        operator(sim.port, {"type": "DRAIN_AGENT", "drain_agent": {"agent_id": agent,
                                                                   "max_grace_period": {"seconds": 60}}})
        def drain_state():
            for a in operator(sim.port, {"type": "GET_AGENTS"})["get_agents"]["agents"]:
                if a["agent_info"]["id"] == agent:
                    return a.get("drain_info", {}).get("state")
        assert drain_state() == "DRAINING"
        s.ack(s.update("d-1", "TASK_KILLING"))
        killed = s.update("d-1", "TASK_KILLED")
        assert drain_state() == "DRAINING", "DRAINED waits for the acknowledgement"
        s.ack(killed)
        services.wait_until(lambda: drain_state() == "DRAINED", timeout=5, what="DRAINED")
        s.ok({"type": "REVIVE"})
        s.none("OFFERS", 0.5, pred=lambda ev: any(x["agent_id"] == agent for x in ev["offers"]["offers"]))
        st, text, _ = call(sim.port, {"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": "nope"}}},
                           path="/api/v1")
        assert st == 400 and "Unknown agent" in text, (st, text)
        assert call(sim.port, {"type": "GET_STATE"}, path="/api/v1")[0] == 501  # real, not simulated
        assert call(sim.port, {"type": "NO_SUCH_CALL"}, path="/api/v1")[0] == 400
        assert call(sim.port, {"type": "DRAIN_AGENT"}, path="/api/v1")[0] == 400


def test_errors_a_master_returns():
    with Sim() as sim:
        p = sim.port
        sub = {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework_info()}}
        st, text, h = call(p, None, method="GET", ctype=None)
        assert st == 405 and h.get("allow") == "POST", (st, text, h)
        assert call(p, sub, ctype=None)[:2] == (400, "Expecting 'Content-Type' to be present")
        st, text, _ = call(p, sub, ctype="text/plain")
        assert st == 415, (st, text)
        st, text, _ = call(p, sub, ctype="application/json; charset=utf-8")  # the master compares it whole
        assert st == 415, (st, text)
        st, text, _ = call(p, None, raw=b'{"type":"SUBSCRIBE","subscribe":{"framework_')  # truncated
        assert st == 400 and text.startswith("Failed to parse body into JSON"), (st, text)
        st, text, _ = call(p, None, raw=b"\xff\xfe not json")
        assert st == 400 and text.startswith("Failed to parse body into JSON"), (st, text)
        st, text, _ = call(p, {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u"}}})
        assert st == 400 and "Failed to convert JSON into Call protobuf" in text, (st, text)
        st, text, _ = call(p, {"type": "REVIVE"})
        assert (st, text) == (400, "Failed to validate scheduler::Call: Expecting 'framework_id' to be present")
        st, text, _ = call(p, {"type": "BOGUS", "framework_id": {"value": "x"}})
        assert st == 400, (st, text)
        st, text, _ = call(p, {"type": "REVIVE", "framework_id": {"value": "nobody"}}, stream_id="x")
        assert (st, text) == (400, "Framework cannot be found")
        st, text, _ = call(p, sub, stream_id="abc")
        assert (st, text) == (400, "Subscribe calls should not include the 'Mesos-Stream-Id' header")
        st, text, _ = call(p, sub, accept="application/x-protobuf")
        assert st == 406, (st, text)
        # a body past the bound is refused from its Content-Length, before it is sent
        with socket.create_connection(("127.0.0.1", p), timeout=5) as c:
            c.sendall(b"POST /api/v1/scheduler HTTP/1.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 9437184\r\n\r\n{")
            assert c.recv(100).startswith(b"HTTP/1.1 413")
        st, text, _ = call(p, {}, path="/nope")
        assert st == 404
        # garbage instead of HTTP: 400 and the connection closes
        with socket.create_connection(("127.0.0.1", p), timeout=5) as c:
            c.sendall(b"HELLO\r\n\r\n")
            got = b""
            while True:  # the reply, then the end of the connection (not an idle timeout: 5 s bound)
                d = c.recv(4096)
                if not d:
                    break
                got += d
            assert got.startswith(b"HTTP/1.1 400") and b"Connection: close" in got, got
        s = sim.subscribe(failover=60)
        fid = {"value": s.framework_id}
        st, text, _ = call(p, {"type": "REVIVE", "framework_id": fid})
        assert st == 400 and "Mesos-Stream-Id" in text, (st, text)
        st, text, _ = call(p, {"type": "REVIVE", "framework_id": fid}, stream_id="not-the-stream")
        assert st == 400 and "didn't match the stream ID" in text, (st, text)
        st, text, _ = call(p, {"type": "ACKNOWLEDGE", "framework_id": fid, "acknowledge": {
            "agent_id": {"value": "a"}, "task_id": {"value": "t"}, "uuid": "bm90IGEgdXVpZA=="}}, stream_id=s.stream_id)
        assert st == 400 and "Not a valid UUID" in text, (st, text)
        # the stream drops: the framework is not subscribed any more
        hook(p, "drop-stream", {"framework_id": s.framework_id})
        assert s.ended.wait(5)
        st, text, _ = call(p, {"type": "REVIVE", "framework_id": fid}, stream_id=s.stream_id)
        assert (st, text) == (403, "Framework is not subscribed"), (st, text)
        # every bad call above left the sim serving
        assert hook(p, "state", method="GET")["bad_calls"] >= 3


def test_resubscribe_same_framework_gets_pending_updates():
    with Sim("--update-retry-ms=5000", "--update-retry-max-ms=5000") as sim:
        s = sim.subscribe(failover=60)
        o = s.offers()[0]
        s.launch(o, "f-1")
        starting = s.update("f-1", "TASK_STARTING")  # not acknowledged
        hook(sim.port, "drop-stream", {"framework_id": s.framework_id})
        assert s.ended.wait(5)
        s2 = sim.subscribe(fid=s.framework_id, failover=60)
        assert s2.framework_id == s.framework_id and s2.stream_id != s.stream_id
        # the unacknowledged update comes again on the new stream, at once
        again = s2.update("f-1", "TASK_STARTING", timeout=2)
        assert again["uuid"] == starting["uuid"]
        s2.ack(again)
        s2.ack(s2.update("f-1", "TASK_RUNNING"))
        # the old stream id is refused now
        st, text, _ = call(sim.port, {"type": "REVIVE", "framework_id": {"value": s.framework_id}},
                           stream_id=s.stream_id)
        assert st == 400 and "didn't match" in text
        # a second SUBSCRIBE while connected: the old stream gets ERROR and ends
        s3 = sim.subscribe(fid=s.framework_id, failover=60)
        assert s2.next("ERROR")["error"]["message"] == "Framework failed over"
        assert s2.ended.wait(5)
        s3.ok({"type": "RECONCILE", "reconcile": {"tasks": []}})
        assert s3.update("f-1")["state"] == "TASK_RUNNING"


def test_failover_timeout_and_teardown():
    with Sim() as sim:
        s = sim.subscribe(failover=0.3)
        o = s.offers()[0]
        s.launch(o, "ft-1")
        acked_run(s, "ft-1", ["TASK_STARTING", "TASK_RUNNING"])
        s.close()
        services.wait_until(lambda: operator(sim.port, {"type": "GET_FRAMEWORKS"})["get_frameworks"]["frameworks"]
                            == [], timeout=5, what="the framework removed after its failover timeout")
        assert operator(sim.port, {"type": "GET_TASKS"})["get_tasks"]["tasks"] == []
        # TEARDOWN: 202, the stream ends, the id may not subscribe again
        t = sim.subscribe()
        st, text, _ = t.call({"type": "TEARDOWN"})
        assert st == 202, (st, text)
        assert t.ended.wait(5)
        again = Subscription(sim.port, framework_info(fid=t.framework_id), expect_subscribed=False)
        assert again.status == 200 and again.stream_id
        assert again.next("ERROR")["error"]["message"] == "Framework has been removed"
        assert again.ended.wait(5)
        again.close()


def test_master_failover_redirects():
    with Sim(standby=True) as sim:
        s = sim.subscribe(failover=60)
        o = s.offers()[0]
        s.launch(o, "m-1")
        acked_run(s, "m-1", ["TASK_STARTING", "TASK_RUNNING"])
        st, text, h = call(sim.sport, {"type": "REVIVE", "framework_id": {"value": s.framework_id}})
        assert st == 307 and h["location"] == f"//127.0.0.1:{sim.port}/api/v1/scheduler", (st, h)
        res = hook(sim.port, "failover")
        assert res["leader_port"] == sim.sport
        assert s.ended.wait(5), "the old leader's stream breaks"
        st, text, h = call(sim.port, {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework_info()}})
        assert st == 307 and h["location"] == f"//127.0.0.1:{sim.sport}/api/v1/scheduler", (st, h)
        st, _, h = call(sim.port, {"type": "GET_TASKS"}, path="/api/v1")
        assert st == 307 and h["location"].endswith(f":{sim.sport}/api/v1")
        s2 = sim.subscribe(port=sim.sport, fid=s.framework_id, failover=60)
        assert s2.framework_id == s.framework_id
        s2.ok({"type": "RECONCILE", "reconcile": {"tasks": [{"task_id": {"value": "m-1"}}]}})
        assert s2.update("m-1")["state"] == "TASK_RUNNING"
        assert s2.offers(timeout=3)


def test_records_split_and_merged_across_chunks():
    with Sim("--chunk-bytes=7") as sim:
        s = sim.subscribe()
        offers = s.offers()
        assert len(offers) == 3
        s.launch(offers[0], "c-1")
        acked_run(s, "c-1", ["TASK_STARTING", "TASK_RUNNING"])
        assert s.chunks > 100 and not s.framing_errors  # every record crossed chunk boundaries
    with Sim("--chunk-bytes=65536") as sim:
        s = sim.subscribe()
        # SUBSCRIBED and HEARTBEAT travel in one chunk: both decoded
        s.next("HEARTBEAT", timeout=2)
        assert s.chunks >= 1 and not s.framing_errors


def test_stall_and_inject_hooks():
    with Sim() as sim:
        s = sim.subscribe()
        s.next("HEARTBEAT", timeout=2)
        hook(sim.port, "stall", {"framework_id": s.framework_id, "seconds": 1.2})
        while not s.events.empty():
            s.events.get()
        s.none("HEARTBEAT", 0.9)  # heartbeats every 0.5 s, none while stalled
        s.next("HEARTBEAT", timeout=2)
        hook(sim.port, "inject", {"framework_id": s.framework_id, "data": '20\n{"type":"HEARTBEAT"}'})
        s.next("HEARTBEAT", timeout=2)
        hook(sim.port, "inject", {"framework_id": s.framework_id, "data": "x1\n"})
        assert s.ended.wait(3) or s.framing_errors
        assert s.framing_errors == ["bad record length b'x1'"], s.framing_errors


def test_hostile_bytes_do_not_break_the_master():
    import random
    rnd = random.Random(19)
    with Sim() as sim:
        s = sim.subscribe()
        pieces = [b"POST /api/v1/scheduler HTTP/1.1\r\n", b"Content-Type: application/json\r\n",
                  b"Content-Length: 5\r\n", b"Content-Length: -1\r\n", b"Content-Length: 99999999999999999999\r\n",
                  b"Transfer-Encoding: chunked\r\n", b"Mesos-Stream-Id: " + b"x" * 300 + b"\r\n", b"\r\n",
                  b'{"type":"ACCEPT"}', b"\x00", b"\xff" * 10, b"GET / HTTP/1.0\r\n\r\n", b"A" * 20000]
        for _ in range(200):
            data = b"".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 8)))
            try:
                with socket.create_connection(("127.0.0.1", sim.port), timeout=2) as c:
                    c.sendall(data)
                    c.shutdown(socket.SHUT_WR)
                    c.settimeout(0.5)
                    try:
                        while c.recv(65536):
                            pass
                    except OSError:
                        pass
            except OSError:
                pass
        # calls with every member of the wrong type: 400, never a crash
        bodies = [{"type": "ACCEPT", "framework_id": {"value": s.framework_id}, "accept": v}
                  for v in (1, [], "x", {"offer_ids": 7}, {"offer_ids": [1]}, {"operations": {}},
                            {"offer_ids": [{"value": "x"}], "operations": [{"type": 1}]},
                            {"offer_ids": [{"value": "x"}], "operations": [{"type": "LAUNCH", "launch": 5}]},
                            {"offer_ids": [{"value": "x"}], "operations": [{"type": "LAUNCH",
                                                                            "launch": {"task_infos": [7, {}]}}]})]
        for b in bodies:
            st, text, _ = s.call(b)
            assert st in (202, 400), (b, st, text)
        assert hook(sim.port, "state", method="GET")["frameworks"] == 1
        s.next("HEARTBEAT", timeout=2)  # the stream still flows


run_tests("test_mesos_master_sim", globals())
