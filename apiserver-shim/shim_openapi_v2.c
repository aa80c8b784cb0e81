/* The Swagger 2.0 document of /openapi/v2, as JSON (shim_openapi.c serves it
 * as such or encoded as protobuf). kubectl up to 1.26 reads three things from
 * it, and this document is made for them:
 * - explain: a definition per kind, found by its x-kubernetes-group-version-kind
 *   extension (a list of {group, kind, version}), walked through properties
 *   and $refs;
 * - --dry-run=server: the first path whose PATCH operation carries the kind's
 *   extension (here one object, as kube-apiserver writes it on operations)
 *   must list a query parameter named dryRun;
 * - client-side validation (--validate=true): an object schema with properties
 *   is closed (an unknown field is an error), one with type object and no
 *   properties is a map of anything, one without type and properties takes
 *   any value. So the built-ins' schemas must be whole (builtin-schemas.json,
 *   scripts/gen-builtin-schemas.py) and CRD schemas are loosened where v2
 *   cannot say what v3 says, as kube-apiserver does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define META_DEF "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
#define CR_MAX_DEPTH 80 /* schema nodes deep; compiled CRD schemas are at most SCHEMA_MAX_DEPTH (64) */

static bool gvk_is(const json_t *def, const struct shim_resource *r) {
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(def, "x-kubernetes-group-version-kind"), i, g) {
        const char *gr = json_string_value(json_object_get(g, "group"));
        const char *v = json_string_value(json_object_get(g, "version"));
        const char *k = json_string_value(json_object_get(g, "kind"));
        if (gr && v && k && !strcmp(gr, r->group) && !strcmp(v, r->version) && !strcmp(k, r->kind)) return true;
    }
    return false;
}

void shim_openapi_def_name(const json_t *builtins, const struct shim_resource *r, char *buf, size_t len) {
    buf[0] = 0;
    if (!r->custom) {
        const char *name;
        const json_t *def;
        json_object_foreach((json_t *)builtins, name, def) {
            if (gvk_is(def, r)) {
                snprintf(buf, len, "%s", name);
                return;
            }
        }
        return;
    }
    /* the group's labels in reverse order: peloton.io -> io.peloton */
    size_t n = 0;
    const char *g = r->group, *end = g + strlen(g);
    while (end > g && n < len) {
        const char *dot = end;
        while (dot > g && dot[-1] != '.') dot--;
        n += (size_t)snprintf(buf + n, len - n, "%s%.*s", n ? "." : "", (int)(end - dot), dot);
        end = dot > g ? dot - 1 : g;
    }
    if (n < len) snprintf(buf + n, len - n, ".%s.%s", r->version, r->kind);
}

static json_t *gvk_list(const struct shim_resource *r) {
    return json_pack("[{s:s, s:s, s:s}]", "group", r->group, "kind", r->kind, "version", r->version);
}

/* One CRD schema node made as kube-apiserver publishes it in v2: no oneOf,
 * anyOf, allOf or not (v2 validation has no such junctors); a node that keeps
 * unknown fields, embeds a resource or may be null loses its type, properties
 * and items (kubectl would refuse what they do not list); an int-or-string
 * node has no type (it is either). */
static void cr_to_v2(json_t *s, int depth) {
    if (!json_is_object(s)) return;
    if (depth > CR_MAX_DEPTH) { /* deeper than any compiled schema: take anything there */
        json_object_clear(s);
        return;
    }
    static const char *const junctors[] = {"oneOf", "anyOf", "allOf", "not"};
    for (size_t i = 0; i < sizeof junctors / sizeof junctors[0]; i++) json_object_del(s, junctors[i]);
    bool loose = json_is_true(json_object_get(s, "x-kubernetes-preserve-unknown-fields")) ||
                 json_is_true(json_object_get(s, "x-kubernetes-embedded-resource")) ||
                 json_is_true(json_object_get(s, "nullable"));
    json_object_del(s, "nullable");
    if (loose) {
        static const char *const gone[] = {"type", "properties", "items", "additionalProperties",
                                           "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"};
        for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) json_object_del(s, gone[i]);
    }
    if (json_is_true(json_object_get(s, "x-kubernetes-int-or-string"))) json_object_del(s, "type");
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(s, "properties"), k, v) cr_to_v2(v, depth + 1);
    cr_to_v2(json_object_get(s, "items"), depth + 1);
    cr_to_v2(json_object_get(s, "additionalProperties"), depth + 1);
}

json_t *shim_openapi_cr_schema(const struct shim_resource *r, const char *refprefix, bool v2) {
    json_t *s = json_is_object(r->openapi) ? json_deep_copy(r->openapi) : json_object();
    if (!s) return NULL;
    if (v2) cr_to_v2(s, 0);
    json_t *props = json_object_get(s, "properties");
    if (json_is_object(props)) { /* what every object has, as for the built-ins */
        char ref[300];
        snprintf(ref, sizeof ref, "%s%s", refprefix, META_DEF);
        json_object_set_new(props, "apiVersion", json_pack("{s:s, s:s}", "type", "string", "description",
                                                             "The versioned schema of this representation of the object."));
        json_object_set_new(props, "kind", json_pack("{s:s, s:s}", "type", "string", "description",
                                                       "The kind of the object."));
        json_object_set_new(props, "metadata", json_pack("{s:s, s:s}", "$ref", ref, "description",
                                                           "Standard object metadata."));
    }
    json_object_set_new(s, "x-kubernetes-group-version-kind", gvk_list(r));
    return s;
}

/* ---- paths ---- */

/* "CoreV1", "CoordinationV1", "PelotonIoV1alpha1": the group-version in operation ids. */
static void op_group(const struct shim_resource *r, char *buf, size_t len) {
    size_t n = 0;
    const char *g = r->group[0] ? r->group : "core";
    size_t glen = strlen(g);
    if (glen > 7 && !strcmp(g + glen - 7, ".k8s.io")) glen -= 7;
    bool up = true;
    for (size_t i = 0; i < glen && n + 1 < len; i++) {
        if (g[i] == '.' || g[i] == '-') {
            up = true;
            continue;
        }
        buf[n++] = up && g[i] >= 'a' && g[i] <= 'z' ? (char)(g[i] - 'a' + 'A') : g[i];
        up = false;
    }
    buf[n] = 0;
    if (n < len) snprintf(buf + n, len - n, "%c%s", r->version[0] == 'v' ? 'V' : r->version[0], r->version + 1);
}

static json_t *query(const char *name, const char *type, const char *description) {
    return json_pack("{s:s, s:s, s:s, s:b, s:s}", "name", name, "in", "query", "type", type, "uniqueItems", 1,
                     "description", description);
}

static json_t *path_param(const char *name, const char *description) {
    return json_pack("{s:s, s:s, s:b, s:s, s:b, s:s}", "name", name, "in", "path", "required", 1, "type", "string",
                     "uniqueItems", 1, "description", description);
}

enum op_kind { OP_READ, OP_LIST, OP_CREATE, OP_REPLACE, OP_PATCH, OP_DELETE, OP_DELETE_COLLECTION };

/* One operation on r's kind (def: its definition name, "" when none). */
static json_t *operation(const struct shim_resource *r, const char *def, enum op_kind k, const char *verb,
                         const char *suffix, bool all_namespaces) {
    static const char *const actions[] = {"get", "list", "post", "put", "patch", "delete", "deletecollection"};
    char grp[200], id[400], ref[400];
    op_group(r, grp, sizeof grp);
    snprintf(id, sizeof id, "%s%s%s%s%s%s", verb, grp, r->namespaced && !all_namespaces ? "Namespaced" : "", r->kind,
             suffix, all_namespaces ? "ForAllNamespaces" : "");
    snprintf(ref, sizeof ref, "#/definitions/%s", def);
    json_t *params = json_array();
    bool write = k >= OP_CREATE;
    if (write) json_array_append_new(params, query("dryRun", "string", "All: check the request and write nothing."));
    if (k == OP_CREATE || k == OP_REPLACE || k == OP_PATCH) {
        json_array_append_new(params, query("fieldManager", "string", "The name of the actor making the change."));
        json_array_append_new(params, query("fieldValidation", "string",
                                            "Ignore, Warn or Strict: what to do with unknown or duplicate fields."));
        json_t *schema = k == OP_PATCH ? json_pack("{s:s}", "type", "object")
                         : def[0]      ? json_pack("{s:s}", "$ref", ref)
                                       : json_object();
        json_array_append_new(params, json_pack("{s:s, s:s, s:b, s:o}", "name", "body", "in", "body", "required", 1,
                                                "schema", schema));
    }
    if (k == OP_PATCH) json_array_append_new(params, query("force", "boolean", "Server-side apply: take over conflicting fields."));
    if (k == OP_LIST || k == OP_DELETE_COLLECTION) {
        json_array_append_new(params, query("labelSelector", "string", "Only objects whose labels match."));
        json_array_append_new(params, query("fieldSelector", "string", "Only objects whose fields match."));
    }
    if (k == OP_LIST) {
        json_array_append_new(params, query("limit", "integer", "At most this many objects in one answer."));
        json_array_append_new(params, query("continue", "string", "Where the previous page ended."));
        json_array_append_new(params, query("resourceVersion", "string", "The version to list or watch from."));
        json_array_append_new(params, query("watch", "boolean", "Stream changes instead of listing."));
        json_array_append_new(params, query("timeoutSeconds", "integer", "End a list or watch after this long."));
        json_array_append_new(params, query("allowWatchBookmarks", "boolean", "Send BOOKMARK events."));
    }
    if (k == OP_DELETE || k == OP_DELETE_COLLECTION)
        json_array_append_new(params, query("gracePeriodSeconds", "integer", "Seconds before the object is deleted."));
    json_t *ok = json_pack("{s:s}", "description", "OK");
    if (def[0] && k != OP_LIST && k != OP_DELETE_COLLECTION) json_object_set_new(ok, "schema", json_pack("{s:s}", "$ref", ref));
    json_t *responses = json_pack("{s:o, s:{s:s}}", "200", ok, "401", "description", "Unauthorized");
    if (k == OP_CREATE) json_object_set(responses, "201", json_object_get(responses, "200"));
    json_t *consumes = k != OP_PATCH ? json_pack("[s]", "*/*")
                       : r->custom   ? json_pack("[s, s, s]", "application/json-patch+json",
                                                 "application/merge-patch+json", "application/apply-patch+yaml")
                                     : json_pack("[s, s, s, s]", "application/json-patch+json",
                                                 "application/merge-patch+json", "application/strategic-merge-patch+json",
                                                 "application/apply-patch+yaml");
    return json_pack("{s:s, s:o, s:[s, s], s:o, s:o, s:s, s:{s:s, s:s, s:s}}", "operationId", id, "consumes", consumes,
                     "produces", "application/json", "application/yaml", "parameters", params, "responses", responses,
                     "x-kubernetes-action", actions[k], "x-kubernetes-group-version-kind", "group", r->group, "kind",
                     r->kind, "version", r->version);
}

static json_t *path_item(json_t *params) { return json_pack("{s:o}", "parameters", params); }

/* The paths of one served resource: its collection (per namespace, and across
 * them for a namespaced one), an object, and its status when it has one. */
static void add_paths(json_t *paths, const struct shim_resource *r, const json_t *builtins) {
    char def[300], base[300], p[700];
    if (r->custom) shim_openapi_def_name(NULL, r, def, sizeof def);
    else shim_openapi_def_name(builtins, r, def, sizeof def);
    if (r->group[0]) snprintf(base, sizeof base, "/apis/%s/%s", r->group, r->version);
    else snprintf(base, sizeof base, "/api/%s", r->version);
    const char *ns = r->namespaced ? "/namespaces/{namespace}" : "";
    json_t *nsparam = path_param("namespace", "The object's namespace.");
    json_t *pretty = query("pretty", "string", "Indent the answer.");

    json_t *coll = path_item(r->namespaced ? json_pack("[O, O]", nsparam, pretty) : json_pack("[O]", pretty));
    json_object_set_new(coll, "get", operation(r, def, OP_LIST, "list", "", false));
    json_object_set_new(coll, "post", operation(r, def, OP_CREATE, "create", "", false));
    json_object_set_new(coll, "delete", operation(r, def, OP_DELETE_COLLECTION, "deletecollection", "", false));
    snprintf(p, sizeof p, "%s%s/%s", base, ns, r->plural);
    json_object_set_new(paths, p, coll);

    json_t *name = path_param("name", "The object's name.");
    json_t *item = path_item(r->namespaced ? json_pack("[O, O, O]", name, nsparam, pretty)
                                           : json_pack("[O, O]", name, pretty));
    json_object_set_new(item, "get", operation(r, def, OP_READ, "read", "", false));
    json_object_set_new(item, "put", operation(r, def, OP_REPLACE, "replace", "", false));
    json_object_set_new(item, "patch", operation(r, def, OP_PATCH, "patch", "", false));
    json_object_set_new(item, "delete", operation(r, def, OP_DELETE, "delete", "", false));
    snprintf(p, sizeof p, "%s%s/%s/{name}", base, ns, r->plural);
    json_object_set_new(paths, p, item);

    if (r->custom ? r->has_status : shim_has_status(r)) {
        json_t *st = path_item(r->namespaced ? json_pack("[O, O, O]", name, nsparam, pretty)
                                             : json_pack("[O, O]", name, pretty));
        json_object_set_new(st, "get", operation(r, def, OP_READ, "read", "Status", false));
        json_object_set_new(st, "put", operation(r, def, OP_REPLACE, "replace", "Status", false));
        json_object_set_new(st, "patch", operation(r, def, OP_PATCH, "patch", "Status", false));
        snprintf(p, sizeof p, "%s%s/%s/{name}/status", base, ns, r->plural);
        json_object_set_new(paths, p, st);
    }
    if (r->namespaced) {
        json_t *all = path_item(json_pack("[O]", pretty));
        json_object_set_new(all, "get", operation(r, def, OP_LIST, "list", "", true));
        snprintf(p, sizeof p, "%s/%s", base, r->plural);
        json_object_set_new(paths, p, all);
    }
    json_decref(name);
    json_decref(nsparam);
    json_decref(pretty);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

json_t *shim_openapi_v2_doc(const struct shim *s, const json_t *builtins) {
    json_t *paths = json_object(), *defs = json_object();
    if (!paths || !defs || json_object_update(defs, (json_t *)builtins)) goto oom;
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r) continue;
        add_paths(paths, r, builtins);
        if (!r->custom) continue;
        char def[300];
        shim_openapi_def_name(NULL, r, def, sizeof def);
        json_t *sch = shim_openapi_cr_schema(r, "#/definitions/", true);
        if (!sch || json_object_set_new(defs, def, sch)) goto oom;
    }
    /* kube-apiserver sorts its paths; kubectl takes the first one naming a kind */
    json_t *sorted = json_object();
    const char **keys = malloc(json_object_size(paths) * sizeof *keys + 1);
    size_t n = 0;
    const char *k;
    json_t *v;
    if (!sorted || !keys) {
        json_decref(sorted);
        free(keys);
        goto oom;
    }
    json_object_foreach(paths, k, v) keys[n++] = k;
    qsort(keys, n, sizeof *keys, cmp_str);
    for (size_t i = 0; i < n; i++) json_object_set(sorted, keys[i], json_object_get(paths, keys[i]));
    free(keys);
    json_decref(paths);
    return json_pack("{s:s, s:{s:s, s:s}, s:o, s:o}", "swagger", "2.0", "info", "title", "Peloton-C", "version",
                     "v1.32.0-peloton", "paths", sorted, "definitions", defs);
oom:
    json_decref(paths);
    json_decref(defs);
    return NULL;
}
