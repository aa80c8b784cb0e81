#!/usr/bin/python3
"""End-to-end: the web UI (/ui/, docs/ui.md) in Debian's headless Chromium,
against pelotond (every role, a bearer token, a TLS port) on a real
redis-server, kubelet-sim's Kubelets and real kubectl. The token prompt
refuses a wrong token; the pool tree shows the numbers the API holds; a Job
created with kubectl appears and reaches Running on screen without a reload;
a pod's timeline, the hosts and the pending pods show what the API says; a
preemption between two pools shows on both; no page logs an error.
Screenshots go to build/ui-test/ (docs/ui.md shows where)."""
import base64
import json
import os
import re
import ssl
import urllib.error
import urllib.request

import chromium
import services
from simlib import run_tests

TOKEN = "ui-test-token"
SHOTS = os.path.join(services.ROOT, "build", "ui-test")
D = services.tempdir()
with open(os.path.join(D, "token"), "w") as f:
    f.write(TOKEN + "\n")
REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--roles=all", "--tls-port=0", f"--tls-dir={D}/tls",
                                          f"--token-file={D}/token")
TPORT = services.start_pelotond.tls_port
BASE = f"http://127.0.0.1:{PORT}"
wait_until = services.wait_until


def write_kubeconfig(name, server, extra_cluster=""):
    path = os.path.join(D, name)
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: pc, cluster: {{server: "{server}"{extra_cluster}}}}}]
users: [{{name: u, user: {{token: {TOKEN}}}}}]
contexts: [{{name: c, context: {{cluster: pc, user: u}}}}]
current-context: c
""")
    return path


# kubectl sends its token over TLS only; kubelet-sim's client over the plain port too
CA = base64.b64encode(open(os.path.join(D, "tls", "apiserver.crt"), "rb").read()).decode()
KUBECONFIG = write_kubeconfig("kc-tls", f"https://127.0.0.1:{TPORT}", f", certificate-authority-data: {CA}")
services.start_kubelet_sim(write_kubeconfig("kc-plain", BASE), "--nodes=2", "--cpu=4", "--memory=16Gi", expect=2)


def kubectl(*args, stdin=None):
    return services.kubectl(KUBECONFIG, *args, stdin=stdin)


def apply(*objs):
    services.kubectl_apply(KUBECONFIG, list(objs))


def api(path):
    req = urllib.request.Request(BASE + path, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def fetch(url, method="GET", token=None, context=None):
    """(status, content type, body) of one request; no token unless given."""
    req = urllib.request.Request(url, method=method, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def pool(name, res, limit, parent=None):
    spec = {"resources": [{"kind": "cpu", "reservation": str(res), "limit": str(limit)},
                          {"kind": "memory", "reservation": "16Gi" if parent is None else "8Gi", "limit": "32Gi"}]}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name}, "spec": spec}


def pod(name, pool_name, cpu, labels=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"peloton.io/resource-pool": pool_name, **(labels or {})}},
            "spec": {"schedulerName": "peloton", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}]}}


# 8 cpu in the fleet: org holds all of it, each team is guaranteed half
apply(pool("org", 8, 8), pool("team-a", 4, 8, "org"), pool("team-b", 4, 8, "org"))
BROWSER = chromium.Chromium("--ignore-certificate-errors")  # the TLS port's self-signed certificate, on loopback
PAGE = chromium.Page(BROWSER)


def shot(name):
    """The page down to its content's end (no blank below it), as a PNG in SHOTS."""
    h = PAGE.eval("Math.ceil(Math.max(document.getElementById('main').getBoundingClientRect().bottom, 200))")
    w = PAGE.eval("document.documentElement.clientWidth")
    data = PAGE.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}},
                     timeout=30)["data"]
    os.makedirs(SHOTS, exist_ok=True)
    with open(os.path.join(SHOTS, name), "wb") as f:
        f.write(base64.b64decode(data))


def go(route):
    """Moves the UI to #/route without reloading it."""
    PAGE.eval(f"location.hash = {json.dumps('#/' + route)}")
    PAGE.wait(f"document.getElementById('main').dataset.page === {json.dumps(route.split('/')[0])}", 5)


def test_files_are_served_without_the_token_and_data_is_not():
    for base, ctx in ((BASE, None), (f"https://127.0.0.1:{TPORT}", ssl._create_unverified_context())):
        code, ctype, body = fetch(base + "/ui/", context=ctx)
        assert code == 200 and ctype.startswith("text/html") and b"/ui/app.js" in body, (base, code, ctype)
        code, ctype, body = fetch(base + "/ui/app.js", context=ctx)
        assert code == 200 and ctype.startswith("text/javascript"), (base, code, ctype)
        assert fetch(base + "/ui/nothing.js", context=ctx)[0] == 404
        assert fetch(base + "/ui/", method="POST", context=ctx)[0] == 405
        assert fetch(base + "/api/v1/pods", context=ctx)[0] == 401  # the data needs the token
    assert fetch(BASE + "/ui", token=TOKEN)[2] == fetch(BASE + "/ui/index.html")[2]
    # nothing is loaded from elsewhere: every script and style is the server's own
    page = fetch(BASE + "/ui/")[2].decode()
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page


def test_the_token_prompt_refuses_a_wrong_token_and_takes_the_right_one():
    PAGE.goto(BASE + "/ui/")
    PAGE.wait("!document.getElementById('token-form').hidden", 10, "the token prompt")
    PAGE.eval("document.getElementById('token-input').value = 'wrong'; "
              "document.getElementById('token-form').requestSubmit()")
    err = PAGE.wait("(e => !e.hidden && e.textContent)(document.getElementById('token-error'))", 10,
                    "the wrong token's error")
    assert "401" in err, err
    assert PAGE.eval("sessionStorage.getItem('peloton.token')") == "wrong"
    shot("ui-token-error.png")
    PAGE.eval(f"document.getElementById('token-input').value = {json.dumps(TOKEN)}; "
              "document.getElementById('token-form').requestSubmit()")
    PAGE.wait("document.getElementById('token-form').hidden && !!document.querySelector('.pool-table')", 10,
              "the pools page after the right token")
    assert PAGE.eval("sessionStorage.getItem('peloton.token')") == TOKEN
    # a fresh load in this tab keeps the token: no prompt, no error
    PAGE.errors.clear()  # the 401s of the two attempts above are logged by the browser, as they should be
    PAGE.goto(BASE + "/ui/#/pools")
    PAGE.wait("!!document.querySelector('.pool-table') && document.getElementById('live').textContent === 'live'", 10)
    assert PAGE.eval("document.getElementById('token-form').hidden")


def test_the_ui_over_the_tls_port_uses_http2_and_follows_the_watch():
    tab = chromium.Page(BROWSER)  # another origin: its own session storage, so the prompt again
    try:
        tab.goto(f"https://127.0.0.1:{TPORT}/ui/")
        tab.wait("!document.getElementById('token-form').hidden", 10, "the token prompt over TLS")
        tab.eval(f"document.getElementById('token-input').value = {json.dumps(TOKEN)}; "
                 "document.getElementById('token-form').requestSubmit()")
        tab.wait("!!document.querySelector('.pool-table') && document.getElementById('live').textContent === 'live'",
                 10, "the pools page, live, over TLS")
        protos = tab.eval("[...new Set(performance.getEntriesByType('resource').concat("
                          "performance.getEntriesByType('navigation')).map(e => e.nextHopProtocol))]")
        assert protos == ["h2"], protos
        assert [e for e in tab.errors if "401" not in e] == [], tab.errors
    finally:
        tab.close()


def pool_numbers_in_api():
    out = {}
    for p in api("/apis/peloton.io/v1alpha1/resourcepools")["items"]:
        for kind, fields in p.get("status", {}).get("summary", {}).items():
            for f, v in fields.items():
                out[f"{p['metadata']['name']}/{kind}/{f}"] = v
    return out


POOL_NUMBERS_IN_DOM = """(() => {
  const out = {};
  for (const row of document.querySelectorAll('tr.pool-kind'))
    for (const td of row.querySelectorAll('td[data-field]'))
      out[row.dataset.pool + '/' + row.dataset.kind + '/' + td.dataset.field] = td.textContent;
  return out;
})()"""


def test_the_pool_tree_shows_the_numbers_the_api_holds():
    apply(pod("a-fill", "team-a", 2, {"t": "fill"}))  # some allocation, so not every number is 0
    go("pools")

    def same():
        want = pool_numbers_in_api()
        if not want or any(k.startswith("team-a/cpu/allocation") and v == "0" for k, v in want.items()):
            return False
        got = PAGE.eval(POOL_NUMBERS_IN_DOM)
        return got == want and want
    want = wait_until(same, 20, "the pool tree's numbers equal to the API's status.summary")
    assert want["team-a/cpu/allocation"] == "2" and want["org/cpu/reservation"] == "8", want
    # the tree: team-a and team-b are indented under org
    order = PAGE.eval("[...document.querySelectorAll('tr.pool-head')].map(r => r.dataset.pool)")
    assert order == ["org", "team-a", "team-b"], order
    shot("ui-pools.png")


def pool_conditions_in_api():
    out = {}
    for p in api("/apis/peloton.io/v1alpha1/resourcepools")["items"]:
        st = p.get("status", {})
        g = st.get("gangs") or {}
        out[p["metadata"]["name"]] = {
            "gangs": [str(g.get("pending", 0)), str(g.get("running", 0))] if "gangs" in st else None,
            "conditions": sorted(f"{c['type']}={c['status']} {c.get('reason', '')}".strip()
                                 for c in st.get("conditions", []))}
    return out


POOL_CONDITIONS_IN_DOM = """(() => {
  const out = {};
  for (const row of document.querySelectorAll('tr.pool-head')) {
    const g = row.querySelector('.gangs');
    out[row.dataset.pool] = {
      gangs: g ? [g.querySelector('[data-field=gangs-pending]').textContent,
                  g.querySelector('[data-field=gangs-running]').textContent] : null,
      conditions: [...row.querySelectorAll('.condition .tag')].map(t => t.textContent).sort()};
  }
  return out;
})()"""


def pool_conditions_shown(what, check=None):
    """Waits until every pool's conditions (type=status reason) and gang
    counts on the pools page are the API's, and check(API's) holds."""
    def same():
        want = pool_conditions_in_api()
        if check and not check(want):
            return False
        return PAGE.eval(POOL_CONDITIONS_IN_DOM) == want and want
    try:
        return wait_until(same, 20, what)
    except AssertionError:
        raise AssertionError(f"{what}: API {pool_conditions_in_api()} DOM {PAGE.eval(POOL_CONDITIONS_IN_DOM)}")


def test_the_pool_tree_shows_conditions_and_gang_counts():
    go("pools")
    # a-fill runs in team-a: one running gang there and in org; nothing waits
    want = pool_conditions_shown("the pools' conditions and gangs as in the API", lambda w: all(
        w[p]["gangs"] == ["0", "1"] and any(c.startswith("Admitting=True") for c in w[p]["conditions"])
        for p in ("org", "team-a")))
    assert "Borrowing=False WithinReservation" in want["team-a"]["conditions"], want
    # a waiting message is on screen for a condition not in its quiet state (none here)
    assert PAGE.eval("document.querySelectorAll('tr.pool-head [data-field=message]').length") == 0


def test_a_job_created_with_kubectl_appears_and_reaches_running_without_a_reload():
    go("jobs")
    PAGE.eval("window.notReloaded = true")
    job = {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "web"},
           "spec": {"type": "STATELESS", "instanceCount": 2, "resourcePool": "team-b",
                    "template": {"spec": {"containers": [{"name": "c", "image": "x",
                                                          "resources": {"requests": {"cpu": "1"}}}]}}}}
    apply(job)
    row = "document.querySelector('tr[data-job=\"default/web\"]')"
    PAGE.wait(f"!!{row}", 10, "the new job's row")
    PAGE.wait(f"{row}.querySelector('[data-field=state]').textContent === 'RUNNING' && "
              f"{row}.querySelector('[data-task-state=RUNNING]') && "
              f"{row}.querySelector('[data-task-state=RUNNING]').textContent === 'RUNNING 2'", 30,
              "the job RUNNING with 2 running tasks on screen")
    assert PAGE.eval("window.notReloaded") is True
    # the filters: another type hides it, its pool shows it
    def choose(which, value):
        PAGE.eval(f"(s => {{ s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})"
                  f"(document.querySelector('select[data-filter={which}]'))")
    choose("type", "BATCH")
    PAGE.wait(f"!{row}", 3, "the job hidden by the type filter")
    choose("type", "")
    choose("pool", "team-b")
    PAGE.wait(f"!!{row}", 3, "the job shown by its pool's filter")
    choose("pool", "")
    shot("ui-jobs.png")
    go("job/default/web")
    nodes = PAGE.wait("(rows => rows.length === 2 && rows.every(r => r.querySelector('[data-field=phase]').textContent"
                      " === 'Running') && rows.map(r => r.querySelector('[data-field=node]').textContent))"
                      "([...document.querySelectorAll('tr[data-pod]')])", 15, "two instances Running with nodes")
    api_nodes = sorted(api(f"/api/v1/namespaces/default/pods/web-{i}")["spec"]["nodeName"] for i in range(2))
    assert sorted(nodes) == api_nodes, (nodes, api_nodes)
    shot("ui-job.png")
    assert PAGE.eval("window.notReloaded") is True


TIMELINE = """[...document.querySelectorAll('.timeline > li')].map(li => [li.dataset.step,
  li.classList.contains('done'), li.dataset.time || '', li.querySelector('.step').textContent])"""


def test_a_pods_timeline():
    go("pod/default/web-0")
    steps = PAGE.wait(f"(l => l.some(s => s[0] === 'running' && s[1]) && l)({TIMELINE})", 10,
                      "the timeline up to running")
    assert [s[0] for s in steps if s[1]] == ["created", "queued", "admitted", "placed", "bound", "running"], steps
    assert [s[0] for s in steps if not s[1]] == ["ended"], steps
    # every step reached has its time, shown, and they come in order (bound's
    # time, PodScheduled's lastTransitionTime, has whole seconds only)
    times = [s[2] for s in steps if s[1]]
    assert all(times) and all(t in s[3] for t, s in zip(times, steps)), steps
    secs = [t[:19] for t in times]
    assert secs == sorted(secs), times
    placed = [t for t, s in zip(times, steps) if s[0] in ("queued", "admitted", "placed")]
    assert placed == sorted(placed), placed
    # the times are the pod's: the annotations the Binding carried, the condition, the container
    obj = api("/api/v1/namespaces/default/pods/web-0")
    a = obj["metadata"]["annotations"]
    assert times[1:4] == [a["peloton.io/queued-at"], a["peloton.io/admitted-at"], a["peloton.io/placed-at"]], (times, a)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t) for t in times[1:4]), times
    assert times[4] == [c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled"][0]["lastTransitionTime"]
    assert f"on {obj['spec']['nodeName']}" in steps[4][3]
    assert "on pool team-b" in steps[1][3]
    # the Scheduled Event explains the bound step
    PAGE.wait("!!document.querySelector('[data-step=bound] li[data-reason=Scheduled]')", 10,
              "the Scheduled Event under bound")
    shot("ui-pod.png")


def post(path, obj):
    req = urllib.request.Request(BASE + path, method="POST", data=json.dumps(obj).encode(),
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_bindings_annotations_go_onto_the_pod():
    # what carries the timeline: kube-apiserver copies a Binding's annotations onto the pod; bad ones are refused
    obj = pod("bind-me", "team-a", 1)
    obj["spec"]["schedulerName"] = "someone-else"  # none of ours binds it
    obj["metadata"]["annotations"] = {"keep": "me"}
    apply(obj)
    path = "/api/v1/namespaces/default/pods/bind-me/binding"

    def binding(ann):
        return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bind-me", "annotations": ann},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "sim-node-0"}}
    try:
        code, st = post(path, binding({"x": 1}))
        assert code == 400 and st["kind"] == "Status" and "metadata.annotations" in st["message"], (code, st)
        code, st = post(path, binding({"big": "x" * (256 * 1024)}))
        assert code == 422 and st["reason"] == "Invalid" and "Too long" in st["message"], (code, st)
        assert not api("/api/v1/namespaces/default/pods/bind-me")["spec"].get("nodeName")
        code, st = post(path, binding({"peloton.io/placed-at": "2026-11-27T13:20:01.123Z"}))
        assert code == 201, (code, st)
        got = api("/api/v1/namespaces/default/pods/bind-me")
        assert got["spec"]["nodeName"] == "sim-node-0"
        ann = got["metadata"]["annotations"]
        ann.pop("kubectl.kubernetes.io/last-applied-configuration", None)
        assert ann == {"keep": "me", "peloton.io/placed-at": "2026-11-27T13:20:01.123Z"}, ann
    finally:
        kubectl("delete", "pod", "bind-me", "--wait=false")


def test_hosts_show_allocated_allocatable_readiness_and_cordon():
    go("hosts")
    kubectl("cordon", "sim-node-1")
    try:
        hosts_shown()
    finally:
        kubectl("uncordon", "sim-node-1")


def hosts_shown():
    PAGE.wait("(r => r && r.querySelector('[data-field=cordon]').textContent.includes('cordoned'))"
              "(document.querySelector('tr[data-node=\"sim-node-1\"]'))", 10, "sim-node-1 cordoned on screen")

    def cpu_used(n):
        return sum(float(c["resources"]["requests"]["cpu"]) for p in api("/api/v1/pods")["items"]
                   if p["spec"].get("nodeName") == n and p["status"].get("phase") not in ("Succeeded", "Failed")
                   for c in p["spec"]["containers"])
    for n in ("sim-node-0", "sim-node-1"):
        row = f"document.querySelector('tr[data-node=\"{n}\"]')"
        wait_until(lambda: PAGE.eval(f"{row}.querySelector('[data-field=ready]').textContent") == "Ready" and
                   PAGE.eval(f"{row}.querySelector('.text[data-kind=cpu]').textContent") == f"{cpu_used(n):g} / 4",
                   10, f"{n}: Ready, and the cpu its pods request / 4")
    assert PAGE.eval("document.querySelector('tr[data-node=\"sim-node-0\"] [data-field=backend]').textContent") \
        == "kubelet"
    shot("ui-hosts.png")


def test_pending_pods_by_pool_with_their_reason():
    apply(pod("too-big", "team-a", 16, {"t": "big"}))  # over team-a's limit of 8: it waits
    try:
        pending_shown()
    finally:
        kubectl("delete", "pod", "too-big", "--wait=false")


def pending_shown():
    go("pending")
    sel = "document.querySelector('section[data-pool=\"team-a\"] tr[data-pod=\"default/too-big\"]')"
    reason = PAGE.wait(f"{sel} && {sel}.querySelector('[data-field=reason]').textContent", 15,
                       "too-big pending with a reason")
    cond = [c for c in api("/api/v1/namespaces/default/pods/too-big")["status"]["conditions"]
            if c["type"] == "PodScheduled"][0]
    assert reason == cond["reason"], (reason, cond)
    assert cond["message"] in PAGE.eval(f"{sel}.textContent")
    shot("ui-pending.png")
    # its timeline: not scheduled, with the Event that says why under that step
    PAGE.eval(f"{sel}.querySelector('a').click()")
    msg = PAGE.wait("(li => li && !li.classList.contains('done') && (e => e && e.textContent)("
                    "li.querySelector('li[data-reason=FailedScheduling]')))(document.querySelector('[data-step=admitted]'))",
                    15, "too-big's admitted step waiting, with its FailedScheduling Event")
    assert "waiting for admission: pool /org/team-a" in msg, msg
    steps = PAGE.eval(TIMELINE)
    assert [s[0] for s in steps if s[1]] == ["created", "queued"], steps
    assert "waiting: WaitingForAdmission" in steps[2][3], steps
    shot("ui-pod-waiting.png")


def test_a_preemption_shows_on_both_pools():
    # team-a borrows the whole fleet, then team-b's demand takes back its half
    apply(*[pod(f"a-{i}", "team-a", 1, {"t": "a"}) for i in range(4)])
    wait_until(lambda: sum(p["status"].get("phase") == "Running" for p in
                           api("/api/v1/pods?labelSelector=peloton.io/resource-pool%3Dteam-a")["items"]) == 5, 30,
               "team-a using 6 of the 8 cpu (a-fill's 2, a-0..3's 1 each)")
    go("pools")
    # team-a borrows: Borrowing=True on its row, with the message saying by how much
    pool_conditions_shown("team-a Borrowing on screen as in the API",
                          lambda w: "Borrowing=True AboveReservation" in w["team-a"]["conditions"])
    msg = PAGE.eval("document.querySelector('tr.pool-head[data-pool=\"team-a\"] "
                    ".condition[data-type=Borrowing] [data-field=message]').textContent")
    assert "cpu: allocation 6 exceeds reservation 4 by 2" in msg, msg
    shot("ui-pools-borrowing.png")
    apply(*[pod(f"b-{i}", "team-b", 1, {"t": "b"}) for i in range(2)])
    PAGE.wait("!!document.querySelector('tr.pool-events[data-pool=\"team-a\"] li[data-reason=Preempted]')", 30,
              "team-a's pods preempted, on team-a's row")
    PAGE.wait("!!document.querySelector('tr.pool-events[data-pool=\"team-b\"] li[data-reason=Preempting]')", 15,
              "the preemption for team-b, on team-b's row")
    # the chart: team-a's cpu allocation went up and came down, all seen by this tab
    # (2 before, 6 borrowed, 4 given back: three levels, each held for seconds)
    path = "document.querySelector('tr.pool-kind[data-pool=\"team-a\"][data-kind=cpu] path.allocation')"
    levels = f"{path}.getAttribute('d').match(/[MV][0-9.,]*/g).map(s => s.split(',').pop().replace('V', ''))"
    try:
        wait_until(lambda: len(set(PAGE.eval(levels))) >= 3, 10, "team-a's cpu allocation chart with three levels")
    except AssertionError:
        raise AssertionError("the chart: " + PAGE.eval(f"{path}.getAttribute('d')"))
    shot("ui-preemption.png")
    # a victim's timeline: preempted, with the Event naming the rule, and ended (deleted)
    PAGE.eval("document.querySelector('tr.pool-events[data-pool=\"team-a\"] li[data-reason=Preempted] a').click()")
    why = PAGE.wait("(li => li && li.classList.contains('done') && (e => e && e.textContent)("
                    "li.querySelector('li[data-reason=Preempted]')))(document.querySelector('[data-step=preempted]'))",
                    15, "the victim's preempted step with its Event")
    assert "pool /org/team-a over cpu entitlement" in why, why
    # who: the resource manager, for team-b (its Preempting Event under the step too)
    who = PAGE.wait("(li => li.textContent.includes('for pool team-b') && li.querySelector('.step').textContent)"
                    "(document.querySelector('[data-step=preempted]'))", 15, "the preempting pool named")
    assert "by peloton-resmgr for pool team-b (inter-pool)" in who, who
    assert PAGE.eval("!!document.querySelector('[data-step=preempted] li[data-reason=Preempting]')")
    PAGE.wait("document.querySelector('[data-step=ended]').classList.contains('done')", 30, "the victim ended")
    steps = PAGE.eval(TIMELINE)
    assert [s[0] for s in steps if s[1]] == ["created", "queued", "admitted", "placed", "bound", "running",
                                             "preempted", "ended"], steps
    assert all(s[2] for s in steps[:-1]), steps  # a deleted pod's end has no time of its own
    shot("ui-pod-preempted.png")


def test_a_rolling_updates_progress():
    go("job/default/web")
    kubectl("patch", "jobs.peloton.io", "web", "--type=merge", "-p",
            json.dumps({"spec": {"updateStrategy": {"batchSize": 1},
                                 "template": {"metadata": {"annotations": {"v": "2"}}}}}))

    def same():
        u = api("/apis/peloton.io/v1alpha1/namespaces/default/jobs/web").get("status", {}).get("update")
        if not u or not u.get("progress"):
            return False
        got = PAGE.eval("(u => u && [u.dataset.updateState, u.textContent])(document.querySelector('.update'))")
        return got and got[0] == u["state"] and u["progress"] in got[1] and got
    got = wait_until(same, 15, "the update's state and progress on screen as in status.update")
    assert "Rolling update" in got[1], got
    shot("ui-update.png")


def test_no_page_logged_an_error():
    # every page once more from a fresh load, then the errors of the whole run
    for route in ("pools", "jobs", "job/default/web", "pod/default/web-0", "hosts", "pending"):
        PAGE.goto(f"{BASE}/ui/#/{route}")
        PAGE.wait("document.getElementById('live').textContent === 'live' && "
                  "document.getElementById('main').children.length > 0", 10, f"#/{route} loaded")
        # everything the page loaded (modules, styles, icon, API calls) came from this server
        urls = PAGE.eval("performance.getEntriesByType('resource').map(e => e.name)")
        assert urls and all(u.startswith(BASE + "/") for u in urls), urls
    assert PAGE.errors == [], PAGE.errors


try:
    print(f"test_ui: {chromium.version()}; screenshots in {SHOTS}")
    run_tests("test_ui", dict(globals()))
finally:
    BROWSER.stop()
