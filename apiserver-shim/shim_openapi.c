/* OpenAPI as far as kubectl needs it to apply: /openapi/v3 lists a document
 * per group-version; each declares, for every kind served, the PATCH
 * operation with its group-version-kind and the fieldValidation parameter, so
 * kubectl knows the server takes field validation, and each kind's schema
 * (the CRD's, or for the built-ins builtin-schemas.json) for kubectl explain.
 * /openapi/v2 is an empty protobuf document (kubectl 1.20 asks it). */
#include <stdio.h>
#include <string.h>

#include "builtin_schemas.h"
#include "shim.h"

#define OPENAPI_V2_CT "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

static void gv_path(const struct shim_resource *r, char *buf, size_t len) {
    if (r->group[0]) snprintf(buf, len, "apis/%s/%s", r->group, r->version);
    else snprintf(buf, len, "api/%s", r->version);
}

static void openapi_index(const struct shim *s, struct http_response *resp) {
    json_t *paths = json_object();
    for (int i = 0; i < shim_res_count(s); i++) {
        char gv[300], url[400];
        if (!shim_res_at(s, i)) continue;
        gv_path(shim_res_at(s, i), gv, sizeof gv);
        if (json_object_get(paths, gv)) continue;
        snprintf(url, sizeof url, "/openapi/v3/%s?hash=peloton1", gv);
        json_object_set_new(paths, gv, json_pack("{s:s}", "serverRelativeURL", url));
    }
    shim_json(resp, 200, json_pack("{s:o}", "paths", paths));
}

static json_t *patch_op(const struct shim_resource *r) {
    return json_pack("{s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:{s:s}, s:b}], s:{s:{s:s}}}",
                     "x-kubernetes-group-version-kind", "group", r->group, "version", r->version, "kind", r->kind,
                     "parameters", "name", "fieldValidation", "in", "query", "schema", "type", "string",
                     "uniqueItems", 1, "responses", "200", "description", "OK");
}

static bool openapi_group_version(const struct shim *s, const char *gvpath, struct http_response *resp) {
    json_t *paths = json_object();
    json_t *schemas = json_object(), *builtins = NULL;
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r) continue;
        char gv[300], p[600];
        gv_path(r, gv, sizeof gv);
        if (strcmp(gv, gvpath) != 0) continue;
        if (r->namespaced)
            snprintf(p, sizeof p, "/%s/namespaces/{namespace}/%s/{name}", gv, r->plural);
        else
            snprintf(p, sizeof p, "/%s/%s/{name}", gv, r->plural);
        json_object_set_new(paths, p, json_pack("{s:o}", "patch", patch_op(r)));
        json_t *own = NULL;
        if (!r->custom) { /* the built-ins' schemas, embedded from builtin-schemas.json */
            if (!builtins) builtins = json_loads(builtin_schemas_json, 0, NULL);
            own = json_object_get(json_object_get(json_object_get(builtins, r->group), r->version), r->kind);
        }
        const json_t *schema = r->openapi ? r->openapi : own;
        if (schema) { /* so kubectl explain has something to show */
            char key[600];
            snprintf(key, sizeof key, "%s.%s.%s", r->group[0] ? r->group : "core", r->version, r->kind);
            json_t *sch = json_deep_copy(schema);
            json_object_set_new(sch, "x-kubernetes-group-version-kind",
                                json_pack("[{s:s, s:s, s:s}]", "group", r->group, "version", r->version, "kind", r->kind));
            json_object_set_new(schemas, key, sch);
        }
    }
    json_decref(builtins);
    if (json_object_size(paths) == 0) {
        json_decref(paths);
        json_decref(schemas);
        return false;
    }
    shim_json(resp, 200, json_pack("{s:s, s:{s:s, s:s}, s:o, s:{s:o}}", "openapi", "3.0.0", "info", "title",
                                   "Peloton-C", "version", "v1.32.0-peloton", "paths", paths, "components",
                                   "schemas", schemas));
    return true;
}

bool shim_openapi(const struct shim *s, const char *path, struct http_response *resp) {
    if (!strcmp(path, "/openapi/v3") || !strcmp(path, "/openapi/v3/")) {
        openapi_index(s, resp);
        return true;
    }
    if (!strncmp(path, "/openapi/v3/", 12)) return openapi_group_version(s, path + 12, resp);
    if (!strcmp(path, "/openapi/v2")) {
        resp->status = 200;
        resp->content_type = OPENAPI_V2_CT;
        return true;
    }
    return false;
}
