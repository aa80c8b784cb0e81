"""End-to-end: /openapi/v2 and what kubectl 1.20 (Debian bookworm's own, from
scripts/kubectl-1.20.sh) does with it: explain, the --dry-run=server support
check and client-side validation; the kubectl 1.32 on PATH where the same
commands make sense for it too."""
import json
import os
import shutil
import subprocess
import urllib.request

import services
from simlib import run_tests

KUBECTL120 = subprocess.run([os.path.join(services.ROOT, "scripts", "kubectl-1.20.sh")], capture_output=True,
                            text=True, timeout=300, check=True).stdout.strip()
REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)
KUBECONFIG = services.kubeconfig(PORT)
BASE = f"http://127.0.0.1:{PORT}"
EX = os.path.join(services.ROOT, "examples")
PB = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def run(binary, args, stdin=None, cache=None):
    # each kubectl keeps its own discovery cache: 1.20 and 1.32 write different ones
    p = subprocess.run([binary, f"--kubeconfig={KUBECONFIG}", f"--cache-dir={cache}", *args], input=stdin,
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


CACHE120, CACHE132 = services.tempdir(), services.tempdir()


def k120(*args, stdin=None):
    return run(KUBECTL120, args, stdin, CACHE120)


def k132(*args, stdin=None):
    return run("kubectl", args, stdin, CACHE132)


def get(path, accept=None):
    req = urllib.request.Request(BASE + path, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


CM = """apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: default}
data: {mode: a}
"""

# What a real workload's manifest holds: kubectl 1.20 checks every field
# against the served schemas before it sends anything.
POD = """apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
  labels: {app: web, tier: front}
  annotations: {team: web}
spec:
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  restartPolicy: Always
  terminationGracePeriodSeconds: 10
  priorityClassName: ""
  nodeSelector: {disk: ssd}
  tolerations:
  - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
  - {operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: In, values: [a, b]}
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {matchLabels: {app: web}}
  securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000, runAsNonRoot: true}
  volumes:
  - name: cfg
    configMap: {name: web-config, items: [{key: a, path: a.conf}], defaultMode: 420}
  - name: scratch
    emptyDir: {medium: Memory, sizeLimit: 64Mi}
  containers:
  - name: app
    image: nginx:1.25
    imagePullPolicy: IfNotPresent
    command: [nginx]
    args: ["-g", "daemon off;"]
    ports:
    - {name: http, containerPort: 8080, protocol: TCP}
    env:
    - {name: MODE, value: prod}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: CPU_LIMIT
      valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}
    envFrom:
    - configMapRef: {name: web-config}
    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {cpu: 1, memory: 128Mi}
    volumeMounts:
    - {name: cfg, mountPath: /etc/web, readOnly: true}
    - {name: scratch, mountPath: /tmp}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
    livenessProbe:
      httpGet: {path: /healthz, port: http}
      initialDelaySeconds: 5
      periodSeconds: 10
    readinessProbe:
      tcpSocket: {port: 8080}
      failureThreshold: 3
    startupProbe:
      exec: {command: [cat, /tmp/ready]}
    lifecycle:
      preStop:
        exec: {command: [sleep, "5"]}
  - name: sidecar
    image: envoy:1.29
    resources: {limits: {memory: 32Mi}}
"""


def test_kubectl_versions():
    rc, out, err = k120("version", "--client", "-o", "json")
    assert rc == 0 and json.loads(out)["clientVersion"]["minor"] == "20", (out, err)


def test_openapi_v2_protobuf_and_json():
    st, ctype, body = get("/openapi/v2", PB)
    assert st == 200 and "protobuf" in ctype, ctype
    assert len(body) > 10000 and body[:5] == b"\x0a\x032.0", body[:16]  # field 1 (swagger), length 3, "2.0"
    if shutil.which("curl"):  # as a person would fetch it
        p = subprocess.run(["curl", "-sS", "-H", "Accept: " + PB, BASE + "/openapi/v2"], capture_output=True, timeout=30)
        assert p.returncode == 0 and p.stdout == body, (p.returncode, p.stderr)
    st, ctype, body = get("/openapi/v2", "application/json")
    doc = json.loads(body)
    assert st == 200 and ctype == "application/json" and doc["swagger"] == "2.0", ctype
    pod = doc["definitions"]["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}], pod
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "ConfigMap", "version": "v1"}
    assert any(p["name"] == "dryRun" and p["in"] == "query" for p in patch["parameters"]), patch
    assert "io.peloton.v1alpha1.ResourcePool" in doc["definitions"]
    assert json.loads(get("/openapi/v2")[2])["swagger"] == "2.0"  # no Accept: JSON
    missing = refs(doc, "#/definitions/") - set(doc["definitions"])
    assert not missing, missing
    kinds = {g["kind"] for d in doc["definitions"].values() for g in d.get("x-kubernetes-group-version-kind", [])}
    assert kinds >= {"Pod", "Node", "Namespace", "ConfigMap", "Secret", "Service", "Event", "Lease",
                     "CustomResourceDefinition", "ResourcePool", "Job"}, kinds


def refs(node, prefix):
    """The definition names node refers to."""
    out = set()
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith(prefix):
                out.add(v[len(prefix):])
            else:
                out |= refs(v, prefix)
    elif isinstance(node, list):
        for v in node:
            out |= refs(v, prefix)
    return out


def test_openapi_v3_documents_hold_what_they_name():
    index = json.loads(get("/openapi/v3")[2])["paths"]
    for gv in ("api/v1", "apis/coordination.k8s.io/v1", "apis/apiextensions.k8s.io/v1", "apis/peloton.io/v1alpha1"):
        doc = json.loads(get("/" + index[gv]["serverRelativeURL"].lstrip("/").split("?")[0])[2])
        schemas = doc["components"]["schemas"]
        missing = refs(doc, "#/components/schemas/") - set(schemas)
        assert not missing and not refs(doc, "#/definitions/"), (gv, missing)
    assert "io.k8s.api.core.v1.PodSpec" in json.loads(get("/openapi/v3/api/v1")[2])["components"]["schemas"]


def test_builtin_schemas_match_their_generator():
    p = subprocess.run(["/usr/bin/python3", os.path.join(services.ROOT, "scripts", "gen-builtin-schemas.py"),
                        "--check"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_explain_builtins():
    for k in (k120, k132):
        rc, out, err = k("explain", "pod.spec.containers.resources")
        assert rc == 0 and "requests" in out and "limits" in out, (k.__name__, out, err)
        rc, out, err = k("explain", "node.spec.taints.effect")
        assert rc == 0 and "NoExecute" in out, (k.__name__, out, err)
        rc, out, err = k("explain", "pod.spec.nosuchfield")
        assert rc != 0 and "nosuchfield" in err, (k.__name__, out, err)
    rc, out, err = k120("explain", "pod.spec.volumes.configMap.items")  # nested all the way down
    assert rc == 0 and "path" in out and "mode" in out, (out, err)


def test_explain_custom_resource_after_applying_crds():
    rc, out, err = k120("apply", "-f", os.path.join(services.ROOT, "crds"))
    assert rc == 0 and "resourcepools.peloton.io" in out, err
    for k in (k120, k132):
        rc, out, err = k("explain", "rp.spec.resources")
        assert rc == 0 and "reservation" in out and "share" in out, (k.__name__, out, err)


def test_dry_run_server_stores_nothing():
    for k, name in ((k120, "dry-120"), (k132, "dry-132")):
        rc, out, err = k("apply", "--dry-run=server", "-f", "-", stdin=CM % name)
        assert rc == 0 and "(server dry run)" in out, (k.__name__, out, err)
        rc, out, err = k("create", "--dry-run=server", "-f", "-", stdin=CM % name)
        assert rc == 0 and "(server dry run)" in out, (k.__name__, out, err)
        rc, out, err = k("get", "cm", name)
        assert rc != 0 and "NotFound" in err, (k.__name__, out, err)


def test_realistic_pod_passes_client_validation():
    rc, out, err = k120("create", "-f", "-", stdin=POD % "web-120")
    assert rc == 0 and "pod/web-120 created" in out, err
    pod = json.loads(k120("get", "pod", "web-120", "-o", "json")[1])
    spec = pod["spec"]
    assert spec["hostNetwork"] is True and spec["volumes"][1]["emptyDir"]["sizeLimit"] == "64Mi", spec
    assert spec["containers"][0]["livenessProbe"]["httpGet"]["port"] == "http", spec
    rc, out, err = k132("create", "-f", "-", stdin=POD % "web-132")
    assert rc == 0 and "pod/web-132 created" in out, err
    # a second apply computes its patch from the served schema (merge keys)
    rc, out, err = k120("apply", "-f", "-", stdin=POD % "web-apply")
    assert rc == 0, err
    rc, out, err = k120("apply", "-f", "-", stdin=(POD % "web-apply").replace("value: prod", "value: dev"))
    assert rc == 0 and "configured" in out, err
    env = json.loads(k120("get", "pod", "web-apply", "-o", "json")[1])["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == ["MODE", "POD_NAME", "CPU_LIMIT"] and env[0]["value"] == "dev", env


def test_misspelled_field_refused_by_client_validation():
    bad = (POD % "web-typo").replace("  containers:", "  containerz:")
    rc, out, err = k120("create", "-f", "-", stdin=bad)
    assert rc != 0 and 'unknown field "containerz"' in err, (out, err)
    bad = (POD % "web-typo").replace("imagePullPolicy:", "imagePulPolicy:")
    rc, out, err = k120("apply", "-f", "-", stdin=bad)
    assert rc != 0 and 'unknown field "imagePulPolicy"' in err, (out, err)
    rc, out, err = k120("get", "pod", "web-typo")
    assert rc != 0 and "NotFound" in err, err
    rc, out, err = k120("create", "--validate=false", "-f", "-", stdin=bad)  # the check was kubectl's own
    assert rc == 0, err


def test_examples_apply():
    rc, out, err = k120("apply", "-f", os.path.join(EX, "pools.yaml"))
    assert rc == 0 and "resourcepool.peloton.io/training created" in out, (out, err)
    rc, out, err = k120("apply", "-f", os.path.join(EX, "jobs", "batch.yaml"))
    assert rc == 0 and "job.peloton.io/train-resnet created" in out, (out, err)
    rc, out, err = k120("apply", "-f", os.path.join(EX, "jobs", "batch.yaml"))
    assert rc == 0 and "unchanged" in out, (out, err)
    bad = "apiVersion: peloton.io/v1alpha1\nkind: ResourcePool\nmetadata: {name: p1}\nspec: {bogus: 1}\n"
    rc, out, err = k120("apply", "-f", "-", stdin=bad)  # the CRD's schema is closed there
    assert rc != 0 and 'unknown field "bogus"' in err, (out, err)


WIDGET_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, description: How big the widget is.}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {a: {type: string}}}
              either: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
"""


def test_new_crd_reaches_v2_at_once():
    rc, out, err = k120("apply", "-f", "-", stdin=WIDGET_CRD)
    assert rc == 0, err
    doc = json.loads(get("/openapi/v2", "application/json")[2])
    w = doc["definitions"]["com.example.v1.Widget"]
    spec = w["properties"]["spec"]["properties"]
    # as kube-apiserver publishes CRDs in v2: what v2 cannot say is left open
    assert spec["size"]["type"] == "integer" and spec["extra"] == {} and "anyOf" not in spec["either"], spec
    assert "type" not in spec["either"], spec
    ok = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n" \
         "spec: {size: 3, extra: {z: [1]}, either: 50%}\n"
    rc, out, err = k120("apply", "-f", "-", stdin=ok)
    assert rc == 0 and "widget.example.com/w1 created" in out, (out, err)
    rc, out, err = k120("explain", "widget.spec.size")
    assert rc == 0 and "How big the widget is." in out, (out, err)
    rc, out, err = k120("apply", "-f", "-", stdin=ok.replace("size: 3", "size: 3, colour: red"))
    assert rc != 0 and 'unknown field "colour"' in err, (out, err)


def test_clean_shutdown():
    assert services.stop(PROC) == 0, open(LOG).read()
    log = open(LOG).read()
    assert "msg=stopped" in log and log.count('msg="openapi v2 built"') >= 2, log


run_tests("shim-kubectl120", dict(globals()))
