#!/usr/bin/python3
"""End-to-end: authentication (a static token file with three users, client
certificates on the TLS port, the plain port closed to anonymous requests),
RBAC (manifests/rbac-*.yaml; 403 in kube-apiserver's words; kubectl auth
can-i with kubectl 1.32 and Debian's 1.20) and the audit log (one line per
request, no token, rotation at its size bound), on one real redis-server
and pelotond (docs/security.md)."""
import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import services
from simlib import run_tests

ROOT = services.ROOT
REDIS = services.start_redis()
D = services.tempdir()
TOKENS = {"admin": "adm-3f9c1e", "team": "team-77ab2", "op": "op-51d0c4"}
with open(os.path.join(D, "tokens.csv"), "w") as f:
    f.write("# token,user,uid,groups\n")
    f.write(f'{TOKENS["admin"]},alice,u-1,"system:masters"\n')
    f.write(f'{TOKENS["team"]},bob,u-2,"team-a,developers"\n')
    f.write(f'{TOKENS["op"]},carol,u-3,operators\n')


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


# a client CA and a certificate it signed for dave in team-a
CA_KEY, CA = os.path.join(D, "ca.key"), os.path.join(D, "ca.crt")
openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", CA_KEY, "-out", CA, "-days", "2",
        "-subj", "/CN=test-client-ca")
CL_KEY, CL_CSR, CL = (os.path.join(D, n) for n in ("dave.key", "dave.csr", "dave.crt"))
openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", CL_KEY, "-out", CL_CSR, "-subj", "/O=team-a/CN=dave")
openssl("x509", "-req", "-in", CL_CSR, "-CA", CA, "-CAkey", CA_KEY, "-CAcreateserial", "-out", CL, "-days", "2")
# a certificate from another CA: its handshake fails
BAD_KEY, BAD = os.path.join(D, "bad.key"), os.path.join(D, "bad.crt")
openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", BAD_KEY, "-out", BAD, "-days", "2",
        "-subj", "/O=system:masters/CN=mallory")

AUDIT = os.path.join(D, "audit.log")
AUDIT_MAX = 64 * 1024
NPORT = services.free_port()
PROC, PORT, LOG = services.start_pelotond(
    REDIS, "--roles=apiserver,native", f"--native-port={NPORT}", "--tls-port=0", f"--tls-dir={D}/tls", f"--token-file={D}/tokens.csv", f"--client-ca-file={CA}",
    f"--audit-log-path={AUDIT}", f"--audit-log-maxbytes={AUDIT_MAX}", "--audit-log-maxbackup=2")
TPORT = services.start_pelotond.tls_port
CERT = os.path.join(D, "tls", "apiserver.crt")
K120 = subprocess.run([os.path.join(ROOT, "scripts", "kubectl-1.20.sh")], capture_output=True, text=True,
                      timeout=300).stdout.strip()


def kubeconfig(who):
    ca = base64.b64encode(open(CERT, "rb").read()).decode()
    path = os.path.join(D, f"kc-{who}")
    if who == "cert":
        user = (f"client-certificate-data: {base64.b64encode(open(CL, 'rb').read()).decode()}, "
                f"client-key-data: {base64.b64encode(open(CL_KEY, 'rb').read()).decode()}")
    else:
        user = f"token: {TOKENS[who]}"
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: pc, cluster: {{server: "https://127.0.0.1:{TPORT}", certificate-authority-data: {ca}}}}}]
users: [{{name: u, user: {{{user}}}}}]
contexts: [{{name: c, context: {{cluster: pc, user: u}}}}]
current-context: c
""")
    return path


def kubectl(who, *args, stdin=None, binary="kubectl"):
    p = subprocess.run([binary, f"--kubeconfig={kubeconfig(who)}", *args], input=stdin, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def api(who, method, path, body=None, port=None, ctype="application/json"):
    """A request on the plain port with who's token (None: none): (code, JSON)."""
    headers = {"Content-Type": ctype}
    if who:
        headers["Authorization"] = f"Bearer {TOKENS[who]}"
    req = urllib.request.Request(f"http://127.0.0.1:{port or PORT}{path}", method=method, headers=headers,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def status(who, path):
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", headers={"Authorization": f"Bearer {TOKENS[who]}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_admin_applies_the_example_roles():
    for m in ("rbac-team.yaml", "rbac-operator.yaml"):
        rc, out, err = kubectl("admin", "apply", "-f", os.path.join(ROOT, "manifests", m))
        assert rc == 0, err
    rc, out, err = kubectl("admin", "get", "roles,rolebindings", "-n", "team-a", "-o", "name")
    assert rc == 0 and "role.rbac.authorization.k8s.io/workload-manager" in out, (out, err)
    rc, out, err = kubectl("admin", "get", "clusterrole", "pool-reader", "-o", "json")
    assert rc == 0 and json.loads(out)["rules"][0]["resources"] == ["resourcepools"], err
    assert api("admin", "POST", "/api/v1/namespaces", {"metadata": {"name": "team-b"}})[0] == 201


def test_team_user_creates_pods_in_its_namespace_only():
    code, body = api("team", "POST", "/api/v1/namespaces/team-a/pods", pod("p1"))
    assert code == 201, body
    code, body = api("team", "GET", "/api/v1/namespaces/team-a/pods")
    assert code == 200 and [i["metadata"]["name"] for i in body["items"]] == ["p1"], body
    code, body = api("team", "POST", "/api/v1/namespaces/team-b/pods", pod("p2"))
    assert code == 403 and body["reason"] == "Forbidden", body
    assert body["message"] == ('pods is forbidden: User "bob" cannot create resource "pods" in API group "" '
                               'in the namespace "team-b"'), body
    code, body = api("team", "GET", "/api/v1/namespaces/team-b/pods")
    assert body["message"] == ('pods is forbidden: User "bob" cannot list resource "pods" in API group "" '
                               'in the namespace "team-b"'), body
    code, body = api("team", "GET", "/api/v1/namespaces/team-a/secrets/x")
    assert code == 403 and body["message"] == ('secrets "x" is forbidden: User "bob" cannot get resource "secrets" '
                                               'in API group "" in the namespace "team-a"'), body
    code, body = api("team", "GET", "/api/v1/namespaces/team-b/pods/a%22b%5C")  # quoted as Go's %q does
    assert body["message"].startswith('pods "a\\"b\\\\" is forbidden: User "bob" cannot get'), body
    code, body = api("team", "GET", "/api/v1/nodes")
    assert code == 403 and body["message"].endswith('cannot list resource "nodes" in API group "" at the cluster '
                                                    'scope'), body
    rc, out, err = kubectl("team", "get", "pods", "-n", "team-b")
    assert rc != 0 and 'User "bob" cannot list resource "pods" in API group "" in the namespace "team-b"' in err, err


def test_team_reads_pools_but_may_not_write_them_and_the_operator_may():
    pool = {"apiVersion": "peloton.io/v1alpha1", "kind": "ResourcePool", "metadata": {"name": "rbac-pool"},
            "spec": {"reservation": {"cpu": "1"}, "limit": {"cpu": "2"}}}
    code, body = api("op", "POST", "/apis/peloton.io/v1alpha1/resourcepools", pool)
    assert code == 201, body
    assert api("team", "GET", "/apis/peloton.io/v1alpha1/resourcepools")[0] == 200
    code, body = api("team", "DELETE", "/apis/peloton.io/v1alpha1/resourcepools/rbac-pool")
    assert code == 403 and body["message"] == (
        'resourcepools.peloton.io "rbac-pool" is forbidden: User "bob" cannot delete resource "resourcepools" in '
        'API group "peloton.io" at the cluster scope'), body
    assert body["details"] == {"name": "rbac-pool", "group": "peloton.io", "kind": "resourcepools"}, body
    code, body = api("team", "PATCH", "/apis/peloton.io/v1alpha1/resourcepools/rbac-pool", {})
    assert code == 403 and "cannot patch resource" in body["message"], body
    # non-resource URLs: /metrics for operators only; discovery for everyone signed in
    assert status("op", "/metrics") == 200
    code, body = api("team", "GET", "/metrics")
    assert code == 403 and body["message"] == 'forbidden: User "bob" cannot get path "/metrics"', body
    assert api("team", "GET", "/apis")[0] == 200 and api("team", "GET", "/openapi/v2")[0] == 200


def test_rbac_changes_take_effect_at_once():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}}
    assert api("team", "POST", "/api/v1/namespaces/team-a/configmaps", cm)[0] == 403
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cm-writer"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"],
                       "resourceNames": []}]}
    rb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "bob-cm"},
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-writer"},
          "subjects": [{"kind": "User", "name": "bob"}]}
    assert api("admin", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles", role)[0] == 201
    assert api("admin", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings", rb)[0] == 201
    assert api("team", "POST", "/api/v1/namespaces/team-a/configmaps", cm)[0] == 201
    assert api("admin", "DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/bob-cm")[0] == 200
    cm["metadata"]["name"] = "c2"
    assert api("team", "POST", "/api/v1/namespaces/team-a/configmaps", cm)[0] == 403


def test_malformed_rbac_objects_are_invalid():
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "bad"},
            "rules": [{"apiGroups": [""], "resources": ["pods"]}]}
    code, body = api("admin", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles", role)
    assert code == 422 and body["reason"] == "Invalid", body
    assert body["message"] == 'Role "bad" is invalid: rules[0].verbs: verbs must contain at least one value', body
    crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "bad"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}, "subjects": []}
    code, body = api("admin", "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", crb)
    assert code == 422 and body["details"]["causes"][0]["field"] == "roleRef.kind", body
    # a binding's roleRef cannot change (PUT and PATCH alike)
    path = "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/team-a-workloads"
    code, rb = api("admin", "GET", path)
    rb["roleRef"]["name"] = "other"
    code, body = api("admin", "PUT", path, rb)
    assert code == 422 and body["message"].endswith("cannot change roleRef"), body
    code, body = api("admin", "PATCH", path, {"roleRef": {"name": "other"}}, ctype="application/merge-patch+json")
    assert code == 422 and body["details"]["causes"][0]["field"] == "roleRef", body
    rb["roleRef"]["name"] = "workload-manager"
    rb["metadata"]["labels"] = {"x": "y"}
    assert api("admin", "PUT", path, rb)[0] == 200


def test_kubectl_auth_can_i_with_both_versions():
    binaries = ["kubectl"] + ([K120] if K120 else [])
    assert K120, "kubectl 1.20 not available (scripts/kubectl-1.20.sh)"
    cases = [("team", ["create", "pods", "-n", "team-a"], "yes"), ("team", ["create", "pods", "-n", "team-b"], "no"),
             ("team", ["list", "resourcepools"], "yes"), ("team", ["delete", "resourcepools"], "no"),
             ("team", ["create", "jobs.peloton.io", "-n", "team-a"], "yes"),
             ("op", ["update", "resourcepools"], "yes"), ("op", ["get", "secrets"], "no"),
             ("admin", ["delete", "nodes"], "yes"), ("cert", ["create", "pods", "-n", "team-a"], "yes"),
             ("cert", ["get", "pods", "-n", "default"], "no")]
    for b in binaries:
        for who, args, want in cases:
            rc, out, err = kubectl(who, "auth", "can-i", *args, binary=b)
            assert out.strip() == want and rc == (0 if want == "yes" else 1), (b, who, args, out, err)


def test_kubectl_auth_can_i_list():
    for b in ["kubectl"] + ([K120] if K120 else []):
        rc, out, err = kubectl("team", "auth", "can-i", "--list", "-n", "team-a", binary=b)
        assert rc == 0, (b, err)
        rows = {tuple(line.split()[:1]) for line in out.splitlines()[1:]}
        assert ("pods",) in rows and ("jobs.peloton.io",) in rows and ("resourcepools.peloton.io",) in rows, (b, out)
        assert "/api/*" in out and "secrets" not in out, (b, out)
        rc, out, err = kubectl("team", "auth", "can-i", "--list", "-n", "team-b", binary=b)
        assert rc == 0 and "pods " not in out and "resourcepools.peloton.io" in out, (b, out)


def test_client_certificate_user_on_the_tls_port():
    rc, out, err = kubectl("cert", "create", "-n", "team-a", "-f", "-",
                           stdin="apiVersion: v1\nkind: Pod\nmetadata: {name: by-cert}\n"
                                 "spec: {containers: [{name: c, image: busybox}]}\n")
    assert rc == 0, err
    rc, out, err = kubectl("cert", "get", "pods", "-n", "default")
    assert rc != 0 and 'User "dave" cannot list resource "pods"' in err, err
    # a certificate from another CA: refused in the handshake, whatever it claims
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", CERT, "--cert", BAD,
                        "--key", BAD_KEY, f"https://127.0.0.1:{TPORT}/api/v1/namespaces"], capture_output=True,
                       text=True, timeout=30)
    assert p.stdout in ("000", ""), p.stdout


def test_plain_port_refuses_anonymous_requests_unless_started_open():
    code, body = api(None, "GET", "/api/v1/namespaces/default/pods")
    assert code == 401 and body["reason"] == "Unauthorized", body
    assert api(None, "POST", "/api/v1/namespaces/default/configmaps",
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "anon"}})[0] == 401
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}/api/v1/namespaces", headers={"Authorization": "Bearer nope"})
    try:
        urllib.request.urlopen(req, timeout=10)
        assert False, "a wrong token was accepted"
    except urllib.error.HTTPError as e:
        assert e.code == 401
    # without any credentials source, pelotond refuses everyone
    p, port, log = services.start_pelotond(REDIS, "--closed")
    try:
        assert api(None, "GET", "/api/v1/namespaces", port=port)[0] == 401
    finally:
        assert services.stop(p) == 0, open(log).read()[-2000:]
    # started open: anonymous requests are served
    p, port, log = services.start_pelotond(REDIS, "--insecure-allow-anonymous")
    try:
        assert api(None, "GET", "/api/v1/namespaces", port=port)[0] == 200
    finally:
        assert services.stop(p) == 0, open(log).read()[-2000:]


def audit_lines():
    time.sleep(0.5)  # the audit buffer is written within 200 ms
    out = []
    for name in (AUDIT + ".2", AUDIT + ".1", AUDIT):
        if os.path.exists(name):
            out += [json.loads(line) for line in open(name)]
    return out


def test_audit_has_one_line_per_request_and_no_token():
    marker = f"audit-{time.monotonic_ns()}"
    before = len([e for e in audit_lines() if marker in e["requestURI"]])
    assert before == 0
    api("team", "GET", f"/api/v1/namespaces/team-a/pods/{marker}")  # 404
    api("team", "GET", f"/api/v1/namespaces/team-b/pods/{marker}")  # 403
    api(None, "GET", f"/api/v1/namespaces/team-a/pods/{marker}")  # 401
    api("team", "POST", "/api/v1/namespaces/team-a/pods", pod(marker))  # 201 (a deferred write)
    lines = audit_lines()
    at = [i for i, e in enumerate(lines) if marker in e["requestURI"]]
    got = [lines[i] for i in at] + [lines[at[-1] + 1]]  # the create names no pod in its URI: the line after
    assert [e["responseStatus"]["code"] for e in got] == [404, 403, 401, 201], got
    e = got[0]
    assert e["kind"] == "Event" and e["apiVersion"] == "audit.k8s.io/v1" and e["level"] == "Metadata", e
    assert e["user"]["username"] == "bob" and "team-a" in e["user"]["groups"] and e["verb"] == "get", e
    assert e["objectRef"] == {"resource": "pods", "namespace": "team-a", "name": marker, "apiGroup": "",
                              "apiVersion": "v1"}, e
    assert e["annotations"]["authorization.k8s.io/decision"] == "allow", e
    assert got[1]["annotations"]["authorization.k8s.io/decision"] == "forbid"
    assert got[2]["user"]["username"] == "system:anonymous"
    assert got[3]["verb"] == "create" and got[3]["objectRef"]["namespace"] == "team-a"
    assert e["annotations"]["apiserver.latency.k8s.io/total"].endswith("ms"), e
    assert e["requestReceivedTimestamp"] <= e["stageTimestamp"]
    text = "".join(open(n).read() for n in (AUDIT, AUDIT + ".1", AUDIT + ".2") if os.path.exists(n))
    for t in TOKENS.values():
        assert t not in text


def test_audit_rotates_at_its_size_bound():
    for i in range(400):  # ~700 bytes each: past 64 KiB several times
        api("team", "GET", f"/api/v1/namespaces/team-a/pods/rotate-{i}")
    time.sleep(0.5)
    sizes = [os.path.getsize(n) for n in (AUDIT, AUDIT + ".1", AUDIT + ".2")]
    assert all(s <= AUDIT_MAX for s in sizes) and sizes[1] > AUDIT_MAX / 2, sizes
    assert not os.path.exists(AUDIT + ".3")  # --audit-log-maxbackup=2
    names = [e["objectRef"]["name"] for e in audit_lines() if e.get("objectRef", {}).get("name", "").startswith("rotate-")]
    assert names[-1] == "rotate-399" and names == sorted(names, key=lambda n: int(n.split("-")[1])), names[-3:]


def yarpc(who, procedure, body):
    """A YARPC call (JSON) on the native API with who's token: (HTTP code, Rpc-Error-Code, body)."""
    headers = {"Rpc-Caller": "test", "Rpc-Service": "peloton-resmgr", "Rpc-Encoding": "json",
               "Rpc-Procedure": procedure}
    if who:
        headers["Authorization"] = f"Bearer {TOKENS[who]}"
    req = urllib.request.Request(f"http://127.0.0.1:{NPORT}/api/v1", data=json.dumps(body).encode(),
                                 headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, None, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Rpc-Error-Code"), e.read().decode()


def test_native_api_checks_each_method_for_the_token_user():
    lookup = "peloton.api.v0.respool.ResourceManager::LookupResourcePoolID"
    delete = "peloton.api.v0.respool.ResourceManager::DeleteResourcePool"
    code, err, body = yarpc("team", lookup, {"path": {"value": "/"}})
    assert code == 200, (code, err, body)  # pool-reader: get resourcepools
    code, err, body = yarpc("team", delete, {"path": {"value": "/rbac-pool"}})
    assert code == 403 and err == "permission-denied", (code, err, body)
    assert body == ('User "bob" cannot call peloton.api.v0.respool.ResourceManager::DeleteResourcePool: it needs '
                    'delete on resource "resourcepools" in API group "peloton.io" at the cluster scope'), body
    code, err, body = yarpc("team", "peloton.api.v0.host.svc.HostService::StartMaintenance", {"hostnames": ["x"]})
    assert err == "permission-denied", (code, err, body)
    code, err, body = yarpc(None, lookup, {"path": {"value": "/"}})
    assert err == "unauthenticated", (code, err, body)
    code, err, body = yarpc("admin", lookup, {"path": {"value": "/"}})
    assert code == 200, (code, err, body)


def test_native_grpc_refuses_with_permission_denied():
    import grpc  # Debian's python3-grpcio; raw bytes: an empty request message is valid protobuf
    ch = grpc.insecure_channel(f"127.0.0.1:{NPORT}")
    delete = ch.unary_unary("/peloton.api.v0.respool.ResourceManager/DeleteResourcePool")
    query = ch.unary_unary("/peloton.api.v0.respool.ResourceManager/Query")
    for who, call, want in (("team", delete, grpc.StatusCode.PERMISSION_DENIED), (None, query,
                            grpc.StatusCode.UNAUTHENTICATED)):
        md = [("authorization", f"Bearer {TOKENS[who]}")] if who else []
        try:
            call(b"", metadata=md, timeout=10)
            assert False, "not refused"
        except grpc.RpcError as e:
            assert e.code() == want, (who, e.code(), e.details())
            if who:
                assert 'User "bob" cannot call peloton.api.v0.respool.ResourceManager/DeleteResourcePool' in e.details()
    assert query(b"", metadata=[("authorization", f"Bearer {TOKENS['team']}")], timeout=10) is not None
    ch.close()


def test_clean_shutdown():
    assert services.stop(PROC) == 0, open(LOG).read()[-2000:]


run_tests("shim-rbac", dict(globals()))
