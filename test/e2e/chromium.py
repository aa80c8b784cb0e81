"""Debian's headless Chromium driven over the DevTools protocol, for the UI's
e2e test. The protocol runs over a pipe (--remote-debugging-pipe: JSON
messages ending in NUL, commands on the browser's fd 3, replies on its fd 4),
so no debugging port is opened at all. The browser gets a temporary profile,
no sandbox when root, and host names other than 127.0.0.1 resolve to nothing
(it reaches no network). Every wait is bounded; stop() ends it."""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time

import services

# Debian's /usr/bin/chromium is a shell wrapper around this binary (it adds nothing a test needs)
BINARY = os.environ.get("CHROMIUM") or next((b for b in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "")
                                             if b and os.access(b, os.X_OK)), None)

FLAGS = [
    "--headless", "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check", "--disable-gpu",
    "--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-domain-reliability", "--disable-client-side-phishing-detection",
    "--no-pings", "--metrics-recording-only", "--mute-audio", "--password-store=basic", "--use-mock-keychain",
    "--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--window-size=1400,1000",
]


def version():
    return subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()


class Chromium:
    def __init__(self, *extra):
        if not BINARY:
            raise RuntimeError("chromium is not installed (scripts/deps.sh)")
        self.profile = services.tempdir()
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()

        def fds():  # in the child: the protocol's pipes on fds 3 and 4 (inheritable; every other fd is not)
            a, b = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
        flags = FLAGS + [f"--user-data-dir={self.profile}"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
        self.log = open(os.path.join(self.profile, "chromium.log"), "w")
        self.proc = subprocess.Popen([BINARY, *flags, *extra, "about:blank"], preexec_fn=fds, close_fds=False,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        os.close(cmd_r)
        os.close(res_w)
        self._id = 0
        self._replies = {}
        self._cond = threading.Condition()
        self.pages = {}  # sessionId -> Page: its events go to it
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.call("Browser.getVersion", timeout=30)  # it answers once it is up

    def _read(self):
        buf = b""
        while True:
            try:
                part = os.read(self._res_r, 1 << 16)
            except OSError:
                part = b""
            if not part:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += part
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                elif msg.get("sessionId") in self.pages:
                    self.pages[msg["sessionId"]].on_event(msg.get("method"), msg.get("params", {}))

    _closed = False

    def call(self, method, params=None, session=None, timeout=15):
        """One command; its result, or RuntimeError with the protocol's error."""
        self._id += 1
        mid = self._id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise TimeoutError(f"chromium: no answer to {method} in {timeout}s")
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise RuntimeError(f"chromium: {method}: {reply['error']}")
        return reply.get("result", {})

    def stop(self):
        try:
            self.call("Browser.close", timeout=5)
        except (OSError, TimeoutError, RuntimeError):
            pass
        services.stop(self.proc, timeout=10)
        for fd in (self._cmd_w, self._res_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()


class Page:
    """A tab with its own session; console errors, uncaught exceptions and
    error log entries (failed loads, CSP refusals) are collected in errors."""

    def __init__(self, browser, width=1400, height=1000):
        self.b = browser
        tid = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.errors = []
        self.session = browser.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        browser.pages[self.session] = self
        self.target = tid
        for m in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(m)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def call(self, method, params=None, timeout=15):
        return self.b.call(method, params, session=self.session, timeout=timeout)

    def on_event(self, m, p):  # on the reader thread
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                      for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("exception: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.errors.append(f"log: {e.get('text')} {e.get('url', '')}")

    def goto(self, url, timeout=15):
        self.call("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete'", timeout, "the page to load")

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluate {expr!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, timeout=15, what=None):
        """Polls expr in the page until it is truthy; its value."""
        return services.wait_until(lambda: self.eval(expr), timeout, what or expr, every=0.1)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, timeout=30)["data"]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        self.b.call("Target.closeTarget", {"targetId": self.target})
