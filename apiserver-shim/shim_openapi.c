/* OpenAPI as kubectl reads it, and the cache of its documents.
 *
 * /openapi/v3 lists a document per group-version; each declares, for every
 * kind served, the PATCH operation with its group-version-kind and the
 * fieldValidation parameter (so kubectl 1.27+ knows the server validates
 * fields), and the schemas of its kinds with every type they use: the
 * built-ins' from builtin-schemas.json, a CRD's from its schema (kubectl
 * explain reads them).
 *
 * /openapi/v2 is the Swagger 2.0 document of everything served
 * (shim_openapi_v2.c), as protobuf (openapi.v2.Document) for clients that
 * accept it, as kubectl up to 1.26 does, else as JSON.
 *
 * Documents are built on first request and kept until the served custom
 * resources change (s->crd_gen): kubectl asks for them on most commands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin_schemas.h"
#include "jparse.h"
#include "openapi_pb.h"
#include "shim.h"

#define OPENAPI_V2_PB_CT "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
#define V2_REF "#/definitions/"
#define V3_REF "#/components/schemas/"
#define REF_MAX_DEPTH 64 /* nesting within one built-in definition (they are a few levels deep) */

struct shim_oapi {
    json_t *builtins;   /* builtin-schemas.json's definitions, parsed once */
    bool built;         /* the documents below are those of crd_gen */
    uint64_t crd_gen;
    unsigned char *v2_pb;
    size_t v2_pb_len;
    char *v2_json;
    size_t v2_json_len;
    json_t *v3; /* group-version path -> its document's JSON text, built on demand */
};

static struct shim_oapi *cache(struct shim *s) {
    if (!s->oapi) s->oapi = calloc(1, sizeof *s->oapi);
    return s->oapi;
}

static void drop_documents(struct shim_oapi *c) {
    free(c->v2_pb);
    free(c->v2_json);
    json_decref(c->v3);
    c->v2_pb = NULL;
    c->v2_json = NULL;
    c->v2_pb_len = c->v2_json_len = 0;
    c->v3 = NULL;
    c->built = false;
}

void shim_openapi_free(struct shim *s) {
    if (!s->oapi) return;
    drop_documents(s->oapi);
    json_decref(s->oapi->builtins);
    free(s->oapi);
    s->oapi = NULL;
}

const json_t *shim_openapi_builtins(struct shim *s) {
    struct shim_oapi *c = cache(s);
    if (!c) return NULL;
    if (!c->builtins) {
        json_error_t e;
        json_t *all = json_loads(builtin_schemas_json, 0, &e);
        c->builtins = json_incref(json_object_get(all, "definitions"));
        json_decref(all);
        if (!c->builtins)
            fprintf(stderr, "level=error msg=\"builtin-schemas.json unreadable\" line=%d err=\"%s\"\n", e.line, e.text);
    }
    return c->builtins;
}

/* The cache, emptied when the custom resources changed since it was filled. */
static struct shim_oapi *current(struct shim *s) {
    struct shim_oapi *c = cache(s);
    if (!c || !shim_openapi_builtins(s)) return NULL;
    if (c->built && c->crd_gen != s->crd_gen) drop_documents(c);
    if (!c->built) {
        c->built = true;
        c->crd_gen = s->crd_gen;
    }
    return c;
}

static void reply_copy(struct http_response *resp, const char *ct, const void *body, size_t len) {
    resp->status = 200;
    resp->content_type = ct;
    resp->body = malloc(len ? len : 1);
    if (!resp->body) {
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    memcpy(resp->body, body, len);
    resp->body_len = len;
}

/* ---- /openapi/v2 ---- */

static int build_v2(struct shim *s, struct shim_oapi *c) {
    json_t *doc = shim_openapi_v2_doc(s, c->builtins);
    if (!doc) return -ENOMEM;
    int rc = openapi_pb_encode(doc, 0, &c->v2_pb, &c->v2_pb_len);
    if (!rc) {
        c->v2_json = jdump(doc, JSON_COMPACT, &c->v2_json_len);
        if (!c->v2_json) rc = -ENOMEM;
    }
    json_decref(doc);
    if (rc) {
        free(c->v2_pb);
        c->v2_pb = NULL;
        c->v2_pb_len = 0;
        fprintf(stderr, "level=error msg=\"openapi v2 not built\" rc=%d\n", rc);
    } else {
        fprintf(stderr, "level=info msg=\"openapi v2 built\" protobuf_bytes=%zu json_bytes=%zu crd_gen=%llu\n",
                c->v2_pb_len, c->v2_json_len, (unsigned long long)c->crd_gen);
    }
    return rc;
}

static void serve_v2(struct shim *s, const struct http_request *req, struct http_response *resp) {
    struct shim_oapi *c = current(s);
    if (c && !c->v2_pb) build_v2(s, c);
    if (!c || !c->v2_pb) {
        shim_status(resp, 500, "InternalError", NULL, "the OpenAPI v2 document could not be built");
        return;
    }
    /* kube-apiserver's choice too: protobuf to those who name it, JSON to the rest */
    if (strstr(req->accept, "protobuf")) reply_copy(resp, OPENAPI_V2_PB_CT, c->v2_pb, c->v2_pb_len);
    else reply_copy(resp, "application/json", c->v2_json, c->v2_json_len);
}

/* ---- /openapi/v3 ---- */

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

/* A built-in definition (written with v2's $refs) as OpenAPI v3 has it, as a
 * new value: references point into components/schemas, and a reference with
 * a description of its own becomes allOf [the reference] beside it, as
 * kube-apiserver writes it (a v3 $ref's siblings are ignored). Every type it
 * names is added to want. */
static json_t *to_v3(const json_t *s, json_t *want, int depth) {
    if (!json_is_object(s) || depth > REF_MAX_DEPTH) return json_deep_copy(s);
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        if (!strcmp(k, "$ref") && json_is_string(v) && !strncmp(json_string_value(v), V2_REF, strlen(V2_REF))) {
            const char *name = json_string_value(v) + strlen(V2_REF);
            char ref[400];
            snprintf(ref, sizeof ref, "%s%s", V3_REF, name);
            json_object_set_new(want, name, json_true());
            if (json_object_size(s) == 1) json_object_set_new(out, "$ref", json_string(ref));
            else json_object_set_new(out, "allOf", json_pack("[{s:s}]", "$ref", ref));
        } else if (!strcmp(k, "properties") && json_is_object(v)) {
            json_t *props = json_object();
            const char *pk;
            json_t *pv;
            json_object_foreach(v, pk, pv) json_object_set_new(props, pk, to_v3(pv, want, depth + 1));
            json_object_set_new(out, k, props);
        } else if (!strcmp(k, "items") || !strcmp(k, "additionalProperties")) {
            json_object_set_new(out, k, to_v3(v, want, depth + 1));
        } else {
            json_object_set(out, k, v);
        }
    }
    return out;
}

/* Adds to schemas every definition named in want, and those they name in
 * turn, round by round (want is not changed while it is walked); empties want. */
static void add_closure(json_t *schemas, const json_t *builtins, json_t *want) {
    while (json_object_size(want)) {
        json_t *next = json_object();
        const char *name;
        json_t *v;
        json_object_foreach(want, name, v) {
            if (json_object_get(schemas, name)) continue;
            const json_t *def = json_object_get(builtins, name);
            json_object_set_new(schemas, name, def ? to_v3(def, next, 0) : json_object());
        }
        json_object_clear(want);
        json_object_update(want, next);
        json_decref(next);
    }
}

static json_t *v3_document(struct shim *s, const json_t *builtins, const char *gvpath) {
    json_t *paths = json_object(), *schemas = json_object(), *want = json_object();
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (!r) continue;
        char gv[300], p[600], def[300];
        gv_path(r, gv, sizeof gv);
        if (strcmp(gv, gvpath) != 0) continue;
        if (r->namespaced)
            snprintf(p, sizeof p, "/%s/namespaces/{namespace}/%s/{name}", gv, r->plural);
        else
            snprintf(p, sizeof p, "/%s/%s/{name}", gv, r->plural);
        json_object_set_new(paths, p, json_pack("{s:o}", "patch", patch_op(r)));
        shim_openapi_def_name(builtins, r, def, sizeof def);
        if (r->custom) {
            json_object_set_new(schemas, def, shim_openapi_cr_schema(r, V3_REF, false));
            json_object_set_new(want, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", json_true());
        } else if (def[0]) {
            json_object_set_new(want, def, json_true());
        }
    }
    add_closure(schemas, builtins, want);
    json_decref(want);
    if (json_object_size(paths) == 0) {
        json_decref(paths);
        json_decref(schemas);
        return NULL;
    }
    return json_pack("{s:s, s:{s:s, s:s}, s:o, s:{s:o}}", "openapi", "3.0.0", "info", "title", "Peloton-C", "version",
                     "v1.32.0-peloton", "paths", paths, "components", "schemas", schemas);
}

static bool openapi_group_version(struct shim *s, const char *gvpath, struct http_response *resp) {
    struct shim_oapi *c = current(s);
    if (!c) {
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return true;
    }
    if (!c->v3) c->v3 = json_object();
    const json_t *have = json_object_get(c->v3, gvpath);
    if (!have) {
        json_t *doc = v3_document(s, c->builtins, gvpath);
        if (!doc) return false;
        size_t len = 0;
        char *text = jdump(doc, JSON_COMPACT, &len);
        json_decref(doc);
        if (text) json_object_set_new(c->v3, gvpath, json_stringn_nocheck(text, len));
        free(text);
        have = json_object_get(c->v3, gvpath);
        if (!have) {
            shim_status(resp, 500, "InternalError", NULL, "out of memory");
            return true;
        }
    }
    reply_copy(resp, "application/json", json_string_value(have), json_string_length(have));
    return true;
}

bool shim_openapi(struct shim *s, const struct http_request *req, struct http_response *resp) {
    const char *path = req->path;
    if (!strcmp(path, "/openapi/v3") || !strcmp(path, "/openapi/v3/")) {
        openapi_index(s, resp);
        return true;
    }
    if (!strncmp(path, "/openapi/v3/", 12)) return openapi_group_version(s, path + 12, resp);
    if (!strcmp(path, "/openapi/v2")) {
        serve_v2(s, req, resp);
        return true;
    }
    return false;
}
