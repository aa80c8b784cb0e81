"""Helpers for end-to-end tests of the peloton-sim command (stdlib only).

Each test module defines functions named test_*; run_tests() runs them in
order, prints one line per failure and the summary line "NAME: N passed, N failed".
"""
import json
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("PELOTON_SIM", os.path.join(ROOT, "build", "asan", "peloton-sim"))


class Result:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def json(self):
        return json.loads(self.out)


def sim(*args, stdin=None, timeout=120):
    """Runs peloton-sim with args; stdin may be a str or a dict (sent as JSON)."""
    if isinstance(stdin, (dict, list)):
        stdin = json.dumps(stdin)
    p = subprocess.run([SIM, *args], input=stdin, capture_output=True, text=True, timeout=timeout)
    return Result(p.returncode, p.stdout, p.stderr)


def pools_by_path(doc):
    return {p["path"]: p for p in doc["pools"]}


def run_tests(name, namespace):
    tests = [(k, v) for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    passed = failed = 0
    slow = float(os.environ.get("TEST_SLOW_SECONDS", "5"))
    for tname, fn in tests:
        t0 = time.monotonic()
        try:
            fn()
            passed += 1
        except Exception:  # a failed assertion or an unexpected error
            failed += 1
            print(f"FAIL {tname}", file=sys.stderr)
            traceback.print_exc()
        took = time.monotonic() - t0
        if took >= slow:  # where a suite's time goes, for whoever shortens it
            print(f"  {tname}: {took:.1f} s")
    print(f"{name}: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
