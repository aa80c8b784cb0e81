#!/usr/bin/python3
"""End-to-end: Kubernetes' protobuf encoding on pelotond's API server, with
the kubectl on PATH (1.32) and Debian's kubectl 1.20 (scripts/kubectl-1.20.sh)
against one stack (redis-server, pelotond, kubelet-sim): kubectl's typed
creates (namespace, configmap, secret, service, pdb) sent as protobuf, the
object stored as its JSON twin is, `kubectl drain` through pods/eviction
held back by a PodDisruptionBudget (bare pods) or a Peloton Job's SLA (pods
jobmgr replaces) and then let through, and malformed protobuf bodies sent
by hand, each a 400 Status; last, kubectl 1.32's typed creates of the
workload and RBAC kinds (deployment, job, cronjob, role, rolebinding,
clusterrole, clusterrolebinding), in protobuf, stored as their JSON twins
are, the Deployment's pods Running and scaled, with kubectl 1.20 (JSON) the
same commands."""
import json
import os
import subprocess
import urllib.error
import urllib.request

import services
from simlib import run_tests

KUBECTL120 = subprocess.run([os.path.join(services.ROOT, "scripts", "kubectl-1.20.sh")], capture_output=True,
                            text=True, timeout=300, check=True).stdout.strip()
REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all")
KUBECONFIG = services.kubeconfig(PORT)
KSIM, _ = services.start_kubelet_sim(KUBECONFIG, "--nodes=3", "--name-prefix=pb-", "--cpu=8", "--memory=16Gi",
                                     expect=3)
BASE = f"http://127.0.0.1:{PORT}"
PB = "application/vnd.kubernetes.protobuf"
CACHE = {"132": services.tempdir(), "120": services.tempdir()}
BIN = {"132": "kubectl", "120": KUBECTL120}


def kubectl(v, *args, stdin=None, timeout=60):
    p = subprocess.run([BIN[v], f"--kubeconfig={KUBECONFIG}", f"--cache-dir={CACHE[v]}", *args], input=stdin,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def ok(v, *args, stdin=None):
    rc, out, err = kubectl(v, *args, stdin=stdin)
    assert rc == 0, f"kubectl {v} {args}: {rc} {out} {err}"
    return out


def raw(method, path, body=b"", ctype=PB, accept="application/json"):
    req = urllib.request.Request(BASE + path, method=method, data=body if method != "GET" else None,
                                 headers={"Content-Type": ctype, "Accept": accept})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def get(path):
    code, _, body = raw("GET", path)
    return code, json.loads(body)


# ---- a few protobuf bytes by hand ----

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ld(field, data):
    return varint(field << 3 | 2) + varint(len(data)) + data


def envelope(api_version, kind, raw_msg):
    return b"k8s\x00" + ld(1, ld(1, api_version.encode()) + ld(2, kind.encode())) + ld(2, raw_msg)


def namespace_pb(name, extra=b""):
    return envelope("v1", "Namespace", ld(1, ld(1, name.encode())) + extra)


# ---- kubectl's typed creates ----

def strip(obj):
    md = obj["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp", "name", "managedFields", "generation"):
        md.pop(k, None)
    return obj


def test_creates_both_versions():
    for v in ("132", "120"):
        assert "created" in ok(v, "create", "namespace", f"pbns{v}")
        ok(v, "create", "configmap", f"cm{v}", "-n", f"pbns{v}", "--from-literal=mode=a", "--from-literal=b=two")
        ok(v, "create", "secret", "generic", f"sec{v}", "-n", f"pbns{v}", "--from-literal=pw=s3cr3t")
        ok(v, "create", "service", "clusterip", f"svc{v}", "-n", f"pbns{v}", "--tcp=80:8080")
        code, ns = get(f"/api/v1/namespaces/pbns{v}")
        assert code == 200 and ns["status"]["phase"] == "Active", ns
        code, cm = get(f"/api/v1/namespaces/pbns{v}/configmaps/cm{v}")
        assert cm["data"] == {"mode": "a", "b": "two"}, cm
        code, sec = get(f"/api/v1/namespaces/pbns{v}/secrets/sec{v}")
        assert sec["data"] == {"pw": "czNjcjN0"} and sec["type"] == "Opaque", sec
        code, svc = get(f"/api/v1/namespaces/pbns{v}/services/svc{v}")
        port = svc["spec"]["ports"][0]
        assert port["port"] == 80 and port["targetPort"] == 8080 and port["protocol"] == "TCP", svc


def test_protobuf_equals_json_path():
    """The same object through kubectl 1.32's protobuf create and through
    JSON (the generator's --dry-run=client -o json, then create -f): `get -o
    json` is the same but for identity (the name, which the generators also
    use for a service's selector)."""
    def same(kind, create):
        ok("132", *create("viapb"))
        doc = ok("132", *create("viajson"), "--dry-run=client", "-o", "json")
        ok("132", "create", "-f", "-", stdin=doc)
        got = []
        for name in ("viapb", "viajson"):
            obj = strip(json.loads(ok("132", "get", kind, name, "-n", "pbns132", "-o", "json")))
            obj.get("spec", {}).pop("clusterIP", None)  # allocated
            obj.get("spec", {}).pop("clusterIPs", None)
            got.append(json.dumps(obj, sort_keys=True).replace(name, "NAME"))
        assert got[0] == got[1], got
    same("configmap", lambda n: ["create", "configmap", n, "-n", "pbns132", "--from-literal=a=1", "--from-literal=b="])
    same("secret", lambda n: ["create", "secret", "generic", n, "-n", "pbns132", "--from-literal=k=v"])
    same("service", lambda n: ["create", "service", "clusterip", n, "-n", "pbns132", "--tcp=80:8080,443:https"])
    # (kubectl run sends its pod as JSON: the pod's protobuf is checked by the
    # status PUT below and by test_shim_proto.c)


def test_reply_in_protobuf_when_preferred():
    code, ctype, body = raw("GET", "/api/v1/namespaces/pbns132/configmaps/cm132", accept=f"{PB},application/json")
    assert code == 200 and ctype == PB and body.startswith(b"k8s\x00") and b"ConfigMap" in body and b"mode" in body
    code, ctype, body = raw("GET", "/api/v1/namespaces/pbns132/configmaps", accept=f"{PB},application/json")
    assert code == 200 and ctype.startswith("application/json"), ctype  # a list: JSON, which Accept allows
    # a create answered by the asynchronous store path, as kubectl 1.32 asks
    code, ctype, body = raw("POST", "/api/v1/namespaces", namespace_pb("pbreply"), accept=f"{PB},application/json")
    assert code == 201 and ctype == PB and body.startswith(b"k8s\x00") and b"pbreply" in body, (code, ctype, body)
    code, ctype, body = raw("GET", "/api/v1/namespaces/pbns132/configmaps", accept=PB)
    assert code == 406 and json.loads(body)["reason"] == "NotAcceptable", body


def test_status_and_binding_in_protobuf():
    """What a kubelet and kube-scheduler send: pods/NAME/status (PUT) and
    pods/NAME/binding (POST) as protobuf."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bindme", "namespace": "pbns132"},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]}}
    code, out = services.api(PORT, "POST", "/api/v1/namespaces/pbns132/pods", body)
    assert code == 201, out
    status = ld(1, ld(1, b"bindme") + ld(3, b"pbns132")) + ld(3, ld(1, b"Pending") + ld(3, b"held by the test"))
    code, _, out = raw("PUT", "/api/v1/namespaces/pbns132/pods/bindme/status", envelope("v1", "Pod", status))
    assert code == 200, out
    assert get("/api/v1/namespaces/pbns132/pods/bindme")[1]["status"]["message"] == "held by the test"
    binding = ld(1, ld(1, b"bindme")) + ld(2, ld(1, b"Node") + ld(3, b"pb-2"))
    code, _, out = raw("POST", "/api/v1/namespaces/pbns132/pods/bindme/binding", envelope("v1", "Binding", binding))
    assert code == 201, out
    assert get("/api/v1/namespaces/pbns132/pods/bindme")[1]["spec"]["nodeName"] == "pb-2"
    code, _, out = raw("POST", "/api/v1/namespaces/pbns132/pods/bindme/binding", b"k8s\x00\x0a")
    assert code == 400 and b"could not be decoded as a Binding" in out, out


# ---- drain through pods/eviction ----

def pod(name, ns, node, app):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                     "volumes": [{"name": "scratch", "emptyDir": {}}]}}


def running(ns, name):
    code, p = get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return code == 200 and p.get("status", {}).get("phase") == "Running"


def drain(v, node, other):
    """Pods a and b on node, c on other, and a PDB of minAvailable 2: the
    drain evicts a, is refused b (429) and retries until d runs on other."""
    ns = f"drain{v}"
    code, out = services.api(PORT, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                 "metadata": {"name": ns}})
    assert code == 201, out
    for name, n in (("a", node), ("b", node), ("c", other)):
        code, out = services.api(PORT, "POST", f"/api/v1/namespaces/{ns}/pods", pod(name, ns, n, ns))
        assert code == 201, out
    services.wait_until(lambda: all(running(ns, x) for x in "abc"), 20, "pods running")
    code, out = services.api(PORT, "POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "budget"},
        "spec": {"selector": {"matchLabels": {"app": ns}}, "minAvailable": 2}})
    assert code == 201, out
    d = subprocess.Popen([BIN[v], f"--kubeconfig={KUBECONFIG}", f"--cache-dir={CACHE[v]}", "drain", node,
                          "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=45s"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = []

        def refused():
            return any("disruption budget" in line for line in seen)
        # read the drain's output until the budget refuses it once
        while not refused():
            line = d.stdout.readline()
            assert line, "drain ended before the budget refused it: " + "".join(seen)
            seen.append(line)
        code, out = services.api(PORT, "POST", f"/api/v1/namespaces/{ns}/pods", pod("d", ns, other, ns))
        assert code == 201, out
        rest, _ = d.communicate(timeout=50)
    finally:
        if d.poll() is None:
            d.kill()
            d.wait()
    text = "".join(seen) + rest
    assert d.returncode == 0, text
    assert "Cannot evict pod as it would violate the pod's disruption budget" in text, text
    assert f"node/{node} drained" in text or f"node/{node} evicted" in text, text  # 1.32, 1.20
    code, n = get(f"/api/v1/nodes/{node}")
    assert n["spec"].get("unschedulable") is True, n
    for name in "ab":
        assert get(f"/api/v1/namespaces/{ns}/pods/{name}")[0] == 404
    for name in "cd":
        assert running(ns, name)


def test_drain_132():
    drain("132", "pb-0", "pb-2")


def test_drain_120():
    drain("120", "pb-1", "pb-2")


def test_eviction_refused_is_429_status():
    ns = "evict"
    ok("132", "create", "namespace", ns)
    code, out = services.api(PORT, "POST", f"/api/v1/namespaces/{ns}/pods", pod("only", ns, "pb-2", ns))
    assert code == 201, out
    services.wait_until(lambda: running(ns, "only"), 20, "pod running")
    ok("132", "create", "pdb", "all", "-n", ns, f"--selector=app={ns}", "--min-available=1")
    want = {"observedGeneration": 1, "currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0,
            "expectedPods": 1}
    assert get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/all")[1]["status"] == want
    assert get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets")[1]["items"][0]["status"] == want
    for v in ("132", "120"):
        head, row = ok(v, "get", "pdb", "-n", ns).splitlines()
        assert head.split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
        assert row.split()[:4] == ["all", "1", "N/A", "0"], row
    ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "only", "namespace": ns}}
    code, st = services.api(PORT, "POST", f"/api/v1/namespaces/{ns}/pods/only/eviction", ev)
    assert code == 429 and st["reason"] == "TooManyRequests", st
    assert st["details"]["causes"][0] == {
        "reason": "DisruptionBudget", "message": "The disruption budget all needs 1 healthy pods and has 1 currently"}
    # the same in protobuf (policy/v1beta1, as kubectl 1.20 sends it)
    body = envelope("policy/v1beta1", "Eviction", ld(1, ld(1, b"only") + ld(3, ns.encode())))
    code, _, out = raw("POST", f"/api/v1/namespaces/{ns}/pods/only/eviction", body)
    assert code == 429, out
    ok("132", "delete", "pdb", "all", "-n", ns)
    code, _, out = raw("POST", f"/api/v1/namespaces/{ns}/pods/only/eviction", body)
    assert code == 201 and json.loads(out)["status"] == "Success", out
    services.wait_until(lambda: get(f"/api/v1/namespaces/{ns}/pods/only")[0] == 404, 20, "pod gone")


# ---- malformed protobuf ----

def bad(body, want):
    code, _, out = raw("POST", "/api/v1/namespaces", body)
    st = json.loads(out)
    assert code == 400 and st["kind"] == "Status" and st["reason"] == "BadRequest", (code, st)
    assert want in st["message"], st["message"]


def test_malformed_protobuf_bodies():
    bad(b"\x00\x01\x02", "envelope")
    bad(b"k8s\x00\x0a\xff", "truncated varint")
    bad(envelope("v1", "Namespace", ld(1, b"\x0a\x85")), "metadata")  # name's length cut short
    bad(envelope("v1", "Namespace", b"\x08\x01"), "wire type")  # metadata as a varint
    bad(envelope("v1", "Namespace", ld(1, ld(1, b"\xff\xfe"))), "UTF-8")
    bad(envelope("v1", "Gadget", b""), "no kind \"Gadget\"")
    bad(envelope("v1", "Namespace", ld(1, b"\x0a" + varint(1 << 40))), "past the end")  # an oversize length
    bad(envelope("v1", "Namespace", ld(1, b"\x0b")), "wire type 3")  # a group
    # an unknown field (a newer client's) is skipped
    code, _, out = raw("POST", "/api/v1/namespaces", namespace_pb("pbunknown", varint(99 << 3) + varint(7)))
    assert code == 201, out
    assert get("/api/v1/namespaces/pbunknown")[0] == 200
    # still serving
    assert urllib.request.urlopen(BASE + "/healthz", timeout=5).read() == b"ok"


def test_delete_with_protobuf_options():
    ok("132", "create", "configmap", "gone", "-n", "pbns132", "--from-literal=a=b")
    opts = envelope("v1", "DeleteOptions", varint(1 << 3) + varint(0))  # gracePeriodSeconds: 0
    code, _, out = raw("DELETE", "/api/v1/namespaces/pbns132/configmaps/gone", opts)
    assert code == 200, out
    assert get("/api/v1/namespaces/pbns132/configmaps/gone")[0] == 404


def test_drain_disable_eviction_132():
    """kubectl 1.32 deletes instead of evicting with DeleteOptions in protobuf
    (what it did against this server before pods/eviction: a 400)."""
    rc, out, err = kubectl("132", "drain", "pb-2", "--ignore-daemonsets", "--delete-emptydir-data", "--force",
                           "--disable-eviction", "--timeout=30s", "-v=8")
    assert rc == 0, out + err
    assert "Content-Type: application/vnd.kubernetes.protobuf" in err and "DELETE" in err
    assert "node/pb-2 drained" in out, out


JOB = """apiVersion: peloton.io/v1alpha1
kind: Job
metadata: {name: web, namespace: jobsla}
spec:
  type: STATELESS
  resourcePool: training
  instanceCount: 4
  sla: {maximumUnavailableInstances: 1}
  template:
    spec:
      containers:
      - name: c
        image: busybox
        resources: {requests: {cpu: 100m, memory: 64Mi}}
"""


def job_pods():
    code, lst = get("/api/v1/namespaces/jobsla/pods")
    return [p for p in lst["items"] if not p["metadata"].get("deletionTimestamp")]


def test_drain_job_sla_132():
    """Last (the nodes are uncordoned first): a Peloton Job's
    sla.maximumUnavailableInstances is the budget; drain evicts one instance
    at a time, waiting (429) until jobmgr has run its replacement elsewhere."""
    ok("132", "uncordon", "pb-0", "pb-1", "pb-2")
    ok("132", "apply", "-f", os.path.join(services.ROOT, "examples", "pools.yaml"))
    ok("132", "create", "namespace", "jobsla")
    ok("132", "apply", "-f", "-", stdin=JOB)
    services.wait_until(lambda: len(job_pods()) == 4 and all(p["status"].get("phase") == "Running"
                                                             for p in job_pods()), 30, "the job's 4 pods running")
    nodes = [p["spec"]["nodeName"] for p in job_pods()]
    node = max(set(nodes), key=nodes.count)
    assert nodes.count(node) >= 2, nodes  # a node with two instances: evicting both breaks the budget once
    rc, out, err = kubectl("132", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=50s",
                           timeout=70)
    assert rc == 0, out + err
    assert "would violate the pod's disruption budget" in out + err, out + err  # waited at least once
    assert f"node/{node} drained" in out, out
    services.wait_until(lambda: len(job_pods()) == 4 and all(p["status"].get("phase") == "Running" and
                                                             p["spec"]["nodeName"] != node for p in job_pods()),
                        30, "the job's 4 pods running off the drained node")


# ---- the workload and RBAC kinds (after the drains: the nodes uncordoned) ----

POOL = {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "pbwl"},
        "spec": {"resources": [{"kind": "cpu", "reservation": "2", "limit": "8"},
                               {"kind": "memory", "reservation": "2Gi", "limit": "8Gi"}]}}


def sends(v, args, ns, ctype):
    """kubectl v's create with -v=8: it succeeds, and its POST carried ctype."""
    rc, out, err = kubectl(v, *args, *(["-n", ns] if ns else []), "-v=8")
    assert rc == 0 and "created" in out, (args, out, err)
    assert f"Content-Type: {ctype}" in err, (args, err[-2000:])


def twin_equal(kind, args, name, ns):
    """The object kubectl 1.32 created in protobuf (name) against its JSON
    twin (the generator's -o json with the name twin, through create -f):
    `get -o json` the same but for identity and status."""
    nsargs = ["-n", ns] if ns else []
    doc = ok("132", *args(name + "j"), *nsargs, "--dry-run=client", "-o", "json")
    ok("132", "create", "-f", "-", *nsargs, stdin=doc)
    got = []
    for n in (name, name + "j"):
        obj = json.loads(ok("132", "get", kind, n, *nsargs, "-o", "json"))
        uid = obj["metadata"]["uid"]
        obj = strip(obj)
        obj.pop("status", None)
        obj["metadata"].get("annotations", {}).pop("deployment.kubernetes.io/revision", None)
        got.append(json.dumps(obj, sort_keys=True).replace(uid, "UID").replace(n, "NAME"))
    assert got[0] == got[1], got
    return json.loads(got[0])


def web_running(ns, n):
    code, lst = get(f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dweb")
    return len([p for p in lst["items"] if p.get("status", {}).get("phase") == "Running" and
                not p["metadata"].get("deletionTimestamp")]) == n


def test_workload_and_rbac_creates_132():
    ok("132", "uncordon", "pb-0", "pb-1", "pb-2")
    ok("132", "create", "-f", "-", stdin=json.dumps(POOL))
    ns = "pbwl132"
    code, out = services.api(PORT, "POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "annotations": {"peloton.io/resource-pool": "pbwl"}}})
    assert code == 201, out
    cmds = [("deployment", lambda n: ["create", "deployment", n, "--image=nginx", "--replicas=2"], "web", ns),
            ("job", lambda n: ["create", "job", n, "--image=busybox"], "pbjob", ns),
            ("cronjob", lambda n: ["create", "cronjob", n, "--image=busybox", "--schedule=*/5 * * * *"], "pbcron", ns),
            ("role", lambda n: ["create", "role", n, "--verb=get", "--resource=pods"], "pbrole", ns),
            ("rolebinding", lambda n: ["create", "rolebinding", n, "--role=pbrole", "--user=u"], "pbrb", ns),
            ("clusterrole", lambda n: ["create", "clusterrole", n, "--verb=list", "--resource=nodes"], "pbcr", None),
            ("clusterrolebinding", lambda n: ["create", "clusterrolebinding", n, "--clusterrole=pbcr", "--user=u"],
             "pbcrb", None)]
    objs = {}
    for kind, args, name, where in cmds:
        sends("132", args(name), where, PB)
        objs[kind] = twin_equal(kind, args, name, where)
    assert objs["deployment"]["spec"]["replicas"] == 2, objs["deployment"]
    assert objs["deployment"]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"
    assert objs["cronjob"]["spec"]["schedule"] == "*/5 * * * *", objs["cronjob"]
    assert objs["role"]["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], objs["role"]
    assert objs["rolebinding"]["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                                "name": "u"}], objs["rolebinding"]
    assert objs["rolebinding"]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                              "name": "pbrole"}, objs["rolebinding"]
    assert objs["clusterrole"]["rules"][0]["verbs"] == ["list"], objs["clusterrole"]
    # replies in protobuf, as kubectl 1.32 asks for them
    code, ctype, body = raw("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web", accept=f"{PB},application/json")
    assert code == 200 and ctype == PB and body.startswith(b"k8s\x00") and b"Deployment" in body, (code, ctype)
    code, ctype, body = raw("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/pbcr",
                            accept=f"{PB},application/json")
    assert code == 200 and ctype == PB and b"ClusterRole" in body and b"nodes" in body, (code, ctype)
    # the Deployment runs, and scales (kubectl scale sends a JSON merge patch)
    services.wait_until(lambda: web_running(ns, 2), 30, "web's 2 pods running")
    assert "scaled" in ok("132", "scale", "deployment", "web", "--replicas=3", "-n", ns)
    services.wait_until(lambda: web_running(ns, 3), 30, "web's 3 pods running")
    # a client-go scale client PUTs an autoscaling/v1 Scale in protobuf (spec.replicas, field 1 of spec)
    scale = ld(1, ld(1, b"web") + ld(3, ns.encode())) + ld(2, varint(1 << 3) + varint(4))
    code, _, out = raw("PUT", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
                       envelope("autoscaling/v1", "Scale", scale))
    assert code == 200, out
    assert get(f"/apis/apps/v1/namespaces/{ns}/deployments/web")[1]["spec"]["replicas"] == 4
    code, _, out = raw("PUT", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale", b"k8s\x00\x0a")
    assert code == 400 and b"could not be decoded as a Scale" in out, out
    # kubectl 1.32's SelfSubjectAccessReview (protobuf both ways)
    assert ok("132", "auth", "can-i", "get", "pods", "-n", ns).strip() == "yes"


def test_workload_and_rbac_creates_120():
    """kubectl 1.20 sends these kinds as JSON; its create cronjob is
    batch/v1beta1, which is not served (docs/workloads.md)."""
    ns = "pbwl120"
    ok("120", "create", "namespace", ns)
    for args, where in ((["create", "deployment", "web", "--image=nginx", "--replicas=2"], ns),
                        (["create", "job", "j", "--image=busybox"], ns),
                        (["create", "role", "r", "--verb=get", "--resource=pods"], ns),
                        (["create", "rolebinding", "rb", "--role=r", "--user=u"], ns),
                        (["create", "clusterrole", "pbcr120", "--verb=list", "--resource=nodes"], None),
                        (["create", "clusterrolebinding", "pbcrb120", "--clusterrole=pbcr120", "--user=u"], None)):
        sends("120", args, where, "application/json")
    code, d = get(f"/apis/apps/v1/namespaces/{ns}/deployments/web")
    assert code == 200 and d["spec"]["replicas"] == 2, d
    assert "scaled" in ok("120", "scale", "deployment", "web", "--replicas=3", "-n", ns)
    assert get(f"/apis/apps/v1/namespaces/{ns}/deployments/web")[1]["spec"]["replicas"] == 3


if services.kubectl_minor() <= 20:  # CI's fresh root: Debian's 1.20 is the only kubectl
    services.without_tests(globals(), [
        "test_protobuf_equals_json_path", "test_drain_132", "test_eviction_refused_is_429_status",
        "test_drain_disable_eviction_132", "test_drain_job_sla_132", "test_workload_and_rbac_creates_132"],
        "they drive kubectl 1.32, and PATH's kubectl is 1.20; .ci/run's second pass runs them with 1.32")
try:
    run_tests("test_shim_protobuf", globals())
finally:
    services.stop_all()
