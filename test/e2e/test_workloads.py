#!/usr/bin/python3
"""End-to-end: existing workload manifests applied unchanged (issue #20,
docs/workloads.md). pelotond with every role on a real redis-server and
kubelet-sim's Kubelets; `kubectl apply -f examples/k8s/` with kubectl 1.32,
then each workload brought to its ready state by its Peloton Job: the
Deployment Available, the StatefulSet's pods cache-0..2, the DaemonSet one
pod per node, the batch Job Complete; `kubectl scale`, `kubectl rollout
status` after an image change, the revision annotations `kubectl rollout
undo` needs, deletion cascading to the Peloton Job and its pods, deletion
with --cascade=orphan keeping them (and the workload made again adopting
them), a 422 for what is not translated, the pods counted in their pool; and
kubectl 1.20's client-side validation of the same manifests."""
import http.client
import json
import os
import re
import socket
import subprocess
import threading
import time

import services
from simlib import run_tests

NODES = 3
REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", "--restart-backoff-ms=200")
KUBECONFIG = services.kubeconfig(PORT)
KS = services.start_kubelet_sim(KUBECONFIG, f"--nodes={NODES}", "--name-prefix=w-", "--cpu=8", "--memory=32Gi",
                                expect=NODES)[0]
EX = os.path.join(services.ROOT, "examples", "k8s")
wait_until = services.wait_until


def kubectl(*args, stdin=None, check=True, binary="kubectl"):
    r = subprocess.run([binary, f"--kubeconfig={KUBECONFIG}", *args], input=stdin, capture_output=True, text=True,
                       timeout=90)
    if check and r.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr}")
    return r if not check else r.stdout


def get(path):
    code, body = services.api(PORT, "GET", path)
    return body if code == 200 else None


def pods(selector):
    out = json.loads(kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]
    return [p for p in out if not p["metadata"].get("deletionTimestamp")]


def running(selector):
    return [p for p in pods(selector) if p.get("status", {}).get("phase") == "Running"]


def test_apply_examples():
    out = kubectl("apply", "-f", EX)
    for what in ("deployment.apps/web created", "statefulset.apps/cache created", "daemonset.apps/log-agent created",
                 "job.batch/report created", "cronjob.batch/cleanup created"):
        assert what in out, out


def test_deployment_available():
    def ready():
        d = get("/apis/apps/v1/namespaces/default/deployments/web")
        st = d.get("status", {})
        conds = {c["type"]: c["status"] for c in st.get("conditions", [])}
        return st.get("readyReplicas") == 3 and conds.get("Available") == "True" and d
    d = wait_until(ready, 30, "deployment web Available with 3 ready replicas")
    assert d["status"]["observedGeneration"] == d["metadata"]["generation"], d["status"]
    assert len(running("app=web")) == 3
    pj = get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/web")
    assert pj["spec"]["type"] == "STATELESS" and pj["spec"]["resourcePool"] == "workloads", pj["spec"]
    ref = pj["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("Deployment", "web", d["metadata"]["uid"],
                                                                         True), ref
    assert pj["spec"]["updateStrategy"]["batchSize"] == 1, pj["spec"]  # maxUnavailable: 1
    table = kubectl("get", "deploy", "web")
    assert table.split("\n")[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], table
    assert table.split("\n")[1].split()[:4] == ["web", "3/3", "3", "3"], table


SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"  # kube-controller-manager's generated names


def test_deployment_pods_named_after_their_replicaset():
    web = pods("app=web")
    hashes = {p["metadata"]["labels"].get("pod-template-hash") for p in web}
    assert len(hashes) == 1 and None not in hashes, [p["metadata"] for p in web]
    h = hashes.pop()
    for p in web:
        assert re.fullmatch(f"web-{h}-{SUFFIX}", p["metadata"]["name"]), p["metadata"]["name"]
    # the Peloton Job still knows each pod's instance, by its label
    assert sorted(p["metadata"]["labels"]["peloton.io/instance"] for p in web) == ["0", "1", "2"], web
    rs = wait_until(lambda: [r for r in json.loads(kubectl("get", "rs", "-l", "app=web", "-o", "json"))["items"]
                             if r["spec"]["replicas"]], 15, "web's current ReplicaSet")
    assert rs[0]["metadata"]["name"] == f"web-{h}", rs[0]["metadata"]
    table = kubectl("get", "pods", "-l", "app=web")
    assert all(re.match(f"web-{h}-{SUFFIX} ", ln) for ln in table.splitlines()[1:]), table


def test_statefulset_pods_named():
    wait_until(lambda: len(running("app=cache")) == 3, 30, "statefulset cache's 3 pods running")
    assert sorted(p["metadata"]["name"] for p in pods("app=cache")) == ["cache-0", "cache-1", "cache-2"]
    wait_until(lambda: get("/apis/apps/v1/namespaces/default/statefulsets/cache")["status"].get("readyReplicas") == 3,
               15, "statefulset readyReplicas 3")
    table = kubectl("get", "sts", "cache")
    assert table.split("\n")[1].split()[:2] == ["cache", "3/3"], table


def test_daemonset_one_per_node():
    wait_until(lambda: len(running("app=log-agent")) == NODES, 30, "one log-agent pod per node")
    nodes = sorted(p["spec"]["nodeName"] for p in running("app=log-agent"))
    assert len(set(nodes)) == NODES, nodes
    wait_until(lambda: get("/apis/apps/v1/namespaces/default/daemonsets/log-agent")["status"].get("numberReady")
               == NODES, 15, "daemonset numberReady")
    ds = get("/apis/apps/v1/namespaces/default/daemonsets/log-agent")["status"]
    assert ds["desiredNumberScheduled"] == NODES, ds
    for p in pods("app=log-agent"):
        assert re.fullmatch(f"log-agent-{SUFFIX}", p["metadata"]["name"]), p["metadata"]["name"]
    table = kubectl("get", "ds", "log-agent")
    assert table.split("\n")[0].split()[:6] == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE"], table
    assert table.split("\n")[1].split()[:7] == ["log-agent", "3", "3", "3", "3", "3", "<none>"], table
    assert "daemonset.apps/log-agent" in kubectl("get", "all")
    wait_until(lambda: "\n1 " in kubectl("rollout", "history", "daemonset/log-agent"), 15, "revision 1 of log-agent")


def test_batch_job_complete():
    pj = wait_until(lambda: get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/report"), 15, "Peloton Job report")
    assert pj["spec"]["type"] == "BATCH" and pj["spec"]["instanceCount"] == 6, pj["spec"]
    assert pj["spec"]["restartPolicy"]["maxFailures"] == 3, pj["spec"]
    kubectl("wait", "--for=condition=complete", "job/report", "--timeout=40s")
    st = get("/apis/batch/v1/namespaces/default/jobs/report")["status"]
    assert st["succeeded"] == 6 and st.get("completionTime"), st
    assert "active" not in st, st  # no pod is left running
    names = [p["metadata"]["name"] for p in pods("job-name=report")]
    assert len(names) == 6 and all(re.fullmatch(f"report-{SUFFIX}", n) for n in names), names
    table = kubectl("get", "job", "report")
    assert table.split("\n")[0].split()[:3] == ["NAME", "STATUS", "COMPLETIONS"], table
    assert table.split("\n")[1].split()[:3] == ["report", "Complete", "6/6"], table


def test_cronjob_runs_when_due():
    # as if the last run were 10 minutes ago: a run of "*/5 * * * *" is due now
    ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600))
    code, body = services.api(PORT, "PATCH", "/apis/batch/v1/namespaces/default/cronjobs/cleanup/status",
                              {"status": {"lastScheduleTime": ago}}, ctype="application/merge-patch+json")
    assert code == 200, body

    def finished():
        jobs = json.loads(kubectl("get", "jobs", "-l", "app=cleanup", "-o", "json"))["items"]
        done = [j for j in jobs if any(c["type"] == "Complete" and c["status"] == "True"
                                       for c in j.get("status", {}).get("conditions", []))]
        return done
    done = wait_until(finished, 30, "a Job of CronJob cleanup to complete")
    ref = done[0]["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"]) == ("CronJob", "cleanup"), ref
    wait_until(lambda: get("/apis/batch/v1/namespaces/default/cronjobs/cleanup")["status"].get("lastSuccessfulTime"),
               15, "the CronJob's lastSuccessfulTime")
    st = get("/apis/batch/v1/namespaces/default/cronjobs/cleanup")["status"]
    assert st["lastScheduleTime"] > ago and "active" not in st, st
    table = kubectl("get", "cj", "cleanup")
    assert table.split("\n")[0].split()[:4] == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND"], table
    code, body = services.api(PORT, "POST", "/apis/batch/v1/namespaces/default/cronjobs",
                              {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "bad"},
                               "spec": {"schedule": "61 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                                   "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}})
    assert code == 422 and body["details"]["causes"][0]["field"] == "spec.schedule", body


class PodWatch:
    """A watch of the pods matching selector (from now on, in a thread):
    the largest number of them seen at once that had not ended (phase
    neither Succeeded nor Failed; a pod being deleted has not ended yet),
    and the pods that succeeded."""

    def __init__(self, selector):
        self.max, self.live, self.succeeded, self.error = 0, {}, set(), None
        self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=90)
        self.conn.request("GET", f"/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=80"
                                 f"&labelSelector={selector}")
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for line in self.resp:
                if not line.strip():
                    continue
                ev = json.loads(line)
                pod = ev["object"]
                name, phase = pod["metadata"]["name"], pod.get("status", {}).get("phase")
                if ev["type"] == "DELETED" or phase in ("Succeeded", "Failed"):
                    self.live.pop(name, None)
                else:
                    self.live[name] = phase
                if phase == "Succeeded":
                    self.succeeded.add(name)
                self.max = max(self.max, len(self.live))
        except (OSError, ValueError) as e:  # closed by stop()
            self.error = e

    def stop(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(10)
        self.conn.close()


def test_batch_parallelism_enforced():
    """completions 6, parallelism 2: the Peloton Job's
    sla.maximumRunningInstances 2 holds the other instances back; a watch
    never sees more than 2 pods that have not ended, and all 6 succeed."""
    w = PodWatch("job-name%3Dpar")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "par"},
           "spec": {"completions": 6, "parallelism": 2, "backoffLimit": 1,
                    "template": {"metadata": {"labels": {"peloton.io/resource-pool": "workloads"},
                                              "annotations": {"kubelet-sim.peloton.io/run-seconds": "1"}},
                                 "spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox",
                                                          "resources": {"requests": {"cpu": "100m"}}}]}}}}
    try:
        kubectl("apply", "-f", "-", stdin=json.dumps(job))
        kubectl("wait", "--for=condition=complete", "job/par", "--timeout=60s")
        wait_until(lambda: len(w.succeeded) == 6, 10, "the watch to see 6 pods succeed")
    finally:
        w.stop()
    assert w.max == 2, (w.max, w.live)  # at most 2, and 2 did run together
    pj = get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/par")
    assert pj["spec"]["sla"]["maximumRunningInstances"] == 2, pj["spec"]
    assert get("/apis/batch/v1/namespaces/default/jobs/par")["status"]["succeeded"] == 6


def test_peloton_job_maximum_running_instances():
    """A BATCH Peloton Job applied with kubectl, 5 instances, at most 2 at a time."""
    w = PodWatch("app%3Dmrun")
    pj = {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "mrun"},
          "spec": {"type": "BATCH", "resourcePool": "workloads", "instanceCount": 5,
                   "sla": {"maximumRunningInstances": 2},
                   "template": {"metadata": {"labels": {"app": "mrun"},
                                             "annotations": {"kubelet-sim.peloton.io/run-seconds": "1"}},
                                "spec": {"containers": [{"name": "c", "image": "busybox",
                                                         "resources": {"requests": {"cpu": "100m"}}}]}}}}
    try:
        kubectl("apply", "-f", "-", stdin=json.dumps(pj))
        wait_until(lambda: (get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/mrun") or {}).get(
            "status", {}).get("state") == "SUCCEEDED", 60, "Peloton Job mrun SUCCEEDED")
        wait_until(lambda: len(w.succeeded) == 5, 10, "the watch to see 5 pods succeed")
    finally:
        w.stop()
    assert w.max == 2, (w.max, w.live)
    # a Peloton Job's pods keep <job>-<instance>
    assert sorted(w.succeeded) == [f"mrun-{i}" for i in range(5)], w.succeeded
    kubectl("delete", "pj", "mrun")


def test_pods_counted_in_pool():
    def alloc():
        rp = get("/apis/peloton.io/v1alpha1/resourcepools/workloads")
        return rp.get("status", {}).get("allocation", {}).get("cpu")
    # web 3 x 250m + cache 3 x 250m + log-agent 3 x 100m = 1800m while running (report may be done)
    wait_until(lambda: alloc() in ("1800m", "1.8"), 20, "pool workloads' cpu allocation to count the workloads' pods")


def test_scale():
    out = kubectl("scale", "deployment/web", "--replicas=4")
    assert "scaled" in out, out
    wait_until(lambda: len(running("app=web")) == 4, 30, "4 web pods")
    wait_until(lambda: get("/apis/apps/v1/namespaces/default/deployments/web")["status"].get("readyReplicas") == 4,
               15, "readyReplicas 4")
    code, scale = services.api(PORT, "GET", "/apis/apps/v1/namespaces/default/deployments/web/scale")
    assert code == 200 and scale["kind"] == "Scale" and scale["spec"]["replicas"] == 4, scale
    assert scale["status"]["selector"] == "app=web", scale
    kubectl("scale", "statefulset/cache", "--replicas=2")
    wait_until(lambda: sorted(p["metadata"]["name"] for p in pods("app=cache")) == ["cache-0", "cache-1"], 30,
               "statefulset scaled down to cache-0, cache-1")


def test_statefulset_rollout_history_undo():
    def history():
        out = kubectl("rollout", "history", "statefulset/cache")
        return [line.split()[0] for line in out.split("\n")[2:] if line.strip()]
    wait_until(lambda: history() == ["1"], 15, "revision 1 of statefulset cache")
    kubectl("set", "image", "statefulset/cache", "redis=redis:7.4")
    r = kubectl("rollout", "status", "statefulset/cache", "--timeout=60s", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {p["spec"]["containers"][0]["image"] for p in running("app=cache")} == {"redis:7.4"}
    wait_until(lambda: history() == ["1", "2"], 15, "revisions 1 and 2")
    kubectl("rollout", "undo", "statefulset/cache")
    wait_until(lambda: {p["spec"]["containers"][0]["image"] for p in running("app=cache")} == {"redis:7.2"}
               and len(running("app=cache")) == 2, 30, "cache back on redis:7.2")
    wait_until(lambda: history() == ["2", "3"], 15, "revision 1 brought back as 3")
    table = kubectl("get", "controllerrevisions")
    assert table.split("\n")[0].split() == ["NAME", "CONTROLLER", "REVISION", "AGE"], table
    assert "statefulset.apps/cache" in table, table


def test_rollout_status_after_image_change():
    kubectl("set", "image", "deployment/web", "nginx=nginx:1.28")
    r = kubectl("rollout", "status", "deployment/web", "--timeout=60s", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "successfully rolled out" in r.stdout, r.stdout
    images = {p["spec"]["containers"][0]["image"] for p in running("app=web")}
    assert images == {"nginx:1.28"}, images
    pj = get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/web")
    assert pj["status"]["update"]["state"] == "SUCCEEDED", pj["status"].get("update")


def test_rollout_history_and_undo():
    def history():
        out = kubectl("rollout", "history", "deployment/web")
        return [line.split()[0] for line in out.split("\n")[2:] if line.strip()]
    wait_until(lambda: history() == ["1", "2"], 15, "revisions 1 and 2 in rollout history")
    rs = json.loads(kubectl("get", "rs", "-l", "app=web", "-o", "json"))["items"]
    assert sorted(r["spec"]["replicas"] for r in rs) == [0, 4], [r["spec"] for r in rs]
    assert all(r["metadata"]["ownerReferences"][0]["kind"] == "Deployment" for r in rs), rs
    assert get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/" + rs[0]["metadata"]["name"]) is None  # not run
    kubectl("rollout", "undo", "deployment/web")
    r = kubectl("rollout", "status", "deployment/web", "--timeout=60s", check=False)
    assert r.returncode == 0 and "successfully rolled out" in r.stdout, r.stdout + r.stderr
    wait_until(lambda: {p["spec"]["containers"][0]["image"] for p in running("app=web")} == {"nginx:1.27"}, 15,
               "pods back on nginx:1.27")
    wait_until(lambda: history() == ["2", "3"], 15, "revision 1 brought back as 3")


def test_failed_rollout_stops_and_undo():
    bad = {"spec": {"template": {"metadata": {"annotations": {"kubelet-sim.peloton.io/run-seconds": "0",
                                                               "kubelet-sim.peloton.io/exit-code": "1"}}}}}
    kubectl("patch", "deployment/web", "--type=merge", "-p", json.dumps(bad))
    r = kubectl("rollout", "status", "deployment/web", "--timeout=60s", check=False)
    assert r.returncode != 0 and "exceeded its progress deadline" in r.stderr, r.stdout + r.stderr
    kubectl("rollout", "undo", "deployment/web")
    r = kubectl("rollout", "status", "deployment/web", "--timeout=60s", check=False)
    assert r.returncode == 0 and "successfully rolled out" in r.stdout, r.stdout + r.stderr
    wait_until(lambda: len(running("app=web")) == 4, 20, "4 web pods running again")


def test_unsupported_field_422():
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
                "spec": {"completionMode": "Indexed", "completions": 2,
                         "template": {"spec": {"restartPolicy": "Never",
                                               "containers": [{"name": "c", "image": "busybox"}]}}}}
    code, body = services.api(PORT, "POST", "/apis/batch/v1/namespaces/default/jobs", manifest)
    assert code == 422 and body["reason"] == "Invalid", body
    assert body["details"]["causes"][0]["field"] == "spec.completionMode", body
    r = kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=False)
    assert r.returncode != 0 and "spec.completionMode" in r.stderr, r.stderr
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
           "spec": {"selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
                    "template": {"metadata": {"labels": {"app": "db"}},
                                 "spec": {"containers": [{"name": "c", "image": "postgres"}]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                              "spec": {"accessModes": ["ReadWriteOnce"],
                                                       "resources": {"requests": {"storage": "1Gi"}}}}]}}
    code, body = services.api(PORT, "POST", "/apis/apps/v1/namespaces/default/statefulsets", sts)
    assert code == 422 and body["details"]["causes"][0]["field"] == "spec.volumeClaimTemplates", body


def test_no_pool_is_said():
    services.api(PORT, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": "nopool"}})
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "lost", "namespace": "nopool"},
         "spec": {"selector": {"matchLabels": {"app": "lost"}},
                  "template": {"metadata": {"labels": {"app": "lost"}},
                               "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    kubectl("apply", "-f", "-", stdin=json.dumps(d))

    def said():
        st = get("/apis/apps/v1/namespaces/nopool/deployments/lost").get("status", {})
        return [c for c in st.get("conditions", []) if c["type"] == "Progressing" and c["status"] == "False"]
    cond = wait_until(said, 15, "Progressing=False on a Deployment without a pool")[0]
    assert cond["reason"] == "NoPelotonJob" and "peloton.io/resource-pool" in cond["message"], cond
    assert get("/apis/peloton.io/v1alpha1/namespaces/nopool/jobs/lost") is None


def deployment(name, image, replicas=1):
    """A Deployment as a client that adds no annotations writes it (kubectl apply adds one)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


def test_revision_annotations_and_undo():
    """The Deployment and each ReplicaSet carry deployment.kubernetes.io/revision
    as kube-controller-manager writes them; kubectl rollout undo (which
    replaces /metadata/annotations with a JSON patch) works on a Deployment
    made without annotations, to the previous revision and --to-revision."""
    rev = "deployment.kubernetes.io/revision"
    code, _ = services.api(PORT, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment("rev", "busybox:1"))
    assert code == 201, code

    def revision():
        return get("/apis/apps/v1/namespaces/default/deployments/rev")["metadata"].get("annotations", {}).get(rev)

    def rs_revisions():
        items = get("/apis/apps/v1/namespaces/default/replicasets?labelSelector=app%3Drev")["items"]
        return {r["spec"]["template"]["spec"]["containers"][0]["image"]: r["metadata"]["annotations"] for r in items}

    def images():
        return {p["spec"]["containers"][0]["image"] for p in running("app=rev")}
    wait_until(lambda: revision() == "1" and len(running("app=rev")) == 1, 30, "Deployment rev at revision 1")
    assert rs_revisions()["busybox:1"][rev] == "1"
    kubectl("set", "image", "deployment/rev", "c=busybox:2")
    wait_until(lambda: revision() == "2" and images() == {"busybox:2"}, 30, "revision 2 on busybox:2")
    kubectl("rollout", "undo", "deployment/rev")
    wait_until(lambda: revision() == "3" and images() == {"busybox:1"}, 30, "undo: revision 1 back as 3")
    hist = "deployment.kubernetes.io/revision-history"
    wait_until(lambda: rs_revisions() == {"busybox:1": {rev: "3", hist: "1"}, "busybox:2": {rev: "2"}}, 15,
               "the ReplicaSet of busybox:1 at revision 3, after 1")
    kubectl("rollout", "undo", "deployment/rev", "--to-revision=2")
    wait_until(lambda: revision() == "4" and images() == {"busybox:2"}, 30, "undo --to-revision=2: back as 4")
    wait_until(lambda: rs_revisions() == {"busybox:1": {rev: "3", hist: "1"}, "busybox:2": {rev: "4", hist: "2"}},
               15, "the ReplicaSet of busybox:2 at revision 4, after 2")
    out = kubectl("rollout", "history", "deployment/rev")
    assert [line.split()[0] for line in out.split("\n")[2:] if line.strip()] == ["3", "4"], out
    kubectl("delete", "deployment", "rev", "--wait=true")
    wait_until(lambda: pods("app=rev") == [], 30, "rev's pods gone")


def test_delete_orphan_keeps_pods():
    """kubectl delete --cascade=orphan: the Deployment goes; its Peloton Job
    and ReplicaSet stay, ownerless, and the pods keep running (also past a
    resync); the orphaned ReplicaSet is not translated into a Peloton Job of
    its own. The Deployment made again adopts them: the same pods carry on
    and its history goes on. Deleting the Peloton Job (orphaned again)
    removes the pods."""
    code, _ = services.api(PORT, "POST", "/apis/apps/v1/namespaces/default/deployments",
                           deployment("keep", "busybox", replicas=2))
    assert code == 201, code
    wait_until(lambda: len(running("app=keep")) == 2, 30, "keep's 2 pods running")
    before = sorted(p["metadata"]["uid"] for p in running("app=keep"))
    kubectl("delete", "deployment", "keep", "--cascade=orphan", "--wait=true")
    assert get("/apis/apps/v1/namespaces/default/deployments/keep") is None
    time.sleep(12)  # past the controller's 10 s resync
    assert sorted(p["metadata"]["uid"] for p in running("app=keep")) == before, pods("app=keep")
    pj = get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/keep")
    assert pj and not pj["metadata"].get("deletionTimestamp") and "ownerReferences" not in pj["metadata"], pj
    rs = get("/apis/apps/v1/namespaces/default/replicasets?labelSelector=app%3Dkeep")["items"]
    assert len(rs) == 1 and "ownerReferences" not in rs[0]["metadata"], rs
    assert get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/" + rs[0]["metadata"]["name"]) is None
    code, d = services.api(PORT, "POST", "/apis/apps/v1/namespaces/default/deployments",
                           deployment("keep", "busybox", replicas=2))
    assert code == 201, d

    def owner(path):
        refs = (get(path) or {}).get("metadata", {}).get("ownerReferences", [])
        return [r["uid"] for r in refs if r.get("controller")]
    wait_until(lambda: owner("/apis/peloton.io/v1alpha1/namespaces/default/jobs/keep") == [d["metadata"]["uid"]],
               15, "the Peloton Job adopted by the new Deployment keep")
    rs_path = "/apis/apps/v1/namespaces/default/replicasets/" + rs[0]["metadata"]["name"]
    wait_until(lambda: owner(rs_path) == [d["metadata"]["uid"]], 15, "the ReplicaSet adopted")
    wait_until(lambda: (get("/apis/apps/v1/namespaces/default/deployments/keep").get("status") or {})
               .get("readyReplicas") == 2, 15, "the new Deployment keep ready")
    assert sorted(p["metadata"]["uid"] for p in running("app=keep")) == before, pods("app=keep")
    assert len(get("/apis/apps/v1/namespaces/default/replicasets?labelSelector=app%3Dkeep")["items"]) == 1
    kubectl("delete", "deployment", "keep", "--cascade=orphan", "--wait=true")
    wait_until(lambda: owner("/apis/peloton.io/v1alpha1/namespaces/default/jobs/keep") == [], 15, "orphaned again")
    kubectl("delete", "jobs.peloton.io", "keep", "--wait=true")
    wait_until(lambda: pods("app=keep") == [], 30, "keep's pods gone with their Peloton Job")
    kubectl("delete", "rs", "-l", "app=keep")


def test_statefulset_orphan_adopted():
    """A StatefulSet deleted with --cascade=orphan leaves its Peloton Job,
    pods and ControllerRevision ownerless; made again it adopts them (the
    same pod carries on); deleted normally, all of it goes."""
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ks", "namespace": "default"},
           "spec": {"replicas": 1, "serviceName": "ks", "selector": {"matchLabels": {"app": "ks"}},
                    "template": {"metadata": {"labels": {"app": "ks"}},
                                 "spec": {"containers": [{"name": "c", "image": "redis:7.2"}]}}}}
    code, made = services.api(PORT, "POST", "/apis/apps/v1/namespaces/default/statefulsets", sts)
    assert code == 201, made
    crs = "/apis/apps/v1/namespaces/default/controllerrevisions?labelSelector=app%3Dks"

    def owners():
        pj = get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/ks") or {}
        cr = (get(crs) or {}).get("items", [])
        return ([r["uid"] for r in pj.get("metadata", {}).get("ownerReferences", [])],
                [[r["uid"] for r in c["metadata"].get("ownerReferences", [])] for c in cr])
    uid = made["metadata"]["uid"]
    wait_until(lambda: len(running("app=ks")) == 1 and owners() == ([uid], [[uid]]), 30, "ks running, its revision")
    before = [p["metadata"]["uid"] for p in running("app=ks")]
    kubectl("delete", "statefulset", "ks", "--cascade=orphan", "--wait=true")
    time.sleep(2)
    assert owners() == ([], [[]]) and [p["metadata"]["uid"] for p in running("app=ks")] == before, owners()
    code, made = services.api(PORT, "POST", "/apis/apps/v1/namespaces/default/statefulsets", sts)
    assert code == 201, made
    uid = made["metadata"]["uid"]
    wait_until(lambda: owners() == ([uid], [[uid]]), 15, "the Peloton Job and the revision adopted")
    assert [p["metadata"]["uid"] for p in running("app=ks")] == before
    kubectl("delete", "statefulset", "ks", "--wait=true")
    wait_until(lambda: pods("app=ks") == [] and not get(crs)["items"], 30, "ks's pods and revision gone")


def test_delete_cascades():
    kubectl("delete", "deployment", "web", "--wait=true")
    wait_until(lambda: get("/apis/peloton.io/v1alpha1/namespaces/default/jobs/web") is None, 20,
               "the Peloton Job web to be deleted")
    wait_until(lambda: pods("app=web") == [], 30, "web's pods to be deleted")
    wait_until(lambda: get("/apis/apps/v1/namespaces/default/replicasets")["items"] == [], 15,
               "web's ReplicaSets to be deleted")


def test_kubectl120_validates_examples():
    k120 = subprocess.run([os.path.join(services.ROOT, "scripts", "kubectl-1.20.sh")], capture_output=True,
                          text=True, timeout=300, check=True).stdout.strip()
    for f in ("web.yaml", "cache.yaml", "log-agent.yaml", "report.yaml", "cleanup.yaml"):
        r = kubectl("apply", "--dry-run=server", "-f", os.path.join(EX, f), check=False, binary=k120)
        assert r.returncode == 0, (f, r.stderr)
    r = kubectl("get", "deploy,sts,ds,job", check=False, binary=k120)
    assert r.returncode == 0 and "cache" in r.stdout, r.stderr
    r = kubectl("scale", "statefulset/cache", "--replicas=3", check=False, binary=k120)
    assert r.returncode == 0 and "scaled" in r.stdout, r.stderr
    r = kubectl("rollout", "status", "statefulset/cache", "--timeout=30s", check=False, binary=k120)
    assert r.returncode == 0 and "3 new pods" in r.stdout, r.stdout + r.stderr
    r = kubectl("rollout", "status", "daemonset/log-agent", "--timeout=30s", check=False, binary=k120)
    assert r.returncode == 0 and "successfully rolled out" in r.stdout, r.stdout + r.stderr


ONLY = os.environ.get("ONLY", "").split(",") if os.environ.get("ONLY") else None  # ONLY=test_a,test_b
run_tests("test_workloads", {k: v for k, v in globals().items() if not ONLY or k in ONLY})
