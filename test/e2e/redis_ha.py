"""A Sentinel-managed Redis on loopback for e2e tests: a primary, replicas and
three Sentinels, all real redis-server processes with AOF (fsync always),
registered with services so stop_all() stops them. Every wait is bounded."""
import os
import subprocess
import types

import services
from services import redis_cmd  # noqa: F401 (re-exported for the tests)

NAME = "peloton"


def answers(port):
    """Whether the redis-server (or Sentinel) on port answers PING."""
    try:
        return "PONG" in redis_cmd(port, "PING")
    except OSError:
        return False


def start_server(port, d, *extra):
    """A redis-server on 127.0.0.1:port with its AOF in d (restarted on its old data when d holds one)."""
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                          "--appendfsync", "always", "--dir", d, "--daemonize", "no", *extra],
                         stdout=open(os.path.join(d, "redis.log"), "a"), stderr=subprocess.STDOUT)
    services._procs.append(p)
    services.wait_for(lambda: "PONG" in redis_cmd(port, "PING"), what=f"redis-server on {port}")
    return p


def start_with_replica():
    """A primary (services.start_redis) and one replica of it, in sync, with
    no Sentinels: a test pauses the replica (SIGSTOP) to make a write that
    waits for it (--redis-wait-replicas=1) time out after it is stored.
    Returns (primary's port, replica's process, replica's port)."""
    primary_port = services.start_redis()
    port, d = services.free_port(), services.tempdir()
    proc = start_server(port, d, "--replicaof", "127.0.0.1", str(primary_port))
    services.wait_until(lambda: "master_link_status:up" in redis_cmd(port, "INFO", "replication"), 15,
                        "the replica in sync")
    return primary_port, proc, port


def start_primary(h):
    """The primary's redis-server (again, on its data: the Sentinels make it a replica when another was promoted);
    with start(held_link=True), on its own port behind the relay, announcing the relay's."""
    if h.link:
        return start_server(h.real_port, h.dirs["primary"], "--replica-announce-port", str(h.ports["primary"]))
    return start_server(h.ports["primary"], h.dirs["primary"])


def start(replicas=2, down_after_ms=1000, failover_timeout_ms=5000, held_link=False):
    """The primary, `replicas` replicas (the first one the Sentinels' choice:
    the lowest replica-priority) and three Sentinels with quorum 2. Returns a
    namespace: ports (primary, replica0.., s1..s3), dirs, procs (by the same
    names), sentinels ("host:port,…" for --redis-sentinel), name (the master
    name), link (held_link: the HeldLink in front of the primary, holding
    replica0's link when asked; else None)."""
    names = ["primary"] + [f"replica{i}" for i in range(replicas)]
    h = types.SimpleNamespace(name=NAME, procs={})
    h.ports = {k: services.free_port() for k in names + ["s1", "s2", "s3"]}
    h.dirs = {k: services.tempdir() for k in h.ports}
    h.link = None
    if held_link:  # the primary behind a relay on its port (h.ports["primary"]); h.real_port is its own
        h.real_port = services.free_port()
        h.link = HeldLink(h.ports["primary"], h.real_port, h.ports["replica0"])
    h.procs["primary"] = start_primary(h)
    for i in range(replicas):
        r = f"replica{i}"
        h.procs[r] = start_server(h.ports[r], h.dirs[r], "--replicaof", "127.0.0.1", str(h.ports["primary"]),
                                  "--replica-priority", str(10 + 90 * i))
    for s in ("s1", "s2", "s3"):
        conf = os.path.join(h.dirs[s], "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {h.ports[s]}\nbind 127.0.0.1\ndir {h.dirs[s]}\n"
                    f"sentinel monitor {NAME} 127.0.0.1 {h.ports['primary']} 2\n"
                    f"sentinel down-after-milliseconds {NAME} {down_after_ms}\n"
                    f"sentinel failover-timeout {NAME} {failover_timeout_ms}\n"
                    f"sentinel parallel-syncs {NAME} 1\n")
        p = subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=open(os.path.join(h.dirs[s], "log"), "w"),
                             stderr=subprocess.STDOUT)
        services._procs.append(p)
        h.procs[s] = p
        services.wait_for(lambda: answers(h.ports[s]), what="sentinel")
    for i in range(replicas):
        services.wait_until(lambda: "master_link_status:up" in redis_cmd(h.ports[f"replica{i}"], "INFO", "replication"),
                            30, "the replicas in sync")
    h.sentinels = ",".join(f"127.0.0.1:{h.ports[s]}" for s in ("s1", "s2", "s3"))
    return h


def primary(h):
    """The name (key of h.ports) of the server the Sentinels name primary now, or None."""
    try:
        addr = redis_cmd(h.ports["s1"], "SENTINEL", "get-master-addr-by-name", NAME).split()
    except OSError:
        return None
    port = int(addr[1]) if len(addr) == 2 and addr[1].isdigit() else None
    return next((k for k, v in h.ports.items() if v == port and not k.startswith("s")), None)


def info(port, section="replication"):
    """INFO section of the server on port, or "" when it does not answer (a
    server the Sentinels reconfigure drops its clients' connections)."""
    try:
        return redis_cmd(port, "INFO", section)
    except OSError:
        return ""


def is_master(h, name):
    try:
        return "role:master" in redis_cmd(h.ports[name], "INFO", "replication")
    except OSError:
        return False



class HeldLink:
    """A TCP relay on 127.0.0.1:port in front of the primary (which listens
    on upstream_port, announcing port as its own): every client, the
    Sentinels and the replicas reach the primary through it. It can hold
    back what the primary sends on one replica's replication link (the
    connection that names the replica's port in REPLCONF listening-port):
    while held, that replica stays connected and answers everyone (the
    Sentinels too) but falls behind, as a replica on a slow link does. Its
    configured primary is the address the Sentinels know, so they leave it
    be. When the primary goes, the relay refuses new connections."""

    def __init__(self, port, upstream_port, replica_port):
        import socket
        import threading
        self.upstream, self.held = upstream_port, False
        self.mark = b"listening-port\r\n$%d\r\n%d\r\n" % (len(str(replica_port)), replica_port)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", port))
        self.lsock.listen(64)
        self.port = port
        self.socks = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import socket
        import threading
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream), timeout=2)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            for x in (c, u):  # no Nagle: each ack and reply goes at once, as without the relay
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socks += [c, u]
            link = {"replica": False, "seen": b""}
            threading.Thread(target=self._pipe, args=(c, u, link, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c, link, True), daemon=True).start()

    def _pipe(self, src, dst, link, from_primary):
        import time
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not from_primary and not link["replica"]:
                link["seen"] = (link["seen"] + data)[-4096:]
                link["replica"] = self.mark in link["seen"]
            while data and from_primary and link["replica"] and self.held:
                time.sleep(0.02)  # bounded by release() or stop()
            try:
                if not data:
                    dst.shutdown(2)
                    return
                dst.sendall(data)
            except OSError:
                return

    def hold(self):
        self.held = True

    def release(self):
        self.held = False

    def stop(self):
        self.held = False
        for s in [self.lsock] + self.socks:
            try:
                s.close()
            except OSError:
                pass
