#!/usr/bin/python3
"""End-to-end: the JavaScript Kubernetes client (@kubernetes/client-node, the
version pinned in test/e2e/node/package-lock.json) against pelotond's API
server, with redis-server and kubelet-sim. scripts/npm-deps.sh installs the
client into build/node (npm ci; quick when already there); the checks are in
test/e2e/node/client_test.mjs, which prints "ok NAME" or "FAIL NAME: why" per
check. This prints them and the line "client-node: N passed, N failed"."""
import os
import shutil
import subprocess
import sys

import services

NODE_DIR = os.path.join(services.ROOT, "build", "node")
SCRIPT = os.path.join(services.ROOT, "test", "e2e", "node", "client_test.mjs")
NODES = 2


def fail_whole(why):
    print(f"FAIL {why}")
    print("client-node: 0 passed, 1 failed")
    sys.exit(1)


def main():
    node = os.environ.get("NODE") or shutil.which("node")  # NODE: another node binary
    if node is None:
        fail_whole("setup: node is not installed (scripts/deps.sh installs Debian's nodejs)")
    dep = subprocess.run([os.path.join(services.ROOT, "scripts", "npm-deps.sh"), NODE_DIR],
                         capture_output=True, text=True, timeout=400)
    if dep.returncode != 0:
        fail_whole("setup: " + (dep.stderr.strip() or f"scripts/npm-deps.sh exited {dep.returncode}"))

    # resmgr removes a deleted ResourcePool's finalizer
    s = services.start_stack("--roles=apiserver,resmgr", kubelet=[f"--nodes={NODES}", "--cpu=4", "--memory=8Gi"])
    # an ES module finds its imports from its own folder: run it beside node_modules
    script = os.path.join(NODE_DIR, "client_test.mjs")
    shutil.copyfile(SCRIPT, script)
    # client-node 1.x refuses a plain-http server unless the cluster says
    # insecure-skip-tls-verify (docs/kubectl.md, "Other clients")
    kcfg = os.path.join(services.tempdir(), "kubeconfig")
    with open(kcfg, "w") as f:
        f.write(open(s.kubeconfig).read().replace("{server:", "{insecure-skip-tls-verify: true, server:"))
    env = dict(os.environ, KUBECONFIG=kcfg, NODES=str(NODES))
    try:
        r = subprocess.run([node, script], capture_output=True, text=True, timeout=60, env=env, cwd=NODE_DIR)
        out, rc, err = r.stdout, r.returncode, r.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, err = -1, "client_test.mjs: no end within 60 s"
    passed = failed = 0
    for line in out.splitlines():
        print(line)
        if line.startswith("ok "):
            passed += 1
        elif line.startswith("FAIL "):
            failed += 1
    if rc != 0 and failed == 0:  # a crash, or a hang, before a check could say so
        print(f"FAIL client_test.mjs exited {rc}: {err.strip()[-2000:]}")
        failed = 1
    elif err.strip():
        print(err.strip()[-2000:], file=sys.stderr)
    try:  # pelotond still runs and stops cleanly (under ASan: no leak)
        services.stop_clean(s.proc, s.log, *([s.ksim] if s.ksim else []))
        print("ok pelotond stops cleanly")
        passed += 1
    except AssertionError as e:
        print(f"FAIL pelotond stops cleanly: {str(e)[-2000:]}")
        failed += 1
    print(f"client-node: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
