/* v1alpha ResourcePoolService through the v0 ResourceManager (v1_respool.h).
 * The two shapes differ in little: ResourcePoolSpec is v0's
 * ResourcePoolConfig with `revision` for `changeLog` (the same members) and
 * prefixed enum names; ResourcePoolInfo renames id, config and usage. */
#include "v1_respool.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"
#include "peloton/api/v0/respool/respool.pb-c.h"
#include "peloton/api/v1alpha/respool/svc/respool_svc.pb-c.h"

#define D(x) (&peloton__api__v1alpha__respool__##x##__descriptor)
#define D0(x) (&peloton__api__v0__respool__##x##__descriptor)

enum kind { K_CREATE, K_GET, K_DELETE_FIND, K_DELETE, K_UPDATE, K_LOOKUP, K_QUERY };

struct rcall {
    struct native_call *call; /* the v1alpha call */
    enum kind kind;
    json_t *req;              /* its request as proto3 JSON */
};

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* ---------------------------------------------------------------- shapes */

static const char *const kinds[][2] = {/* v1alpha, v0 */
                                       {"RESERVATION_TYPE_ELASTIC", "ELASTIC"},
                                       {"RESERVATION_TYPE_STATIC", "STATIC"},
                                       {"SCHEDULING_POLICY_PRIORITY_FIFO", "PriorityFIFO"}};

/* The other version's name of enum value name (to v0 when to_v0), NULL for the invalid ones. */
static const char *enum_to(const char *name, bool to_v0) {
    for (size_t i = 0; name && i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(name, kinds[i][!to_v0])) return kinds[i][to_v0];
    return NULL;
}

/* A pool spec or config (JSON) in the other version's shape, new. */
static json_t *pool_shape(const json_t *in, bool to_v0) {
    json_t *o = json_deep_copy(in);
    if (!o) return json_object();
    json_t *cl = json_object_get(o, to_v0 ? "revision" : "changeLog");
    if (cl) {
        json_object_set(o, to_v0 ? "changeLog" : "revision", cl);
        json_object_del(o, to_v0 ? "revision" : "changeLog");
    }
    const char *p = enum_to(jstr(o, "policy"), to_v0);
    if (p) json_object_set_new(o, "policy", json_string(p));
    else json_object_del(o, "policy");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(o, "resources"), i, r) {
        const char *t = enum_to(jstr(r, "type"), to_v0);
        if (t) json_object_set_new(r, "type", json_string(t));
        else json_object_del(r, "type");
    }
    return o;
}

/* A v0 ResourcePoolInfo as v1alpha's, new. */
static json_t *info_v1(const json_t *v0) {
    json_t *o = json_object();
    static const char *const same[] = {"parent", "children", "path"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (json_object_get(v0, same[i])) json_object_set(o, same[i], json_object_get(v0, same[i]));
    if (json_object_get(v0, "id")) json_object_set(o, "respoolId", json_object_get(v0, "id"));
    if (json_object_get(v0, "usage")) json_object_set(o, "usages", json_object_get(v0, "usage"));
    if (json_object_get(v0, "config")) json_object_set_new(o, "spec", pool_shape(json_object_get(v0, "config"), false));
    return o;
}

static json_t *infos_v1(const json_t *arr) {
    json_t *o = json_array();
    size_t i;
    const json_t *x;
    json_array_foreach(arr, i, x) json_array_append_new(o, info_v1(x));
    return o;
}

/* ---------------------------------------------------------------- calls */

static void rc_free(struct rcall *rc) {
    json_decref(rc->req);
    free(rc);
}

static void reply(struct rcall *rc, const ProtobufCMessageDescriptor *d, json_t *j) {
    char err[256];
    ProtobufCMessage *m = j ? pbjson_to_msg(d, j, err, sizeof err) : NULL;
    if (!m) native_call_fail(rc->call, NC_INTERNAL, "building %s: %s", d->name, j ? err : "out of memory");
    else native_call_reply(rc->call, m);
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    json_decref(j);
}

/* v0's error member (the first set) as a gRPC status; false when none is set. */
static bool failed_v0(struct rcall *rc, const json_t *resp) {
    static const struct {
        const char *member;
        enum native_code code;
    } map[] = {{"alreadyExists", NC_ALREADY_EXISTS},  {"invalidResourcePoolConfig", NC_INVALID_ARGUMENT},
               {"notFound", NC_NOT_FOUND},            {"invalidPath", NC_INVALID_ARGUMENT},
               {"isBusy", NC_FAILED_PRECONDITION},    {"isNotLeaf", NC_INVALID_ARGUMENT},
               {"notDeleted", NC_INTERNAL}};
    const json_t *e = json_object_get(resp, "error");
    for (size_t i = 0; e && i < sizeof map / sizeof map[0]; i++) {
        const json_t *x = json_object_get(e, map[i].member);
        if (!x) continue;
        native_call_fail(rc->call, map[i].code, "%s", jstr(x, "message") ?: map[i].member);
        return true;
    }
    return false;
}

static void v0_call(struct rcall *rc, const char *method, const ProtobufCMessageDescriptor *d, json_t *j);

/* The v0 answer, as the v1alpha one. */
static void v0_done(void *ud, enum native_code code, const char *msg, const ProtobufCMessage *resp) {
    struct rcall *rc = ud;
    char err[256];
    json_t *r = resp ? pbjson_from_msg(resp, err, sizeof err) : NULL;
    if (code != NC_OK || !r) {
        native_call_fail(rc->call, code != NC_OK ? code : NC_INTERNAL, "%s", code != NC_OK ? msg : err);
        json_decref(r);
        rc_free(rc);
        return;
    }
    if (failed_v0(rc, r)) {
        json_decref(r);
        rc_free(rc);
        return;
    }
    switch (rc->kind) {
    case K_CREATE: reply(rc, D(create_resource_pool_response), json_pack("{s:O}", "respoolId", json_object_get(r, "result"))); break;
    case K_GET: {
        json_t *o = json_pack("{s:o}", "respool", info_v1(json_object_get(r, "poolinfo")));
        if (json_array_size(json_object_get(r, "childPools")))
            json_object_set_new(o, "childRespools", infos_v1(json_object_get(r, "childPools")));
        reply(rc, D(get_resource_pool_response), o);
        break;
    }
    case K_DELETE_FIND: { /* v0 deletes by path: the pool's, from Get */
        const json_t *path = json_object_get(json_object_get(r, "poolinfo"), "path");
        rc->kind = K_DELETE;
        v0_call(rc, "DeleteResourcePool", D0(delete_request), json_pack("{s:O}", "path", path ? path : json_null()));
        json_decref(r);
        return; /* rc goes on */
    }
    case K_DELETE: reply(rc, D(delete_resource_pool_response), json_object()); break;
    case K_UPDATE: reply(rc, D(update_resource_pool_response), json_object()); break;
    case K_LOOKUP: reply(rc, D(lookup_resource_pool_idresponse), json_pack("{s:O}", "respoolId", json_object_get(r, "id"))); break;
    case K_QUERY:
        reply(rc, D(query_resource_pools_response), json_pack("{s:o}", "respools", infos_v1(json_object_get(r, "resourcePools"))));
        break;
    }
    json_decref(r);
    rc_free(rc);
}

/* Calls the v0 method with request j (stolen, as JSON of d). */
static void v0_call(struct rcall *rc, const char *method, const ProtobufCMessageDescriptor *d, json_t *j) {
    char err[256], key[128];
    ProtobufCMessage *m = j ? pbjson_to_msg(d, j, err, sizeof err) : NULL;
    json_decref(j);
    if (!m) {
        native_call_fail(rc->call, NC_INVALID_ARGUMENT, "%s", j ? err : "out of memory");
        rc_free(rc);
        return;
    }
    snprintf(key, sizeof key, "%s/%s", V1_RESPOOL_V0, method);
    native_call_internal(rc->call, key, m, v0_done, rc);
}

static struct rcall *rc_new(struct native_call *call, const ProtobufCMessage *msg, enum kind kind) {
    char err[256];
    json_t *req = pbjson_from_msg(msg, err, sizeof err);
    struct rcall *rc = req ? calloc(1, sizeof *rc) : NULL;
    if (!rc) {
        native_call_fail(call, req ? NC_INTERNAL : NC_INVALID_ARGUMENT, "%s", req ? "out of memory" : err);
        json_decref(req);
        return NULL;
    }
    rc->call = call;
    rc->kind = kind;
    rc->req = req;
    return rc;
}

static void h_create(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud;
    struct rcall *rc = rc_new(call, msg, K_CREATE);
    if (!rc) return;
    const json_t *spec = json_object_get(rc->req, "spec");
    const char *id = jstr(json_object_get(rc->req, "respoolId"), "value");
    if (id && *id && strcmp(id, jstr(spec, "name") ?: "")) { /* a pool's id is its name here */
        native_call_fail(call, NC_INVALID_ARGUMENT, "respoolId: \"%.100s\" must be spec.name (pool ids are names here)", id);
        rc_free(rc);
        return;
    }
    v0_call(rc, "CreateResourcePool", D0(create_request), json_pack("{s:o}", "config", pool_shape(spec, true)));
}

static void h_get(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud;
    struct rcall *rc = rc_new(call, msg, K_GET);
    if (!rc) return;
    json_t *q = json_pack("{s:b}", "includeChildPools", json_is_true(json_object_get(rc->req, "includeChildPools")));
    if (json_object_get(rc->req, "respoolId")) json_object_set(q, "id", json_object_get(rc->req, "respoolId"));
    v0_call(rc, "GetResourcePool", D0(get_request), q);
}

static void h_delete(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud;
    struct rcall *rc = rc_new(call, msg, K_DELETE_FIND);
    if (!rc) return;
    const char *id = jstr(json_object_get(rc->req, "respoolId"), "value");
    if (!id || !*id) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "respoolId: required (the root is not deleted)");
        rc_free(rc);
        return;
    }
    v0_call(rc, "GetResourcePool", D0(get_request), json_pack("{s:{s:s}}", "id", "value", id));
}

static void h_update(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud;
    struct rcall *rc = rc_new(call, msg, K_UPDATE);
    if (!rc) return;
    json_t *q = json_pack("{s:o,s:b}", "config", pool_shape(json_object_get(rc->req, "spec"), true), "Force",
                          json_is_true(json_object_get(rc->req, "Force")));
    if (json_object_get(rc->req, "respoolId")) json_object_set(q, "id", json_object_get(rc->req, "respoolId"));
    v0_call(rc, "UpdateResourcePool", D0(update_request), q);
}

static void h_lookup(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud;
    struct rcall *rc = rc_new(call, msg, K_LOOKUP);
    if (!rc) return;
    json_t *q = json_object();
    if (json_object_get(rc->req, "path")) json_object_set(q, "path", json_object_get(rc->req, "path"));
    v0_call(rc, "LookupResourcePoolID", D0(lookup_request), q);
}

static void h_query(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud;
    struct rcall *rc = rc_new(call, msg, K_QUERY);
    if (rc) v0_call(rc, "Query", D0(query_request), json_object());
}

#define M(name, in, out, fn) {name, D(in), D(out), fn, false}
static const struct native_method methods[] = {
    M("CreateResourcePool", create_resource_pool_request, create_resource_pool_response, h_create),
    M("GetResourcePool", get_resource_pool_request, get_resource_pool_response, h_get),
    M("DeleteResourcePool", delete_resource_pool_request, delete_resource_pool_response, h_delete),
    M("UpdateResourcePool", update_resource_pool_request, update_resource_pool_response, h_update),
    M("LookupResourcePoolID", lookup_resource_pool_idrequest, lookup_resource_pool_idresponse, h_lookup),
    M("QueryResourcePools", query_resource_pools_request, query_resource_pools_response, h_query),
};

int v1_respool_register(struct native_registry *r) {
    return native_registry_add(r, "peloton.api.v1alpha.respool.ResourcePoolService", methods,
                               sizeof methods / sizeof methods[0], NULL);
}
