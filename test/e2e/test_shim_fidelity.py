"""End-to-end: what kubectl prints against the facade, as against a real
cluster, with kubectl 1.32 (on PATH) and Debian's kubectl 1.20
(scripts/kubectl-1.20.sh), on one stack: redis-server, pelotond with every
role (placement binds the pods) and kubelet-sim with two nodes.

- `get -w` keeps its columns after the first table (watch with as=Table),
  for pods and for a CRD's printer columns;
- `--sort-by` on a field outside metadata sorts rows (includeObject=Object);
- `get peloton` (the CRDs' category), `get all` (pods and services);
- `-o wide` columns of pods and nodes, node info from kubelet-sim;
- STATUS Completed for a succeeded pod;
- `logs` answers a Status saying kubelet-sim keeps no output;
- `get events` shows the Scheduled Event of each binding;
- discovery: categories, verbs, GET /, includeObject checked."""
import json
import os
import re
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
KSIM, KSIM_ERR = services.start_kubelet_sim(KUBECONFIG, "--nodes=2", expect=2)
BASE = f"http://127.0.0.1:{PORT}"
CACHE = {"1.20": services.tempdir(), "1.32": services.tempdir()}
BIN = {"1.20": KUBECTL120, "1.32": "kubectl"}
# both versions where PATH's kubectl is the newer one; CI's fresh root has 1.20 alone
VERSIONS = ("1.32", "1.20") if services.kubectl_minor() > 20 else ("1.20",)


def k(version, *args, stdin=None):
    p = subprocess.run([BIN[version], f"--kubeconfig={KUBECONFIG}", f"--cache-dir={CACHE[version]}", *args],
                       input=stdin, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def ok(version, *args, stdin=None):
    rc, out, err = k(version, *args, stdin=stdin)
    assert rc == 0, (version, args, out, err)
    return out


def http(path, accept=None, method="GET"):
    req = urllib.request.Request(BASE + path, method=method, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def rows(out):
    """kubectl's table as lists of cells (split on runs of 2+ spaces), header first."""
    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.strip()]


# Two long-running pods whose images sort the other way round from their
# names, a pod that completes at once, a service and a pool.
OBJS = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: fid-a, namespace: default}
  spec:
    containers: [{name: app, image: zz-image, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: fid-b, namespace: default}
  spec:
    containers: [{name: app, image: aa-image, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
- apiVersion: v1
  kind: Pod
  metadata:
    name: fid-done
    namespace: default
    annotations: {kubelet-sim.peloton.io/run-seconds: "0.1"}
  spec:
    restartPolicy: Never
    containers: [{name: app, image: busybox, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
- apiVersion: v1
  kind: Service
  metadata: {name: fid-svc, namespace: default}
  spec:
    ports: [{port: 80, protocol: TCP}]
- apiVersion: peloton.io/v1alpha1
  kind: ResourcePool
  metadata: {name: fidpool}
  spec:
    resources:
    - {kind: cpu, reservation: 1, limit: 2}
"""


def test_setup():
    ok("1.32", "apply", "-f", "-", stdin=OBJS)

    def running():
        out = ok("1.32", "get", "pods", "-o", "json")
        phases = {p["metadata"]["name"]: p["status"].get("phase") for p in json.loads(out)["items"]}
        return phases.get("fid-a") == "Running" and phases.get("fid-b") == "Running" and \
            phases.get("fid-done") == "Succeeded"
    services.wait_until(running, 20, "the pods running and fid-done succeeded")
    # the pool's status (its printer columns) written by the resource manager
    services.wait_until(lambda: any(r[:2] == ["fidpool", "1"] for r in rows(ok("1.32", "get", "rp"))), 20,
                        "fidpool's status")


def watch_lines(version, args, change, name, want):
    """Starts `kubectl get ARGS -w`, makes the change once the first table is
    out, and returns the output once a line for name after the first has
    want in it."""
    out_path = os.path.join(services.tempdir(), "watch.out")
    with open(out_path, "w") as out:
        p = subprocess.Popen([BIN[version], f"--kubeconfig={KUBECONFIG}", f"--cache-dir={CACHE[version]}", "get",
                              *args, "-w"], stdout=out, stderr=subprocess.STDOUT)
    try:
        def lines_for():
            return [line for line in open(out_path).read().splitlines() if line.split() and line.split()[0] == name]
        services.wait_until(lambda: len(lines_for()) >= 1, 15, f"{version} get -w's first table")
        change()
        services.wait_until(lambda: len(lines_for()) >= 2, 15, f"{version} get -w's event for {name}")
        return open(out_path).read(), lines_for()
    finally:
        services.stop(p)


def test_watch_keeps_columns():
    for n, version in enumerate(VERSIONS):
        out, lines = watch_lines(version, ["pods"],
                                 lambda: ok(version, "label", "pod", "fid-a", f"step={n}", "--overwrite"),
                                 "fid-a", "Running")
        assert out.splitlines()[0].split()[:3] == ["NAME", "READY", "STATUS"], (version, out)
        for line in lines:  # the event's row has every column, not the name alone
            cells = re.split(r"\s{2,}", line.strip())
            assert cells[:4] == ["fid-a", "1/1", "Running", "0"] and len(cells) == 5, (version, out)
        assert out.count("NAME") == 1, (version, out)  # the columns are printed once


def test_watch_crd_printer_columns():
    for n, version in enumerate(VERSIONS):
        out, lines = watch_lines(version, ["rp"],
                                 lambda: ok(version, "label", "rp", "fidpool", f"step={n}", "--overwrite"),
                                 "fidpool", "")
        header = rows(out)[0]
        assert header[:3] == ["NAME", "PARENT", "CPU-RES"] and header[-1] == "AGE", (version, out)
        for line in lines:
            cells = re.split(r"\s{2,}", line.strip())
            # PARENT is empty for a root pool: the row has every column but that one
            assert cells[0] == "fidpool" and cells[1] == "1" and len(cells) == len(header) - 1, (version, out)


def test_sort_by_field_outside_metadata():
    for version in VERSIONS:
        out = ok(version, "get", "pods", "--sort-by=.spec.containers[0].image")
        names = [r[0] for r in rows(out)[1:]]
        assert names == ["fid-b", "fid-done", "fid-a"], (version, out)  # aa-image, busybox, zz-image
        out = ok(version, "get", "pods", "--sort-by=.spec.nodeName")
        assert sorted(r[0] for r in rows(out)[1:]) == ["fid-a", "fid-b", "fid-done"], (version, out)


def test_get_categories():
    for version in VERSIONS:
        out = ok(version, "get", "peloton")
        assert "resourcepool.peloton.io/fidpool" in out, (version, out)
        out = ok(version, "get", "all")
        for want in ("pod/fid-a", "pod/fid-b", "service/fid-svc"):
            assert want in out, (version, want, out)
        assert "resourcepool" not in out and "configmap" not in out, (version, out)


def test_wide_columns():
    for version in VERSIONS:
        table = rows(ok(version, "get", "pods", "-o", "wide"))
        assert table[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                            "READINESS GATES"], (version, table)
        a = next(r for r in table if r[0] == "fid-a")
        assert re.match(r"\d+\.\d+\.\d+\.\d+$", a[5]) and a[6].startswith("sim-node-") and a[7:] == ["<none>", "<none>"], \
            (version, a)
        table = rows(ok(version, "get", "nodes", "-o", "wide"))
        assert table[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                            "KERNEL-VERSION", "CONTAINER-RUNTIME"], (version, table)
        n = next(r for r in table if r[0] == "sim-node-0")
        assert n[1] == "Ready" and n[2] == "<none>" and n[4] == "v1.32.0-sim", (version, n)
        assert n[6:] == ["<none>", "kubelet-sim", "0.0.0-sim", "kubelet-sim://1"], (version, n)


def test_completed_status():
    for version in VERSIONS:
        done = next(r for r in rows(ok(version, "get", "pods")) if r[0] == "fid-done")
        assert done[1:3] == ["0/1", "Completed"], (version, done)


def test_logs_explains():
    for version in VERSIONS:
        rc, out, err = k(version, "logs", "fid-a")
        assert rc != 0 and "BadRequest" in err and "kubelet-sim" in err and "no logs" in err, (version, out, err)
        assert "it is running since" in err, err
        rc, out, err = k(version, "logs", "fid-done")
        assert rc != 0 and "terminated with exit code 0 (Completed)" in err, (version, out, err)
        rc, out, err = k(version, "logs", "fid-a", "-c", "nope")
        assert rc != 0 and "container nope is not valid for pod fid-a" in err, (version, out, err)


def test_events_show_scheduled():
    for version in VERSIONS:
        table = rows(ok(version, "get", "events"))
        assert table[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], (version, table)
        sched = [r for r in table if r[2] == "Scheduled" and r[3] == "pod/fid-a"]
        assert sched and re.match(r"Successfully assigned default/fid-a to sim-node-\d$", sched[0][4]), (version, table)
        table = rows(ok(version, "get", "events", "-o", "wide"))
        assert table[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN",
                            "COUNT", "NAME"], (version, table)
        sched = [r for r in table if r[2] == "Scheduled" and r[3] == "pod/fid-a"]
        # no SUBOBJECT for a pod's Event: the row has one cell fewer than the header
        assert sched and sched[0][4] == "peloton-placement" and sched[0][7] == "1", (version, table)
        assert sched[0][8].startswith("fid-a."), (version, table)
    out = ok("1.32", "describe", "pod", "fid-a")  # describe finds it by the pod's uid
    assert re.search(r"Normal\s+Scheduled\s+.*Successfully assigned default/fid-a", out), out


def test_discovery():
    st, root = http("/")
    assert st == 200 and {"/api", "/api/v1", "/apis", "/apis/peloton.io", "/apis/peloton.io/v1alpha1",
                          "/version", "/openapi/v2"} <= set(root["paths"]), root
    assert root["paths"] == sorted(root["paths"]), root
    st, group = http("/apis/peloton.io")
    assert st == 200 and group["kind"] == "APIGroup" and group["preferredVersion"]["version"] == "v1alpha1", group
    st, core = http("/api/v1")
    res = {r["name"]: r for r in core["resources"]}
    full = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    assert res["pods"]["categories"] == ["all"] and res["pods"]["shortNames"] == ["po"], res["pods"]
    assert res["pods"]["verbs"] == full and res["services"]["categories"] == ["all"], res
    assert res["namespaces"]["verbs"] == [v for v in full if v != "deletecollection"], res["namespaces"]
    assert "categories" not in res["configmaps"] and res["configmaps"]["shortNames"] == ["cm"], res["configmaps"]
    assert res["pods/log"]["verbs"] == ["get"] and res["pods/binding"]["verbs"] == ["create"], res
    st, body = http("/api/v1/namespaces", method="DELETE")
    assert st == 405 and body["reason"] == "MethodNotAllowed", body
    st, agg = http("/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    pel = next(g for g in agg["items"] if g["metadata"]["name"] == "peloton.io")
    rp = next(r for r in pel["versions"][0]["resources"] if r["resource"] == "resourcepools")
    assert rp["categories"] == ["peloton"] and rp["shortNames"] == ["rp"], rp
    assert [s["subresource"] for s in rp.get("subresources", [])] == ["status"], rp
    for version in VERSIONS:  # what kubectl makes of it
        out = ok(version, "api-resources", "--categories=peloton" if version == "1.32" else "--api-group=peloton.io")
        assert "resourcepools" in out and "jobs" in out, (version, out)


def test_include_object_checked():
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    st, body = http("/api/v1/namespaces/default/pods?includeObject=Whole", table)
    assert st == 400 and body["reason"] == "BadRequest" and "includeObject" in body["message"], body
    st, body = http("/api/v1/namespaces/default/pods?includeObject=None", table)
    assert st == 200 and body["rows"] and all(r["object"] is None for r in body["rows"]), body
    st, body = http("/api/v1/namespaces/default/pods/fid-a?includeObject=Object", table)
    assert st == 200 and body["rows"][0]["object"]["spec"]["containers"][0]["image"] == "zz-image", body


def test_watch_table_events_raw():
    """A watch's events as Tables: the columns in the first only, the row's
    object as includeObject says, for pods and a CRD alike."""
    for path, name in (("/api/v1/namespaces/default/pods", "fid-b"), ("/apis/peloton.io/v1alpha1/resourcepools",
                                                                      "fidpool")):
        req = urllib.request.Request(f"{BASE}{path}?watch=true&timeoutSeconds=2&includeObject=Object&"
                                     f"fieldSelector=metadata.name%3D{name}",
                                     headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        with urllib.request.urlopen(req, timeout=10) as r:
            first = json.loads(r.readline())
            kind = "pods" if "pods" in path else "rp"
            ok("1.32", "annotate", kind, name, "fid/touched=yes", "--overwrite")
            second = json.loads(r.readline())
        for ev in (first, second):
            t = ev["object"]
            assert t["kind"] == "Table" and len(t["rows"]) == 1, ev
            row = t["rows"][0]
            assert row["object"]["metadata"]["name"] == name and "spec" in row["object"], ev
            assert len(row["cells"]) == len(first["object"]["columnDefinitions"]), ev
        assert first["type"] == "ADDED" and first["object"]["columnDefinitions"], first
        assert second["type"] == "MODIFIED" and second["object"]["columnDefinitions"] is None, second
        assert second["object"]["rows"][0]["object"]["metadata"]["annotations"]["fid/touched"] == "yes", second


def test_clean_shutdown():
    assert services.stop(KSIM) == 0, open(KSIM_ERR).read()
    assert services.stop(PROC) == 0, open(LOG).read()


run_tests("shim-fidelity", dict(globals()))
