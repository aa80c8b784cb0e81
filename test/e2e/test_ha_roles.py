#!/usr/bin/python3
"""End-to-end: several pelotonds run the controller roles on one Redis, and
each singleton role (the job manager, the host manager, the resource
manager) acts in exactly one of them at a time (src/ctl/ctl_lease.h,
docs/architecture.md, "Roles and processes"). One API server (pelotond --roles=apiserver),
kubelet-sim with 4 nodes, and controller processes A, B (and C) with a
3 s lease:
- one holder per role (placement too: two engines acting at once could
  commit the same free capacity); a BATCH Job runs each instance once;
- the job manager's holder killed with -9: another takes its roles within
  the lease and the next Job runs;
- the holder stopped cleanly: it hands its leases over at once (well
  before a lease could run out);
- the holder paused (SIGSTOP) past its lease: another takes over; resumed,
  the old holder says its term ended and does not act again.
Every wait is bounded; every process is stopped."""
import json
import os
import signal
import subprocess
import time

import services
from simlib import run_tests

LEASE_MS = 3000
REDIS = services.start_redis()
API_PROC, PORT, API_LOG = services.start_pelotond(REDIS, "--roles=apiserver")
KUBECONFIG = services.kubeconfig(PORT)
SIM, SIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=4", "--name-prefix=ha-", expect=4)
wait_until = services.wait_until
CTL = {}  # name -> (process, log path)
ROLES = ("jobmgr", "hostmgr", "resmgr", "placement")
EXTRA = os.environ.get("HA_CTL_FLAGS", "").split()  # e.g. --placement-active-active, to see the test fail


def start_ctl(name):
    d = services.tempdir()
    log = os.path.join(d, f"{name}.log")
    p = subprocess.Popen([services.PELOTOND, "--roles=resmgr,placement,jobmgr,hostmgr",
                          f"--server=http://127.0.0.1:{PORT}", f"--redis=127.0.0.1:{REDIS}",
                          f"--lease-ms={LEASE_MS}", *EXTRA], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    services._procs.append(p)
    CTL[name] = (p, log)
    wait_until(lambda: "controllers running" in open(log).read() or p.poll() is not None, 15, f"{name} to start")
    assert p.poll() is None, open(log).read()
    return p


def log_of(name):
    return open(CTL[name][1]).read()


def terms(name, role):
    """How many terms name began and ended for role, from its log."""
    text = log_of(name)
    return text.count(f'msg="{role}: leader"'), (text.count(f'msg="{role}: lost the lease"') +
                                                  text.count(f'msg="{role}: released the lease"'))


def holders(role):
    """The live processes whose current term of role has begun and not ended."""
    out = []
    for name, (p, _) in CTL.items():
        began, ended = terms(name, role)
        if p.poll() is None and began > ended:
            out.append(name)
    return out


def kubectl(*args, check=True):
    return services.kubectl(KUBECONFIG, *args, check=check)


def pool(name):
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name},
            "spec": {"resources": [{"kind": "cpu", "reservation": "8", "limit": "16", "share": 1}]}}


def batch_job(name, n):
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"type": "BATCH", "resourcePool": "ha", "instanceCount": n,
                     "template": {"metadata": {"labels": {"t": name},
                                               "annotations": {"kubelet-sim.peloton.io/run-seconds": "1"}},
                                  "spec": {"containers": [{"name": "c", "image": "x",
                                                           "resources": {"requests": {"cpu": "500m"}}}]}}}}


def job_state(name):
    out = kubectl("get", "jobs.peloton.io", name, "-o", "json", check=False)
    try:
        return json.loads(out).get("status", {}).get("state")
    except ValueError:
        return None


def run_job(name, n, timeout=60):
    services.kubectl_apply(KUBECONFIG, [batch_job(name, n)])
    wait_until(lambda: job_state(name) == "SUCCEEDED", timeout, f"job {name} SUCCEEDED")
    pods = json.loads(kubectl("get", "pods", "-l", f"t={name}", "-o", "json"))["items"]
    names = sorted(p["metadata"]["name"] for p in pods)
    # each instance ran once: one pod per instance, none re-run by a second job manager
    assert names == sorted(f"{name}-{i}" for i in range(n)), names


def test_one_holder_per_role():
    start_ctl("a")
    start_ctl("b")
    for role in ROLES:
        wait_until(lambda: len(holders(role)) == 1, 10, f"one {role} holder")
    time.sleep(LEASE_MS / 1000 * 2)  # renewals hold: nobody else gets it meanwhile
    for role in ROLES:
        assert len(holders(role)) == 1, (role, log_of("a")[-2000:], log_of("b")[-2000:])
        for name in CTL:
            assert terms(name, role)[0] <= 1, (name, role, log_of(name)[-2000:])
    services.kubectl_apply(KUBECONFIG, [pool("ha")])
    run_job("first", 6)


def test_kill_9_of_the_holder_hands_over_within_the_lease():
    leader = holders("jobmgr")[0]
    other = next(n for n in CTL if n != leader)
    p = CTL[leader][0]
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    t0 = time.monotonic()
    wait_until(lambda: holders("jobmgr") == [other], LEASE_MS / 1000 + 5, "the job manager taken over")
    took = time.monotonic() - t0
    assert took <= LEASE_MS / 1000 + 2, took  # the lease ran out, then one renewal period at most
    for role in ROLES:
        wait_until(lambda: holders(role) == [other], LEASE_MS / 1000 + 5, f"{role} taken over")
    print(f"kill -9: the job manager's lease taken over after {took:.2f} s (lease {LEASE_MS} ms)")
    run_job("second", 4)


def test_a_clean_stop_hands_over_at_once():
    start_ctl("c")
    leader = holders("jobmgr")[0]
    assert leader != "c"
    t0 = time.monotonic()
    assert services.stop(CTL[leader][0]) == 0, log_of(leader)[-2000:]
    wait_until(lambda: holders("jobmgr") == ["c"], 5, "c holds the job manager")
    took = time.monotonic() - t0
    assert terms(leader, "jobmgr")[1] >= 1 and 'msg="jobmgr: released the lease"' in log_of(leader)
    # the successor's next attempt, not the lease's end: a third of the lease at most, plus the stop
    assert took < LEASE_MS / 1000 * 0.9, took
    print(f"clean stop: taken over after {took:.2f} s (lease {LEASE_MS} ms)")
    run_job("third", 3)


def test_a_paused_holder_loses_its_term_and_does_not_act():
    start_ctl("d")
    leader = holders("jobmgr")[0]
    other = "d" if leader != "d" else next(n for n, (p, _) in CTL.items() if p.poll() is None and n != "d")
    p = CTL[leader][0]
    p.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: other in holders("jobmgr"), LEASE_MS / 1000 + 5, "the job manager taken over")
    finally:
        p.send_signal(signal.SIGCONT)
    wait_until(lambda: 'msg="jobmgr: lost the lease"' in log_of(leader), 5, "the old holder's term ended")
    assert "reason=late" in log_of(leader) or "reason=renewal refused" in log_of(leader)
    assert holders("jobmgr") == [other], holders("jobmgr")
    run_job("fourth", 3)


def test_clean_shutdown():
    for name, (p, log) in CTL.items():
        if p.poll() is None:
            assert services.stop(p) == 0, open(log).read()[-2000:]
    services.stop(SIM)
    assert services.stop(API_PROC) == 0, open(API_LOG).read()[-2000:]


run_tests("ha-roles", dict(globals()))
