"""A minimal Mesos v1 scheduler/operator client for e2e tests (stdlib only).

It speaks HTTP/1.1 over a raw socket so that the tests see exactly what the
master sends: the chunked framing and the RecordIO records inside it are
decoded here, by hand, and any framing error fails the test.
"""
import base64
import http.client
import json
import os
import queue
import socket
import subprocess
import threading
import time

import services

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MSIM = os.environ.get("MESOS_MASTER_SIM", os.path.join(ROOT, "build", "asan", "mesos-master-sim"))


def start_sim(*flags, standby=False):
    """mesos-master-sim on free ports; returns (process, port, standby port or None)."""
    port = services.free_port()
    args = [MSIM, f"--port={port}", "--quiet", *flags]
    sport = None
    if standby:
        sport = services.free_port()
        args.append(f"--standby-port={sport}")
    err = open(os.path.join(services.tempdir(), "msim.err"), "w+")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
    p.err_file = err
    services._procs.append(p)
    line = p.stdout.readline()
    assert line.startswith("mesos-master-sim: listening"), (line, open(err.name).read())
    return p, port, sport


# The sim's timings the driver's tests run with: offers every 100 ms, status
# updates retried within a second, tasks through STAGING, STARTING and a kill
# in tens of milliseconds.
FAST = ["--allocation-interval-ms=100", "--heartbeat-seconds=1", "--update-retry-ms=500",
        "--update-retry-max-ms=1000", "--staging-ms=20", "--starting-ms=50", "--kill-ms=50"]


def master_flag(port):
    """pelotond's flag for the Mesos master on 127.0.0.1:port."""
    return f"--mesos-master=http://127.0.0.1:{port}"


def start_stack(master_port, *flags, kubelet=None, native=False):
    """services.start_stack for pelotond with every role and the Mesos driver
    on the master at 127.0.0.1:master_port (and flags)."""
    return services.start_stack("--roles=all", master_flag(master_port), *flags, kubelet=kubelet, native=native)


def stop_sim(p):
    """Stops the sim with SIGTERM; it must exit 0 (ASan reports no leak)."""
    services.stop(p)
    err = open(p.err_file.name).read()
    p.err_file.close()
    assert p.returncode == 0, (p.returncode, err[-4000:])


def call(port, body, stream_id=None, ctype="application/json", method="POST", path="/api/v1/scheduler",
         raw=None, accept=None, timeout=10):
    """One request; returns (status, body text, headers dict)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {}
    if ctype is not None:
        headers["Content-Type"] = ctype
    if stream_id is not None:
        headers["Mesos-Stream-Id"] = stream_id
    if accept is not None:
        headers["Accept"] = accept
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text, {k.lower(): v for k, v in r.getheaders()}


def operator(port, body):
    st, text, _ = call(port, body, path="/api/v1")
    assert st == 200, (st, text)
    return json.loads(text) if text else None


def hook(port, name, body=None, method="POST"):
    st, text, _ = call(port, body or {}, path=f"/sim/{name}", method=method)
    assert st == 200, (name, st, text)
    return json.loads(text) if text else None


def framework_info(fid=None, failover=3600, caps=("MULTI_ROLE", "GPU_RESOURCES", "PARTITION_AWARE",
                                                 "TASK_KILLING_STATE")):
    fi = {"user": "peloton", "name": "peloton-e2e", "roles": ["*"], "failover_timeout": failover,
          "capabilities": [{"type": c} for c in caps]}
    if fid:
        fi["id"] = {"value": fid}
    return fi


class Subscription:
    """A SUBSCRIBE stream: a reader thread decodes chunks and records into events."""

    def __init__(self, port, info, accept="application/json", headers=None, expect_subscribed=True):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}
        if "id" in info:
            body["framework_id"] = info["id"]
        data = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        req = (f"POST /api/v1/scheduler HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Accept: {accept}\r\n{extra}Content-Length: {len(data)}\r\n\r\n").encode() + data
        self.sock.sendall(req)
        self.buf = b""
        head = self._read_until(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
        self.events = queue.Queue()
        self.backlog = []
        self.ended = threading.Event()
        self.error = None
        self.chunks = 0
        self.framing_errors = []
        if self.status == 200:
            self.stream_id = self.headers["mesos-stream-id"]
            self.thread = threading.Thread(target=self._reader, daemon=True)
            self.thread.start()
            if expect_subscribed:
                ev = self.next("SUBSCRIBED")
                self.framework_id = ev["subscribed"]["framework_id"]["value"]
                self.subscribed = ev

    def _read_until(self, sep):
        while sep not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise EOFError("stream ended")
            self.buf += d
        i = self.buf.index(sep)
        out, self.buf = self.buf[:i], self.buf[i + len(sep):]
        return out

    def _read_n(self, n):
        while len(self.buf) < n:
            d = self.sock.recv(65536)
            if not d:
                raise EOFError("stream ended")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _reader(self):
        rec = b""
        try:
            self.sock.settimeout(None)
            while True:
                size = int(self._read_until(b"\r\n"), 16)
                if size == 0:
                    self._read_until(b"\r\n")
                    break
                rec += self._read_n(size)
                self.chunks += 1
                if self._read_n(2) != b"\r\n":
                    self.framing_errors.append("chunk not followed by CRLF")
                while True:  # RecordIO: "<decimal length>\n<data>", any number per chunk, split anywhere
                    nl = rec.find(b"\n")
                    if nl < 0:
                        break
                    if not rec[:nl].isdigit():
                        self.framing_errors.append(f"bad record length {rec[:nl][:40]!r}")
                        return
                    n = int(rec[:nl])
                    if len(rec) < nl + 1 + n:
                        break
                    try:
                        self.events.put(json.loads(rec[nl + 1:nl + 1 + n]))
                    except ValueError as e:
                        self.framing_errors.append(f"record is not JSON: {e}")
                        return
                    rec = rec[nl + 1 + n:]
            if rec:
                self.framing_errors.append("stream ended inside a record")
        except (EOFError, OSError) as e:
            self.error = e
        finally:
            self.ended.set()

    def next(self, etype, timeout=5.0, pred=None):
        """The next event of etype (and pred), keeping the others in the backlog."""
        for i, ev in enumerate(self.backlog):
            if ev["type"] == etype and (pred is None or pred(ev)):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {etype} event within {timeout}s (backlog types: "
                                     f"{[e['type'] for e in self.backlog][-20:]})")
            try:
                ev = self.events.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            assert not self.framing_errors, self.framing_errors
            if ev["type"] == etype and (pred is None or pred(ev)):
                return ev
            if ev["type"] != "HEARTBEAT":
                self.backlog.append(ev)

    def none(self, etype, within, pred=None):
        """Asserts no etype event (matching pred) arrives within `within` seconds."""
        try:
            ev = self.next(etype, timeout=within, pred=pred)
        except AssertionError:
            return
        raise AssertionError(f"unexpected {etype}: {ev}")

    def update(self, task_id, state=None, timeout=5.0):
        def match(ev):
            st = ev["update"]["status"]
            return st["task_id"]["value"] == task_id and (state is None or st["state"] == state)
        return self.next("UPDATE", timeout=timeout, pred=match)["update"]["status"]

    def call(self, body, **kw):
        body.setdefault("framework_id", {"value": self.framework_id})
        return call(self.port, body, stream_id=self.stream_id, **kw)

    def ok(self, body):
        st, text, _ = self.call(body)
        assert st == 202, (body.get("type"), st, text)

    def ack(self, status):
        self.ok({"type": "ACKNOWLEDGE", "acknowledge": {"agent_id": status["agent_id"], "task_id": status["task_id"],
                                                        "uuid": status["uuid"]}})

    def offers(self, timeout=5.0, pred=None):
        return self.next("OFFERS", timeout=timeout, pred=pred)["offers"]["offers"]

    def launch(self, offer, task_id, cpus=0.5, mem=64, labels=None, refuse=None, extra_res=None):
        ti = {"name": task_id, "task_id": {"value": task_id}, "agent_id": offer["agent_id"],
              "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}},
                            {"name": "mem", "type": "SCALAR", "scalar": {"value": mem}}] + (extra_res or []),
              "command": {"shell": True, "value": "sleep 1000"}}
        if labels:
            ti["labels"] = {"labels": [{"key": k, "value": v} for k, v in labels.items()]}
        acc = {"offer_ids": [offer["id"]], "operations": [{"type": "LAUNCH", "launch": {"task_infos": [ti]}}]}
        if refuse is not None:
            acc["filters"] = {"refuse_seconds": refuse}
        self.ok({"type": "ACCEPT", "accept": acc})

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def uuid_bytes(status):
    return base64.b64decode(status["uuid"])
