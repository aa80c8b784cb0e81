#!/usr/bin/python3
# run.sh: alone (it bounds wall-clock times)
"""End-to-end: kubelet-sim renews its Leases on their own path, so that a
backlog of pod status writes never delays a renewal (a Kubelet's heartbeat
client is apart from its status writes; issue #25).

30,000 pods bound to kubelet-sim's two nodes are written straight into Redis
in the store's layout (docs/store.md) before pelotond starts; kubelet-sim
starts with --max-inflight=1, so every pod's first status write queues
behind the others: thousands queued for many seconds. While its stats say
so, the Leases are read every 100 ms: each must be renewed at least every
2.5 s (--renew-seconds=1). The old kubelet-sim sent renewals through the
same queue: a renewal waited for the whole backlog (KUBELET_SIM naming the
old binary: no renewal for the length of the backlog)."""
import http.client
import json
import re
import time

import services
import storefill
from simlib import run_tests

N = 30000
NODES = 2
REDIS = services.start_redis(fsync="everysec")


def pod(i, rv):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"q{i:05d}", "namespace": "default", "uid": f"00000000-0000-4000-8000-{i:012d}",
                         "resourceVersion": str(rv), "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": f"lsim-{i % NODES}", "schedulerName": "default-scheduler",
                     "containers": [{"name": "c", "image": "registry.example/app:1.0"}]},
            "status": {"phase": "Pending"}}


def fill():
    storefill.fill_pods(REDIS, [pod(i, i + 1) for i in range(N)])


fill()
PROC, PORT, LOG = services.start_pelotond(REDIS)
KUBECONFIG = services.kubeconfig(PORT)


def renew_time(node):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    c.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")
    r = c.getresponse()
    body = r.read()
    return json.loads(body)["spec"]["renewTime"] if r.status == 200 else None


def queued(err):
    """The last stats line's queued= (kubelet-sim --verbose prints one every 2 s), or None."""
    q = re.findall(r"level=info pods=(\d+) .* queued=(\d+) ", open(err).read())
    return (int(q[-1][0]), int(q[-1][1])) if q else None


def test_renewals_go_out_while_thousands_of_status_writes_wait():
    sim, err = services.start_kubelet_sim(KUBECONFIG, f"--nodes={NODES}", "--name-prefix=lsim-", "--cpu=100000",
                                          "--memory=100000Gi", "--pods=100000", "--max-inflight=1",
                                          "--lease-seconds=10", "--renew-seconds=1", "--status-seconds=60",
                                          "--events=false", "--verbose", expect=NODES)
    try:
        services.wait_until(lambda: (queued(err) or (0, 0))[1] >= 2000, 90, "thousands of status writes queued")
    except AssertionError:
        print(open(err).read()[-3000:])
        raise
    start_q = queued(err)
    seen = {f"lsim-{i}": [] for i in range(NODES)}  # (time, renewTime) at each change
    # watched for 6 s, or while the backlog lasts (a quiet machine drains it
    # sooner): the window ends when the stats say fewer than 1,000 are queued
    t0 = time.monotonic()
    end_q = start_q
    while time.monotonic() - t0 < 6:
        for node, changes in seen.items():
            rt = renew_time(node)
            if rt and (not changes or changes[-1][1] != rt):
                changes.append((time.monotonic(), rt))
        end_q = queued(err) or end_q
        if end_q[1] < 1000:
            break
        time.sleep(0.1)
    t1 = time.monotonic()
    load = open("/proc/loadavg").read().split()[:3]
    gaps = {}
    for node, changes in seen.items():
        times = [t0] + [t for t, _ in changes] + [t1]
        gaps[node] = max(b - a for a, b in zip(times, times[1:]))
    print(f"status writes queued: {start_q[1]} -> {end_q[1]} (pods {end_q[0]}) in {t1 - t0:.1f} s; longest wait for "
          "a renewal: " + ", ".join(f"{n} {g:.2f} s ({len(seen[n])} renewals)" for n, g in gaps.items())
          + f" (load {' '.join(load)})", flush=True)
    # three renewal periods at least, or the test could not tell a renewal
    # held behind the backlog from one on time
    assert t1 - t0 >= 3.0, f"the backlog lasted {t1 - t0:.1f} s only: too short to tell"
    for node, g in gaps.items():
        assert g <= 2.5, f"{node}'s lease went {g:.2f} s without a renewal while status writes were queued"
    sim.send_signal(2)
    assert sim.wait(30) == 0, open(err).read()[-2000:]


try:
    run_tests("test_kubelet_sim_lease", globals())
finally:
    services.stop_all()
