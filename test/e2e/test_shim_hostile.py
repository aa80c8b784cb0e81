"""End-to-end: hostile writes against pelotond (the ASan build under test)
and redis. Each must be refused with its Kubernetes Status (the right code and
reason) and leave the store as it was, and the server must stay small and
keep serving: patches that grow their document without bound or do
unbounded work, and objects kube-apiserver would refuse as invalid (bad
quantities, label keys and values, Secret data), on every write path."""
import base64
import http.client
import json
import time

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS)
CM = "/api/v1/namespaces/default/configmaps"


def request(method, path, body=None, ctype="application/json", timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    c.request(method, path, body=data, headers={"Content-Type": ctype} if data is not None else {})
    r = c.getresponse()
    raw = r.read()
    c.close()
    return r.status, json.loads(raw) if raw else None


def peak_rss_mib():
    with open(f"/proc/{PROC.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return 0


def create(path, obj):
    st, body = request("POST", path, obj)
    assert st == 201, (st, body)
    return body


def assert_status(st, body, code, reason, *words):
    assert st == code, (st, body)
    assert body["kind"] == "Status" and body["code"] == code and body["reason"] == reason, body
    assert body["status"] == "Failure", body
    for w in words:
        assert w in body["message"], (w, body["message"])


def assert_unchanged(path, before):
    st, now = request("GET", path)
    assert st == 200, (st, now)
    assert now == before, "the store changed"


def configmap(name, data):
    return create(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


def test_json_patch_copy_doubling_is_refused_small_and_fast():
    # 22 copies of /data into itself: 1 KB of patch doubled the document 22
    # times (1.6 GB of RSS in the release build) before the store refused it
    before = configmap("double", {"a": "x"})
    ops = [{"op": "copy", "from": "/data", "path": f"/data/k{i}"} for i in range(22)]
    rss0, t0 = peak_rss_mib(), time.monotonic()
    st, body = request("PATCH", f"{CM}/double", ops, "application/json-patch+json")
    took, grew = time.monotonic() - t0, peak_rss_mib() - rss0
    assert_status(st, body, 413, "RequestEntityTooLarge", "json patch operation 16 (copy)",
                  "would be larger than 1572864 bytes")
    assert took < 10, took  # ASan; 0.03 s in a release build
    assert grew < 400, f"peak RSS grew {grew} MiB"
    assert_unchanged(f"{CM}/double", before)
    # 16 copies make 983 KB, which a stored object may be
    st, body = request("PATCH", f"{CM}/double", ops[:16], "application/json-patch+json")
    assert st == 200 and len(body["data"]) == 17, (st, str(body)[:300])


def test_status_patch_copy_doubling_is_refused():
    # the status subresource answers a patch past the limits the same way
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "st"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    create("/api/v1/namespaces/default/pods", pod)
    st, before = request("GET", "/api/v1/namespaces/default/pods/st")
    ops = [{"op": "copy", "from": "/status", "path": f"/status/k{i}"} for i in range(24)]
    st, body = request("PATCH", "/api/v1/namespaces/default/pods/st/status", ops, "application/json-patch+json")
    assert_status(st, body, 413, "RequestEntityTooLarge", "(copy): the patched object would be larger than")
    assert_unchanged("/api/v1/namespaces/default/pods/st", before)


def test_json_patch_work_is_bounded():
    # copies of a 20,000-key map over one key: the document stays small, the
    # work does not (a 442 KB patch of them held the server's loop 46 s)
    before = configmap("work", {f"k{i:05d}": "v" for i in range(20000)})
    ops = [{"op": "copy", "from": "/data", "path": "/b"}] * 9400
    t0 = time.monotonic()
    st, body = request("PATCH", f"{CM}/work", ops, "application/json-patch+json")
    took = time.monotonic() - t0
    assert_status(st, body, 413, "RequestEntityTooLarge", "json patch operation 19 (copy)", "steps of work")
    assert took < 15, took
    assert_unchanged(f"{CM}/work", before)
    # inserts at the front of a long array: each shifts it
    st, body = request("PATCH", f"{CM}/work", {"x": [0] * 100000}, "application/merge-patch+json")
    assert st == 200, (st, body)
    ops = [{"op": "add", "path": "/x/0", "value": 1}, {"op": "remove", "path": "/x/0"}] * 5000
    st, err = request("PATCH", f"{CM}/work", ops, "application/json-patch+json")
    assert_status(st, err, 413, "RequestEntityTooLarge", "steps of work")
    assert_unchanged(f"{CM}/work", body)
    # a strategic list merge is linear: two lists of 5,000 environment
    # variables, refused for their work while merge keys were found by
    # scanning, merge (test_shim_smp_linear.py has more)
    env = [{"name": f"E{i}", "value": "x"} for i in range(5000)]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "many"},
           "spec": {"containers": [{"name": "c", "image": "x", "env": env}]}}
    create("/api/v1/namespaces/default/pods", pod)
    patch = {"spec": {"containers": [{"name": "c", "env": [{"name": f"P{i}", "value": "y"} for i in range(5000)]}]}}
    st, body = request("PATCH", "/api/v1/namespaces/default/pods/many", patch, "application/strategic-merge-patch+json")
    assert st == 200 and len(body["spec"]["containers"][0]["env"]) == 10000, (st, str(body)[:300])


def test_merge_patches_are_held_to_the_object_limit():
    before = configmap("grow", {"a": "x" * 1000000})
    for ctype in ["application/merge-patch+json", "application/strategic-merge-patch+json"]:
        st, body = request("PATCH", f"{CM}/grow", {"data": {"b": "y" * 600000}}, ctype)
        assert_status(st, body, 413, "RequestEntityTooLarge", "would be larger than 1572864 bytes")
        assert_unchanged(f"{CM}/grow", before)
    # replacing the large value by another is fine
    st, body = request("PATCH", f"{CM}/grow", {"data": {"a": "z" * 1000000}}, "application/merge-patch+json")
    assert st == 200 and body["data"]["a"][:3] == "zzz", (st, str(body)[:200])


PODS = "/api/v1/namespaces/default/pods"
BAD_RESOURCES = [  # (resources, field, words)
    ({"requests": {"cpu": "abc"}}, "spec.containers[0].resources.requests[cpu]",
     'Invalid value: "abc": must be a valid quantity'),
    ({"requests": {"cpu": "NaN"}}, "spec.containers[0].resources.requests[cpu]", "must be a valid quantity"),
    ({"requests": {"cpu": ""}}, "spec.containers[0].resources.requests[cpu]", "must be a valid quantity"),
    ({"requests": {"cpu": "-5"}}, "spec.containers[0].resources.requests[cpu]", "must be greater than or equal to 0"),
    ({"limits": {"memory": "-1"}}, "spec.containers[0].resources.limits[memory]", "must be greater than or equal to 0"),
    ({"requests": {"memory": "1e999999"}}, "spec.containers[0].resources.requests[memory]", "must be a valid quantity"),
    ({"limits": {"nvidia.com/gpu": "-1"}}, "spec.containers[0].resources.limits[nvidia.com/gpu]",
     "must be greater than or equal to 0"),
    ({"limits": {"nvidia.com/gpu": "500m"}}, "spec.containers[0].resources.limits[nvidia.com/gpu]",
     "must be an integer"),
    ({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}, "spec.containers[0].resources.requests",
     "must be equal to nvidia.com/gpu limit of 2"),
]


def pod(name, resources=None, labels=None):
    c = {"name": "c", "image": "x"}
    if resources is not None:
        c["resources"] = resources
    md = {"name": name}
    if labels is not None:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": {"containers": [c]}}


def assert_invalid(st, body, kind, name, field, *words):
    assert_status(st, body, 422, "Invalid", f'{kind} "{name}" is invalid: ', field, *words)
    assert body["details"]["kind"] == kind and body["details"]["name"] == name, body
    assert any(c["field"] == field for c in body["details"]["causes"]), body


def test_invalid_pod_resources_are_refused_on_create():
    for i, (res, field, words) in enumerate(BAD_RESOURCES):
        name = f"bad-{i}"
        for query in ["", "?dryRun=All"]:
            st, body = request("POST", PODS + query, pod(name, res))
            assert_invalid(st, body, "Pod", name, field, words)
        st, body = request("GET", f"{PODS}/{name}")
        assert st == 404, (st, body)  # nothing stored
    st, body = request("POST", PODS, pod("good", {"requests": {"cpu": "250m", "nvidia.com/gpu": 1},
                                                   "limits": {"nvidia.com/gpu": 1}}))
    assert st == 201, (st, body)


def test_invalid_pod_resources_are_refused_on_update_and_every_patch():
    before = create(PODS, pod("upd", {"requests": {"cpu": "100m"}}))
    for res, field, words in BAD_RESOURCES:
        obj = pod("upd", res)
        obj["metadata"]["resourceVersion"] = before["metadata"]["resourceVersion"]
        st, body = request("PUT", f"{PODS}/upd", obj)
        assert_invalid(st, body, "Pod", "upd", field, words)
        patches = [
            ("application/merge-patch+json", {"spec": {"containers": [{"name": "c", "image": "x", "resources": res}]}}),
            ("application/strategic-merge-patch+json", {"spec": {"containers": [{"name": "c", "resources": res}]}}),
            ("application/json-patch+json", [{"op": "replace", "path": "/spec/containers/0/resources", "value": res}]),
            ("application/apply-patch+yaml", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "upd"},
                                              "spec": {"containers": [{"name": "c", "image": "x", "resources": res}]}}),
        ]
        for ctype, patch in patches:
            for query in ["", "?dryRun=All"]:
                st, body = request("PATCH", f"{PODS}/upd{query}", patch, ctype)
                assert_invalid(st, body, "Pod", "upd", field, words)
        assert_unchanged(f"{PODS}/upd", before)
    # server-side apply of a missing object creates it: validated the same way
    st, body = request("PATCH", f"{PODS}/ssa?fieldManager=t", pod("ssa", BAD_RESOURCES[0][0]),
                       "application/apply-patch+yaml")
    assert_invalid(st, body, "Pod", "ssa", BAD_RESOURCES[0][1], BAD_RESOURCES[0][2])
    assert request("GET", f"{PODS}/ssa")[0] == 404


def test_label_keys_and_values_are_validated_on_every_kind():
    long_key = "k" * 300
    cases = [({"a/b/c": "x"}, "a qualified name must consist of"),
             ({long_key: "v"}, "name part must be no more than 63 characters"),
             ({"ok": "v" * 64}, "must be no more than 63 characters"),
             ({"ok": "a b"}, "a valid label must be an empty string or consist of")]
    kinds = [("ConfigMap", CM, {"apiVersion": "v1", "kind": "ConfigMap"}),
             ("Namespace", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace"}),
             ("Pod", PODS, pod("x")),
             ("ResourcePool", "/apis/peloton.io/v1alpha1/resourcepools",
              {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "spec": {}})]
    for labels, words in cases:
        for kind, path, base in kinds:
            obj = json.loads(json.dumps(base))
            obj["metadata"] = {"name": "lbl", "labels": labels}
            st, body = request("POST", path, obj)
            assert_invalid(st, body, kind, "lbl", "metadata.labels", words)
            assert request("GET", f"{path}/lbl")[0] == 404
    # and on a patch of a stored object, of every type
    before = configmap("lbl", {"a": "b"})
    for ctype, patch in [("application/merge-patch+json", {"metadata": {"labels": {"a/b/c": "x"}}}),
                         ("application/strategic-merge-patch+json", {"metadata": {"labels": {long_key: "x"}}}),
                         ("application/json-patch+json",
                          [{"op": "add", "path": "/metadata/labels", "value": {"a/b/c": "x"}}])]:
        st, body = request("PATCH", f"{CM}/lbl", patch, ctype)
        assert_invalid(st, body, "ConfigMap", "lbl", "metadata.labels", "Invalid value")
        assert_unchanged(f"{CM}/lbl", before)
    st, body = request("PATCH", f"{CM}/lbl", {"metadata": {"annotations": {"-x": "v"}}}, "application/merge-patch+json")
    assert_invalid(st, body, "ConfigMap", "lbl", "metadata.annotations", 'Invalid value: "-x"')
    st, body = request("PATCH", f"{CM}/lbl", {"metadata": {"labels": {"example.com/tier": "front-1"}}},
                       "application/merge-patch+json")
    assert st == 200 and body["metadata"]["labels"] == {"example.com/tier": "front-1"}, (st, body)


def b64(s):
    return base64.b64encode(s.encode()).decode()


def test_secret_string_data_is_folded_and_data_must_be_base64():
    secrets = "/api/v1/namespaces/default/secrets"
    created = create(secrets, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
                               "data": {"a": b64("x"), "b": b64("old")}, "stringData": {"b": "new", "c": "hello"}})
    assert "stringData" not in created, created
    assert created["data"] == {"a": b64("x"), "b": b64("new"), "c": b64("hello")}, created
    st, stored = request("GET", f"{secrets}/s1")
    assert st == 200 and stored == created, stored
    # update and patch fold it too
    obj = dict(stored, stringData={"d": "upd"})
    st, body = request("PUT", f"{secrets}/s1", obj)
    assert st == 200 and "stringData" not in body and body["data"]["d"] == b64("upd"), (st, body)
    st, body = request("PATCH", f"{secrets}/s1", {"stringData": {"a": "patched"}}, "application/merge-patch+json")
    assert st == 200 and "stringData" not in body and body["data"]["a"] == b64("patched"), (st, body)
    # data that is not base64 is refused, with the key, on create and on patch
    st, body = request("POST", secrets, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s2"},
                                         "data": {"tls.key": "not base64!"}})
    assert_invalid(st, body, "Secret", "s2", "data[tls.key]", "illegal base64 data at input byte 3")
    assert "not base64" not in body["message"]  # a secret's value is not echoed
    assert request("GET", f"{secrets}/s2")[0] == 404
    st, before = request("GET", f"{secrets}/s1")
    st, body = request("PATCH", f"{secrets}/s1", {"data": {"k": "%%%"}}, "application/merge-patch+json")
    assert_invalid(st, body, "Secret", "s1", "data[k]", "illegal base64 data")
    assert_unchanged(f"{secrets}/s1", before)


def test_server_still_serves():
    assert PROC.poll() is None, open(LOG).read()[-2000:]
    st, body = request("GET", f"{CM}/double")
    assert st == 200 and body["metadata"]["name"] == "double"


def test_exit_clean_under_asan():
    assert services.stop(PROC) == 0, open(LOG).read()[-3000:]


run_tests("shim-hostile", dict(globals()))
