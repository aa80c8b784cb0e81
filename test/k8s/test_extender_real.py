#!/usr/bin/python3
"""End-to-end on a real control plane (issue #17): kube-apiserver and
kube-scheduler v1.20.2 built from Debian's kubernetes source package
(scripts/k8s-real.sh), etcd from Debian, peloton-extender (bin/, the release
build) as docs/extender.md runs it next to kube-scheduler, kubelet-sim's
nodes. kube-scheduler is the build with kubernetes#103030 (it calls the
extender's preempt verb) unless a test says otherwise.

The cluster: 4 nodes of 4 cores; pools team-a (reservation 4, limit 16),
team-b (8, 16), svc (3, 16); PriorityClasses peloton-lowest (50),
peloton-low (100), peloton-high (1000). Run by `make test-k8s`, not by
`make test`. Objects are made with the Python Kubernetes client (Debian's
python3-kubernetes, hence /usr/bin/python3)."""
import os
import sys
import threading
import time
import urllib.request

from kubernetes import client, config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from simlib import run_tests  # noqa: E402

import k8sreal  # noqa: E402
from k8sreal import prom_samples, prom_value, wait_until  # noqa: E402

NODES, NODE_CPU = 4, 4
C = k8sreal.Cluster()
API = config.new_client_from_config(config_file=C.kubeconfig)
CORE = client.CoreV1Api(API)
CUSTOM = client.CustomObjectsApi(API)

# What docs/extender.md says for 1.20 - 1.24: the CRDs without CEL, then the manifests.
CRD_APPLY = C.kubectl("apply", "-f", k8sreal.CRDS)
for crd in ("resourcepools.peloton.io", "jobs.peloton.io"):
    C.kubectl("wait", "--for=condition=established", "--timeout=30s", f"crd/{crd}")
C.forget_discovery()
MANIFESTS_APPLY = C.kubectl("apply", "-k", os.path.join(k8sreal.ROOT, "manifests"))

C.kubectl("apply", "-f", "-", input="""
apiVersion: v1
kind: List
items:
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: peloton-lowest}, value: 50}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: peloton-low}, value: 100}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: peloton-high}, value: 1000}
- {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}
- {apiVersion: v1, kind: Namespace, metadata: {name: team-b, annotations: {peloton.io/resource-pool: team-b}}}
- {apiVersion: v1, kind: Namespace, metadata: {name: svc, annotations: {peloton.io/resource-pool: svc}}}
""")


def make_pool(name, reservation, limit):
    CUSTOM.create_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", {
        "apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name},
        "spec": {"resources": [{"kind": "cpu", "reservation": reservation, "limit": limit},
                               {"kind": "memory", "reservation": "1Gi", "limit": "128Gi"}]}})


make_pool("team-a", "4", "16")
make_pool("team-b", "8", "16")
make_pool("svc", "3", "16")

KSIM = k8sreal.start_kubelet_sim(C, NODES, NODE_CPU)
EXT, EXT_PORT, EXT_LOG = k8sreal.start_extender(C)
URL = f"http://127.0.0.1:{EXT_PORT}/peloton"
C.start_scheduler(URL, "preempt")
NS = ("team-a", "team-b", "svc")


def healthz():
    import json
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{EXT_PORT}/healthz", timeout=5).read())


def ext_metrics():
    return prom_samples(urllib.request.urlopen(f"http://127.0.0.1:{EXT_PORT}/metrics", timeout=5).read().decode())


def make_pod(ns, name, cpu="1", pclass="peloton-low", labels=None, annotations=None):
    labels = dict(labels or {})
    if ns == "team-a":
        labels.setdefault("peloton.io/resource-pool", "team-a")
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations or {}},
            "spec": {"priorityClassName": pclass, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}}
    return CORE.create_namespaced_pod(ns, body)


def pods(ns, prefix=""):
    """The pods of ns named prefix*, not being deleted."""
    return [p for p in CORE.list_namespaced_pod(ns).items
            if p.metadata.name.startswith(prefix) and p.metadata.deletion_timestamp is None]


def bound(ns, prefix=""):
    return [p for p in pods(ns, prefix) if p.spec.node_name]


def unscheduled_message(p):
    for c in (p.status.conditions or []):
        if c.type == "PodScheduled" and c.status == "False":
            return c.message or ""
    return None


def clean():
    """Every test pod deleted (at once), and the extender's model without them."""
    for ns in NS:
        CORE.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    wait_until(lambda: all(not CORE.list_namespaced_pod(ns).items for ns in NS), 60, "test pods deleted")
    wait_until(lambda: healthz()["pods"] == 0, 30, "the extender's model without pods")


# ---- the tests, in order ----

def test_crds_and_manifests_apply_to_the_1_20_api_server():
    # the variant without CEL applies; the CRDs of crds/ do not (kubectl 1.20's
    # validation against the 1.20 API server's schema for CRDs)
    assert "resourcepools.peloton.io created" in CRD_APPLY.stdout, CRD_APPLY.stdout
    assert "jobs.peloton.io created" in CRD_APPLY.stdout, CRD_APPLY.stdout
    cel = C.kubectl("apply", "--dry-run=server", "-f", os.path.join(k8sreal.ROOT, "crds"), check=False)
    assert cel.returncode != 0 and "x-kubernetes-validations" in cel.stderr, (cel.stdout, cel.stderr)
    for what in ("namespace/peloton-system", "serviceaccount/peloton-extender", "clusterrole.rbac.authorization.k8s.io"
                 "/peloton-extender", "clusterrolebinding.rbac.authorization.k8s.io/peloton-extender",
                 "deployment.apps/peloton-extender", "service/peloton-extender"):
        assert what + " created" in MANIFESTS_APPLY.stdout, (what, MANIFESTS_APPLY.stdout)
    rp = C.kubectl("get", "rp", "-o", "name").stdout.split()
    assert sorted(rp) == ["resourcepool.peloton.io/svc", "resourcepool.peloton.io/team-a",
                          "resourcepool.peloton.io/team-b"], rp


def test_the_extender_runs_with_only_its_cluster_role():
    # it synced (nodes, pods, pools) with the ServiceAccount's token: the
    # ClusterRole of manifests/extender-rbac.yaml is enough to read
    h = healthz()
    assert h["nodes"] == NODES, h
    ext_kc = C.path("extender.kubeconfig")

    def can(*args):
        return C.kubectl("auth", "can-i", *args, kubeconfig=ext_kc, check=False).stdout.strip()
    assert can("watch", "pods") == "yes"
    assert can("create", "pods", "--subresource=binding", "-n", "team-a") == "yes"
    assert can("patch", "resourcepools.peloton.io/team-a", "--subresource=status") == "yes"
    assert can("delete", "pods", "-n", "team-a") == "no"
    assert can("patch", "resourcepools.peloton.io/team-a") == "no"


def test_kubectl_get_rp_shows_the_pool_status():
    clean()
    for i in range(5):
        make_pod("team-a", f"rp-{i}")
    wait_until(lambda: len(bound("team-a", "rp-")) == 5, 60, "5 pods of team-a bound")

    def row():
        # kubectl's columns: cut each line at the header's word starts (an
        # empty PARENT leaves a gap, not a word)
        out = C.kubectl("get", "rp").stdout.rstrip("\n").split("\n")
        starts = [i for i, ch in enumerate(out[0]) if ch != " " and (i == 0 or out[0][i - 1] == " ")]
        names = out[0].split()
        for line in out[1:]:
            cols = [line[a:b].strip() for a, b in zip(starts, starts[1:] + [len(line)])]
            if cols[0] == "team-a":
                return dict(zip(names, cols))
        return None
    r = wait_until(lambda: (lambda x: x if x and x.get("CPU-ALLOC") == "5" else None)(row()), 30,
                   "kubectl get rp: team-a CPU-ALLOC 5")
    assert r["CPU-RES"] == "4", r
    assert float(r["CPU-ENT"]) >= 5, r
    st = CUSTOM.get_cluster_custom_object("peloton.io", "v1alpha1", "resourcepools", "team-a")["status"]
    cond = {c["type"]: c for c in st.get("conditions", [])}
    assert cond["TreeValid"]["status"] == "True", st


def test_two_pools_borrow_and_give_back_through_preemption():
    clean()
    m0 = ext_metrics()
    # team-a borrows the whole cluster while team-b is idle
    for i in range(16):
        make_pod("team-a", f"a-{i}")
    wait_until(lambda: len(bound("team-a", "a-")) == 16, 90, "team-a borrowing all 16 cores")
    # team-b's pods (higher PriorityClass) take their share back: kube-scheduler
    # preempts team-a's pods, which are over their entitlement now
    for i in range(8):
        make_pod("team-b", f"b-{i}", pclass="peloton-high")
    wait_until(lambda: len(bound("team-b", "b-")) == 8, 180, "team-b's 8 pods bound after preemption", every=0.5)
    wait_until(lambda: len(CORE.list_namespaced_pod("team-a").items) == 8, 60, "team-a's victims gone")
    assert len(bound("team-a", "a-")) == 8
    m1 = ext_metrics()
    dur = "peloton_extender_request_duration_seconds_count"
    assert prom_value(m1, dur, verb="preempt") > prom_value(m0, dur, verb="preempt"), "preempt verb called"
    assert prom_value(m1, "peloton_extender_preempt_victims_total") >= \
        prom_value(m0, "peloton_extender_preempt_victims_total") + 8
    # team-b is done: team-a borrows again
    CORE.delete_collection_namespaced_pod("team-b", grace_period_seconds=0)
    for i in range(16, 24):
        make_pod("team-a", f"a-{i}")
    wait_until(lambda: len(bound("team-a", "a-")) == 16, 90, "team-a borrowing the freed 8 cores again")


def test_non_preemptible_burst_held_at_the_reservation():
    clean()
    # svc reserves 3 cores; 20 non-preemptible pods of 0.5 core back to back:
    # exactly 6 may run, though the cluster has room for 32
    ann = {"peloton.io/preemptible": "false"}
    threads = [threading.Thread(target=lambda k=k: [make_pod("svc", f"np-{k}-{j}", cpu="500m", annotations=ann)
                                                    for j in range(5)]) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(pods("svc", "np-")) == 20
    wait_until(lambda: len(bound("svc", "np-")) == 6, 60, "6 non-preemptible pods bound")
    # kube-scheduler retries the rest (backoff up to 10 s here); none gets in
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        n = len(bound("svc", "np-"))
        assert n == 6, f"{n} non-preemptible pods bound against a reservation of 3 cores (6 pods)"
        time.sleep(0.5)
    # kube-scheduler 1.20 does not know FailedAndUnresolvableNodes (1.21 and
    # later): the extender's reason is not in its message, only in the
    # extender's decisions
    msgs = [unscheduled_message(p) for p in pods("svc", "np-") if not p.spec.node_name]
    assert len(msgs) == 14 and all(m and m.startswith("0/4 nodes are available") for m in msgs), msgs[:3]
    assert prom_value(ext_metrics(), "peloton_extender_filter_decisions_total", pool="svc",
                      reason="reservation") >= 14


def gang_pod(name, gang, size, pclass="peloton-lowest", cpu="1"):
    return make_pod("team-a", name, cpu=cpu, pclass=pclass,
                    labels={"peloton.io/gang": gang, "peloton.io/gang-size": str(size)})


def test_gang_bound_all_or_nothing_and_never_split_by_preemption():
    clean()
    # 3 of 4 members: none is bound
    held = "peloton_extender_filter_decisions_total"
    n0 = prom_value(ext_metrics(), held, pool="team-a", reason="gang_incomplete")
    for i in range(3):
        gang_pod(f"g-{i}", "g", 4)
    wait_until(lambda: prom_value(ext_metrics(), held, pool="team-a", reason="gang_incomplete") >= n0 + 3, 30,
               "the 3 members filtered and held")
    wait_until(lambda: unscheduled_message(CORE.read_namespaced_pod("g-0", "team-a")), 30,
               "kube-scheduler's FailedScheduling on g-0")
    time.sleep(2)
    assert not bound("team-a", "g-"), [p.metadata.name for p in bound("team-a", "g-")]
    gang_pod("g-3", "g", 4)
    # the fourth passes at once; kube-scheduler 1.20 retries the three it
    # found unschedulable only when its 60 s flush of that queue comes (a new
    # pending pod is not an event that moves them), so up to ~70 s here
    wait_until(lambda: len(bound("team-a", "g-")) == 4, 150, "the whole gang bound", every=0.5)
    # the gang has the lowest PriorityClass; fill the rest of the cluster
    for i in range(12):
        make_pod("team-a", f"fill-{i}")
    wait_until(lambda: len(bound("team-a", "fill-")) == 12, 90, "12 fillers bound")
    gang_nodes = {p.spec.node_name for p in bound("team-a", "g-")}
    # team-b needs 6 cores back: kube-scheduler asks for the gang members
    # first (lowest priority); the extender answers all of a gang or none
    for i in range(6):
        make_pod("team-b", f"b-{i}", pclass="peloton-high")
    wait_until(lambda: len(bound("team-b", "b-")) == 6, 180, "team-b's 6 pods bound after preemption", every=0.5)
    wait_until(lambda: sum(1 for p in CORE.list_namespaced_pod("team-a").items
                           if p.metadata.deletion_timestamp) == 0, 60, "victims gone")
    left = len(pods("team-a", "g-"))
    assert left in (0, 4), f"gang split by preemption: {left} of 4 left (the gang was on {gang_nodes})"


def test_extender_metrics_scraped():
    r = urllib.request.urlopen(f"http://127.0.0.1:{EXT_PORT}/metrics", timeout=5)
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
    m = prom_samples(r.read().decode())
    dur = "peloton_extender_request_duration_seconds_count"
    for verb in ("filter", "prioritize", "bind", "preempt"):
        assert prom_value(m, dur, verb=verb) > 0, verb
    dec = "peloton_extender_filter_decisions_total"
    assert prom_value(m, dec, pool="team-a", reason="admitted") > 0
    assert prom_value(m, dec, pool="team-a", reason="gang_incomplete") > 0
    assert prom_value(m, "peloton_extender_binds_total", result="bound") > 0
    # failed binds happen here only for pods deleted by clean() while bound
    bad = [line for line in open(EXT_LOG) if "msg=bind" in line and "error=" in line
           and "not found" not in line and "is being deleted" not in line]
    assert not bad, bad[:3]
    assert prom_value(m, "peloton_extender_model_nodes") == NODES
    assert prom_value(m, "peloton_extender_gangs_admitted_total") >= 1
    assert prom_value(m, "peloton_extender_cache_synced", kind="Pod") == 1
    assert prom_value(m, "peloton_extender_pool_tree_valid") == 1


def test_plain_1_20_2_never_calls_the_preempt_verb():
    """kube-scheduler 1.20.2 as released: its own preemption (by
    PriorityClass) still makes room for team-b, but the extender's preempt
    verb is never called (docs/extender.md, Preemption)."""
    clean()
    C.start_scheduler(URL, "plain")
    m0 = ext_metrics()
    for i in range(16):
        make_pod("team-a", f"a-{i}")
    wait_until(lambda: len(bound("team-a", "a-")) == 16, 90, "team-a borrowing all 16 cores")
    for i in range(4):
        make_pod("team-b", f"b-{i}", pclass="peloton-high")
    wait_until(lambda: len(bound("team-b", "b-")) == 4, 180, "team-b's pods bound after preemption", every=0.5)
    m1 = ext_metrics()
    dur = "peloton_extender_request_duration_seconds_count"
    assert prom_value(m1, dur, verb="preempt") == prom_value(m0, dur, verb="preempt")
    C.start_scheduler(URL, "preempt")


if __name__ == "__main__":
    try:
        run_tests("k8s-extender", dict(globals()))
    finally:
        k8sreal.stop_all()
