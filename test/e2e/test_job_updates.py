#!/usr/bin/python3
"""End-to-end: rolling updates and restart backoff of service Jobs (issue #16
items 6 and 7). pelotond with every role on a real redis-server, kubelet-sim's
Kubelets, driven with real kubectl:
- an update to a template whose containers crash a few seconds after they
  start is a failure (the instance never stays Running for minReadySeconds),
  rolled back with rollbackOnFailure, FAILED without;
- a crash-looping instance is restarted with a growing backoff (immediately,
  then 10 s, 20 s, ...), shown in status.backoff and BackOff Events;
- an update is paused, resumed and aborted from kubectl
  (spec.updateStrategy.paused, the annotation peloton.io/update-abort), its
  state and progress in status.update, `kubectl get pj` and Events."""
import json
import os
import subprocess
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all")
KUBECONFIG = services.kubeconfig(PORT)
KS = services.start_kubelet_sim(KUBECONFIG, "--nodes=4", "--name-prefix=u-", "--cpu=8", "--memory=32Gi",
                                expect=4)[0]
RUN = "kubelet-sim.peloton.io/run-seconds"
EXIT = "kubelet-sim.peloton.io/exit-code"
wait_until = services.wait_until


def kubectl(*args, stdin=None, check=True):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin, check=check)


def apply(objs):
    services.kubectl_apply(KUBECONFIG, objs)


def pool(name):
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name},
            "spec": {"resources": [{"kind": "cpu", "reservation": "4", "limit": "32", "share": 1}]}}


def job(name, n, tag, strategy=None, run=None, exit_code=None):
    ann = {}
    if run is not None:
        ann[RUN] = str(run)
    if exit_code is not None:
        ann[EXIT] = str(exit_code)
    spec = {"type": "STATELESS", "resourcePool": "upd", "instanceCount": n,
            "template": {"metadata": {"labels": {"t": name, "tag": tag}, "annotations": ann},
                         "spec": {"containers": [{"name": "c", "image": "x",
                                                  "resources": {"requests": {"cpu": "250m"}}}]}}}
    if strategy is not None:
        spec["updateStrategy"] = strategy
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def pods(name):
    return json.loads(kubectl("get", "pods", "-l", f"peloton.io/job={name}", "-o", "json"))["items"]


def running_tags(name):
    """tag -> number of Running pods (not being deleted) with it."""
    out = {}
    for p in pods(name):
        if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
            tag = p["metadata"]["labels"].get("tag")
            out[tag] = out.get(tag, 0) + 1
    return out


def job_obj(name):
    return json.loads(kubectl("get", "jobs.peloton.io", name, "-o", "json"))


def update_status(name):
    return job_obj(name).get("status", {}).get("update", {})


def events(name):
    return services.events(KUBECONFIG, name=name, kind="Job")


def reasons(name):
    return [e["reason"] for e in events(name)]


def delete(name):
    kubectl("delete", "jobs.peloton.io", name, "--wait=false")
    wait_until(lambda: not pods(name), 60, f"{name}'s pods deleted")


apply([pool("upd")])


def test_update_to_a_template_that_crashes_after_start_rolls_back():
    # before: each new-template pod counted as updated the moment it was Running,
    # the update ended SUCCEEDED (or hung) and the job crash-looped on the new template
    strategy = {"batchSize": 1, "maxFailureInstances": 1, "rollbackOnFailure": True}  # default minReadySeconds
    apply([job("crashy", 3, "good", strategy)])
    wait_until(lambda: running_tags("crashy").get("good") == 3, 60, "crashy running")
    apply([job("crashy", 3, "bad", strategy, run=3, exit_code=1)])  # Running 3 s, then exits 1
    seen = set()

    def ended():  # the Update condition's reason is the update's state
        conds = job_obj("crashy").get("status", {}).get("conditions", [])
        reason = next((c.get("reason") for c in conds if c.get("type") == "Update"), None)
        seen.add(reason)
        return reason in ("SUCCEEDED", "FAILED", "ROLLED_BACK", "ABORTED") and reason
    assert wait_until(ended, 150, "the update to end", every=0.5) == "ROLLED_BACK", seen
    assert "ROLLING_BACKWARD" in seen, seen
    st = update_status("crashy")
    assert st["state"] == "ROLLED_BACK", st
    assert st["instancesFailed"] >= 1 and st["progress"].endswith("failed"), st
    wait_until(lambda: running_tags("crashy") == {"good": 3}, 90, "crashy back to 3 good instances")
    cond = [c for c in job_obj("crashy")["status"]["conditions"] if c["type"] == "Update"][0]
    assert cond["reason"] == "ROLLED_BACK" and cond["status"] == "False", cond
    rs = reasons("crashy")
    assert "UpdateStarted" in rs and "UpdateRollingBack" in rs and "UpdateRolledBack" in rs, rs
    delete("crashy")


def test_update_to_a_crashing_template_without_rollback_fails():
    strategy = {"batchSize": 2, "maxFailureInstances": 1, "minReadySeconds": 6}
    apply([job("crashf", 4, "good", strategy)])
    wait_until(lambda: running_tags("crashf").get("good") == 4, 60, "crashf running")
    apply([job("crashf", 4, "bad", strategy, run=2, exit_code=1)])
    st = wait_until(lambda: (lambda s: s.get("state") in ("SUCCEEDED", "FAILED") and s)(update_status("crashf")),
                    120, "the update to end", every=0.5)
    assert st["state"] == "FAILED" and st["instancesFailed"] >= 1, st
    # Peloton leaves a failed update's instances where they are: the untouched ones still run the old template
    assert running_tags("crashf").get("good", 0) >= 2, running_tags("crashf")
    assert "UpdateFailed" in reasons("crashf"), reasons("crashf")
    delete("crashf")


def run_of(p):
    return int(p["metadata"]["annotations"].get("peloton.io/run", "1"))


def test_a_crash_looping_instance_backs_off():
    # before: restarted at once, every time (sl-0-5 ... sl-0-24 in 40 s)
    apply([job("loop", 1, "bad", run=1, exit_code=1)])  # Running 1 s, then exits 1
    wait_until(lambda: pods("loop"), 30, "the first run")
    t0 = time.monotonic()
    backoff = {}

    def waiting(until=None):
        b = job_obj("loop").get("status", {}).get("backoff", {})
        if b.get("instances") == 1:
            item = b["items"][0]
            backoff[item["delaySeconds"]] = item
        return (time.monotonic() - t0 >= until) if until else (20 in backoff and backoff)
    # runs start at about 0 s, 1 s (the first restart is immediate), 12 s (10 s later), 33 s, ...
    wait_until(lambda: waiting(16), 30, "16 s of the crash loop", every=0.5)
    runs = max(run_of(p) for p in pods("loop"))
    assert runs <= 4, f"{runs} runs in 16 s"
    wait_until(waiting, 60, "a 20 s backoff in status.backoff", every=0.5)
    elapsed = time.monotonic() - t0
    first = min(backoff)
    assert first == 10 and backoff[10]["instance"] == 0 and backoff[10]["restartAt"].endswith("Z"), backoff
    assert backoff[20]["restarts"] == 2, backoff
    runs = max(run_of(p) for p in pods("loop"))
    assert runs <= 4 and elapsed >= 12, (runs, elapsed)
    bo = [e for e in events("loop") if e["reason"] == "BackOff"]
    assert bo and bo[0]["type"] == "Warning" and "in 10s" in " ".join(e["message"] for e in bo), bo
    wide = kubectl("get", "pj", "loop", "-o", "wide")
    assert "BACKOFF" in wide.splitlines()[0] and wide.splitlines()[1].split()[-2] == "1", wide
    # the job is not FAILED while it waits: it will run again
    assert job_obj("loop")["status"]["state"] != "FAILED", job_obj("loop")["status"]
    delete("loop")


def test_update_paused_resumed_and_aborted_from_kubectl():
    strategy = {"batchSize": 1, "minReadySeconds": 3}
    apply([job("web", 4, "v1", strategy)])
    wait_until(lambda: running_tags("web").get("v1") == 4, 60, "web running")
    # a new template with the update paused: nothing moves
    apply([job("web", 4, "v2", {**strategy, "paused": True})])
    wait_until(lambda: update_status("web").get("state") == "PAUSED", 30, "the update PAUSED")
    time.sleep(3)
    assert running_tags("web") == {"v1": 4}, running_tags("web")
    st = update_status("web")
    assert st["instancesDone"] == 0 and st["instancesTotal"] == 4 and st["currentBatch"] == [], st
    table = kubectl("get", "pj", "web")
    head, row = table.splitlines()[0].split(), table.splitlines()[1].split()
    assert "UPDATE" in head and "PROGRESS" in head, table
    assert row[head.index("UPDATE")] == "PAUSED" and row[head.index("PROGRESS")] == "0/4", table
    # resume: it rolls; pause again after the first instance
    kubectl("patch", "pj", "web", "--type=merge", "-p", '{"spec":{"updateStrategy":{"paused":false}}}')
    wait_until(lambda: update_status("web").get("state") == "ROLLING_FORWARD", 30, "the update resumed")
    wait_until(lambda: update_status("web").get("currentBatch"), 30, "an instance in the current batch")
    wait_until(lambda: update_status("web").get("instancesDone", 0) >= 1, 60, "one instance updated")
    kubectl("patch", "pj", "web", "--type=merge", "-p", '{"spec":{"updateStrategy":{"paused":true}}}')
    wait_until(lambda: update_status("web").get("state") == "PAUSED", 30, "paused again")
    # what was in flight finishes (currentBatch lists the instances in flight); nothing new starts: a pause that
    # did not hold would start the next instance as this one ended, and currentBatch would not empty until the
    # update had ended
    wait_until(lambda: update_status("web").get("currentBatch") == [], 30, "the instance in flight done")
    done = update_status("web")["instancesDone"]
    tags = running_tags("web")
    time.sleep(5)
    assert update_status("web")["instancesDone"] == done and running_tags("web") == tags, (done, tags)
    assert 1 <= tags.get("v2", 0) <= 2 and tags.get("v2", 0) + tags.get("v1", 0) == 4, tags
    # abort: the update ends ABORTED, the annotation is taken away, instances stay where they are
    kubectl("annotate", "pj", "web", "peloton.io/update-abort=true")
    wait_until(lambda: update_status("web").get("state") == "ABORTED", 30, "the update ABORTED")
    wait_until(lambda: "peloton.io/update-abort" not in job_obj("web")["metadata"].get("annotations", {}), 30,
               "the abort annotation removed")
    assert running_tags("web") == tags, running_tags("web")
    desc = kubectl("describe", "pj", "web")
    assert "ABORTED" in desc and "UpdateAborted" in desc and "UpdatePaused" in desc and "UpdateResumed" in desc, desc
    # an abort with nothing to abort is a Warning, and is removed too
    kubectl("annotate", "pj", "web", "peloton.io/update-abort=true")
    wait_until(lambda: "UpdateAbortIgnored" in reasons("web"), 30, "UpdateAbortIgnored")
    wait_until(lambda: "peloton.io/update-abort" not in job_obj("web")["metadata"].get("annotations", {}), 30,
               "the ignored abort annotation removed")
    assert update_status("web")["state"] == "ABORTED"
    delete("web")


def test_a_paused_update_resumes_to_success():
    strategy = {"batchSize": 2, "minReadySeconds": 2}
    apply([job("api", 4, "v1", strategy)])
    wait_until(lambda: running_tags("api").get("v1") == 4, 60, "api running")
    apply([job("api", 4, "v2", {**strategy, "paused": True})])
    wait_until(lambda: update_status("api").get("state") == "PAUSED", 30, "the update PAUSED")
    kubectl("patch", "pj", "api", "--type=merge", "-p", '{"spec":{"updateStrategy":{"paused":false}}}')
    st = wait_until(lambda: (lambda s: s.get("state") == "SUCCEEDED" and s)(update_status("api")), 90,
                    "the update SUCCEEDED", every=0.5)
    assert st["progress"] == "4/4" and st["instancesDone"] == 4 and st["batchSize"] == 2, st
    assert running_tags("api") == {"v2": 4}, running_tags("api")
    cond = [c for c in job_obj("api")["status"]["conditions"] if c["type"] == "Update"][0]
    assert cond["status"] == "True", cond
    delete("api")


def test_update_rolled_back_from_kubectl():
    strategy = {"batchSize": 1, "minReadySeconds": 2}
    apply([job("svc", 4, "v1", strategy)])
    wait_until(lambda: running_tags("svc").get("v1") == 4, 60, "svc running")
    apply([job("svc", 4, "v2", strategy)])
    wait_until(lambda: update_status("svc").get("instancesDone", 0) >= 1, 60, "one instance updated")
    to = update_status("svc")["toVersion"]
    kubectl("annotate", "pj", "svc", f"peloton.io/update-rollback={to + 1}")  # not this update: ignored
    wait_until(lambda: "UpdateRollbackIgnored" in reasons("svc"), 30, "UpdateRollbackIgnored")
    kubectl("annotate", "pj", "svc", "--overwrite", f"peloton.io/update-rollback={to}")
    st = wait_until(lambda: (lambda s: s.get("state") == "ROLLED_BACK" and s)(update_status("svc")), 90,
                    "the update ROLLED_BACK", every=0.5)
    assert st["instancesDone"] == 4 and st["instancesFailed"] == 0, st
    wait_until(lambda: running_tags("svc") == {"v1": 4}, 60, "svc back to v1")
    assert "peloton.io/update-rollback" not in job_obj("svc")["metadata"].get("annotations", {})
    rs = reasons("svc")
    assert "UpdateRollingBack" in rs and "UpdateRolledBack" in rs, rs
    time.sleep(3)  # not tried again: the rolled-back template stays off
    assert running_tags("svc") == {"v1": 4} and update_status("svc")["state"] == "ROLLED_BACK"
    delete("svc")


def test_bad_update_strategy_is_rejected_with_the_field():
    bad = job("badupd", 1, "v1", {"minReadySeconds": -1})
    r = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", "apply", "-f", "-"], input=json.dumps(bad),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "minReadySeconds" in r.stderr, r.stderr
    bad = job("badupd", 1, "v1", {"paused": "yes"})
    r = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", "apply", "-f", "-"], input=json.dumps(bad),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "paused" in r.stderr, r.stderr


ONLY = os.environ.get("ONLY", "").split(",") if os.environ.get("ONLY") else None  # ONLY=test_a,test_b
run_tests("test_job_updates", {k: v for k, v in globals().items() if not ONLY or k in ONLY})
