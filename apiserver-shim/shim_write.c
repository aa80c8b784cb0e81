/* The shim's writes of existing objects and its creates, on the store's
 * read-modify-write (store_modify). Each kind of write is one modify
 * function over the stored object (replace, patch, status, binding); the
 * same function runs on either store path:
 *
 *   - asynchronously (the store's pipelined connection) for the built-in
 *     resources when pelotond has one: the handler defers its reply and the
 *     loop goes on, so a turn's writes share one Redis round trip;
 *   - synchronously otherwise, and always for CRDs and custom resources,
 *     whose admission reads other objects (the pool tree) and must see the
 *     store as it is when the write lands.
 *
 * A modify function may choose its own error answer (code, reason, details)
 * or hand back a ready Status (CRD admission writes one). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim.h"
#include "shim_auth.h"
#include "jparse.h"
#include "labels.h"
#include "patch.h"
#include "shim_proto.h"
#include "validate.h"

enum write_kind { WK_CREATE, WK_REPLACE, WK_PATCH, WK_STATUS, WK_BINDING };

struct write_req {
    struct shim *s;
    const struct shim_resource *r;
    enum write_kind kind;
    char ns[STORE_MAX_NAMESPACE + 1], name[STORE_MAX_NAME + 1];
    int code;            /* the answer's code on success */
    json_t *body;        /* replace: the object; patch and status: the patch or object; binding: the Binding */
    shim_patch_fn apply; /* patch, and status by PATCH */
    const char *node;    /* binding: the target node (in body) */
    char event_src[64];  /* binding: the component whose Scheduled Event to make ("": none) */
    char ename[STORE_MAX_NAME + 1]; /* ... and that Event's name, once made */
    char epoch[24];      /* binding: the placement term's epoch it is fenced by ("": none; labels.h) */
    struct http_deferred *d;
    struct audit_rec *audit; /* a deferred reply: the request's audit record (shim_auth.h) */
    /* an error answer chosen by the modify function */
    int err_code;
    const char *err_reason;
    json_t *err_details;
    struct http_response made; /* a complete answer (CRD admission) when made.body is set */
    struct shim_obs obs;       /* a deferred reply: the request, for its latency */
    char *accept;              /* a deferred reply: the request's Accept when it names protobuf (shim_proto.h) */
    bool lease_conditional;    /* a Lease renewal written as text (shim_lease.c) named its resourceVersion */
};

static bool is_crd(const struct shim_resource *r) { return !r->custom && !strcmp(r->plural, "customresourcedefinitions"); }

static void write_free(struct write_req *w) {
    json_decref(w->body);
    json_decref(w->err_details);
    free(w->made.body);
    free(w->accept);
    free(w);
}

static int refuse(struct write_req *w, int code, const char *reason, json_t *details, int rc) {
    w->err_code = code;
    w->err_reason = reason;
    json_decref(w->err_details);
    w->err_details = details;
    return rc;
}

/* CRD and custom-resource admission on the object about to be written; a
 * refusal is a complete answer. */
static int admit(struct write_req *w, json_t *next, const json_t *cur) {
    struct http_response tmp = {.status = 200};
    if (shim_rbac_refuse_update(w->r, next, cur, w->name, &tmp)) { /* a binding's roleRef is fixed (shim_rbac.c) */
        free(w->made.body);
        w->made = tmp;
        return -ECANCELED;
    }
    if (!w->r->custom && !is_crd(w->r)) return 0;
    if (!shim_crd_admit(w->s, w->r, next, cur, &tmp)) return 0;
    free(w->made.body);
    w->made = tmp;
    return -ECANCELED;
}

/* ---- the modify functions ---- */

/* ObjectMeta's lists and maps are omitempty in kube-apiserver's types: an
 * empty one written (kubectl diff's and apply's patches carry
 * `annotations: {}` when the last-applied annotation is left out) is not
 * stored, nor shown. */
void shim_meta_omit_empty(json_t *obj) {
    static const char *const keys[] = {"labels", "annotations", "finalizers", "ownerReferences", "managedFields"};
    json_t *md = json_object_get(obj, "metadata");
    for (size_t i = 0; json_is_object(md) && i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(md, keys[i]);
        if (json_is_null(v) || (json_is_object(v) && !json_object_size(v)) || (json_is_array(v) && !json_array_size(v)))
            json_object_del(md, keys[i]);
    }
}

/* PUT: the caller's object, with status kept where a status subresource owns it. */
static int replace_fn(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct write_req *w = ud;
    json_t *n = json_deep_copy(w->body);
    if (!n) return snprintf(err, errlen, "out of memory"), -ENOMEM;
    shim_meta_omit_empty(n);
    if (shim_has_status(w->r)) {
        json_t *st = json_object_get(cur, "status");
        if (st) json_object_set(n, "status", st);
        else json_object_del(n, "status");
    }
    int rc = admit(w, n, cur);
    if (rc) {
        json_decref(n);
        return rc;
    }
    *next = n;
    return 0;
}

/* The answer to a patch that failed with rc and msg (patch.h's codes): a
 * malformed patch is a 400, one past a limit (the patched object's size,
 * values, depth, or the work) a 413, one that does not apply a 422 Invalid. */
static int patch_refused(struct write_req *w, int rc, const char *msg, char *err, size_t errlen) {
    const struct shim_resource *r = w->r;
    if (rc == -EINVAL) return snprintf(err, errlen, "%s", msg), refuse(w, 400, "BadRequest", NULL, rc);
    if (rc == -E2BIG) return snprintf(err, errlen, "%s", msg), refuse(w, 413, "RequestEntityTooLarge", NULL, rc);
    /* Invalid names the Kind, and kubectl prints the causes */
    json_t *d = json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:s}]}", "name", w->name, "group", r->group, "kind",
                          r->kind, "causes", "reason", "FieldValueInvalid", "message", msg, "field", "patch");
    snprintf(err, errlen, "%s \"%s\" is invalid: patch: %s", r->kind, w->name, msg);
    return refuse(w, 422, "Invalid", d, -EINVAL);
}

/* PATCH: the patch over what is stored; a patch that names no
 * resourceVersion applies to whatever is current (a lost race patches again). */
static int patch_fn(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct write_req *w = ud;
    const struct shim_resource *r = w->r;
    json_t *n = NULL;
    char msg[512] = "";
    int rc = w->apply(cur, w->body, &n, msg, sizeof msg);
    if (rc) return patch_refused(w, rc, msg, err, errlen);
    shim_meta_omit_empty(n);
    json_t *md = json_object_get(n, "metadata");
    const char *nname = json_string_value(json_object_get(md, "name"));
    if (!json_is_object(n) || !json_is_object(md) || !nname || strcmp(nname, w->name) != 0) {
        json_decref(n);
        snprintf(err, errlen, "%s \"%s\" is invalid: metadata.name: the patch must not change or remove the name",
                 r->kind, w->name);
        return refuse(w, 422, "Invalid", json_pack("{s:s, s:s, s:s}", "group", r->group, "kind", r->plural, "name",
                                                   w->name), -EINVAL);
    }
    if (shim_has_status(r)) /* the main resource does not write status */
        json_object_set(n, "status", json_object_get(cur, "status") ? json_object_get(cur, "status") : json_null());
    if (json_is_null(json_object_get(n, "status"))) json_object_del(n, "status");
    if (!json_string_value(json_object_get(json_object_get(w->body, "metadata"), "resourceVersion")))
        json_object_del(md, "resourceVersion");
    shim_view_in(r, shim_with_type(r, n)); /* stored in the preferred version's meaning (shim_versions.c) */
    json_t *d;
    if ((rc = shim_validate(r, n, w->name, err, errlen, &d))) {
        json_decref(n);
        return rc == -EINVAL ? refuse(w, 422, "Invalid", d, rc) : rc;
    }
    rc = admit(w, n, cur);
    if (rc) {
        json_decref(n);
        return rc;
    }
    *next = n;
    return 0;
}

/* cur copied one level deep, and its metadata (which the store writes
 * fields of) too: what a write changes is replaced, never edited in place,
 * so the rest is shared with cur instead of copied. NULL when out of memory. */
static json_t *copy_shallow(const json_t *cur) {
    json_t *c = json_copy((json_t *)cur);
    json_t *md = json_copy(json_object_get(cur, "metadata"));
    if (!c || (md && json_object_set_new(c, "metadata", md))) {
        json_decref(c);
        return NULL;
    }
    return c;
}

static const char *meta_str(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

/* KIND/NAME/status: only status moves. A kubelet sends its pod's uid as a
 * precondition, and its resourceVersion on PUT; a merge or strategic-merge
 * PATCH naming metadata.resourceVersion is held to it too, as kube holds it
 * (a controller's write decided from an old copy gets 409). */
static int status_fn(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct write_req *w = ud;
    const char *want_uid = meta_str(w->body, "uid"), *want_rv = meta_str(w->body, "resourceVersion");
    const char *uid = meta_str(cur, "uid"), *rv = meta_str(cur, "resourceVersion");
    if ((want_uid && want_uid[0] && strcmp(want_uid, uid ? uid : "")) ||
        (want_rv && want_rv[0] && strcmp(want_rv, rv ? rv : ""))) {
        snprintf(err, errlen, "the object has been modified");
        return STORE_ECONFLICT;
    }
    json_t *n = NULL;
    if (w->apply) {
        char msg[512] = "";
        /* Only status is taken from the patched object: a merge patch (plain
         * or strategic) patches each key on its own, so it goes over the
         * stored status alone instead of a copy of the whole object. */
        json_t *only = NULL;
        if (w->apply == patch_merge || w->apply == patch_strategic) {
            json_t *cst = json_object_get(cur, "status");
            only = cst ? json_pack("{s:O}", "status", cst) : json_object();
            if (!only) return snprintf(err, errlen, "out of memory"), -ENOMEM;
        }
        /* a plain merge patch's values are shared, not copied: the status
         * taken from it is encoded and stored, never edited (nor is the patch) */
        int rc = w->apply == patch_merge ? patch_merge_sharing(only, w->body, &n, msg, sizeof msg)
                                         : w->apply(only ? only : cur, w->body, &n, msg, sizeof msg);
        json_decref(only);
        if (rc) return patch_refused(w, rc, msg, err, errlen);
    } else {
        n = json_incref(w->body);
    }
    json_t *c = copy_shallow(cur);
    json_t *st = json_object_get(n, "status");
    if (c && st) json_object_set(c, "status", st);
    json_decref(n);
    if (!c) return snprintf(err, errlen, "out of memory"), -ENOMEM;
    json_object_del(json_object_get(c, "metadata"), "resourceVersion"); /* checked above, on this very object */
    *next = c;
    return 0;
}

static void now_rfc3339(char out[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Replaces (or adds) the pod condition of the same type. The status and its
 * conditions are copies (the pod may share them with the stored object). */
static void set_condition(json_t *pod, const char *type, const char *status) {
    json_t *st = json_object_get(pod, "status");
    json_object_set_new(pod, "status", st = json_is_object(st) ? json_copy(st) : json_object());
    json_t *conds = json_object_get(st, "conditions");
    json_object_set_new(st, "conditions", conds = json_is_array(conds) ? json_copy(conds) : json_array());
    char ts[32];
    now_rfc3339(ts);
    json_t *c = json_pack("{s:s, s:s, s:n, s:s}", "type", type, "status", status, "lastProbeTime",
                          "lastTransitionTime", ts);
    size_t i;
    json_t *x;
    json_array_foreach(conds, i, x) if (json_is_string(json_object_get(x, "type")) &&
                                        !strcmp(json_string_value(json_object_get(x, "type")), type)) {
        json_array_set_new(conds, i, c);
        return;
    }
    json_array_append_new(conds, c);
}

/* pods/NAME/binding: what a scheduler posts. A pod is bound once. */
static int binding_fn(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct write_req *w = ud;
    const char *uid = meta_str(w->body, "uid"), *cuid = meta_str(cur, "uid");
    const char *cur_node = json_string_value(json_object_get(json_object_get(cur, "spec"), "nodeName"));
    if (uid && uid[0] && strcmp(uid, cuid ? cuid : "")) {
        snprintf(err, errlen, "Operation cannot be fulfilled on pods/binding \"%s\": the UID in the precondition does "
                 "not match the pod", w->name);
        return refuse(w, 409, "Conflict", NULL, STORE_ECONFLICT);
    }
    if (meta_str(cur, "deletionTimestamp")) {
        snprintf(err, errlen, "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is being deleted, cannot "
                 "be assigned to a host", w->name, w->name);
        return refuse(w, 409, "Conflict", NULL, STORE_ECONFLICT);
    }
    if (cur_node && cur_node[0]) {
        snprintf(err, errlen, "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is already assigned to "
                 "node \"%s\"", w->name, w->name, cur_node);
        return refuse(w, 409, "Conflict", NULL, STORE_ECONFLICT);
    }
    json_t *c = copy_shallow(cur);
    if (!c) return snprintf(err, errlen, "out of memory"), -ENOMEM;
    json_t *spec = json_object_get(c, "spec");
    json_object_set_new(c, "spec", spec = json_is_object(spec) ? json_copy(spec) : json_object());
    json_object_set_new(spec, "nodeName", json_string(w->node));
    set_condition(c, "PodScheduled", "True");
    json_t *md = json_object_get(c, "metadata");
    json_t *ann = json_object_get(json_object_get(w->body, "metadata"), "annotations");
    if (json_object_size(ann) && json_is_object(md)) { /* the Binding's annotations go onto the pod, as in kube */
        json_t *mine = json_object_get(md, "annotations");
        json_object_set_new(md, "annotations", mine = json_is_object(mine) ? json_copy(mine) : json_object());
        json_object_update(mine, ann);
        size_t total = 0;
        const char *k;
        json_t *v;
        json_object_foreach(mine, k, v) total += strlen(k) + json_string_length(v);
        if (total > VALIDATE_MAX_ANNOTATIONS) {
            json_decref(c);
            snprintf(err, errlen, "Binding \"%s\" is invalid: metadata.annotations: Too long: must have at most "
                     "%d bytes", w->name, VALIDATE_MAX_ANNOTATIONS);
            return refuse(w, 422, "Invalid", NULL, -EINVAL);
        }
    }
    json_object_del(md, "resourceVersion"); /* checked above, on this very object */
    *next = c;
    return 0;
}

/* pods/NAME/binding?scheduledEvent=: the Scheduled Event, stored with the
 * binding in its script call (store.h, store_async_modify_attach). */
static int binding_attach(void *ud, const json_t *next, struct store_text_obj *out) {
    struct write_req *w = ud;
    if (!w->event_src[0]) return -1;
    return shim_scheduled_event_text(w->s, w->ns, next, w->node, w->event_src, w->ename, sizeof w->ename, out);
}

static store_modify_fn modify_fn(enum write_kind k) {
    switch (k) {
    case WK_REPLACE: return replace_fn;
    case WK_PATCH: return patch_fn;
    case WK_STATUS: return status_fn;
    case WK_BINDING: return binding_fn;
    case WK_CREATE: break;
    }
    return NULL;
}

/* ---- answers ---- */

#define BOUND_STATUS "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"code\":201}"
/* the Event's name is a validated object name: no escaping */
#define BOUND_EVENT_STATUS                                                                                            \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"details\":{\"name\":\"%s\","    \
    "\"kind\":\"events\"},\"code\":201}"

/* The answer to a finished write: the object as stored (its bytes as they
 * are when they carry kind and apiVersion), or the Status of the failure.
 * event: a binding's Scheduled Event, stored with it (its name, or "" for
 * none), or NULL to make it now (the synchronous store). */
static void answer(struct write_req *w, int rc, const char *err, const json_t *obj, const char *json, size_t len,
                   const char *event, struct http_response *resp) {
    if (rc == -ECANCELED && w->made.body) { /* a complete answer from admission */
        *resp = w->made;
        w->made.body = NULL;
        return;
    }
    if (rc) {
        if (w->err_code) {
            shim_status(resp, w->err_code, w->err_reason, w->err_details, "%s", err);
            w->err_details = NULL;
        } else if (rc == STORE_EFENCED) { /* a Binding of a placement term that has ended: nothing bound */
            json_t *d = json_pack("{s:s, s:s, s:[{s:s, s:s, s:s}]}", "name", w->name, "kind", "pods", "causes",
                                  "reason", PELOTON_PLACEMENT_TERM_ENDED, "message", err, "field",
                                  PELOTON_PLACEMENT_EPOCH_ARG);
            shim_status(resp, 409, "Conflict", d, "Operation cannot be fulfilled on pods/binding \"%s\": the "
                        "placement term of epoch %s has ended (%s); the pod was not bound", w->name, w->epoch, err);
        } else {
            shim_store_error_msg(resp, rc, w->r, w->name, rc == STORE_NO_NAMESPACE ? w->ns : err);
        }
        return;
    }
    if (is_crd(w->r)) shim_crd_sync(w->s); /* a new or changed CRD is served at once */
    if (w->kind == WK_BINDING) { /* with the Scheduled Event, when asked: the answer names it (shim.h) */
        resp->status = 201;
        if (!event && w->event_src[0] && !shim_scheduled_event(w->s, w->ns, obj, w->node, w->event_src, w->ename,
                                                               sizeof w->ename))
            event = w->ename;
        if (event && event[0]) {
            size_t cap = sizeof BOUND_EVENT_STATUS + strlen(event);
            if ((resp->body = malloc(cap))) snprintf(resp->body, cap, BOUND_EVENT_STATUS, event);
        } else {
            resp->body = strdup(BOUND_STATUS);
        }
        resp->body_len = resp->body ? strlen(resp->body) : 0;
        return;
    }
    /* no object: a Lease renewal written as text, whose bytes carry kind and apiVersion (lease_text.h) */
    if (json && (!obj || shim_typed(w->r, obj)) && (resp->body = malloc(len + 1))) {
        memcpy(resp->body, json, len + 1);
        resp->body_len = len;
        resp->status = w->code;
        resp->content_type = "application/json";
        return;
    }
    shim_json(resp, w->code, shim_with_type(w->r, json_deep_copy(obj)));
}

static void on_written(void *ud, const struct store_result *res) {
    struct write_req *w = ud;
    struct http_response resp = {.status = 200, .content_type = "application/json"};
    if (!res->rc && w->event_src[0] && !res->attached_rv)
        fprintf(stderr, "level=warn msg=\"scheduled event not stored\" event=%s err=\"%s\"\n", w->ename,
                res->attached_err[0] ? res->attached_err : "it could not be made");
    answer(w, res->rc, res->err, res->obj, res->json, res->json_len, res->attached_rv ? w->ename : "", &resp);
    if (w->accept) shim_pb_reply(&(struct http_request){.accept = w->accept}, &resp);
    shim_metrics_request(w->s->metrics, &w->obs, resp.status);
    shim_sec_end(w->s, w->audit, resp.status);
    http_deferred_reply(w->d, &resp);
    write_free(w);
}

/* A Lease renewal written as text (shim_lease_renew, shim_lease_replace) is
 * answered; a stale copy of the Lease behind a write that named no
 * resourceVersion sends it the generic way (read, patch or replace, write),
 * as a lost race does there. */
static void on_lease_written(void *ud, const struct store_result *res) {
    struct write_req *w = ud;
    if (!res->rc) {
        shim_lease_seen(w->s, w->r->store_key, w->ns, w->name, STORE_MODIFIED, res->json, res->json_len);
        if (!res->json) { /* stored, but no bytes to answer with (out of memory): no object either */
            on_written(w, &(struct store_result){.rc = -ENOMEM, .err = "out of memory answering a stored renewal"});
            return;
        }
    } else if (res->rc == STORE_ECONFLICT && !w->lease_conditional && w->s->astore) {
        char err[512];
        int rc = store_async_modify(w->s->astore, w->r->store_key, w->ns, w->name, modify_fn(w->kind), w, on_written,
                                    w, err, sizeof err);
        if (!rc) return;
        on_written(w, &(struct store_result){.rc = rc, .err = err});
        return;
    }
    on_written(w, res);
}

/* Runs w: asynchronously when the store has the connection for it and the
 * request can wait, else at once. Takes w. */
static void run_write(struct write_req *w, json_t *create_obj, const struct http_request *req,
                      struct http_response *resp) {
    struct shim *s = w->s;
    const struct shim_resource *r = w->r;
    const char *ns = r->namespaced ? w->ns : "";
    /* a Binding of a placement term: stored only while the term lasts */
    const struct store_fence *fence =
        w->epoch[0] ? &(struct store_fence){.key = PELOTON_PLACEMENT_EPOCH_KEY, .value = w->epoch} : NULL;
    /* RBAC kinds synchronously: the authorizer's index is rebuilt after the request (shim_auth.c) */
    bool rbac = !strcmp(r->group, "rbac.authorization.k8s.io");
    if (s->astore && !r->custom && !is_crd(r) && !rbac && (w->d = http_defer(req))) {
        char err[512];
        w->obs = s->obs; /* on_written observes the latency */
        if (strstr(req->accept, SHIM_PB_MEDIA)) w->accept = strdup(req->accept); /* NULL: a JSON reply */
        s->obs_deferred = true;
        w->audit = shim_sec_take(s);
        int rc = w->kind == WK_PATCH ? shim_lease_renew(s, r, ns, w->name, w->body, w->apply, &w->lease_conditional,
                                                        on_lease_written, w, err, sizeof err)
                 : w->kind == WK_REPLACE ? shim_lease_replace(s, r, ns, w->name, w->body, &w->lease_conditional,
                                                              on_lease_written, w, err, sizeof err)
                                         : -EAGAIN;
        if (rc == -EAGAIN)
            rc = w->kind == WK_CREATE
                     ? store_async_create(s->astore, r->store_key, ns, json_incref(create_obj), r->namespaced,
                                          on_written, w, err, sizeof err)
                     : store_async_modify_fenced(s->astore, r->store_key, ns, w->name, modify_fn(w->kind),
                                                 w->kind == WK_BINDING ? binding_attach : NULL, fence, w, on_written,
                                                 w, err, sizeof err);
        if (!rc) return; /* on_written answers */
        s->obs_deferred = false;
        http_undefer(w->d);
        answer(w, rc, err, NULL, NULL, 0, "", resp);
        shim_sec_end(s, w->audit, resp->status);
        write_free(w);
        return;
    }
    json_t *out = NULL;
    int rc = w->kind == WK_CREATE ? store_create(s->st, r->store_key, ns, create_obj, &out)
                                  : store_modify_fenced(s->st, r->store_key, ns, w->name, modify_fn(w->kind), w,
                                                        fence, &out, NULL);
    answer(w, rc, rc == STORE_NO_NAMESPACE ? w->ns : store_errmsg(s->st), out, NULL, 0, NULL, resp);
    json_decref(out);
    write_free(w);
}

static struct write_req *write_new(struct shim *s, const struct shim_resource *r, enum write_kind kind,
                                   const char *ns, const char *name, int code, json_t *body) {
    struct write_req *w = calloc(1, sizeof *w);
    if (!w) {
        json_decref(body);
        return NULL;
    }
    w->s = s;
    w->r = r;
    w->kind = kind;
    w->code = code;
    w->body = body;
    snprintf(w->ns, sizeof w->ns, "%s", ns ? ns : "");
    snprintf(w->name, sizeof w->name, "%s", name ? name : "");
    return w;
}

/* ---- the entry points (shim.h) ---- */

void shim_write_create(struct shim *s, const struct shim_resource *r, const char *ns, json_t *obj,
                       const struct http_request *req, struct http_response *resp) {
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    struct write_req *w = write_new(s, r, WK_CREATE, ns, name, 201, NULL);
    if (!w) {
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    if (r->namespaced && !(s->astore && !r->custom && !is_crd(r))) {
        /* the synchronous path checks the namespace itself (the async create checks it atomically) */
        json_t *o = NULL;
        int rc = store_get(s->st, "namespaces", "", ns, &o);
        json_decref(o);
        if (rc) {
            answer(w, rc == -ENOENT ? STORE_NO_NAMESPACE : rc, rc == -ENOENT ? ns : store_errmsg(s->st), NULL, NULL, 0,
                   "", resp);
            write_free(w);
            return;
        }
    }
    run_write(w, obj, req, resp);
}

/* A write of an existing object answered 200: body is the new object
 * (replace) or the patch that apply applies (patch, status). Takes body. */
static void start_update(struct shim *s, const struct shim_resource *r, enum write_kind kind, const char *ns,
                         const char *name, json_t *body, shim_patch_fn apply, const struct http_request *req,
                         struct http_response *resp) {
    struct write_req *w = write_new(s, r, kind, ns, name, 200, body);
    if (!w) {
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    w->apply = apply;
    run_write(w, NULL, req, resp);
}

void shim_write_replace(struct shim *s, const struct shim_resource *r, const char *ns, const char *name, json_t *obj,
                        const struct http_request *req, struct http_response *resp) {
    start_update(s, r, WK_REPLACE, ns, name, obj, NULL, req, resp);
}

void shim_write_patch(struct shim *s, const struct shim_resource *r, const char *ns, const char *name, json_t *patch,
                      shim_patch_fn apply, const struct http_request *req, struct http_response *resp) {
    start_update(s, r, WK_PATCH, ns, name, patch, apply, req, resp);
}

json_t *shim_patch_preview(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                           json_t *patch, shim_patch_fn apply, struct http_response *resp) {
    json_t *cur = NULL, *next = NULL;
    int rc = store_get(s->st, r->store_key, r->namespaced ? ns : "", name, &cur);
    if (rc) {
        json_decref(patch);
        shim_store_error(s, resp, rc, r, name);
        return NULL;
    }
    struct write_req *w = write_new(s, r, WK_PATCH, ns, name, 200, patch);
    if (!w) {
        json_decref(cur);
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return NULL;
    }
    w->apply = apply;
    char err[512] = "";
    rc = patch_fn(w, cur, &next, err, sizeof err);
    if (!rc) { /* a dry run shows the object as it would be stored */
        const char *crv = meta_str(cur, "resourceVersion");
        if (crv && !meta_str(next, "resourceVersion"))
            json_object_set_new(json_object_get(next, "metadata"), "resourceVersion", json_string(crv));
    } else {
        answer(w, rc, err, NULL, NULL, 0, "", resp);
    }
    json_decref(cur);
    write_free(w);
    return next;
}

void shim_write_status(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                       const struct http_request *req, struct http_response *resp) {
    json_t *body = NULL;
    shim_patch_fn apply = NULL;
    if (req->method == HTTP_PATCH) {
        bool ssa;
        if (!(apply = shim_patch_parse(req, &body, &ssa, resp))) return;
    } else if (shim_pb_request(req)) { /* a kubelet's PUT of pods/NAME/status */
        if (!(body = shim_pb_body(r->kind, req, resp))) return;
    } else {
        json_error_t je;
        body = jparse_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(body)) {
            shim_status(resp, 400, "BadRequest", NULL, "the body could not be decoded: %s",
                        body ? "not a JSON object" : je.text);
            json_decref(body);
            return;
        }
    }
    start_update(s, r, WK_STATUS, ns, name, body, apply, req, resp);
}

void shim_write_binding(struct shim *s, const struct shim_resource *pods, const char *ns, const char *name,
                        json_t *binding, const char *node, const char *event_src, const char *epoch,
                        const struct http_request *req, struct http_response *resp) {
    struct write_req *w = write_new(s, pods, WK_BINDING, ns, name, 201, binding);
    if (!w) {
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    w->node = node; /* inside binding, which w keeps */
    snprintf(w->event_src, sizeof w->event_src, "%s", event_src ? event_src : "");
    snprintf(w->epoch, sizeof w->epoch, "%s", epoch ? epoch : "");
    run_write(w, NULL, req, resp);
}
