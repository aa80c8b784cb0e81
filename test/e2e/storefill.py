"""Objects written straight into Redis in the store's layout (docs/store.md,
"Redis key schema") before pelotond starts, for tests that need tens of
thousands of them: one `redis-cli --pipe`, seconds instead of minutes
through the API on a shared 2-core machine."""
import json
import subprocess


def resp(*args):
    """One command in Redis' wire format."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def web_pod(i, rv, nodes):
    """Pod i of a web tier, Running on node i % nodes, labelled app=a<i % 50>."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i:06d}", "namespace": "default", "uid": f"00000000-0000-4000-8000-{i:012d}",
                         "resourceVersion": str(rv), "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"app": f"a{i % 50}", "tier": "web"}},
            "spec": {"nodeName": f"node-{i % nodes:03d}", "schedulerName": "default-scheduler",
                     "containers": [{"name": "c", "image": "registry.example/app:1.0",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
            "status": {"phase": "Running", "podIP": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"}}


def fill_pods(redis_port, pods):
    """Stores pods (each with its metadata.resourceVersion set) and sets the
    store's counter to the highest of them."""
    cmds, top = [], 0
    for lo in range(0, len(pods), 1000):
        h, z = ["HSET", "pc:obj:pods"], ["ZADD", "pc:idx:pods"]
        for p in pods[lo:lo + 1000]:
            md = p["metadata"]
            m = f"{md['namespace']}/{md['name']}"
            h += [f"o:{m}", json.dumps(p, separators=(",", ":")), f"v:{m}", md["resourceVersion"]]
            z += ["0", m]
            top = max(top, int(md["resourceVersion"]))
        cmds += [resp(*h), resp(*z)]
    cmds.append(resp("SET", "pc:rv", str(top)))
    r = subprocess.run(["redis-cli", "-p", str(redis_port), "--pipe"], input=b"".join(cmds), capture_output=True,
                       timeout=60)
    assert r.returncode == 0 and b"errors: 0" in r.stdout, r.stdout + r.stderr
