#!/usr/bin/python3
"""End-to-end: the native API's writes to Jobs, against the whole stack
(redis-server, pelotond with every role, kubelet-sim), with grpcio stubs
generated at test time from proto/ and checked with kubectl:
- v0 UpdateService over a service Job's rolling update: created natively,
  started paused, resumed to success (the pods roll to the new template),
  paused part way and rolled back (the pods roll back), aborted; pause/resume/rollback on an ended update refused;
- v0 JobManager Update (instance count, with the changeLog.version
  precondition), Stop/Start (the Job scaled to 0 and back), Restart (a
  rolling restart with an UpdateID), Refresh/GetCache/GetActiveJobs;
- v0 TaskManager Restart/Stop/Start of instance ranges, GetPodEvents
  returning the scheduler's Events;
- a BATCH job of 100 instances run to completion;
- bad input: unknown job and update ids, bad instance ranges, stale versions;
- YARPC with curl, JSON and protobuf encodings, for UpdateService.GetUpdate."""
import json
import subprocess
import time

import nativeclient
import services
from simlib import run_tests

ROOT = services.ROOT
nativeclient.generate_stubs()
import grpc  # noqa: E402
from mesos.v1 import mesos_pb2 as mesos  # noqa: E402
from peloton.api.v0 import peloton_pb2 as pb  # noqa: E402
from peloton.api.v0.job import job_pb2 as job  # noqa: E402
from peloton.api.v0.respool import respool_pb2 as rp, respool_pb2_grpc as rpg  # noqa: E402
from peloton.api.v0.task import task_pb2 as task  # noqa: E402
from peloton.api.v0.update import update_pb2 as upd  # noqa: E402
from peloton.api.v0.update.svc import update_svc_pb2 as us  # noqa: E402

S = services.start_stack("--roles=all", kubelet=["--nodes=2", "--cpu=16", "--memory=64Gi"], native=True)
PROC, LOG, NPORT, KUBECONFIG, KSIM = S.proc, S.log, S.nport, S.kubeconfig, S.ksim
CH = nativeclient.channel(NPORT)
wait_until = services.wait_until
RUN = "kubelet-sim.peloton.io/run-seconds"


def call(path, req, resp_type, **kw):
    return nativeclient.unary(CH, path, req, resp_type, **kw)


def jm(method, req, resp):
    return call("/peloton.api.job.JobManager/" + method, req, resp)


def tm(method, req, resp):
    return call("/peloton.api.task.TaskManager/" + method, req, resp)


def um(method, req, resp):
    return call("/peloton.api.v0.update.svc.UpdateService/" + method, req, resp)


def status_of(fn):
    """The gRPC status code and details of fn(), which must fail."""
    try:
        fn()
    except grpc.RpcError as e:
        return e.code(), e.details()
    raise AssertionError("the call succeeded")


def kubectl(*args, stdin=None):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin)


def job_obj(name):
    return json.loads(kubectl("get", "pj", name, "-o", "json"))


def pods(name):
    return json.loads(kubectl("get", "pods", "-l", f"peloton.io/job={name}", "-o", "json"))["items"]


def live_tags(name):
    """{tag: count} of the Job's Running pods not being deleted."""
    out = {}
    for p in pods(name):
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
            t = p["metadata"].get("annotations", {}).get("tag", "")
            out[t] = out.get(t, 0) + 1
    return out


def config(name, n, tag, kind=job.SERVICE, run=None, cpu=0.25):
    labels = [pb.Label(key="tag", value=tag)] + ([pb.Label(key=RUN, value=str(run))] if run else [])
    return job.JobConfig(name=name, type=kind, instanceCount=n, respoolID=pb.ResourcePoolID(value="apps"),
                         defaultConfig=task.TaskConfig(name="srv", labels=labels,
                                                       resource=task.ResourceConfig(cpuLimit=cpu, memLimitMb=64),
                                                       command=mesos.CommandInfo(value="serve")))


def jid_of(name):
    return job_obj(name)["metadata"]["uid"]


def ustate(uid):
    return um("GetUpdate", us.GetUpdateRequest(updateId=pb.UpdateID(value=uid)), us.GetUpdateResponse).updateInfo.status.state


WEB = {}


def test_pool_and_a_service_job():
    nativeclient.create_pool(CH, "apps", (20, 32), (16384, 65536))
    c = jm("Create", job.CreateRequest(config=config("web", 4, "v1")), job.CreateResponse)
    assert not c.HasField("error"), c
    WEB["id"] = c.jobId.value
    # kubectl -> native: a quick minReadySeconds so the updates below roll fast
    kubectl("patch", "pj", "web", "--type=merge", "-p", '{"spec":{"updateStrategy":{"minReadySeconds":1}}}')
    wait_until(lambda: live_tags("web") == {"v1": 4}, 30, "web running v1")


def test_update_created_paused_resumed_to_success():
    jid = WEB["id"]
    # no update yet
    lst = um("ListUpdates", us.ListUpdatesRequest(jobID=pb.JobID(value=jid)), us.ListUpdatesResponse)
    assert not lst.updateInfo, lst
    r = um("CreateUpdate", us.CreateUpdateRequest(jobId=pb.JobID(value=jid), jobConfig=config("web", 4, "v2"),
                                                  updateConfig=upd.UpdateConfig(batchSize=1, startPaused=True,
                                                                                rollbackOnFailure=True)),
           us.CreateUpdateResponse)
    uid = r.updateID.value
    assert uid == f"{jid}-1", r
    spec = job_obj("web")["spec"]["updateStrategy"]
    assert spec["batchSize"] == 1 and spec["paused"] is True and spec["rollbackOnFailure"] is True, spec
    assert spec["minReadySeconds"] == 1, spec  # what kubectl set is kept
    wait_until(lambda: ustate(uid) == upd.PAUSED, 20, "the update PAUSED")
    assert job_obj("web")["status"]["update"]["state"] == "PAUSED"
    time.sleep(1)
    assert live_tags("web") == {"v1": 4}, live_tags("web")  # paused: nothing moves
    um("ResumeUpdate", us.ResumeUpdateRequest(updateId=pb.UpdateID(value=uid)), us.ResumeUpdateResponse)
    assert job_obj("web")["spec"]["updateStrategy"]["paused"] is False
    wait_until(lambda: ustate(uid) == upd.SUCCEEDED, 45, "the update SUCCEEDED", every=0.3)
    wait_until(lambda: live_tags("web") == {"v2": 4}, 20, "web running v2")
    info = um("GetUpdate", us.GetUpdateRequest(updateId=pb.UpdateID(value=uid)), us.GetUpdateResponse).updateInfo
    assert info.status.numTasksDone == 4 and info.status.numTasksRemaining == 0, info
    assert info.config.batchSize == 1 and info.config.rollbackOnFailure and info.jobId.value == jid, info
    assert info.configVersion and info.prevConfigVersion and info.configVersion != info.prevConfigVersion, info
    lst = um("ListUpdates", us.ListUpdatesRequest(jobID=pb.JobID(value=jid)), us.ListUpdatesResponse)
    assert [u.updateId.value for u in lst.updateInfo] == [uid], lst
    cache = um("GetUpdateCache", us.GetUpdateCacheRequest(updateId=pb.UpdateID(value=uid)), us.GetUpdateCacheResponse)
    assert cache.state == upd.SUCCEEDED and list(cache.instancesTotal) == [0, 1, 2, 3], cache
    # an ended update can be neither paused nor rolled back
    code, msg = status_of(lambda: um("PauseUpdate", us.PauseUpdateRequest(updateId=pb.UpdateID(value=uid)),
                                     us.PauseUpdateResponse))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "SUCCEEDED" in msg, (code, msg)
    code, _ = status_of(lambda: um("RollbackUpdate", us.RollbackUpdateRequest(updateId=pb.UpdateID(value=uid)),
                                   us.RollbackUpdateResponse))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    WEB["u1"] = uid


def test_update_rolled_back_then_one_aborted():
    jid = WEB["id"]
    r = um("CreateUpdate", us.CreateUpdateRequest(jobId=pb.JobID(value=jid), jobConfig=config("web", 4, "v3"),
                                                  updateConfig=upd.UpdateConfig(batchSize=1)),
           us.CreateUpdateResponse)
    uid = r.updateID.value
    assert uid == f"{jid}-2", r
    # paused once an instance runs v3, then rolled back: the v3 instances return to v2
    wait_until(lambda: live_tags("web").get("v3"), 20, "an instance on v3", every=0.05)
    um("PauseUpdate", us.PauseUpdateRequest(updateId=pb.UpdateID(value=uid)), us.PauseUpdateResponse)
    wait_until(lambda: ustate(uid) == upd.PAUSED, 20, "the second update PAUSED")
    assert 1 <= live_tags("web").get("v3", 0) < 4, live_tags("web")
    um("RollbackUpdate", us.RollbackUpdateRequest(updateId=pb.UpdateID(value=uid)), us.RollbackUpdateResponse)
    wait_until(lambda: ustate(uid) == upd.ROLLED_BACK, 30, "the update ROLLED_BACK", every=0.3)
    wait_until(lambda: live_tags("web") == {"v2": 4}, 20, "every instance back on v2")
    assert "UpdateRolledBack" in kubectl("describe", "pj", "web")
    # the earlier update is no longer the job's
    code, msg = status_of(lambda: ustate(WEB["u1"]))
    assert code == grpc.StatusCode.NOT_FOUND and f"{jid}-2" in msg, (code, msg)
    r = um("CreateUpdate", us.CreateUpdateRequest(jobId=pb.JobID(value=jid), jobConfig=config("web", 4, "v4"),
                                                  updateConfig=upd.UpdateConfig(batchSize=2, startPaused=True)),
           us.CreateUpdateResponse)
    uid = r.updateID.value
    wait_until(lambda: ustate(uid) == upd.PAUSED, 20, "the third update PAUSED")
    um("AbortUpdate", us.AbortUpdateRequest(updateId=pb.UpdateID(value=uid)), us.AbortUpdateResponse)
    wait_until(lambda: ustate(uid) == upd.ABORTED, 20, "the update ABORTED")
    assert job_obj("web")["status"]["update"]["state"] == "ABORTED"
    code, _ = status_of(lambda: um("ResumeUpdate", us.ResumeUpdateRequest(updateId=pb.UpdateID(value=uid)),
                                   us.ResumeUpdateResponse))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    WEB["u3"] = uid


def kjob(tag, paused=False):
    return json.dumps({"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "kweb", "namespace": "default"},
                       "spec": {"type": "STATELESS", "resourcePool": "apps", "instanceCount": 2,
                                "updateStrategy": {"batchSize": 1, "minReadySeconds": 1, "paused": paused},
                                "template": {"metadata": {"annotations": {"tag": tag}},
                                             "spec": {"containers": [{"name": "c", "image": "nginx:1",
                                                                      "resources": {"requests": {"cpu": "100m"}}}]}}}})


def test_kubectl_update_driven_natively():
    kubectl("apply", "-f", "-", stdin=kjob("k1"))
    wait_until(lambda: live_tags("kweb") == {"k1": 2}, 30, "kweb running")
    jid = jid_of("kweb")
    kubectl("apply", "-f", "-", stdin=kjob("k2", paused=True))  # a new template, the update paused

    def listed():
        lst = um("ListUpdates", us.ListUpdatesRequest(jobID=pb.JobID(value=jid)), us.ListUpdatesResponse)
        return [u for u in lst.updateInfo if u.status.state == upd.PAUSED]
    u = wait_until(listed, 20, "kubectl's update listed PAUSED")[0]
    assert u.updateId.value == f"{jid}-0" and u.config.batchSize == 1 and u.config.startPaused, u
    um("ResumeUpdate", us.ResumeUpdateRequest(updateId=u.updateId), us.ResumeUpdateResponse)
    assert job_obj("kweb")["spec"]["updateStrategy"]["paused"] is False
    wait_until(lambda: ustate(u.updateId.value) == upd.SUCCEEDED, 30, "kubectl's update SUCCEEDED", every=0.3)
    assert live_tags("kweb") == {"k2": 2}, live_tags("kweb")
    kubectl("delete", "pj", "kweb", "--wait=false")


def test_update_bad_input():
    code, msg = status_of(lambda: ustate("nonsense"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "updateId" in msg, (code, msg)
    code, _ = status_of(lambda: ustate("00000000-0000-0000-0000-000000000000-1"))
    assert code == grpc.StatusCode.NOT_FOUND
    code, msg = status_of(lambda: um("CreateUpdate", us.CreateUpdateRequest(
        jobId=pb.JobID(value=WEB["id"]), jobConfig=config("web", 4, "v9"),
        updateConfig=upd.UpdateConfig(batchPercentage=150)), us.CreateUpdateResponse))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "batchPercentage" in msg, (code, msg)
    stale = config("web", 4, "v9")
    stale.changeLog.version = 1
    code, msg = status_of(lambda: um("CreateUpdate", us.CreateUpdateRequest(
        jobId=pb.JobID(value=WEB["id"]), jobConfig=stale), us.CreateUpdateResponse))
    assert code == grpc.StatusCode.ABORTED and "stale version 1" in msg, (code, msg)


def test_yarpc_get_update_json_and_proto():
    uid = WEB["u3"]
    base = ["curl", "-s", "-X", "POST", f"http://127.0.0.1:{NPORT}/api/v1", "-H", "Rpc-Caller: t",
            "-H", "Rpc-Service: peloton-jobmgr", "-H", "Rpc-Procedure: peloton.api.v0.update.svc.UpdateService::GetUpdate"]
    p = subprocess.run(base + ["-H", "Rpc-Encoding: json", "-d", json.dumps({"updateId": {"value": uid}})],
                       capture_output=True, text=True, timeout=30)
    doc = json.loads(p.stdout)
    assert doc["updateInfo"]["status"]["state"] == "ABORTED" and doc["updateInfo"]["updateId"]["value"] == uid, doc
    p = subprocess.run(base + ["-H", "Rpc-Encoding: proto", "--data-binary", "@-"],
                       input=us.GetUpdateRequest(updateId=pb.UpdateID(value=uid)).SerializeToString(),
                       capture_output=True, timeout=30)
    info = us.GetUpdateResponse.FromString(p.stdout).updateInfo
    assert info.status.state == upd.ABORTED and info.jobId.value == WEB["id"], info
    p = subprocess.run(base + ["-H", "Rpc-Encoding: json", "-i", "-d", json.dumps({"updateId": {"value": "x"}})],
                       capture_output=True, text=True, timeout=30)
    assert "Rpc-Error-Code: invalid-argument" in p.stdout or "rpc-error-code: invalid-argument" in p.stdout.lower(), p.stdout


def test_job_update_stop_start_restart():
    jid = WEB["id"]
    g = jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse)
    ver = g.jobInfo.config.changeLog.version
    cfg = config("web", 5, "v2")
    cfg.changeLog.version = ver
    r = jm("Update", job.UpdateRequest(id=pb.JobID(value=jid), config=cfg), job.UpdateResponse)
    assert not r.HasField("error") and "configuration version" in r.message, r
    assert job_obj("web")["spec"]["instanceCount"] == 5
    wait_until(lambda: live_tags("web") == {"v2": 5}, 30, "5 instances of v2")
    code, msg = status_of(lambda: jm("Update", job.UpdateRequest(id=pb.JobID(value=jid), config=cfg), job.UpdateResponse))
    assert code == grpc.StatusCode.ABORTED and "stale version" in msg, (code, msg)  # ver is old now
    bad = config("web", 5, "v2", kind=job.BATCH)
    r = jm("Update", job.UpdateRequest(id=pb.JobID(value=jid), config=bad), job.UpdateResponse)
    assert "config.type" in r.error.invalidConfig.message, r
    r = jm("Update", job.UpdateRequest(id=pb.JobID(value="00000000-0000-0000-0000-000000000000"), config=cfg),
           job.UpdateResponse)
    assert r.error.jobNotFound.id.value == "00000000-0000-0000-0000-000000000000", r
    # Stop: the Job scaled to 0, its count kept; Start brings them back
    s = jm("Stop", job.StopRequest(id=pb.JobID(value=jid)), job.StopResponse)
    obj = job_obj("web")
    assert obj["spec"]["instanceCount"] == 0 and obj["metadata"]["annotations"]["peloton.io/stopped-instance-count"] == "5"
    assert s.resourceVersion == obj["metadata"]["generation"], (s, obj["metadata"])
    wait_until(lambda: not pods("web"), 30, "web's pods gone")
    rt = wait_until(lambda: (lambda g: g.jobInfo.runtime.state == job.KILLED and g.jobInfo.runtime)(
        jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse)), 20, "web KILLED")
    assert rt.goalState == job.KILLED, rt
    q = jm("Query", job.QueryRequest(spec=job.QuerySpec(jobStates=[job.KILLED])), job.QueryResponse)
    assert [s.name for s in q.results] == ["web"], q
    code, msg = status_of(lambda: jm("Start", job.StartRequest(id=pb.JobID(value=jid), resourceVersion=1),
                                     job.StartResponse))
    assert code == grpc.StatusCode.ABORTED, (code, msg)
    jm("Start", job.StartRequest(id=pb.JobID(value=jid), resourceVersion=s.resourceVersion), job.StartResponse)
    wait_until(lambda: live_tags("web") == {"v2": 5}, 30, "web back")
    assert jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse).jobInfo.runtime.goalState == job.RUNNING
    assert "peloton.io/stopped-instance-count" not in job_obj("web")["metadata"]["annotations"]
    # Restart: a rolling restart, an update of its own
    before = {p["metadata"]["uid"] for p in pods("web")}
    r = jm("Restart", job.RestartRequest(id=pb.JobID(value=jid), restartConfig=job.RestartConfig(batchSize=3)),
           job.RestartResponse)
    assert r.updateID.value.startswith(jid + "-"), r
    assert job_obj("web")["spec"]["updateStrategy"]["batchSize"] == 3
    wait_until(lambda: ustate(r.updateID.value) == upd.SUCCEEDED, 45, "the restart SUCCEEDED", every=0.3)
    wait_until(lambda: live_tags("web") == {"v2": 5}, 20, "web running after the restart")
    assert not before & {p["metadata"]["uid"] for p in pods("web") if p["status"].get("phase") == "Running"}
    # the restart's mark is no part of the config, and an Update that changes no template starts no update
    g = jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse)
    assert "peloton.io/restart" not in [lb.key for lb in g.jobInfo.config.defaultConfig.labels], g.jobInfo.config
    cfg = config("web", 5, "v2")
    cfg.changeLog.version = g.jobInfo.config.changeLog.version
    jm("Update", job.UpdateRequest(id=pb.JobID(value=jid), config=cfg), job.UpdateResponse)
    lst = um("ListUpdates", us.ListUpdatesRequest(jobID=pb.JobID(value=jid)), us.ListUpdatesResponse)
    assert [u.updateId.value for u in lst.updateInfo] == [r.updateID.value], lst
    # bad ranges
    code, msg = status_of(lambda: jm("Restart", job.RestartRequest(
        id=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 3, "to": 1})]), job.RestartResponse))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "ranges[0]" in msg, (code, msg)
    code, msg = status_of(lambda: jm("Stop", job.StopRequest(
        id=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 7, "to": 9})]), job.StopResponse))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "ranges[0].from: 7 is past" in msg, (code, msg)
    code, _ = status_of(lambda: jm("Stop", job.StopRequest(id=pb.JobID(value="nope")), job.StopResponse))
    assert code == grpc.StatusCode.NOT_FOUND
    # the cache methods
    assert jm("GetCache", job.GetCacheRequest(id=pb.JobID(value=jid)), job.GetCacheResponse).config.instanceCount == 5
    jm("Refresh", job.RefreshRequest(id=pb.JobID(value=jid)), job.RefreshResponse)
    act = jm("GetActiveJobs", job.GetActiveJobsRequest(), job.GetActiveJobsResponse)
    assert jid in [i.value for i in act.ids], act


def test_task_restart_stop_start():
    jid = WEB["id"]
    one = {p["metadata"]["labels"]["peloton.io/instance"]: p["metadata"]["uid"] for p in pods("web")}
    r = tm("Restart", task.RestartRequest(jobId=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 1, "to": 3})]),
           task.RestartResponse)
    assert not r.HasField("notFound") and not r.HasField("outOfRange"), r

    def restarted():
        now = {p["metadata"]["labels"]["peloton.io/instance"]: p["metadata"]["uid"] for p in pods("web")
               if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}
        return len(now) == 5 and now["0"] == one["0"] and now["1"] != one["1"] and now["2"] != one["2"] and now
    wait_until(restarted, 30, "instances 1 and 2 restarted, the others not")
    r = tm("Restart", task.RestartRequest(jobId=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 5, "to": 7})]),
           task.RestartResponse)
    assert r.outOfRange.instanceCount == 5, r
    r = tm("Stop", task.StopRequest(jobId=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 0, "to": 2})]),
           task.StopResponse)
    assert list(r.stoppedInstanceIds) == [0, 1] and not r.HasField("error"), r  # spec.stoppedInstances
    r = tm("Stop", task.StopRequest(jobId=pb.JobID(value=jid)), task.StopResponse)
    assert list(r.stoppedInstanceIds) == [0, 1, 2, 3, 4], r
    wait_until(lambda: not pods("web"), 30, "every task stopped")
    assert tm("Get", task.GetRequest(jobId=pb.JobID(value=jid), instanceId=0), task.GetResponse).HasField("outOfRange")
    r = tm("Start", task.StartRequest(jobId=pb.JobID(value=jid)), task.StartResponse)
    assert list(r.startedInstanceIds) == [0, 1, 2, 3, 4], r
    wait_until(lambda: live_tags("web") == {"v2": 5}, 30, "every task started")
    r = tm("Stop", task.StopRequest(jobId=pb.JobID(value="00000000-0000-0000-0000-000000000000")), task.StopResponse)
    assert r.error.notFound.id.value == "00000000-0000-0000-0000-000000000000", r


def test_pod_events_are_the_schedulers():
    # more cpu than the pool's limit: the pod waits, and the resource manager says why
    c = jm("Create", job.CreateRequest(config=config("huge", 1, "h", kind=job.BATCH, cpu=64)), job.CreateResponse)
    jid = c.jobId.value

    def events():
        r = tm("GetPodEvents", task.GetPodEventsRequest(jobId=pb.JobID(value=jid), instanceId=0), task.GetPodEventsResponse)
        return [e for e in r.result if e.reason == "FailedScheduling"] and r
    r = wait_until(events, 30, "a FailedScheduling event")
    e = [e for e in r.result if e.reason == "FailedScheduling"][0]
    assert e.actualState == "PENDING" and e.goalState == "SUCCEEDED" and e.taskId.value == f"{jid}-0-1", e
    assert e.message and e.timestamp, e
    kev = kubectl("get", "events", "--field-selector", "involvedObject.kind=Pod,reason=FailedScheduling", "-o", "json")
    assert e.message in [x["message"] for x in json.loads(kev)["items"]]
    r = tm("GetPodEvents", task.GetPodEventsRequest(jobId=pb.JobID(value=jid), instanceId=3), task.GetPodEventsResponse)
    assert "out of range" in r.error.message, r
    r = tm("GetPodEvents", task.GetPodEventsRequest(jobId=pb.JobID(value="nope")), task.GetPodEventsResponse)
    assert "not found" in r.error.message, r
    code, msg = status_of(lambda: tm("BrowseSandbox", task.BrowseSandboxRequest(), task.BrowseSandboxResponse))
    assert code == grpc.StatusCode.UNIMPLEMENTED and "sandbox" in msg, (code, msg)
    jm("Delete", job.DeleteRequest(id=pb.JobID(value=jid)), job.DeleteResponse)


def test_batch_job_of_100_runs_to_completion():
    c = jm("Create", job.CreateRequest(config=config("hundred", 100, "b", kind=job.BATCH, run=1, cpu=0.1)),
           job.CreateResponse)
    jid = c.jobId.value
    t0 = time.monotonic()

    def done():
        g = jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse)
        return g.jobInfo.runtime.state == job.SUCCEEDED and g
    g = wait_until(done, 60, "100 instances SUCCEEDED", every=0.5)
    assert g.jobInfo.runtime.taskStats["SUCCEEDED"] == 100, dict(g.jobInfo.runtime.taskStats)
    print(f"  100-instance BATCH job: SUCCEEDED in {time.monotonic() - t0:.1f}s")
    assert kubectl("get", "pj", "hundred", "-o", "jsonpath={.status.state}") == "SUCCEEDED"
    jm("Delete", job.DeleteRequest(id=pb.JobID(value=jid)), job.DeleteResponse)


def test_batch_instances_restarted():
    # a Restart of some instances of a running BATCH job: a new run of each, the others untouched
    c = jm("Create", job.CreateRequest(config=config("long", 3, "l", kind=job.BATCH, run=60, cpu=0.1)),
           job.CreateResponse)
    jid = c.jobId.value
    wait_until(lambda: live_tags("long") == {"l": 3}, 30, "long running")
    jm("Restart", job.RestartRequest(id=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 0, "to": 1})]),
       job.RestartResponse)

    def runs():
        return {p["metadata"]["labels"]["peloton.io/instance"]: p["metadata"]["annotations"].get("peloton.io/run")
                for p in pods("long") if p["status"].get("phase") == "Running"}
    wait_until(lambda: runs() == {"0": "2", "1": "1", "2": "1"}, 30, "instance 0's second run")
    t = tm("Get", task.GetRequest(jobId=pb.JobID(value=jid), instanceId=0), task.GetResponse)
    assert t.result.runtime.mesosTaskId.value == f"{jid}-0-2", t.result.runtime
    jm("Delete", job.DeleteRequest(id=pb.JobID(value=jid)), job.DeleteResponse)


def test_api_server_refusals_map_alike():
    # one mapping for every service: the API server's 403 (a pool being deleted admits no new Job) is
    # PERMISSION_DENIED for the JobManager as for the ResourceManager
    rpg.ResourceManagerStub(CH).CreateResourcePool(rp.CreateRequest(config=rp.ResourcePoolConfig(
        name="doomed", parent=pb.ResourcePoolID(value="root"),
        resources=[rp.ResourceConfig(kind="cpu", reservation=1, limit=2, share=1),
                   rp.ResourceConfig(kind="memory", reservation=1024, limit=2048, share=1)])), timeout=20)
    holder = config("holder", 1, "h", kind=job.BATCH, run=120, cpu=0.1)
    holder.respoolID.value = "doomed"
    jid = jm("Create", job.CreateRequest(config=holder), job.CreateResponse).jobId.value
    wait_until(lambda: live_tags("holder") == {"h": 1}, 30, "holder running")
    kubectl("delete", "rp", "doomed", "--wait=false")
    late = config("late", 1, "l", kind=job.BATCH, cpu=0.1)
    late.respoolID.value = "doomed"
    code, msg = status_of(lambda: jm("Create", job.CreateRequest(config=late), job.CreateResponse))
    assert code == grpc.StatusCode.PERMISSION_DENIED and "being deleted" in msg, (code, msg)
    jm("Delete", job.DeleteRequest(id=pb.JobID(value=jid)), job.DeleteResponse)


def test_exit_clean_under_asan():
    CH.close()
    services.stop_clean(PROC, LOG, KSIM)


run_tests("native-update", dict(globals()))
