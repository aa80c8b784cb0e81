#!/usr/bin/python3
"""End-to-end: fencing (docs/lifecycle.md, "Fencing and claims"). pelotond
(every role) on a real redis-server with a 15 s lease (renewed every 5 s;
the test begins the newer term just after a renewal, so that none falls in
its window), kubelet-sim with one node:
- a newer resource-manager term begins elsewhere (the test does what a new
  holder does: takes the lease key and increments peloton:resmgr:epoch);
  the old holder's next Redis write is refused by the fence script, logged
  and counted, nothing it wrote after that is in Redis, its term ends and
  its pods are not admitted; once the lease is free again it takes a new
  term and they run;
- the API server refuses a stale write: a PATCH whose body carries an old
  metadata.resourceVersion, and a DELETE whose preconditions name another
  uid or resourceVersion, get 409 Conflict in Kubernetes' words.
Every wait is bounded; every process is stopped."""
import json
import time
import urllib.error
import urllib.request

import services
from simlib import run_tests

REDIS = services.start_redis()
LEASE_MS = 15000  # a term is retried every third of it: the new term below comes within 5 s
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", f"--lease-ms={LEASE_MS}")
KUBECONFIG = services.kubeconfig(PORT)
SIM, SIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=1", "--name-prefix=fence-", "--cpu=8", expect=1)
wait_until = services.wait_until


def redis(*args):
    return services.redis_call(REDIS, *args)


def log():
    return open(LOG).read()


def kubectl(*args, check=True):
    return services.kubectl(KUBECONFIG, *args, check=check)


def pod(name, pool):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"peloton.io/resource-pool": pool, "t": "fence"}},
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}


def phase(name):
    try:
        return json.loads(kubectl("get", "pod", name, "-o", "json", check=False) or "{}").get("status", {}).get("phase")
    except ValueError:
        return None


def refused_metric():
    text = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith('peloton_lease_writes_refused_total{role="resmgr"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_stale_resource_managers_writes_are_refused_and_it_stops():
    wait_until(lambda: 'msg="resmgr: leader"' in log(), 15, "resmgr to lead")
    services.kubectl_apply(KUBECONFIG, [{"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool",
                                         "metadata": {"name": "fence"},
                                         "spec": {"resources": [{"kind": "cpu", "reservation": "4", "limit": "8",
                                                                 "share": 1}]}}])
    services.kubectl_apply(KUBECONFIG, [pod("before", "fence")])
    wait_until(lambda: phase("before") == "Running", 30, "a pod admitted and placed in the first term")
    epoch = int(redis("GET", "peloton:resmgr:epoch"))
    # the old holder's next renewal (a third of the lease after the last) must not come before its next write:
    # a renewal would find the key taken and end the term before any write was refused. So the newer term
    # begins within 2 s of a renewal (the key's TTL back near the whole lease), and the pods come at once
    wait_until(lambda: redis("PTTL", "peloton:resmgr:leader") >= LEASE_MS - 2000, LEASE_MS / 1000,
               "a renewal of the lease", every=0.02)
    # a newer term elsewhere, as a new holder makes it: the lease key, then the epoch
    assert redis("SET", "peloton:resmgr:leader", "someone-else", "PX", "60000") == "OK"
    assert redis("INCR", "peloton:resmgr:epoch") == epoch + 1
    before = set(redis("KEYS", "peloton:*"))
    refused0 = refused_metric()
    for name in ("after-1", "after-2"):
        st, body = api("POST", "/api/v1/namespaces/default/pods", pod(name, "fence"), "application/json")
        assert st == 201, (st, body)
    wait_until(lambda: 'msg="resmgr: write refused, stale epoch"' in log(), 15, "the refusal logged")
    line = next(x for x in log().splitlines() if 'msg="resmgr: write refused, stale epoch"' in x)
    assert f"epoch={epoch} held={epoch + 1}" in line, line
    wait_until(lambda: 'msg="resmgr: lost the lease" epoch=%d reason=stale-epoch' % epoch in log(), 5,
               "the old term ended")
    assert refused_metric() > refused0
    time.sleep(1.5)  # rounds that would admit them (every 20 ms) and placement ticks pass
    # nothing the old term wrote after the epoch moved on is in Redis
    new_keys = set(redis("KEYS", "peloton:*")) - before
    assert not new_keys, new_keys
    assert not [k for k in redis("KEYS", "peloton:gang:*") if "after" in k]
    assert redis("EXISTS", "peloton:pending:fence") == 0
    assert phase("after-1") == "Pending" and phase("after-2") == "Pending"
    assert log().count('msg="resmgr: write refused, stale epoch"') == 1  # one line a term; the metric counts
    # the other holder goes away: the lease is free, a new term (epoch + 2) admits them
    redis("DEL", "peloton:resmgr:leader")
    wait_until(lambda: 'msg="resmgr: leader" epoch=%d' % (epoch + 2) in log(), 30, "a new term")
    wait_until(lambda: phase("after-1") == "Running" and phase("after-2") == "Running", 30, "the pods running")
    assert redis("HGET", "peloton:gang:default/pod:after-1", "epoch") in (None, str(epoch + 2))


def api(method, path, body=None, ctype="application/merge-patch+json"):
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_the_api_server_refuses_stale_writes_with_409():
    services.kubectl_apply(KUBECONFIG, [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fence-cm"},
                                         "data": {"a": "1"}}])
    st, cm = api("GET", "/api/v1/namespaces/default/configmaps/fence-cm")
    rv, uid = cm["metadata"]["resourceVersion"], cm["metadata"]["uid"]
    st, cm2 = api("PATCH", "/api/v1/namespaces/default/configmaps/fence-cm",
                  {"metadata": {"resourceVersion": rv}, "data": {"a": "2"}})
    assert st == 200, (st, cm2)
    # the same decision again, made from the old copy: refused
    st, s = api("PATCH", "/api/v1/namespaces/default/configmaps/fence-cm",
                {"metadata": {"resourceVersion": rv}, "data": {"a": "3"}})
    assert st == 409 and s["reason"] == "Conflict" and s["code"] == 409, (st, s)
    assert s["message"] == ('Operation cannot be fulfilled on configmaps "fence-cm": the object has been modified; '
                            'please apply your changes to the latest version and try again'), s
    # a strategic-merge patch of a pod's status with an old resourceVersion too
    st, p = api("GET", "/api/v1/namespaces/default/pods/before")
    old = p["metadata"]["resourceVersion"]
    kubectl("annotate", "pod", "before", "fence=1")
    st, s = api("PATCH", "/api/v1/namespaces/default/pods/before/status",
                {"metadata": {"resourceVersion": old}, "status": {"phase": "Failed"}},
                "application/strategic-merge-patch+json")
    assert st == 409 and s["reason"] == "Conflict", (st, s)
    assert phase("before") == "Running"
    # a DELETE whose preconditions do not hold
    st, s = api("DELETE", "/api/v1/namespaces/default/configmaps/fence-cm",
                {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-" + uid}},
                "application/json")
    assert st == 409 and s["reason"] == "Conflict", (st, s)
    assert s["message"] == (f'Operation cannot be fulfilled on configmaps "fence-cm": Precondition failed: '
                            f'UID in precondition: not-{uid}, UID in object meta: {uid}'), s
    st, s = api("DELETE", "/api/v1/namespaces/default/configmaps/fence-cm",
                {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": rv}},
                "application/json")
    assert st == 409 and s["reason"] == "Conflict", (st, s)
    st, s = api("DELETE", "/api/v1/namespaces/default/configmaps/fence-cm",
                {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}, "application/json")
    assert st == 200, (st, s)


def test_clean_shutdown():
    kubectl("delete", "pods", "-l", "t=fence", "--wait=false")
    services.stop(SIM)
    assert services.stop(PROC) == 0, log()[-3000:]


run_tests("fencing", dict(globals()))
