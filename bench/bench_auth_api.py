"""Benchmark: what authentication, RBAC and the audit log cost the API's
create path end to end (docs/security.md). The release pelotond (bin/) over a
real redis-server; 3,000 pod creates on one keep-alive connection, then
3,000 gets, in three setups on the same machine (each with a fresh redis-server):
  open      --insecure-allow-anonymous (system:masters: no RBAC look-up)
  rbac      a token user whose RoleBinding allows it (index by subject)
  rbac+audit the same with --audit-log-path
The rbac setups lift the per-user request rate (--max-requests-per-user=none;
its default, 500 a second, would answer this loop 429); the user's entry is
still looked up per request. Prints figures; passes or fails nothing. Run it more than once: the VM is noisy."""
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
import services  # noqa: E402

services.PELOTOND = os.environ.get("PELOTOND", os.path.join(services.ROOT, "bin", "pelotond"))
N = int(os.environ.get("BENCH_AUTH_N", "3000"))
D = services.tempdir()
with open(os.path.join(D, "tokens.csv"), "w") as f:
    f.write('adm,admin,u0,"system:masters"\nteam,bob,u1,"team-a"\n')


def run(label, flags, token):
    redis = services.start_redis("everysec")  # a fresh one each: no run inherits another's data
    p, port, log = services.start_pelotond(redis, *flags)
    c = http.client.HTTPConnection("127.0.0.1", port)
    hdr = {"Content-Type": "application/json"}
    adm = dict(hdr, Authorization="Bearer adm") if token else hdr
    ns = f"b-{label.replace('+', '-')}"
    for path, body in (("/api/v1/namespaces", {"metadata": {"name": ns}}),
                       (f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                        {"metadata": {"name": "w"}, "rules": [{"apiGroups": [""], "resources": ["pods"],
                                                               "verbs": ["create", "get"]}]}),
                       (f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                        {"metadata": {"name": "w"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                "kind": "Role", "name": "w"},
                         "subjects": [{"kind": "Group", "name": "team-a"}]})):
        c.request("POST", path, json.dumps(body), adm)
        r = c.getresponse()
        r.read()
        assert r.status == 201, (path, r.status)
    if token:
        hdr = dict(hdr, Authorization=f"Bearer {token}")
    figures = []
    for verb in ("POST", "GET"):
        t0 = time.perf_counter()
        for i in range(N):
            if verb == "POST":
                body = json.dumps({"metadata": {"name": f"p{i}"},
                                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
                c.request("POST", f"/api/v1/namespaces/{ns}/pods", body, hdr)
            else:
                c.request("GET", f"/api/v1/namespaces/{ns}/pods/p{i}", headers=hdr)
            r = c.getresponse()
            r.read()
            assert r.status in (200, 201), r.status
        figures.append((time.perf_counter() - t0) / N * 1e6)
    c.close()
    services.stop(p)
    services.stop(services.start_redis.last[0])
    print(f"bench auth {label:<12} create {figures[0]:8.1f} us/req   get {figures[1]:8.1f} us/req")


run("open", ["--insecure-allow-anonymous"], None)
UNLIMITED = "--max-requests-per-user=none"
run("rbac", [f"--token-file={D}/tokens.csv", UNLIMITED], "team")
run("rbac+audit", [f"--token-file={D}/tokens.csv", f"--audit-log-path={D}/audit.log", UNLIMITED], "team")
run("open", ["--insecure-allow-anonymous"], None)
services.stop_all()
