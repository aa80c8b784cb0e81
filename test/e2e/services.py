"""Starting and stopping the services an e2e test needs, on loopback only.

Every wait is bounded; every process started here is stopped by stop_all()
(also registered with atexit), so a failing test leaves nothing running.
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PELOTOND = os.environ.get("PELOTOND", os.path.join(ROOT, "build", "asan", "pelotond"))
KUBELET_SIM = os.environ.get("KUBELET_SIM", os.path.join(ROOT, "build", "asan", "kubelet-sim"))
_procs = []
_dirs = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout=10.0, what="service"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not come up in {timeout}s")


# TEST_TRACE_WAITS=S prints every wait that took S seconds or more (where a suite's time goes)
_TRACE_WAITS = float(os.environ.get("TEST_TRACE_WAITS", "0"))


def wait_until(check, timeout=15.0, what="condition", every=0.1):
    """Polls check() until it returns something true (returned) or the time is up (AssertionError)."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            if _TRACE_WAITS and time.monotonic() - t0 >= _TRACE_WAITS:
                print(f"  waited {time.monotonic() - t0:.1f} s for {what}", file=sys.stderr)
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def start_kubelet_sim(kubeconfig_path, *flags, expect=None):
    """kubelet-sim against the API in kubeconfig_path; returns (process, stderr path) once
    it says it registered `expect` nodes (any number when None)."""
    d = tempdir()
    out, err = os.path.join(d, "ksim.out"), os.path.join(d, "ksim.err")
    p = subprocess.Popen([KUBELET_SIM, f"--kubeconfig={kubeconfig_path}", *flags], stdout=open(out, "w"),
                         stderr=open(err, "w"))
    _procs.append(p)  # stop_all stops it if a test fails first
    line = f"kubelet-sim: {expect} nodes registered" if expect is not None else "nodes registered"
    wait_until(lambda: line in open(out).read() or p.poll() is not None, 30, "kubelet-sim to register")
    assert p.poll() is None, open(err).read()
    return p, err


def tempdir():
    d = tempfile.mkdtemp(prefix="peloton-e2e-")
    _dirs.append(d)
    return d


def start_redis(fsync="always", d=None, port=None):
    """A private redis-server with AOF; fsync "always" (tests) or "everysec".
    Pass d and port to restart one on its old data."""
    d, port = d or tempdir(), port or free_port()
    # its Unix-domain socket too, in the directory: start_redis.last's d + "/redis.sock"
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "yes", "--appendfsync", fsync, "--dir", d, "--daemonize", "no",
                          "--unixsocket", os.path.join(d, "redis.sock"), "--unixsocketperm", "700"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _procs.append(p)

    def ping():
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    wait_for(ping, what="redis-server")
    start_redis.last = (p, d, port)
    return port


def start_pelotond(redis_port, *extra):
    d = tempdir()
    port_file = os.path.join(d, "port")
    log = open(os.path.join(d, "pelotond.log"), "w")
    crds = [] if any(a.startswith("--crds") for a in extra) else [f"--crds={os.path.join(ROOT, 'crds')}"]
    # the API server alone unless the test asks for roles (pelotond's default is all of them)
    roles = [] if any(a.startswith("--roles") for a in extra) else ["--roles=apiserver"]
    # the API is closed to a request without credentials unless started open
    # (docs/security.md): tests that give no token file use the open port
    auth = ("--token-file", "--client-ca-file", "--insecure-allow-anonymous", "--closed")
    opened = [] if any(a.startswith(auth) for a in extra) else ["--insecure-allow-anonymous"]
    extra = [a for a in extra if a != "--closed"]
    p = subprocess.Popen([PELOTOND, "--port=0", f"--port-file={port_file}", f"--redis=127.0.0.1:{redis_port}",
                          *roles, *crds, *opened, *extra], stdout=log, stderr=subprocess.STDOUT)
    _procs.append(p)
    wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip() != "", what="pelotond")
    ports = [int(x) for x in open(port_file).read().split()]
    port = ports[0]
    start_pelotond.tls_port = ports[1] if len(ports) > 1 else None
    wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read() == b"ok",
             what="pelotond /healthz")
    return p, port, os.path.join(d, "pelotond.log")


class RedisError(str):
    """An error reply ("ERR ...", "READONLY ...") from redis_call."""


def redis_call(port, *args, timeout=5.0):
    """One command to a test's redis-server (or Sentinel) on 127.0.0.1:port
    (RESP over a socket); its reply: str (status or bulk), RedisError, int,
    list or None."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(b"*%d\r\n" % len(args) +
              b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in map(str, args)))
    f = s.makefile("rb")

    def read():
        line = f.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:].decode(errors="replace")
        if kind == b"+":
            return rest
        if kind == b"-":
            return RedisError(rest)
        if kind == b":":
            return int(rest)
        if kind == b"$":
            return None if rest == "-1" else f.read(int(rest) + 2)[:-2].decode(errors="replace")
        if kind == b"*":
            return None if rest == "-1" else [read() for _ in range(int(rest))]
        raise ValueError(line)
    try:
        return read()
    finally:
        s.close()


def redis_cmd(port, *args, timeout=1.0):
    """redis_call's reply as text: numbers as digits, arrays joined by
    spaces, nil as "", errors as "-ERR ..."."""
    def text(r):
        if isinstance(r, RedisError):
            return "-" + r
        if isinstance(r, list):
            return " ".join(text(x) for x in r)
        return "" if r is None else str(r)
    return text(redis_call(port, *args, timeout=timeout))


def end_watch(conn):
    """Ends a watch that a thread reads from an http.client connection: a
    shutdown wakes the reader first (closing the response while it reads
    would wait for its lock until the read times out), then the close."""
    try:
        if conn.sock:
            conn.sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def wait_port(port, what="port"):
    """Waits (bounded) until 127.0.0.1:port takes connections."""
    wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, what=what)


def start_stack(*pelotond_flags, kubelet=None, native=False):
    """redis-server; pelotond with pelotond_flags, and with a native port it
    waits for when native is set; its kubeconfig; kubelet-sim with the flags
    in kubelet (a list; None: no kubelet-sim), waiting for the nodes its
    --nodes=N names. Returns a namespace: redis, proc, port, log, nport
    (None without native), kubeconfig, ksim (None without kubelet-sim)."""
    s = types.SimpleNamespace(redis=start_redis(), nport=free_port() if native else None, ksim=None)
    native_flag = [f"--native-port={s.nport}"] if native else []
    s.proc, s.port, s.log = start_pelotond(s.redis, *pelotond_flags, *native_flag)
    if native:
        wait_port(s.nport, "native port")
    s.kubeconfig = kubeconfig(s.port)
    if kubelet is not None:
        nodes = [int(f.split("=", 1)[1]) for f in kubelet if f.startswith("--nodes=")]
        s.ksim, _ = start_kubelet_sim(s.kubeconfig, *kubelet, expect=nodes[0] if nodes else None)
    return s


def start_controllers(name, server_port, redis_port, *flags):
    """pelotond with controller roles (flags: --roles=... and any others) as
    a client of the API server on server_port and of the Redis on
    redis_port, logging into a file of its own; (process, log path) once it
    says its controllers run."""
    log = os.path.join(tempdir(), f"{name}.log")
    p = subprocess.Popen([PELOTOND, *flags, f"--server=http://127.0.0.1:{server_port}",
                          f"--redis=127.0.0.1:{redis_port}"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    _procs.append(p)
    wait_until(lambda: "controllers running" in open(log).read() or p.poll() is not None, 20, f"{name} to start")
    assert p.poll() is None, open(log).read()[-3000:]
    return p, log


def kubeconfig(port):
    path = os.path.join(tempdir(), "kubeconfig")
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: pc, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: c, context: {{cluster: pc, user: u}}}}]
current-context: c
""")
    return path


def api(port, method, path, body=None, timeout=30, ctype="application/json"):
    """One request to the API server on 127.0.0.1:port: (status, the reply
    as JSON, or {} when empty). body, when given, is sent as JSON; an error
    status is returned, not raised."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def kubectl(kubeconfig, *args, stdin=None, check=True, timeout=60):
    """kubectl against the API server kubeconfig names: its stdout; when it
    fails and check is set, AssertionError naming the command and its stderr."""
    r = subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", *args], input=stdin, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr}")
    return r.stdout


def kubectl_rc(kubeconfig, *args, stdin=None, timeout=60):
    """kubectl as above for a test that looks at failures too: (exit code,
    stdout and stderr together)."""
    r = subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", *args], input=stdin, capture_output=True,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def kubectl_apply(kubeconfig, objs):
    """kubectl apply of the objects objs (dicts) as one List."""
    kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))


def events(kubeconfig, name=None, kind=None, reason=None):
    """The Events (kubectl get events) about the object name, of that kind,
    with that reason; None matches any."""
    items = json.loads(kubectl(kubeconfig, "get", "events", "-o", "json"))["items"]
    return [e for e in items if (name is None or e.get("involvedObject", {}).get("name") == name)
            and (kind is None or e.get("involvedObject", {}).get("kind") == kind)
            and (reason is None or e.get("reason") == reason)]


def get(port, path):
    """GET path from the API server on 127.0.0.1:port: the reply as JSON;
    AssertionError unless the status is 200."""
    st, body = api(port, "GET", path)
    assert st == 200, (path, st, body)
    return body


def kubectl_minor(binary="kubectl"):
    """The client minor version of a kubectl (32 for 1.32; 0 when it cannot
    say). CI's fresh root has only Debian's 1.20 on PATH: a check of what
    kubectl 1.32 itself does runs in .ci/run's second pass, on the
    development machine, where PATH's kubectl is 1.32."""
    try:
        p = subprocess.run([binary, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=30)
        return int("".join(ch for ch in json.loads(p.stdout)["clientVersion"]["minor"] if ch.isdigit()) or 0)
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return 0


def without_tests(namespace, names, why):
    """Removes the named test functions from a test module's namespace,
    saying so on stderr with why (never counted as passed)."""
    for n in names:
        namespace.pop(n)
    print(f"not run here ({why}): {', '.join(names)}", file=sys.stderr)


def kubectl_has_flag(verb, flag):
    """Whether the kubectl on PATH takes FLAG for VERB: Debian's kubectl 1.20
    lacks some that 1.32 has (patch --subresource), and a test then checks the
    same behaviour through the API instead."""
    key = (verb, flag)
    if key not in _flag_cache:
        p = subprocess.run(["kubectl", verb, "--help"], capture_output=True, text=True, timeout=30)
        _flag_cache[key] = flag in p.stdout
    return _flag_cache[key]


_flag_cache = {}


def stop_clean(proc, log, *before):
    """A suite's end: proc (pelotond, logging to log) still runs; the
    processes in before are stopped first; then proc stops with exit 0 (under
    ASan: no leak). The log's tail is in the assertion that fails."""
    assert proc.poll() is None, open(log).read()[-3000:]
    for p in before:
        stop(p)
    assert stop(proc) == 0, open(log).read()[-3000:]


def stop(p, timeout=10):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    return p.returncode


def stop_all():
    for p in reversed(_procs):
        stop(p)
    _procs.clear()
    for d in _dirs:
        shutil.rmtree(d, ignore_errors=True)
    _dirs.clear()


atexit.register(stop_all)
