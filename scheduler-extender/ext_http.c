/* The extender's HTTP(S) face and its feeding: routes <prefix>/<verb> to the
 * handlers, answers bind after the API server has answered (a deferred
 * reply on a stream), and keeps the model fed by informers on Nodes,
 * Namespaces, ResourcePools, Pods and Jobs.
 *
 * Status codes: 200 for every answer kube-scheduler should read (a filter or
 * bind Error included, as upstream's extenders do); 400 with a JSON Error for
 * a body that is not JSON or not the verb's shape (and for prioritize and
 * preempt errors, which have no Error field); 404 for an unknown verb; 405
 * for another method than POST; 413 (from the HTTP layer) for a body over
 * max_body; 503 for prioritize/preempt before the caches have synced. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ext_int.h"
#include "kclient.h"
#include "server.h"

enum { FEED_NODE, FEED_NS, FEED_POOL, FEED_POD, FEED_JOB, NFEEDS };
static const char *const feed_kind[NFEEDS] = {"Node", "Namespace", "ResourcePool", "Pod", "Job"};
static const char *const feed_path[NFEEDS] = {"/api/v1/nodes", "/api/v1/namespaces",
                                              "/apis/peloton.io/v1alpha1/resourcepools", "/api/v1/pods",
                                              "/apis/peloton.io/v1alpha1/jobs"};

struct extender_srv;
struct feed {
    struct extender_srv *s;
    int i;
    struct kc_informer *inf;
    bool synced;
};

struct bind_op {
    struct extender_srv *s; /* NULL once the server is freed */
    uint64_t t0;            /* uv_hrtime when the request came */
    struct http_deferred *d; /* the reply kube-scheduler waits for; NULL once answered */
    struct extender_binding_args *b;
    char *conflict;         /* the 409's message, while the pod is read back */
    uv_timer_t timer;       /* --bind-timeout-ms: the answer kube-scheduler gets when the API server is slow */
    bool timer_on;
    int refs;
    bool answered;
    struct bind_op *prev, *next;
};

struct extender_srv {
    uv_loop_t *loop;
    struct kclient *kc;
    struct ext_core *core;
    char *prefix;
    size_t max_body;
    struct http_server *http;
    struct feed feeds[NFEEDS];
    bool forced_ready;
    struct bind_op *ops;
    int bind_timeout_ms;
    uv_timer_t pool_timer;     /* writes ResourcePool status (pool_status_ms; 0: never) */
    uv_timer_t gauge_timer;    /* sets the model's gauges for scrapes by other threads (a registry given) */
    bool gauge_timer_on;
    int pool_status_ms;
    bool pool_timer_on;
    json_t *pool_sent;         /* pool name -> {"st": status sent (no times), "ticks": ticks since} */
    struct extender_scan scan; /* the fast path's decoded request; its buffers are reused */
    struct extender_buf reply; /* the fast path's reply text, handed to the HTTP layer */
};

void ext_srv_options_default(struct ext_srv_options *o) {
    memset(o, 0, sizeof *o);
    o->bind_addr = "127.0.0.1";
    o->port = EXT_DEFAULT_PORT;
    o->prefix = EXT_DEFAULT_PREFIX;
    o->max_body = EXT_DEFAULT_MAX_BODY;
    o->pool_status_ms = EXT_DEFAULT_POOL_STATUS_MS;
    o->bind_timeout_ms = EXT_DEFAULT_BIND_TIMEOUT_MS;
    ext_core_options_default(&o->core);
}

bool extender_srv_ready(const struct extender_srv *s) {
    if (s->forced_ready) return true;
    for (int i = 0; i < NFEEDS; i++)
        if (i != FEED_JOB && !s->feeds[i].synced) return false; /* job types only refine the strategy */
    return true;
}

void extender_srv_set_synced(struct extender_srv *s) { s->forced_ready = true; }
struct ext_core *extender_srv_core(struct extender_srv *s) { return s->core; }
int extender_srv_port(const struct extender_srv *s) { return http_server_port(s->http); }

/* ---- replies ---- */

static void reply_json(struct http_response *resp, int status, json_t *v) {
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = v ? json_dumps(v, JSON_COMPACT) : NULL;
    resp->body_len = resp->body ? strlen(resp->body) : 0;
    if (v && !resp->body) resp->status = 500;
    json_decref(v);
}

/* Hands b's text to the HTTP layer, which frees it after sending: no copy;
 * b starts empty again (the encoders size it in one allocation). */
static void reply_buf(struct http_response *resp, int status, struct extender_buf *b) {
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = b->data;
    resp->body_len = b->len;
    *b = (struct extender_buf){0};
}

/* {"Error": msg} with status; filter and bind get their full result shape. */
static void reply_error(struct http_response *resp, int status, enum extender_verb verb, const char *msg) {
    json_t *v = NULL;
    if ((verb == EXTENDER_FILTER || verb == EXTENDER_BIND) && !extender_error_reply(verb, msg, &v)) {
        reply_json(resp, status, v);
        return;
    }
    reply_json(resp, status, json_pack("{s:s}", "Error", msg && msg[0] ? msg : "extender error"));
}

/* ---- bind: POST the Binding, answer when the API server has ---- */

static void op_unref(struct bind_op *op) {
    if (--op->refs > 0) return;
    if (op->s) {
        if (op->prev) op->prev->next = op->next;
        else op->s->ops = op->next;
        if (op->next) op->next->prev = op->prev;
    }
    extender_binding_args_free(op->b);
    free(op->conflict);
    free(op);
}

static void op_timer_closed(uv_handle_t *h) { op_unref(h->data); }

static void op_timer_end(struct bind_op *op) {
    if (!op->timer_on) return;
    op->timer_on = false;
    uv_timer_stop(&op->timer);
    uv_close((uv_handle_t *)&op->timer, op_timer_closed);
}

static void op_finish(struct bind_op *op, const char *error) {
    op_timer_end(op);
    if (op->answered) return;
    op->answered = true;
    const struct extender_binding_args *b = op->b;
    if (op->s) {
        struct ext_core *x = op->s->core;
        if (!error) {
            ext_bind_commit(x, b);
            metrics_inc(x->m.binds_bound);
        } else {
            ext_bind_abort(x, b);
            x->st.bind_errors++;
            metrics_inc(x->m.binds_failed);
        }
        ext_metrics_latency(x, EXTENDER_BIND, uv_hrtime() - op->t0);
    }
    fprintf(stderr, "level=%s msg=bind pod=%s/%s node=%s%s%s%s\n", error ? "warn" : "info", b->pod_namespace,
            b->pod_name, b->node, error ? " error=\"" : "", error ? error : "", error ? "\"" : "");
    if (!op->d) return;
    json_t *v = NULL;
    char *text = NULL;
    if (!extender_binding_result(error, &v) && v) text = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    v = NULL;
    /* a message the encoder refuses (too long, not UTF-8): the error reply cuts it */
    if (!text && error && !extender_error_reply(EXTENDER_BIND, error, &v) && v) text = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    /* one reply with its length, written at once (a stream would send its
     * head first and the body a loop turn later: two segments) */
    struct http_response resp = {.status = text ? 200 : 500, .content_type = "application/json", .body = text,
                                 .body_len = text ? strlen(text) : 0};
    http_deferred_reply(op->d, &resp);
    op->d = NULL;
    op_unref(op); /* the reply's */
}

/* The API server has not answered in time: kube-scheduler gets an Error
 * (it forgets the pod and tries again), and the pod stops counting. The POST
 * goes on; if it takes after all, the watch counts the pod again. */
static void op_timeout(uv_timer_t *t) {
    struct bind_op *op = t->data;
    char msg[EXTENDER_MAX_REASON];
    snprintf(msg, sizeof msg,
             "binding pod %s/%s to node %s: the API server has not answered within %d ms; the pod no longer counts "
             "against its pool",
             op->b->pod_namespace, op->b->pod_name, op->b->node, op->s ? op->s->bind_timeout_ms : 0);
    op_finish(op, msg);
}

static void op_read_back(void *ud, const struct kc_response *r) {
    struct bind_op *op = ud;
    const json_t *pod = r->status == 200 ? kc_response_body(r) : NULL;
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    const char *uid = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
    /* the pod is on that node already (an earlier bind whose reply was lost): success */
    if (node && !strcmp(node, op->b->node) && (!op->b->pod_uid[0] || (uid && !strcmp(uid, op->b->pod_uid))))
        op_finish(op, NULL);
    else
        op_finish(op, op->conflict ? op->conflict : "binding conflict");
    op_unref(op);
}

static void op_posted(void *ud, const struct kc_response *r) {
    struct bind_op *op = ud;
    char msg[EXTENDER_MAX_REASON];
    if (r->status >= 200 && r->status < 300) {
        op_finish(op, NULL);
    } else if (r->status == 409 && op->s && op->s->kc) {
        snprintf(msg, sizeof msg, "binding pod %s/%s to node %s: %s", op->b->pod_namespace, op->b->pod_name,
                 op->b->node, r->error ? r->error : "conflict");
        op->conflict = strdup(msg);
        char ns[3 * EXTENDER_MAX_NAME + 1], name[3 * EXTENDER_MAX_NAME + 1], path[2 * sizeof ns + 64];
        kc_escape(op->b->pod_namespace, ns, sizeof ns);
        kc_escape(op->b->pod_name, name, sizeof name);
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
        if (!kclient_request(op->s->kc, "GET", path, NULL, NULL, op_read_back, op)) return; /* keeps the ref */
        op_finish(op, op->conflict ? op->conflict : "binding conflict");
    } else {
        snprintf(msg, sizeof msg, "binding pod %s/%s to node %s: %s%s%ld", op->b->pod_namespace, op->b->pod_name,
                 op->b->node, r->error ? r->error : "", r->error ? " (HTTP " : "HTTP ", r->status);
        if (r->error) strncat(msg, ")", sizeof msg - strlen(msg) - 1);
        op_finish(op, msg);
    }
    op_unref(op);
}

/* true when the reply is deferred (op_finish observes its latency) */
static bool serve_bind(struct extender_srv *s, const struct http_request *req, struct http_response *resp,
                       json_t *body, uint64_t t0) {
    struct extender_binding_args *b;
    char err[EXTENDER_MAX_REASON];
    if (extender_decode_binding_args(body, &b, err, sizeof err)) {
        reply_error(resp, 400, EXTENDER_BIND, err);
        return false;
    }
    switch (ext_bind_decide(s->core, b, err, sizeof err)) {
    case EXT_BIND_OK: {
        json_t *v = NULL;
        fprintf(stderr, "level=info msg=bind pod=%s/%s node=%s already=true\n", b->pod_namespace, b->pod_name,
                b->node);
        extender_binding_args_free(b);
        extender_binding_result(NULL, &v);
        reply_json(resp, 200, v);
        metrics_inc(s->core->m.binds_already);
        return false;
    }
    case EXT_BIND_ERROR:
        s->core->st.bind_errors++;
        metrics_inc(s->core->m.binds_failed);
        extender_binding_args_free(b);
        reply_error(resp, 200, EXTENDER_BIND, err);
        return false;
    case EXT_BIND_POST:
        break;
    }
    if (!s->kc) {
        extender_binding_args_free(b);
        reply_error(resp, 200, EXTENDER_BIND, "the extender has no API server client");
        metrics_inc(s->core->m.binds_failed);
        return false;
    }
    struct bind_op *op = calloc(1, sizeof *op);
    json_t *binding = ext_binding_body(b);
    if (!op || !binding) {
        free(op);
        json_decref(binding);
        extender_binding_args_free(b);
        reply_error(resp, 500, EXTENDER_BIND, "out of memory");
        return false;
    }
    op->s = s;
    op->b = b;
    op->t0 = t0;
    op->d = http_defer(req);
    if (!op->d) {
        free(op);
        json_decref(binding);
        extender_binding_args_free(b);
        reply_error(resp, 500, EXTENDER_BIND, "cannot defer the reply");
        return false;
    }
    op->refs = 1; /* the reply's */
    op->next = s->ops;
    if (s->ops) s->ops->prev = op;
    s->ops = op;
    char ns[3 * EXTENDER_MAX_NAME + 1], name[3 * EXTENDER_MAX_NAME + 1], path[2 * sizeof ns + 64];
    kc_escape(b->pod_namespace, ns, sizeof ns);
    kc_escape(b->pod_name, name, sizeof name);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/binding", ns, name);
    ext_bind_begin(s->core, b); /* counted from now: the next pods' filters see it */
    if (s->bind_timeout_ms > 0 && !uv_timer_init(s->loop, &op->timer)) {
        op->timer.data = op;
        op->timer_on = true;
        op->refs++; /* the timer's, until it is closed */
        uv_timer_start(&op->timer, op_timeout, (uint64_t)s->bind_timeout_ms, 0);
    }
    op->refs++; /* the request's */
    if (kclient_request(s->kc, "POST", path, binding, NULL, op_posted, op)) {
        op->refs--;
        op_finish(op, "cannot reach the API server");
    }
    json_decref(binding);
    return true;
}

/* ---- routes ---- */

/* filter and prioritize of a NodeNames request (kube-scheduler with
 * nodeCacheCapable: the common case) without building a jansson value per
 * node: extender_scan_args reads the body, the *_scan handlers write the
 * reply text. false: the body is not that common shape (Nodes mode, odd keys,
 * malformed): the jansson path serves it, with its error messages. The replies
 * are byte for byte the jansson path's. */
static bool serve_fast(struct extender_srv *s, enum extender_verb v, const struct http_request *req,
                       struct http_response *resp) {
    struct extender_names_hint hint;
    bool hinted = ext_core_names_hint(s->core, &hint); /* a prioritize sends the names its filter passed */
    if (extender_scan_args_hinted(req->body, req->body_len, hinted ? &hint : NULL, &s->scan)) return false;
    const struct extender_scan *a = &s->scan;
    bool ready = extender_srv_ready(s);
    char err[EXTENDER_MAX_REASON];
    int rc;
    if (v == EXTENDER_FILTER) {
        if (!ready) reply_error(resp, 200, v, "extender cache not synced");
        else if (ext_filter_scan(s->core, a, uv_now(s->loop), &s->reply))
            reply_error(resp, 500, v, "out of memory");
        else reply_buf(resp, 200, &s->reply);
    } else {
        if (!ready) reply_error(resp, 503, v, "extender cache not synced");
        else if ((rc = ext_prioritize_scan(s->core, a, &s->reply, err, sizeof err)))
            reply_error(resp, rc == -ENOMEM ? 500 : 400, v, err);
        else reply_buf(resp, 200, &s->reply);
    }
    extender_scan_reset(&s->scan);
    return true;
}

static void serve_healthz(struct extender_srv *s, struct http_response *resp) {
    struct ext_stats st;
    ext_core_stats(s->core, &st);
    json_t *synced = json_object();
    for (int i = 0; i < NFEEDS; i++) json_object_set_new(synced, feed_kind[i], json_boolean(s->feeds[i].synced));
    const char *perr = cluster_pool_error(ext_core_cluster(s->core));
    bool ready = extender_srv_ready(s);
    reply_json(resp, ready ? 200 : 503,
               json_pack("{s:b, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s?}", "ready", ready, "synced", synced,
                         "nodes", (json_int_t)st.nodes, "pods", (json_int_t)st.pods, "filters",
                         (json_int_t)st.filters, "binds", (json_int_t)st.binds, "bindErrors",
                         (json_int_t)st.bind_errors, "gangsAdmitted", (json_int_t)st.gangs_admitted, "gangsHeld",
                         (json_int_t)st.gangs_held, "poolError", perr));
}

static void serve_metrics(struct extender_srv *s, struct http_response *resp) {
    char *text;
    size_t len;
    if (ext_metrics_render(s->core, &text, &len)) {
        reply_error(resp, 500, EXTENDER_PRIORITIZE, "out of memory");
        return;
    }
    resp->status = 200;
    resp->content_type = METRICS_CONTENT_TYPE;
    resp->body = text;
    resp->body_len = len;
}

static bool serve_verb(struct extender_srv *s, enum extender_verb v, const struct http_request *req,
                       struct http_response *resp, uint64_t t0);

static void handle(void *ud, const struct http_request *req, struct http_response *resp) {
    struct extender_srv *s = ud;
    const char *path = req->path;
    size_t pl = strlen(s->prefix);
    const char *verb = NULL;
    if (!strncmp(path, s->prefix, pl) && path[pl] == '/') verb = path + pl + 1;
    if (!strcmp(path, "/healthz") || (verb && !strcmp(verb, "healthz"))) {
        if (req->method != HTTP_GET && req->method != HTTP_HEAD) reply_error(resp, 405, EXTENDER_PRIORITIZE,
                                                                              "healthz: use GET");
        else serve_healthz(s, resp);
        return;
    }
    if (!strcmp(path, "/metrics") || (verb && !strcmp(verb, "metrics"))) {
        if (req->method != HTTP_GET && req->method != HTTP_HEAD) reply_error(resp, 405, EXTENDER_PRIORITIZE,
                                                                              "metrics: use GET");
        else serve_metrics(s, resp);
        return;
    }
    enum extender_verb v;
    if (!verb) {
        reply_error(resp, 404, EXTENDER_PRIORITIZE, "not found: the extender serves POST <prefix>/<verb>");
        return;
    }
    if (!strcmp(verb, "filter")) v = EXTENDER_FILTER;
    else if (!strcmp(verb, "prioritize")) v = EXTENDER_PRIORITIZE;
    else if (!strcmp(verb, "preempt")) v = EXTENDER_PREEMPT;
    else if (!strcmp(verb, "bind")) v = EXTENDER_BIND;
    else {
        char msg[128];
        snprintf(msg, sizeof msg, "unknown verb \"%.60s\": filter, prioritize, preempt and bind are served", verb);
        reply_error(resp, 404, EXTENDER_PRIORITIZE, msg);
        return;
    }
    if (req->method != HTTP_POST) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s: method %s not allowed; use POST", verb, req->method_name);
        reply_error(resp, 405, v, msg);
        return;
    }
    uint64_t t0 = uv_hrtime();
    if (!serve_verb(s, v, req, resp, t0)) ext_metrics_latency(s->core, v, uv_hrtime() - t0);
}

/* One verb's request; true when the reply is deferred (bind). */
static bool serve_verb(struct extender_srv *s, enum extender_verb v, const struct http_request *req,
                       struct http_response *resp, uint64_t t0) {
    if ((v == EXTENDER_FILTER || v == EXTENDER_PRIORITIZE) && serve_fast(s, v, req, resp)) return false;
    if (v == EXTENDER_PREEMPT && extender_srv_ready(s)) { /* MetaVictims scanned; else as below */
        struct extender_preemption_args *a = NULL;
        char err[EXTENDER_MAX_REASON];
        json_t *out = NULL;
        int rc = extender_scan_preemption_args(req->body, req->body_len, &a);
        if (rc != -EAGAIN) {
            if (rc) reply_error(resp, 500, v, "out of memory");
            else if ((rc = ext_preempt(s->core, a, &out, err, sizeof err)))
                reply_error(resp, rc == -ENOMEM ? 500 : 400, v, err);
            else reply_json(resp, 200, out);
            extender_preemption_args_free(a);
            return false;
        }
    }
    bool deferred = false;
    json_error_t jerr;
    json_t *body = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!body) {
        char msg[EXTENDER_MAX_REASON];
        snprintf(msg, sizeof msg, "the body is not JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        for (char *c = msg; *c; c++) /* jansson may quote the offending bytes: keep the reply valid UTF-8 */
            if ((unsigned char)*c >= 0x80 || (unsigned char)*c < 0x20) *c = '?';
        reply_error(resp, 400, v, msg);
        return false;
    }
    char err[EXTENDER_MAX_REASON];
    json_t *out = NULL;
    bool ready = extender_srv_ready(s);
    switch (v) {
    case EXTENDER_FILTER: {
        struct extender_args *a = NULL;
        if (extender_decode_args(body, &a, err, sizeof err)) reply_error(resp, 400, v, err);
        else if (!ready) reply_error(resp, 200, v, "extender cache not synced");
        else if (ext_filter(s->core, a, uv_now(s->loop), &out)) reply_error(resp, 500, v, "out of memory");
        else reply_json(resp, 200, out);
        extender_args_free(a);
        break;
    }
    case EXTENDER_PRIORITIZE: {
        struct extender_args *a = NULL;
        int rc;
        if (extender_decode_args(body, &a, err, sizeof err)) reply_error(resp, 400, v, err);
        else if (!ready) reply_error(resp, 503, v, "extender cache not synced");
        else if ((rc = ext_prioritize(s->core, a, &out, err, sizeof err)))
            reply_error(resp, rc == -ENOMEM ? 500 : 400, v, err);
        else reply_json(resp, 200, out);
        extender_args_free(a);
        break;
    }
    case EXTENDER_PREEMPT: {
        struct extender_preemption_args *a = NULL;
        int rc;
        if (extender_decode_preemption_args(body, &a, err, sizeof err)) reply_error(resp, 400, v, err);
        else if (!ready) reply_error(resp, 503, v, "extender cache not synced");
        else if ((rc = ext_preempt(s->core, a, &out, err, sizeof err)))
            reply_error(resp, rc == -ENOMEM ? 500 : 400, v, err);
        else reply_json(resp, 200, out);
        extender_preemption_args_free(a);
        break;
    }
    case EXTENDER_BIND:
        deferred = serve_bind(s, req, resp, body, t0);
        break;
    }
    json_decref(body);
    return deferred;
}

/* ---- ResourcePool status ---- */

/* The status' conditions without their lastTransitionTime (for comparing). */
static json_t *without_times(const json_t *st) {
    json_t *c = json_deep_copy(st);
    size_t i;
    json_t *cond;
    json_array_foreach(json_object_get(c, "conditions"), i, cond) json_object_del(cond, "lastTransitionTime");
    return c;
}

/* Whether every member of want is in have, equal (conditions without times). */
static bool status_has(const json_t *have, const json_t *want) {
    if (!json_is_object(have)) return false;
    json_t *h = without_times(have);
    const char *k;
    json_t *v;
    bool same = true;
    json_object_foreach((json_t *)want, k, v) {
        if (!json_equal(json_object_get(h, k), v)) {
            same = false;
            break;
        }
    }
    json_decref(h);
    return same;
}

static int pool_status_one(void *ud, json_t *obj) {
    struct extender_srv *s = ud;
    const char *name = ext_obj_name(obj);
    json_t *st = name ? ext_pool_status(s->core, obj) : NULL;
    if (!st) return 0;
    const json_t *have = json_object_get(obj, "status");
    json_t *sent = json_object_get(s->pool_sent, name);
    bool same_as_sent = sent && json_equal(json_object_get(sent, "st"), st);
    json_int_t ticks = sent ? json_integer_value(json_object_get(sent, "ticks")) + 1 : 0;
    /* written already: wait for the watch to show it, then resend only if it still differs after a while */
    if (status_has(have, st) || (same_as_sent && ticks < 5)) {
        if (sent) json_object_set_new(sent, "ticks", json_integer(status_has(have, st) ? 0 : ticks));
        json_decref(st);
        return 0;
    }
    json_t *out = json_deep_copy(st);
    /* lastTransitionTime: kept while the condition's status is what it was */
    json_t *cond = json_array_get(json_object_get(out, "conditions"), 0), *old = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(have, "conditions"), i, c) {
        if (json_equal(json_object_get(c, "type"), json_object_get(cond, "type"))) old = c;
    }
    const char *old_time = json_string_value(json_object_get(old, "lastTransitionTime"));
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    bool same_status = old && json_equal(json_object_get(old, "status"), json_object_get(cond, "status"));
    json_object_set_new(cond, "lastTransitionTime", json_string(same_status && old_time ? old_time : now));
    char esc[3 * EXTENDER_MAX_NAME + 1], path[sizeof esc + 64];
    kc_escape(name, esc, sizeof esc);
    snprintf(path, sizeof path, "/apis/peloton.io/v1alpha1/resourcepools/%s/status", esc);
    json_t *body = json_pack("{s:o}", "status", out);
    if (body) kclient_request(s->kc, "PATCH", path, body, "application/merge-patch+json", NULL, NULL);
    json_decref(body);
    json_object_set_new(s->pool_sent, name, json_pack("{s:o, s:i}", "st", st, "ticks", 0));
    if (!same_as_sent) {
        const char *tv = json_string_value(json_object_get(cond, "status"));
        if (tv && !strcmp(tv, "False"))
            fprintf(stderr, "level=warn msg=\"pool tree invalid\" pool=%s error=\"%s\"\n", name,
                    cluster_pool_error(ext_core_cluster(s->core)));
    }
    return 0;
}

static void on_gauge_timer(uv_timer_t *tm) { ext_metrics_gauges(((struct extender_srv *)tm->data)->core); }

static void on_pool_timer(uv_timer_t *tm) {
    struct extender_srv *s = tm->data;
    if (!s->kc || !s->feeds[FEED_POOL].inf || !extender_srv_ready(s)) return;
    kc_informer_foreach(s->feeds[FEED_POOL].inf, pool_status_one, s);
}

/* ---- feeding ---- */

static void feed_add(void *ud, json_t *obj) {
    struct feed *f = ud;
    if (f->synced) ext_metrics_watch_event(f->s->core, f->i, obj);
    int rc = ext_core_set(f->s->core, feed_kind[f->i], obj);
    if (rc && rc != -EINVAL)
        fprintf(stderr, "level=warn msg=\"cannot take object\" kind=%s name=%s/%s rc=%d\n", feed_kind[f->i],
                ext_obj_ns(obj), ext_obj_name(obj) ? ext_obj_name(obj) : "", rc);
}
static void feed_update(void *ud, json_t *old, json_t *obj) { feed_add(ud, obj); }
static void feed_delete(void *ud, json_t *obj) {
    struct feed *f = ud;
    if (f->synced) ext_metrics_watch_event(f->s->core, f->i, obj);
    ext_core_del(f->s->core, feed_kind[f->i], obj);
}
static void feed_synced(void *ud) {
    struct feed *f = ud;
    f->synced = true;
    ext_metrics_synced(f->s->core, f->i);
    fprintf(stderr, "level=info msg=synced kind=%s count=%zu ready=%s\n", feed_kind[f->i], kc_informer_count(f->inf),
            extender_srv_ready(f->s) ? "true" : "false");
}

int extender_srv_start(uv_loop_t *loop, struct kclient *kc, const struct ext_srv_options *o,
                       struct extender_srv **out, char *err, size_t errlen) {
    *out = NULL;
    struct ext_srv_options d;
    if (!o) {
        ext_srv_options_default(&d);
        o = &d;
    }
    struct extender_srv *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->loop = loop;
    s->kc = kc;
    const char *prefix = o->prefix ? o->prefix : EXT_DEFAULT_PREFIX;
    size_t plen = strlen(prefix);
    while (plen && prefix[plen - 1] == '/') plen--; /* kube-scheduler strips it too */
    s->prefix = strndup(prefix, plen);
    s->core = ext_core_new(&o->core);
    if (!s->prefix || !s->core) {
        extender_srv_free(s);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (s->prefix[0] && s->prefix[0] != '/') {
        extender_srv_free(s);
        snprintf(err, errlen, "prefix \"%s\": must start with /", prefix);
        return -EINVAL;
    }
    s->max_body = o->max_body ? o->max_body : EXT_DEFAULT_MAX_BODY;
    s->bind_timeout_ms = o->bind_timeout_ms;
    struct http_server_config hc = {.bind_addr = o->bind_addr ? o->bind_addr : "127.0.0.1", .port = o->port,
                                    .max_body = s->max_body, .handler = handle, .ud = s,
                                    .tls_cert = o->tls_cert, .tls_key = o->tls_key};
    int rc = http_server_start(loop, &hc, &s->http, err, errlen);
    if (rc) {
        extender_srv_free(s);
        return rc;
    }
    if (kc && o->pool_status_ms > 0 && (s->pool_sent = json_object())) {
        s->pool_status_ms = o->pool_status_ms;
        uv_timer_init(loop, &s->pool_timer);
        s->pool_timer.data = s;
        uv_timer_start(&s->pool_timer, on_pool_timer, (uint64_t)o->pool_status_ms, (uint64_t)o->pool_status_ms);
        s->pool_timer_on = true;
    }
    if (o->core.metrics && !uv_timer_init(loop, &s->gauge_timer)) {
        /* pelotond's registry is scraped on another thread: it reads gauges at most 1 s old */
        s->gauge_timer.data = s;
        uv_timer_start(&s->gauge_timer, on_gauge_timer, 1000, 1000);
        s->gauge_timer_on = true;
    }
    if (kc) ext_metrics_feeds(s->core, feed_kind, NFEEDS);
    static const struct kc_informer_handlers h = {feed_add, feed_update, feed_delete, feed_synced};
    for (int i = 0; kc && i < NFEEDS; i++) {
        s->feeds[i] = (struct feed){.s = s, .i = i};
        s->feeds[i].inf = kc_informer_new(kc, feed_path[i], NULL, &h, &s->feeds[i]);
        if (!s->feeds[i].inf || (rc = kc_informer_start(s->feeds[i].inf))) {
            snprintf(err, errlen, "cannot start the %s informer", feed_kind[i]);
            extender_srv_stop(s);
            *out = s; /* the caller runs the loop dry and frees */
            return rc ? rc : -ENOMEM;
        }
    }
    *out = s;
    return 0;
}

void extender_srv_stop(struct extender_srv *s) {
    if (!s) return;
    for (struct bind_op *op = s->ops; op; op = op->next) op_timer_end(op);
    for (int i = 0; i < NFEEDS; i++) {
        kc_informer_free(s->feeds[i].inf);
        s->feeds[i].inf = NULL;
    }
    if (s->http) http_server_stop(s->http);
    if (s->pool_timer_on) {
        uv_timer_stop(&s->pool_timer);
        uv_close((uv_handle_t *)&s->pool_timer, NULL);
        s->pool_timer_on = false;
    }
    if (s->gauge_timer_on) {
        uv_timer_stop(&s->gauge_timer);
        uv_close((uv_handle_t *)&s->gauge_timer, NULL);
        s->gauge_timer_on = false;
    }
}

void extender_srv_free(struct extender_srv *s) {
    if (!s) return;
    for (int i = 0; i < NFEEDS; i++) kc_informer_free(s->feeds[i].inf);
    /* binds still waiting for the API server finish when the client cancels them */
    for (struct bind_op *op = s->ops; op; op = op->next) op->s = NULL;
    if (s->http) http_server_free(s->http);
    ext_core_free(s->core);
    extender_scan_free(&s->scan);
    extender_buf_free(&s->reply);
    json_decref(s->pool_sent);
    free(s->prefix);
    free(s);
}
