"""End-to-end: the Peloton CRDs served by pelotond (installed from crds/ at
start): kubectl apply of the examples, printer columns, schema validation,
the pool tree's rules as 422, status subresource, explain, watch."""
import http.client
import json
import os
import subprocess

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)
KUBECONFIG = services.kubeconfig(PORT)
EX = os.path.join(services.ROOT, "examples")


def kubectl(*args, stdin=None):
    p = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", *args], input=stdin, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def pool(name, parent=None, cpu_res=None, extra=""):
    spec = f"  parent: {parent}\n" if parent else ""
    if cpu_res is not None:
        spec += f'  resources: [{{kind: cpu, reservation: "{cpu_res}"}}]\n'
    return f"apiVersion: peloton.io/v1alpha1\nkind: ResourcePool\nmetadata: {{name: {name}}}\nspec:\n{spec}{extra}"


def test_crds_installed_and_discoverable():
    rc, out, err = kubectl("get", "crds", "-o", "name")
    assert rc == 0, err
    assert set(out.split()) >= {"customresourcedefinition.apiextensions.k8s.io/resourcepools.peloton.io",
                                "customresourcedefinition.apiextensions.k8s.io/jobs.peloton.io"}, out
    rc, out, err = kubectl("api-resources", "--api-group=peloton.io")
    assert rc == 0 and "resourcepools" in out and " rp " in out and "pj,pjob" in out, out


def test_examples_apply_and_print_columns():
    rc, out, err = kubectl("apply", "-f", os.path.join(EX, "pools.yaml"))
    assert rc == 0 and "resourcepool.peloton.io/training created" in out, err
    rc, out, err = kubectl("apply", "-f", os.path.join(EX, "jobs"))
    assert rc == 0 and out.count("created") == 4, (out, err)
    rc, out, err = kubectl("get", "rp")
    head = out.splitlines()[0].split()
    assert head[:4] == ["NAME", "PARENT", "CPU-RES", "CPU-ENT"], head
    rows = {l.split()[0]: l.split() for l in out.splitlines()[1:]}
    assert rows["training"][1] == "ml", rows
    rc, out, err = kubectl("get", "pj")
    rows = {l.split()[0]: l.split() for l in out.splitlines()[1:]}
    assert rows["web"][1:3] == ["STATELESS", "serving"], rows
    rc, out, err = kubectl("get", "pj", "web", "-o", "yaml")
    assert rc == 0 and "kind: Job" in out and "type: STATELESS" in out, (out, err)
    rc, out, err = kubectl("apply", "-f", os.path.join(EX, "pools.yaml"))  # re-apply: a patch, unchanged
    assert rc == 0 and "unchanged" in out, (out, err)


def test_pool_tree_rules_refused_with_the_rule():
    rc, out, err = kubectl("apply", "-f", "-", stdin=pool("greedy", "ml", 5000))
    assert rc != 0 and 'The ResourcePool "greedy" is invalid' in err and "more than its reservation" in err, err
    assert kubectl("get", "rp", "greedy")[0] != 0  # never stored
    rc, out, err = kubectl("apply", "-f", "-", stdin=pool("orphan", "nope"))
    assert rc != 0 and "nope" in err, err
    rc, out, err = kubectl("patch", "rp", "training", "--type", "merge", "-p", '{"spec":{"parent":"serving"}}')
    assert rc != 0 and "immutable" in err, err


def test_schema_validation_and_pruning():
    rc, out, err = kubectl("apply", "-f", "-", stdin=pool("badkind", extra="  resources: [{kind: tpu}]\n"))
    assert rc != 0 and 'Unsupported value: "tpu"' in err, err
    rc, out, err = kubectl("apply", "-f", "-", stdin=pool("badq", extra='  resources: [{kind: cpu, reservation: "12xyz"}]\n'))
    assert rc != 0 and 'is invalid' in err and "reservation" in err, err  # a malformed quantity
    rc, out, err = kubectl("apply", "-f", "-", stdin=pool("negq", extra='  resources: [{kind: cpu, reservation: "-3"}]\n'))
    assert rc != 0 and 'is invalid' in err, err
    rc, out, err = kubectl("apply", "--validate=false", "-f", "-", stdin=pool("pruned", extra="  bogus: 1\n"))
    assert rc == 0, err
    obj = json.loads(kubectl("get", "rp", "pruned", "-o", "json")[1])
    assert "bogus" not in obj["spec"], obj["spec"]  # unknown fields are pruned, as kube-apiserver does


def test_status_subresource_and_watch():
    patch = '{"status":{"summary":{"cpu":{"entitlement":"12"}}}}'
    if services.kubectl_has_flag("patch", "--subresource"):
        rc, out, err = kubectl("patch", "rp", "serving", "--subresource=status", "--type", "merge", "-p", patch)
        assert rc == 0, err
    else:  # kubectl 1.20 has no --subresource: the same PATCH through the API
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
        c.request("PATCH", "/apis/peloton.io/v1alpha1/resourcepools/serving/status", body=patch,
                  headers={"Content-Type": "application/merge-patch+json"})
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read())
        c.close()
    obj = json.loads(kubectl("get", "rp", "serving", "-o", "json")[1])
    assert obj["status"]["summary"]["cpu"]["entitlement"] == "12", obj.get("status")
    rc, out, err = kubectl("patch", "rp", "serving", "--type", "merge", "-p", '{"status":{"summary":{"cpu":{"entitlement":"99"}}}}')
    obj = json.loads(kubectl("get", "rp", "serving", "-o", "json")[1])
    assert obj["status"]["summary"]["cpu"]["entitlement"] == "12"  # the main resource leaves status alone


def test_strategic_merge_on_custom_resource_is_415():
    rc, out, err = kubectl("patch", "rp", "serving", "--type", "strategic", "-p", '{"spec":{"policy":"PriorityFIFO"}}')
    # kubectl 1.32 words the 415 itself; 1.20 prints the server's Status
    assert rc != 0 and ("strategic-merge-patch+json is not supported by" in err or
                        "(UnsupportedMediaType)" in err and "application/merge-patch+json" in err), err


def test_describe_and_edit():
    rc, out, err = kubectl("describe", "rp", "training")
    assert rc == 0 and "Name:" in out and "training" in out, (out, err)
    env = dict(os.environ, KUBE_EDITOR="sed -i 's/share: 2/share: 3/'")
    p = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", "edit", "rp", "training"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 0 and "edited" in p.stdout, (p.stdout, p.stderr)
    obj = json.loads(kubectl("get", "rp", "training", "-o", "json")[1])
    assert any(r.get("share") == 3 for r in obj["spec"]["resources"]), obj["spec"]


def test_delete_collection_with_selector():
    for i in range(3):
        kubectl("apply", "-f", "-", stdin=f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: dc-{i}, labels: {{batch: x}}}}\n")
    kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dc-keep}\n")
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    c.request("DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=batch%3Dx")
    r = c.getresponse()
    body = json.loads(r.read())
    assert r.status == 200 and sorted(i["metadata"]["name"] for i in body["items"]) == ["dc-0", "dc-1", "dc-2"], body
    rc, out, err = kubectl("get", "cm", "-o", "name")
    assert "configmap/dc-keep" in out and "dc-0" not in out, out


def test_explain_uses_the_crd_schema():
    rc, out, err = kubectl("explain", "rp.spec.resources")
    assert rc == 0 and "ELASTIC" in out and "reservation" in out, (out, err)


JOB = """apiVersion: peloton.io/v1alpha1
kind: Job
metadata: {name: %s}
spec:
  type: BATCH
  resourcePool: training
%s  template:
    spec:
      containers: [{name: c, image: busybox}]
"""


def test_invalid_jobs_are_refused_at_admission():
    # before, both were stored and their only trace was a line in pelotond's log
    for name, extra, want in (("nocount", "", "spec.instanceCount: required for BATCH jobs"),
                              ("toomany", "  instanceCount: 2\n  sla: {minimumRunningInstances: 3}\n",
                               "spec.sla.minimumRunningInstances: 3 exceeds instanceCount 2")):
        rc, out, err = kubectl("apply", "-f", "-", stdin=JOB % (name, extra))
        assert rc != 0 and "is invalid" in err and want in err, (name, err)
        rc, out, err = kubectl("get", "pj", name)
        assert rc != 0 and "NotFound" in err, err
    rc, out, err = kubectl("apply", "-f", "-", stdin=JOB % ("fine", "  instanceCount: 2\n"))
    assert rc == 0, err
    kubectl("delete", "pj", "fine")


def test_pool_deletion_marks_the_pool_and_keeps_it_for_its_children():
    """Issue #16: DELETE of a pool marks it, as of a Namespace (deletionTimestamp,
    the peloton.io/pool-protection finalizer every pool gets at creation); the
    resource manager, not running here, would take the finalizer off once the
    pool is empty. Before, a pool with children was refused 409, one with work
    deleted at once."""
    rc, out, err = kubectl("apply", "-f", "-", stdin="---\n".join(
        [pool("del-org", cpu_res=8), pool("del-a", "del-org", 4), pool("del-b", "del-org", 4)]))
    assert rc == 0, err
    obj = json.loads(kubectl("get", "rp", "del-a", "-o", "json")[1])
    assert obj["metadata"]["finalizers"] == ["peloton.io/pool-protection"], obj["metadata"]
    rc, out, err = kubectl("delete", "rp", "del-org", "--wait=false")
    assert rc == 0 and 'resourcepool.peloton.io "del-org" deleted' in out, (out, err)
    md = json.loads(kubectl("get", "rp", "del-org", "-o", "json")[1])["metadata"]
    assert md.get("deletionTimestamp") and md["finalizers"] == ["peloton.io/pool-protection"], md
    # a marked pool takes no new children
    rc, out, err = kubectl("apply", "-f", "-", stdin=pool("del-c", "del-org", 0))
    assert rc != 0 and "(Forbidden)" in err and 'parent "del-org" is being deleted' in err, err
    # nor can it be forced out while it has children: they would lose their parent
    rc, out, err = kubectl("patch", "rp", "del-org", "--type", "merge", "-p", '{"metadata":{"finalizers":[]}}')
    assert rc != 0 and "(Conflict)" in err and 'has 2 child pools ("del-a", "del-b")' in err, err
    # a marked leaf takes no new Jobs
    assert kubectl("delete", "rp", "del-a", "--wait=false")[0] == 0
    rc, out, err = kubectl("apply", "-f", "-", stdin=(JOB % ("late", "  instanceCount: 1\n")).replace(
        "resourcePool: training", "resourcePool: del-a"))
    assert rc != 0 and "(Forbidden)" in err and 'resource pool "del-a" is being deleted' in err, err
    # what the resource manager does for an empty pool, by hand: without its finalizer it goes
    for name in ("del-a", "del-b", "del-org"):
        kubectl("delete", "rp", name, "--wait=false")
        rc, out, err = kubectl("patch", "rp", name, "--type", "merge", "-p", '{"metadata":{"finalizers":[]}}')
        assert rc == 0, (name, err)
    rc, out, err = kubectl("get", "rp", "-o", "name")
    assert "del-" not in out, out


def test_new_crd_is_served_at_once():
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "required": ["size"],
                                               "properties": {"size": {"type": "integer", "maximum": 10}}}}}}}]}}
    w = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: %d}\n"
    both = "# a CRD and its CR in one file\n" + json.dumps(crd) + "\n---\n" + w % 3
    rc, out, err = kubectl("apply", "-f", "-", stdin=both)
    # as on a real cluster: the CRD is created, kubectl could not map the CR yet
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created" in out, (out, err)
    rc, out, err = kubectl("apply", "-f", "-", stdin=both)  # the second time the CR is created ...
    assert rc == 0 and "widget.example.com/w1 created" in out, (out, err)
    rc, out, err = kubectl("apply", "-f", "-", stdin=both.replace("size: 3", "size: 4"))  # ... then patched
    assert rc == 0 and "widget.example.com/w1 configured" in out, (out, err)
    rc, out, err = kubectl("apply", "-f", "-", stdin=w % 11)
    assert rc != 0 and "should be less than or equal to 10" in err, err
    rc, out, err = kubectl("get", "wd", "w1", "-o", "jsonpath={.spec.size}")
    assert rc == 0 and out == "4", (out, err)


run_tests("shim-crds", dict(globals()))
