#!/usr/bin/python3
"""End-to-end: pelotond on a Sentinel-managed Redis (store.h, docs/architecture.md
"Roles and processes"). A primary, two replicas and three Sentinels (all real
redis-server processes on 127.0.0.1), pelotond with every role given only
the Sentinels and acknowledging a write once one replica has it
(--redis-wait-replicas=1), and kubelet-sim with two nodes:
- pods created through the primary run;
- the primary is killed with -9: the Sentinels promote a replica, and
  pelotond follows: the earlier objects are there, new pods are created (a
  write not yet on a replica is answered 5xx and retried), a watch opened
  before the failover sees each new pod once (re-watching from its last
  resourceVersion if its stream ends);
- the old primary comes back (the Sentinels make it a replica): pelotond
  keeps writing to the new primary, and pods created then are scheduled and
  run.
The pods created right after the failover run too: the controllers' new
terms start their roles again, and placement's pod informer, joining a
keys-only feed that had listed already, gets a feed of its own (it used to
get keys without objects, found the pods "not in the cache" and dropped
their gangs: 6 of 12 Running).
Every wait is bounded; every process is stopped."""
import http.client
import json
import os
import subprocess
import threading
import time

import services
from redis_ha import redis_cmd, start_server
from simlib import run_tests

wait_until = services.wait_until
NAME = "peloton"


PORTS = {k: services.free_port() for k in ("primary", "replica", "replica2", "s1", "s2", "s3")}
DIRS = {k: services.tempdir() for k in PORTS}
PRIMARY = start_server(PORTS["primary"], DIRS["primary"])
REPLICA = start_server(PORTS["replica"], DIRS["replica"], "--replicaof", "127.0.0.1", str(PORTS["primary"]),
                       "--replica-priority", "10")  # the one the Sentinels promote
REPLICA2 = start_server(PORTS["replica2"], DIRS["replica2"], "--replicaof", "127.0.0.1", str(PORTS["primary"]),
                        "--replica-priority", "100")
SENTINELS = []
for s in ("s1", "s2", "s3"):
    conf = os.path.join(DIRS[s], "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {PORTS[s]}\nbind 127.0.0.1\ndir {DIRS[s]}\n"
                f"sentinel monitor {NAME} 127.0.0.1 {PORTS['primary']} 2\n"
                f"sentinel down-after-milliseconds {NAME} 1000\n"
                f"sentinel failover-timeout {NAME} 5000\n"
                f"sentinel parallel-syncs {NAME} 1\n")
    p = subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=open(os.path.join(DIRS[s], "log"), "w"),
                         stderr=subprocess.STDOUT)
    services._procs.append(p)
    SENTINELS.append(p)
    services.wait_for(lambda: "PONG" in redis_cmd(PORTS[s], "PING"), what="sentinel")
for r in ("replica", "replica2"):
    wait_until(lambda: "master_link_status:up" in redis_cmd(PORTS[r], "INFO", "replication"), 30, "the replicas in sync")

SENT = ",".join(f"127.0.0.1:{PORTS[s]}" for s in ("s1", "s2", "s3"))
# --redis names a port nothing listens on: every connection must come from the Sentinels. The roles' leases are
# 3 s, not 10: a term that ended with the failover begins again once its own lease key, replicated to the new
# primary, has run out (the pods created after the failover waited for that)
PROC, PORT, LOG = services.start_pelotond(1, "--roles=all", f"--redis-sentinel={SENT}", f"--redis-master-name={NAME}",
                                          "--redis-wait-replicas=1", "--redis-wait-timeout-ms=1000", "--lease-ms=3000")
KUBECONFIG = services.kubeconfig(PORT)
SIM, _ = services.start_kubelet_sim(KUBECONFIG, "--nodes=2", "--name-prefix=sn-", expect=2)


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"t": "sn"}},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}


def create(name, attempts=40):
    """Creates a pod, retrying a 5xx (the store mid-failover answers 500/503, as an API server does)."""
    for _ in range(attempts):
        code, body = services.api(PORT, "POST", "/api/v1/namespaces/default/pods", pod(name))
        if code == 201:
            return
        assert code >= 500 or code == 409, (code, body)
        if code == 409:
            return
        time.sleep(0.25)
    assert False, f"pod {name} not created"


def phases():
    code, body = services.api(PORT, "GET", "/api/v1/namespaces/default/pods?labelSelector=t%3Dsn")
    assert code == 200, body
    return {p["metadata"]["name"]: p["status"].get("phase") for p in body["items"]}


SEEN = []  # pod names in ADDED events, in order
WATCH_RV = {"rv": None}
STOP = threading.Event()


def watcher():
    """A pods watch that, when its stream ends, watches again from the last resourceVersion it saw."""
    while not STOP.is_set():
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
        try:
            q = f"&resourceVersion={WATCH_RV['rv']}" if WATCH_RV["rv"] else ""
            c.request("GET", f"/api/v1/namespaces/default/pods?watch=1&labelSelector=t%3Dsn{q}")
            r = c.getresponse()
            if r.status != 200:
                time.sleep(0.2)
                continue
            while not STOP.is_set():
                line = r.readline()
                if not line:
                    break
                ev = json.loads(line)
                if ev["type"] == "ERROR":
                    WATCH_RV["rv"] = None  # 410: list again (not expected here)
                    SEEN.append("410")
                    break
                WATCH_RV["rv"] = ev["object"]["metadata"]["resourceVersion"]
                if ev["type"] == "ADDED":
                    SEEN.append(ev["object"]["metadata"]["name"])
        except (OSError, http.client.HTTPException, ValueError):
            time.sleep(0.2)
        finally:
            c.close()


def test_pods_run_through_the_primary_the_sentinels_name():
    assert "primary from Sentinel" in open(LOG).read()
    for i in range(6):
        create(f"before-{i}")
    wait_until(lambda: list(phases().values()).count("Running") == 6, 30, "6 pods Running")
    threading.Thread(target=watcher, daemon=True).start()
    time.sleep(0.5)


def test_failover_to_the_replica_is_followed():
    wait_until(lambda: redis_cmd(PORTS["replica"], "DBSIZE") == redis_cmd(PORTS["primary"], "DBSIZE"), 10,
               "the replica holding what the primary holds")
    PRIMARY.kill()
    PRIMARY.wait(10)
    t0 = time.monotonic()
    wait_until(lambda: str(PORTS["replica"]) in redis_cmd(PORTS["s1"], "SENTINEL", "get-master-addr-by-name", NAME)
               and "role:master" in redis_cmd(PORTS["replica"], "INFO", "replication"), 30, "the replica promoted")
    promoted = time.monotonic() - t0
    for i in range(6):
        create(f"after-{i}")
    first_write = time.monotonic() - t0
    try:
        wait_until(lambda: list(phases().values()).count("Running") == 12, 30, "the six new pods Running too")
    except AssertionError:
        code, body = services.api(PORT, "GET", "/api/v1/namespaces/default/pods?labelSelector=t%3Dsn")
        for p in body.get("items", []):
            print(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"),
                  [(c["type"], c["status"], c.get("reason")) for c in p["status"].get("conditions", [])])
        print("".join(line for line in open(LOG) if "redis:" not in line)[-5000:])
        raise
    running = time.monotonic() - t0
    print(f"failover: replica promoted after {promoted:.1f} s, the six creates through pelotond done after "
          f"{first_write:.1f} s, all 12 pods Running after {running:.1f} s")
    assert sorted(phases()) == sorted([f"before-{i}" for i in range(6)] + [f"after-{i}" for i in range(6)])
    wait_until(lambda: all(f"after-{i}" in SEEN for i in range(6)), 15, "the watch sees the new pods")
    news = [n for n in SEEN if n.startswith("after-")]
    assert sorted(news) == sorted(set(news)) and len(news) == 6, SEEN  # each once
    assert "410" not in SEEN, SEEN


def test_the_old_primary_back_as_a_replica_is_not_written_to():
    global PRIMARY
    PRIMARY = start_server(PORTS["primary"], DIRS["primary"])
    wait_until(lambda: "role:slave" in redis_cmd(PORTS["primary"], "INFO", "replication"), 30,
               "the old primary made a replica by the Sentinels")
    for i in range(3):
        create(f"later-{i}")
    # pods created once the failover has settled are scheduled and run
    wait_until(lambda: all(phases().get(f"later-{i}") == "Running" for i in range(3)), 30, "the later pods Running")


def test_clean_shutdown():
    STOP.set()
    services.stop(SIM)
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]


run_tests("redis-sentinel", dict(globals()))
