"""End-to-end: a list with a limit is paged by bytes as well as by count, so
every page fits what a client buffers (before, 500 pods of 1.4 MB made a 72 MB
page, over the client's 64 MiB bound, and an informer re-listed forever).
pelotond runs with a 1 MiB page bound here so that ten 300 KB objects show it."""
import subprocess

import services
from simlib import run_tests

REDIS = services.start_redis()
PROC, PORT, LOG = services.start_pelotond(REDIS, "--list-page-bytes=1048576")
KUBECONFIG = services.kubeconfig(PORT)
CM = "/api/v1/namespaces/default/configmaps"


def call(method, path, body=None):
    return services.api(PORT, method, path, body)


def test_setup():
    for i in range(10):
        st, _ = call("POST", CM, {"metadata": {"name": f"big-{i}", "labels": {"size": "big"}},
                                  "data": {"k": "x" * 300000}})
        assert st == 201


def test_pages_end_before_the_byte_bound_and_continue():
    for selector in ("", "&labelSelector=size%3Dbig"):
        names, pages, token = [], 0, ""
        while True:
            st, body = call("GET", f"{CM}?limit=500{selector}" + (f"&continue={token}" if token else ""))
            assert st == 200
            items = body["items"]
            assert 1 <= len(items) <= 3, (pages, len(items))  # 3 x 300 KB < 1 MiB < 4 x 300 KB
            names += [i["metadata"]["name"] for i in items]
            pages += 1
            token = body["metadata"].get("continue")
            if not token:
                break
            if not selector:
                assert body["metadata"]["remainingItemCount"] == 10 - len(names), body["metadata"]
            assert pages < 20
        assert names == [f"big-{i}" for i in range(10)], (selector, names)
        assert pages == 4, pages


def test_a_list_without_limit_is_whole():
    st, body = call("GET", CM)
    assert len(body["items"]) == 10 and not body["metadata"].get("continue"), body["metadata"]


def test_kubectl_follows_the_pages():
    p = subprocess.run(["kubectl", f"--kubeconfig={KUBECONFIG}", "get", "cm", "-o", "name"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and sorted(p.stdout.split()) == sorted(f"configmap/big-{i}" for i in range(10)), \
        (p.stdout, p.stderr)


def test_the_python_client_follows_the_pages():
    script = f"""
from kubernetes import client
c = client.ApiClient(client.Configuration(host="http://127.0.0.1:{PORT}"))
v1 = client.CoreV1Api(c)
names, tok, pages = [], None, 0
while True:
    r = v1.list_namespaced_config_map("default", limit=500, _continue=tok)
    names += [i.metadata.name for i in r.items]
    pages += 1
    tok = r.metadata._continue
    if not tok:
        break
print(pages, len(names), len(set(names)))
"""
    p = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.split() == ["4", "10", "10"], (p.stdout, p.stderr)


def test_bound_is_checked_at_start():
    r = subprocess.run([services.PELOTOND, "--list-page-bytes=999999999999", f"--redis=127.0.0.1:{REDIS}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--list-page-bytes takes" in r.stderr, r.stderr


run_tests("shim-paging", dict(globals()))
