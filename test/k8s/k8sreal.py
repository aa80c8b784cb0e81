"""A real Kubernetes 1.20 control plane for the e2e tests in test/k8s/:
etcd, kube-apiserver and kube-scheduler as scripts/k8s-real.sh starts them
(built from Debian's kubernetes source package by `scripts/k8s-real.sh
build`), peloton-extender as docs/extender.md runs it, kubelet-sim for the
nodes. Loopback only; every wait is bounded; everything started here is
stopped by stop_all() (registered with atexit), children first.
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "k8s-real.sh")
EXTENDER = os.environ.get("PELOTON_EXTENDER", os.path.join(ROOT, "bin", "peloton-extender"))
KUBELET_SIM = os.environ.get("KUBELET_SIM", os.path.join(ROOT, "bin", "kubelet-sim"))
CRDS = os.path.join(ROOT, "build", "crds-pre1.25")
KEEP = os.environ.get("K8S_REAL_KEEP") == "1"  # keep the state folder (logs) after the run

_procs = []  # (name, Popen), started in order, stopped in reverse


def bindir():
    return subprocess.run([SCRIPT, "bindir"], capture_output=True, text=True, check=True).stdout.strip()


def wait_until(check, timeout, what, every=0.1):
    """Polls check() until it returns something true (returned) or timeout
    seconds pass (AssertionError naming what and the last value)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def _start(name, argv, log, env=None):
    p = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env=env)
    _procs.append((name, p))
    return p


def stop(p, timeout=20):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    return p.returncode


def stop_proc(p):
    for i, (_, q) in enumerate(_procs):
        if q is p:
            del _procs[i]
            break
    return stop(p)


def stop_all():
    while _procs:
        _, p = _procs.pop()
        stop(p)


atexit.register(stop_all)


def _tail(path, n=30):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


class Cluster:
    """etcd + kube-apiserver (scripts/k8s-real.sh up DIR). Attributes: dir,
    kubeconfig (system:masters), env (DIR/env), bin (the Kubernetes binaries)."""

    def __init__(self):
        self.bin = bindir()
        for b in ("kube-apiserver", "kube-scheduler", "kube-scheduler-preempt", "kubectl"):
            if not os.access(os.path.join(self.bin, b), os.X_OK):
                raise SystemExit(f"k8s tests: {self.bin}/{b} missing: run `scripts/k8s-real.sh build` "
                                 "(or set K8S_BIN_DIR)")
        self.dir = tempfile.mkdtemp(prefix="peloton-k8s-")
        if not KEEP:
            atexit.register(shutil.rmtree, self.dir, True)
        else:
            print(f"k8s tests: state and logs kept in {self.dir}", file=sys.stderr)
        self.up = _start("k8s-real up", [SCRIPT, "up", self.dir], os.path.join(self.dir, "up.log"))
        wait_until(lambda: os.path.exists(os.path.join(self.dir, "ready")) or self.up.poll() is not None, 150,
                   "kube-apiserver (scripts/k8s-real.sh up)", every=0.2)
        assert self.up.poll() is None, "k8s-real up failed:\n" + _tail(os.path.join(self.dir, "up.log"))
        self.env = dict(line.split("=", 1) for line in open(os.path.join(self.dir, "env")).read().split("\n") if line)
        self.kubeconfig = os.path.join(self.dir, "admin.kubeconfig")
        self.scheduler = None
        self.scheduler_port = None

    def path(self, name):
        return os.path.join(self.dir, name)

    def kubectl(self, *args, check=True, input=None, kubeconfig=None, timeout=60):
        """kubectl 1.20 (the one built with the API server); returns the CompletedProcess."""
        p = subprocess.run([os.path.join(self.bin, "kubectl"), f"--kubeconfig={kubeconfig or self.kubeconfig}",
                            f"--cache-dir={self.path('kubectl-cache')}", *args], capture_output=True, text=True, input=input, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
        return p

    def forget_discovery(self):
        """Drops kubectl's discovery cache: kubectl 1.20 keeps it 10 minutes
        and does not look again when a resource type is missing from it, so
        the types of CRDs applied after its first call stay unknown to it
        (`the server doesn't have a resource type "rp"`)."""
        shutil.rmtree(self.path("kubectl-cache"), ignore_errors=True)

    def start_scheduler(self, extender_url=None, kind="preempt"):
        """kube-scheduler (scripts/k8s-real.sh scheduler): with the extender
        at extender_url (None: alone); kind 'preempt' (kubernetes#103030, calls
        the preempt verb) or 'plain' (1.20.2 as released). Waits for /healthz."""
        if self.scheduler is not None:
            self.stop_scheduler()
        port_file = self.path("scheduler.port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        argv = [SCRIPT, "scheduler", self.dir] + ([extender_url, kind] if extender_url else [])
        log = self.path(f"kube-scheduler-{kind if extender_url else 'alone'}.log")
        self.scheduler = _start("kube-scheduler", argv, log)
        wait_until(lambda: os.path.exists(port_file) and open(port_file).read().strip(), 10, "scheduler.port")
        self.scheduler_port = int(open(port_file).read())

        def healthy():
            if self.scheduler.poll() is not None:
                raise AssertionError("kube-scheduler exited:\n" + _tail(log))
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{self.scheduler_port}/healthz",
                                              timeout=2).status == 200
            except OSError:
                return False
        wait_until(healthy, 60, "kube-scheduler /healthz")
        self.scheduler_log = log

    def stop_scheduler(self):
        if self.scheduler is not None:
            stop_proc(self.scheduler)
            self.scheduler = None

    def scheduler_metrics(self):
        return urllib.request.urlopen(f"http://127.0.0.1:{self.scheduler_port}/metrics", timeout=5).read().decode()


def start_extender(cluster, *extra):
    """peloton-extender as docs/extender.md runs it next to kube-scheduler,
    with the identity of the ServiceAccount peloton-system/peloton-extender
    (so only the ClusterRole of manifests/extender-rbac.yaml). Returns
    (process, port, log) once /healthz answers 200."""
    port_file = cluster.path("extender.port")
    log = cluster.path("extender.log")
    p = _start("peloton-extender", [EXTENDER, f"--kubeconfig={cluster.path('extender.kubeconfig')}", "--port=0",
                                    f"--port-file={port_file}", "--prefix=/peloton", *extra], log)
    wait_until(lambda: (os.path.exists(port_file) and open(port_file).read().strip()) or p.poll() is not None, 20,
               "extender port")
    assert p.poll() is None, "peloton-extender exited:\n" + _tail(log)
    port = int(open(port_file).read())

    def ready():
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200
        except OSError:
            return False
    wait_until(ready, 30, "peloton-extender /healthz 200 (caches synced)")
    return p, port, log


def start_kubelet_sim(cluster, nodes, cpu, memory="32Gi", prefix="node-"):
    """kubelet-sim registering `nodes` nodes of `cpu` cores; returns the process once registered."""
    out = cluster.path("kubelet-sim.out")
    p = subprocess.Popen([KUBELET_SIM, f"--kubeconfig={cluster.kubeconfig}", f"--nodes={nodes}", f"--cpu={cpu}",
                          f"--memory={memory}", f"--name-prefix={prefix}", "--quiet"],
                         stdout=open(out, "w"), stderr=open(cluster.path("kubelet-sim.err"), "w"))
    _procs.append(("kubelet-sim", p))
    wait_until(lambda: f"kubelet-sim: {nodes} nodes registered" in open(out).read() or p.poll() is not None, 60,
               "kubelet-sim to register its nodes")
    assert p.poll() is None, _tail(cluster.path("kubelet-sim.err"))
    return p


# ---- Prometheus text: the samples, for asserting on values ----

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def prom_samples(text):
    """[(name, {label: value}, float)] of every sample line."""
    out = []
    for line in text.split("\n"):
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        out.append((m.group(1), dict(_LABEL.findall(m.group(3) or "")), float(m.group(4))))
    return out


def prom_value(samples, name, **labels):
    """The sum of the samples of that name whose labels include `labels` (0 when none)."""
    return sum(v for n, lb, v in samples if n == name and all(lb.get(k) == x for k, x in labels.items()))


def pretty(obj):
    return json.dumps(obj, indent=1, sort_keys=True)
