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
    rc, out, err = cli("job", "delete", jid)
    assert rc == 0, err
    services.wait_until(lambda: kubectl("get", "pj", "hello-peloton")[0] != 0, 15, "the Job deleted")


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
    assert kubectl("get", "pj", "-o", "name")[1].strip() == "", "nothing was created"


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


def test_exit_clean_under_asan():
    assert PROC.poll() is None, open(LOG).read()[-3000:]


run_tests("test_cli", globals())
