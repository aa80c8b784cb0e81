"""A stand-in for kube-scheduler's side of the extender protocol
(k8s.io/kube-scheduler/extender/v1, pkg/scheduler/extender.go), stdlib only.

Extender is one `extenders:` entry of a KubeSchedulerConfiguration (urlPrefix,
verbs, weight, nodeCacheCapable, ignorable, managedResources) and makes the
calls exactly as the scheduler does: POST <urlPrefix>/<verb> with a JSON body,
any status but 200 is an error, Error in a filter or bind result is an error.

Scheduler runs one scheduling cycle over a chain of extenders: the nodes
shrink through every interested extender's filter (an ignorable extender's
error is skipped, another's fails the cycle), prioritize results are added as
score x weight x (MaxNodeScore / MaxExtenderPriority) with errors ignored,
the best node wins (ties to the first in node order), and the one binder
extender binds. preempt() calls the extender's preempt verb as the
scheduler's preemption does, with lower-priority pods as candidate victims.

FakeExtender is a tiny extender in a thread with scripted answers (the
"second extender in the chain" of upstream's extender tests).
"""
import http.client
import http.server
import json
import threading
import urllib.parse

MAX_NODE_SCORE = 100
MAX_EXTENDER_PRIORITY = 10


class ExtenderError(Exception):
    pass


class FitError(Exception):
    def __init__(self, failed, unresolvable):
        super().__init__(f"no node fits: failed={failed} unresolvable={unresolvable}")
        self.failed, self.unresolvable = failed, unresolvable


def post(url, body, timeout=5.0, context=None):
    """POSTs body (bytes or JSON-able) to url; returns (status, parsed JSON or text)."""
    u = urllib.parse.urlsplit(url)
    if u.scheme == "https":
        c = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=context)
    else:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
    try:
        c.request("POST", u.path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
    finally:
        c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw.decode(errors="replace")


def node_name(n):
    return n["metadata"]["name"]


class Extender:
    def __init__(self, url_prefix, filter_verb="filter", prioritize_verb="prioritize", preempt_verb="preempt",
                 bind_verb="", weight=1, node_cache_capable=True, ignorable=False, managed_resources=(),
                 timeout=5.0, context=None):
        self.prefix = url_prefix.rstrip("/")
        self.filter_verb, self.prioritize_verb = filter_verb, prioritize_verb
        self.preempt_verb, self.bind_verb = preempt_verb, bind_verb
        self.weight, self.node_cache_capable, self.ignorable = weight, node_cache_capable, ignorable
        self.managed = set(managed_resources)
        self.timeout, self.context = timeout, context

    def call(self, verb, body):
        status, reply = post(f"{self.prefix}/{verb}", body, self.timeout, self.context)
        if status != 200:
            raise ExtenderError(f"{verb}: HTTP {status}: {reply}")
        return reply

    def interested(self, pod):
        """IsInterested: no managedResources, or the pod requests one of them."""
        if not self.managed:
            return True
        for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
            res = c.get("resources", {})
            if self.managed & (set(res.get("requests", {})) | set(res.get("limits", {}))):
                return True
        return False

    def args(self, pod, nodes):
        if self.node_cache_capable:
            return {"Pod": pod, "Nodes": None, "NodeNames": [node_name(n) for n in nodes]}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}

    def filter(self, pod, nodes):
        """Returns (passing node objects, FailedNodes, FailedAndUnresolvableNodes)."""
        r = self.call(self.filter_verb, self.args(pod, nodes))
        if r.get("Error"):
            raise ExtenderError(r["Error"])
        by_name = {node_name(n): n for n in nodes}
        if self.node_cache_capable:
            names = r.get("NodeNames") or []
            for n in names:  # the scheduler refuses names it did not send
                if n not in by_name:
                    raise ExtenderError(f"filter returned node {n!r} that was not in the input")
            passing = [by_name[n] for n in names]
        else:
            passing = [by_name[node_name(n)] for n in ((r.get("Nodes") or {}).get("items") or [])]
        return passing, r.get("FailedNodes") or {}, r.get("FailedAndUnresolvableNodes") or {}

    def prioritize(self, pod, nodes):
        """{host: score x weight x 10}."""
        r = self.call(self.prioritize_verb, self.args(pod, nodes))
        out = {}
        for hp in r or []:
            out[hp["Host"]] = out.get(hp["Host"], 0) + hp["Score"] * self.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
        return out

    def bind(self, pod, node):
        r = self.call(self.bind_verb, {"PodName": pod["metadata"]["name"], "PodNamespace": pod["metadata"]["namespace"],
                                       "PodUID": pod["metadata"].get("uid", ""), "Node": node})
        if r.get("Error"):
            raise ExtenderError(r["Error"])

    def preempt(self, pod, node_to_victims):
        """node_to_victims: {node: [victim Pod objects]}; returns {node: [UIDs]} as the scheduler reads it."""
        if self.node_cache_capable:
            body = {"Pod": pod, "NodeNameToVictims": None,
                    "NodeNameToMetaVictims": {n: {"Pods": [{"UID": p["metadata"]["uid"]} for p in v],
                                                  "NumPDBViolations": 0} for n, v in node_to_victims.items()}}
        else:
            body = {"Pod": pod, "NodeNameToMetaVictims": None,
                    "NodeNameToVictims": {n: {"Pods": v, "NumPDBViolations": 0} for n, v in node_to_victims.items()}}
        r = self.call(self.preempt_verb, body)
        out = {}
        for n, mv in (r.get("NodeNameToMetaVictims") or {}).items():
            if n not in node_to_victims:
                raise ExtenderError(f"preempt returned node {n!r} that was not a candidate")
            uids = [p["UID"] for p in (mv or {}).get("Pods") or []]
            if not uids:
                raise ExtenderError(f"preempt returned node {n!r} without victims")
            out[n] = uids
        return out


class Scheduler:
    def __init__(self, extenders):
        self.extenders = extenders

    def filter(self, pod, nodes):
        feasible = list(nodes)
        failed, unresolvable = {}, {}
        for e in self.extenders:
            if not feasible:
                break
            if not e.filter_verb or not e.interested(pod):
                continue
            try:
                feasible, f, u = e.filter(pod, feasible)
            except ExtenderError:
                if e.ignorable:
                    continue
                raise
            failed.update(f)
            unresolvable.update(u)
        if not feasible:
            raise FitError(failed, unresolvable)
        return feasible

    def score(self, pod, nodes):
        total = {node_name(n): 0 for n in nodes}
        for e in self.extenders:
            if not e.prioritize_verb or not e.interested(pod):
                continue
            try:
                for h, s in e.prioritize(pod, nodes).items():
                    if h in total:
                        total[h] += s
            except (ExtenderError, OSError, ValueError):
                pass  # prioritize errors are ignored
        return total

    def schedule(self, pod, nodes):
        """One cycle: filter, score, pick; returns the node name (no bind)."""
        feasible = self.filter(pod, nodes)
        total = self.score(pod, feasible)
        best = max(feasible, key=lambda n: total[node_name(n)])  # first of the best, in node order
        return node_name(best)

    def binder(self):
        binders = [e for e in self.extenders if e.bind_verb]
        assert len(binders) <= 1
        return binders[0] if binders else None


class FakeExtender:
    """Scripted extender: filter keeps `allow` (None: all) or answers Error
    when filter_error; prioritize gives `scores` or HTTP 500 when
    prioritize_error. Counts the calls per verb."""

    def __init__(self, allow=None, filter_error=False, scores=None, prioritize_error=False):
        self.allow, self.filter_error = allow, filter_error
        self.scores, self.prioritize_error = scores or {}, prioritize_error
        self.calls = {}
        fake = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                verb = self.path.rsplit("/", 1)[-1]
                fake.calls[verb] = fake.calls.get(verb, 0) + 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                names = body.get("NodeNames")
                items = (body.get("Nodes") or {}).get("items")
                if names is None:
                    names = [node_name(n) for n in items]
                if verb == "filter":
                    if fake.filter_error:
                        out = {"Nodes": None, "NodeNames": None, "FailedNodes": None,
                               "FailedAndUnresolvableNodes": None, "Error": "fake extender: filter error"}
                    else:
                        keep = [n for n in names if fake.allow is None or n in fake.allow]
                        failed = {n: "fake extender: not allowed" for n in names if n not in keep}
                        out = {"Nodes": None if items is None else {"items": [i for i in items if node_name(i) in keep]},
                               "NodeNames": keep if items is None else None, "FailedNodes": failed,
                               "FailedAndUnresolvableNodes": {}, "Error": ""}
                    self.reply(200, out)
                elif verb == "prioritize":
                    if fake.prioritize_error:
                        self.reply(500, "fake extender: prioritize error")
                    else:
                        self.reply(200, [{"Host": n, "Score": fake.scores.get(n, 0)} for n in names])
                else:
                    self.reply(404, "unknown verb")

            def reply(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/fake"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class HoldingProxy:
    """A TCP proxy in front of the API server that parses the requests on
    each connection (HTTP/1.1, Content-Length or chunked bodies) and relays
    every byte as is, except that a POST to .../binding waits while the
    proxy holds bindings, as a busy API server's slow Binding answers do
    (kube-scheduler binds asynchronously: its next cycles run meanwhile).
    release("forward") sends the held ones on; release("fail") answers them
    503 itself without forwarding (a failed bind). Responses are relayed raw,
    so watches stream through unchanged."""

    def __init__(self, upstream_port):
        import socket
        self.upstream = ("127.0.0.1", upstream_port)
        self.cv = threading.Condition()
        self.holding = False
        self.held = []  # [action or None] cells of waiting requests
        self.bindings = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self):
        with self.cv:
            self.holding = True

    def waiting(self):
        with self.cv:
            return sum(1 for c in self.held if c[0] is None)

    def release(self, action="forward", count=None):
        """Lets `count` (None: all) held bindings go on with action; later ones pass while not holding."""
        with self.cv:
            n = 0
            for c in self.held:
                if c[0] is None and (count is None or n < count):
                    c[0] = action
                    n += 1
            if count is None:
                self.holding = False
            self.cv.notify_all()

    def close(self):
        self.closed = True
        self.release()
        self.sock.close()

    def _accept(self):
        import socket
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.upstream, timeout=10)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()
            threading.Thread(target=self._requests, args=(c, u), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(2)
            except OSError:
                pass

    def _requests(self, c, u):
        buf = b""

        def need(pred):
            nonlocal buf
            while not pred():
                b = c.recv(65536)
                if not b:
                    raise EOFError
                buf += b
        try:
            while True:
                need(lambda: b"\r\n\r\n" in buf)
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.split(b"\r\n")
                method, path = lines[0].split(b" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in lines[1:])}
                action = "forward"
                if method == b"POST" and path.split(b"?")[0].endswith(b"/binding"):
                    with self.cv:
                        self.bindings += 1
                        if self.holding:
                            cell = [None]
                            self.held.append(cell)
                            self.cv.notify_all()
                            while cell[0] is None and not self.closed:
                                self.cv.wait(0.1)
                            action = cell[0] or "forward"
                if action == "forward":
                    u.sendall(head + b"\r\n\r\n")
                body = b""
                if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
                    while True:
                        need(lambda: b"\r\n" in buf)
                        size_line, rest = buf.split(b"\r\n", 1)
                        size = int(size_line.split(b";")[0], 16)
                        buf = rest
                        need(lambda: len(buf) >= size + 2)
                        body += size_line + b"\r\n" + buf[:size + 2]
                        buf = buf[size + 2:]
                        if size == 0:
                            break
                else:
                    n = int(headers.get(b"content-length", b"0"))
                    need(lambda: len(buf) >= n)
                    body, buf = buf[:n], buf[n:]
                if action == "forward":
                    u.sendall(body)
                else:
                    msg = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": "held binding failed by the test proxy",
                                      "reason": "ServiceUnavailable", "code": 503}).encode()
                    c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                              b"Content-Length: " + str(len(msg)).encode() + b"\r\n\r\n" + msg)
        except (EOFError, OSError, ValueError):
            pass
        for s in (c, u):
            try:
                s.shutdown(2)
            except OSError:
                pass
