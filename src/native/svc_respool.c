/* v0 ResourceManager over ResourcePool objects (svc_respool.h). Responses
 * are built as proto3 JSON and turned into messages by pbjson, so this file
 * speaks the mapping in one vocabulary (the names docs/native-api.md uses). */
#include "svc_respool.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ncache.h"
#include "peloton/api/v0/respool/respool.pb-c.h"
#include "resource.h"
#include "svc_common.h"

#define POOLS_PATH "/apis/peloton.io/v1alpha1/resourcepools"
#define JOBS_PATH "/apis/peloton.io/v1alpha1/jobs"
#define ROOT_ID "root"
#define MAX_POOL_DEPTH 17 /* the core's 16 levels, and the root */

typedef Peloton__Api__V0__Respool__ResourcePoolConfig PoolConfig;

struct svc_respool {
    struct kclient *kc;
};

enum rp_op_kind { OP_CREATE, OP_GET, OP_DELETE, OP_UPDATE_GET, OP_UPDATE_PUT, OP_LOOKUP, OP_QUERY, OP_DELETE_JOBS,
                  OP_DELETE_DO };

/* One call in flight: what the kclient callback needs to answer it. */
struct rp_op {
    struct svc_op base;
    enum rp_op_kind kind;
    char id[256];      /* pool name (or path for delete and lookup) */
    bool children;     /* GetRequest.includeChildPools */
    json_t *spec;      /* update: the new spec */
    int tries;         /* update: writes that lost a race */
};

/* ---------------------------------------------------------------- answering */

/* {"error": {member: {idkey: {"value": id}, "message": msg}}} */
static json_t *error_body(const char *member, const char *idkey, const char *id, const char *msg) {
    return json_pack("{s:{s:{s:{s:s},s:s}}}", "error", member, idkey, "value", id, "message", msg);
}


/* ---------------------------------------------------------------- config -> spec */

static int kind_of(const char *name) {
    for (int k = 0; k < RES_NKINDS; k++)
        if (!strcmp(name, res_kind_name((enum res_kind)k))) return k;
    return -1;
}

/* A native amount (cores, MB) as a quantity string, or -1 with err. */
static int amount_quantity(int k, double v, const char *what, char *out, size_t len, char *err, size_t errlen) {
    if (svc_quantity((enum res_kind)k, v, out, len) == 0) return 0;
    snprintf(err, errlen, "%s %s: %g is not a non-negative amount", res_kind_name((enum res_kind)k), what, v);
    return -1;
}

/* spec of a ResourcePool for cfg (new), or NULL with err naming the field. */
static json_t *spec_from_config(const PoolConfig *cfg, char *err, size_t errlen) {
    json_t *spec = json_object();
    const char *parent = cfg->parent && cfg->parent->value ? cfg->parent->value : "";
    if (parent[0] && strcmp(parent, ROOT_ID)) json_object_set_new(spec, "parent", json_string(parent));
    if (cfg->owningteam && cfg->owningteam[0]) json_object_set_new(spec, "owningTeam", json_string(cfg->owningteam));
    if (cfg->description && cfg->description[0])
        json_object_set_new(spec, "description", json_string(cfg->description));
    if (cfg->n_ldapgroups) {
        json_t *a = json_array();
        for (size_t i = 0; i < cfg->n_ldapgroups; i++) json_array_append_new(a, json_string(cfg->ldapgroups[i]));
        json_object_set_new(spec, "ldapGroups", a);
    }
    if (cfg->policy == PELOTON__API__V0__RESPOOL__SCHEDULING_POLICY__PriorityFIFO)
        json_object_set_new(spec, "policy", json_string("PriorityFIFO"));
    json_t *res = json_array();
    json_object_set_new(spec, "resources", res);
    for (size_t i = 0; i < cfg->n_resources; i++) {
        const Peloton__Api__V0__Respool__ResourceConfig *rc = cfg->resources[i];
        int k = kind_of(rc->kind ? rc->kind : "");
        char q[64];
        if (k < 0) {
            snprintf(err, errlen, "resources[%zu].kind: \"%s\" is not cpu, memory, disk or gpu", i,
                     rc->kind ? rc->kind : "");
            goto bad;
        }
        json_t *r = json_pack("{s:s}", "kind", rc->kind);
        json_array_append_new(res, r);
        if (amount_quantity(k, rc->reservation, "reservation", q, sizeof q, err, errlen)) goto bad;
        json_object_set_new(r, "reservation", json_string(q));
        if (!isinf(rc->limit) || rc->limit < 0) { /* Infinity: no limit of its own */
            if (amount_quantity(k, rc->limit, "limit", q, sizeof q, err, errlen)) goto bad;
            json_object_set_new(r, "limit", json_string(q));
        }
        if (!isfinite(rc->share) || rc->share < 0) {
            snprintf(err, errlen, "%s share: %g is not a non-negative number", rc->kind, rc->share);
            goto bad;
        }
        json_object_set_new(r, "share", json_real(rc->share));
        if (rc->type == PELOTON__API__V0__RESPOOL__RESERVATION_TYPE__STATIC)
            json_object_set_new(r, "type", json_string("STATIC"));
        else if (rc->type == PELOTON__API__V0__RESPOOL__RESERVATION_TYPE__ELASTIC)
            json_object_set_new(r, "type", json_string("ELASTIC"));
    }
    if (cfg->controllerlimit)
        json_object_set_new(spec, "controllerLimit", json_pack("{s:f}", "maxPercent", cfg->controllerlimit->maxpercent));
    if (cfg->slacklimit)
        json_object_set_new(spec, "slackLimit", json_pack("{s:f}", "maxPercent", cfg->slacklimit->maxpercent));
    return spec;
bad:
    json_decref(spec);
    return NULL;
}

/* ---------------------------------------------------------------- object -> info */

static const char *pool_name(const json_t *obj) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

/* The parent's name, ROOT_ID for a top-level pool. */
static const char *pool_parent(const json_t *obj) {
    const char *p = json_string_value(json_object_get(json_object_get(obj, "spec"), "parent"));
    return p && p[0] && strcmp(p, ROOT_ID) ? p : ROOT_ID;
}

static const json_t *find_pool(const json_t *items, const char *name) {
    size_t i;
    const json_t *o;
    json_array_foreach(items, i, o) {
        const char *n = pool_name(o);
        if (n && !strcmp(n, name)) return o;
    }
    return NULL;
}

/* "/a/b" for pool name; -1 when the chain is broken or too deep. */
static int pool_path(const json_t *items, const char *name, char *out, size_t len) {
    const char *chain[MAX_POOL_DEPTH];
    int n = 0;
    for (const char *cur = name; strcmp(cur, ROOT_ID); n++) {
        const json_t *o = find_pool(items, cur);
        if (!o || n == MAX_POOL_DEPTH) return -1;
        chain[n] = cur;
        cur = pool_parent(o);
    }
    size_t o = 0;
    out[0] = 0;
    if (!n) snprintf(out, len, "/");
    for (int i = n - 1; i >= 0; i--) {
        int w = snprintf(out + o, len - o, "/%s", chain[i]);
        if (w < 0 || (size_t)w >= len - o) return -1;
        o += (size_t)w;
    }
    return 0;
}

static json_t *id_json(const char *id) { return json_pack("{s:s}", "value", id); }

static json_t *children_json(const json_t *items, const char *name) {
    json_t *a = json_array();
    size_t i;
    const json_t *o;
    json_array_foreach(items, i, o) {
        const char *n = pool_name(o);
        if (n && !strcmp(pool_parent(o), name)) json_array_append_new(a, id_json(n));
    }
    return a;
}

static void set_created(json_t *cfg, const json_t *obj) {
    const json_t *md = json_object_get(obj, "metadata");
    json_t *cl = json_object();
    json_int_t gen = json_integer_value(json_object_get(md, "generation"));
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(gen ? gen : 1));
    json_object_set_new(cl, "version", json_string(v));
    const char *ts = json_string_value(json_object_get(md, "creationTimestamp"));
    struct tm tm = {0};
    if (ts && strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
        snprintf(v, sizeof v, "%lld", (long long)timegm(&tm) * 1000);
        json_object_set_new(cl, "createdAt", json_string(v));
        json_object_set_new(cl, "updatedAt", json_string(v));
    }
    json_object_set_new(cfg, "changeLog", cl);
}

/* ResourcePoolInfo of a stored pool. */
static json_t *info_json(const json_t *items, const json_t *obj) {
    const char *name = pool_name(obj);
    const json_t *spec = json_object_get(obj, "spec"), *st = json_object_get(obj, "status");
    json_t *cfg = json_pack("{s:s}", "name", name);
    json_object_set_new(cfg, "parent", id_json(pool_parent(obj)));
    const char *s;
    if ((s = json_string_value(json_object_get(spec, "owningTeam")))) json_object_set_new(cfg, "owningTeam", json_string(s));
    if ((s = json_string_value(json_object_get(spec, "description"))))
        json_object_set_new(cfg, "description", json_string(s));
    const json_t *lg = json_object_get(spec, "ldapGroups");
    if (json_is_array(lg)) json_object_set(cfg, "ldapGroups", (json_t *)lg);
    json_object_set_new(cfg, "policy", json_string("PriorityFIFO")); /* the only policy, also the default */
    json_t *res = json_array();
    const json_t *given = json_object_get(spec, "resources");
    for (int k = 0; k < RES_NKINDS; k++) { /* every kind, defaults for those not given */
        const json_t *r = NULL, *e;
        size_t i;
        json_array_foreach(given, i, e) if (!strcmp(json_string_value(json_object_get(e, "kind")) ?: "",
                                                    res_kind_name((enum res_kind)k))) r = e;
        double resv = r ? svc_native_amount((enum res_kind)k, json_object_get(r, "reservation")) : 0;
        double lim = r ? svc_native_amount((enum res_kind)k, json_object_get(r, "limit")) : NAN;
        const json_t *sh = r ? json_object_get(r, "share") : NULL;
        const char *type = r ? json_string_value(json_object_get(r, "type")) : NULL;
        json_t *rc = json_pack("{s:s,s:f,s:o,s:f,s:s}", "kind", res_kind_name((enum res_kind)k), "reservation",
                               isnan(resv) ? 0.0 : resv, "limit", isnan(lim) ? json_string("Infinity") : json_real(lim),
                               "share", json_is_number(sh) ? json_number_value(sh) : 1.0, "type",
                               type && !strcmp(type, "STATIC") ? "STATIC" : "ELASTIC");
        json_array_append_new(res, rc);
    }
    json_object_set_new(cfg, "resources", res);
    const json_t *cl = json_object_get(json_object_get(spec, "controllerLimit"), "maxPercent");
    json_object_set_new(cfg, "controllerLimit", json_pack("{s:f}", "maxPercent", json_is_number(cl) ? json_number_value(cl) : 100.0));
    const json_t *sl = json_object_get(json_object_get(spec, "slackLimit"), "maxPercent");
    json_object_set_new(cfg, "slackLimit", json_pack("{s:f}", "maxPercent", json_is_number(sl) ? json_number_value(sl) : 20.0));
    set_created(cfg, obj);
    char path[4096];
    json_t *info = json_pack("{s:o,s:o,s:o,s:o}", "id", id_json(name), "config", cfg, "parent",
                             id_json(pool_parent(obj)), "children", children_json(items, name));
    if (!pool_path(items, name, path, sizeof path)) json_object_set_new(info, "path", json_pack("{s:s}", "value", path));
    /* usage: what the resource manager last wrote as the pool's allocation */
    const json_t *alloc = json_object_get(st, "allocation");
    if (json_is_object(alloc)) {
        json_t *u = json_array();
        for (int k = 0; k < RES_NKINDS; k++) {
            double a = svc_native_amount((enum res_kind)k, json_object_get(alloc, res_kind_name((enum res_kind)k)));
            json_array_append_new(u, json_pack("{s:s,s:f,s:f}", "kind", res_kind_name((enum res_kind)k), "allocation",
                                               isnan(a) ? 0.0 : a, "slack", 0.0));
        }
        json_object_set_new(info, "usage", u);
    }
    return info;
}

/* The root: no object of its own; its children are the top-level pools. */
static json_t *root_info(const json_t *items) {
    return json_pack("{s:o,s:{s:s},s:o,s:{s:s}}", "id", id_json(ROOT_ID), "config", "name", ROOT_ID, "children",
                     children_json(items, ROOT_ID), "path", "value", "/");
}

/* ---------------------------------------------------------------- handlers */

static void op_release(struct svc_op *base) {
    struct rp_op *op = (struct rp_op *)base;
    json_decref(op->spec);
    free(op);
}

/* The client of the service a handler was registered with (ud). */
static struct kclient *client_of(void *ud) { return ((struct svc_respool *)ud)->kc; }

/* kc: the service's client (client_of, or the op a step follows). */
static struct rp_op *op_new(struct kclient *kc, struct native_call *call, enum rp_op_kind kind, const char *id) {
    struct rp_op *op = svc_op_new(sizeof *op, kc, call, op_release);
    if (!op) return NULL;
    op->kind = kind;
    snprintf(op->id, sizeof op->id, "%s", id ? id : "");
    return op;
}

static void on_listed(void *ud, const struct kc_response *r);
static void on_written(void *ud, const struct kc_response *r);
static void on_jobs(void *ud, const struct kc_response *r);

static void answer_listed(struct rp_op *op, const json_t *items);

/* Reads every pool, then answers op in on_listed; the reads that change
 * nothing (Get, Query, Lookup) from the read cache when it may answer. */
static void list_pools(struct rp_op *op) {
    const json_t *items =
        op->kind == OP_GET || op->kind == OP_QUERY || op->kind == OP_LOOKUP ? ncache_pools(svc_cache(op->base.call)) : NULL;
    if (items) {
        answer_listed(op, items);
        svc_op_free(&op->base);
        return;
    }
    svc_op_request(&op->base, "GET", POOLS_PATH, NULL, on_listed);
}

static bool valid_name(const char *s) {
    size_t n = strlen(s);
    return n && n < 254 && !strchr(s, '/') && !strchr(s, '?') && !strchr(s, '%') && strcmp(s, ".") && strcmp(s, "..");
}

static void h_create(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Respool__CreateRequest *req = (const void *)msg;
    const PoolConfig *cfg = req->config;
    const char *name = cfg && cfg->name ? cfg->name : "";
    char err[512] = "";
    if (!cfg) snprintf(err, sizeof err, "config is required");
    else if (!valid_name(name)) snprintf(err, sizeof err, "config.name: \"%.200s\" is not a pool name", name);
    json_t *spec = err[0] ? NULL : spec_from_config(cfg, err, sizeof err);
    if (!spec) {
        svc_reply_json(call, &peloton__api__v0__respool__create_response__descriptor,
                       error_body("invalidResourcePoolConfig", "id", name, err));
        return;
    }
    json_t *obj = json_pack("{s:s,s:s,s:{s:s},s:o}", "apiVersion", "peloton.io/v1alpha1", "kind", "ResourcePool",
                            "metadata", "name", name, "spec", spec);
    struct rp_op *op = op_new(client_of(ud), call, OP_CREATE, name);
    if (op) svc_op_request(&op->base, "POST", POOLS_PATH, obj, on_written);
    json_decref(obj);
}

static void h_get(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Respool__GetRequest *req = (const void *)msg;
    const char *id = req->id && req->id->value && req->id->value[0] ? req->id->value : ROOT_ID;
    struct rp_op *op = op_new(client_of(ud), call, OP_GET, id);
    if (!op) return;
    op->children = req->includechildpools;
    list_pools(op);
}

static void h_query(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)msg;
    struct rp_op *op = op_new(client_of(ud), call, OP_QUERY, NULL);
    if (op) list_pools(op);
}

static void h_lookup(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Respool__LookupRequest *req = (const void *)msg;
    const char *path = req->path && req->path->value ? req->path->value : "";
    if (path[0] != '/') {
        json_t *j = json_pack("{s:{s:{s:{s:s},s:s}}}", "error", "invalidPath", "path", "value", path, "message",
                              "a pool path starts with \"/\"");
        svc_reply_json(call, &peloton__api__v0__respool__lookup_response__descriptor, j);
        return;
    }
    struct rp_op *op = op_new(client_of(ud), call, OP_LOOKUP, path);
    if (op) list_pools(op);
}

static void h_delete(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Respool__DeleteRequest *req = (const void *)msg;
    const char *path = req->path && req->path->value ? req->path->value : "";
    struct rp_op *op = op_new(client_of(ud), call, OP_DELETE, path);
    if (op) list_pools(op);
}

static void h_update(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Respool__UpdateRequest *req = (const void *)msg;
    const char *id = req->id && req->id->value ? req->id->value : "";
    char err[512] = "";
    if (!valid_name(id) || !strcmp(id, ROOT_ID))
        snprintf(err, sizeof err, "id: \"%.200s\" is not a pool that can be updated", id);
    else if (!req->config) snprintf(err, sizeof err, "config is required");
    else if (req->config->name && req->config->name[0] && strcmp(req->config->name, id))
        snprintf(err, sizeof err, "config.name: a pool cannot be renamed (\"%.100s\" to \"%.100s\")", id,
                 req->config->name);
    json_t *spec = err[0] ? NULL : spec_from_config(req->config, err, sizeof err);
    if (!spec) {
        svc_reply_json(call, &peloton__api__v0__respool__update_response__descriptor,
                       error_body("invalidResourcePoolConfig", "id", id, err));
        return;
    }
    struct rp_op *op = op_new(client_of(ud), call, OP_UPDATE_GET, id);
    if (!op) {
        json_decref(spec);
        return;
    }
    op->spec = spec;
    char path[512];
    snprintf(path, sizeof path, POOLS_PATH "/%s", id);
    svc_op_request(&op->base, "GET", path, NULL, on_written);
}

/* ---------------------------------------------------------------- answers */

static void answer_listed(struct rp_op *op, const json_t *items) {
    const char *id = op->id;
    switch (op->kind) {
    case OP_QUERY: {
        json_t *a = json_array();
        json_array_append_new(a, root_info(items));
        size_t i;
        const json_t *o;
        json_array_foreach(items, i, o) json_array_append_new(a, info_json(items, o));
        svc_reply_json(op->base.call, &peloton__api__v0__respool__query_response__descriptor,
                       json_pack("{s:o}", "resourcePools", a));
        return;
    }
    case OP_GET: {
        const json_t *o = strcmp(id, ROOT_ID) ? find_pool(items, id) : NULL;
        if (strcmp(id, ROOT_ID) && !o) {
            char msg[400];
            snprintf(msg, sizeof msg, "resource pool %s not found", id);
            svc_reply_json(op->base.call, &peloton__api__v0__respool__get_response__descriptor,
                           error_body("notFound", "id", id, msg));
            return;
        }
        json_t *resp = json_pack("{s:o}", "poolinfo", o ? info_json(items, o) : root_info(items));
        if (op->children) {
            json_t *kids = json_array();
            size_t i;
            const json_t *c;
            json_array_foreach(items, i, c) if (!strcmp(pool_parent(c), id)) json_array_append_new(kids, info_json(items, c));
            json_object_set_new(resp, "childPools", kids);
        }
        svc_reply_json(op->base.call, &peloton__api__v0__respool__get_response__descriptor, resp);
        return;
    }
    case OP_LOOKUP:
    case OP_DELETE: {
        /* the pool whose path is id ("/" is the root: looked up, never deleted) */
        char want[4096], path[4096];
        snprintf(want, sizeof want, "%s", id);
        size_t n = strlen(want);
        while (n > 1 && want[n - 1] == '/') want[--n] = 0; /* "/a/" is "/a" */
        const char *found = !strcmp(want, "/") && op->kind == OP_LOOKUP ? ROOT_ID : NULL;
        size_t i;
        const json_t *o;
        json_array_foreach(items, i, o) {
            const char *name = pool_name(o);
            if (!found && name && !pool_path(items, name, path, sizeof path) && !strcmp(path, want)) found = name;
        }
        const ProtobufCMessageDescriptor *d = op->kind == OP_LOOKUP
                                                  ? &peloton__api__v0__respool__lookup_response__descriptor
                                                  : &peloton__api__v0__respool__delete_response__descriptor;
        if (!found) {
            char msg[400];
            snprintf(msg, sizeof msg, "resource pool path %.300s not found", want);
            svc_reply_json(op->base.call, d,
                           json_pack("{s:{s:{s:{s:s},s:s}}}", "error", "notFound", "path", "value", id, "message", msg));
            return;
        }
        if (op->kind == OP_LOOKUP) {
            svc_reply_json(op->base.call, d, json_pack("{s:o}", "id", id_json(found)));
            return;
        }
        json_t *kids = children_json(items, found);
        if (json_array_size(kids)) {
            char msg[400];
            snprintf(msg, sizeof msg, "resource pool %.300s is not a leaf: it has %zu child pools", want,
                     json_array_size(kids));
            json_decref(kids);
            svc_reply_json(op->base.call, d, error_body("isNotLeaf", "id", found, msg));
            return;
        }
        json_decref(kids);
        /* a pool that still holds work stays: the Jobs first (on_jobs), then the delete */
        struct rp_op *del = op_new(op->base.kc, op->base.call, OP_DELETE_JOBS, found);
        if (del) svc_op_request(&del->base, "GET", JOBS_PATH, NULL, on_jobs);
        return;
    }
    default: return;
    }
}

static void on_listed(void *ud, const struct kc_response *r) {
    struct rp_op *op = ud;
    const json_t *items = svc_list_items(r);
    if (!items) svc_fail_status(op->base.call, r);
    else answer_listed(op, items);
    svc_op_free(&op->base);
}

/* Jobs whose pool is op->id and that have not ended: the pool is busy. */
static void on_jobs(void *ud, const struct kc_response *r) {
    struct rp_op *op = ud;
    const json_t *items = svc_list_items(r);
    if (!items) {
        svc_fail_status(op->base.call, r);
        svc_op_free(&op->base);
        return;
    }
    size_t i, busy = 0;
    const json_t *j;
    json_array_foreach(items, i, j) {
        const char *pool = json_string_value(json_object_get(json_object_get(j, "spec"), "resourcePool"));
        const char *st = json_string_value(json_object_get(json_object_get(j, "status"), "state"));
        bool ended = st && (!strcmp(st, "SUCCEEDED") || !strcmp(st, "FAILED") || !strcmp(st, "KILLED") ||
                            !strcmp(st, "DELETED"));
        busy += pool && !strcmp(pool, op->id) && !ended;
    }
    if (busy) {
        char msg[400];
        snprintf(msg, sizeof msg, "resource pool %s is busy: %zu jobs in it have not ended", op->id, busy);
        svc_reply_json(op->base.call, &peloton__api__v0__respool__delete_response__descriptor,
                       error_body("isBusy", "id", op->id, msg));
        svc_op_free(&op->base);
        return;
    }
    char p[512];
    snprintf(p, sizeof p, POOLS_PATH "/%s", op->id);
    op->kind = OP_DELETE_DO;
    svc_op_request(&op->base, "DELETE", p, NULL, on_written);
}

/* Answers to writes (and the read before an update). */
static void on_written(void *ud, const struct kc_response *r) {
    struct rp_op *op = ud;
    const char *msg = r->error ? r->error : "";
    switch (op->kind) {
    case OP_CREATE:
        if (r->status == 201 || r->status == 200)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__create_response__descriptor,
                           json_pack("{s:o}", "result", id_json(op->id)));
        else if (r->status == 409)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__create_response__descriptor,
                           error_body("alreadyExists", "id", op->id, msg));
        else if (r->status == 422 || r->status == 400)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__create_response__descriptor,
                           error_body("invalidResourcePoolConfig", "id", op->id, msg));
        else svc_fail_status(op->base.call, r);
        break;
    case OP_UPDATE_GET: {
        json_t *obj = r->status == 200 ? kc_response_body(r) : NULL;
        if (r->status == 404) {
            char m[400];
            snprintf(m, sizeof m, "resource pool %s not found", op->id);
            svc_reply_json(op->base.call, &peloton__api__v0__respool__update_response__descriptor,
                           error_body("notFound", "id", op->id, m));
            break;
        }
        if (!json_is_object(obj)) {
            svc_fail_status(op->base.call, r);
            break;
        }
        /* the stored object with the new spec; its resourceVersion makes the
         * write conditional (a write lost to another, the resource manager's
         * status say, is read and written again, 5 tries in all; then ABORTED) */
        json_t *put = json_deep_copy(obj);
        json_object_set(put, "spec", op->spec);
        json_object_del(put, "status");
        char p[512];
        snprintf(p, sizeof p, POOLS_PATH "/%s", op->id);
        op->kind = OP_UPDATE_PUT;
        svc_op_request(&op->base, "PUT", p, put, on_written); /* op lives on, or is freed */
        json_decref(put);
        return;
    }
    case OP_UPDATE_PUT:
        if (r->status == 409 && ++op->tries < 5) {
            char p[512];
            snprintf(p, sizeof p, POOLS_PATH "/%s", op->id);
            op->kind = OP_UPDATE_GET;
            svc_op_request(&op->base, "GET", p, NULL, on_written); /* op lives on, or is freed */
            return;
        }
        if (r->status == 200)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__update_response__descriptor, json_object());
        else if (r->status == 404)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__update_response__descriptor,
                           error_body("notFound", "id", op->id, msg));
        else if (r->status == 422 || r->status == 400)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__update_response__descriptor,
                           error_body("invalidResourcePoolConfig", "id", op->id, msg));
        else svc_fail_status(op->base.call, r);
        break;
    case OP_DELETE_DO:
        if (r->status == 200 || r->status == 202)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__delete_response__descriptor, json_object());
        else if (r->status == 404)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__delete_response__descriptor,
                           json_pack("{s:{s:{s:{s:s},s:s}}}", "error", "notFound", "path", "value", op->id, "message", msg));
        else if (r->status == 422 || r->status == 409 || r->status == 400)
            svc_reply_json(op->base.call, &peloton__api__v0__respool__delete_response__descriptor,
                           error_body(strstr(msg, "child") ? "isNotLeaf" : "notDeleted", "id", op->id, msg));
        else svc_fail_status(op->base.call, r);
        break;
    default: break;
    }
    svc_op_free(&op->base);
}

/* ---------------------------------------------------------------- registration */

static const struct native_method methods[] = {
    {"CreateResourcePool", &peloton__api__v0__respool__create_request__descriptor,
     &peloton__api__v0__respool__create_response__descriptor, h_create, false},
    {"GetResourcePool", &peloton__api__v0__respool__get_request__descriptor,
     &peloton__api__v0__respool__get_response__descriptor, h_get, false},
    {"DeleteResourcePool", &peloton__api__v0__respool__delete_request__descriptor,
     &peloton__api__v0__respool__delete_response__descriptor, h_delete, false},
    {"UpdateResourcePool", &peloton__api__v0__respool__update_request__descriptor,
     &peloton__api__v0__respool__update_response__descriptor, h_update, false},
    {"LookupResourcePoolID", &peloton__api__v0__respool__lookup_request__descriptor,
     &peloton__api__v0__respool__lookup_response__descriptor, h_lookup, false},
    {"Query", &peloton__api__v0__respool__query_request__descriptor,
     &peloton__api__v0__respool__query_response__descriptor, h_query, false},
};

struct svc_respool *svc_respool_new(struct kclient *kc) {
    struct svc_respool *s = calloc(1, sizeof *s);
    if (s) s->kc = kc;
    return s;
}

void svc_respool_free(struct svc_respool *s) { free(s); }

int svc_respool_register(struct svc_respool *s, struct native_registry *r) {
    size_t n = sizeof methods / sizeof methods[0];
    int rc = native_registry_add(r, "peloton.api.respool.ResourceManager", methods, n, s);
    return rc ? rc : native_registry_add(r, "peloton.api.v0.respool.ResourceManager", methods, n, s);
}
