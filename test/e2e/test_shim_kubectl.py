"""End-to-end: pelotond's apiserver role with a real redis-server, driven by
the real kubectl and by raw HTTP for the error shapes."""
import json
import os
import subprocess
import urllib.error
import urllib.request

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)
KUBECONFIG = services.kubeconfig(PORT)
BASE = f"http://127.0.0.1:{PORT}"


def kubectl(*args, stdin=None):
    p = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", *args], input=stdin, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def http(method, path, body=None, ctype="application/json", headers=None):
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", ctype)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), json.loads(e.read() or b"null")


OBJS = """apiVersion: v1
kind: Namespace
metadata: {name: team1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm1, namespace: team1, labels: {app: web}}
data: {a: b}
"""


def test_version_and_discovery():
    rc, out, err = kubectl("version", "-o", "json")
    assert rc == 0, err
    assert json.loads(out)["serverVersion"]["gitVersion"] == "v1.32.0-peloton"
    rc, out, err = kubectl("api-resources")
    assert rc == 0, err
    lines = out.splitlines()
    assert any(l.split()[0] == "namespaces" and " ns " in l for l in lines), out
    assert any(l.startswith("leases") and "coordination.k8s.io/v1" in l for l in lines), out
    # aggregated discovery needs its exact content type
    status, ctype, body = http("GET", "/api", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"})
    assert status == 200 and ctype == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", ctype
    assert body["kind"] == "APIGroupDiscoveryList"
    status, ctype, body = http("GET", "/api")
    assert body["kind"] == "APIVersions" and ctype == "application/json"


def test_default_namespaces():
    rc, out, err = kubectl("get", "ns", "-o", "name")
    assert rc == 0, err
    assert set(out.split()) >= {"namespace/default", "namespace/kube-system", "namespace/kube-public",
                                "namespace/kube-node-lease"}


def test_create_get_replace_delete_with_kubectl():
    rc, out, err = kubectl("create", "-f", "-", "--validate=false", stdin=OBJS)
    assert rc == 0, err
    assert "namespace/team1 created" in out and "configmap/cm1 created" in out
    rc, out, err = kubectl("get", "cm", "cm1", "-n", "team1", "-o", "json")
    assert rc == 0, err
    cm = json.loads(out)
    assert cm["data"] == {"a": "b"} and cm["metadata"]["uid"] and int(cm["metadata"]["resourceVersion"]) > 0
    rv = int(cm["metadata"]["resourceVersion"])
    rc, out, err = kubectl("create", "-f", "-", "--validate=false", stdin=OBJS)
    assert rc != 0 and 'namespaces "team1" already exists' in err and 'configmaps "cm1" already exists' in err, err
    rc, out, err = kubectl("replace", "-f", "-", "--validate=false", stdin=OBJS.replace("{a: b}", "{a: c}"))
    assert rc == 0, err
    cm2 = json.loads(kubectl("get", "cm", "cm1", "-n", "team1", "-o", "json")[1])
    assert cm2["data"] == {"a": "c"} and int(cm2["metadata"]["resourceVersion"]) > rv
    assert cm2["metadata"]["uid"] == cm["metadata"]["uid"]
    rc, out, err = kubectl("delete", "cm", "cm1", "-n", "team1")
    assert rc == 0 and 'configmap "cm1" deleted' in out, err
    rc, out, err = kubectl("get", "cm", "cm1", "-n", "team1")
    assert rc != 0 and "NotFound" in err, err
    rc, out, err = kubectl("delete", "ns", "team1")
    assert rc == 0, err


def test_errors_are_status():
    st, _, b = http("POST", "/api/v1/namespaces/default/configmaps", b"{not json")
    assert st == 400 and b["kind"] == "Status" and b["reason"] == "BadRequest", b
    st, _, b = http("POST", "/api/v1/namespaces/default/configmaps", {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x"}})
    assert st == 400 and b["reason"] == "BadRequest", b
    st, _, b = http("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {}})
    assert st == 422 and b["reason"] == "Invalid" and b["details"]["causes"][0]["field"] == "metadata.name", b
    # an empty protobuf envelope names no kind (protobuf itself: test_shim_protobuf.py)
    st, _, b = http("POST", "/api/v1/namespaces/default/configmaps", b"k8s\x00", ctype="application/vnd.kubernetes.protobuf")
    assert st == 400 and b["reason"] == "BadRequest", b
    st, _, b = http("POST", "/api/v1/namespaces/default/configmaps", b"a: b", ctype="text/plain")
    assert st == 415 and b["reason"] == "UnsupportedMediaType", b
    st, _, b = http("POST", "/api/v1/namespaces/nope/configmaps", {"metadata": {"name": "x"}})
    assert st == 404 and b["message"] == 'namespaces "nope" not found', b
    st, _, b = http("GET", "/api/v1/namespaces/default/widgets")
    assert st == 404 and b["reason"] == "NotFound", b
    st, _, b = http("PUT", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "x"}})
    assert st == 405 and b["reason"] == "MethodNotAllowed", b  # no PUT on a collection
    st, _, b = http("POST", "/api/v1/namespaces/default/configmaps", b"x" * (4 << 20))
    assert st == 413 and b["reason"] == "RequestEntityTooLarge", b
    # stale resourceVersion on update: Conflict
    st, _, made = http("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c1"}, "data": {"k": "1"}})
    assert st == 201, made
    made["data"] = {"k": "2"}
    st, _, upd = http("PUT", "/api/v1/namespaces/default/configmaps/c1", made)
    assert st == 200
    made["data"] = {"k": "3"}  # still the old resourceVersion
    st, _, b = http("PUT", "/api/v1/namespaces/default/configmaps/c1", made)
    assert st == 409 and b["reason"] == "Conflict" and "the object has been modified" in b["message"], b
    # the server is still serving
    assert http("GET", "/api/v1/namespaces/default/configmaps/c1")[0] == 200


def test_generate_name_and_pagination():
    for i in range(5):
        st, _, b = http("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"generateName": "gen-"}})
        assert st == 201 and b["metadata"]["name"].startswith("gen-") and len(b["metadata"]["name"]) == 9, b
    names, cont, pages = [], "", 0
    while True:
        st, _, b = http("GET", "/api/v1/namespaces/default/configmaps?limit=2" + (f"&continue={cont}" if cont else ""))
        assert st == 200 and b["kind"] == "ConfigMapList", b
        names += [i["metadata"]["name"] for i in b["items"]]
        pages += 1
        cont = b["metadata"].get("continue")
        if not cont:
            break
    assert pages >= 3 and len(names) == len(set(names)) and sum(n.startswith("gen-") for n in names) == 5


POD = """apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default, labels: {app: web, tier: front}}
spec:
  nodeName: node-a
  containers:
  - {name: app, image: nginx, env: [{name: A, value: "1"}, {name: B, value: "2"}]}
  - {name: sidecar, image: envoy}
---
apiVersion: v1
kind: Pod
metadata: {name: db-1, namespace: default, labels: {app: db}}
spec:
  containers: [{name: db, image: postgres}]
"""


def test_label_patch_and_selectors():
    rc, out, err = kubectl("create", "-f", "-", "--validate=false", stdin=POD)
    assert rc == 0, err
    rc, out, err = kubectl("label", "pod", "db-1", "tier=back")
    assert rc == 0 and "labeled" in out, err
    rc, out, err = kubectl("get", "pods", "-l", "tier in (front,back),app!=cache", "-o", "name")
    assert rc == 0 and sorted(out.split()) == ["pod/db-1", "pod/web-1"], (out, err)
    rc, out, err = kubectl("get", "pods", "-l", "app=web", "-o", "name")
    assert out.split() == ["pod/web-1"], (out, err)
    rc, out, err = kubectl("get", "pods", "--field-selector", "spec.nodeName=node-a", "-o", "name")
    assert rc == 0 and out.split() == ["pod/web-1"], (out, err)
    rc, out, err = kubectl("get", "pods", "--field-selector", "spec.nodeName=", "-o", "name")
    assert out.split() == ["pod/db-1"], (out, err)  # unbound pods
    rc, out, err = kubectl("get", "pods", "--field-selector", "spec.bogus=1")
    assert rc != 0 and "field label not supported: spec.bogus" in err, err
    rc, out, err = kubectl("get", "pods", "-l", "app in (a")
    assert rc != 0, err
    # strategic merge: one env entry of one container, by merge key
    rc, out, err = kubectl("patch", "pod", "web-1", "--type", "strategic", "-p",
                           '{"spec":{"containers":[{"name":"app","env":[{"name":"B","value":"3"}]}]}}')
    assert rc == 0, err
    pod = json.loads(kubectl("get", "pod", "web-1", "-o", "json")[1])
    assert [c["name"] for c in pod["spec"]["containers"]] == ["app", "sidecar"]
    assert {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]} == {"A": "1", "B": "3"}
    rc, out, err = kubectl("patch", "pod", "web-1", "--type", "merge", "-p", '{"metadata":{"annotations":{"x":"y"}}}')
    assert rc == 0, err
    rc, out, err = kubectl("patch", "pod", "web-1", "--type", "json", "-p",
                           '[{"op":"test","path":"/metadata/annotations/x","value":"y"},'
                           '{"op":"remove","path":"/spec/containers/1"}]')
    assert rc == 0, err
    pod = json.loads(kubectl("get", "pod", "web-1", "-o", "json")[1])
    assert pod["metadata"]["annotations"] == {"x": "y"} and len(pod["spec"]["containers"]) == 1
    rc, out, err = kubectl("patch", "pod", "web-1", "--type", "json", "-p",
                           '[{"op":"test","path":"/metadata/annotations/x","value":"nope"}]')
    assert rc != 0 and 'The Pod "web-1" is invalid' in err and "patch:" in err, err
    st, _, b = http("PATCH", "/api/v1/namespaces/default/pods/web-1", {"a": 1}, ctype="text/plain")
    assert st == 415 and b["reason"] == "UnsupportedMediaType", b
    st, _, b = http("PATCH", "/api/v1/namespaces/default/pods/web-1", {"metadata": {"name": "other"}},
                    ctype="application/merge-patch+json")
    assert st == 422, b
    st, _, b = http("PATCH", "/api/v1/namespaces/default/pods/nope", {}, ctype="application/merge-patch+json")
    assert st == 404 and b["message"] == 'pods "nope" not found', b


APPLY = """apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: default}
data: {mode: "%s"}
"""


def get_cm(name):
    return json.loads(kubectl("get", "cm", name, "-o", "json")[1])


def test_apply_openapi_and_dry_run():
    st, ctype, idx = http("GET", "/openapi/v3")
    assert st == 200 and "api/v1" in idx["paths"] and "apis/coordination.k8s.io/v1" in idx["paths"], idx
    rc, out, err = kubectl("apply", "-f", "-", stdin=APPLY % "a")  # validation on: needs OpenAPI
    assert rc == 0 and "configmap/app-config created" in out, err
    rc, out, err = kubectl("apply", "-f", "-", stdin=APPLY % "b")
    assert rc == 0 and "configmap/app-config configured" in out, err
    cm = get_cm("app-config")
    assert cm["data"] == {"mode": "b"}
    assert '"mode":"b"' in cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    rc, out, err = kubectl("apply", "--server-side", "-f", "-", stdin=APPLY % "c")
    assert rc == 0 and "serverside-applied" in out, err
    before = get_cm("app-config")
    rc, out, err = kubectl("diff", "-f", "-", stdin=APPLY % "d")  # dryRun=All: shows, never writes
    assert rc == 1 and "-  mode: c" in out and "+  mode: d" in out, (out, err)
    rc, out, err = kubectl("apply", "--dry-run=server", "-f", "-", stdin=APPLY % "e")
    assert rc == 0, err
    rc, out, err = kubectl("create", "--dry-run=server", "-f", "-", stdin=APPLY.replace("app-config", "never"))
    assert rc == 0, err
    after = get_cm("app-config")
    assert after["data"] == {"mode": "c"} and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert kubectl("get", "cm", "never")[0] != 0
    rc, out, err = kubectl("delete", "--dry-run=server", "cm", "app-config")
    assert rc == 0 and get_cm("app-config")["metadata"]["uid"] == after["metadata"]["uid"], err
    st, _, b = http("DELETE", "/api/v1/namespaces/default/configmaps/app-config?dryRun=Some")
    assert st == 400, b


TABLE_OBJS = """apiVersion: v1
kind: Pod
metadata: {name: tbl-1, namespace: default, labels: {app: tbl}}
spec: {containers: [{name: a, image: nginx}, {name: b, image: envoy}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: tbl-cfg, namespace: default}
data: {a: "1", b: "2"}
---
apiVersion: v1
kind: Node
metadata: {name: tbl-node}
status: {conditions: [{type: Ready, status: "True"}], nodeInfo: {kubeletVersion: v1.32.0}}
"""


def table(*args):
    rc, out, err = kubectl("get", *args)
    assert rc == 0, err
    lines = [l.split() for l in out.splitlines()]
    return lines[0], {l[0]: l for l in lines[1:]}


def test_table_columns():
    rc, out, err = kubectl("apply", "-f", "-", stdin=TABLE_OBJS)
    assert rc == 0, err
    head, rows = table("pods", "-l", "app=tbl")
    assert head == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], head
    assert rows["tbl-1"][1:4] == ["0/2", "Pending", "0"], rows
    head, rows = table("pods", "-l", "app=tbl", "-o", "wide", "--show-labels")
    assert "NODE" in head and rows["tbl-1"][-1] == "app=tbl", (head, rows)
    head, rows = table("cm", "tbl-cfg")
    assert head == ["NAME", "DATA", "AGE"] and rows["tbl-cfg"][1] == "2", rows
    head, rows = table("nodes")
    assert head == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and rows["tbl-node"][1] == "Ready", rows
    assert rows["tbl-node"][4] == "v1.32.0"
    st, ctype, t = http("GET", "/api/v1/namespaces/default/pods", headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    assert t["kind"] == "Table" and t["rows"][0]["object"]["kind"] == "PartialObjectMetadata", t


def test_explain_builtins():
    rc, out, err = kubectl("explain", "pod.spec.containers.resources")
    assert rc == 0 and "requests" in out and "limits" in out, (out, err)
    rc, out, err = kubectl("explain", "node.spec.taints.effect")
    assert rc == 0 and "NoExecute" in out, (out, err)
    rc, out, err = kubectl("explain", "pod.spec.nosuchfield")
    assert rc != 0, out


def test_token_auth_when_configured():
    p, port, _ = services.start_pelotond(REDIS, "--token-file=" + write_token())
    try:
        def get(h):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/namespaces", headers=h)
            try:
                return urllib.request.urlopen(req, timeout=5).status
            except urllib.error.HTTPError as e:
                return e.code
        assert get({}) == 401
        assert get({"Authorization": "Bearer wrong"}) == 401
        assert get({"Authorization": "Bearer tok-e2e"}) == 200
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).status == 200
    finally:
        services.stop(p)


def write_token():
    path = os.path.join(services.tempdir(), "token")
    with open(path, "w") as f:
        f.write("tok-e2e\n")
    return path


def test_clean_shutdown():
    assert services.stop(PROC) == 0, open(LOG).read()
    assert "msg=stopped" in open(LOG).read()


run_tests("shim-kubectl", dict(globals()))
