/* RBAC for Peloton's native API (shim_native_auth.h, docs/security.md):
 * each native method is the Kubernetes verbs and resources it touches,
 * checked for the caller's token user, cluster-wide (the native API names
 * no namespace: only ClusterRoleBindings grant its calls). It runs on the
 * native server's thread, so it keeps its own token table, Redis
 * connection and RBAC index (rebuilt every RBAC_REFRESH_MS while used). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "shim_auth.h"
#include "shim_native_auth.h"
#include "store.h"

struct native_authz {
    struct auth_tokens *tokens;
    bool anonymous;
    struct store *st; /* opened on first need */
    char host[256];
    int port;
    struct rbac *rbac;
    uint64_t built_ms;
};

/* What a method does, as Kubernetes requests: up to two checks, all must pass. */
struct nmap {
    const char *service; /* the service name's last part */
    const char *method;
    struct {
        const char *verb, *group, *resource;
    } need[2];
};

#define P "peloton.io"
static const struct nmap methods[] = {
    {"ResourceManager", "CreateResourcePool", {{"create", P, "resourcepools"}}},
    {"ResourceManager", "GetResourcePool", {{"get", P, "resourcepools"}}},
    {"ResourceManager", "LookupResourcePoolID", {{"get", P, "resourcepools"}}},
    {"ResourceManager", "Query", {{"list", P, "resourcepools"}}},
    {"ResourceManager", "UpdateResourcePool", {{"update", P, "resourcepools"}}},
    {"ResourceManager", "DeleteResourcePool", {{"delete", P, "resourcepools"}}},
    {"JobManager", "Create", {{"create", P, "jobs"}}},
    {"JobManager", "Get", {{"get", P, "jobs"}}},
    {"JobManager", "Query", {{"list", P, "jobs"}}},
    {"JobManager", "GetActiveJobs", {{"list", P, "jobs"}}},
    {"JobManager", "GetCache", {{"get", P, "jobs"}}},
    {"JobManager", "Delete", {{"delete", P, "jobs"}}},
    {"JobManager", "Update", {{"update", P, "jobs"}}},
    {"JobManager", "Start", {{"update", P, "jobs"}}},
    {"JobManager", "Stop", {{"update", P, "jobs"}}},
    {"JobManager", "Restart", {{"update", P, "jobs"}, {"delete", "", "pods"}}},
    {"JobManager", "Refresh", {{"update", P, "jobs"}}},
    {"TaskManager", "Get", {{"get", "", "pods"}}},
    {"TaskManager", "List", {{"list", "", "pods"}}},
    {"TaskManager", "Query", {{"list", "", "pods"}}},
    {"TaskManager", "GetCache", {{"get", "", "pods"}}},
    {"TaskManager", "BrowseSandbox", {{"get", "", "pods"}}},
    {"TaskManager", "GetPodEvents", {{"list", "", "events"}}},
    {"TaskManager", "DeletePodEvents", {{"delete", "", "events"}}},
    {"TaskManager", "Start", {{"update", P, "jobs"}}},
    {"TaskManager", "Stop", {{"update", P, "jobs"}}},
    {"TaskManager", "Restart", {{"update", P, "jobs"}, {"delete", "", "pods"}}},
    {"TaskManager", "Refresh", {{"update", P, "jobs"}}},
    {"HostService", "QueryHosts", {{"list", "", "nodes"}}},
    {"HostService", "StartMaintenance", {{"patch", "", "nodes"}}},
    {"HostService", "CompleteMaintenance", {{"patch", "", "nodes"}}},
    {"UpdateService", "CreateUpdate", {{"update", P, "jobs"}}},
    {"UpdateService", "PauseUpdate", {{"update", P, "jobs"}}},
    {"UpdateService", "ResumeUpdate", {{"update", P, "jobs"}}},
    {"UpdateService", "RollbackUpdate", {{"update", P, "jobs"}}},
    {"UpdateService", "AbortUpdate", {{"update", P, "jobs"}}},
    {"UpdateService", "GetUpdate", {{"get", P, "jobs"}}},
    {"UpdateService", "ListUpdates", {{"list", P, "jobs"}}},
    {"UpdateService", "GetUpdateCache", {{"get", P, "jobs"}}},
};
#undef P

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct native_authz *native_authz_new(const char *token_file, bool allow_anonymous, const char *redis_addr,
                                      char *err, size_t errlen) {
    struct native_authz *z = calloc(1, sizeof *z);
    if (!z) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    z->anonymous = allow_anonymous;
    if (store_parse_addr(redis_addr, z->host, sizeof z->host, &z->port)) {
        snprintf(err, errlen, "bad redis address %s", redis_addr);
        native_authz_free(z);
        return NULL;
    }
    if (token_file && auth_tokens_load(token_file, &z->tokens, err, errlen)) {
        native_authz_free(z);
        return NULL;
    }
    return z;
}

void native_authz_free(struct native_authz *z) {
    if (!z) return;
    auth_tokens_free(z->tokens);
    rbac_free(z->rbac);
    store_close(z->st);
    free(z);
}

const char *native_authz_map(const char *procedure, int i, const char **group, const char **resource) {
    const char *m = strstr(procedure, "::");
    size_t skip = 2;
    if (!m) m = strchr(procedure, '/'), skip = 1;
    if (!m || i < 0 || i > 1) return NULL;
    const char *svc = procedure; /* its last dotted part */
    for (const char *p = procedure; p < m; p++)
        if (*p == '.') svc = p + 1;
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        const struct nmap *e = &methods[k];
        if (strlen(e->service) == (size_t)(m - svc) && !memcmp(e->service, svc, (size_t)(m - svc)) &&
            !strcmp(e->method, m + skip)) {
            if (!e->need[i].verb) return NULL;
            *group = e->need[i].group;
            *resource = e->need[i].resource;
            return e->need[i].verb;
        }
    }
    return NULL;
}

int native_authz_check(void *ud, const char *authz, const char *peer_cn, const char *peer_orgs,
                       const char *procedure, char *msg, size_t msglen) {
    struct native_authz *z = ud;
    const struct auth_user *u = NULL;
    struct auth_user cert = {.uid = ""};
    char orgs[4096];
    static const struct auth_user anon = {.name = "system:anonymous", .uid = "",
                                          .groups = {"system:unauthenticated", "system:masters"}, .ngroups = 2};
    if (!strncasecmp(authz, "bearer ", 7)) {
        const char *t = authz + 7;
        while (*t == ' ') t++;
        u = auth_tokens_find(z->tokens, t, strcspn(t, " "));
    } else if (!authz[0] && peer_cn && peer_cn[0]) { /* the certificate's subject: CN the user, each O a group */
        cert.name = peer_cn;
        snprintf(orgs, sizeof orgs, "%s", peer_orgs ? peer_orgs : "");
        for (char *g = orgs; *g && cert.ngroups < AUTH_MAX_GROUPS;) {
            char *nl = strchr(g, '\n');
            if (nl) *nl = 0;
            if (*g) cert.groups[cert.ngroups++] = g;
            if (!nl) break;
            g = nl + 1;
        }
        cert.groups[cert.ngroups++] = "system:authenticated";
        u = &cert;
    } else if (!authz[0] && z->anonymous) {
        u = &anon;
    }
    if (!u) {
        snprintf(msg, msglen, "a bearer token is required (authorization metadata)");
        return 16; /* UNAUTHENTICATED */
    }
    const char *group, *res;
    if (!native_authz_map(procedure, 0, &group, &res)) {
        for (int i = 0; i < u->ngroups; i++)
            if (!strcmp(u->groups[i], "system:masters")) return 0;
        snprintf(msg, msglen, "User \"%s\" cannot call %s: it has no RBAC mapping (system:masters only)", u->name,
                 procedure);
        return 7; /* PERMISSION_DENIED */
    }
    uint64_t now = mono_ms();
    bool master = false;
    for (int i = 0; i < u->ngroups; i++) master |= !strcmp(u->groups[i], "system:masters");
    if (!master && (!z->rbac || now - z->built_ms >= RBAC_REFRESH_MS)) {
        if (!z->st) {
            struct store_options so;
            store_options_init(&so);
            if (store_open(z->host, z->port, &so, &z->st)) z->st = NULL;
        }
        struct rbac *r = z->st ? rbac_load_store(z->st) : NULL;
        if (!r && z->st) { /* a broken connection: a new one next time */
            store_close(z->st);
            z->st = NULL;
        }
        if (r || !z->rbac) {
            rbac_free(z->rbac);
            z->rbac = r;
        }
        z->built_ms = now;
    }
    for (int i = 0; i < 2; i++) {
        const char *verb = native_authz_map(procedure, i, &group, &res);
        if (!verb) break;
        struct authz_attrs a = {.resource = true, .verb = verb, .group = group, .version = "", .plural = res,
                                .sub = "", .ns = "", .name = "", .path = ""};
        if (!rbac_allows(z->rbac, u, &a)) {
            snprintf(msg, msglen,
                     "User \"%s\" cannot call %s: it needs %s on resource \"%s\" in API group \"%s\" at the cluster scope",
                     u->name, procedure, verb, res, group);
            return 7; /* PERMISSION_DENIED */
        }
    }
    return 0;
}
