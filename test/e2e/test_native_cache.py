#!/usr/bin/python3
"""End-to-end: the native role's read cache (docs/native-api.md "Read
cache"). v0 JobManager.Get and v1alpha JobService.GetJob answer from watch-fed
copies of the Jobs; these tests hold them to what a read through the API
server gave:

- read-your-writes: a Get right after the client's own Create, Update, Stop,
  Delete through the native API sees the write, every time (many rounds,
  both API versions);
- a write made with kubectl shows (bounded wait);
- TaskManager Get/List read the cached pods: pods made with kubectl show, and
  a Restart's own pod deletion shows in the Get right after it;
- a cache that is not current is not served: the native role runs in its own
  process against API server A; with A stopped, the Job is changed through
  API server B (same Redis); Get then fails (UNAVAILABLE), never answers the
  old Job; with A back on its port, the first Get that answers has the change.
"""
import http.client
import json
import os
import subprocess
import time
import urllib.request

import grpc
import nativeclient
import services
from simlib import run_tests

nativeclient.generate_stubs()
from peloton.api.v0 import peloton_pb2 as pb  # noqa: E402
from peloton.api.v0.job import job_pb2 as job  # noqa: E402
from peloton.api.v0.task import task_pb2 as task  # noqa: E402
from mesos.v1 import mesos_pb2 as mesos  # noqa: E402
from peloton.api.v1alpha import peloton_pb2 as v1pb  # noqa: E402
from peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as v1svc  # noqa: E402

REDIS = services.start_redis()
APORT = services.free_port()  # API server A: the native role's
NPORT = services.free_port()
D = services.tempdir()


def start_api(port):
    """API server A on its fixed port (restarted on the same one)."""
    log = open(os.path.join(D, f"api-{time.monotonic_ns()}.log"), "w")
    p = subprocess.Popen([services.PELOTOND, f"--port={port}", f"--redis=127.0.0.1:{REDIS}", "--roles=apiserver",
                          f"--crds={os.path.join(services.ROOT, 'crds')}", "--insecure-allow-anonymous"],
                         stdout=log, stderr=subprocess.STDOUT)
    services._procs.append(p)
    services.wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read() == b"ok",
                      what="API server A")
    return p


API_A = start_api(APORT)
API_B, BPORT, _ = services.start_pelotond(REDIS)  # API server B, for writes while A is down
KUBECONFIG_B = services.kubeconfig(BPORT)
NLOG = os.path.join(D, "native.log")
NATIVE = subprocess.Popen([services.PELOTOND, "--roles=native", f"--native-port={NPORT}",
                           f"--server=http://127.0.0.1:{APORT}"], stdout=open(NLOG, "w"), stderr=subprocess.STDOUT)
services._procs.append(NATIVE)
services.wait_port(NPORT, "native role")
CH = nativeclient.channel(NPORT)


def jm(method, req, resp, **kw):
    return nativeclient.unary(CH, "/peloton.api.job.JobManager/" + method, req, resp, **kw)


def v1get(jid, **kw):
    return nativeclient.unary(CH, "/peloton.api.v1alpha.job.stateless.svc.JobService/GetJob",
                              v1svc.GetJobRequest(job_id=v1pb.JobID(value=jid)), v1svc.GetJobResponse, **kw)


def config(name, n, desc=""):
    return job.JobConfig(name=name, type=job.BATCH, instanceCount=n, description=desc,
                         respoolID=pb.ResourcePoolID(value="cache"),
                         defaultConfig=task.TaskConfig(name="w", resource=task.ResourceConfig(cpuLimit=0.1, memLimitMb=16),
                                                       command=mesos.CommandInfo(value="true")))


def get(jid):
    return jm("Get", job.GetRequest(id=pb.JobID(value=jid)), job.GetResponse)


def get_now(jid):
    """Get without waiting for the channel (the native role is up; its API server may not be)."""
    return CH.unary_unary("/peloton.api.job.JobManager/Get", request_serializer=job.GetRequest.SerializeToString,
                          response_deserializer=job.GetResponse.FromString)(
        job.GetRequest(id=pb.JobID(value=jid)), timeout=5)


def test_pool():
    nativeclient.create_pool(CH, "cache", (4, 8), (1024, 4096))


def test_read_your_writes_create_update_delete():
    """Each write, then at once a read by both API versions: the read sees it.
    The cache is warm and current throughout (other Jobs' reads hit it)."""
    warm = jm("Create", job.CreateRequest(config=config("warm", 1)), job.CreateResponse).jobId.value
    for _ in range(20):
        assert get(warm).jobInfo.config.name == "warm"
    for i in range(15):
        name = f"ryw-{i}"
        jid = jm("Create", job.CreateRequest(config=config(name, 1, "first")), job.CreateResponse).jobId.value
        g = get(jid)
        assert g.jobInfo.id.value == jid and g.jobInfo.config.description == "first", (i, g)
        assert v1get(jid).job_info.spec.name == name
        cfg = config(name, 2, "second")
        cfg.changeLog.version = g.jobInfo.config.changeLog.version
        u = jm("Update", job.UpdateRequest(id=pb.JobID(value=jid), config=cfg), job.UpdateResponse)
        assert not u.HasField("error"), u
        g = get(jid)
        assert g.jobInfo.config.description == "second" and g.jobInfo.config.instanceCount == 2, (i, g)
        assert v1get(jid).job_info.spec.instance_count == 2
        d = jm("Delete", job.DeleteRequest(id=pb.JobID(value=jid)), job.DeleteResponse)
        assert not d.HasField("error"), d
        g = get(jid)
        assert g.HasField("error") and g.error.notFound.id.value == jid, (i, g)
        try:
            v1get(jid)
            raise AssertionError(f"v1 GetJob found deleted job {jid}")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e


def test_stop_seen_at_once():
    jid = jm("Create", job.CreateRequest(config=config("stopper", 2)), job.CreateResponse).jobId.value
    assert get(jid).jobInfo.runtime.goalState == job.SUCCEEDED
    jm("Stop", job.StopRequest(id=pb.JobID(value=jid)), job.StopResponse)
    assert get(jid).jobInfo.runtime.goalState == job.KILLED


def yarpc(proc, body, enc):
    c = http.client.HTTPConnection("127.0.0.1", NPORT, timeout=20)
    c.request("POST", "/api/v1", body=body, headers={"Rpc-Procedure": proc, "Rpc-Encoding": enc,
                                                     "Rpc-Caller": "test", "Rpc-Service": "peloton"})
    r = c.getresponse()
    return r.status, r.read()


def test_cached_reply_on_every_transport():
    """A reply kept packed with the Job is the same message over gRPC, YARPC
    proto and YARPC JSON, for both API versions, call after call."""
    jid = jm("Create", job.CreateRequest(config=config("wire", 3, "on the wire")), job.CreateResponse).jobId.value
    want = get(jid)
    assert want.jobInfo.config.description == "on the wire"
    req = job.GetRequest(id=pb.JobID(value=jid)).SerializeToString()
    for _ in range(3):
        assert get(jid) == want
        st, body = yarpc("peloton.api.job.JobManager::Get", req, "proto")
        assert st == 200 and job.GetResponse.FromString(body) == want, (st, body[:200])
        st, body = yarpc("peloton.api.job.JobManager::Get", json.dumps({"id": {"value": jid}}), "json")
        j = json.loads(body)
        assert st == 200 and j["jobInfo"]["config"]["description"] == "on the wire", (st, j)
        assert j["jobInfo"]["config"]["instanceCount"] == 3, j
        v1 = v1get(jid)
        st, body = yarpc("peloton.api.v1alpha.job.stateless.svc.JobService::GetJob",
                         json.dumps({"jobId": {"value": jid}, "summaryOnly": True}), "json")
        j = json.loads(body)
        assert st == 200 and j["summary"]["name"] == "wire" and v1.job_info.spec.name == "wire", (st, j)


def kubectl_b(*args):
    return services.kubectl(KUBECONFIG_B, *args)


def kubectl_b_stdin(text):
    rc, out = services.kubectl_rc(KUBECONFIG_B, "create", "-f", "-", stdin=text)
    assert rc == 0, out


def test_kubectl_write_shows():
    jid = jm("Create", job.CreateRequest(config=config("kube-edit", 1, "native")), job.CreateResponse).jobId.value
    assert get(jid).jobInfo.config.description == "native"
    kubectl_b("annotate", "--overwrite", "pj", "kube-edit", "peloton.io/description=kubectl")
    services.wait_until(lambda: get(jid).jobInfo.config.description == "kubectl", 5, "kubectl's write in Get")
    services.wait_until(lambda: get(jid).jobInfo.config.description == "kubectl" and
                        v1get(jid).job_info.spec.description == "kubectl", 5, "kubectl's write in GetJob")


def tm(method, req, resp):
    return nativeclient.unary(CH, "/peloton.api.task.TaskManager/" + method, req, resp)


def test_tasks_from_the_cache():
    """TaskManager reads from the cached pods: pods made with kubectl show;
    a Restart's own pod deletion shows in the Get right after it."""
    jid = jm("Create", job.CreateRequest(config=config("tasks", 2)), job.CreateResponse).jobId.value
    lst = tm("List", task.ListRequest(jobId=pb.JobID(value=jid)), task.ListResponse)
    assert {i: t.runtime.state for i, t in lst.result.value.items()} == {0: task.INITIALIZED, 1: task.INITIALIZED}, lst
    def make_pod(i, run):  # no job manager runs here: the pods are made by hand, as it would make them
        kubectl_b_stdin(json.dumps({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"tasks-{i}-{run}", "namespace": "default",
                         "labels": {"peloton.io/job": "tasks", "peloton.io/instance": str(i)},
                         "annotations": {"peloton.io/run": str(run)}},
            "spec": {"containers": [{"name": "w", "image": "busybox"}]}}))

    def states():
        return {i: t.runtime.state for i, t in
                tm("List", task.ListRequest(jobId=pb.JobID(value=jid)), task.ListResponse).result.value.items()}

    def get0():
        return tm("Get", task.GetRequest(jobId=pb.JobID(value=jid), instanceId=0), task.GetResponse).result.runtime

    make_pod(0, 1)
    make_pod(1, 1)
    services.wait_until(lambda: states() == {0: task.PENDING, 1: task.PENDING}, 5, "kubectl's pods in List")
    for run in range(2, 18):  # each round: the pod deleted by Restart, then a Get at once
        r = tm("Restart", task.RestartRequest(jobId=pb.JobID(value=jid), ranges=[task.InstanceRange(**{"from": 0, "to": 1})]),
               task.RestartResponse)
        assert not r.HasField("notFound") and not r.HasField("outOfRange"), r
        g = get0()
        assert g.state != task.PENDING, (run, g)  # the pod deleted (or being deleted), not the old copy
        assert states()[1] == task.PENDING
        make_pod(0, run)
        services.wait_until(lambda: get0().mesosTaskId.value == f"{jid}-0-{run}" and get0().state == task.PENDING, 5,
                            f"run {run}'s pod in Get")


def test_not_current_is_not_served():
    global API_A
    jid = jm("Create", job.CreateRequest(config=config("outage", 1, "before")), job.CreateResponse).jobId.value
    for _ in range(10):  # warm: served from the cache
        assert get(jid).jobInfo.config.description == "before"
    assert services.stop(API_A) == 0
    kubectl_b("annotate", "--overwrite", "pj", "outage", "peloton.io/description=during")
    for _ in range(10):
        try:
            g = get_now(jid)
            raise AssertionError(f"answered with the API server down: {g.jobInfo.config.description!r}")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    API_A = start_api(APORT)
    g = None
    deadline = time.monotonic() + 10
    while g is None and time.monotonic() < deadline:
        try:
            g = get_now(jid)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            time.sleep(0.02)
    assert g is not None, "no answer once the API server was back"
    assert g.jobInfo.config.description == "during", g  # never the cache's old copy
    assert v1get(jid).job_info.spec.description == "during"
    # and the cache comes back: reads keep answering the new state
    for _ in range(10):
        assert get(jid).jobInfo.config.description == "during"


def test_zz_stop():
    CH.close()
    assert NATIVE.poll() is None, open(NLOG).read()[-3000:]
    assert services.stop(NATIVE) == 0, open(NLOG).read()[-3000:]
    services.stop_all()


run_tests("native-cache", dict(globals()))
