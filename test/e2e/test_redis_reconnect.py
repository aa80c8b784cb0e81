#!/usr/bin/python3
"""End-to-end: the resource manager keeps no admitted gang only in its memory
across a broken Redis connection (src/ctl/resmgr.c, docs/architecture.md
"Redis behind Sentinel"). Its queue writes are deferred to the end of a loop
turn; those sent on a connection that breaks may be lost, as in a failover
inside the lease. pelotond runs the API server and the resource manager (no
placement, so admitted gangs stay in the ready queue; no leases, so no new
term hides what is tested):
- a pod is admitted: its gang is in the ready queue;
- the queue is emptied (a write lost) and every client connection killed
  (CLIENT KILL): when the resource manager's next command finds its
  connection broken, it connects again and rebuilds its gangs from Redis
  and the pods, as at a new term: both the pod admitted before and one
  created after are in the ready queue again;
- a placement engine that took a gang off the ready queue and died before
  binding it (the test takes it off with LREM): after --ready-timeout-ms
  (2 s here) the resource manager finds the gang admitted, unbound and in
  no queue, and readies it again, once; gangs still queued are left alone.
Every wait is bounded; every process is stopped."""
import time

import services
from services import redis_cmd
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=apiserver,resmgr", "--leader-elect=false",
                                          "--ready-timeout-ms=2000")
wait_until = services.wait_until
READY = "peloton:ready"


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"t": "rc"}},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def create(name):
    code, body = services.api(PORT, "POST", "/api/v1/namespaces/default/pods", pod(name))
    assert code == 201, (code, body)


def ready():
    return redis_cmd(REDIS, "LRANGE", READY, "0", "-1").split()


def test_a_pod_is_admitted_into_the_ready_queue():
    create("rc-1")
    wait_until(lambda: "default/pod:rc-1" in ready(), 15, "rc-1's gang in the ready queue")


def test_a_broken_connection_rebuilds_what_was_admitted():
    assert redis_cmd(REDIS, "DEL", READY) == "1"
    killed = int(redis_cmd(REDIS, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"))
    assert killed >= 1, killed
    create("rc-2")  # the API server's store connects again; the resource manager's next write finds its broken
    wait_until(lambda: {"default/pod:rc-1", "default/pod:rc-2"} <= set(ready()), 15,
               "both gangs in the ready queue again")
    assert "resmgr: redis connection renewed, rebuilding" in open(LOG).read()
    assert sorted(ready()) == ["default/pod:rc-1", "default/pod:rc-2"], ready()  # once each


def test_a_gang_taken_by_a_dead_engine_is_readied_again():
    create("rc-3")
    wait_until(lambda: "default/pod:rc-3" in ready(), 15, "rc-3's gang in the ready queue")
    assert redis_cmd(REDIS, "LREM", READY, "0", "default/pod:rc-3") == "1"  # popped, never bound nor retried
    t0 = time.monotonic()
    wait_until(lambda: "default/pod:rc-3" in ready(), 10, "rc-3's gang readied again")
    took = time.monotonic() - t0
    assert 0.5 <= took <= 5.0, took  # after the timeout, not at once
    assert "resmgr: admitted gangs in no queue, readied again" in open(LOG).read()
    time.sleep(2.5)  # another timeout: the gangs in the queue are not pushed again
    assert sorted(ready()) == ["default/pod:rc-1", "default/pod:rc-2", "default/pod:rc-3"], ready()


def test_clean_shutdown():
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]
    assert "Sanitizer" not in open(LOG).read()


run_tests("redis-reconnect", globals())
