#!/usr/bin/python3
"""End-to-end: the `peloton` CLI (src/cli, the ASan build) against the whole
stack (redis-server, pelotond with every role, kubelet-sim): a pool created
from Peloton-style YAML and dumped; a job created from Peloton-style YAML
(Go's lowercased keys, enums by number) waited on until its instances run,
read back by get/status/query in tables and -j JSON and cross-checked with
kubectl; its tasks listed and read; deleted; and the error paths a script
relies on: exit 1 with one line naming the code, 2 for usage and bad input
(with the YAML's line), 3 when nothing answers, and a bad token refused."""
import json
import os
import subprocess

import nativeclient
import services
from simlib import run_tests

ROOT = services.ROOT
CLI = os.environ.get("PELOTON_CLI", os.path.join(ROOT, "build", "asan", "peloton"))

S = services.start_stack("--roles=all", kubelet=["--nodes=2", "--cpu=8", "--memory=32Gi"], native=True)
PROC, PORT, LOG, NPORT, KUBECONFIG = S.proc, S.port, S.log, S.nport, S.kubeconfig
D = services.tempdir()
STATE = {}

POOL_YAML = """\
changelog: null
name: ignored-the-path-names-it
owningteam: team6
ldapgroups:
- money
description: "A pool for the CLI's test"
resources:
- kind: cpu
  reservation: 4
  limit: 8
  share: 1
- kind: memory
  reservation: 1024
  limit: 4096
  share: 2
- kind: disk
  reservation: 1024
  limit: 4096
  share: 1
policy: 1
"""

JOB_YAML = """\
changelog: null
name: cli_test_job
owningteam: team6
ldapgroups:
- money
- otto
description: "A dummy test job for the CLI"
labels:
- key: testKey0
  value: testVal0
instancecount: 3
sla:
  priority: 22
  preemptible: false
defaultconfig:
  name: worker
  labels:
  - key: kubelet-sim.peloton.io/run-seconds
    value: "300"
  resource:
    cpulimit: 0.1
    memlimitmb: 64
    disklimitmb: 10
  healthcheck: null
  ports: []
  container:
    type: 1
    docker:
      image: "busybox:1.36"
  command:
    shell: true
    value: 'echo Hello && sleep 300'
"""


def write(name, text):
    path = os.path.join(D, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def cli(*args, env=None, timeout=60):
    e = dict(os.environ, JOBMGR_URL=f"127.0.0.1:{NPORT}")
    e.update(env or {})
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=e)
    assert "ERROR: AddressSanitizer" not in p.stderr and "ERROR: LeakSanitizer" not in p.stderr, p.stderr
    assert "runtime error" not in p.stderr, p.stderr
    return p.returncode, p.stdout, p.stderr


def kubectl(*args):
    return services.kubectl_rc(KUBECONFIG, *args)


def test_respool_create_from_yaml_then_dump():
    rc, out, err = cli("respool", "create", "/clipool", write("pool.yaml", POOL_YAML))
    assert rc == 0, (out, err)
    assert out == "Resource pool clipool created at /clipool\n", out
    rc, out, err = cli("respool", "dump", "--format", "json")
    assert rc == 0, err
    pools = {p["config"]["name"]: p for p in json.loads(out) if "config" in p}
    c = pools["clipool"]["config"]
    assert c["owningTeam"] == "team6" and c["ldapGroups"] == ["money"], c
    assert c["policy"] == "PriorityFIFO", c
    cpu = [r for r in c["resources"] if r["kind"] == "cpu"][0]
    assert cpu["reservation"] == 4 and cpu["limit"] == 8, cpu
    mem = [r for r in c["resources"] if r["kind"] == "memory"][0]
    assert mem["share"] == 2 and mem["limit"] == 4096, mem
    rc, out, _ = cli("respool", "dump")  # YAML by default
    assert rc == 0 and "name: clipool" in out and "owningTeam: team6" in out, out
    rc, out = kubectl("get", "rp", "clipool", "-o", "json")
    assert rc == 0, out
    assert json.loads(out)["spec"]["owningTeam"] == "team6", out
    # the same path again: the reply's error, one line naming it, exit 1
    rc, out, err = cli("respool", "create", "/clipool", write("pool.yaml", POOL_YAML))
    assert rc == 1 and err.startswith("peloton: error: alreadyExists"), (rc, err)
    assert err.count("\n") == 1, err


def test_job_create_wait_get_status_query():
    rc, out, err = cli("job", "create", "--wait", "--wait-timeout=40", "/clipool", write("job.yaml", JOB_YAML))
    assert rc == 0, (out, err)
    assert out.startswith("Job ") and out.endswith(" created\n"), out
    jid = out.split()[1]
    STATE["job"] = jid
    assert "3/3 instances running or done" in err, err  # --wait's progress
    # kubectl sees the same Job, with the YAML's fields
    rc, kout = kubectl("get", "pj", "cli-test-job", "-o", "json")
    assert rc == 0, kout
    pj = json.loads(kout)
    assert pj["spec"]["instanceCount"] == 3 and pj["spec"]["resourcePool"] == "clipool", pj["spec"]
    assert pj["spec"]["sla"]["priority"] == 22, pj["spec"]
    # get: YAML by default, -j the reply's JSON
    rc, out, err = cli("job", "get", jid)
    assert rc == 0 and "name: cli_test_job" in out and "instanceCount: 3" in out, (out, err)
    rc, out, err = cli("-j", "job", "get", jid)
    info = json.loads(out)["jobInfo"]
    assert info["id"]["value"] == jid and info["config"]["owningTeam"] == "team6", info
    assert info["config"]["defaultConfig"]["resource"]["cpuLimit"] == 0.1, info
    assert info["config"]["defaultConfig"]["container"]["docker"]["image"] == "busybox:1.36", info
    assert info["config"]["labels"] == [{"key": "testKey0", "value": "testVal0"}], info
    # status: a table of the runtime
    rc, out, err = cli("job", "status", jid)
    assert rc == 0, err
    rows = {line[:15].strip(): line[15:].strip() for line in out.splitlines()}
    assert rows["State"] in ("PENDING", "RUNNING") and rows["Goal state"] == "SUCCEEDED", out
    assert rows["Tasks:"] == "" and rows["RUNNING"] == "3", out
    rc, out, err = cli("--json", "job", "status", jid)
    assert json.loads(out)["taskStats"]["RUNNING"] == 3, out
    # query: a table with the job's row; -j the full reply
    rc, out, err = cli("job", "query", "--labels", "testKey0=testVal0", "--respool", "/clipool")
    assert rc == 0, err
    head, *rows = out.splitlines()
    assert head.split()[:3] == ["ID", "NAME", "OWNER"], out
    assert len(rows) == 1 and rows[0].split()[0] == jid and "cli_test_job" in rows[0], out
    rc, out, err = cli("job", "query", "--name", "no-such-job-anywhere")
    assert rc == 0 and len(out.splitlines()) == 1, out
    rc, out, err = cli("-j", "job", "query", "-k", "dummy")
    q = json.loads(out)
    assert q["pagination"]["total"] == 1 and q["records"][0]["id"]["value"] == jid, q


def test_task_list_and_get():
    jid = STATE["job"]
    rc, out, err = cli("task", "list", jid)
    assert rc == 0, err
    head, *rows = out.splitlines()
    assert head.split()[:4] == ["INSTANCE", "NAME", "STATE", "HOST"], out
    assert [r.split()[0] for r in rows] == ["0", "1", "2"], out
    assert all(r.split()[1:3] == ["worker", "RUNNING"] for r in rows), out
    rc, out, err = cli("task", "list", jid, "-r", "1:2")
    assert [r.split()[0] for r in out.splitlines()[1:]] == ["1"], out
    rc, out, err = cli("-j", "task", "get", jid, "2")
    t = json.loads(out)["result"]
    assert t["instanceId"] == 2 and t["runtime"]["state"] == "RUNNING" and t["runtime"]["host"], t
    # the host is a kubelet-sim node kubectl knows
    rc, nodes = kubectl("get", "nodes", "-o", "name")
    assert f"node/{t['runtime']['host']}" in nodes.split(), (t, nodes)
    rc, out, err = cli("task", "get", jid, "7")
    assert rc == 1 and err.startswith("peloton: error: outOfRange"), (rc, err)
    rc, out, err = cli("task", "query", jid, "--states", "running", "--limit", "2")
    assert rc == 0 and len(out.splitlines()) == 3 and "3 task(s) in all" in err, (out, err)


def test_job_delete():
    jid = STATE["job"]
    rc, out, err = cli("job", "delete", jid)
    assert rc == 0 and out == f"Job {jid} deleted\n", (rc, out, err)
    services.wait_until(lambda: kubectl("get", "pj", "cli-test-job")[0] != 0, 15, "the Job deleted")
    rc, out, err = cli("job", "get", jid)
    assert rc == 1 and err.startswith("peloton: error: notFound"), (rc, err)


SVC_YAML = """\
name: cli-web
type: 1
owningteam: team6
instancecount: 3
defaultconfig:
  name: srv
  labels:
  - key: tag
    value: TAG
  resource:
    cpulimit: 0.1
    memlimitmb: 64
  command:
    value: serve
"""
WEB = {}
ZERO = "00000000-0000-0000-0000-000000000000"


def svc_yaml(tag, n=3):
    return write(f"svc-{tag}-{n}.yaml", SVC_YAML.replace("TAG", tag).replace("instancecount: 3", f"instancecount: {n}"))


def web_pods():
    rc, out = kubectl("get", "pods", "-l", "peloton.io/job=cli-web", "-o", "json")
    assert rc == 0, out
    return json.loads(out)["items"]


def live(pods=None):
    """{instance: (pod uid, tag)} of cli-web's Running pods not being deleted."""
    return {p["metadata"]["labels"]["peloton.io/instance"]: (p["metadata"]["uid"],
                                                            p["metadata"].get("annotations", {}).get("tag"))
            for p in (web_pods() if pods is None else pods)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


def tags():
    return sorted(t for _, t in live().values())


def update_state(uid):
    rc, out, err = cli("-j", "update", "get", uid)
    assert rc == 0, err
    return json.loads(out)["updateInfo"]["status"]["state"]


def one_error_line(rc, err, code, want_rc=1):
    assert rc == want_rc and err.startswith(f"peloton: error: {code}: ") and err.count("\n") == 1, (rc, err)


def test_update_create_wait_get_list_cache():
    rc, out, err = cli("job", "create", "--wait", "--wait-timeout=40", "/clipool", svc_yaml("v1"))
    assert rc == 0, (out, err)
    jid = WEB["id"] = out.split()[1]
    # a quick minReadySeconds (kubectl -> the native side), so the updates below roll fast
    rc, out = kubectl("patch", "pj", "cli-web", "--type=merge", "-p", '{"spec":{"updateStrategy":{"minReadySeconds":1}}}')
    assert rc == 0, out
    services.wait_until(lambda: tags() == ["v1"] * 3, 20, "cli-web running v1")
    rc, out, err = cli("update", "list", jid)
    assert rc == 0 and out.split() == ["UPDATE-ID", "JOB", "STATE", "DONE", "FAILED", "REMAINING", "BATCH-SIZE"], out
    assert err == "0 update(s)\n", err
    # create --wait follows the update to its end, progress on stderr
    rc, out, err = cli("update", "create", jid, svc_yaml("v2"), "1", "/clipool", "--wait", "--wait-timeout=40")
    assert rc == 0, (out, err)
    uid = WEB["u1"] = f"{jid}-1"
    assert out == f"Update {uid} created for job {jid}\n", out
    lines = err.splitlines()
    assert lines[-1] == f"update {uid}: SUCCEEDED, 3/3 instances done, 0 failed", err
    assert all(line.startswith(f"update {uid}: ") for line in lines), err
    assert tags() == ["v2"] * 3, tags()  # kubectl: every pod on the new template
    rc, kout = kubectl("get", "pj", "cli-web", "-o", "jsonpath={.status.update.state} {.spec.updateStrategy.batchSize}")
    assert kout == "SUCCEEDED 1", kout
    rc, out, err = cli("update", "get", uid)
    assert rc == 0, err
    head, row = out.splitlines()
    assert row.split() == [uid, jid, "SUCCEEDED", "3", "0", "0", "1"], out
    rc, out, err = cli("-j", "update", "get", uid)
    info = json.loads(out)["updateInfo"]
    assert info["status"]["numTasksDone"] == 3 and info["config"]["batchSize"] == 1, info
    assert info["configVersion"] != info["prevConfigVersion"], info
    rc, out, err = cli("update", "list", jid)
    assert [r.split()[:3] for r in out.splitlines()[1:]] == [[uid, jid, "SUCCEEDED"]] and err == "1 update(s)\n", out
    rc, out, err = cli("update", "cache", uid)
    assert rc == 0 and "state: SUCCEEDED" in out and "instancesTotal:" in out, out
    # an ended update can be neither paused nor rolled back
    rc, out, err = cli("update", "pause", uid)
    one_error_line(rc, err, "failed-precondition")
    assert "SUCCEEDED" in err, err
    rc, out, err = cli("update", "rollback", uid)
    one_error_line(rc, err, "failed-precondition")


def test_update_paused_resumed_paused_rolled_back_aborted():
    jid = WEB["id"]
    rc, out, err = cli("update", "create", jid, svc_yaml("v3"), "1", "--start-paused", "--rollbackOnFailure",
                       "--wait", "--wait-timeout=20")
    assert rc == 0 and "is paused" in err, (out, err)
    uid = f"{jid}-2"
    assert out == f"Update {uid} created for job {jid}\n" and f"update {uid}: PAUSED" in err, (out, err)
    rc, kout = kubectl("get", "pj", "cli-web", "-o", "jsonpath={.status.update.state} {.spec.updateStrategy.paused}")
    assert kout == "PAUSED true", kout  # kubectl sees the paused update
    assert tags() == ["v2"] * 3
    rc, out, err = cli("update", "resume", uid)
    assert rc == 0 and out == f"Update {uid} resumed\n", (out, err)
    services.wait_until(lambda: "v3" in tags(), 20, "an instance on v3", every=0.05)
    rc, out, err = cli("update", "pause", uid)
    assert rc == 0 and out == f"Update {uid} paused\n", (out, err)
    services.wait_until(lambda: update_state(uid) == "PAUSED", 20, "the update PAUSED")
    rc, kout = kubectl("get", "pj", "cli-web", "-o", "jsonpath={.status.update.state} {.spec.updateStrategy.paused}")
    assert kout == "PAUSED true", kout
    rc, out, err = cli("update", "rollback", uid)
    assert rc == 0 and out == f"Update {uid} rolling back\n", (out, err)
    services.wait_until(lambda: update_state(uid) == "ROLLED_BACK", 30, "the update ROLLED_BACK", every=0.3)
    services.wait_until(lambda: tags() == ["v2"] * 3, 20, "every instance back on v2")
    # the earlier update is no longer the job's: not found, naming the latest
    rc, out, err = cli("update", "get", WEB["u1"])
    one_error_line(rc, err, "not-found")
    assert uid in err, err
    rc, out, err = cli("update", "create", jid, svc_yaml("v4"), "2", "--start-paused")
    uid = f"{jid}-3"
    assert rc == 0 and out == f"Update {uid} created for job {jid}\n", (out, err)
    services.wait_until(lambda: update_state(uid) == "PAUSED", 20, "the third update PAUSED")
    rc, out, err = cli("update", "abort", uid)
    assert rc == 0 and out == f"Update {uid} aborted\n", (out, err)
    services.wait_until(lambda: update_state(uid) == "ABORTED", 20, "the update ABORTED")
    rc, kout = kubectl("get", "pj", "cli-web", "-o", "jsonpath={.status.update.state}")
    assert kout == "ABORTED", kout
    rc, out, err = cli("update", "resume", uid)
    one_error_line(rc, err, "failed-precondition")


def test_job_update_stop_start_restart():
    jid = WEB["id"]
    rc, out, err = cli("-j", "job", "get", jid)
    ver = json.loads(out)["jobInfo"]["config"]["changeLog"]["version"]
    rc, out, err = cli("job", "update", jid, svc_yaml("v2", 4), "-c", str(ver))
    assert rc == 0 and out.startswith(f"Job {jid} updated: job updated to configuration version "), (out, err)
    rc, kout = kubectl("get", "pj", "cli-web", "-o", "jsonpath={.spec.instanceCount} {.spec.resourcePool}")
    assert kout == "4 clipool", kout  # the pool kept: the job's own
    # the version read before is stale now: ABORTED, one line
    rc, out, err = cli("job", "update", jid, svc_yaml("v2", 4), "-c", str(ver))
    one_error_line(rc, err, "aborted")
    assert "stale version" in err, err
    services.wait_until(lambda: tags() == ["v2"] * 4, 30, "4 instances of v2")
    # stop --wait: until KILLED; kubectl then sees no pod of the job
    rc, out, err = cli("job", "stop", jid, "--wait", "--wait-timeout=30")
    assert rc == 0 and out.startswith(f"Job {jid} stopping (resource version "), (out, err)
    assert err.splitlines()[-1] == f"job {jid}: KILLED, 0 instance(s) running", err
    rv = out.split()[-1].rstrip(")")
    services.wait_until(lambda: not web_pods(), 15, "cli-web's pods gone")
    rc, out, err = cli("job", "start", jid, "--resourceVersion", "1")
    one_error_line(rc, err, "aborted")
    rc, out, err = cli("job", "start", jid, "--resourceVersion", rv, "--wait", "--wait-timeout=30")
    assert rc == 0 and out.startswith(f"Job {jid} starting"), (out, err)
    assert "4/4 instances running or done" in err, err
    services.wait_until(lambda: tags() == ["v2"] * 4, 20, "cli-web back")
    # restart: a rolling restart, an update of its own, followed with --wait
    before = {u for u, _ in live().values()}
    rc, out, err = cli("job", "restart", jid, "2", "--wait", "--wait-timeout=40")
    assert rc == 0, (out, err)
    assert out.startswith(f"Job {jid} restarting: update {jid}-"), out
    assert err.splitlines()[-1].endswith(": SUCCEEDED, 4/4 instances done, 0 failed"), err
    services.wait_until(lambda: len(live()) == 4 and not before & {u for u, _ in live().values()}, 20,
                        "every pod replaced")
    # bad ranges: refused here (2), or by the server (1)
    rc, out, err = cli("job", "restart", jid, "-r", "3:1")
    assert rc == 2 and err.startswith('peloton: --range "3:1"') and "usage: peloton job restart" in err, err
    rc, out, err = cli("job", "stop", jid, "-r", "7:9")
    one_error_line(rc, err, "invalid-argument")
    assert "ranges[0].from: 7 is past the job's instanceCount 4" in err, err
    rc, out, err = cli("job", "stop", jid, "--resourceVersion", "x")
    assert rc == 2, err
    # the cache methods
    rc, out, err = cli("job", "refresh", jid)
    assert rc == 0 and out == f"Job {jid} refreshed\n", (out, err)
    rc, out, err = cli("-j", "job", "cache", jid)
    assert json.loads(out)["config"]["instanceCount"] == 4, out
    rc, out, err = cli("job", "active-list")
    assert rc == 0 and jid in out.split(), out


def test_task_restart_stop_start_events():
    jid = WEB["id"]
    one = live()
    # repeated ranges, one with an open end (up to the job's instanceCount)
    rc, out, err = cli("task", "restart", jid, "-r", "1:2", "-r", "3:")
    assert rc == 0 and out == f"Job {jid}: restart requested\n", (out, err)

    def restarted():
        now = live()
        return (len(now) == 4 and now["0"] == one["0"] and now["2"] == one["2"] and now["1"] != one["1"]
                and now["3"] != one["3"])
    services.wait_until(restarted, 30, "instances 1 and 3 restarted, 0 and 2 not")
    rc, out, err = cli("task", "restart", jid, "-r", "4:7")
    one_error_line(rc, err, "outOfRange")
    rc, out, err = cli("task", "restart", jid, "-r", "x:1")
    assert rc == 2, err
    # some instances: the Job's spec.stoppedInstances; their pods go, the others stay
    rc, out, err = cli("task", "stop", jid, "-r", "0:2")
    assert rc == 0 and out == f"Job {jid}: stopped 0,1\n", (out, err)
    services.wait_until(lambda: len(live()) == 2 and set(live()) == {"2", "3"}, 30, "instances 0 and 1 stopped")
    rc, out, err = cli("task", "stop", jid)
    assert rc == 0 and out == f"Job {jid}: stopped 0,1,2,3\n", (out, err)
    services.wait_until(lambda: not web_pods(), 30, "every task stopped")
    rc, out, err = cli("-j", "task", "start", jid)
    assert rc == 0 and json.loads(out)["startedInstanceIds"] == [0, 1, 2, 3], (out, err)
    services.wait_until(lambda: tags() == ["v2"] * 4, 30, "every task started")
    rc, out, err = cli("-j", "task", "events", jid, "0")
    assert rc == 0, err
    evs = json.loads(out).get("result", [])
    assert evs and all(e["taskId"]["value"].startswith(f"{jid}-0-") for e in evs), out
    rc, out, err = cli("task", "events", jid, "0")
    head, *rows = out.splitlines()
    assert head.split() == ["TIME", "STATE", "GOAL", "HOST", "MESSAGE", "REASON"] and len(rows) == len(evs), out
    rc, out, err = cli("task", "events", jid, "9")
    one_error_line(rc, err, "failed")
    assert "out of range" in err, err
    rc, out, err = cli("task", "stop", ZERO)
    one_error_line(rc, err, "notFound")


def test_pods():
    jid = WEB["id"]
    rc, out, err = cli("-j", "pod", "get", f"{jid}-0")
    assert rc == 0, err
    cur = json.loads(out)["current"]
    assert cur["spec"]["podName"]["value"] == f"{jid}-0" and cur["status"]["state"] == "POD_STATE_RUNNING", cur
    rc, out, err = cli("pod", "get", f"{jid}-0", "--statusonly", "--currentonly")
    assert rc == 0 and "state: POD_STATE_RUNNING" in out and "previous" not in out and "podName" not in out, out
    before = live()["2"]
    rc, out, err = cli("pod", "restart", f"{jid}-2")
    assert rc == 0 and out == f"Pod {jid}-2 restarting\n", (out, err)
    services.wait_until(lambda: live().get("2", before) != before, 30, "instance 2's next run")  # kubectl sees it
    rc, out, err = cli("-j", "pod", "events-v1alpha", f"{jid}-0")
    evs = json.loads(out)["events"]
    assert rc == 0 and "POD_STATE_RUNNING" in [e.get("actualState") for e in evs], out
    rc, out, err = cli("pod", "events-v1alpha", f"{jid}-0")
    head, *rows = out.splitlines()
    assert head.split()[:3] == ["TIME", "POD-ID", "STATE"] and len(rows) == len(evs), out
    rc, out, err = cli("-j", "pod", "events", jid, "0", "--limit", "1")
    assert rc == 0 and len(json.loads(out)["result"]) == 1, out
    rc, out, err = cli("pod", "get", "nonsense")
    one_error_line(rc, err, "invalid-argument")
    rc, out, err = cli("pod", "restart", f"{ZERO}-0")
    one_error_line(rc, err, "not-found")
    rc, out, err = cli("pod", "events", jid, "0", "--limit", "x")
    assert rc == 2, err


def test_unknown_ids_and_bad_input():
    for args, code in [(["update", "get", "nonsense"], "invalid-argument"),
                       (["update", "get", f"{ZERO}-1"], "not-found"),
                       (["update", "pause", f"{ZERO}-1"], "not-found"),
                       (["job", "stop", ZERO], "not-found"),
                       (["job", "restart", ZERO], "not-found"),
                       (["update", "create", ZERO, svc_yaml("v9")], "notFound"),
                       (["update", "create", ZERO, svc_yaml("v9"), "1", "/clipool"], "not-found")]:
        rc, out, err = cli(*args)
        one_error_line(rc, err, code)
        assert out == "", (args, out)
    for args in [["update", "create", WEB["id"], svc_yaml("v9"), "many"],
                 ["update", "create", WEB["id"], svc_yaml("v9"), "--batch-percentage", "150"],
                 ["update", "create", WEB["id"], svc_yaml("v9"), "-c", "-3"],
                 ["update", "get"], ["job", "start", WEB["id"], "--wait", "--wait-timeout", "0"]]:
        rc, out, err = cli(*args)
        assert rc == 2 and "usage: peloton" in err, (args, rc, err)
    rc, out, err = cli("update", "create", WEB["id"], svc_yaml("v9"), "-c", "1")
    one_error_line(rc, err, "aborted")


def test_example_configs():
    """examples/peloton's files, as docs/cli.md shows them."""
    ex = os.path.join(ROOT, "examples", "peloton")
    rc, out, err = cli("respool", "create", "/batch", os.path.join(ex, "respool.yaml"))
    assert rc == 0 and out == "Resource pool batch created at /batch\n", (out, err)
    rc, out, err = cli("job", "create", "/batch", os.path.join(ex, "job.yaml"))
    assert rc == 0, (out, err)
    jid = out.split()[1]
    rc, out, err = cli("-j", "job", "get", jid)
    cfg = json.loads(out)["jobInfo"]["config"]
    assert cfg["name"] == "hello_peloton" and cfg["respoolID"]["value"] == "batch", cfg
    # updates are for service jobs; a BATCH job's is refused, one line
    rc, out, err = cli("update", "create", jid, os.path.join(ex, "job.yaml"), "1")
    one_error_line(rc, err, "failed-precondition")
    rc, out, err = cli("job", "delete", jid)
    assert rc == 0, err
    services.wait_until(lambda: kubectl("get", "pj", "hello-peloton")[0] != 0, 15, "the Job deleted")
    rc, out, err = cli("job", "create", "/batch", os.path.join(ex, "service.yaml"))
    assert rc == 0, (out, err)
    jid = out.split()[1]
    rc, out, err = cli("-j", "job", "get", jid)
    cfg = json.loads(out)["jobInfo"]["config"]
    assert cfg["type"] == "SERVICE" and cfg["defaultConfig"]["labels"] == [{"key": "version", "value": "v1"}], cfg
    rc, out, err = cli("job", "delete", jid)
    assert rc == 0, err


def test_unknown_job_is_an_error_naming_the_code():
    rc, out, err = cli("job", "status", "00000000-0000-0000-0000-000000000000")
    assert rc == 1 and out == "", (rc, out)
    assert err.startswith("peloton: error: notFound: ") and err.count("\n") == 1, err
    rc, out, err = cli("task", "list", "00000000-0000-0000-0000-000000000000")
    assert rc == 1 and err.startswith("peloton: error: notFound"), err


def test_bad_yaml_names_the_line():
    bad = JOB_YAML.replace("instancecount: 3", "instancecount: three")
    rc, out, err = cli("job", "create", "/clipool", write("bad1.yaml", bad))
    assert rc == 2, (rc, err)
    line = bad.splitlines().index("instancecount: three") + 1
    assert f"bad1.yaml:{line}: instanceCount: expected a non-negative integer" in err, err
    rc, out, err = cli("job", "create", "/clipool", write("bad2.yaml", JOB_YAML.replace("  priority: 22", "  prio: 22")))
    assert rc == 2 and 'sla: unknown field "prio" in SlaConfig' in err, err
    rc, out, err = cli("job", "create", "/clipool", write("bad3.yaml", "name: [unclosed\nx: 1\n"))
    assert rc == 2 and "bad3.yaml:" in err, err
    # Peloton's own examples carry keys its structs had (Go's YAML dropped unknown keys):
    # refused here, or skipped with a warning each under --skip-unknown
    legacy = write("legacy.yaml", JOB_YAML.replace("  priority: 22", "  priority: 22\n  minimuminstancecount: 12"))
    rc, out, err = cli("job", "create", "/clipool", legacy)
    assert rc == 2 and 'legacy.yaml:14: sla: unknown field "minimuminstancecount" in SlaConfig' in err, err
    rc, out, err = cli("job", "create", "--skip-unknown", "/no-such-pool", legacy)
    assert rc == 1 and err.splitlines() == [
        'warning: %s:14: sla: unknown field "minimuminstancecount" in SlaConfig skipped' % legacy,
        "peloton: error: notFound: resource pool path /no-such-pool not found"], err
    rc, out, err = cli("job", "create", "/clipool", os.path.join(D, "missing.yaml"))
    assert rc == 2 and "No such file" in err, err
    assert kubectl("get", "pj", "cli-test-job")[0] != 0, "nothing was created"


def test_bad_flag_is_usage():
    for args in [["job", "get", "--bogus", "x"], ["job", "get"], ["job", "nosuch"], ["--timeout=abc", "job", "get", "x"],
                 ["task", "get", "x", "notanumber"], []]:
        rc, out, err = cli(*args)
        assert rc == 2, (args, rc, err)
        assert "usage: peloton" in err or "peloton:" in err, (args, err)
    rc, out, err = cli("job", "create", "--help")
    assert rc == 0 and "usage: peloton [global flags] job create" in out and "--wait" in out, out
    rc, out, err = cli("--help")
    assert rc == 0 and "respool" in out and "task" in out, out


def test_unreachable_server():
    port = services.free_port()
    rc, out, err = cli("-m", f"127.0.0.1:{port}", "job", "get", "x")
    assert rc == 3, (rc, err)
    assert err.startswith(f"peloton: no answer: http://127.0.0.1:{port}/api/v1: ") and "onnect" in err, err
    # a server that is not Peloton's: pelotond's Kubernetes API port
    rc, out, err = cli("-m", f"http://127.0.0.1:{PORT}", "respool", "dump")
    assert rc == 3 and "not a Peloton endpoint" in err, (rc, err)


def test_bad_token_is_unauthenticated():
    p, plog, nport, tf = nativeclient.start_with_token("s3cret-token")
    url = f"127.0.0.1:{nport}"
    rc, out, err = cli("-m", url, "--token", "wrong", "respool", "dump")
    assert rc == 1 and err.startswith("peloton: error: unauthenticated"), (rc, err)
    rc, out, err = cli("-m", url, "respool", "dump")
    assert rc == 1 and err.startswith("peloton: error: unauthenticated"), (rc, err)
    rc, out, err = cli("-m", url, "--token-file", tf, "respool", "dump", "--format=json")
    assert rc == 0 and json.loads(out)[0]["id"]["value"] == "root", (out, err)
    rc, out, err = cli("-m", url, "respool", "dump", env={"PELOTON_TOKEN": "s3cret-token"})
    assert rc == 0, err
    assert services.stop(p) == 0, open(plog).read()[-3000:]


def host_states(*states):
    args = ["-j", "host", "query"] + (["-s", ",".join(states)] if states else [])
    rc, out, err = cli(*args)
    assert rc == 0, err
    return {h["hostname"]: (h["state"], h.get("goalState")) for h in json.loads(out).get("hostInfos", [])}


def test_host_maintenance():
    rc, out, err = cli("host", "query")
    assert rc == 0 and out.split()[:4] == ["HOSTNAME", "IP", "STATE", "GOAL-STATE"] and err == "2 host(s)\n", (out, err)
    assert host_states() == {"sim-node-0": ("HOST_STATE_UP", "HOST_STATE_UP"),
                             "sim-node-1": ("HOST_STATE_UP", "HOST_STATE_UP")}, host_states()
    rc, out, err = cli("host", "maintenance", "start", "sim-node-1")
    assert rc == 0 and out == "Host sim-node-1: maintenance started\n", (out, err)
    rc, kout = kubectl("get", "node", "sim-node-1", "-o", "json")
    node = json.loads(kout)
    assert node["spec"].get("unschedulable") is True, node["spec"]
    assert node["metadata"]["annotations"]["peloton.io/maintenance"] in ("draining", "drained"), node["metadata"]
    rc, out, err = cli("-j", "host", "maintenance", "query", "-s", "draining,HOST_STATE_DRAINED")
    infos = json.loads(out)["hostInfos"]
    assert [(h["hostname"], h["goalState"]) for h in infos] == [("sim-node-1", "HOST_STATE_DOWN")], out
    assert list(host_states("up")) == ["sim-node-0"]
    rc, out, err = cli("host", "maintenance", "start", "sim-node-1")
    one_error_line(rc, err, "failed-precondition")
    rc, out, err = cli("host", "maintenance", "start", "no-such-host")
    one_error_line(rc, err, "not-found")
    rc, out, err = cli("host", "maintenance", "complete", "Not_A_Node_Name")
    one_error_line(rc, err, "invalid-argument")
    rc, out, err = cli("host", "query", "-s", "sideways")
    assert rc == 2 and '"SIDEWAYS" is not a host state' in err, err
    rc, out, err = cli("host", "maintenance", "complete", "sim-node-1,sim-node-0")  # the second is not in maintenance
    assert rc == 1 and out == "Host sim-node-1: maintenance completed\n", (out, err)
    assert err.startswith("peloton: error: failed-precondition: ") and err.count("\n") == 1, err
    rc, kout = kubectl("get", "node", "sim-node-1", "-o", "json")
    node = json.loads(kout)
    assert not node["spec"].get("unschedulable") and "peloton.io/maintenance" not in node["metadata"].get(
        "annotations", {}), node
    assert sorted(host_states("up")) == ["sim-node-0", "sim-node-1"]


SL_YAML = """\
name: cli_stateless
owner: alice
owningTeam: team6
instanceCount: 2
labels:
- key: tier
  value: sl
sla:
  priority: 3
defaultSpec:
  containers:
  - name: main
    resource:
      cpuLimit: 0.05
      memLimitMb: 16
    container:
      type: DOCKER
      docker:
        image: "busybox:1.36"
    command:
      value: "{cmd}"
"""


def sl_pods(jid):
    rc, out, err = cli("-j", "job", "stateless", "list-pods", jid)
    assert rc == 0, err
    return [p for m in json.loads("[" + out.replace("}\n{", "},{") + "]") for p in m.get("pods", [])] if out else []


def test_stateless_create_get_list_pods():
    rc, out, err = cli("job", "stateless", "create", "/clipool", write("sl.yaml", SL_YAML.format(cmd="sleep 3600")))
    assert rc == 0 and out.startswith("Job ") and " created (entity version " in out, (rc, out, err)
    jid = out.split()[1]
    STATE["sl"] = jid
    services.wait_until(lambda: [p["status"].get("state") for p in sl_pods(jid)] == ["POD_STATE_RUNNING"] * 2, 40,
                        "the stateless job's pods running")
    rc, out, err = cli("job", "stateless", "list-pods", jid)
    head, *rows = out.splitlines()
    assert rc == 0 and head.split()[:3] == ["POD", "STATE", "DESIRED"], out
    assert [r.split()[0] for r in rows] == [f"{jid}-0", f"{jid}-1"] and all("POD_STATE_RUNNING" in r for r in rows), out
    rc, out, err = cli("job", "stateless", "list-pods", jid, "-r", "1:2")
    assert [r.split()[0] for r in out.splitlines()[1:]] == [f"{jid}-1"], out
    rc, out, err = cli("-j", "job", "stateless", "get", jid)
    info = json.loads(out)["jobInfo"]
    assert rc == 0 and info["jobId"]["value"] == jid and info["spec"]["instanceCount"] == 2, info
    assert info["spec"]["defaultSpec"]["containers"][0]["command"]["value"] == "sleep 3600", info
    assert info["spec"]["respoolId"]["value"], info
    rc, out, err = cli("job", "stateless", "get", jid, "--summary-only")
    assert rc == 0 and "name: cli_stateless" in out and "jobInfo" not in out, out
    # kubectl sees the same Job
    rc, kout = kubectl("get", "pj", "-o", "json")
    assert rc == 0 and any(o["metadata"]["uid"] == jid and o["spec"]["type"] == "STATELESS"
                           for o in json.loads(kout)["items"]), kout
    rc, out, err = cli("job", "stateless", "list")
    assert rc == 0 and any(l.split()[0] == jid for l in out.splitlines()[1:]), out
    rc, out, err = cli("job", "stateless", "query", "-l", "tier=sl")
    rows = out.splitlines()[1:]
    assert rc == 0 and [r.split()[0] for r in rows] == [jid], out


def test_stateless_replace_seen_by_watch():
    jid = STATE["sl"]
    w = subprocess.Popen([CLI, "-m", f"127.0.0.1:{NPORT}", "watch", "pod", "--job-id", jid, "-n", "3", "-d", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = w.stdout.readline()  # the watch is open
        assert first.startswith("revision=") and " watch=" in first, (first, w.stderr.read() if w.poll() else "")
        rc, out, err = cli("job", "stateless", "replace", jid, write("sl2.yaml", SL_YAML.format(cmd="sleep 7200")),
                           "1")
        assert rc == 0 and out.startswith(f"Job {jid} replaced (entity version "), (rc, out, err)
        out, err = w.communicate(timeout=60)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    assert w.returncode == 0, err
    assert "ERROR: AddressSanitizer" not in err and "LeakSanitizer" not in err, err
    lines = out.splitlines()
    assert len(lines) >= 2 and all(l.startswith("revision=") and f" pod={jid}-" in l for l in lines), out
    services.wait_until(lambda: cli("-j", "job", "stateless", "get", jid)[1] and json.loads(
        cli("-j", "job", "stateless", "get", jid)[1])["jobInfo"]["spec"]["defaultSpec"]["containers"][0]["command"]
        ["value"] == "sleep 7200", 20, "the new spec")
    # a stale entity version is refused, one line naming the code
    rc, out, err = cli("job", "stateless", "replace", jid, write("sl3.yaml", SL_YAML.format(cmd="sleep 1")),
                       "--entity-version=1-1-1")
    assert rc == 1 and err.startswith("peloton: error: aborted: ") and err.count("\n") == 1, (rc, err)


def test_stateless_workflow_restart_delete():
    jid = STATE["sl"]
    for verb, said in (("pause", "workflow paused"), ("resume", "workflow resumed"), ("abort", "workflow aborted")):
        rc, out, err = cli("job", "stateless", verb, jid)
        assert rc == 0 and out.startswith(f"Job {jid} {said} (entity version "), (verb, rc, out, err)
    rc, out, err = cli("job", "stateless", "restart", jid, "1")
    assert rc == 0 and out.startswith(f"Job {jid} restarting"), (rc, out, err)
    rc, out, err = cli("-j", "job", "stateless", "restart", jid, "-r", "0:2")
    assert rc == 0 and json.loads(out)["version"]["value"], (rc, out, err)
    rc, out, err = cli("job", "stateless", "restart", jid, "-r", "0:1")  # pelotond restarts every instance or none
    assert rc == 1 and err.startswith("peloton: error: invalid-argument: ranges: "), (rc, out, err)
    rc, out, err = cli("job", "stateless", "restart", jid, "-r", "2:1")
    assert rc == 2 and "--range" in err, (rc, err)
    rc, out, err = cli("job", "stateless", "delete", jid, "--force")
    assert rc == 0 and out == f"Job {jid} deleted\n", (rc, out, err)
    services.wait_until(lambda: cli("job", "stateless", "get", jid)[0] == 1, 20, "the job gone")


def test_stateless_and_watch_errors():
    rc, out, err = cli("job", "stateless", "get", "no-such-job")
    assert rc == 1 and err.startswith("peloton: error: not-found: "), (rc, err)
    rc, out, err = cli("job", "stateless", "list-pods", "no-such-job")  # the stream's status
    assert rc == 1 and err.startswith("peloton: error: not-found: ") and err.count("\n") == 1, (rc, out, err)
    rc, out, err = cli("watch", "pod", "-n", "x")
    assert rc == 2 and "--limit is a number" in err, err
    rc, out, err = cli("watch", "job", "-l", "novalue")
    assert rc == 2 and "--labels is key=value" in err, err
    rc, out, err = cli("watch", "job", "-n", "1", env={"JOBMGR_URL": f"127.0.0.1:{services.free_port()}"})
    assert rc == 3 and err.startswith("peloton: no answer: "), (rc, err)
    rc, out, err = cli("job", "stateless", "create", "/clipool", write("bad.yaml", "name: x\nnoSuchField: 1\n"))
    assert rc == 2 and "noSuchField" in err, (rc, err)
    rc, out, err = cli("job", "stateless", "--help")
    assert rc == 0 and all(w in out for w in ("create", "replace", "list-pods", "pause", "delete")), out
    rc, out, err = cli("watch", "pod", "--help")
    assert rc == 0 and "--limit" in out and "--duration" in out, out
    # a watch bounded by time ends by itself, exit 0
    rc, out, err = cli("watch", "job", "-d", "1", timeout=30)
    assert rc == 0 and out.startswith("revision=") and " watch=" in out, (rc, out, err)


def test_exit_clean_under_asan():
    assert PROC.poll() is None, open(LOG).read()[-3000:]


run_tests("test_cli", globals())
