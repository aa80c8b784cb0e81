/* Shared by the native services (svc_common.h). */
#include "svc_common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ncache.h"
#include "pbjson.h"
#include "quantity.h"

#define MB (1024.0 * 1024.0)

void *svc_op_new(size_t size, struct kclient *kc, struct native_call *call, void (*release)(struct svc_op *op)) {
    struct svc_op *op = calloc(1, size);
    if (!op) {
        native_call_fail(call, NC_INTERNAL, "out of memory");
        return NULL;
    }
    op->kc = kc;
    op->call = call;
    op->release = release;
    return op;
}

void svc_op_free(struct svc_op *op) { op->release(op); }

struct ncache *svc_cache(struct native_call *call) { return native_call_app(call); }

/* A write's answer: the cache hears of it before the service replies. */
static void on_write_done(void *ud, const struct kc_response *r) {
    struct svc_op *op = ud;
    ncache_wrote(op->write_cache, op->write_kind, r);
    op->write_done(ud, r);
}

void svc_op_request(struct svc_op *op, const char *method, const char *path, const json_t *body, kc_done_fn done) {
    op->write_kind = ncache_write_kind(method, path);
    if (op->write_kind >= 0) {
        op->write_cache = svc_cache(op->call);
        op->write_done = done;
        done = on_write_done;
    }
    if (kclient_request(op->kc, method, path, body, NULL, done, op) == 0) return;
    native_call_fail(op->call, NC_UNAVAILABLE, "API server unreachable");
    svc_op_free(op);
}

const json_t *svc_list_items(const struct kc_response *r) {
    const json_t *items = json_object_get(r->status == 200 ? kc_response_body(r) : NULL, "items");
    return json_is_array(items) ? items : NULL;
}

const json_t *svc_list_items_or_fail(struct svc_op *op, const struct kc_response *r) {
    const json_t *items = svc_list_items(r);
    if (!items) {
        svc_fail_status(op->call, r);
        svc_op_free(op);
    }
    return items;
}

enum native_code svc_status_code(long http) {
    switch (http) {
    case 0: return NC_UNAVAILABLE;
    case 400: case 422: return NC_INVALID_ARGUMENT;
    case 401: return NC_UNAUTHENTICATED;
    case 403: return NC_PERMISSION_DENIED;
    case 404: return NC_NOT_FOUND;
    case 409: return NC_ABORTED;
    case 429: return NC_RESOURCE_EXHAUSTED;
    case 503: return NC_UNAVAILABLE;
    case 504: return NC_DEADLINE_EXCEEDED;
    default: return NC_INTERNAL;
    }
}

void svc_fail_status(struct native_call *call, const struct kc_response *r) {
    enum native_code c = svc_status_code(r->status);
    if (r->status == 0) native_call_fail(call, c, "API server: %s", r->error ? r->error : "no answer");
    else native_call_fail(call, c, "API server answered %ld: %s", r->status, r->error ? r->error : "");
}

void svc_reply_json(struct native_call *call, const ProtobufCMessageDescriptor *desc, json_t *j) {
    char err[256];
    ProtobufCMessage *m = j ? pbjson_to_msg(desc, j, err, sizeof err) : NULL;
    json_decref(j);
    if (!m) {
        native_call_fail(call, NC_INTERNAL, "building %s: %s", desc->name, j ? err : "out of memory");
        return;
    }
    native_call_reply(call, m);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* cpu and gpu count in millicores, memory and disk in bytes. */
static double base_per_unit(enum res_kind k) { return k == RES_CPU || k == RES_GPU ? 1000.0 : MB; }

int svc_quantity(enum res_kind k, double n, char *out, size_t len) {
    double base = n * base_per_unit(k);
    if (!isfinite(n) || n < 0 || base >= 9.2e18) return -1; /* int64_t's range, with room for rounding */
    quantity_format(k, (int64_t)llround(base), out, len);
    return 0;
}

double svc_native_amount(enum res_kind k, const json_t *q) {
    char buf[64], err[128];
    int64_t v;
    if (json_is_integer(q)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(q));
    else if (json_is_string(q)) snprintf(buf, sizeof buf, "%s", json_string_value(q));
    else return NAN;
    if (quantity_parse_kind(k, buf, &v, err, sizeof err)) return NAN;
    return (double)v / base_per_unit(k);
}
