"""End-to-end: kill -9 of pelotond and redis-server in the middle of writes.
After a restart on the same data, every acknowledged write is there with its
resourceVersion, and a watch resumed from the last resourceVersion seen
before the crash misses nothing."""
import http.client
import json
import signal
import threading

import services
from simlib import run_tests

NS = "/api/v1/namespaces/default/configmaps"


def call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"} if body is not None else {})
    r = c.getresponse()
    data = json.loads(r.read() or b"null")
    c.close()
    return r.status, data


def test_kill9_everything_keeps_acknowledged_writes_and_watch_resumes():
    redis_port = services.start_redis()  # appendfsync always
    rproc, rdir, _ = services.start_redis.last
    proc, port, _ = services.start_pelotond(redis_port)
    acked = {}  # name -> resourceVersion the server acknowledged
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set() and i < 5000:
            try:
                st, obj = call(port, "POST", NS, {"metadata": {"name": f"d-{i}"}, "data": {"i": str(i)}})
            except OSError:
                return  # the server died mid-request: that write was not acknowledged
            if st == 201:
                acked[obj["metadata"]["name"]] = obj["metadata"]["resourceVersion"]
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    services.wait_for(lambda: len(acked) >= 300, timeout=60, what="300 writes")
    last_seen = max(int(v) for v in acked.values())
    rproc.send_signal(signal.SIGKILL)  # both die with writes in flight
    proc.send_signal(signal.SIGKILL)
    stop.set()
    t.join(30)
    rproc.wait(10)
    proc.wait(10)

    services.start_redis(d=rdir, port=redis_port)  # same AOF, same port
    proc2, port2, _ = services.start_pelotond(redis_port)
    st, lst = call(port2, "GET", NS)
    assert st == 200
    stored = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in lst["items"]}
    missing = [n for n in acked if n not in stored]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    changed = [n for n in acked if stored[n] != acked[n]]
    assert not changed, f"resourceVersions changed: {changed[:5]}"
    # resume a watch from a point before the crash: it replays what came after, in order
    resume = last_seen - 50
    c = http.client.HTTPConnection("127.0.0.1", port2, timeout=10)
    c.request("GET", NS + f"?watch=true&resourceVersion={resume}&timeoutSeconds=2")
    r = c.getresponse()
    events = [json.loads(l) for l in r.read().splitlines() if l.strip()]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events if e["type"] != "BOOKMARK"]
    assert rvs == sorted(rvs) and rvs and rvs[0] == resume + 1, rvs[:5]
    expected = sorted(int(v) for v in stored.values() if int(v) > resume)
    assert rvs == expected, (len(rvs), len(expected))
    # new writes continue the sequence
    st, obj = call(port2, "POST", NS, {"metadata": {"name": "after-crash"}})
    assert st == 201 and int(obj["metadata"]["resourceVersion"]) > max(int(v) for v in stored.values())
    services.stop(proc2)


run_tests("shim-durability", dict(globals()))
