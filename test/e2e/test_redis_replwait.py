#!/usr/bin/python3
"""End-to-end (issue #22): an acknowledged write survives a Redis failover,
and a resourceVersion is never handed out twice, when the replica the
Sentinels promote is the one that lagged.

A primary, two replicas and three Sentinels (redis_ha), the first replica
(replica-priority 10: the Sentinels' choice) replicating through a relay
in front of the primary that can hold back what the primary sends it
(redis_ha.HeldLink), and
pelotond's API server with --redis-wait-replicas=1 (the setting
docs/operations.md names). With the link held, ConfigMaps are created: the
other replica has each of them, the promoted one has none. Then the primary
is killed with -9 and the Sentinels promote the lagging replica.

- Every create the API server answered 201 is still there afterwards, and
  the objects created after the failover get resourceVersions above every
  acknowledged one. Before the store waited for every replica connected to
  the primary (WAIT 1 was answered by the replica that was not promoted),
  the held creates were answered 201 and were gone after the failover, and
  the next creates got their resourceVersions again.
- With one of two replicas gone (kill -9), writes are acknowledged again once the
  store has seen the primary's replicas anew (a replica that is not
  connected is not waited for), within a few seconds.
Every wait is bounded; every process is stopped."""
import signal
import time

import redis_ha
import services
from simlib import run_tests

wait_until = services.wait_until
H = redis_ha.start(replicas=2, held_link=True)
PROC, PORT, LOG = services.start_pelotond(1, f"--redis-sentinel={H.sentinels}", f"--redis-master-name={H.name}",
                                          "--redis-wait-replicas=1", "--redis-wait-timeout-ms=1000")
CMS = "/api/v1/namespaces/default/configmaps"


def cm(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


def create_retrying(name, seconds=30):
    """Creates a ConfigMap, retrying a 5xx (no primary yet, or not on the replicas); its resourceVersion."""
    end = time.monotonic() + seconds
    while True:
        code, body = services.api(PORT, "POST", CMS, cm(name), timeout=10)
        if code in (201, 409):
            code, body = services.api(PORT, "GET", f"{CMS}/{name}", timeout=10)
            if code == 200:
                return int(body["metadata"]["resourceVersion"])
        assert code >= 500 or code in (200, 404), (code, body)
        assert time.monotonic() < end, f"{name}: not created in {seconds} s ({code} {body})"
        time.sleep(0.25)


ACKED = {}  # name -> resourceVersion the API server answered 201 with


def test_acked_writes_survive_promoting_the_lagging_replica():
    ACKED["before"] = create_retrying("before")
    H.link.hold()
    answers = []
    for i in range(5):
        code, body = services.api(PORT, "POST", CMS, cm(f"held-{i}"), timeout=10)
        answers.append(code)
        if code == 201:
            ACKED[f"held-{i}"] = int(body["metadata"]["resourceVersion"])
    print(f"with replica0's link held: answers {answers}", flush=True)
    off = {r: redis_ha.info(H.ports[r]).split("slave_repl_offset:")[-1].split()[0] for r in ("replica0", "replica1")}
    print(f"replication offsets before the kill: {off}", flush=True)
    assert int(off["replica0"]) < int(off["replica1"]), f"replica0 did not fall behind: {off}"
    H.procs["primary"].send_signal(signal.SIGKILL)
    H.procs["primary"].wait(10)
    wait_until(lambda: redis_ha.primary(H) not in (None, "primary"), 30, "a replica promoted", every=0.2)
    new = redis_ha.primary(H)
    H.link.release()
    print(f"promoted: {new}", flush=True)
    assert new == "replica0", f"the Sentinels promoted {new}, not the lagging replica0: the case is not exercised"
    after = [create_retrying(f"after-{i}") for i in range(5)]
    lost = [n for n in ACKED if services.api(PORT, "GET", f"{CMS}/{n}", timeout=10)[0] != 200]
    assert not lost, f"acknowledged creates lost by the failover: {lost} (answers {answers})"
    top = max(ACKED.values())
    reused = [rv for rv in after if rv <= top]
    assert not reused, f"resourceVersions after the failover {after} not above the acknowledged {top}"


def test_writes_go_on_without_a_dead_replica():
    # replica0 is the primary now; replica1 follows it, and the old primary, restarted, too (the Sentinels
    # make it a replica)
    H.procs["primary"] = redis_ha.start_primary(H)
    for r in ("replica1", "primary"):
        wait_until(lambda: "master_link_status:up" in redis_ha.info(H.ports[r]), 30, f"{r} following", every=0.2)
    create_retrying("two-replicas")
    time.sleep(1.5)  # the API server has counted both replicas (once a second)
    create_retrying("two-replicas-counted")
    H.procs["replica1"].send_signal(signal.SIGKILL)
    H.procs["replica1"].wait(10)
    t0 = time.monotonic()
    create_retrying("one-gone", seconds=15)
    print(f"a create acknowledged {time.monotonic() - t0:.1f} s after a replica's kill -9", flush=True)


def test_clean_shutdown():
    H.link.stop()
    services.stop_clean(PROC, LOG)


run_tests("redis_replwait", dict(globals()))
