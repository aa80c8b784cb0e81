/* Routing, authentication, discovery and the CRUD verbs. */
#include "shim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "patch.h"
#include "selector.h"
#include "jparse.h"
#include "shim_proto.h"
#include "ui.h"
#include "shim_auth.h"

#define MAX_SEGMENTS 8

struct shim *shim_new(struct store *st, const struct shim_config *cfg) {
    struct shim *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->st = st;
    if (cfg && cfg->token && cfg->token[0] && !(s->token = strdup(cfg->token))) {
        free(s);
        return NULL;
    }
    s->token_on_plain = cfg && cfg->token_on_plain;
    s->list_page_bytes = cfg && cfg->list_page_bytes ? cfg->list_page_bytes : API_LIST_PAGE_BYTES;
    s->astore = cfg ? cfg->astore : NULL;
    s->loop = cfg ? cfg->loop : NULL;
    s->hub = watch_hub_new(s, cfg);
    s->reaper = shim_ns_reaper_new(s, cfg ? cfg->loop : NULL);
    s->pidx = podindex_new(s, s->loop, PODINDEX_NODE);
    s->lidx = podindex_new(s, s->loop, PODINDEX_LABEL);
    s->metrics = shim_metrics_new(cfg ? cfg->metrics : NULL);
    s->sec = cfg ? cfg->sec : NULL;
    s->list_memory = cfg && cfg->list_memory ? cfg->list_memory : SHIM_DEFAULT_LIST_MEMORY;
    s->slice_pack = store_pack_new(); /* NULL: items are kept plain */
    s->evttl = shim_event_ttl_new(s, s->loop, cfg ? cfg->event_ttl_s : 0, cfg ? cfg->metrics : NULL);
    return s;
}

void shim_detach_async(struct shim *s) {
    if (!s) return;
    shim_lease_flush(s); /* renewals waiting for their batch go before the connection */
    s->astore = NULL;
    watch_detach_async(s->hub);
}

void shim_free(struct shim *s) {
    if (!s) return;
    shim_slices_free_all(s);
    store_pack_free(s->slice_pack);
    podindex_free(s->pidx);
    podindex_free(s->lidx);
    watch_hub_free(s->hub);
    shim_ns_reaper_free(s->reaper);
    shim_event_ttl_free(s->evttl);
    shim_openapi_free(s);
    shim_crd_free(s);
    shim_metrics_free(s->metrics);
    shim_sec_free(s->sec);
    shim_lease_free(s);
    free(s->token);
    free(s);
}


/* "configmaps" or "leases.coordination.k8s.io", as Kubernetes names a resource in messages. */
static void qualified(const struct shim_resource *r, char *buf, size_t len) {
    if (r->group[0]) snprintf(buf, len, "%s.%s", r->plural, r->group);
    else snprintf(buf, len, "%s", r->plural);
}

static json_t *details(const struct shim_resource *r, const char *name) {
    json_t *d = json_pack("{s:s, s:s}", "group", r->group, "kind", r->plural);
    if (name && name[0]) json_object_set_new(d, "name", shim_string(name));
    return d;
}

/* A field's error from the store ("metadata.name: Invalid value: ...") as
 * kube-apiserver words an Invalid: `Pod "x" is invalid: <msg>`, details with
 * the kind (not the resource) and the field as a cause. False when msg is
 * not of that form. */
static bool invalid_field(struct http_response *resp, const struct shim_resource *r, const char *name,
                          const char *msg) {
    static const struct {
        const char *what, *reason;
    } kinds[] = {{"Invalid value", "FieldValueInvalid"},
                 {"Required value", "FieldValueRequired"},
                 {"Unsupported value", "FieldValueNotSupported"},
                 {"Too long", "FieldValueTooLong"}};
    const char *sep = msg ? strstr(msg, ": ") : NULL;
    if (!sep || sep == msg || (size_t)(sep - msg) > 200 || memchr(msg, ' ', (size_t)(sep - msg))) return false;
    const char *rest = sep + 2, *cause = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && !cause; i++)
        if (!strncmp(rest, kinds[i].what, strlen(kinds[i].what))) cause = kinds[i].reason;
    if (!cause) return false;
    json_t *d = json_pack("{s:s, s:s, s:[{s:s, s:s, s:s%}]}", "group", r->group, "kind", r->kind, "causes", "reason",
                          cause, "message", rest, "field", msg, (size_t)(sep - msg));
    if (d && name && name[0]) json_object_set_new(d, "name", shim_string(name));
    shim_status(resp, 422, "Invalid", d, "%s \"%s\" is invalid: %s", r->kind, name ? name : "", msg);
    return true;
}

void shim_store_error(struct shim *s, struct http_response *resp, int rc, const struct shim_resource *r,
                      const char *name) {
    shim_store_error_msg(resp, rc, r, name, store_errmsg(s->st));
}

void shim_store_error_msg(struct http_response *resp, int rc, const struct shim_resource *r, const char *name,
                          const char *msg) {
    char q[300];
    qualified(r, q, sizeof q);
    int code = store_http_code(rc);
    const char *reason = store_reason(rc);
    switch (rc) {
    case -ENOENT:
        shim_status(resp, code, reason, details(r, name), "%s \"%s\" not found", q, name);
        break;
    case -EEXIST:
        shim_status(resp, code, reason, details(r, name), "%s \"%s\" already exists", q, name);
        break;
    case STORE_ECONFLICT:
        if (msg && !strncmp(msg, "Precondition failed: ", 21)) { /* a DELETE's preconditions: kube says which */
            shim_status(resp, code, reason, details(r, name), "Operation cannot be fulfilled on %s \"%s\": %s", q, name,
                        msg);
            break;
        }
        shim_status(resp, code, reason, details(r, name),
                    "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please apply your "
                    "changes to the latest version and try again",
                    q, name);
        break;
    case STORE_NO_NAMESPACE:
        shim_status(resp, code, reason, json_pack("{s:o, s:s}", "name", shim_string(msg), "kind", "namespaces"),
                    "namespaces \"%s\" not found", msg);
        break;
    case STORE_NS_TERMINATING: {
        json_t *d = details(r, name);
        if (d) json_object_set_new(d, "causes", json_pack("[{s:s, s:s, s:s}]", "reason", "NamespaceTerminating",
                                                          "message", msg, "field", "metadata.namespace"));
        shim_status(resp, code, reason, d, "%s", msg);
        break;
    }
    default:
        if (rc == -EINVAL && invalid_field(resp, r, name, msg)) break;
        shim_status(resp, code, reason, details(r, name), "%s", msg);
    }
}

void shim_reply_written(struct shim *s, struct http_response *resp, int rc, const struct shim_resource *r,
                        const char *name, int code, json_t *out) {
    if (rc) {
        json_decref(out);
        shim_store_error(s, resp, rc, r, name);
        return;
    }
    shim_json(resp, code, shim_with_type(r, out));
    if (!r->custom && !strcmp(r->plural, "customresourcedefinitions")) shim_crd_sync(s); /* served at once */
}

int shim_each(struct shim *s, const char *key, const char *ns, uint64_t *rv, int (*fn)(void *ud, json_t *obj),
              void *ud) {
    char *token = NULL;
    int rc = 0, stop = 0;
    for (int pages = 0; pages < 100000 && !stop; pages++) {
        struct store_list l = {0};
        rc = store_list(s->st, key, ns, 500, token, &l);
        free(token);
        token = NULL;
        if (rc) break;
        if (!pages && rv) *rv = l.resource_version;
        size_t i;
        json_t *it;
        json_array_foreach(l.items, i, it) if (!stop) stop = fn(ud, it);
        token = l.continue_token;
        l.continue_token = NULL;
        store_list_free(&l);
        if (!token) break;
    }
    free(token);
    return rc;
}

/* ---- the verbs ---- */

static const char *api_version_of(const struct shim_resource *r, char *buf, size_t len) {
    if (!r->group[0]) return r->version;
    snprintf(buf, len, "%s/%s", r->group, r->version);
    return buf;
}

bool shim_typed(const struct shim_resource *r, const json_t *obj) {
    char av[300];
    const char *k = json_string_value(json_object_get(obj, "kind"));
    const char *v = json_string_value(json_object_get(obj, "apiVersion"));
    if (shim_view_converts(r)) return false; /* shown only through shim_view_out */
    return k && v && !strcmp(k, r->kind) && !strcmp(v, api_version_of(r, av, sizeof av));
}

/* The store keeps what it was given; answers carry kind and apiVersion. */
json_t *shim_with_type(const struct shim_resource *r, json_t *obj) {
    char av[300];
    json_object_set_new(obj, "kind", json_string(r->kind));
    json_object_set_new(obj, "apiVersion", json_string(api_version_of(r, av, sizeof av)));
    return shim_view_out(r, obj);
}

static int namespace_exists(struct shim *s, const char *ns, struct http_response *resp) {
    json_t *o = NULL;
    int rc = store_get(s->st, "namespaces", "", ns, &o);
    json_decref(o);
    if (rc == -ENOENT) {
        shim_status(resp, 404, "NotFound", json_pack("{s:o, s:s}", "name", shim_string(ns), "kind", "namespaces"),
                    "namespaces \"%s\" not found", ns);
        return 0;
    }
    if (rc) {
        shim_status(resp, store_http_code(rc), store_reason(rc), NULL, "%s", store_errmsg(s->st));
        return 0;
    }
    return 1;
}

/* Parses and checks a request body for create and update; NULL after an error reply. */
static json_t *read_body(const struct shim_resource *r, const struct http_request *req, const char *ns,
                         struct http_response *resp) {
    json_t *obj;
    if (shim_pb_request(req)) { /* kubectl's typed objects (shim_proto.h) */
        if (!(obj = shim_pb_body(r->kind, req, resp))) return NULL;
    } else if (req->content_type[0] && strncmp(req->content_type, "application/json", 16) != 0) {
        shim_status(resp, 415, "UnsupportedMediaType", NULL,
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json, " SHIM_PB_MEDIA);
        return NULL;
    } else {
        json_error_t je;
        obj = jparse_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
        if (!obj || !json_is_object(obj)) {
            shim_status(resp, 400, "BadRequest", NULL, "the body of the request could not be decoded as a %s: %s",
                        r->kind, obj ? "not a JSON object" : je.text);
            json_decref(obj);
            return NULL;
        }
    }
    char av[300];
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const char *apiv = json_string_value(json_object_get(obj, "apiVersion"));
    if ((kind && strcmp(kind, r->kind)) || (apiv && strcmp(apiv, api_version_of(r, av, sizeof av)))) {
        shim_status(resp, 400, "BadRequest", NULL, "the API version in the data (%s) does not match the expected API "
                    "version (%s) or kind %s is not %s",
                    apiv ? apiv : "", api_version_of(r, av, sizeof av), kind ? kind : "", r->kind);
        json_decref(obj);
        return NULL;
    }
    json_t *md = json_object_get(obj, "metadata");
    if (md && !json_is_object(md)) {
        shim_status(resp, 400, "BadRequest", NULL, "metadata must be an object");
        json_decref(obj);
        return NULL;
    }
    if (!md) json_object_set_new(obj, "metadata", md = json_object());
    const char *bns = json_string_value(json_object_get(md, "namespace"));
    if (r->namespaced && bns && bns[0] && strcmp(bns, ns) != 0) {
        shim_status(resp, 400, "BadRequest", NULL,
                    "the namespace of the provided object does not match the namespace sent on the request");
        json_decref(obj);
        return NULL;
    }
    return shim_view_in(r, shim_with_type(r, obj));
}

static void generate_name(json_t *md) {
    const char *prefix = json_string_value(json_object_get(md, "generateName"));
    if (!prefix || json_string_value(json_object_get(md, "name"))) return;
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789"; /* Kubernetes' alphabet, no vowels */
    unsigned char rnd[5];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) memset(rnd, 7, sizeof rnd);
    char name[STORE_MAX_NAME + 1];
    int n = snprintf(name, sizeof name, "%.*s", STORE_MAX_NAME - 5, prefix);
    for (int i = 0; i < 5; i++) name[n + i] = alphabet[rnd[i] % (sizeof alphabet - 1)];
    name[n + 5] = 0;
    json_object_set_new(md, "name", json_string(name));
}

static void do_create(struct shim *s, const struct shim_resource *r, const char *ns,
                      const struct http_request *req, struct http_response *resp, bool dry) {
    json_t *obj = read_body(r, req, ns, resp);
    if (!obj) return;
    shim_meta_omit_empty(obj);
    json_t *md = json_object_get(obj, "metadata");
    generate_name(md);
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!name || !name[0]) {
        json_t *causes = json_pack("[{s:s, s:s, s:s}]", "reason", "FieldValueRequired", "message",
                                   "Required value: name or generateName is required", "field", "metadata.name");
        json_t *d = details(r, NULL);
        json_object_set_new(d, "causes", causes);
        shim_status(resp, 422, "Invalid", d, "%s \"\" is invalid: metadata.name: Required value: name or "
                    "generateName is required", r->kind);
        json_decref(obj);
        return;
    }
    /* a new namespace is Active, whatever status the client sent ("status": {} from kubectl) */
    if (!strcmp(r->plural, "namespaces")) json_object_set_new(obj, "status", json_pack("{s:s}", "phase", "Active"));
    if (!strcmp(r->plural, "secrets") && !r->group[0] && !json_string_length(json_object_get(obj, "type")))
        json_object_set_new(obj, "type", json_string("Opaque")); /* kube-apiserver's default */
    if (!strcmp(r->plural, "pods")) shim_pod_defaults(obj);
    if (shim_refuse_invalid(r, obj, name, resp) || shim_crd_admit(s, r, obj, NULL, resp)) {
        json_decref(obj);
        return;
    }
    if (!dry) {
        shim_write_create(s, r, ns, obj, req, resp);
        json_decref(obj);
        return;
    }
    if (r->namespaced && !namespace_exists(s, ns, resp)) {
        json_decref(obj);
        return;
    }
    json_t *out = NULL; /* everything but the write: AlreadyExists still applies */
    int rc = store_get(s->st, r->store_key, r->namespaced ? ns : "", name, &out);
    json_decref(out);
    out = NULL;
    if (rc == 0) rc = -EEXIST;
    else if (rc == -ENOENT) rc = 0, out = json_incref(obj);
    shim_reply_written(s, resp, rc, r, name, 201, out);
    json_decref(obj);
}

static void do_update(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                      const struct http_request *req, struct http_response *resp, bool dry) {
    json_t *obj = read_body(r, req, ns, resp);
    if (!obj) return;
    const char *bname = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!bname || strcmp(bname, name) != 0) {
        shim_status(resp, 400, "BadRequest", NULL, "the name of the object (%s) does not match the name on the URL (%s)",
                    bname ? bname : "", name);
        json_decref(obj);
        return;
    }
    if (shim_refuse_invalid(r, obj, name, resp)) {
        json_decref(obj);
        return;
    }
    if (!dry) {
        shim_write_replace(s, r, ns, name, obj, req, resp);
        return;
    }
    if (shim_has_status(r) && shim_keep_status(s, r, ns, name, obj, resp)) {
        json_decref(obj);
        return;
    }
    if (r->custom || !strcmp(r->plural, "customresourcedefinitions")) {
        json_t *old = NULL;
        store_get(s->st, r->store_key, r->namespaced ? ns : "", name, &old);
        int refused = shim_crd_admit(s, r, obj, old, resp);
        json_decref(old);
        if (refused) {
            json_decref(obj);
            return;
        }
    }
    json_t *out = NULL; /* the update's checks without the write */
    int rc = store_get(s->st, r->store_key, r->namespaced ? ns : "", name, &out);
    const char *want = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    const char *have = json_string_value(json_object_get(json_object_get(out, "metadata"), "resourceVersion"));
    json_decref(out);
    out = NULL;
    if (!rc && want && want[0] && (!have || strcmp(want, have))) rc = STORE_ECONFLICT;
    if (!rc) out = json_incref(obj);
    shim_reply_written(s, resp, rc, r, name, 200, out);
    json_decref(obj);
}

static bool is_pdb(const struct shim_resource *r) { return !r->custom && !strcmp(r->plural, "poddisruptionbudgets"); }

static void do_delete(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                      const struct http_request *req, struct http_response *resp, bool dry) {
    struct store_delete_opts opts = {.grace_period_seconds = -1};
    json_t *body = NULL;
    if (req->body_len && shim_pb_request(req)) { /* client-go's typed deletes (kubectl drain --disable-eviction) */
        if (!(body = shim_pb_body("DeleteOptions", req, resp))) return;
    } else if (req->body_len) {
        json_error_t je;
        body = jparse_loadb(req->body, req->body_len, 0, &je);
        if (!json_is_object(body)) {
            shim_status(resp, 400, "BadRequest", NULL, "DeleteOptions could not be decoded: %s",
                        body ? "not a JSON object" : je.text);
            json_decref(body);
            return;
        }
    }
    if (body) {
        json_t *pre = json_object_get(body, "preconditions");
        opts.uid = json_string_value(json_object_get(pre, "uid"));
        opts.resource_version = json_string_value(json_object_get(pre, "resourceVersion"));
        json_t *g = json_object_get(body, "gracePeriodSeconds");
        if (json_is_integer(g)) opts.grace_period_seconds = json_integer_value(g);
        /* kubectl delete sends its dry run in DeleteOptions, not the query */
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(body, "dryRun"), i, d) {
            if (json_is_string(d) && !strcmp(json_string_value(d), "All")) dry = true;
            else {
                shim_status(resp, 400, "BadRequest", NULL, "unsupported dryRun value in DeleteOptions (All)");
                json_decref(body);
                return;
            }
        }
    }
    const char *gp = http_req_arg(req, "gracePeriodSeconds");
    if (gp) opts.grace_period_seconds = atoll(gp);
    if (!strcmp(r->plural, "pods")) {
        /* a pod on a node waits for the node to confirm (the kubelet's final
         * DELETE with gracePeriodSeconds=0); an unbound pod goes at once */
        json_t *cur = NULL;
        if (store_get(s->st, "pods", ns, name, &cur) == 0) {
            json_t *spec = json_object_get(cur, "spec");
            const char *node = json_string_value(json_object_get(spec, "nodeName"));
            if (node && node[0]) {
                opts.graceful = 1;
                if (opts.grace_period_seconds < 0) {
                    json_t *t = json_object_get(spec, "terminationGracePeriodSeconds");
                    opts.grace_period_seconds = json_is_integer(t) ? json_integer_value(t) : 30;
                }
            }
        }
        json_decref(cur);
    } else {
        opts.grace_period_seconds = -1; /* only pods have grace periods */
    }
    if (dry) {
        json_t *cur = NULL;
        int rc = store_get(s->st, r->store_key, r->namespaced ? ns : "", name, &cur);
        if (rc) shim_store_error(s, resp, rc, r, name);
        else shim_json(resp, 200, shim_with_type(r, cur));
        json_decref(body);
        return;
    }
    if (shim_crd_admit_delete(s, r, name, resp)) {
        json_decref(body);
        return;
    }
    if (!strcmp(r->plural, "namespaces")) { /* marked now, emptied and removed in the background */
        json_decref(body);
        if (!strcmp(name, "default") || !strcmp(name, "kube-system") || !strcmp(name, "kube-public")) {
            shim_status(resp, 403, "Forbidden", json_pack("{s:s, s:s}", "name", name, "kind", "namespaces"),
                        "namespaces \"%s\" is forbidden: this namespace may not be deleted", name);
            return;
        }
        json_t *out = NULL;
        int rc = shim_ns_terminate(s, name, &out);
        shim_reply_written(s, resp, rc, r, name, 200, out);
        return;
    }
    if (shim_delete_orphans(body, req)) { /* --cascade=orphan: the dependents lose their reference first */
        int orc = shim_orphan_dependents(s, r, ns, name);
        if (orc) {
            shim_status(resp, 500, "InternalError", NULL, "orphaning the dependents of %s \"%s\": %s", r->kind,
                        name, store_errmsg(s->st));
            json_decref(body);
            return;
        }
    }
    json_t *out = NULL;
    int deleted = 0;
    int rc = store_delete(s->st, r->store_key, r->namespaced ? ns : "", name, &opts, &out, &deleted);
    shim_reply_written(s, resp, rc, r, name, 200, out);
    json_decref(body);
}

void shim_delete(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                 const struct http_request *req, struct http_response *resp) {
    const char *dr = http_req_arg(req, "dryRun");
    do_delete(s, r, ns, name, req, resp, dr && !strcmp(dr, "All"));
}

static void do_get(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                   const struct http_request *req, struct http_response *resp) {
    json_t *out = NULL;
    int rc = store_get(s->st, r->store_key, r->namespaced ? ns : "", name, &out);
    enum shim_include inc;
    if (!rc && is_pdb(r)) shim_pdb_status(s, out);
    if (rc) shim_store_error(s, resp, rc, r, name);
    else if (!shim_wants_table(req)) shim_json(resp, 200, shim_with_type(r, out));
    else {
        if (shim_table_include(req, &inc, resp))
            shim_json(resp, 200, shim_table_of(r, shim_with_type(r, out), inc, true));
        json_decref(out);
    }
}

/* Selectors from the query; false after an error reply. */
static bool parse_selectors(const struct shim_resource *r, const struct http_request *req, struct labelsel **ls,
                            struct fieldsel **fs, struct http_response *resp) {
    char err[512];
    const char *l = http_req_arg(req, "labelSelector"), *f = http_req_arg(req, "fieldSelector");
    *ls = NULL;
    *fs = NULL;
    if (l && l[0] && labelsel_parse(l, ls, err, sizeof err)) {
        shim_status(resp, 400, "BadRequest", NULL, "unable to parse requirement: %s", err);
        return false;
    }
    if (f && f[0] && fieldsel_parse(r->plural, f, fs, err, sizeof err)) {
        shim_status(resp, 400, "BadRequest", NULL, "%s", err);
        labelsel_free(*ls);
        *ls = NULL;
        return false;
    }
    return true;
}

static bool selected(const struct labelsel *ls, const struct fieldsel *fs, const json_t *obj) {
    if (ls && !labelsel_match(ls, json_object_get(json_object_get(obj, "metadata"), "labels"))) return false;
    return !fs || fieldsel_match(fs, obj);
}

/* The reply to a list: items (taken), its version, and a continue token (taken, may be NULL). */
static void list_reply(const struct shim_resource *r, const struct http_request *req, struct http_response *resp,
                       json_t *items, uint64_t list_rv, char *token, uint64_t remaining, bool table,
                       enum shim_include inc) {
    char rv[32], av[300], kind[128];
    snprintf(rv, sizeof rv, "%llu", (unsigned long long)list_rv);
    snprintf(kind, sizeof kind, "%sList", r->kind);
    json_t *md = json_pack("{s:s}", "resourceVersion", rv);
    if (token) {
        json_object_set_new(md, "continue", json_string(token));
        if (!http_req_arg(req, "labelSelector") && !http_req_arg(req, "fieldSelector"))
            json_object_set_new(md, "remainingItemCount", json_integer((json_int_t)remaining));
        free(token);
    }
    if (table) { /* kubectl get: columns computed here */
        json_t *t = shim_table(r, items, rv, json_string_value(json_object_get(md, "continue")), inc, true);
        json_decref(md);
        json_decref(items);
        shim_json(resp, 200, t);
        return;
    }
    shim_json(resp, 200, json_pack("{s:s, s:s, s:o, s:o}", "kind", kind, "apiVersion",
                                   api_version_of(r, av, sizeof av), "metadata", md, "items", items));
}

/* Pods by spec.nodeName, or by a label's key=value, from an index
 * (shim_podindex.c): false when it cannot answer (not built yet, far behind,
 * more candidates than it reads at once, more than limit): list as usual. */
static bool list_by_node(struct shim *s, const struct shim_resource *r, const char *ns, struct labelsel *ls,
                         struct fieldsel *fs, long long limit, const struct http_request *req,
                         struct http_response *resp, bool table, enum shim_include inc) {
    const char *node = fs ? fieldsel_exact(fs, "spec.nodeName") : NULL;
    const char *cont = http_req_arg(req, "continue");
    if (r->group[0] || strcmp(r->plural, "pods") || (cont && cont[0])) return false;
    char term[320] = "";
    for (int i = 0; ls && !ls->nothing && i < ls->nreqs && !term[0]; i++) { /* key=value, or key in (value) */
        const struct labelsel_req *q = &ls->reqs[i];
        size_t kl = strlen(q->key), vl = q->nvalues == 1 ? strlen(q->values[0]) : 0;
        if ((q->op == LABELSEL_EQ || q->op == LABELSEL_IN) && q->nvalues == 1 && kl + vl + 2 <= sizeof term) {
            memcpy(term, q->key, kl);
            term[kl] = '=';
            memcpy(term + kl + 1, q->values[0], vl + 1);
        }
    }
    json_t *got = NULL;
    uint64_t rv = 0;
    if (node && node[0]) {
        if (podindex_list(s->pidx, node, r->namespaced ? ns : "", &got, &rv)) return false;
    } else if (!term[0] || podindex_list(s->lidx, term, r->namespaced ? ns : "", &got, &rv)) {
        return false;
    }
    json_t *items = json_array(), *it;
    size_t i;
    json_array_foreach(got, i, it) if (selected(ls, fs, it)) json_array_append(items, shim_with_type(r, it));
    json_decref(got);
    if (limit && json_array_size(items) > (size_t)limit) {
        json_decref(items);
        return false;
    }
    list_reply(r, req, resp, items, rv, NULL, 0, table, inc);
    return true;
}

/* With selectors, store pages are filtered until `limit` items matched (a
 * page may then hold up to one store page more than limit), the list ends,
 * or LIST_SCAN_MAX objects were read: then the page is shorter than limit
 * and its continue token goes on, so that one request reads a bounded part
 * of the resource per loop turn. A list with a limit also ends its page once
 * the objects read pass list_page_bytes, so that every page fits a client
 * (apilimits.h). A list without a limit is served in slices over many loop
 * turns (shim_slices.c), a `spec.nodeName` selector on pods from an index
 * (shim_podindex.c). */
#define LIST_SCAN_MAX 2000
static void do_list(struct shim *s, const struct shim_resource *r, const char *ns, const struct http_request *req,
                    struct http_response *resp) {
    struct labelsel *ls;
    struct fieldsel *fs;
    enum shim_include inc = SHIM_INCLUDE_METADATA;
    bool table = shim_wants_table(req);
    if (table && !shim_table_include(req, &inc, resp)) return;
    if (!parse_selectors(r, req, &ls, &fs, resp)) return;
    if (http_req_arg_bool(req, "watch")) {
        watch_start(s->hub, r, ns, ls, fs, table, inc, req, resp);
        return;
    }
    const char *lim = http_req_arg(req, "limit"), *cont = http_req_arg(req, "continue");
    long long limit = lim ? atoll(lim) : 0;
    if (limit < 0) limit = 0;
    if (list_by_node(s, r, ns, ls, fs, limit, req, resp, table, inc)) {
        labelsel_free(ls);
        fieldsel_free(fs);
        return;
    }
    if (!(cont && cont[0]) && shim_slices_wanted(s, req)) { /* a whole list: many loop turns */
        shim_slices_list(s, r, ns, ls, fs, table, inc, req, resp);
        return;
    }
    json_t *items = json_array();
    uint64_t list_rv = 0, remaining = 0;
    char *token = cont && cont[0] ? strdup(cont) : NULL;
    int rc = 0;
    size_t bytes = 0, scanned = 0;
    for (int pages = 0; pages < 100000; pages++) {
        struct store_list l = {0};
        rc = store_list_bounded(s->st, r->store_key, r->namespaced ? ns : "", (size_t)limit,
                                limit ? s->list_page_bytes - bytes : 0, token, &l);
        free(token);
        token = NULL;
        if (rc) break;
        if (!pages) list_rv = l.resource_version;
        size_t i, got = json_array_size(l.items);
        json_t *it;
        json_array_foreach(l.items, i, it) if (selected(ls, fs, it)) {
            if (is_pdb(r)) shim_pdb_status(s, it); /* computed, never stored (shim_evict.c) */
            json_array_append(items, shim_with_type(r, it));
        }
        token = l.continue_token;
        l.continue_token = NULL;
        remaining = l.remaining;
        bytes += l.bytes;
        scanned += got;
        store_list_free(&l);
        /* a store page shorter than the limit with more to come was cut by bytes: this page is full */
        if (!token || (limit && (json_array_size(items) >= (size_t)limit || got < (size_t)limit))) break;
        if (limit && (ls || fs) && scanned >= LIST_SCAN_MAX) break; /* a short page: the client goes on */
    }
    labelsel_free(ls);
    fieldsel_free(fs);
    if (rc) {
        json_decref(items);
        if (rc == -ESTALE)
            shim_status(resp, 410, "Expired", NULL, "The provided continue parameter is too old to display a "
                        "consistent list result. You can start a new list without the continue parameter.");
        else shim_store_error(s, resp, rc, r, "");
        return;
    }
    list_reply(r, req, resp, items, list_rv, token, remaining, table, inc);
}

shim_patch_fn shim_patch_parse(const struct http_request *req, json_t **patch, bool *server_side_apply,
                               struct http_response *resp) {
    const char *ct = req->content_type;
    shim_patch_fn apply = NULL;
    *server_side_apply = false;
    if (!strncmp(ct, "application/merge-patch+json", 28)) apply = patch_merge;
    else if (!strncmp(ct, "application/json-patch+json", 27)) apply = patch_json;
    else if (!strncmp(ct, "application/strategic-merge-patch+json", 38)) apply = patch_strategic;
    else if (!strncmp(ct, "application/apply-patch+yaml", 28)) apply = patch_merge, *server_side_apply = true;
    if (!apply) {
        shim_status(resp, 415, "UnsupportedMediaType", NULL,
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, "
                    "application/strategic-merge-patch+json, application/apply-patch+yaml");
        return NULL;
    }
    json_error_t je;
    *patch = jparse_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!*patch) {
        shim_status(resp, 400, "BadRequest", NULL, "the patch could not be decoded: %s", je.text);
        return NULL;
    }
    return apply;
}

/* PATCH: the patch over the stored object (shim_write.c); apply-patch
 * (server-side apply) creates a missing object and otherwise merges (no
 * managedFields). */
static void do_patch(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                     const struct http_request *req, struct http_response *resp, bool dry) {
    bool server_side_apply = false;
    json_t *patch = NULL;
    if (r->custom && !strncmp(req->content_type, "application/strategic-merge-patch+json", 38)) {
        /* custom resources have no merge keys: kube-apiserver refuses it the same way */
        shim_status(resp, 415, "UnsupportedMediaType", NULL,
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
        return;
    }
    shim_patch_fn apply = shim_patch_parse(req, &patch, &server_side_apply, resp);
    if (!apply) return;
    if (server_side_apply) {
        json_t *cur = NULL;
        int rc = store_get(s->st, r->store_key, r->namespaced ? ns : "", name, &cur);
        json_decref(cur);
        if (rc == -ENOENT) {
            json_decref(patch);
            struct http_request creq = *req;
            creq.content_type = "application/json";
            do_create(s, r, ns, &creq, resp, dry);
            return;
        }
    }
    if (dry) {
        json_t *next = shim_patch_preview(s, r, ns, name, patch, apply, resp);
        if (next) shim_json(resp, 200, next);
        return;
    }
    shim_write_patch(s, r, ns, name, patch, apply, req, resp);
}

/* DELETE on a collection: every object that matches the selectors, one by
 * one (graceful pods are marked, as for single deletes); the reply lists them. */
struct delete_each {
    struct shim *s;
    const struct shim_resource *r;
    struct labelsel *ls;
    struct fieldsel *fs;
    bool dry;
    json_t *gone;
};

static int delete_one(void *ud, json_t *it) {
    struct delete_each *d = ud;
    if (!selected(d->ls, d->fs, it)) return 0;
    const char *n = json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
    const char *ins = json_string_value(json_object_get(json_object_get(it, "metadata"), "namespace"));
    json_t *out = NULL;
    struct http_response refused = {0};
    if (d->dry) out = json_incref(it);
    else if (shim_crd_admit_delete(d->s, d->r, n ? n : "", &refused)) { /* a pool is marked, as alone */
        free(refused.body);
        return 0;
    } else if (store_delete(d->s->st, d->r->store_key, ins ? ins : "", n, NULL, &out, NULL) != 0) return 0;
    json_array_append_new(d->gone, shim_with_type(d->r, out));
    return 0;
}

/* DELETE on a collection: every object that matches the selectors, one by
 * one; the reply lists them. */
static void do_delete_collection(struct shim *s, const struct shim_resource *r, const char *ns,
                                 const struct http_request *req, struct http_response *resp, bool dry) {
    struct delete_each d = {.s = s, .r = r, .dry = dry, .gone = json_array()};
    if (!parse_selectors(r, req, &d.ls, &d.fs, resp)) {
        json_decref(d.gone);
        return;
    }
    int rc = shim_each(s, r->store_key, r->namespaced ? ns : "", NULL, delete_one, &d);
    labelsel_free(d.ls);
    fieldsel_free(d.fs);
    if (rc) {
        json_decref(d.gone);
        shim_store_error(s, resp, rc, r, "");
        return;
    }
    char av[300], kind[128];
    snprintf(kind, sizeof kind, "%sList", r->kind);
    shim_json(resp, 200, json_pack("{s:s, s:s, s:{}, s:o}", "kind", kind, "apiVersion",
                                   api_version_of(r, av, sizeof av), "metadata", "items", d.gone));
}

/* ---- routing ---- */

/* Splits path ("/a/b") into its segments, in place. The count, or -1 when
 * there are more than max or a segment is empty ("//", a trailing "/"), "."
 * or "..": such a path names nothing here (kube-apiserver answers 404 too),
 * and must never be read as a shorter one that names another object. */
static int split_path(char *path, char **seg, int max) {
    if (path[0] != '/') return -1;
    int n = 0;
    for (char *p = path + 1; p;) {
        char *slash = strchr(p, '/');
        if (slash) *slash = 0;
        if (!p[0] || !strcmp(p, ".") || !strcmp(p, "..") || n == max) return -1;
        seg[n++] = p;
        p = slash ? slash + 1 : NULL;
    }
    return n;
}

/* Equal strings of length n, in a time that does not depend on where they
 * differ (a token's length is no secret worth the trouble). */
static bool same_secret(const char *a, const char *b, size_t n) {
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* "Authorization: Bearer TOKEN", as kube-apiserver reads it: the scheme in
 * any case, the token up to the next space. */
static bool authorized(const struct shim *s, const struct http_request *req) {
    if (!s->token || (!req->secure && !s->token_on_plain)) return true;
    const char *a = req->authorization;
    if (strncasecmp(a, "bearer ", 7)) return false;
    a += 7;
    size_t n = strcspn(a, " "), want = strlen(s->token);
    return n == want && same_secret(a, s->token, n);
}

/* The verb and resource of a request for its latency sample, named as
 * kube-apiserver names them. */
static void obs_route(struct shim *s, const struct shim_resource *r, const char *name, const char *sub,
                      const struct http_request *req) {
    static const char *const verbs[] = {[HTTP_GET] = "GET",     [HTTP_POST] = "CREATE", [HTTP_PUT] = "UPDATE",
                                        [HTTP_PATCH] = "PATCH", [HTTP_DELETE] = "DELETE"};
    if (req->method <= HTTP_DELETE) s->obs.verb = verbs[req->method];
    if (!name && req->method == HTTP_GET)
        s->obs.verb = http_req_arg_bool(req, "watch") ? "WATCH" : "LIST";
    if (!name && req->method == HTTP_DELETE) s->obs.verb = "DELETECOLLECTION";
    snprintf(s->obs.resource, sizeof s->obs.resource, "%s%s%s", r->plural, sub ? "/" : "", sub ? sub : "");
}

static void route_resource(struct shim *s, const char *group, const char *version, char **seg, int n,
                           const struct http_request *req, struct http_response *resp) {
    /* seg: [namespaces, NS, plural, name?] or [plural, name?] */
    const char *ns = "", *plural = NULL, *name = NULL;
    const char *sub = NULL;
    if (n >= 3 && !strcmp(seg[0], "namespaces")) {
        ns = seg[1];
        plural = seg[2];
        name = n >= 4 ? seg[3] : NULL;
        sub = n == 5 ? seg[4] : NULL;
        if (n > 5) goto notfound;
    } else if (n >= 1 && n <= 3) {
        plural = seg[0];
        name = n >= 2 ? seg[1] : NULL;
        sub = n == 3 ? seg[2] : NULL;
    } else {
        goto notfound;
    }
    if (!group[0] && !strcmp(plural, "bindings") && ns[0] && !name && req->method == HTTP_POST) {
        shim_pod_binding(s, ns, NULL, req, resp); /* the legacy route: the pod is named in the body */
        return;
    }
    const struct shim_resource *r = shim_find_resource(s, group, version, plural);
    if (!r || (ns[0] && !r->namespaced)) goto notfound;
    if (s->metrics) obs_route(s, r, name, sub, req);
    if (sub) {
        if (!strcmp(sub, "binding") && !strcmp(r->plural, "pods") && req->method == HTTP_POST)
            shim_pod_binding(s, ns, name, req, resp);
        else if (!strcmp(sub, "eviction") && !strcmp(r->plural, "pods") && !r->group[0] && req->method == HTTP_POST)
            shim_pod_evict(s, ns, name, req, resp);
        else if (!strcmp(sub, "log") && !strcmp(r->plural, "pods") && !r->group[0] && req->method == HTTP_GET)
            shim_pod_log(s, ns, name, req, resp);
        else if (!strcmp(sub, "scale") && shim_workload_scales(r))
            shim_workload_scale(s, r, ns, name, req, resp);
        else if (!strcmp(sub, "status") && shim_has_status(r))
            shim_status_subresource(s, r, ns, name, req, resp);
        else
            goto notfound;
        return;
    }
    bool coll = name == NULL;
    const char *dr = http_req_arg(req, "dryRun");
    bool dry = dr && !strcmp(dr, "All");
    if (dr && !dry) {
        shim_status(resp, 400, "BadRequest", NULL, "unsupported dryRun value \"%s\" (All)", dr);
        return;
    }
    switch (req->method) {
    case HTTP_GET:
        if (coll) do_list(s, r, ns, req, resp);
        else do_get(s, r, ns, name, req, resp);
        return;
    case HTTP_POST:
        if (!coll) break;
        if (r->namespaced && !ns[0]) {
            shim_status(resp, 400, "BadRequest", NULL, "a namespace is required to create %s", r->plural);
            return;
        }
        do_create(s, r, ns, req, resp, dry);
        return;
    case HTTP_PUT:
        if (coll) break;
        do_update(s, r, ns, name, req, resp, dry);
        return;
    case HTTP_DELETE:
        if (coll && !shim_res_deletecollection(r)) break; /* namespaces: one by one, as kube-apiserver */
        if (coll) do_delete_collection(s, r, ns, req, resp, dry);
        else do_delete(s, r, ns, name, req, resp, dry);
        return;
    case HTTP_PATCH:
        if (coll) break;
        do_patch(s, r, ns, name, req, resp, dry);
        return;
    default:
        break;
    }
    shim_status(resp, 405, "MethodNotAllowed", details(r, name), "the server does not allow this method on the "
                "requested resource");
    return;
notfound:
    shim_status(resp, 404, "NotFound", NULL, "the server could not find the requested resource");
}

static void handle(struct shim *s, const struct http_request *req, struct http_response *resp);

/* Serves the request; with metrics, times it (a deferred write observes
 * its own reply, a watch is not a latency). */
void shim_handle(void *ud, const struct http_request *req, struct http_response *resp) {
    struct shim *s = ud;
    s->obs_deferred = false;
    if (!s->metrics) {
        handle(s, req, resp);
        shim_pb_reply(req, resp);
        shim_sec_done(s, resp->status); /* its audit line, unless a deferred write took it */
        return;
    }
    s->obs.t0 = metrics_now_ns();
    s->obs.verb = req->method_name;
    s->obs.resource[0] = 0;
    handle(s, req, resp);

    shim_pb_reply(req, resp);
    shim_sec_done(s, resp->status);
    if (!s->obs_deferred && strcmp(s->obs.verb, "WATCH")) shim_metrics_request(s->metrics, &s->obs, resp->status);
    s->obs.t0 = 0;
}

static void handle(struct shim *s, const struct http_request *req, struct http_response *resp) {
    const char *p = req->path;
    if (!strcmp(p, "/healthz") || !strcmp(p, "/livez") || !strcmp(p, "/readyz")) {
        resp->body = strdup("ok");
        resp->body_len = 2;
        resp->content_type = "text/plain; charset=utf-8";
        return;
    }
    if (!strcmp(p, "/version")) {
        shim_disc_version(resp);
        return;
    }
    if (ui_path(p)) { /* the web UI's static files: no data in them, so no token (ui.h) */
        ui_serve(req, resp);
        return;
    }
    if (s->sec ? !shim_sec_admit(s, req, resp) : !authorized(s, req)) {
        if (!s->sec) shim_status(resp, 401, "Unauthorized", NULL, "Unauthorized");
        return; /* 401 or 403 (shim_auth.c) */
    }
    if (!strcmp(p, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")) {
        shim_sec_ssar(s, req, resp);
        return;
    }
    if (!strcmp(p, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews")) {
        shim_sec_ssrr(s, req, resp);
        return;
    }
    if (!strcmp(p, "/metrics") && (req->method == HTTP_GET || req->method == HTTP_HEAD)) {
        shim_metrics_serve(s->metrics, resp);
        if (!s->metrics) shim_status(resp, 404, "NotFound", NULL, "the server could not find the requested resource");
        return;
    }
    if (!strncmp(p, "/openapi/", 9)) {
        if (!shim_openapi(s, req, resp)) shim_status(resp, 404, "NotFound", NULL, "the server could not find the requested resource");
        return;
    }
    size_t plen = strlen(p);
    if (plen > HTTP_MAX_PATH) { /* the HTTP layer refuses it first; never cut short here */
        shim_status(resp, 414, "RequestURITooLong", NULL, "the request path is longer than %d bytes", HTTP_MAX_PATH);
        return;
    }
    char path[HTTP_MAX_PATH + 1];
    memcpy(path, p, plen + 1);
    char *seg[MAX_SEGMENTS];
    int n = split_path(path, seg, MAX_SEGMENTS);
    if (n <= 0 && !strcmp(p, "/") && req->method == HTTP_GET) {
        shim_disc_root(s, resp); /* the API's paths, as kube-apiserver lists them */
        return;
    }
    if (n <= 0) goto notfound;
    if (!strcmp(seg[0], "api")) {
        if (n == 1) {
            if (shim_disc_wants_aggregated(req)) shim_disc_aggregated(s, resp, true);
            else
                shim_json(resp, 200, json_pack("{s:s, s:[s], s:[{s:s, s:s}]}", "kind", "APIVersions", "versions",
                                               "v1", "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0",
                                               "serverAddress", ""));
            return;
        }
        if (strcmp(seg[1], "v1") != 0) goto notfound;
        if (n == 2) shim_disc_resource_list(s, resp, "", "v1");
        else route_resource(s, "", "v1", seg + 2, n - 2, req, resp);
        return;
    }
    if (!strcmp(seg[0], "apis")) {
        if (n == 1) {
            if (shim_disc_wants_aggregated(req)) shim_disc_aggregated(s, resp, false);
            else shim_disc_group_list(s, resp);
            return;
        }
        if (n == 2) shim_disc_group(s, resp, seg[1]);
        else if (n == 3) shim_disc_resource_list(s, resp, seg[1], seg[2]);
        else route_resource(s, seg[1], seg[2], seg + 3, n - 3, req, resp);
        return;
    }
notfound:
    shim_status(resp, 404, "NotFound", NULL, "the server could not find the requested resource");
}

int shim_bootstrap(struct shim *s, char *err, size_t errlen) {
    static const char *const names[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_t *ns = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "kind", "Namespace", "apiVersion", "v1", "metadata",
                               "name", names[i], "status", "phase", "Active");
        int rc = store_create(s->st, "namespaces", "", ns, NULL);
        json_decref(ns);
        if (rc && rc != -EEXIST) {
            snprintf(err, errlen, "creating namespace %s: %s", names[i], store_errmsg(s->st));
            return rc;
        }
    }
    return shim_ns_resume(s);
}
