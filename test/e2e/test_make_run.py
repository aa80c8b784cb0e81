"""End-to-end: `make run` as a user types it, on a terminal (a pseudo-terminal
here): it comes up with its fleet, says how durable its redis is, keeps the
store to its owner (Redis on a 0700 Unix socket only, 0600 files in a 0700
directory), kubectl sees the nodes, and Ctrl-C stops everything and exits 0 (make included:
before, make reported `Error 130`). Also TERM to the script without a
terminal exits 0; MESOS_AGENTS adds Mesos agents; REDIS_REPLICAS=2 runs a
Sentinel-managed Redis that survives kill -9 of its primary."""
import json
import os
import pty
import re
import select
import signal
import subprocess
import time

import services
from redis_ha import redis_cmd
from simlib import run_tests

ROOT = services.ROOT


def read_until(fd, text, timeout, buf=b""):
    end = time.monotonic() + timeout
    while text.encode() not in buf and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                d = os.read(fd, 65536)
            except OSError:
                break
            if not d:
                break
            buf += d
    return buf


def leftovers(state_dir):
    """Processes whose command line names the state directory (read from
    /proc: a new machine need not have procps' pgrep)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state_dir in cmd:
            found.append(f"{pid} {cmd}")
    return found


def banner_facts(out):
    m = re.search(r"export KUBECONFIG=(\S+)/kubeconfig", out)
    assert m, out
    return m.group(1)


def test_make_run_on_a_terminal_and_ctrl_c():
    env = dict(os.environ, NODES="2")
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(ROOT)
        # as on a user's terminal: a test run in the background (test/run.sh
        # runs suites side by side) inherits SIGINT ignored, which exec keeps
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execvpe("bash", ["bash", "-c", 'make -s run; echo "MAKE_RC=$?"'], env)
    try:
        out = read_until(fd, "Ctrl-C stops", 180).decode(errors="replace")
        assert "Ctrl-C stops" in out, out[-3000:]
        assert "AOF fsync always" in out.replace("\r\n", " ").replace("\n", " "), out[-2000:]
        state = banner_facts(out)
        kc = os.path.join(state, "kubeconfig")
        nodes = subprocess.run(["kubectl", f"--kubeconfig={kc}", "get", "nodes", "--no-headers"],
                               capture_output=True, text=True, timeout=60)
        assert nodes.returncode == 0 and len(nodes.stdout.splitlines()) == 2 and " Ready" in nodes.stdout, nodes
        assert leftovers(state), "nothing runs from the state directory?"
        # the store is for its owner alone: no TCP port, a 0700 directory, 0600 files
        sock = os.path.join(state, "redis.sock")
        port = subprocess.run(["redis-cli", "-s", sock, "config", "get", "port"], capture_output=True, text=True)
        assert port.stdout.split() == ["port", "0"], port
        assert os.stat(state).st_mode & 0o777 == 0o700
        files = [os.path.join(d, f) for d, _, fs in os.walk(state) for f in fs if "appendonly" in d + f]
        assert files and all(os.stat(f).st_mode & 0o077 == 0 for f in files), \
            [(f, oct(os.stat(f).st_mode)) for f in files]
        os.write(fd, b"\x03")
        out += read_until(fd, "MAKE_RC=", 60).decode(errors="replace")
        m = re.search(r"MAKE_RC=(\d+)", out)
        assert m and m.group(1) == "0", out[-2000:]
        assert "Error" not in out.split("Ctrl-C stops", 1)[1], out[-2000:]
        assert not os.path.exists(state) and not leftovers(state), leftovers(state)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)


def test_term_to_the_script_exits_0():
    env = dict(os.environ, NODES="1", REDIS_FSYNC="everysec")
    p = subprocess.Popen(["scripts/run.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    out = b""
    end = time.monotonic() + 120
    while b"Ctrl-C stops" not in out and time.monotonic() < end and p.poll() is None:
        r, _, _ = select.select([p.stdout], [], [], 0.2)
        if r:
            out += os.read(p.stdout.fileno(), 65536)
    text = out.decode(errors="replace")
    assert "Ctrl-C stops" in text and "AOF fsync everysec" in text.replace("\n", " "), text[-2000:]
    state = banner_facts(text)
    p.send_signal(signal.SIGTERM)
    rest, _ = p.communicate(timeout=60)
    assert p.returncode == 0, (p.returncode, rest)
    assert not os.path.exists(state) and not leftovers(state)


def test_mesos_agents():
    """MESOS_AGENTS=2: mesos-master-sim starts too and its agents are Nodes beside the Kubelets'."""
    env = dict(os.environ, NODES="1", MESOS_AGENTS="2", REDIS_FSYNC="everysec")
    p = subprocess.Popen(["scripts/run.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    out = b""
    end = time.monotonic() + 120
    while b"Ctrl-C stops" not in out and time.monotonic() < end and p.poll() is None:
        r, _, _ = select.select([p.stdout], [], [], 0.2)
        if r:
            out += os.read(p.stdout.fileno(), 65536)
    text = out.decode(errors="replace")
    try:
        assert "Ctrl-C stops" in text and "2 Mesos agents" in text, text[-2000:]
        kc = os.path.join(banner_facts(text), "kubeconfig")
        nodes = subprocess.run(["kubectl", f"--kubeconfig={kc}", "get", "nodes", "--no-headers",
                                "-l", "peloton.io/backend=mesos"], capture_output=True, text=True, timeout=60)
        assert nodes.returncode == 0 and len(nodes.stdout.splitlines()) == 2 and " Ready" in nodes.stdout, nodes
    finally:
        p.send_signal(signal.SIGTERM)
        rest, _ = p.communicate(timeout=60)
    assert p.returncode == 0, (p.returncode, rest)


def test_redis_replicas_with_sentinels():
    """REDIS_REPLICAS=2: a primary, two replicas and three Sentinels on
    loopback, pelotond given the Sentinels; kill -9 of the primary: a replica
    is promoted, pelotond follows it: a pod created through the new primary
    runs once the controllers' next terms have begun; TERM stops
    everything (Sentinels and servers included) and exits 0."""
    # the roles' leases 3 s, not 10: a term that ended with the primary begins again once its own lease key, on
    # the new primary, has run out (the pod 'after' waited for that)
    env = dict(os.environ, NODES="2", REDIS_REPLICAS="2", REDIS_FSYNC="everysec", SENTINEL_DOWN_MS="1000",
               PELOTOND_ARGS=" ".join(filter(None, [os.environ.get("PELOTOND_ARGS"), "--lease-ms=3000"])))
    p = subprocess.Popen(["scripts/run.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    out = b""
    end = time.monotonic() + 120
    while b"Ctrl-C stops" not in out and time.monotonic() < end and p.poll() is None:
        r, _, _ = select.select([p.stdout], [], [], 0.2)
        if r:
            out += os.read(p.stdout.fileno(), 65536)
    text = out.decode(errors="replace")
    state = None
    redis_pids = []  # the Sentinels', the replicas' and the primary's
    try:
        flat = " ".join(text.split())
        assert "Ctrl-C stops" in text and "with 2 replicas and 3 Sentinels at" in flat, text[-2000:]
        state = banner_facts(text)
        sentinels = re.search(r"3 Sentinels at (\S+) \(master name (\w+);", flat)
        assert sentinels, flat
        s1 = int(sentinels.group(1).split(",")[0].rsplit(":", 1)[1])
        name = sentinels.group(2)
        kc = os.path.join(state, "kubeconfig")

        def kubectl(*args, stdin=None):
            return subprocess.run(["kubectl", f"--kubeconfig={kc}", *args], input=stdin, capture_output=True,
                                  text=True, timeout=60)

        def primary_port():
            return int(redis_cmd(s1, "SENTINEL", "get-master-addr-by-name", name).split()[1])

        def running(pod):
            r = kubectl("get", "pod", pod, "-o", "jsonpath={.status.phase}")
            return r.returncode == 0 and r.stdout == "Running"

        def pod(pname):
            return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pname},
                               "spec": {"containers": [{"name": "c", "image": "x"}]}})
        assert kubectl("apply", "-f", "-", stdin=pod("before")).returncode == 0
        services.wait_until(lambda: running("before"), 30, "pod before Running")
        old = primary_port()
        assert "connected_slaves:2" in redis_cmd(old, "INFO", "replication")
        for port in [int(a.rsplit(":", 1)[1]) for a in sentinels.group(1).split(",")] + \
                [int(x) for x in re.findall(r"port=(\d+)", redis_cmd(old, "INFO", "replication"))] + [old]:
            redis_pids.append(int(re.search(r"process_id:(\d+)", redis_cmd(port, "INFO", "server")).group(1)))
        os.kill(redis_pids[-1], signal.SIGKILL)  # the primary
        services.wait_until(lambda: primary_port() != old, 30, "the Sentinels to promote a replica", every=0.2)
        # writes go through once pelotond has found the new primary (a 5xx before is retried)
        services.wait_until(lambda: kubectl("apply", "-f", "-", stdin=pod("after")).returncode == 0, 30,
                            "a pod created through the new primary", every=0.5)
        # the controllers' terms ended with the store's outage and begin
        # again once pelotond reaches the new primary: the pod runs then
        services.wait_until(lambda: running("after"), 60, "pod after Running")
        assert running("before")
    except AssertionError:  # what pelotond said, before run.sh removes its folder
        for name in ("pelotond.log", "kubelet-sim.log"):
            path = os.path.join(state or "/nonexistent", name)
            if os.path.exists(path):
                print(f"--- the last of {name}:\n" + open(path, errors="replace").read()[-6000:])
        if "kubectl" in locals():
            print(locals()["kubectl"]("get", "pods", "-o", "wide").stdout)
            print(locals()["kubectl"]("describe", "pod", "after").stdout[-3000:])
        raise
    finally:
        p.send_signal(signal.SIGTERM)
        rest, _ = p.communicate(timeout=60)
    assert p.returncode == 0, (p.returncode, rest)
    assert state and not os.path.exists(state) and not leftovers(state), leftovers(state or "?")
    assert len(redis_pids) == 6 and not [pid for pid in redis_pids if os.path.exists(f"/proc/{pid}")], redis_pids


run_tests("make-run", dict(globals()))
