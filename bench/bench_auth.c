/* Benchmark: what authentication, RBAC and the audit log add to one API
 * request (docs/security.md), on the pieces the request path calls:
 *   token lookup        a bearer token in a file of 10,000 users
 *   attributes          verb, group, resource, namespace, name from the path
 *   RBAC, system:masters the controllers' case: no look at the index
 *   RBAC, allowed/denied a team user against 2,000 Roles and 2,000 RoleBindings
 *                       (1,000 namespaces), 200 ClusterRoles and bindings
 *   index rebuild       the same from JSON (after a write to an RBAC kind)
 *   audit line          begin + end of one record, buffered, into a file
 * Prints figures; passes or fails nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "shim_auth.h"

#define NTOK 10000
#define NNS 1000

static json_t *rules_json(const char *group, const char *res, const char *verbs) {
    json_t *v = json_array();
    for (const char *p = verbs; *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        json_array_append_new(v, json_stringn(p, n));
        p += n + (c ? 1 : 0);
    }
    return json_pack("[{s:o, s:[s], s:[s]}]", "verbs", v, "apiGroups", group, "resources", res);
}

static struct rbac *build(json_t *roles[], json_t *binds[], int n) {
    struct rbac *r = rbac_new();
    char ns[32], name[32];
    for (int i = 0; i < n; i++) {
        snprintf(ns, sizeof ns, "ns-%d", i % NNS);
        snprintf(name, sizeof name, "role-%d", i);
        rbac_add_role(r, ns, name, roles[i]);
        rbac_add_binding(r, ns, binds[i]);
    }
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "cluster-%d", i);
        rbac_add_role(r, "", name, roles[i]);
        rbac_add_binding(r, "", binds[n + i]);
    }
    rbac_finish(r);
    return r;
}

int main(void) {
    /* tokens */
    size_t cap = (size_t)NTOK * 64, len = 0;
    char *text = malloc(cap);
    for (int i = 0; i < NTOK; i++)
        len += (size_t)snprintf(text + len, cap - len, "token-%08d-abcdef,user-%d,uid-%d,\"team-%d,all\"\n", i, i, i,
                                i % NNS);
    struct auth_tokens *t;
    char err[256];
    uint64_t t0 = bench_now_ns();
    if (auth_tokens_parse(text, len, &t, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    bench_report("token file parse, 10,000 users", (double)(bench_now_ns() - t0) / 1e6, "ms", "");
    enum { N = 1000000 };
    char tok[64];
    const struct auth_user *u = NULL;
    t0 = bench_now_ns();
    for (int i = 0; i < N; i++) {
        snprintf(tok, sizeof tok, "token-%08d-abcdef", i % NTOK);
        u = auth_tokens_find(t, tok, strlen(tok));
    }
    bench_report("token lookup (with its snprintf)", (double)(bench_now_ns() - t0) / N, "ns/req", "");
    if (!u) return 1;

    /* attributes */
    const char *keys[1] = {"watch"}, *vals[1] = {"true"};
    struct http_request req = {.method = HTTP_POST, .method_name = "POST", .path = "/api/v1/namespaces/ns-7/pods",
                               .arg_keys = keys, .arg_values = vals, .content_type = "application/json",
                               .accept = "", .authorization = "", .peer = "127.0.0.1"};
    struct authz_attrs a;
    t0 = bench_now_ns();
    for (int i = 0; i < N; i++) authz_attrs_of(&req, &a);
    bench_report("request attributes from the path", (double)(bench_now_ns() - t0) / N, "ns/req", "");

    /* RBAC */
    enum { NR = 2000 };
    json_t *roles[NR], *binds[NR + 200];
    for (int i = 0; i < NR; i++) roles[i] = rules_json("", i % 2 ? "pods" : "configmaps", "get,list,watch,create");
    char g[32];
    for (int i = 0; i < NR + 200; i++) {
        snprintf(g, sizeof g, "team-%d", i % NNS);
        char rn[32];
        snprintf(rn, sizeof rn, i < NR ? "role-%d" : "cluster-%d", i < NR ? i : i - NR);
        binds[i] = json_pack("{s:{s:s, s:s}, s:[{s:s, s:s}]}", "roleRef", "kind", i < NR ? "Role" : "ClusterRole",
                             "name", rn, "subjects", "kind", "Group", "name", g);
    }
    t0 = bench_now_ns();
    struct rbac *r = build(roles, binds, NR);
    bench_report("RBAC index build, 2,200 roles and bindings", (double)(bench_now_ns() - t0) / 1e6, "ms", "");
    struct auth_user master = {.name = "system:peloton", .uid = "", .groups = {"system:masters"}, .ngroups = 1};
    const struct auth_user *team7 = auth_tokens_find(t, "token-00000007-abcdef", 21);
    int ok = 0;
    t0 = bench_now_ns();
    for (int i = 0; i < N; i++) ok ^= rbac_allows(r, &master, &a);
    bench_report("RBAC decision, system:masters", (double)(bench_now_ns() - t0) / N, "ns/req", "");
    t0 = bench_now_ns();
    for (int i = 0; i < N; i++) ok ^= rbac_allows(r, team7, &a);
    bench_report("RBAC decision, team user allowed", (double)(bench_now_ns() - t0) / N, "ns/req", "");
    req.path = "/api/v1/namespaces/ns-8/pods";
    authz_attrs_of(&req, &a);
    t0 = bench_now_ns();
    for (int i = 0; i < N; i++) ok ^= rbac_allows(r, team7, &a);
    bench_report("RBAC decision, team user denied", (double)(bench_now_ns() - t0) / N, "ns/req", "");

    /* audit */
    char path[] = "/tmp/bench-audit-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    struct audit_config ac = {.path = path, .max_bytes = 64u << 20, .max_backups = 1};
    struct shim_audit *au = shim_audit_open(&ac, NULL, err, sizeof err);
    if (!au) return 1;
    /* without a loop every line is written at once: measure the buffered case by pairs per flush */
    enum { NA = 200000 };
    t0 = bench_now_ns();
    for (int i = 0; i < NA; i++) shim_audit_end(au, shim_audit_begin(au, &req, team7, &a, "allow"), 201);
    bench_report("audit line, one write(2) each (no loop)", (double)(bench_now_ns() - t0) / NA, "ns/req", "");
    shim_audit_close(au);
    uv_loop_t loop;
    uv_loop_init(&loop);
    au = shim_audit_open(&ac, &loop, err, sizeof err);
    t0 = bench_now_ns();
    for (int i = 0; i < NA; i++) shim_audit_end(au, shim_audit_begin(au, &req, team7, &a, "allow"), 201);
    shim_audit_flush(au);
    bench_report("audit line, buffered (64 KiB writes)", (double)(bench_now_ns() - t0) / NA, "ns/req", "");
    shim_audit_close(au);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    unlink(path);
    for (int i = 1; i <= 1; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s.%d", path, i);
        unlink(p);
    }
    for (int i = 0; i < NR; i++) json_decref(roles[i]);
    for (int i = 0; i < NR + 200; i++) json_decref(binds[i]);
    rbac_free(r);
    auth_tokens_free(t);
    free(text);
    printf("(%d)\n", (int)ok); /* keeps the loops */
    return 0;
}
