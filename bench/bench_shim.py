"""Benchmark: the apiserver role (bin/pelotond, release build) over a real
redis-server on loopback. Prints figures; passes or fails nothing.

  creates/s      POST of small pods, 1 and 4 keep-alive clients
  watch latency  time from a create's request to its event on every watcher,
                 with 1, 100 and 1,000 watchers (target p99 <= 50 ms at 1,000)
  list           100,000 pods: one unpaged list, and pages of 500 (kubectl's)
  healthz        /healthz latency (p50/p99/max, polled every 2 ms from another
                 process) while the unpaged list of 100,000 pods runs, and
                 pelotond's CPU and peak RSS rise per listed pod; a spec.nodeName field selector
                 list's time (pods by node come from an index)
"""
import subprocess
import http.client
import json
import os
import resource
import selectors
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402

ROOT = services.ROOT
os.environ.setdefault("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
services.PELOTOND = os.environ["PELOTOND"]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))

REDIS = services.start_redis("everysec")
PROC, PORT, LOG = services.start_pelotond(REDIS)
PODS = "/api/v1/namespaces/default/pods"


def report(name, value, unit, target=""):
    print(f"bench {name:<46} {value:12.3f} {unit:<10} {target}")


def pod(name):
    return json.dumps({"metadata": {"name": name, "labels": {"app": "bench"}},
                       "spec": {"containers": [{"name": "c", "image": "busybox",
                                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})


def creator(prefix, n, out):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    for i in range(n):
        c.request("POST", PODS, body=pod(f"{prefix}-{i}"), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 201:
            out.append(r.status)
    c.close()


def bench_creates():
    t0 = time.monotonic()
    errs = []
    creator("seq", 3000, errs)
    report("create pods, 1 client", 3000 / (time.monotonic() - t0), "pods/s")
    threads = [threading.Thread(target=creator, args=(f"par{t}", 2000, errs)) for t in range(4)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report("create pods, 4 clients", 8000 / (time.monotonic() - t0), "pods/s")
    if errs:
        print("bench create errors:", len(errs))


def open_watch(rv):
    s = socket.create_connection(("127.0.0.1", PORT))
    s.sendall(f"GET {PODS}?watch=true&resourceVersion={rv}&labelSelector=app%3Dwatch HTTP/1.1\r\n"
              f"Host: x\r\n\r\n".encode())
    s.setblocking(False)
    return s


def current_rv():
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    c.request("GET", PODS + "?limit=1")
    rv = json.loads(c.getresponse().read())["metadata"]["resourceVersion"]
    c.close()
    return rv


def bench_watch(nwatchers, events=20):
    socks = [open_watch(current_rv()) for _ in range(nwatchers)]
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    time.sleep(0.3)  # let every watch register
    for s in socks:  # drain the response headers
        try:
            s.recv(65536)
        except BlockingIOError:
            pass
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    lat = []
    for e in range(events):
        name = f"w{nwatchers}-{e}".encode()
        body = json.dumps({"metadata": {"name": name.decode(), "labels": {"app": "watch"}},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        pending = set(range(nwatchers))
        bufs = {}
        t0 = time.monotonic()
        c.request("POST", PODS, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        assert r.status == 201, r.status  # an event only for a pod that was made
        deadline = t0 + 5
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.5):
                i = key.data
                try:
                    data = key.fileobj.recv(1 << 20)
                except BlockingIOError:
                    continue
                bufs[i] = bufs.get(i, b"") + data
                if i in pending and b'"' + name + b'"' in bufs[i]:
                    pending.discard(i)
                    lat.append(time.monotonic() - t0)
        if pending:
            print(f"bench watch: {len(pending)} of {nwatchers} watchers missed event {e}")
    c.close()
    for s in socks:
        sel.unregister(s)
        s.close()
    lat.sort()
    p50 = lat[len(lat) // 2] * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    report(f"watch event latency p50, {nwatchers} watchers", p50, "ms")
    report(f"watch event latency p99, {nwatchers} watchers", p99, "ms", "(target <= 50 ms at 1,000)")


def bench_list(total=100000):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    c.request("GET", PODS + "?limit=1")
    r = json.loads(c.getresponse().read())
    c.close()  # the fill below takes long enough for an idle keep-alive to be closed
    have = 1 + r["metadata"].get("remainingItemCount", 0)
    need = max(0, total - have)
    threads = [threading.Thread(target=creator, args=(f"fill{t}", need // 4 + 1, [])) for t in range(4)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if need:
        report("create pods, 4 clients (filling to 100k)", need / (time.monotonic() - t0), "pods/s")
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    t0 = time.monotonic()
    c.request("GET", PODS)
    body = c.getresponse().read()
    n = len(json.loads(body)["items"])
    report(f"list {n} pods, one response", (time.monotonic() - t0) * 1000, "ms")
    t0 = time.monotonic()
    cont, n = "", 0
    while True:
        c.request("GET", PODS + "?limit=500" + (f"&continue={cont}" if cont else ""))
        page = json.loads(c.getresponse().read())
        n += len(page["items"])
        cont = page["metadata"].get("continue")
        if not cont:
            break
    report(f"list {n} pods, pages of 500", (time.monotonic() - t0) * 1000, "ms")
    c.close()


POLLER = r"""
import http.client, os, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
lat = []
while not os.path.exists(out + ".stop"):
    t0 = time.monotonic()
    c.request("GET", "/healthz")
    r = c.getresponse()
    r.read()
    lat.append(time.monotonic() - t0)
    time.sleep(0.002)
open(out, "w").write("\n".join("%.6f" % x for x in lat))
"""


def cpu_ticks():
    with open(f"/proc/{PROC.pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return int(v[11]) + int(v[12])


def status_kib(key):
    with open(f"/proc/{PROC.pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def bench_list_healthz():
    out = os.path.join(services.tempdir(), "lat")
    poller = subprocess.Popen([sys.executable, "-c", POLLER, str(PORT), out])
    time.sleep(0.5)
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
    try:  # the peak RSS from here (5: reset VmHWM to the current RSS; needs the right to, else the old peak)
        with open(f"/proc/{PROC.pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    rss0 = status_kib("VmRSS")
    t0, ticks = time.monotonic(), cpu_ticks()
    c.request("GET", PODS)
    n = len(json.loads(c.getresponse().read())["items"])
    wall, cpu = time.monotonic() - t0, (cpu_ticks() - ticks) / os.sysconf("SC_CLK_TCK")
    peak = max(0, status_kib("VmHWM") - rss0) * 1024
    open(out + ".stop", "w").close()
    poller.wait(60)
    lat = sorted(float(x) * 1000 for x in open(out).read().split())
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    report(f"list {n} pods (unpaged) under /healthz polls", wall * 1000, "ms")
    report("  pelotond CPU per listed pod", cpu * 1e6 / max(n, 1), "us/pod")
    report("  pelotond peak RSS rise per listed pod", peak / max(n, 1), "B/pod",
           "(the items held until sent, packed)")
    report("  /healthz p50 during the list", lat[len(lat) // 2], "ms")
    report("  /healthz p99 during the list", lat[int(len(lat) * 0.99)], "ms")
    report("  /healthz max during the list", lat[-1], "ms", f"(target < 100 ms; load {load})")
    by_node = "/api/v1/pods?fieldSelector=spec.nodeName%3Dbench-node&limit=500"
    c.request("GET", by_node)  # the first list by node starts the index's build (docs/store.md)
    c.getresponse().read()
    time.sleep(3)
    t0 = time.monotonic()
    c.request("GET", by_node)
    page = json.loads(c.getresponse().read())
    report(f"list by spec.nodeName ({len(page['items'])} of {n} pods)", (time.monotonic() - t0) * 1000, "ms")
    c.close()


try:
    print(f"apiserver benchmark: pelotond {services.PELOTOND}, redis-server on loopback, appendfsync everysec")
    bench_creates()
    for n in (1, 100, 1000):
        bench_watch(n)
    bench_list()
    bench_list_healthz()
finally:
    services.stop_all()
