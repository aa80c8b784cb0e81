#!/usr/bin/python3
"""End-to-end (issue #21, metrics): a real Prometheus scrapes pelotond's
/metrics while the test creates pools and pods on a running stack
(redis-server, pelotond with every role, kubelet-sim), and what Prometheus
stored through its HTTP API matches what the test did: pods bound, the pool's
allocation, admissions by pool, the API server's requests. promtool accepts
the text; /metrics asks for the token as the API does; a controller-only
pelotond serves /metrics on --metrics-port."""
import base64
import json
import os
import re
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import services
from simlib import run_tests

wait_until = services.wait_until
TOKEN = "metrics-test-token"
TOKEN_FILE = os.path.join(services.tempdir(), "token")
with open(TOKEN_FILE, "w") as f:
    f.write(TOKEN + "\n")

REDIS = services.start_redis()
TLS_DIR = os.path.join(services.tempdir(), "tls")
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", f"--token-file={TOKEN_FILE}", "--tls-port=0",
                                          f"--tls-dir={TLS_DIR}")
TPORT = services.start_pelotond.tls_port
CERT = os.path.join(TLS_DIR, "apiserver.crt")


def write_kubeconfig(server, extra=""):
    path = os.path.join(services.tempdir(), "kubeconfig")
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: pc, cluster: {{server: "{server}"{extra}}}}}]
users: [{{name: u, user: {{token: {TOKEN}}}}}]
contexts: [{{name: c, context: {{cluster: pc, user: u}}}}]
current-context: c
""")
    return path


# kubectl sends its token over TLS only; kubelet-sim uses the plain port
KCFG = write_kubeconfig(f"https://127.0.0.1:{TPORT}",
                        f", certificate-authority-data: {base64.b64encode(open(CERT, 'rb').read()).decode()}")
KS, _ = services.start_kubelet_sim(write_kubeconfig(f"http://127.0.0.1:{PORT}"), "--nodes=4", "--name-prefix=m-",
                                   "--cpu=8", "--memory=32Gi", expect=4)


def get(url, token=TOKEN, timeout=10):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    ctx = ssl.create_default_context(cafile=CERT) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def kubectl(*args, stdin=None):
    return services.kubectl(KCFG, *args, stdin=stdin)


def apply(objs):
    services.kubectl_apply(KCFG, objs)


def pool(name, cpu_res, cpu_lim):
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name},
            "spec": {"resources": [{"kind": "cpu", "reservation": str(cpu_res), "limit": str(cpu_lim), "share": 1}]}}


def pod(name, pool_name, cpu, prio=None, app="metrics-test", memory=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"peloton.io/resource-pool": pool_name,
                                                                           "app": app},
                         "annotations": {"peloton.io/priority": str(prio)} if prio is not None else {}},
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {
                         "cpu": str(cpu), **({"memory": memory} if memory else {})}}}]}}


def samples(text, name):
    """{labels-text: value} of one metric's samples in an exposition text."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, val = line.rpartition(" ")
            out[key[len(name):]] = float(val)
    return out


# ---- Prometheus: a temp config and storage, scraping every second, stopped at exit ----
PROM_DIR = services.tempdir()
PROM_PORT = services.free_port()
with open(os.path.join(PROM_DIR, "prometheus.yml"), "w") as f:
    f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: pelotond
    authorization:
      credentials: {TOKEN}
    static_configs:
      - targets: ["127.0.0.1:{PORT}"]
""")
PROM = subprocess.Popen(["prometheus", f"--config.file={PROM_DIR}/prometheus.yml",
                         f"--storage.tsdb.path={PROM_DIR}/data", f"--web.listen-address=127.0.0.1:{PROM_PORT}",
                         "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                        stdout=open(os.path.join(PROM_DIR, "prom.log"), "w"), stderr=subprocess.STDOUT)
services._procs.append(PROM)  # stopped with the rest (SIGTERM, bounded wait)
services.wait_for(lambda: get(f"http://127.0.0.1:{PROM_PORT}/-/ready", token=None)[0] == 200, timeout=30,
                  what="prometheus")


def query(expr):
    """The instant vector of expr as [(labels, value)], from Prometheus' HTTP API."""
    url = f"http://127.0.0.1:{PROM_PORT}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    st, _, body = get(url, token=None)
    assert st == 200, body
    doc = json.loads(body)
    assert doc["status"] == "success", doc
    return [(r["metric"], float(r["value"][1])) for r in doc["data"]["result"]]


def scalar(expr):
    r = query(expr)
    return r[0][1] if r else None


def test_metrics_needs_the_token():
    st, _, _ = get(f"http://127.0.0.1:{PORT}/metrics", token=None)
    assert st == 401, st
    st, _, _ = get(f"http://127.0.0.1:{PORT}/metrics", token="wrong")
    assert st == 401, st
    st, ctype, body = get(f"http://127.0.0.1:{PORT}/metrics")
    assert st == 200 and ctype.startswith("text/plain; version=0.0.4"), (st, ctype)
    assert "# TYPE process_cpu_seconds_total counter" in body
    assert samples(body, "process_resident_memory_bytes")[""] > 1e6
    # the TLS port: the same text, the same token (HTTP/1.1 here; HTTP/2 by ALPN is the same handler)
    assert get(f"https://127.0.0.1:{TPORT}/metrics", token=None)[0] == 401
    st, ctype, body = get(f"https://127.0.0.1:{TPORT}/metrics")
    assert st == 200 and "# TYPE peloton_apiserver_request_duration_seconds histogram" in body, st
    # and over HTTP/2 (curl, ALPN h2), as Prometheus' HTTP/2-capable client may ask
    r = subprocess.run(["curl", "-sS", "--http2", "--cacert", CERT, "-o", "/dev/null", "-w",
                        "%{http_version} %{http_code}", "-H", f"Authorization: Bearer {TOKEN}", f"https://127.0.0.1:{TPORT}/metrics"],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout == "2 200", (r.stdout, r.stderr)


def test_workload_seen_by_prometheus():
    apply([pool("metrics-a", 8, 16), pool("metrics-b", 4, 8)])
    # the pool gauges come with the resource manager's status round (every second)
    wait_until(lambda: scalar('peloton_pool_reservation{pool="metrics-a",kind="cpu"}') == 8, 30,
               "metrics-a's reservation in Prometheus")
    apply([pod(f"ma-{i}", "metrics-a", 1) for i in range(6)] + [pod(f"mb-{i}", "metrics-b", 2) for i in range(2)])
    wait_until(lambda: kubectl("get", "pods", "-l", "app=metrics-test", "-o",
                               "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}").split().count("Running")
               == 8, 60, "8 pods Running")
    # 8 bindings, as the API server answered them and as placement saw them
    wait_until(lambda: scalar('sum(peloton_placement_bindings_total{result="bound"})') == 8, 30,
               "8 bindings in Prometheus")
    # placements: 8 gangs placed, none unplaceable (the cluster has room); per second is rate() of these
    assert scalar('peloton_placement_gangs_total{result="placed"}') == 8
    assert (scalar('sum(peloton_placement_gangs_total{result="unplaceable"})') or 0) == 0
    wait_until(lambda: scalar('sum(peloton_apiserver_request_duration_seconds_count'
                              '{verb="CREATE",resource="pods/binding",code="201"})') == 8, 30,
               "8 binding requests in Prometheus")
    # admissions by pool: one gang per pod
    wait_until(lambda: scalar('peloton_resmgr_admission_decisions_total{pool="metrics-a",reason="admitted"}') == 6,
               30, "6 admissions in metrics-a")
    assert scalar('peloton_resmgr_admission_decisions_total{pool="metrics-b",reason="admitted"}') == 2
    # allocation: 6 x 1 cpu in a, 2 x 2 cpu in b
    wait_until(lambda: scalar('peloton_pool_allocation{pool="metrics-a",kind="cpu"}') == 6, 30,
               "metrics-a's allocation 6 cores")
    wait_until(lambda: scalar('peloton_pool_allocation{pool="metrics-b",kind="cpu"}') == 4, 30,
               "metrics-b's allocation 4 cores")
    assert scalar('peloton_resmgr_queued_gangs{pool="metrics-a"}') == 0
    # the stages each role saw: 8 gangs created -> queued -> admitted, admitted -> placed, placed -> bound
    # -> Running; a pod alone is queued within a round or two of its arrival (20 ms each)
    assert scalar('peloton_resmgr_queueing_seconds_count') == 8
    assert scalar('histogram_quantile(1, sum by (le) (peloton_resmgr_queueing_seconds_bucket))') <= 5
    assert scalar('peloton_resmgr_admission_wait_seconds_count') == 8
    assert scalar('peloton_placement_wait_seconds_count') == 8
    assert scalar('peloton_placement_binding_duration_seconds_count') == 8
    wait_until(lambda: scalar('peloton_placement_bound_to_running_seconds_count') == 8, 30,
               "8 pods timed bound -> Running")
    # the fleet: kubelet-sim's 4 nodes, ready
    assert scalar('peloton_hosts{state="ready",backend="kubelet"}') == 4
    assert scalar('sum(peloton_hosts)') == 4
    # pods created by kubectl: one CREATE of pods per pod, each answered 201
    assert scalar('sum(peloton_apiserver_request_duration_seconds_count{verb="CREATE",resource="pods"})') >= 8
    # the controllers watch pods: at least one open watch on pods, with events sent
    assert scalar('peloton_apiserver_watches{resource="pods"}') >= 1
    assert scalar('peloton_apiserver_watch_events_sent_total{resource="pods"}') >= 8
    # Redis round trips of each connection, no errors
    for client in ("apiserver_async", "controllers"):
        assert scalar(f'peloton_redis_replies_total{{client="{client}"}}') > 0, client
    assert scalar('sum(peloton_redis_errors_total)') == 0
    assert scalar('process_cpu_seconds_total{job="pelotond"}') > 0
    assert scalar('up{job="pelotond"}') == 1
    for expr in ('sum(peloton_placement_bindings_total{result="bound"})',
                 'peloton_pool_allocation{pool="metrics-a",kind="cpu"}',
                 'peloton_pool_entitlement{pool="metrics-a",kind="cpu"}',
                 'sum by (pool) (peloton_resmgr_admission_decisions_total{reason="admitted"})',
                 'histogram_quantile(0.99, sum by (le) (peloton_apiserver_request_duration_seconds_bucket'
                 '{verb="CREATE",resource="pods/binding"}))'):
        print(f"  prometheus: {expr} = {query(expr)}")


def test_made_up_methods_make_no_series():
    """A client's own methods must not make series: the HTTP layer names them OTHER."""
    import http.client
    for m in ("BREW", "WHEN", "XYZZY"):
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
        c.request(m, "/api/v1/pods", headers={"Authorization": f"Bearer {TOKEN}"})
        c.getresponse().read()
        c.close()
    _, _, body = get(f"http://127.0.0.1:{PORT}/metrics")
    assert "BREW" not in body and "XYZZY" not in body
    assert 'verb="OTHER"' in body


def test_jobs_seen_by_prometheus():
    """A BATCH Job of 3: the job manager follows one Job, created its 3 pods without a failed write."""
    apply([{"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "mjob"},
            "spec": {"type": "BATCH", "resourcePool": "metrics-b", "instanceCount": 3,
                     "template": {"metadata": {"labels": {"t": "mjob"}},
                                  "spec": {"containers": [{"name": "c", "image": "x",
                                                           "resources": {"requests": {"cpu": "100m"}}}]}}}}])
    wait_until(lambda: kubectl("get", "pods", "-l", "t=mjob", "-o",
                               "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}").split().count("Running")
               == 3, 60, "the Job's 3 pods Running")
    wait_until(lambda: scalar("peloton_jobmgr_jobs") == 1, 30, "1 Job in Prometheus")
    wait_until(lambda: (scalar('peloton_jobmgr_writes_total{result="ok"}') or 0) >= 3, 30, "3 writes at least")
    assert scalar('peloton_jobmgr_writes_total{result="failed"}') == 0
    assert scalar("peloton_jobmgr_reconciles_total") >= 1
    wait_until(lambda: scalar('peloton_resmgr_admission_decisions_total{pool="metrics-b",reason="admitted"}') == 5,
               30, "the Job's 3 gangs admitted in metrics-b too")


def test_waiting_and_preemption_seen_by_prometheus():
    """A pool of 2 cores with 2 pods running: two more wait (its queue length 2, a decision 'entitlement' for
    the head and 'queued' for the one behind it); a priority 9 pod then preempts one of the running pods
    (preemptions 1, by pool and reason 'priority')."""
    apply([pool("metrics-q", 0, 2)])
    apply([pod(f"mq-run-{i}", "metrics-q", 1, prio=1, app="mq", memory="1Gi") for i in range(2)])
    wait_until(lambda: kubectl("get", "pods", "-l", "app=mq", "-o", "jsonpath={.items[*].spec.nodeName}").count("m-")
               == 2, 30, "2 pods of metrics-q bound")
    apply([pod("mq-wait-0", "metrics-q", 1, prio=1, app="mq")])
    wait_until(lambda: scalar('peloton_resmgr_admission_decisions_total{pool="metrics-q",reason="entitlement"}')
               == 1, 30, "the waiting head's decision 'entitlement'")
    apply([pod("mq-wait-1", "metrics-q", 1, prio=1, app="mq")])
    wait_until(lambda: scalar('peloton_resmgr_queued_gangs{pool="metrics-q"}') == 2, 30, "2 gangs queued")
    wait_until(lambda: scalar('peloton_resmgr_admission_decisions_total{pool="metrics-q",reason="queued"}') == 1,
               30, "the one behind: 'queued'")
    assert scalar('peloton_resmgr_admission_decisions_total{pool="metrics-q",reason="admitted"}') == 2
    # the pool's gauges: entitlement and allocation 2, demand 2 (capped by the limit), reservation 0
    for g, v in (("entitlement", 2), ("allocation", 2), ("demand", 2), ("reservation", 0)):
        assert scalar(f'peloton_pool_{g}{{pool="metrics-q",kind="cpu"}}') == v, g
    # per kind, in base units: the two running pods' memory in bytes
    assert scalar('peloton_pool_allocation{pool="metrics-q",kind="memory"}') == 2 * 2**30
    assert scalar('peloton_pool_allocation{pool="metrics-q",kind="gpu"}') == 0
    assert (scalar('sum(peloton_resmgr_preemptions_total{pool="metrics-q"})') or 0) == 0
    apply([pod("mq-hi", "metrics-q", 1, prio=9, app="mq")])
    wait_until(lambda: scalar('peloton_resmgr_preemptions_total{pool="metrics-q",reason="priority"}') == 1, 30,
               "one preemption in metrics-q by priority")
    wait_until(lambda: "m-" in kubectl("get", "pod", "mq-hi", "-o", "jsonpath={.spec.nodeName}"), 30, "mq-hi bound")
    time.sleep(3)  # three preemption periods: nothing more to preempt (the waiting pods have the victims' priority)
    assert scalar('sum(peloton_resmgr_preemptions_total{pool="metrics-q"})') == 1
    assert scalar('peloton_resmgr_queued_gangs{pool="metrics-q"}') == 2
    kubectl("delete", "pods", "-l", "app=mq", "--wait=false")
    wait_until(lambda: scalar('peloton_resmgr_queued_gangs{pool="metrics-q"}') == 0, 30, "metrics-q's queue empty")


def test_host_fleet_by_state():
    kubectl("cordon", "m-3")
    try:
        wait_until(lambda: scalar('peloton_hosts{state="cordoned",backend="kubelet"}') == 1, 30, "m-3 cordoned")
        assert scalar('peloton_hosts{state="ready",backend="kubelet"}') == 3
    finally:
        kubectl("uncordon", "m-3")
    wait_until(lambda: scalar('peloton_hosts{state="ready",backend="kubelet"}') == 4, 30, "m-3 ready again")
    assert (scalar('sum(peloton_hosts{state="cordoned"})') or 0) == 0


def test_request_latency_by_verb_resource_and_code():
    before = scalar('sum(peloton_apiserver_request_duration_seconds_count{verb="GET",resource="pods",code="404"})') or 0
    for i in range(3):
        assert services.kubectl(KCFG, "get", "pod", f"no-such-pod-{i}", check=False) is not None
    wait_until(lambda: (scalar('sum(peloton_apiserver_request_duration_seconds_count'
                               '{verb="GET",resource="pods",code="404"})') or 0) == before + 3, 30,
               "3 more GETs of pods answered 404")
    lists = scalar('sum(peloton_apiserver_request_duration_seconds_count{verb="LIST",resource="pods",code="200"})')
    assert lists >= 1, lists


def test_deleted_pool_takes_its_gauges():
    def text():
        return get(f"http://127.0.0.1:{PORT}/metrics")[2]
    apply([pool("metrics-gone", 1, 2)])
    wait_until(lambda: 'peloton_pool_reservation{pool="metrics-gone",kind="cpu"} 1\n' in text(), 30,
               "metrics-gone's gauges")
    kubectl("delete", "resourcepool", "metrics-gone", "--wait=false")
    wait_until(lambda: 'pool="metrics-gone"' not in text(), 30, "metrics-gone's gauges gone")
    assert 'peloton_pool_reservation{pool="metrics-a",kind="cpu"} 8\n' in text()


def test_promtool_accepts_the_text():
    st, _, body = get(f"http://127.0.0.1:{PORT}/metrics")
    assert st == 200
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    # a histogram's +Inf bucket equals its count
    inf = samples(body, "peloton_placement_binding_duration_seconds_bucket")['{le="+Inf"}']
    assert inf == samples(body, "peloton_placement_binding_duration_seconds_count")[""] >= 8


def test_controller_only_metrics_port():
    d = services.tempdir()
    port_file = os.path.join(d, "port")
    log = open(os.path.join(d, "ctl.log"), "w")
    p = subprocess.Popen([services.PELOTOND, "--roles=jobmgr,hostmgr", f"--server=http://127.0.0.1:{PORT}",
                          f"--redis=127.0.0.1:{REDIS}",  # their leases
                          f"--token-file={TOKEN_FILE}", "--metrics-port=0", f"--port-file={port_file}"],
                         stdout=log, stderr=subprocess.STDOUT)
    services._procs.append(p)
    services.wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip() != "",
                      what="the metrics port")
    mport = int(open(port_file).read().split()[0])
    assert get(f"http://127.0.0.1:{mport}/metrics", token=None)[0] == 401
    for bad in ("wrong", TOKEN[:-1], TOKEN + "x"):
        assert get(f"http://127.0.0.1:{mport}/metrics", token=bad)[0] == 401, bad
    assert get(f"http://127.0.0.1:{mport}/other")[0] == 404
    st, ctype, body = get(f"http://127.0.0.1:{mport}/metrics")
    assert st == 200 and ctype.startswith("text/plain; version=0.0.4"), (st, ctype)
    assert "process_cpu_seconds_total" in body and "peloton_apiserver" not in body
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert services.stop(p) == 0


def test_each_controller_role_alone_serves_its_metrics():
    """Every controller role run alone (a process without the API server) serves /metrics on --metrics-port
    with its own families and the process's, behind the token, text promtool accepts. A second resource
    manager stands by (the leader is the first process's). The roles that start only in a term of their
    lease (placement, jobmgr, hostmgr, the Mesos driver) run here without leader election: the first
    process holds their leases, and a standby would not have started them."""
    closed = services.free_port()  # a Mesos master that is not there: the driver keeps trying, unsubscribed
    for roles, extra, families in (
            ("resmgr", [f"--redis=127.0.0.1:{REDIS}"], ["peloton_resmgr_admission_decisions_total",
                                                         "peloton_resmgr_queueing_seconds", "peloton_pool_allocation"]),
            ("placement", [f"--redis=127.0.0.1:{REDIS}", "--leader-elect=false"], ["peloton_placement_bindings_total",
                                                            "peloton_placement_wait_seconds"]),
            ("jobmgr", ["--leader-elect=false"], ["peloton_jobmgr_jobs", "peloton_jobmgr_writes_total"]),
            ("hostmgr", ["--leader-elect=false"], ["peloton_hostmgr_evictions_paused",
                                                   "peloton_hostmgr_judgements_held_total"]),
            ("mesos", [f"--redis=127.0.0.1:{REDIS}", f"--mesos-master=http://127.0.0.1:{closed}", "--leader-elect=false"],
             ["peloton_mesos_calls_total", "peloton_mesos_subscribed"]),
            ("native", ["--native-port=0"], [])):
        d = services.tempdir()
        port_file = os.path.join(d, "port")
        log_path = os.path.join(d, "role.log")
        p = subprocess.Popen([services.PELOTOND, f"--roles={roles}", f"--server=http://127.0.0.1:{PORT}",
                              f"--token-file={TOKEN_FILE}", "--metrics-port=0", f"--port-file={port_file}", *extra],
                             stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
        services._procs.append(p)
        services.wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip() != "",
                          what=f"the {roles} role's metrics port")
        mport = int(open(port_file).read().split()[0])
        assert get(f"http://127.0.0.1:{mport}/metrics", token=None)[0] == 401, roles
        # the port is served before the controllers' thread has started the
        # role (and made its families): a scrape in between has the process's alone
        scrape = {}

        def has_families():
            st, _, scrape["body"] = get(f"http://127.0.0.1:{mport}/metrics")
            assert st == 200, (roles, st)
            return all(f"# TYPE {fam} " in scrape["body"] for fam in families)
        services.wait_until(has_families, 10, f"the {roles} role's families")
        body = scrape["body"]
        for fam in families + ["process_cpu_seconds_total", "process_resident_memory_bytes"]:
            assert f"# TYPE {fam} " in body, (roles, fam, body[:2000])
        assert "peloton_apiserver" not in body, roles
        if roles == "mesos":
            assert "peloton_mesos_subscribed 0\n" in body, body
        r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, (roles, r.stdout + r.stderr)
        assert services.stop(p) == 0, (roles, open(log_path).read()[-3000:])


def test_extender_role_in_the_process_metrics():
    # pelotond's extender role registers its families on the process's registry; the model's
    # gauges are set on the extender's loop every second, never read by the scrape's thread
    d = services.tempdir()
    port_file = os.path.join(d, "port")
    log_path = os.path.join(d, "ext.log")
    log = open(log_path, "w")
    p = subprocess.Popen([services.PELOTOND, "--roles=extender", f"--server=http://127.0.0.1:{PORT}",
                          f"--token-file={TOKEN_FILE}", "--metrics-port=0", f"--port-file={port_file}",
                          "--extender-port=0"], stdout=log, stderr=subprocess.STDOUT)
    services._procs.append(p)
    services.wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip() != "",
                      what="the metrics port")
    mport = int(open(port_file).read().split()[0])
    nodes = len(kubectl("get", "nodes", "-o", "name").split())
    assert nodes > 0

    def body():
        st, _, b = get(f"http://127.0.0.1:{mport}/metrics")
        assert st == 200, st
        return b
    wait_until(lambda: samples(body(), "peloton_extender_model_nodes").get("") == nodes, 30,
               f"the extender's {nodes} nodes in pelotond's /metrics")
    b = body()
    assert 'peloton_extender_cache_synced{kind="Node"} 1\n' in b
    assert 'peloton_extender_binds_total{result="failed"} 0\n' in b
    assert "process_cpu_seconds_total" in b
    r = subprocess.run(["promtool", "check", "metrics"], input=b, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    # the extender's own port serves the same registry
    serving = re.compile(r'extender serving" url=http://127\.0\.0\.1:(\d+)')
    services.wait_for(lambda: serving.search(open(log_path).read()), what="the extender's port")
    m = serving.search(open(log_path).read())
    st, _, eb = get(f"http://127.0.0.1:{m.group(1)}/metrics", token=None)
    assert st == 200 and samples(eb, "peloton_extender_model_nodes").get("") == nodes, (st, eb[:500])
    assert services.stop(p) == 0, open(log_path).read()[-3000:]


try:
    run_tests("test_metrics", dict(globals()))
finally:
    services.stop_all()
    shutil.rmtree(PROM_DIR, ignore_errors=True)
