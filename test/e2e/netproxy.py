"""A TCP proxy on 127.0.0.1 for e2e tests: it relays bytes between a client
and an upstream port, and can hold back what the upstream sends on the
connections that carry a watch (a request line with "watch=") by a set
delay, as a congested network or a lagging watch cache would. Requests
and ordinary answers pass at once, so a client that reads an object
directly sees fresher state than its watches: the setting in which a
decision must not be taken from the watch alone.

Threads only; every socket is closed by stop(). The delay is applied per
chunk read (each chunk leaves no sooner than delay seconds after it came),
so the order of bytes on a connection is kept.

hold() makes it hold back requests instead: from then on, what a client
sends on a connection whose bytes carry a Binding ("/binding") is kept,
with everything after it on that connection, until release() (or
hold_max seconds), and sent upstream then, even when the client has gone
meanwhile (its process killed): a request in transit that reaches the
server late. The upstream's answers on such connections are kept
(held_answers()), since their client may not be there to read them."""
import collections
import socket
import threading
import time

import services


class Proxy:
    def __init__(self, upstream_port, watch_delay=0.0):
        self.upstream = upstream_port
        self.watch_delay = watch_delay
        self.port = services.free_port()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", self.port))
        self.lsock.listen(128)
        self.stopping = False
        self.socks = []
        self.lock = threading.Lock()
        self.watches = 0  # connections seen carrying a watch
        self.holding = False  # hold(): requests carrying a Binding are held back
        self.released = threading.Event()
        self.held_binds = 0  # Binding requests held so far
        self.held = []  # the states of the connections held
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self):
        """Holds back, from now on, what clients send on connections that carry a Binding."""
        self.released.clear()
        self.holding = True

    def release(self):
        """Sends what was held (in order, on its connection) and holds nothing more."""
        self.holding = False
        self.released.set()
        with self.lock:
            held = list(self.held)
        for st in held:  # a live client sends nothing more that would carry them along
            with st["lock"]:
                try:
                    self._flush_held(st["u"], st)
                except OSError:
                    pass

    def held_answers(self):
        """What the upstream answered on the connections that were held, one bytes string each."""
        with self.lock:
            return [bytes(st["answers"]) for st in self.held]

    def _track(self, s):
        with self.lock:
            self.socks.append(s)

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            self._track(c)
            self._track(u)
            state = {"watch": False, "held": None, "answers": bytearray(), "u": u, "lock": threading.Lock()}
            threading.Thread(target=self._up, args=(c, u, state), daemon=True).start()
            threading.Thread(target=self._down, args=(u, c, state), daemon=True).start()

    def _up(self, c, u, state, hold_max=60.0):
        """client -> upstream, at once; notes a watch request; holds what
        carries a Binding while holding (the class's head)"""
        try:
            while True:
                try:
                    b = c.recv(65536)
                except OSError:
                    b = b""  # the client killed: what was held still goes
                if not b:
                    break
                if not state["watch"] and b"watch=" in b.split(b"\r\n", 1)[0]:
                    state["watch"] = True
                    with self.lock:
                        self.watches += 1
                if state["held"] is None and self.holding and not state["watch"] and b"/binding" in b:
                    state["held"] = []
                    with self.lock:
                        self.held.append(state)
                with state["lock"]:  # against release()'s flush: the bytes keep their order
                    if state["held"] is not None and not self.released.is_set():
                        state["held"].append(b)
                        with self.lock:
                            self.held_binds += b.count(b"/binding")
                        continue
                    self._flush_held(u, state)
                    u.sendall(b)
            if state["held"] is not None:
                # the client is gone, or done: its requests held still reach
                # the server, which is left open to answer them
                self.released.wait(hold_max)
                with state["lock"]:
                    self._flush_held(u, state)
                return
        except OSError:
            pass
        finally:
            # a held connection's upstream stays open for its answers (stop() closes it)
            for s in (c,) if state["held"] is not None and not self.stopping else (u, c):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @staticmethod
    def _flush_held(u, state):
        """Sends what a held connection kept (nothing for another one)."""
        if state["held"]:
            held, state["held"] = state["held"], []
            for b in held:
                u.sendall(b)

    def _down(self, u, c, state):
        """upstream -> client; a watch's bytes held back by watch_delay"""
        q = collections.deque()
        cv = threading.Condition()
        done = {"eof": False}

        def sender():
            try:
                while True:
                    with cv:
                        while not q and not done["eof"]:
                            cv.wait(0.5)
                        if not q and done["eof"]:
                            return
                        due, b = q.popleft()
                    wait = due - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    c.sendall(b)
            except OSError:
                pass
            finally:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=sender, daemon=True).start()
        try:
            while True:
                b = u.recv(65536)
                if not b:
                    break
                if state["held"] is not None:
                    with self.lock:
                        state["answers"] += b
                delay = self.watch_delay if state["watch"] else 0.0
                with cv:
                    q.append((time.monotonic() + delay, b))
                    cv.notify()
        except OSError:
            pass
        finally:
            with cv:
                done["eof"] = True
                cv.notify()

    def stop(self):
        self.stopping = True
        try:
            self.lsock.close()
        except OSError:
            pass
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
