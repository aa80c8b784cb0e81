/* Discovery: /version, /api, /apis and the group-version resource lists,
 * legacy and aggregated (apidiscovery.k8s.io/v2, with its exact content type),
 * from the registry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define AGGREGATED_CT "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

bool shim_res_deletecollection(const struct shim_resource *r) {
    return r->custom || r->group[0] || strcmp(r->plural, "namespaces") != 0;
}

/* The verbs of r's main resource, as kube-apiserver lists them. */
static json_t *verbs_json(const struct shim_resource *r) {
    if (shim_res_deletecollection(r))
        return json_pack("[ssssssss]", "create", "delete", "deletecollection", "get", "list", "patch", "update",
                         "watch");
    return json_pack("[sssssss]", "create", "delete", "get", "list", "patch", "update", "watch");
}

static json_t *short_names_json(const struct shim_resource *r) {
    json_t *sn = json_array();
    for (int k = 0; k < 3 && r->short_names[k]; k++) json_array_append_new(sn, json_string(r->short_names[k]));
    return sn;
}

static json_t *categories_json(const struct shim_resource *r) {
    json_t *c = json_array();
    for (int k = 0; k < SHIM_MAX_CATEGORIES && r->categories[k]; k++)
        json_array_append_new(c, json_string(r->categories[k]));
    return c;
}

/* r's subresources served here: NAME, kind and verbs, in the order
 * kube-apiserver lists them. */
struct subres {
    const char *name, *kind;
    const char *verbs[3];
    const char *group, *version; /* the kind's, when not the resource's (pods/eviction: policy/v1) */
};

static int subresources(const struct shim_resource *r, struct subres *out) {
    int n = 0;
    bool pods = !r->custom && !r->group[0] && !strcmp(r->plural, "pods");
    if (pods) out[n++] = (struct subres){"binding", "Binding", {"create"}, NULL, NULL};
    if (pods) out[n++] = (struct subres){"eviction", "Eviction", {"create"}, "policy", "v1"};
    if (pods) out[n++] = (struct subres){"log", "Pod", {"get"}, NULL, NULL};
    if (shim_workload_scales(r)) out[n++] = (struct subres){"scale", "Scale", {"get", "patch", "update"}, "autoscaling", "v1"};
    if (shim_has_status(r)) out[n++] = (struct subres){"status", r->kind, {"get", "patch", "update"}, NULL, NULL};
    return n;
}

static json_t *verbs_of(const struct subres *sr) {
    json_t *v = json_array();
    for (int k = 0; k < 3 && sr->verbs[k]; k++) json_array_append_new(v, json_string(sr->verbs[k]));
    return v;
}

bool shim_disc_wants_aggregated(const struct http_request *req) {
    return strstr(req->accept, "as=APIGroupDiscoveryList") != NULL;
}

#define MAX_GROUP_VERSIONS 8

/* The versions group is served in, in the registry's order: the first is
 * the preferred one (the registry lists a group's v1 before its v1beta1). */
static int group_versions(const struct shim *s, const char *group, const char *out[MAX_GROUP_VERSIONS]) {
    int n = 0;
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r || strcmp(r->group, group) != 0) continue;
        bool seen = false;
        for (int k = 0; k < n && !seen; k++) seen = !strcmp(out[k], r->version);
        if (!seen && n < MAX_GROUP_VERSIONS) out[n++] = r->version;
    }
    return n;
}

/* [{groupVersion, version}] of group, preferred first; *preferred its first. */
static json_t *versions_json(const struct shim *s, const char *group, json_t **preferred) {
    const char *v[MAX_GROUP_VERSIONS];
    int n = group_versions(s, group, v);
    json_t *a = json_array();
    *preferred = NULL;
    for (int k = 0; k < n; k++) {
        char gv[300];
        snprintf(gv, sizeof gv, "%s/%s", group, v[k]);
        json_t *e = json_pack("{s:s, s:s}", "groupVersion", gv, "version", v[k]);
        if (!k) *preferred = json_incref(e);
        json_array_append_new(a, e);
    }
    return a;
}

static json_t *version_discovery(const struct shim *s, const char *group, const char *version) {
    json_t *resources = json_array();
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r || strcmp(r->group, group) != 0 || strcmp(r->version, version) != 0) continue;
        struct subres sr[5];
        int nsr = subresources(r, sr);
        json_t *subs = json_array();
        for (int k = 0; k < nsr; k++) {
            const char *g = sr[k].group ? sr[k].group : sr[k].kind == r->kind ? r->group : "";
            const char *v = sr[k].version ? sr[k].version : r->version;
            json_array_append_new(subs, json_pack("{s:s, s:{s:s, s:s, s:s}, s:o}", "subresource", sr[k].name,
                                                  "responseKind", "group", g, "version", v, "kind",
                                                  sr[k].kind, "verbs", verbs_of(&sr[k])));
        }
        json_t *res = json_pack("{s:s, s:{s:s, s:s, s:s}, s:s, s:s, s:o, s:o}", "resource", r->plural,
                                "responseKind", "group", r->group, "version", r->version, "kind", r->kind, "scope",
                                r->namespaced ? "Namespaced" : "Cluster", "singularResource", r->singular, "verbs",
                                verbs_json(r), "shortNames", short_names_json(r));
        if (r->categories[0]) json_object_set_new(res, "categories", categories_json(r));
        if (nsr) json_object_set_new(res, "subresources", subs);
        else json_decref(subs);
        json_array_append_new(resources, res);
    }
    return json_pack("{s:s, s:o, s:s}", "version", version, "resources", resources, "freshness", "Current");
}

/* A group in aggregated discovery: each version it is served in, the
 * preferred one first (the core group: v1). */
static json_t *group_discovery(const struct shim *s, const char *group) {
    const char *v[MAX_GROUP_VERSIONS];
    int n = group[0] ? group_versions(s, group, v) : 1;
    if (!group[0]) v[0] = "v1";
    json_t *versions = json_array();
    for (int k = 0; k < n; k++) json_array_append_new(versions, version_discovery(s, group, v[k]));
    return json_pack("{s:{s:s}, s:o}", "metadata", "name", group, "versions", versions);
}

void shim_disc_aggregated(const struct shim *s, struct http_response *resp, bool legacy) {
    json_t *items = json_array();
    if (legacy) json_array_append_new(items, group_discovery(s, ""));
    else
        for (int i = 0; i < shim_res_count(s); i++) {
            if (!shim_res_at(s, i)) continue;
            const char *g = shim_res_at(s, i)->group;
            bool seen = !g[0];
            for (int j = 0; j < i && !seen; j++) seen = shim_res_at(s, j) && !strcmp(shim_res_at(s, j)->group, g);
            if (!seen) json_array_append_new(items, group_discovery(s, g));
        }
    shim_json(resp, 200,
              json_pack("{s:s, s:s, s:{}, s:o}", "kind", "APIGroupDiscoveryList", "apiVersion",
                        "apidiscovery.k8s.io/v2", "metadata", "items", items));
    resp->content_type = AGGREGATED_CT;
}

void shim_disc_group_list(const struct shim *s, struct http_response *resp) {
    json_t *groups = json_array();
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r) continue;
        bool seen = !r->group[0];
        for (int j = 0; j < i && !seen; j++) seen = shim_res_at(s, j) && !strcmp(shim_res_at(s, j)->group, r->group);
        if (seen) continue;
        json_t *preferred, *versions = versions_json(s, r->group, &preferred);
        json_array_append_new(groups, json_pack("{s:s, s:o, s:o}", "name", r->group, "versions", versions,
                                                "preferredVersion", preferred));
    }
    shim_json(resp, 200, json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups", groups));
}

void shim_disc_resource_list(const struct shim *s, struct http_response *resp, const char *group,
                             const char *version) {
    json_t *list = json_array();
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r || strcmp(r->group, group) || strcmp(r->version, version)) continue;
        json_t *res = json_pack("{s:s, s:s, s:b, s:s, s:o, s:o}", "name", r->plural, "singularName", r->singular,
                                "namespaced", r->namespaced, "kind", r->kind, "verbs", verbs_json(r), "shortNames",
                                short_names_json(r));
        if (r->categories[0]) json_object_set_new(res, "categories", categories_json(r));
        json_array_append_new(list, res);
        struct subres sr[5];
        int nsr = subresources(r, sr);
        for (int k = 0; k < nsr; k++) {
            char sub[300];
            snprintf(sub, sizeof sub, "%s/%s", r->plural, sr[k].name);
            json_t *e = json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", sub, "singularName", "", "namespaced",
                                  r->namespaced, "kind", sr[k].kind, "verbs", verbs_of(&sr[k]));
            if (sr[k].group) { /* kubectl drain reads the Eviction's group and version here */
                json_object_set_new(e, "group", json_string(sr[k].group));
                json_object_set_new(e, "version", json_string(sr[k].version));
            }
            json_array_append_new(list, e);
        }
    }
    if (json_array_size(list) == 0) {
        json_decref(list);
        shim_status(resp, 404, "NotFound", NULL, "the server could not find the requested resource");
        return;
    }
    char gv[300];
    snprintf(gv, sizeof gv, "%s%s%s", group, group[0] ? "/" : "", version);
    shim_json(resp, 200, json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                                   "groupVersion", gv, "resources", list));
}

/* The group of r, when it is a group's first resource in the registry. */
static bool first_of_group(const struct shim *s, int i) {
    const struct shim_resource *r = shim_res_at(s, i);
    if (!r || !r->group[0]) return false;
    for (int j = 0; j < i; j++)
        if (shim_res_at(s, j) && !strcmp(shim_res_at(s, j)->group, r->group)) return false;
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void shim_disc_root(const struct shim *s, struct http_response *resp) {
    static const char *const fixed[] = {"/api",     "/api/v1",    "/apis",        "/apis/",     "/healthz",
                                        "/livez",   "/metrics",   "/openapi/v2",  "/openapi/v3", "/openapi/v3/",
                                        "/readyz",  "/version"};
    size_t nfixed = sizeof fixed / sizeof fixed[0], cap = nfixed + 2 * (size_t)shim_res_count(s), n = 0;
    char **paths = calloc(cap, sizeof *paths);
    if (!paths) {
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    for (size_t i = 0; i < nfixed; i++)
        if ((paths[n] = strdup(fixed[i]))) n++;
    for (int i = 0; i < shim_res_count(s); i++) {
        if (!first_of_group(s, i)) continue;
        const struct shim_resource *r = shim_res_at(s, i);
        const char *v[MAX_GROUP_VERSIONS];
        int nv = group_versions(s, r->group, v);
        size_t len = strlen(r->group) + 8;
        if ((paths[n] = malloc(len))) snprintf(paths[n++], len, "/apis/%s", r->group);
        for (int k = 0; k < nv && n < cap; k++) {
            size_t vlen = strlen(r->group) + strlen(v[k]) + 8;
            if ((paths[n] = malloc(vlen))) snprintf(paths[n++], vlen, "/apis/%s/%s", r->group, v[k]);
        }
    }
    qsort(paths, n, sizeof *paths, cmp_str);
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(a, json_string(paths[i]));
        free(paths[i]);
    }
    free(paths);
    shim_json(resp, 200, json_pack("{s:o}", "paths", a));
}

void shim_disc_group(const struct shim *s, struct http_response *resp, const char *group) {
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r || !r->group[0] || strcmp(r->group, group) != 0) continue;
        json_t *preferred, *versions = versions_json(s, r->group, &preferred);
        shim_json(resp, 200, json_pack("{s:s, s:s, s:s, s:o, s:o}", "kind", "APIGroup", "apiVersion", "v1", "name",
                                       r->group, "versions", versions, "preferredVersion", preferred));
        return;
    }
    shim_status(resp, 404, "NotFound", NULL, "the server could not find the requested resource");
}

void shim_disc_version(struct http_response *resp) {
    shim_json(resp, 200,
              json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "major", "1", "minor", "32", "gitVersion",
                        "v1.32.0-peloton", "gitCommit", "", "gitTreeState", "clean", "buildDate",
                        "2026-11-22T00:00:00Z", "goVersion", "c17", "compiler", "gcc", "platform", "linux/amd64"));
}

