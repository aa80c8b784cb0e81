/* What the native services (svc_job.c, svc_respool.c, svc_task.c) share:
 * every call there is answered from requests to the Kubernetes API
 * (kclient), its response message built as proto3 JSON and turned into the
 * message by pbjson. Internal to src/native.
 *
 * Errors reach the client as a gRPC status (native_call_fail) only where a
 * Peloton response has no error member for them: out of memory, the API
 * server unreachable or answering what the mapping does not expect.
 *
 * Ownership: j passed to svc_reply_json is stolen; everything else is
 * borrowed. A per-call struct is freed by svc_op_free, or by
 * svc_op_request when its request cannot be sent. */
#ifndef PELOTON_NATIVE_SVC_COMMON_H
#define PELOTON_NATIVE_SVC_COMMON_H

#include <jansson.h>
#include <stddef.h>

#include "kclient.h"
#include "native.h"
#include "resource.h"

/* A call in flight, waiting on the API server. A service's per-call struct
 * begins with one (member base), so a kclient callback's ud is both. */
struct svc_op {
    struct kclient *kc;                    /* the service's client, borrowed */
    struct native_call *call;              /* the call to answer */
    void (*release)(struct svc_op *op);    /* frees the service's struct and what it holds */
    /* a write in flight (svc_op_request): its kind for the read cache
     * (ncache_write_kind) and the service's callback */
    int write_kind;
    struct ncache *write_cache;
    kc_done_fn write_done;
};

/* A zeroed per-call struct of size bytes (struct svc_op first) with its
 * base set, or NULL after failing call with INTERNAL "out of memory". */
void *svc_op_new(size_t size, struct kclient *kc, struct native_call *call, void (*release)(struct svc_op *op));
void svc_op_free(struct svc_op *op);

/* Sends method path (body: NULL or JSON, borrowed) for op; done(op, r) runs
 * later, exactly once. When it cannot be sent, op's call fails with
 * UNAVAILABLE "API server unreachable" and op is freed (done never runs).
 * A write's answer is told to the role's read cache (ncache_wrote) before
 * done runs, so the client's next read sees it. */
void svc_op_request(struct svc_op *op, const char *method, const char *path, const json_t *body, kc_done_fn done);

/* The role's read cache (native_call_app of the call), or NULL. */
struct ncache *svc_cache(struct native_call *call);

/* The "items" array of a list answer r (a 200 with a JSON list), borrowed
 * for the callback; NULL for any other answer (then fail the call). */
const json_t *svc_list_items(const struct kc_response *r);
/* The same for a callback that has nothing to do but give up without them:
 * for any other answer it fails op's call (svc_fail_status), frees op and
 * returns NULL, and the callback returns at once. */
const json_t *svc_list_items_or_fail(struct svc_op *op, const struct kc_response *r);

/* The gRPC code for an API-server answer with HTTP status http that the
 * mapping has no Peloton error for, the same in every service: 0 (no
 * answer) UNAVAILABLE, 400/422 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403
 * PERMISSION_DENIED, 404 NOT_FOUND, 409 ABORTED (a write lost a
 * resourceVersion race), 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 504
 * DEADLINE_EXCEEDED, anything else INTERNAL. */
enum native_code svc_status_code(long http);

/* Fails call for an answer r the mapping has no Peloton error for, with
 * svc_status_code(r->status) and the API server's message. */
void svc_fail_status(struct native_call *call, const struct kc_response *r);

/* Replies on call with the message desc read from j (stolen; NULL means out
 * of memory); a j that does not fit desc fails the call with INTERNAL. */
void svc_reply_json(struct native_call *call, const ProtobufCMessageDescriptor *desc, json_t *j);

/* Native units <-> quantities: cpu and gpu in cores, memory and disk in MB
 * (2^20 bytes). svc_quantity writes the quantity string for n units of k,
 * or returns -1 when n is not a finite non-negative amount that fits;
 * svc_native_amount reads a quantity member (string or integer), NAN when
 * absent or bad. */
int svc_quantity(enum res_kind k, double n, char *out, size_t len);
double svc_native_amount(enum res_kind k, const json_t *q);

#endif
