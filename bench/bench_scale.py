#!/usr/bin/python3
"""Benchmark: scale without cascades (issue 25). Takes minutes; not part of
`make test` nor of `make bench`'s loop (bench/*.py skips it); run it with
`make bench-scale`. docs/benchmarks.md, "Scale (bench_scale)", says what each
phase does and how to read the output.

Starts redis-server (AOF everysec), bin/pelotond (every role) and
bin/kubelet-sim on loopback with free ports, then runs these phases:

  register  kubelet-sim registers NODES nodes
  bursts    BURSTS Jobs of PODS/BURSTS instances each, one after the other;
            create -> Running per burst (the Job's status.taskStats.RUNNING)
  backlog   a Job of BACKLOG instances in a pool whose cpu limit is 0 (the
            backlog waits for admission), then the limit lifted: drain rate;
            a full list of pods and a watch without resourceVersion are sent
            while it drains
  pause     SIGSTOP of pelotond (and of kubelet-sim with PAUSE_KSIM=1) for
            PAUSE_SECONDS, then SIGCONT, then one lease period watched
  restart   kill -9 of pelotond at the largest state and a restart on the
            same port and Redis: time to /healthz, time to the first new
            placement (a one-instance Job created at once), time until every
            Job is counted Running again, then one lease period watched

Throughout: /healthz polled at ~20 Hz (p50/p99/max and failures per phase),
the RSS of every process sampled from /proc once a second, pelotond's log
read for the host manager's verdicts ("pod lost", "node down", evictions
paused, judgements held), kubelet-sim's counters (--verbose, every 2 s: its
lease renewals) and the Leases' ages read from the server every
LEASE_SAMPLE_SECONDS.

The pass condition: zero pods deleted as lost while every node's lease was
fresh. No node is ever taken down here: kubelet-sim renews every lease
throughout unless PAUSE_KSIM=1 stopped it, so a pod lost at a time when
kubelet-sim was not stopped (within one lease period) is a pod lost with a
fresh lease. Prints PASS or FAIL, one table of figures, and writes them as
JSON to build/bench-scale.json (BENCH_SCALE_JSON overrides).

Parameters (environment): NODES (50000), PODS (1000000), BURSTS (5),
BACKLOG (200000), PAUSE_SECONDS (30), PAUSE_KSIM (0), LEASE_SECONDS (40),
RENEW_SECONDS (10), LEASE_SAMPLE_SECONDS (10), PHASE_TIMEOUT (1800 s per
phase), SMALL=1 (2,000 nodes, 20,000 pods, 4 bursts, 5,000 backlog,
10 s pause), KEEP=1 (keep the temporary directory and its logs).
"""
import ctypes
import email.utils
import http.client
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PELOTOND = os.environ.get("PELOTOND", os.path.join(ROOT, "bin", "pelotond"))
KUBELET_SIM = os.environ.get("KUBELET_SIM", os.path.join(ROOT, "bin", "kubelet-sim"))
SMALL = os.environ.get("SMALL") == "1"


def env_int(name, default, small):
    v = os.environ.get(name)
    return int(v) if v else (small if SMALL else default)


NODES = env_int("NODES", 50000, 2000)
PODS = env_int("PODS", 1000000, 20000)
BURSTS = max(1, env_int("BURSTS", 5, 4))
BACKLOG = env_int("BACKLOG", 200000, 5000)
PAUSE_SECONDS = env_int("PAUSE_SECONDS", 30, 10)
PAUSE_KSIM = os.environ.get("PAUSE_KSIM") == "1"
LEASE_SECONDS = env_int("LEASE_SECONDS", 40, 40)
RENEW_SECONDS = env_int("RENEW_SECONDS", 10, 10)
LEASE_SAMPLE = env_int("LEASE_SAMPLE_SECONDS", 10, 10)
PHASE_TIMEOUT = env_int("PHASE_TIMEOUT", 1800, 300)
MAX_RSS_GIB = float(os.environ.get("MAX_RSS_GIB") or 0)  # > 0: stop the run when the processes' RSS passes it
OUT_JSON = os.environ.get("BENCH_SCALE_JSON", os.path.join(ROOT, "build", "bench-scale.json"))
POOL, BACKLOG_POOL = "scale", "scale-backlog"
JOBS = "/apis/peloton.io/v1alpha1/namespaces/default/jobs"
POOLS = "/apis/peloton.io/v1alpha1/resourcepools"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
# pods per node the fleet must hold: the bursts and the backlog at once, with room
PODS_PER_NODE = max(110, 2 * (PODS + BACKLOG) // max(NODES, 1) + 10)

T0 = time.monotonic()


def now():
    return time.monotonic() - T0


def log(msg):
    print(f"[{now():8.1f}s] {msg}", flush=True)


# ---- processes: every one started here is stopped at the end ----

_procs = []
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a harness killed -9 leaves nothing behind


def spawn(argv, logpath):
    p = subprocess.Popen(argv, stdout=open(logpath, "ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         preexec_fn=_die_with_parent)
    _procs.append(p)
    return p


def stop(p, timeout=10):
    if p.poll() is not None:
        return
    try:
        p.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        p.terminate()
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(5)


def stop_all():
    for p in reversed(_procs):
        stop(p)
    _procs.clear()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, timeout, what, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = check()
            if v:
                return v
        except (OSError, http.client.HTTPException, ValueError):
            pass
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


# ---- HTTP ----

class Api:
    """One keep-alive connection per thread to pelotond."""

    def __init__(self, port):
        self.port = port
        self.local = threading.local()

    def conn(self, timeout):
        c = getattr(self.local, "c", None)
        if c is None:
            c = self.local.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.timeout = timeout
        if c.sock:
            c.sock.settimeout(timeout)
        return c

    def call(self, method, path, body=None, timeout=30, ctype="application/json"):
        """(status, bytes); the connection is dropped on any error."""
        c = self.conn(timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": ctype} if data else {})
            r = c.getresponse()
            return r.status, r.read()
        except (OSError, http.client.HTTPException):
            c.close()
            self.local.c = None
            raise

    def get_json(self, path, timeout=30):
        st, b = self.call("GET", path, timeout=timeout)
        if st != 200:
            raise ValueError(f"GET {path}: {st} {b[:200]!r}")
        return json.loads(b)


# ---- the system under test ----

class Stack:
    def __init__(self, d):
        self.d = d
        self.redis_port, self.port, self.native_port = free_port(), free_port(), free_port()
        self.redis = self.pd = self.ksim = None
        self.pd_log = os.path.join(d, "pelotond.log")
        self.ksim_log = os.path.join(d, "kubelet-sim.log")
        self.api = Api(self.port)
        self.pd_starts = 0

    def start_redis(self):
        self.redis = spawn(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "yes", "--appendfsync", "everysec", "--dir", self.d,
                            "--daemonize", "no"], os.path.join(self.d, "redis.log"))

        def ping():
            with socket.create_connection(("127.0.0.1", self.redis_port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        wait_until(ping, 20, "redis-server")

    def start_pelotond(self):
        """Starts (or restarts) pelotond on its port; returns once the port is bound."""
        self.pd_starts += 1
        with open(self.pd_log, "a") as f:
            f.write(f"bench_scale: pelotond start {self.pd_starts} at {now():.1f}s\n")
        self.pd = spawn([PELOTOND, f"--port={self.port}", f"--redis=127.0.0.1:{self.redis_port}",
                         f"--crds={os.path.join(ROOT, 'crds')}", "--insecure-allow-anonymous",
                         "--max-requests-per-user=none", "--max-watches-per-user=none",
                         f"--native-port={self.native_port}"], self.pd_log)

    def healthz_ok(self, timeout=1.0):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                s.settimeout(timeout)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return s.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    def start_ksim(self):
        self.ksim = spawn([KUBELET_SIM, f"--server=http://127.0.0.1:{self.port}", f"--nodes={NODES}", "--cpu=256",
                           "--memory=1024Gi", f"--pods={PODS_PER_NODE}", "--zones=3", "--events=false", "--quiet",
                           "--verbose", f"--lease-seconds={LEASE_SECONDS}", f"--renew-seconds={RENEW_SECONDS}",
                           "--max-inflight=512"], self.ksim_log)

    def pids(self):
        return {"redis": self.redis, "pelotond": self.pd, "kubelet-sim": self.ksim}


# ---- observers (threads) ----

class Phases:
    """The current phase, and what was recorded in each."""

    def __init__(self):
        self.name = "start"
        self.order = ["start"]
        self.lock = threading.Lock()
        self.health = {"start": []}  # (latency_s or None for a failure)
        self.stall = {}  # phase -> longest time between two /healthz 200s (s), the answer's own time included
        self.rss = {"start": {}}  # process -> max RSS MiB
        self.started = {"start": now()}
        self.ended = {}

    def enter(self, name):
        with self.lock:
            self.ended[self.name] = now()
            self.name = name
            self.order.append(name)
            self.health[name] = []
            self.rss[name] = {}
            self.started[name] = now()
        log(f"phase {name}")

    def finish(self):
        with self.lock:
            self.ended[self.name] = now()


class Observer:
    def __init__(self, stack, phases):
        self.s, self.ph = stack, phases
        self.stop = threading.Event()
        self.lost = []  # (t, pod, node, phase, ksim_stopped_recently)
        self.node_down = []  # (t, node, renewTime, seen, phase)
        self.notes = []  # (t, phase, line) evictions paused/resumed, judgements held, check late, slow read
        self.ksim_stats = []  # (t, leases, errors, retries, running)
        self.lease_samples = []  # (t, phase, count, max_age, lapsed)
        self.rss_peak = {}
        self.ksim_stopped = []  # [t_from, t_to] intervals when the harness stopped kubelet-sim
        self.pd_down = []  # [t_from, t_to] intervals when pelotond was stopped or dead
        self.last_ok = None  # when /healthz last answered 200
        self.health_errors = {}  # why a poll failed -> how many
        self.over_rss = None  # why the run was stopped for memory
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self.healthz, self.rss, self.logs, self.leases)]

    def start(self):
        for t in self.threads:
            t.start()

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(15)

    def healthz(self):
        """~20 Hz over one keep-alive connection; a failure or a timeout (2 s) counts as None.
        A reused connection the server closed before answering is retried once on a new
        one, as HTTP clients do (that is not the server failing)."""
        sock = None
        while not self.stop.is_set():
            t = time.monotonic()
            lat = None
            for attempt in (0, 1):
                reused = sock is not None
                try:
                    if sock is None:
                        sock = socket.create_connection(("127.0.0.1", self.s.port), timeout=2)
                    ans = self.poll_once(sock, t + 2)
                    if ans.startswith(b"HTTP/1.1 200"):
                        lat = time.monotonic() - t
                    else:
                        self.health_error(ans[:12].decode(errors="replace"))
                    break
                except OSError as e:
                    sock.close() if sock else None
                    sock = None
                    if reused and attempt == 0 and isinstance(e, (ConnectionResetError, EOFError, BrokenPipeError)):
                        continue
                    self.health_error("timeout (2 s)" if isinstance(e, socket.timeout) else type(e).__name__)
                    break
            with self.ph.lock:
                self.ph.health[self.ph.name].append(lat)
                if lat is not None:
                    tn = now()
                    gap = tn - self.last_ok if self.last_ok is not None else 0.0
                    self.ph.stall[self.ph.name] = max(self.ph.stall.get(self.ph.name, 0.0), gap)
                    self.last_ok = tn
            time.sleep(max(0.0, 0.05 - (time.monotonic() - t)))

    def health_error(self, kind):
        self.health_errors[kind] = self.health_errors.get(kind, 0) + 1

    @staticmethod
    def poll_once(sock, deadline):
        """One GET /healthz on sock: the answer's bytes (head and body "ok")."""
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf or not buf.endswith(b"ok"):
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(256)
            if not chunk:
                if not buf:
                    raise ConnectionResetError("closed before answering")
                raise OSError("closed mid-answer")
            buf += chunk
            if len(buf) > 4096:
                raise OSError("long answer")
        return buf

    def rss(self):
        while not self.stop.is_set():
            procs = dict(self.s.pids())
            for name, p in procs.items():
                if p is None or p.poll() is not None:
                    continue
                mib = rss_mib(p.pid)
                with self.ph.lock:
                    r = self.ph.rss[self.ph.name]
                    r[name] = max(r.get(name, 0), mib)
                self.rss_peak[name] = max(self.rss_peak.get(name, 0), mib)
            mib = rss_mib(os.getpid())
            self.rss_peak["bench"] = max(self.rss_peak.get("bench", 0), mib)
            total = mib + sum(rss_mib(p.pid) for p in procs.values() if p is not None and p.poll() is None)
            if MAX_RSS_GIB > 0 and total > MAX_RSS_GIB * 1024 and not self.over_rss:
                self.over_rss = f"RSS {total / 1024:.1f} GiB > MAX_RSS_GIB={MAX_RSS_GIB:g} in phase {self.ph.name}"
                log(f"stopping: {self.over_rss}")
                os.kill(os.getpid(), signal.SIGTERM)
            self.stop.wait(1.0)

    def ksim_stopped_within(self, t, span):
        return any(a - span <= t and (b is None or t <= b + span) for a, b in self.ksim_stopped)

    LOST = re.compile(r'hostmgr: pod lost" pod=(\S+) node=(\S+)')
    DOWN = re.compile(r'hostmgr: node down" node=(\S+) reason=\S+ renewTime=(\S+) pods=\d+ seen=(\S+)')
    NOTE = re.compile(r'hostmgr: (evictions|informers|check late|lease read slow)|lost the lease|msg="[a-z]+: leader"'
                      r'|redis: no reply|level=error')
    KSTAT = re.compile(r'running=(\d+).* errors=(\d+) retries=(\d+) leases=(\d+)')

    def logs(self):
        """Tails pelotond's and kubelet-sim's logs (the files outlive restarts)."""
        pos = {self.s.pd_log: 0, self.s.ksim_log: 0}
        rest = {k: b"" for k in pos}
        while True:
            stopping = self.stop.is_set()
            for path in pos:
                try:
                    with open(path, "rb") as f:
                        f.seek(pos[path])
                        data = f.read()
                except OSError:
                    continue
                pos[path] += len(data)
                lines = (rest[path] + data).split(b"\n")
                rest[path] = lines.pop()
                for raw in lines:
                    self.line(path == self.s.pd_log, raw.decode(errors="replace"))
            if stopping:
                return
            self.stop.wait(0.2)

    def line(self, from_pd, ln):
        t, phase = now(), self.ph.name
        if from_pd:
            m = self.LOST.search(ln)
            if m:
                self.lost.append((t, m.group(1), m.group(2), phase, self.ksim_stopped_within(t, LEASE_SECONDS)))
                return
            m = self.DOWN.search(ln)
            if m:
                self.node_down.append((t, m.group(1), m.group(2), m.group(3), phase))
                return
            if self.NOTE.search(ln) and len(self.notes) < 1000:
                self.notes.append((round(t, 1), phase, ln.strip()[:300]))
        else:
            m = self.KSTAT.search(ln)
            if m:
                self.ksim_stats.append((t, int(m.group(4)), int(m.group(2)), int(m.group(3)), int(m.group(1))))

    def leases(self):
        api = Api(self.s.port)
        while not self.stop.wait(LEASE_SAMPLE):
            self.lease_sample(api)

    def lease_sample(self, api, tag=None):
        """The Leases' ages as the server holds them (renewTime against now), read in pages:
        (t, phase, leases, oldest age s, how many older than LEASE_SECONDS)."""
        t, phase = now(), tag or self.ph.name
        try:
            ages, dated, cont = [], [], ""
            while True:
                q = f"{LEASES}?limit=5000" + (f"&continue={cont}" if cont else "")
                c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=30)
                c.request("GET", q)
                r = c.getresponse()
                raw = r.read()
                c.close()
                if r.status != 200:
                    raise ValueError(f"GET leases: {r.status}")
                body = json.loads(raw)
                wall = time.time()
                # the server's clock when it answered (1 s steps): a page written long before
                # it reached us (the server's loop blocked) does not add that wait to the ages
                srv = email.utils.parsedate_to_datetime(r.getheader("Date")).timestamp() \
                    if r.getheader("Date") else wall
                for it in body.get("items", []):
                    rt = (it.get("spec") or {}).get("renewTime")
                    if rt:
                        ages.append(wall - parse_time(rt))
                        dated.append(srv - parse_time(rt))
                cont = (body.get("metadata") or {}).get("continue") or ""
                if not cont:
                    break
            lapsed = sum(1 for a in ages if a > LEASE_SECONDS)
            lapsed_srv = sum(1 for a in dated if a > LEASE_SECONDS + 1)
            sample = (round(t, 1), phase, len(ages), round(max(ages, default=0), 1), lapsed,
                      round(max(dated, default=0), 1), lapsed_srv, round(now() - t, 1))
        except (OSError, http.client.HTTPException, ValueError) as e:
            sample = (round(t, 1), phase, -1, str(e)[:100], -1, None, -1, round(now() - t, 1))
        self.lease_samples.append(sample)
        return sample


def parse_time(s):
    """RFC 3339 with optional fraction, UTC (Z) -> epoch seconds."""
    m = re.match(r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(\.\d+)?Z", s)
    if not m:
        raise ValueError(f"time {s!r}")
    import calendar
    base = calendar.timegm(tuple(int(m.group(i)) for i in range(1, 7)))
    return base + (float(m.group(7)) if m.group(7) else 0.0)


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


# ---- the workload ----

def pool(name, cpu_limit):
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": name},
            "spec": {"resources": [{"kind": "cpu", "reservation": "0", "limit": cpu_limit, "share": 1}]}}


def job(name, pool_name, n):
    return {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "BATCH", "resourcePool": pool_name, "instanceCount": n, "sla": {"preemptible": True},
                     "template": {"metadata": {"labels": {"bench": name}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "x", "resources": {
                                               "requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def task_stats(api, name):
    body = api.get_json(f"{JOBS}/{name}", timeout=30)
    return (body.get("status") or {}).get("taskStats") or {}


def running(api, name):
    return int(task_stats(api, name).get("RUNNING", 0))


def create(api, path, obj):
    st, b = api.call("POST", path, obj, timeout=60)
    if st not in (200, 201):
        raise RuntimeError(f"POST {path}: {st} {b[:300]!r}")


class RunningWatch:
    """Pods seen Running, per Job, from one watch of Running pods (fieldSelector
    status.phase=Running): each pod counts once, when it first shows up. The
    events are scanned as bytes for the pod's name (JOB-INSTANCE), not decoded."""
    NAME = re.compile(rb'"metadata":\{"name":"([a-z]+(?:-[0-9]+)?)-([0-9]+)"')

    def __init__(self, port):
        self.port = port
        self.seen = {}  # job -> set of instances
        self.error = None
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def count(self, job):
        with self.lock:
            return len(self.seen.get(job, ()))

    def run(self):
        tail = b""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
                s.sendall(b"GET /api/v1/namespaces/default/pods?watch=true&fieldSelector=status.phase%3DRunning "
                          b"HTTP/1.1\r\nHost: x\r\n\r\n")
                s.settimeout(1)
                while not self.stopped.is_set():
                    try:
                        chunk = s.recv(1 << 20)
                    except socket.timeout:
                        continue
                    if not chunk:
                        self.error = "the watch ended"
                        return
                    data = tail + chunk
                    cut = data.rfind(b"\n")  # whole events only; the rest waits for the next read
                    if cut < 0:
                        tail = data[-(1 << 22):]
                        continue
                    tail = data[cut + 1:]
                    found = self.NAME.findall(data, 0, cut)
                    if found:
                        with self.lock:
                            for job, inst in found:
                                self.seen.setdefault(job.decode(), set()).add(int(inst))
        except OSError as e:
            self.error = str(e)[:200]

    def close(self):
        self.stopped.set()
        self.thread.join(5)


WATCH = None  # the RunningWatch of the bursts and the backlog


def wait_running(api, name, n, t_create, fig, every=0.1):
    """Waits until n instances of the Job are Running; records first/10%/90%/all times.
    Counts from the watch of Running pods (WATCH); the Job's status.taskStats, which the job
    manager writes from time to time, is read every 5 s as a check and in case the watch broke."""
    deadline = time.monotonic() + PHASE_TIMEOUT
    last, last_t = -1, time.monotonic()
    status_n, status_t, ended = 0, 0.0, 0
    while time.monotonic() < deadline:
        r = WATCH.count(name) if WATCH else 0
        if time.monotonic() - status_t > 5 or WATCH is None or WATCH.error:
            status_t = time.monotonic()
            try:
                ts = task_stats(api, name)
                status_n, ended = int(ts.get("RUNNING", 0)), int(ts.get("FAILED", 0)) + int(ts.get("SUCCEEDED", 0))
            except (OSError, http.client.HTTPException, ValueError):
                ended = 0
            if status_n >= n and "status_all_s" not in fig:
                fig["status_all_s"] = round(now() - t_create, 2)
        r = max(r, status_n)
        t = now() - t_create
        if ended and r + ended >= n:  # some never run (e.g. rejected by the kubelet): say so and go on
            fig.update(ended_not_running=ended, running=r, all_s=None, ended_at_s=round(t, 2))
            log(f"{name}: {ended} of {n} pods ended without running (Failed/Succeeded); {r} Running")
            return True
        if r > 0 and "first_s" not in fig:
            fig["first_s"] = round(t, 2)
        if r * 10 >= n and "p10_s" not in fig:
            fig["p10_s"] = round(t, 2)
        if r * 10 >= 9 * n and "p90_s" not in fig:
            fig["p90_s"] = round(t, 2)
        if r != last:
            last, last_t = r, time.monotonic()
        if r >= n:
            fig["all_s"] = round(t, 2)
            fig["rate_pods_s"] = round(n / t, 1) if t > 0 else None
            if "p10_s" in fig and "p90_s" in fig and fig["p90_s"] > fig["p10_s"]:
                fig["rate_10_90_pods_s"] = round(0.8 * n / (fig["p90_s"] - fig["p10_s"]), 1)
            return True
        if time.monotonic() - last_t > 120:
            log(f"{name}: no progress for 120 s at {r} of {n} Running")
            last_t = time.monotonic()
        time.sleep(every)
    fig["timed_out_at_running"] = last
    return False


def full_list(port, out):
    """One unpaged list of every pod (the load a careless client puts on the server).
    Read in pieces and counted by its items' names, not decoded: at a million pods the
    answer is gigabytes."""
    t = time.monotonic()
    n, nbytes, tail = 0, 0, b""
    mark = b'"metadata":{"name":'
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("GET", "/api/v1/pods")
        r = c.getresponse()
        out["first_byte_s"] = round(time.monotonic() - t, 2)
        while True:
            chunk = r.read(1 << 20)
            if not chunk:
                break
            nbytes += len(chunk)
            data = tail + chunk
            n += data.count(mark)
            tail = data[-(len(mark) - 1):]  # a mark cut in two is counted with the next piece
        c.close()
        out.update(status=r.status, seconds=round(time.monotonic() - t, 2), bytes=nbytes, items=n)
    except (OSError, http.client.HTTPException) as e:
        out.update(error=str(e)[:200], seconds=round(time.monotonic() - t, 2), bytes=nbytes)


def watch_no_rv(port, expect, out, limit_s):
    """A watch of every pod without resourceVersion: the server sends every
    existing pod as ADDED first. Counts events until `expect` or limit_s."""
    t = time.monotonic()
    n, other, nbytes, tail = 0, 0, 0, b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /api/v1/pods?watch=true HTTP/1.1\r\nHost: x\r\n\r\n")
            s.settimeout(5)
            while time.monotonic() - t < limit_s and n < expect:
                try:
                    chunk = s.recv(1 << 20)
                except socket.timeout:
                    continue
                if not chunk:
                    out["closed_by_server"] = True
                    break
                if not nbytes:
                    out["head"] = chunk[:160].decode(errors="replace")  # what the server said, should it stop
                nbytes += len(chunk)
                data = tail + chunk  # an event's type may be cut between two reads
                n += data.count(b'{"type":"ADDED"')
                other += data.count(b'{"type":"MODIFIED"') + data.count(b'{"type":"DELETED"')
                tail = data[-24:]  # counted again with the next read: take it off now
                n -= tail.count(b'{"type":"ADDED"')
                other -= tail.count(b'{"type":"MODIFIED"') + tail.count(b'{"type":"DELETED"')
                if "first_event_s" not in out and n:
                    out["first_event_s"] = round(time.monotonic() - t, 2)
                if n >= expect and "replay_s" not in out:
                    out["replay_s"] = round(time.monotonic() - t, 2)
        out.update(added=n, modified_or_deleted=other, expected_added=expect, bytes=nbytes,
                   seconds=round(time.monotonic() - t, 2), complete=n >= expect)
    except OSError as e:
        out.update(error=str(e)[:200], added=n, seconds=round(time.monotonic() - t, 2))


# ---- the run ----

def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    for f in (PELOTOND, KUBELET_SIM):
        if not os.access(f, os.X_OK):
            sys.exit(f"bench_scale: {f} missing (make build)")
    d = tempfile.mkdtemp(prefix="bench-scale-")
    st = Stack(d)
    ph = Phases()
    obs = Observer(st, ph)
    res = {"params": {"nodes": NODES, "pods": PODS, "bursts": BURSTS, "backlog": BACKLOG,
                      "pause_seconds": PAUSE_SECONDS, "pause_ksim": PAUSE_KSIM, "lease_seconds": LEASE_SECONDS,
                      "renew_seconds": RENEW_SECONDS, "pods_per_node": PODS_PER_NODE, "small": SMALL},
           "load_start": loadavg(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "phases": {}, "bursts": [], "dir": d}
    log(f"bench_scale: {NODES} nodes, {PODS} pods in {BURSTS} bursts, backlog {BACKLOG}, "
        f"pause {PAUSE_SECONDS} s, load {loadavg()}, logs in {d}")
    ok = False
    try:
        st.start_redis()
        st.start_pelotond()
        wait_until(st.healthz_ok, 30, "pelotond /healthz")
        obs.start()
        api = st.api
        create(api, POOLS, pool(POOL, "100000000"))
        create(api, POOLS, pool(BACKLOG_POOL, "0"))

        ph.enter("register")
        t = now()
        st.start_ksim()
        wait_until(lambda: "nodes registered" in open(st.ksim_log).read() or st.ksim.poll() is not None,
                   PHASE_TIMEOUT, "kubelet-sim registration", every=0.5)
        if st.ksim.poll() is not None:
            raise RuntimeError("kubelet-sim exited: " + open(st.ksim_log).read()[-2000:])
        res["register_s"] = round(now() - t, 2)
        res["registered"] = open(st.ksim_log).read().split("nodes registered")[0].rsplit(":", 1)[-1].strip()
        time.sleep(3)  # the controllers see the nodes

        ph.enter("bursts")
        global WATCH
        WATCH = RunningWatch(st.port)
        per = PODS // BURSTS
        for i in range(BURSTS):
            n = per if i < BURSTS - 1 else PODS - per * (BURSTS - 1)
            name = f"burst-{i}"
            fig = {"job": name, "pods": n, "load": loadavg()}
            cpu0 = {k: cpu_s(p.pid) for k, p in st.pids().items()}
            t = now()
            create(api, JOBS, job(name, POOL, n))
            done = wait_running(api, name, n, t, fig)
            fig["cpu_us_per_pod"] = {k: round((cpu_s(p.pid) - cpu0[k]) * 1e6 / n, 1) for k, p in st.pids().items()}
            res["bursts"].append(fig)
            log(f"burst {i}: {fig}")
            if not done:
                raise RuntimeError(f"burst {i} did not finish")

        ph.enter("backlog")
        fig = {"pods": BACKLOG, "load": loadavg()}
        t = now()
        create(api, JOBS, job("backlog", BACKLOG_POOL, BACKLOG))

        def created():  # the job manager made its pods: they wait for admission
            s = task_stats(api, "backlog")
            return sum(int(v) for k, v in s.items() if k not in ("INITIALIZED", "UNKNOWN")) >= BACKLOG
        try:
            wait_until(created, PHASE_TIMEOUT, "backlog pods created", every=0.5)
            fig["queued_s"] = round(now() - t, 2)
        except TimeoutError:
            fig["queued_s"] = None
        fig["running_before_release"] = running(api, "backlog")
        lst, wch = {}, {}
        side = [threading.Thread(target=full_list, args=(st.port, lst)),
                threading.Thread(target=watch_no_rv, args=(st.port, PODS + BACKLOG, wch, 300))]
        t = now()
        st_code, b = api.call("PATCH", f"{POOLS}/{BACKLOG_POOL}",
                              {"spec": {"resources": [{"kind": "cpu", "reservation": "0", "limit": "100000000",
                                                       "share": 1}]}},
                              ctype="application/merge-patch+json")
        if st_code != 200:
            raise RuntimeError(f"pool release: {st_code} {b[:300]!r}")
        time.sleep(1.0)
        for th in side:  # mid-drain
            th.start()
        fig["drained"] = wait_running(api, "backlog", BACKLOG, t, fig)
        for th in side:
            th.join(PHASE_TIMEOUT)
        res["backlog"] = fig
        res["running_watch_error"] = WATCH.error
        WATCH.close()
        res["full_list"], res["watch_no_rv"] = lst, wch
        log(f"backlog: {fig}; list {lst}; watch {wch}")
        total = PODS + BACKLOG
        jobs = [f"burst-{i}" for i in range(BURSTS)] + ["backlog"]

        ph.enter("pause")
        time.sleep(2)
        who = [st.pd] + ([st.ksim] if PAUSE_KSIM else [])
        t = now()
        obs.pd_down.append([t, None])
        if PAUSE_KSIM:
            obs.ksim_stopped.append([t, None])
        for p in who:
            p.send_signal(signal.SIGSTOP)
        time.sleep(PAUSE_SECONDS)
        for p in who:
            p.send_signal(signal.SIGCONT)
        obs.pd_down[-1][1] = now()
        if PAUSE_KSIM:
            obs.ksim_stopped[-1][1] = now()
        t = now()
        wait_until(st.healthz_ok, 60, "/healthz after SIGCONT", every=0.05)
        res["pause"] = {"seconds": PAUSE_SECONDS, "ksim_too": PAUSE_KSIM, "healthz_after_cont_s": round(now() - t, 2)}
        ls = obs.lease_sample(Api(st.port), "after-SIGCONT")
        res["pause"]["lease_ages_after_cont"] = {"leases": ls[2], "oldest_s": ls[3], "lapsed": ls[4],
                                                 "oldest_by_date_s": ls[5], "lapsed_by_date": ls[6]}
        ph.enter("after-pause")
        time.sleep(LEASE_SECONDS + 5)
        res["pause"]["running_after"] = sum(running(api, j) for j in jobs)

        ph.enter("restart")
        fig = {"load": loadavg()}
        t = now()
        obs.pd_down.append([t, None])
        st.pd.kill()  # SIGKILL at the largest state
        st.pd.wait(10)
        st.start_pelotond()
        wait_until(st.healthz_ok, PHASE_TIMEOUT, "/healthz after restart", every=0.05)
        obs.pd_down[-1][1] = now()
        fig["healthz_s"] = round(now() - t, 2)
        tp = now()
        threading.Thread(target=lambda: fig.update(lease_ages_after_restart=dict(zip(
            ("leases", "oldest_s", "lapsed", "oldest_by_date_s", "lapsed_by_date"),
            obs.lease_sample(Api(st.port), "after-restart")[2:7]))),
            daemon=True).start()

        def probe_created():
            create(api, JOBS, job("probe", POOL, 1))
            return True
        wait_until(probe_created, 120, "probe Job created", every=0.5)
        fig["probe_created_s"] = round(now() - t, 2)

        def placed():  # the Job's pod is JOB-INSTANCE; a GET by name, not a list (which reads every pod)
            st_code, b = api.call("GET", "/api/v1/namespaces/default/pods/probe-0", timeout=60)
            return st_code == 200 and bool((json.loads(b).get("spec") or {}).get("nodeName"))
        try:
            wait_until(placed, PHASE_TIMEOUT, "first placement after restart", every=0.5)
            fig["first_placement_s"] = round(now() - t, 2)
            fig["first_placement_after_probe_s"] = round(now() - tp, 2)
        except TimeoutError:
            fig["first_placement_s"] = None
        try:
            wait_until(lambda: sum(running(api, j) for j in jobs) >= total, PHASE_TIMEOUT,
                       "every Job counted Running again", every=2.0)
            fig["all_running_again_s"] = round(now() - t, 2)
        except TimeoutError:
            fig["all_running_again_s"] = None
        res["restart"] = fig
        log(f"restart: {fig}")
        ph.enter("after-restart")
        time.sleep(LEASE_SECONDS + 5)
        res["final_running"] = sum(running(api, j) for j in jobs)
        res["final_expected"] = total
        ok = True
    except KeyboardInterrupt:
        res["error"] = obs.over_rss or "interrupted"
        log("interrupted")
    except Exception as e:  # noqa: BLE001 - any failure still reports what was measured
        res["error"] = f"{type(e).__name__}: {e}"
        log(f"error: {res['error']}")
    finally:
        ph.enter("teardown")  # the stops below are not the server failing
        ph.finish()
        res["load_end"] = loadavg()
        res["rss_peak_mib"] = {k: round(v, 1) for k, v in obs.rss_peak.items()}
        stop_all()
        obs.close()
    report(res, ph, obs, ok)
    if os.environ.get("KEEP") != "1":
        shutil.rmtree(d, ignore_errors=True)
    return 0 if ok and res["pass"] else 1


def report(res, ph, obs, ok):
    for name in ph.order:
        h = ph.health.get(name, [])
        lat = [x for x in h if x is not None]
        res["phases"][name] = {
            "seconds": round(ph.ended.get(name, now()) - ph.started[name], 1),
            "healthz_polls": len(h), "healthz_failed": len(h) - len(lat),
            "healthz_p50_ms": round(pct(lat, 0.5) * 1e3, 2) if lat else None,
            "healthz_p99_ms": round(pct(lat, 0.99) * 1e3, 2) if lat else None,
            "healthz_max_ms": round(max(lat) * 1e3, 2) if lat else None,
            "healthz_longest_gap_s": round(ph.stall.get(name, 0.0), 2),
            "rss_max_mib": {k: round(v, 1) for k, v in ph.rss.get(name, {}).items()}}
    fresh = [x for x in obs.lost if not x[4]]
    res["lost"] = {"total": len(obs.lost), "with_fresh_leases": len(fresh),
                   "by_phase": {p: sum(1 for x in obs.lost if x[3] == p) for p in ph.order},
                   "examples": [{"t": round(x[0], 1), "pod": x[1], "node": x[2], "phase": x[3]} for x in obs.lost[:20]]}
    res["nodes_down"] = {"total": len(obs.node_down),
                         "examples": [{"t": round(x[0], 1), "node": x[1], "renewTime": x[2], "seen": x[3],
                                       "phase": x[4]} for x in obs.node_down[:20]]}
    res["hostmgr_notes"] = obs.notes[:200]
    res["healthz_errors"] = obs.health_errors
    res["lease_samples"] = obs.lease_samples
    # kubelet-sim's own view: lease renewals per second between its 2 s reports
    ks = obs.ksim_stats
    rates = [((b[0]), (b[1] - a[1]) / (b[0] - a[0]), b[2]) for a, b in zip(ks, ks[1:]) if b[0] > a[0]]
    res["ksim_lease_renewals_per_s"] = {"expected": round(NODES / RENEW_SECONDS, 1),
                                        "min": round(min((r[1] for r in rates), default=0), 1),
                                        "median": round(pct([r[1] for r in rates], 0.5) or 0, 1),
                                        "write_errors": ks[-1][2] if ks else None}
    res["pass"] = ok and not fresh
    res["verdict"] = ("PASS" if res["pass"] else "FAIL") + (
        f": {len(fresh)} pods deleted as lost with fresh leases" if fresh else
        ": zero pods deleted as lost while every node's lease was fresh" if ok else ": the run did not complete")
    os.makedirs(os.path.dirname(OUT_JSON), exist_ok=True)
    with open(OUT_JSON, "w") as f:
        json.dump(res, f, indent=1)

    p = res["params"]
    print()
    print(f"bench_scale: {p['nodes']} nodes, {p['pods']} pods in {p['bursts']} bursts, backlog {p['backlog']}, "
          f"pause {p['pause_seconds']} s{' (kubelet-sim too)' if p['pause_ksim'] else ''}; "
          f"load {res['load_start']} -> {res['load_end']}")
    print(f"{'phase':<14} {'secs':>7} {'polls':>6} {'fail':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>9} {'gap s':>6}  "
          f"max RSS MiB (pelotond / kubelet-sim / redis)")
    for name in ph.order:
        f = res["phases"][name]
        r = f["rss_max_mib"]

        def fmt(v):
            return f"{v:8.1f}" if v is not None else "       -"
        print(f"{name:<14} {f['seconds']:7.1f} {f['healthz_polls']:6d} {f['healthz_failed']:5d} "
              f"{fmt(f['healthz_p50_ms'])} {fmt(f['healthz_p99_ms'])} {fmt(f['healthz_max_ms']):>9} "
              f"{f['healthz_longest_gap_s']:6.1f}  "
              f"{r.get('pelotond', 0):.0f} / {r.get('kubelet-sim', 0):.0f} / {r.get('redis', 0):.0f}")
    if "register_s" in res:
        print(f"register: {res.get('registered')} nodes in {res['register_s']} s")
    for b in res["bursts"]:
        cpu = b.get("cpu_us_per_pod", {})
        print(f"burst {b['job']}: {b['pods']} pods, first Running {b.get('first_s')} s, all {b.get('all_s')} s "
              f"({b.get('rate_pods_s')} pods/s; 10-90%: {b.get('rate_10_90_pods_s')} pods/s); CPU us/pod "
              f"pelotond {cpu.get('pelotond')} kubelet-sim {cpu.get('kubelet-sim')} redis {cpu.get('redis')}; "
              f"load {b['load']}")
    if "backlog" in res:
        b = res["backlog"]
        print(f"backlog: {b['pods']} pods queued in {b.get('queued_s')} s; released: first Running "
              f"{b.get('first_s')} s, all {b.get('all_s')} s ({b.get('rate_pods_s')} pods/s); load {b['load']}")
        print(f"full list during the drain: {res.get('full_list')}")
        print(f"watch without resourceVersion during the drain: {res.get('watch_no_rv')}")
    if "pause" in res:
        print(f"pause: {res['pause']}")
    if "restart" in res:
        print(f"restart (kill -9): {res['restart']}")
    if "final_running" in res:
        print(f"Running at the end: {res['final_running']} of {res['final_expected']}")
    print(f"RSS peak MiB: {res['rss_peak_mib']}")
    print(f"/healthz failures by kind: {res['healthz_errors']}")
    print(f"kubelet-sim lease renewals/s: {res['ksim_lease_renewals_per_s']}")
    ls = [s for s in res["lease_samples"] if s[2] >= 0]
    if ls:
        worst = max(ls, key=lambda s: s[3])
        print(f"server-side lease ages (when read): {len(ls)} samples; oldest {worst[3]} s at {worst[0]} s "
              f"({worst[1]}), lapsed (> {LEASE_SECONDS} s) at most {max(s[4] for s in ls)}")
        worst = max(ls, key=lambda s: s[5])
        print(f"server-side lease ages (by the answer's Date): oldest {worst[5]} s at {worst[0]} s ({worst[1]}), "
              f"lapsed at most {max(s[6] for s in ls)}; slowest lease list {max(s[7] for s in ls)} s")
    print(f"hostmgr: nodes down {res['nodes_down']['total']}, pods lost {res['lost']['total']} "
          f"(by phase {res['lost']['by_phase']}), notes {len(res['hostmgr_notes'])}")
    for n in res["hostmgr_notes"][:20]:
        print(f"  {n}")
    if "error" in res:
        print(f"error: {res['error']}")
    print(f"bench scale: {res['verdict']}")
    print(f"figures: {OUT_JSON}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sys.exit(main())
