#!/usr/bin/python3
"""End-to-end: v0 peloton.api.job.JobManager (Create, Get, Query, Delete)
served by pelotond's native role over Job objects, against the whole stack
(redis-server, pelotond with every role, kubelet-sim). A BATCH job created
with grpcio (code generated at test time from proto/) runs to completion on
kubelet-sim; kubectl sees it; a Job applied with kubectl is returned by
Get and Query; what cannot be carried yet is refused, naming the field."""
import json
import subprocess
import time

import nativeclient
import services
from simlib import run_tests

ROOT = services.ROOT
nativeclient.generate_stubs()
from mesos.v1 import mesos_pb2 as mesos  # noqa: E402
from peloton.api.v0 import peloton_pb2 as pb  # noqa: E402
from peloton.api.v0.job import job_pb2 as job  # noqa: E402
from peloton.api.v0.query import query_pb2 as query  # noqa: E402
from peloton.api.v0.respool import respool_pb2 as rp, respool_pb2_grpc as rpg  # noqa: E402
from peloton.api.v0.task import task_pb2 as task  # noqa: E402

S = services.start_stack("--roles=all", kubelet=["--nodes=2", "--cpu=8", "--memory=32Gi"], native=True)
PROC, LOG, NPORT, KUBECONFIG, KSIM = S.proc, S.log, S.nport, S.kubeconfig, S.ksim
CH = nativeclient.channel(NPORT)
WIRE = "/peloton.api.job.JobManager/"


def jm(method, req, resp_type):
    return nativeclient.unary(CH, WIRE + method, req, resp_type)


def kubectl(*args, stdin=None):
    return services.kubectl_rc(KUBECONFIG, *args, stdin=stdin)


def batch_config(name, n, **kw):
    return job.JobConfig(
        name=name, type=job.BATCH, instanceCount=n, owner="alice", owningTeam="ml",
        labels=[pb.Label(key="team", value="ml")], respoolID=pb.ResourcePoolID(value="batch"),
        sla=job.SlaConfig(priority=5, preemptible=True),
        defaultConfig=task.TaskConfig(
            name="worker", labels=[pb.Label(key="kubelet-sim.peloton.io/run-seconds", value="1")],
            resource=task.ResourceConfig(cpuLimit=0.5, memLimitMb=128),
            container=mesos.ContainerInfo(type=mesos.ContainerInfo.DOCKER,
                                          docker=mesos.ContainerInfo.DockerInfo(image="busybox:1.36")),
            command=mesos.CommandInfo(value="echo hello")), **kw)


def test_pool_for_jobs():
    nativeclient.create_pool(CH, "batch", (8, 16), (8192, 65536))


def test_batch_job_runs_to_completion():
    r = jm("Create", job.CreateRequest(config=batch_config("Nightly_Train", 10)), job.CreateResponse)
    assert r.jobId.value and not r.HasField("error"), r
    jid = r.jobId.value
    rc, out = kubectl("get", "pj", "nightly-train", "-o", "json")
    assert rc == 0, out
    obj = json.loads(out)
    assert obj["metadata"]["uid"] == jid  # the JobID is the Job's uid
    c = obj["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "busybox:1.36" and c["command"] == ["/bin/sh", "-c", "echo hello"], c
    assert c["resources"]["requests"] == {"cpu": "500m", "memory": "128Mi"}, c
    assert obj["spec"]["sla"] == {"priority": 5, "preemptible": True}, obj["spec"]
    deadline = time.monotonic() + 60
    while True:
        g = jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse)
        if g.jobInfo.runtime.state == job.SUCCEEDED or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert g.jobInfo.runtime.state == job.SUCCEEDED, g.jobInfo.runtime
    assert g.jobInfo.runtime.taskStats["SUCCEEDED"] == 10, dict(g.jobInfo.runtime.taskStats)
    cfg = g.jobInfo.config
    assert cfg.name == "Nightly_Train" and cfg.owner == "alice" and cfg.instanceCount == 10
    assert cfg.respoolID.value == "batch" and cfg.sla.priority == 5 and cfg.sla.preemptible
    assert cfg.defaultConfig.resource.cpuLimit == 0.5 and cfg.defaultConfig.resource.memLimitMb == 128
    assert cfg.defaultConfig.command.value == "echo hello" and cfg.defaultConfig.command.shell
    assert cfg.defaultConfig.container.docker.image == "busybox:1.36"
    assert [(l.key, l.value) for l in cfg.labels] == [("team", "ml")]
    rc, out = kubectl("get", "pj", "nightly-train", "-o", "jsonpath={.status.state}")
    assert rc == 0 and out == "SUCCEEDED", out
    # its tasks, through the TaskManager: the pods of the Job
    TM = "/peloton.api.task.TaskManager/"

    def tm(method, req, resp_type):
        return CH.unary_unary(TM + method, request_serializer=type(req).SerializeToString,
                              response_deserializer=resp_type.FromString)(req, timeout=20)
    lst = tm("List", task.ListRequest(jobId=pb.JobID(value=jid)), task.ListResponse)
    assert sorted(lst.result.value.keys()) == list(range(10)), lst
    for i, t in lst.result.value.items():
        assert t.runtime.state == task.SUCCEEDED and t.runtime.host.startswith("sim-node-"), t
        assert t.runtime.mesosTaskId.value == f"{jid}-{i}-1" and t.config.resource.cpuLimit == 0.5, t
    g = tm("Get", task.GetRequest(jobId=pb.JobID(value=jid), instanceId=3), task.GetResponse)
    assert g.result.instanceId == 3 and g.result.runtime.state == task.SUCCEEDED and len(g.results) == 1, g
    g = tm("Get", task.GetRequest(jobId=pb.JobID(value=jid), instanceId=10), task.GetResponse)
    assert g.outOfRange.instanceCount == 10, g
    q = tm("Query", task.QueryRequest(jobId=pb.JobID(value=jid), spec=task.QuerySpec(
        taskStates=[task.SUCCEEDED], pagination=query.PaginationSpec(offset=2, limit=4))), task.QueryResponse)
    assert [t.instanceId for t in q.records] == [2, 3, 4, 5] and q.pagination.total == 10, q
    q = tm("Query", task.QueryRequest(jobId=pb.JobID(value=jid), spec=task.QuerySpec(taskStates=[task.RUNNING])),
           task.QueryResponse)
    assert not q.records and q.pagination.total == 0, q
    lst = tm("List", task.ListRequest(jobId=pb.JobID(value=jid), range=task.InstanceRange(**{"from": 8, "to": 99})),
             task.ListResponse)
    assert sorted(lst.result.value.keys()) == [8, 9], lst
    nf = tm("Query", task.QueryRequest(jobId=pb.JobID(value="00000000-0000-0000-0000-00000000000f")), task.QueryResponse)
    assert nf.error.notFound.id.value == "00000000-0000-0000-0000-00000000000f", nf
    nf = tm("List", task.ListRequest(jobId=pb.JobID(value="nope")), task.ListResponse)
    assert nf.notFound.id.value == "nope", nf


def test_kubectl_applied_job_is_returned():
    doc = {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "kjob", "namespace": "default"},
           "spec": {"type": "STATELESS", "resourcePool": "batch", "instanceCount": 1,
                    "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1", "command": ["nginx"],
                                                          "args": ["-g", "daemon off;"],
                                                          "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]}}}}
    rc, out = kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    assert rc == 0, out
    q = jm("Query", job.QueryRequest(spec=job.QuerySpec(name="kjob")), job.QueryResponse)
    assert [s.name for s in q.results] == ["kjob"], q
    jid = q.results[0].id.value
    g = jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse)
    cfg = g.jobInfo.config
    assert cfg.type == job.SERVICE and cfg.instanceCount == 1 and cfg.respoolID.value == "batch", cfg
    assert cfg.defaultConfig.resource.cpuLimit == 0.25 and cfg.defaultConfig.resource.memLimitMb == 1024
    cmd = cfg.defaultConfig.command
    assert not cmd.shell and cmd.value == "nginx" and list(cmd.arguments) == ["-g", "daemon off;"], cmd
    assert g.jobInfo.runtime.goalState == job.RUNNING


def test_query_filters_paging_and_order():
    for i, name in enumerate(["q-b", "q-a", "q-c"]):
        cfg = batch_config(name, 1)
        cfg.owner = "bob" if i else "carol"
        cfg.labels.append(pb.Label(key="k", value=str(i)))
        r = jm("Create", job.CreateRequest(config=cfg), job.CreateResponse)
        assert not r.HasField("error"), r
    q = jm("Query", job.QueryRequest(spec=job.QuerySpec(owner="bob")), job.QueryResponse)
    assert sorted(s.name for s in q.results) == ["q-a", "q-c"] and q.pagination.total == 2, q
    assert len(q.records) == 2  # full JobInfo unless summaryOnly
    q = jm("Query", job.QueryRequest(spec=job.QuerySpec(labels=[pb.Label(key="k", value="0")]), summaryOnly=True),
           job.QueryResponse)
    assert [s.name for s in q.results] == ["q-b"] and not q.records, q
    q = jm("Query", job.QueryRequest(spec=job.QuerySpec(keywords=["q-"], pagination=query.PaginationSpec(
        offset=1, limit=1, orderBy=[query.OrderBy(order=query.OrderBy.DESC,
                                                  property=query.PropertyPath(value="name"))]))), job.QueryResponse)
    assert [s.name for s in q.results] == ["q-b"] and q.pagination.total == 3, q  # q-c, [q-b], q-a
    q = jm("Query", job.QueryRequest(respoolID=pb.ResourcePoolID(value="nope")), job.QueryResponse)
    assert not q.results and q.pagination.total == 0
    q = jm("Query", job.QueryRequest(spec=job.QuerySpec(jobStates=[job.SUCCEEDED], name="Nightly")), job.QueryResponse)
    assert [s.name for s in q.results] == ["Nightly_Train"], q


def test_errors_in_pelotons_shape():
    r = jm("Create", job.CreateRequest(config=batch_config("Nightly_Train", 1)), job.CreateResponse)
    assert "already exists" in r.error.alreadyExists.message, r
    cfg = batch_config("cons", 1)
    cfg.defaultConfig.constraint.type = task.Constraint.LABEL_CONSTRAINT
    r = jm("Create", job.CreateRequest(config=cfg), job.CreateResponse)
    assert "defaultConfig.constraint: not supported" in r.error.invalidConfig.message, r
    cfg = batch_config("ic", 2)
    cfg.instanceConfig[1].name = "other"
    r = jm("Create", job.CreateRequest(config=cfg), job.CreateResponse)
    assert "config.instanceConfig: not supported" in r.error.invalidConfig.message, r
    cfg = batch_config("nopool", 1)
    cfg.ClearField("respoolID")
    r = jm("Create", job.CreateRequest(config=cfg), job.CreateResponse)
    assert "config.respoolID: required" in r.error.invalidConfig.message, r
    cfg = batch_config("gang", 2)
    cfg.sla.minimumRunningInstances = 5  # more than the job has: the API server's rule
    r = jm("Create", job.CreateRequest(config=cfg), job.CreateResponse)
    assert "minimumRunningInstances: 5 exceeds instanceCount 2" in r.error.invalidConfig.message, r
    r = jm("Create", job.CreateRequest(id=pb.JobID(value="not a uuid"), config=batch_config("x", 1)),
           job.CreateResponse)
    assert r.error.invalidJobId.id.value == "not a uuid", r
    g = jm("Get", job.GetRequest(id=pb.JobID(value="00000000-0000-0000-0000-000000000000")), job.GetResponse)
    assert g.error.notFound.id.value == "00000000-0000-0000-0000-000000000000", g
    for name in ["cons", "ic", "nopool", "gang", "x"]:
        assert kubectl("get", "pj", name)[0] != 0


def test_client_given_id_and_delete():
    jid = "7b1f3c2e-0000-4000-8000-000000000001"
    r = jm("Create", job.CreateRequest(id=pb.JobID(value=jid), config=batch_config("given-id", 1)), job.CreateResponse)
    assert r.jobId.value == jid, r
    assert jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse).jobInfo.config.name == "given-id"
    d = jm("Delete", job.DeleteRequest(id=pb.JobID(value=jid)), job.DeleteResponse)
    assert not d.HasField("error"), d
    services.wait_until(lambda: kubectl("get", "pj", "given-id")[0] != 0, 10, "the Job deleted")
    d = jm("Delete", job.DeleteRequest(id=pb.JobID(value=jid)), job.DeleteResponse)
    assert d.error.notFound.id.value == jid, d


def test_yarpc_json_create_with_curl():
    body = {"config": {"name": "curl-job", "instanceCount": 1, "respoolID": {"value": "batch"},
                       "defaultConfig": {"resource": {"cpuLimit": 0.1, "memLimitMb": 16},
                                         "command": {"shell": False, "value": "/bin/true"}}}}
    p = subprocess.run(["curl", "-s", "-X", "POST", f"http://127.0.0.1:{NPORT}/api/v1", "-H", "Rpc-Caller: t",
                        "-H", "Rpc-Service: peloton-jobmgr", "-H", "Rpc-Encoding: json", "-H",
                        "Rpc-Procedure: peloton.api.job.JobManager::Create", "-d", json.dumps(body)],
                       capture_output=True, text=True, timeout=30)
    doc = json.loads(p.stdout)
    assert doc["jobId"]["value"], doc
    rc, out = kubectl("get", "pj", "curl-job", "-o", "jsonpath={.spec.template.spec.containers[0].command}")
    assert rc == 0 and json.loads(out) == ["/bin/true"], out


def test_task_stop_start_some_instances():
    """TaskManager.Stop with ranges stops instances 2 and 3 of a service of 5
    (the Job's spec.stoppedInstances): their pods end and are not replaced;
    Start with the same range brings them back Running."""
    cfg = batch_config("svc-five", 5)
    cfg.type = job.SERVICE
    del cfg.defaultConfig.labels[:]  # no run-seconds: runs until stopped
    r = jm("Create", job.CreateRequest(config=cfg), job.CreateResponse)
    assert not r.HasField("error"), r
    jid = r.jobId.value
    TM = "/peloton.api.task.TaskManager/"

    def tm(method, req, resp_type):
        return nativeclient.unary(CH, TM + method, req, resp_type)

    def running():
        rc, out = kubectl("get", "pods", "-l", "peloton.io/job=svc-five", "-o", "json")
        assert rc == 0, out
        items = json.loads(out)["items"]
        live = sorted(int(p["metadata"]["labels"]["peloton.io/instance"]) for p in items
                      if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))
        return live if len(live) == len(items) else None  # None: something is still moving
    services.wait_until(lambda: running() == [0, 1, 2, 3, 4], 30, "5 instances Running")
    rng = [task.InstanceRange(**{"from": 2, "to": 4})]
    r = tm("Stop", task.StopRequest(jobId=pb.JobID(value=jid), ranges=rng), task.StopResponse)
    assert list(r.stoppedInstanceIds) == [2, 3] and not r.HasField("error"), r
    rc, out = kubectl("get", "pj", "svc-five", "-o", "jsonpath={.spec.stoppedInstances}")
    assert rc == 0 and json.loads(out) == [{"from": 2, "to": 4}], out
    services.wait_until(lambda: running() == [0, 1, 4], 30, "instances 2 and 3 stopped")
    time.sleep(3)  # a job manager resync or two: they stay stopped
    assert running() == [0, 1, 4]
    lst = tm("List", task.ListRequest(jobId=pb.JobID(value=jid)), task.ListResponse)
    states = {i: t.runtime.state for i, t in lst.result.value.items()}
    assert states.get(0) == task.RUNNING and states.get(2) != task.RUNNING, states
    # stopping them again changes nothing; Start with the range brings them back
    r = tm("Stop", task.StopRequest(jobId=pb.JobID(value=jid), ranges=rng), task.StopResponse)
    assert list(r.stoppedInstanceIds) == [2, 3], r
    r = tm("Start", task.StartRequest(jobId=pb.JobID(value=jid), ranges=rng), task.StartResponse)
    assert list(r.startedInstanceIds) == [2, 3] and not r.HasField("error"), r
    services.wait_until(lambda: running() == [0, 1, 2, 3, 4], 30, "instances 2 and 3 Running again")
    rc, out = kubectl("get", "pj", "svc-five", "-o", "jsonpath={.spec.stoppedInstances}")
    assert rc == 0 and out == "", out
    r = tm("Stop", task.StopRequest(jobId=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 6, "to": 8})]),
           task.StopResponse)
    assert r.error.outOfRange.instanceCount == 5, r  # the service runs on; test_pool_with_work_is_busy deletes it


def test_job_manager_stop_start_some_instances():
    """JobManager.Stop and Start with ranges do what TaskManager's do: the
    Job's spec.stoppedInstances (they were refused UNIMPLEMENTED before)."""
    r = jm("Query", job.QueryRequest(spec=job.QuerySpec(name="svc-five")), job.QueryResponse)
    jid = r.results[0].id.value

    def stopped():
        rc, out = kubectl("get", "pj", "svc-five", "-o", "jsonpath={.spec.stoppedInstances}")
        assert rc == 0, out
        return json.loads(out) if out else []

    def live():
        rc, out = kubectl("get", "pods", "-l", "peloton.io/job=svc-five", "-o", "json")
        items = json.loads(out)["items"]
        got = sorted(int(p["metadata"]["labels"]["peloton.io/instance"]) for p in items
                     if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))
        return got if len(got) == len(items) else None
    rng = [task.InstanceRange(**{"from": 0, "to": 1}), task.InstanceRange(**{"from": 4, "to": 5})]
    jm("Stop", job.StopRequest(id=pb.JobID(value=jid), ranges=rng), job.StopResponse)
    assert stopped() == [{"from": 0, "to": 1}, {"from": 4, "to": 5}], stopped()
    services.wait_until(lambda: live() == [1, 2, 3], 30, "instances 0 and 4 stopped")
    jm("Start", job.StartRequest(id=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 4, "to": 5})]),
       job.StartResponse)
    assert stopped() == [{"from": 0, "to": 1}], stopped()
    services.wait_until(lambda: live() == [1, 2, 3, 4], 30, "instance 4 Running again")
    jm("Start", job.StartRequest(id=pb.JobID(value=jid)), job.StartResponse)  # no ranges: every instance
    assert stopped() == [], stopped()
    services.wait_until(lambda: live() == [0, 1, 2, 3, 4], 30, "all 5 Running again")


def test_pool_with_work_is_busy():
    stub = rpg.ResourceManagerStub(CH)
    d = stub.DeleteResourcePool(rp.DeleteRequest(path=rp.ResourcePoolPath(value="/batch")), timeout=20)
    assert d.error.isBusy.id.value == "batch" and "have not ended" in d.error.isBusy.message, d
    assert kubectl("get", "rp", "batch")[0] == 0
    rc, out = kubectl("delete", "pj", "--all", "-n", "default")
    assert rc == 0, out
    services.wait_until(lambda: "No resources" in kubectl("get", "pj", "-A")[1], 30, "the Jobs gone")
    d = stub.DeleteResourcePool(rp.DeleteRequest(path=rp.ResourcePoolPath(value="/batch")), timeout=20)
    assert not d.HasField("error"), d
    services.wait_until(lambda: kubectl("get", "rp", "batch")[0] != 0, 15, "batch gone")


def test_exit_clean_under_asan():
    CH.close()
    services.stop_clean(PROC, LOG, KSIM)


run_tests("native-job", dict(globals()))
