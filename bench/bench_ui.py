#!/usr/bin/python3
"""Benchmark: the web UI (docs/ui.md) on a large cluster, in Debian's headless
Chromium against a release pelotond (the API server alone, so nothing
changes under the page) on a redis-server on loopback, holding 5,000 Nodes
and 20,000 pods (three quarters bound, round robin; the rest waiting in
four pools). Prints figures; passes or fails nothing.

  per page   the browser's first contentful paint (the shell, before any
             data), and from navigation to the page drawn whole (its rows
             there: 500 a table at most, the rest counted),
             the API requests it made and the bytes they brought (the list
             pages; the watches' streams stay open and bring nothing here)
  redraw     the time one full redraw of the page takes (its update call)
"""
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402
import chromium  # noqa: E402

services.PELOTOND = os.environ.get("PELOTOND", os.path.join(services.ROOT, "bin", "pelotond"))
NODES, PODS, POOLS = 5000, 20000, 4


def create_all(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(path, obj):
        c.request("POST", path, json.dumps(obj), {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        assert r.status == 201, (path, r.status)
    pools = [f"p{i}" for i in range(POOLS)]
    for p in pools:
        post("/apis/peloton.io/v1alpha1/resourcepools",
             {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": p},
              "spec": {"resources": [{"kind": "cpu", "reservation": "1000", "limit": "100000"}]}})
    for i in range(NODES):
        post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                               "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}}})
    for i in range(PODS):
        spec = {"schedulerName": "peloton",
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
        if i % 4:
            spec["nodeName"] = f"n{i % NODES}"
        post("/api/v1/namespaces/default/pods",
             {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod{i}", "labels": {
                 "peloton.io/resource-pool": pools[(i // 4) % POOLS]}}, "spec": spec})
    c.close()


PAGES = [  # (route, what is there when it is drawn whole: a table draws 500 rows at most and counts the rest)
    ("hosts", f"document.querySelectorAll('tr[data-node]').length === 500 && "
              f"!!document.querySelector('[data-more=\"{NODES - 500}\"]')"),
    ("pending", f"document.querySelectorAll('section[data-pool] [data-more=\"{PODS // 4 // POOLS - 500}\"]').length"
                f" === {POOLS}"),
    ("pools", f"document.querySelectorAll('tr.pool-head').length === {POOLS}"),
]


def main():
    redis = services.start_redis("everysec")
    proc, port, _ = services.start_pelotond(redis)
    t0 = time.monotonic()
    create_all(port)
    print(f"setup: {NODES} nodes, {PODS} pods created in {time.monotonic() - t0:.1f} s")
    b = chromium.Chromium()
    try:
        for route, drawn in PAGES:
            page = chromium.Page(b)
            page.call("Page.navigate", {"url": f"http://127.0.0.1:{port}/ui/#/{route}"})
            services.wait_until(lambda: page.eval(drawn), 120, f"#/{route} drawn", every=0.02)
            ms = page.eval("performance.now()")
            fcp = page.eval("(p => p ? p.startTime : 0)(performance.getEntriesByType('paint')"
                            ".find(e => e.name === 'first-contentful-paint'))")
            api = page.eval("performance.getEntriesByType('resource').filter(e => /\\/apis?\\//.test(e.name))"
                            ".map(e => [e.name, e.transferSize])")
            lists = [a for a in api if "watch=1" not in a[0]]
            # one redraw: the page's update, timed in the page
            redraw = page.eval("(async () => { const t = performance.now();"
                               " location.hash = location.hash; window.dispatchEvent(new HashChangeEvent('hashchange'));"
                               f" while (!({drawn})) await new Promise(r => setTimeout(r, 5));"
                               " return performance.now() - t; })()")
            print(f"#/{route}: first contentful paint {fcp / 1000:.2f} s, "
                  f"drawn {ms / 1000:.2f} s after navigation; {len(lists)} list requests, "
                  f"{sum(a[1] for a in lists) / 1e6:.1f} MB; "
                  f"re-route and redraw {redraw:.0f} ms; errors {page.errors or 'none'}")
            page.close()
    finally:
        b.stop()
        services.stop_all()


if __name__ == "__main__":
    main()
