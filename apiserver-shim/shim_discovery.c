/* Discovery: /version, /api, /apis and the group-version resource lists,
 * legacy and aggregated (apidiscovery.k8s.io/v2, with its exact content type),
 * from the registry. */
#include <stdio.h>
#include <string.h>

#include "shim.h"

#define VERBS "create", "delete", "deletecollection", "get", "list", "patch", "update"
#define AGGREGATED_CT "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


static json_t *verbs_json(void) { return json_pack("[sssssss]", VERBS); }

bool shim_disc_wants_aggregated(const struct http_request *req) {
    return strstr(req->accept, "as=APIGroupDiscoveryList") != NULL;
}

static json_t *group_discovery(const struct shim *s, const char *group) {
    json_t *resources = json_array();
    const char *version = "v1";
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r || strcmp(r->group, group) != 0) continue;
        version = r->version;
        json_t *sn = json_array();
        for (int k = 0; k < 3 && r->short_names[k]; k++) json_array_append_new(sn, json_string(r->short_names[k]));
        json_array_append_new(resources,
                              json_pack("{s:s, s:{s:s, s:s, s:s}, s:s, s:s, s:o, s:o}", "resource", r->plural,
                                        "responseKind", "group", r->group, "version", r->version, "kind", r->kind,
                                        "scope", r->namespaced ? "Namespaced" : "Cluster", "singularResource",
                                        r->singular, "verbs", verbs_json(), "shortNames", sn));
    }
    return json_pack("{s:{s:s}, s:[{s:s, s:o, s:s}]}", "metadata", "name", group, "versions", "version", version,
                     "resources", resources, "freshness", "Current");
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
        char gv[300];
        snprintf(gv, sizeof gv, "%s/%s", r->group, r->version);
        json_array_append_new(groups, json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "name", r->group, "versions",
                                                "groupVersion", gv, "version", r->version, "preferredVersion",
                                                "groupVersion", gv, "version", r->version));
    }
    shim_json(resp, 200, json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups", groups));
}

void shim_disc_resource_list(const struct shim *s, struct http_response *resp, const char *group,
                             const char *version) {
    json_t *list = json_array();
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r || strcmp(r->group, group) || strcmp(r->version, version)) continue;
        json_t *sn = json_array();
        for (int k = 0; k < 3 && r->short_names[k]; k++) json_array_append_new(sn, json_string(r->short_names[k]));
        json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:s, s:o, s:o}", "name", r->plural, "singularName",
                                              r->singular, "namespaced", r->namespaced, "kind", r->kind, "verbs",
                                              verbs_json(), "shortNames", sn));
        char sub[128];
        if (shim_has_status(r)) {
            snprintf(sub, sizeof sub, "%s/status", r->plural);
            json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:s, s:[sss]}", "name", sub, "singularName", "",
                                                  "namespaced", r->namespaced, "kind", r->kind, "verbs", "get",
                                                  "patch", "update"));
        }
        if (!strcmp(r->plural, "pods"))
            json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:s, s:[s]}", "name", "pods/binding",
                                                  "singularName", "", "namespaced", 1, "kind", "Binding", "verbs",
                                                  "create"));
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

void shim_disc_version(struct http_response *resp) {
    shim_json(resp, 200,
              json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "major", "1", "minor", "32", "gitVersion",
                        "v1.32.0-peloton", "gitCommit", "", "gitTreeState", "clean", "buildDate",
                        "2026-11-22T00:00:00Z", "goVersion", "c17", "compiler", "gcc", "platform", "linux/amd64"));
}

