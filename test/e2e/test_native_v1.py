#!/usr/bin/python3
"""End-to-end: the v1alpha native services (stateless JobService, WatchService)
over Job and Pod objects, and the gRPC server streaming under them, against the
whole stack (redis-server, pelotond with every role, kubelet-sim). A stateless
job created natively shows in kubectl; a Job applied with kubectl is returned
by GetJob; ReplaceJob rolls the pods; ListPods streams every pod; Watch sees
what kubectl changes and ends on Cancel; a client that cancels mid-stream, and
one that never reads, leave the server serving the others."""
import json
import socket
import struct
import subprocess
import threading
import time

import nativeclient
import services
from simlib import run_tests

ROOT = services.ROOT
nativeclient.generate_stubs()
import grpc  # noqa: E402
from mesos.v1 import mesos_pb2 as mesos  # noqa: E402
from peloton.api.v1alpha import peloton_pb2 as pb  # noqa: E402
from peloton.api.v1alpha.job.stateless import stateless_pb2 as sl  # noqa: E402
from peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as js, stateless_svc_pb2_grpc as jsg  # noqa: E402
from peloton.api.v1alpha.pod import pod_pb2 as pod  # noqa: E402
from peloton.api.v1alpha.pod.svc import pod_svc_pb2 as ps, pod_svc_pb2_grpc as psg  # noqa: E402
from peloton.api.v1alpha.respool import respool_pb2 as rp1  # noqa: E402
from peloton.api.v1alpha.respool.svc import respool_svc_pb2 as rs, respool_svc_pb2_grpc as rsg  # noqa: E402
from peloton.api.v1alpha.watch import watch_pb2 as wf  # noqa: E402
from peloton.api.v1alpha.watch.svc import watch_svc_pb2 as ws, watch_svc_pb2_grpc as wsg  # noqa: E402

S = services.start_stack("--roles=all", kubelet=["--nodes=2", "--cpu=16", "--memory=64Gi", "--pods=300"], native=True)
PROC, LOG, NPORT, KUBECONFIG, KSIM = S.proc, S.log, S.nport, S.kubeconfig, S.ksim
CH = nativeclient.channel(NPORT)
JOBS = jsg.JobServiceStub(CH)
WATCH = wsg.WatchServiceStub(CH)
PODS = psg.PodServiceStub(CH)
POOLS = rsg.ResourcePoolServiceStub(CH)
T = 20  # seconds for a unary call


def kubectl(*args, stdin=None):
    return services.kubectl_rc(KUBECONFIG, *args, stdin=stdin)


def spec(name, n, cmd="sleep 3600", image="busybox:1.36"):
    return sl.JobSpec(
        name=name, owner="alice", owning_team="web", instance_count=n, labels=[pb.Label(key="tier", value="web")],
        respool_id=pb.ResourcePoolID(value="svc"), sla=sl.SlaSpec(priority=3, preemptible=False),
        default_spec=pod.PodSpec(
            labels=[pb.Label(key="app", value=name)],
            containers=[pod.ContainerSpec(
                name="main", resource=pod.ResourceSpec(cpu_limit=0.05, mem_limit_mb=16),
                container=mesos.ContainerInfo(type=mesos.ContainerInfo.DOCKER,
                                              docker=mesos.ContainerInfo.DockerInfo(image=image)),
                command=mesos.CommandInfo(value=cmd))]))


def get(jid, **kw):
    return JOBS.GetJob(js.GetJobRequest(job_id=pb.JobID(value=jid), **kw), timeout=T)


def list_pods(jid):
    return [p for r in JOBS.ListPods(js.ListPodsRequest(job_id=pb.JobID(value=jid)), timeout=T) for p in r.pods]


STATE = {}


def test_pool():
    nativeclient.create_pool(CH, "svc", (16, 32), (16384, 65536), timeout=T)


def test_create_job_shows_in_kubectl_and_runs():
    r = JOBS.CreateJob(js.CreateJobRequest(spec=spec("Web_Front", 3)), timeout=T)
    assert r.job_id.value and r.version.value == "1", r
    jid = STATE["web"] = r.job_id.value
    rc, out = kubectl("get", "pj", "web-front", "-o", "json")
    assert rc == 0, out
    obj = json.loads(out)
    assert obj["metadata"]["uid"] == jid and obj["spec"]["type"] == "STATELESS", obj["metadata"]
    c = obj["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["/bin/sh", "-c", "sleep 3600"] and c["resources"]["requests"] == {"cpu": "50m", "memory": "16Mi"}, c
    g = services.wait_until(lambda: (lambda g: g.job_info.status.pod_stats.get("POD_STATE_RUNNING") == 3 and g)(get(jid)),
                            20, "3 pods running")
    s = g.job_info.spec
    assert s.name == "Web_Front" and s.owner == "alice" and s.instance_count == 3 and s.respool_id.value == "svc", s
    assert s.default_spec.containers[0].resource.cpu_limit == 0.05 and s.default_spec.containers[0].command.value == "sleep 3600"
    assert [(l.key, l.value) for l in s.labels] == [("tier", "web")], s.labels
    assert g.job_info.status.state == sl.JOB_STATE_RUNNING and g.job_info.status.desired_state == sl.JOB_STATE_RUNNING
    assert get(jid, summary_only=True).summary.name == "Web_Front"
    r = JOBS.GetJobIDFromJobName(js.GetJobIDFromJobNameRequest(job_name="Web_Front"), timeout=T)
    assert [i.value for i in r.job_id] == [jid], r


def test_kubectl_applied_job_is_returned_by_get_job():
    doc = {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "kweb", "namespace": "default"},
           "spec": {"type": "STATELESS", "resourcePool": "svc", "instanceCount": 2,
                    "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1", "command": ["nginx"],
                                                          "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}
    rc, out = kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    assert rc == 0, out
    rc, uid = kubectl("get", "pj", "kweb", "-o", "jsonpath={.metadata.uid}")
    g = get(uid)
    c = g.job_info.spec.default_spec.containers[0]
    assert g.job_info.job_id.value == uid and g.job_info.spec.instance_count == 2, g
    assert c.container.docker.image == "nginx:1" and c.resource.mem_limit_mb == 64 and c.command.value == "nginx", c
    jobs = [j for r in JOBS.ListJobs(js.ListJobsRequest(), timeout=T) for j in r.jobs]
    assert {"kweb", "Web_Front"} <= {j.name for j in jobs}, jobs
    q = JOBS.QueryJobs(js.QueryJobsRequest(spec=sl.QuerySpec(owner="alice")), timeout=T)
    assert [j.name for j in q.records] == ["Web_Front"] and q.pagination.total == 1, q


def test_list_pods_streams_every_pod():
    r = JOBS.CreateJob(js.CreateJobRequest(spec=spec("many", 250)), timeout=T)
    jid = STATE["many"] = r.job_id.value
    msgs = list(JOBS.ListPods(js.ListPodsRequest(job_id=pb.JobID(value=jid)), timeout=T))
    assert len(msgs) == 3, [len(m.pods) for m in msgs]  # batches of 100
    names = [p.pod_name.value for m in msgs for p in m.pods]
    assert names == [f"{jid}-{i}" for i in range(250)], names[:3]
    services.wait_until(lambda: sum(p.status.state == pod.POD_STATE_RUNNING for p in list_pods(jid)) == 250, 30,
                        "250 pods running")
    p = list_pods(jid)[7]
    assert p.images == {"main": "busybox:1.36"} and p.status.host.startswith("sim-node-"), p
    assert p.status.pod_id.value == f"{jid}-7-1", p.status
    part = [p for r in JOBS.ListPods(js.ListPodsRequest(job_id=pb.JobID(value=jid), range=pod.InstanceIDRange(
        **{"from": 240, "to": 300})), timeout=T) for p in r.pods]
    assert [p.pod_name.value for p in part] == [f"{jid}-{i}" for i in range(240, 250)], part


def test_replace_job_rolls_the_pods():
    jid = STATE["web"]
    # an instance counts as updated once it stayed Running this long (docs/crds.md): 1 s keeps the test short
    rc, out = kubectl("patch", "pj", "web-front", "--type=merge", "-p", '{"spec":{"updateStrategy":{"minReadySeconds":1}}}')
    assert rc == 0, out
    before = {p.pod_name.value: p.status.pod_id.value for p in list_pods(jid)}
    v = get(jid).job_info.status.version.value
    try:
        JOBS.ReplaceJob(js.ReplaceJobRequest(job_id=pb.JobID(value=jid), version=pb.EntityVersion(value="1"),
                                             spec=spec("Web_Front", 3, cmd="sleep 7200")), timeout=T)
        raise AssertionError("a stale version was taken")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.ABORTED and "unexpected entity version" in e.details(), e
    r = JOBS.ReplaceJob(js.ReplaceJobRequest(job_id=pb.JobID(value=jid), version=pb.EntityVersion(value=v),
                                             spec=spec("Web_Front", 3, cmd="sleep 7200"),
                                             update_spec=sl.UpdateSpec(batch_size=1)), timeout=T)
    assert int(r.version.value) > int(v), r
    g = services.wait_until(lambda: (lambda g: g.workflow_info.status.state == sl.WORKFLOW_STATE_SUCCEEDED and g)(get(jid)),
                            40, "the rolling update to succeed", every=0.3)
    w = g.workflow_info
    assert w.status.type == sl.WORKFLOW_TYPE_UPDATE and w.status.num_instances_completed == 3, w
    assert w.update_spec.batch_size == 1 and g.job_info.status.workflow_status.state == sl.WORKFLOW_STATE_SUCCEEDED, w
    after = {p.pod_name.value: p.status.pod_id.value for p in list_pods(jid)}
    assert set(after) == set(before) and all(after[k] != before[k] for k in after), (before, after)  # new runs
    rc, out = kubectl("get", "pj", "web-front", "-o", "jsonpath={.spec.template.spec.containers[0].command[2]}")
    assert out == "sleep 7200", out
    assert get(jid).job_info.spec.default_spec.containers[0].command.value == "sleep 7200"


def test_pause_resume_abort_map_to_the_job():
    jid = STATE["web"]
    v = get(jid).job_info.status.version.value
    r = JOBS.PauseJobWorkflow(js.PauseJobWorkflowRequest(job_id=pb.JobID(value=jid), version=pb.EntityVersion(value=v)),
                              timeout=T)
    rc, out = kubectl("get", "pj", "web-front", "-o", "jsonpath={.spec.updateStrategy.paused}")
    assert out == "true", out
    r = JOBS.ResumeJobWorkflow(js.ResumeJobWorkflowRequest(job_id=pb.JobID(value=jid), version=r.version), timeout=T)
    rc, out = kubectl("get", "pj", "web-front", "-o", "jsonpath={.spec.updateStrategy.paused}")
    assert out == "false", out
    # no update is in progress: the job manager says it ignored the abort, and takes the annotation away
    JOBS.AbortJobWorkflow(js.AbortJobWorkflowRequest(job_id=pb.JobID(value=jid), version=r.version), timeout=T)
    services.wait_until(lambda: "UpdateAbort" in kubectl("get", "events", "--field-selector",
                                                         "involvedObject.name=web-front")[1], 15, "the abort handled")
    services.wait_until(lambda: "update-abort" not in kubectl("get", "pj", "web-front", "-o", "json")[1], 15,
                        "the annotation removed")


def test_a_version_survives_status_and_metadata_writes_between_read_and_write():
    """A write that gives the Job's version is read and planned again when another writer changed the Job
    but not its configuration (the job manager's status, an annotation) between the native API's read and
    its PUT: it succeeds; it used to be ABORTED ("the job changed meanwhile"), so the CLI's restart failed
    now and then beside the job manager's status writes."""
    jid = STATE["web"]
    stop = threading.Event()
    churned = [0]

    def churn():  # annotation writes move the resourceVersion, not the generation
        while not stop.is_set():
            code, _ = services.api(S.port, "PATCH", "/apis/peloton.io/v1alpha1/namespaces/default/jobs/web-front",
                                   {"metadata": {"annotations": {"test.peloton.io/churn": str(churned[0])}}},
                                   ctype="application/merge-patch+json")
            churned[0] += code == 200
            time.sleep(0.01)
    t = threading.Thread(target=churn, daemon=True)
    t.start()
    aborted = []
    try:
        for _ in range(25):
            v = get(jid).job_info.status.version.value
            for req, call in ((js.PauseJobWorkflowRequest, JOBS.PauseJobWorkflow),
                              (js.ResumeJobWorkflowRequest, JOBS.ResumeJobWorkflow)):
                try:
                    v = call(req(job_id=pb.JobID(value=jid), version=pb.EntityVersion(value=v)), timeout=T).version.value
                except grpc.RpcError as e:
                    aborted.append((e.code(), e.details()))
                    break
    finally:
        stop.set()
        t.join(10)
    assert not aborted, (aborted, churned)
    assert churned[0] >= 10, churned
    # a configuration change in between still fails a stale version
    old = get(jid).job_info.status.version.value
    rc, out = kubectl("patch", "pj", "web-front", "--type=merge", "-p", '{"spec":{"updateStrategy":{"minReadySeconds":2}}}')
    assert rc == 0, out
    services.wait_until(lambda: get(jid).job_info.status.version.value != old, 10, "the new configuration version")
    try:
        JOBS.PauseJobWorkflow(js.PauseJobWorkflowRequest(job_id=pb.JobID(value=jid), version=pb.EntityVersion(value=old)),
                              timeout=T)
        raise AssertionError("a stale version was taken")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.ABORTED and "unexpected entity version" in e.details(), e
    rc, out = kubectl("patch", "pj", "web-front", "--type=merge", "-p", '{"spec":{"updateStrategy":{"minReadySeconds":1}}}')
    assert rc == 0, out


def test_restart_job_rolls_every_pod():
    jid = STATE["web"]
    before = {p.pod_name.value: p.status.pod_id.value for p in list_pods(jid)}
    v = get(jid).job_info.status.version.value
    try:
        JOBS.RestartJob(js.RestartJobRequest(job_id=pb.JobID(value=jid), version=pb.EntityVersion(value=v),
                                             ranges=[pod.InstanceIDRange(**{"from": 1, "to": 2})]), timeout=T)
        raise AssertionError("a partial restart was taken")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "ranges" in e.details(), e
    r = JOBS.RestartJob(js.RestartJobRequest(job_id=pb.JobID(value=jid), version=pb.EntityVersion(value=v),
                                             batch_size=2), timeout=T)
    assert int(r.version.value) > int(v), r

    def rolled():
        after = {p.pod_name.value: (p.status.pod_id.value, p.status.state) for p in list_pods(jid)}
        return all(after[k][0] != before[k] and after[k][1] == pod.POD_STATE_RUNNING for k in before) and after
    services.wait_until(rolled, 40, "every pod restarted", every=0.3)
    g = get(jid)
    assert not any(l.key == "peloton.io/restart" for l in g.job_info.spec.default_spec.labels), g.job_info.spec
    assert g.workflow_info.update_spec.batch_size == 2, g.workflow_info


def test_pod_service():
    jid = STATE["web"]
    name = pb.PodName(value=f"{jid}-2")
    g = PODS.GetPod(ps.GetPodRequest(pod_name=name), timeout=T)
    assert g.current.status.state == pod.POD_STATE_RUNNING and g.current.spec.pod_name == name, g.current
    assert g.current.spec.containers[0].command.value == "sleep 7200", g.current.spec
    run = g.current.status.pod_id.value
    assert PODS.GetPod(ps.GetPodRequest(pod_name=name, status_only=True), timeout=T).current.HasField("spec") is False
    ev = PODS.GetPodEvents(ps.GetPodEventsRequest(pod_name=name), timeout=T).events
    assert [e.actual_state for e in ev][:1] == ["POD_STATE_PENDING"] and "POD_STATE_RUNNING" in [e.actual_state for e in ev], ev
    assert all(e.pod_id.value == run for e in ev), ev
    PODS.RestartPod(ps.RestartPodRequest(pod_name=name), timeout=T)
    g = services.wait_until(lambda: (lambda g: g.current.status.pod_id.value != run and
                                     g.current.status.state == pod.POD_STATE_RUNNING and g)(
        PODS.GetPod(ps.GetPodRequest(pod_name=name), timeout=T)), 20, "the pod's next run")
    for bad, code in [(f"{jid}-99", grpc.StatusCode.NOT_FOUND), ("nodash", grpc.StatusCode.INVALID_ARGUMENT),
                      ("00000000-0000-0000-0000-000000000000-0", grpc.StatusCode.NOT_FOUND)]:
        try:
            PODS.GetPod(ps.GetPodRequest(pod_name=pb.PodName(value=bad)), timeout=T)
            raise AssertionError(f"{bad} found")
        except grpc.RpcError as e:
            assert e.code() == code, (bad, e)
    try:
        PODS.StopPod(ps.StopPodRequest(pod_name=name), timeout=T)
        raise AssertionError("StopPod answered")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e


def watch_collect(req, out, ready):
    """Reads a Watch stream into out (a list) until it ends; the end's status code goes last."""
    call = WATCH.Watch(req, timeout=60)
    try:
        for m in call:
            out.append(m)
            ready.set()
    except grpc.RpcError as e:
        out.append(e.code())
    ready.set()


def test_watch_sees_kubectl_changes_and_ends_on_cancel():
    jid = STATE["web"]
    got, ready = [], threading.Event()
    t = threading.Thread(target=watch_collect, daemon=True, args=(ws.WatchRequest(
        pod_filter=wf.PodFilter(job_id=pb.JobID(value=jid)),
        stateless_job_filter=wf.StatelessJobFilter(job_ids=[pb.JobID(value=jid)])), got, ready))
    t.start()
    assert ready.wait(10), "no first message"
    wid = got[0].watch_id
    assert wid and not got[0].pods and got[0].revision > 0, got[0]
    old = [p.status.pod_id.value for p in list_pods(jid) if p.pod_name.value == f"{jid}-1"][0]
    rc, pname = kubectl("get", "pods", "-l", "peloton.io/instance=1,peloton.io/job=web-front", "-o", "name")
    assert rc == 0 and pname.strip(), pname
    rc, out = kubectl("delete", pname.strip(), "--wait=false")
    assert rc == 0, out
    rc, out = kubectl("annotate", "pj", "web-front", "note=hello")
    assert rc == 0, out
    pods_seen = lambda: [p for m in got if not isinstance(m, grpc.StatusCode) for p in m.pods]  # noqa: E731
    services.wait_until(lambda: any(p.status.state == pod.POD_STATE_DELETED for p in pods_seen()), 15,
                        "the pod's deletion")
    try:
        services.wait_until(lambda: any(p.pod_name.value == f"{jid}-1" and p.status.pod_id.value != old
                                        and p.status.state == pod.POD_STATE_RUNNING for p in pods_seen()), 15,
                            "the instance's next run running")
    except AssertionError:
        raise AssertionError(f"{old} {[(p.status.pod_id.value, p.status.state) for p in pods_seen()]}")
    assert all(p.pod_name.value.startswith(jid) for p in pods_seen())  # only the filtered job's pods
    assert any(j.job_id.value == jid for m in got if not isinstance(m, grpc.StatusCode) for j in m.stateless_jobs)
    assert all(m.watch_id == wid for m in got if not isinstance(m, grpc.StatusCode))
    WATCH.Cancel(ws.CancelRequest(watch_id=wid), timeout=T)
    t.join(10)
    assert not t.is_alive() and got[-1] == grpc.StatusCode.CANCELLED, got[-1]
    try:
        WATCH.Cancel(ws.CancelRequest(watch_id=wid), timeout=T)
        raise AssertionError("cancelled twice")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND, e
    try:
        list(WATCH.Watch(ws.WatchRequest(start_revision=5), timeout=T))
        raise AssertionError("history served")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE, e


def test_watch_names_pods_of_a_job_made_after_it():
    got, ready = [], threading.Event()
    t = threading.Thread(target=watch_collect, daemon=True, args=(ws.WatchRequest(pod_filter=wf.PodFilter()), got, ready))
    t.start()
    assert ready.wait(10), "no first message"
    jid = "6a1c3e2e-0000-4000-8000-00000000beef"  # the client's id: not the object's uid
    r = JOBS.CreateJob(js.CreateJobRequest(job_id=pb.JobID(value=jid), spec=spec("late", 1)), timeout=T)
    assert r.job_id.value == jid, r
    services.wait_until(lambda: any(p.pod_name.value == f"{jid}-0" and p.status.state == pod.POD_STATE_RUNNING
                                    for m in list(got) if not isinstance(m, grpc.StatusCode) for p in m.pods), 20,
                        "the late job's pod by its JobID")
    WATCH.Cancel(ws.CancelRequest(watch_id=got[0].watch_id), timeout=T)
    t.join(10)
    JOBS.DeleteJob(js.DeleteJobRequest(job_id=pb.JobID(value=jid)), timeout=T)


def test_client_cancels_a_stream_midway():
    call = JOBS.ListPods(js.ListPodsRequest(job_id=pb.JobID(value=STATE["many"])), timeout=T)
    first = next(call)
    assert len(first.pods) == 100
    call.cancel()
    w = WATCH.Watch(ws.WatchRequest(pod_filter=wf.PodFilter()), timeout=T)
    wid = next(w).watch_id
    w.cancel()  # the client resets the stream: the server forgets the watch
    services.wait_until(lambda: cancel_code(wid) == grpc.StatusCode.NOT_FOUND, 5, "the watch freed")
    # a deadline ends a watch as a cancel does
    w = WATCH.Watch(ws.WatchRequest(pod_filter=wf.PodFilter()), timeout=1.5)
    wid = next(w).watch_id
    try:
        list(w)
        raise AssertionError("the watch outlived its deadline")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    services.wait_until(lambda: cancel_code(wid) == grpc.StatusCode.NOT_FOUND, 5, "the watch past its deadline freed")
    assert get(STATE["web"]).job_info.spec.name == "Web_Front"  # still serving


def cancel_code(wid):
    try:
        WATCH.Cancel(ws.CancelRequest(watch_id=wid), timeout=T)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


# ---- a raw HTTP/2 client that never reads what it is sent

def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):  # HPACK literal header field without indexing, new name, no Huffman
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def read_frame(s):
    head = b""
    while len(head) < 9:
        head += s.recv(9 - len(head))
    n = struct.unpack(">I", b"\0" + head[:3])[0]
    body = b""
    while len(body) < n:
        body += s.recv(n - len(body))
    return head[3], head[4], struct.unpack(">I", head[5:9])[0] & 0x7fffffff, body


def test_client_that_never_reads():
    s = socket.create_connection(("127.0.0.1", NPORT), timeout=10)
    # a 120-byte stream window: the first message (the watch id) fits, the rest waits in the server
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, struct.pack(">HI", 4, 120)))
    hdrs = b"".join(literal(k, v) for k, v in [(":method", "POST"), (":scheme", "http"), (":authority", "x"),
                                                (":path", "/peloton.api.v1alpha.watch.svc.WatchService/Watch"),
                                                ("content-type", "application/grpc"), ("te", "trailers")])
    req = ws.WatchRequest(pod_filter=wf.PodFilter()).SerializeToString()
    s.sendall(frame(1, 4, 1, hdrs) + frame(0, 1, 1, b"\0" + struct.pack(">I", len(req)) + req))
    data = b""
    while len(data) < 5 or len(data) < 5 + struct.unpack(">I", data[1:5])[0]:
        ftype, flags, sid, body = read_frame(s)
        if ftype == 4 and not flags & 1:
            s.sendall(frame(4, 1, 0, b""))  # SETTINGS ACK
        if ftype == 0 and sid == 1:
            data += body
        assert ftype != 3, "stream reset"
    wid = ws.WatchResponse.FromString(data[5:5 + struct.unpack(">I", data[1:5])[0]]).watch_id
    assert wid
    olds = {p.status.pod_id.value for p in list_pods(STATE["many"])}
    # churn: every pod of "many" changes (deleted, then a new run): hundreds of KiB of events for the stalled watch
    rc, out = kubectl("delete", "pods", "-l", "peloton.io/job=many", "--wait=false")
    assert rc == 0, out
    services.wait_until(lambda: sum(p.status.state == pod.POD_STATE_RUNNING and p.status.pod_id.value not in olds
                                    for p in list_pods(STATE["many"])) == 250, 40, "the new runs running", every=0.5)
    assert cancel_code("not-a-watch") == grpc.StatusCode.NOT_FOUND  # others are served meanwhile
    # 256 KiB waited for it: the watch stopped taking events from the API server
    services.wait_until(lambda: f"watch paused: the client is not reading\" watch={wid}" in open(LOG).read(), 5,
                        "the watch paused")
    # the client reads now: the paused watch resumes from where it stopped and the churn arrives
    s.sendall(frame(8, 0, 0, struct.pack(">I", 1 << 28)) + frame(8, 0, 1, struct.pack(">I", 1 << 28)))
    data, ended, deadline = b"", False, time.monotonic() + 20
    new_runs = set()
    while not ended and len(new_runs) < 250 and time.monotonic() < deadline:
        ftype, flags, sid, body = read_frame(s)
        ended = sid == 1 and ftype in (1, 3) and (ftype == 3 or flags & 1)
        if ftype == 0 and sid == 1:
            data += body
            while len(data) >= 5 and len(data) >= 5 + struct.unpack(">I", data[1:5])[0]:
                n = struct.unpack(">I", data[1:5])[0]
                m = ws.WatchResponse.FromString(data[5:5 + n])
                data = data[5 + n:]
                new_runs |= {p.status.pod_id.value for p in m.pods if p.status.pod_id.value not in olds
                             and p.pod_name.value.startswith(STATE["many"])}
    # every new run seen, or (when the API server no longer had the events) the stream ended
    assert len(new_runs) == 250 or ended, (len(new_runs), ended)
    assert f"watch resumed\" watch={wid}" in open(LOG).read()
    s.close()  # the connection goes: the watch is stopped and freed
    services.wait_until(lambda: cancel_code(wid) == grpc.StatusCode.NOT_FOUND, 5, "the stalled watch freed")


def test_unimplemented_and_yarpc_streaming():
    try:
        JOBS.StopJob(js.StopJobRequest(job_id=pb.JobID(value=STATE["web"])), timeout=T)
        raise AssertionError("StopJob answered")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED and "StopJob is not served" in e.details(), e
    try:
        CH.unary_unary("/peloton.api.v1alpha.job.stateless.svc.JobService/Nope")(b"", timeout=T)
        raise AssertionError("Nope answered")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e
    p = subprocess.run(["curl", "-s", "-i", "-X", "POST", f"http://127.0.0.1:{NPORT}/api/v1", "-H", "Rpc-Caller: t",
                        "-H", "Rpc-Service: peloton-jobmgr", "-H", "Rpc-Encoding: json", "-H",
                        "Rpc-Procedure: peloton.api.v1alpha.job.stateless.svc.JobService::ListPods", "-d", "{}"],
                       capture_output=True, text=True, timeout=30)
    assert "501" in p.stdout.split("\r\n")[0] and "Rpc-Error-Code: unimplemented" in p.stdout, p.stdout
    assert "streams: use gRPC" in p.stdout, p.stdout
    p = subprocess.run(["curl", "-s", "-X", "POST", f"http://127.0.0.1:{NPORT}/api/v1", "-H", "Rpc-Caller: t",
                        "-H", "Rpc-Service: peloton-jobmgr", "-H", "Rpc-Encoding: json", "-H",
                        "Rpc-Procedure: peloton.api.v1alpha.job.stateless.svc.JobService::GetJob",
                        "-d", json.dumps({"jobId": {"value": STATE["web"]}, "summaryOnly": True})],
                       capture_output=True, text=True, timeout=30)
    assert json.loads(p.stdout)["summary"]["name"] == "Web_Front", p.stdout


def code_of(fn, *a):
    try:
        fn(*a, timeout=T)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code(), e.details()


def test_resource_pool_service_through_v0():
    spec = rp1.ResourcePoolSpec(name="v1pool", parent=pb.ResourcePoolID(value="root"), owning_team="infra",
                                policy=rp1.SCHEDULING_POLICY_PRIORITY_FIFO,
                                resources=[rp1.ResourceSpec(kind="cpu", reservation=2, limit=4, share=1,
                                                            type=rp1.RESERVATION_TYPE_STATIC)])
    r = POOLS.CreateResourcePool(rs.CreateResourcePoolRequest(spec=spec), timeout=T)
    assert r.respool_id.value == "v1pool", r
    rc, out = kubectl("get", "rp", "v1pool", "-o", "jsonpath={.spec.owningTeam} {.spec.resources[0].reservation}")
    assert rc == 0 and out.split()[0] == "infra", out
    g = POOLS.GetResourcePool(rs.GetResourcePoolRequest(respool_id=pb.ResourcePoolID(value="v1pool")), timeout=T)
    res = g.respool.spec.resources[0]
    assert g.respool.respool_id.value == "v1pool" and g.respool.path.value == "/v1pool", g.respool
    assert res.kind == "cpu" and res.reservation == 2 and res.limit == 4 and res.type == rp1.RESERVATION_TYPE_STATIC, res
    assert g.respool.spec.policy == rp1.SCHEDULING_POLICY_PRIORITY_FIFO and g.respool.spec.revision.version >= 1
    lk = POOLS.LookupResourcePoolID(rs.LookupResourcePoolIDRequest(path=rp1.ResourcePoolPath(value="/v1pool")), timeout=T)
    assert lk.respool_id.value == "v1pool", lk
    spec.resources[0].reservation = 3
    POOLS.UpdateResourcePool(rs.UpdateResourcePoolRequest(respool_id=pb.ResourcePoolID(value="v1pool"), spec=spec),
                             timeout=T)
    rc, out = kubectl("get", "rp", "v1pool", "-o", "jsonpath={.spec.resources}")
    assert '"3"' in out or ":3" in out, out
    q = POOLS.QueryResourcePools(rs.QueryResourcePoolsRequest(), timeout=T)
    assert {"root", "svc", "v1pool"} <= {p.respool_id.value for p in q.respools}, q
    root = POOLS.GetResourcePool(rs.GetResourcePoolRequest(include_child_pools=True), timeout=T)
    assert {"svc", "v1pool"} <= {c.respool_id.value for c in root.child_respools}, root
    # v0's errors, as gRPC statuses
    assert code_of(POOLS.CreateResourcePool, rs.CreateResourcePoolRequest(spec=spec))[0] == grpc.StatusCode.ALREADY_EXISTS
    bad = rp1.ResourcePoolSpec(name="badpool", parent=pb.ResourcePoolID(value="root"),
                               resources=[rp1.ResourceSpec(kind="cpu", reservation=5, limit=4)])
    c = code_of(POOLS.CreateResourcePool, rs.CreateResourcePoolRequest(spec=bad))
    assert c[0] == grpc.StatusCode.INVALID_ARGUMENT and "exceeds its limit" in c[1], c
    c = code_of(POOLS.DeleteResourcePool, rs.DeleteResourcePoolRequest(respool_id=pb.ResourcePoolID(value="svc")))
    assert c[0] == grpc.StatusCode.FAILED_PRECONDITION, c  # a Job in it runs
    c = code_of(POOLS.GetResourcePool, rs.GetResourcePoolRequest(respool_id=pb.ResourcePoolID(value="nope")))
    assert c[0] == grpc.StatusCode.NOT_FOUND, c
    POOLS.DeleteResourcePool(rs.DeleteResourcePoolRequest(respool_id=pb.ResourcePoolID(value="v1pool")), timeout=T)
    services.wait_until(lambda: kubectl("get", "rp", "v1pool")[0] != 0, 15, "v1pool gone")


def test_delete_job():
    jid = STATE["many"]
    r = JOBS.DeleteJob(js.DeleteJobRequest(job_id=pb.JobID(value=jid)), timeout=T)
    assert r == js.DeleteJobResponse()
    services.wait_until(lambda: kubectl("get", "pj", "many")[0] != 0, 15, "the Job deleted")
    try:
        get(jid)
        raise AssertionError("found after delete")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND, e


def test_exit_clean_under_asan():
    CH.close()
    services.stop_clean(PROC, LOG, KSIM)


run_tests("native-v1", dict(globals()))
