/* v1alpha stateless JobService over Job objects (v1_job.h). Each call finds
 * the Job by its JobID in the list of Jobs, then answers from it, writes it
 * back (PUT with the read resourceVersion: a write lost to another, the job
 * manager's status say, is read and checked again, up to V1_WRITE_TRIES
 * times; a changed entity version or the last loss is ABORTED)
 * or lists its pods; ListPods and ListJobs stream their answers in batches
 * as the client reads (native_call_send's flow control). */
#include "v1_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "ncache.h"
#include "pbjson.h"
#include "peloton/api/v1alpha/job/stateless/svc/stateless_svc.pb-c.h"
#include "svc_common.h"
#include "svc_job.h"
#include "v1_map.h"

#define JOBS_PATH "/apis/peloton.io/v1alpha1/jobs"
#define A_UPDATE_ABORT "peloton.io/update-abort" /* docs/crds.md: the job manager acts on it, then removes it */
#define BATCH 100                                /* summaries per streamed message */
#define QUERY_DEFAULT_LIMIT 100

#define D(x) (&peloton__api__v1alpha__job__stateless__svc__##x##__descriptor)

struct v1_job {
    struct kclient *kc;
};

enum kind { K_CREATE, K_GET, K_REPLACE, K_RESTART, K_PAUSE, K_RESUME, K_ABORT, K_DELETE, K_LIST_PODS, K_LIST_JOBS,
            K_QUERY, K_ID_BY_NAME };

struct jcall {
    struct svc_op base;
    enum kind kind;
    char id[128], version[32];
    json_t *req;       /* the request as proto3 JSON */
    json_t *job;       /* the Job found (a reference) */
    json_t *items;     /* ListJobs: the Jobs; ListPods: the pods (references) */
    const json_t **sorted; /* ListPods: the pods by instance, then run */
    size_t npods, next;
    uint32_t inst, end; /* ListPods: the next instance, the end of the range */
    int tries;          /* writes lost to another writer */
};

#define V1_WRITE_TRIES 5 /* as client-go's DefaultRetry */

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static void op_release(struct svc_op *base) {
    struct jcall *op = (struct jcall *)base;
    json_decref(op->req);
    json_decref(op->job);
    json_decref(op->items);
    free(op->sorted);
    free(op);
}

static bool valid_id(const char *s) {
    size_t n = strlen(s);
    return n && n <= 64 && strspn(s, "0123456789abcdefABCDEF-") == n;
}

static void job_path(const json_t *job, char *path, size_t len) {
    const json_t *md = json_object_get(job, "metadata");
    snprintf(path, len, "/apis/peloton.io/v1alpha1/namespaces/%s/jobs/%s", jstr(md, "namespace") ?: "",
             jstr(md, "name") ?: "");
}

static json_t *version_reply(const json_t *job) {
    char v[32];
    v1_job_version(job, v, sizeof v);
    return json_pack("{s:{s:s}}", "version", "value", v);
}

/* ---------------------------------------------------------------- streaming */

static int by_instance(const void *a, const void *b) {
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    long long i = v1_pod_instance(x), j = v1_pod_instance(y);
    if (i != j) return i < j ? -1 : 1;
    const char *rx = jstr(json_object_get(json_object_get(x, "metadata"), "annotations"), "peloton.io/run") ?: "";
    const char *ry = jstr(json_object_get(json_object_get(y, "metadata"), "annotations"), "peloton.io/run") ?: "";
    long long a1 = atoll(rx), b1 = atoll(ry);
    return a1 < b1 ? -1 : a1 > b1;
}

/* The next message of a ListPods or ListJobs stream: NULL when none is left. */
static json_t *next_batch(struct jcall *op) {
    json_t *arr = json_array();
    if (op->kind == K_LIST_JOBS) {
        for (size_t k = 0; k < BATCH && op->next < json_array_size(op->items); k++)
            json_array_append_new(arr, v1_job_summary(json_array_get(op->items, op->next++)));
        if (!json_array_size(arr)) goto none;
        return json_pack("{s:o}", "jobs", arr);
    }
    const char *jid = svc_job_id(op->job);
    for (size_t k = 0; k < BATCH && op->inst < op->end; k++, op->inst++) {
        const json_t *latest = NULL; /* the instance's latest run */
        while (op->next < op->npods && v1_pod_instance(op->sorted[op->next]) < op->inst) op->next++;
        while (op->next < op->npods && v1_pod_instance(op->sorted[op->next]) == op->inst) latest = op->sorted[op->next++];
        json_array_append_new(arr, v1_pod_summary(jid, op->inst, latest, false));
    }
    if (!json_array_size(arr)) goto none;
    return json_pack("{s:o}", "pods", arr);
none:
    json_decref(arr);
    return NULL;
}

/* The producer: sends batches while the stream takes them (native.h). */
static void produce(void *ud, struct native_call *call, bool gone) {
    struct jcall *op = ud;
    if (gone) {
        native_call_end(call, NC_CANCELLED, "the client went away");
        svc_op_free(&op->base);
        return;
    }
    const ProtobufCMessageDescriptor *d = op->kind == K_LIST_JOBS ? D(list_jobs_response) : D(list_pods_response);
    for (;;) {
        json_t *j = next_batch(op);
        if (!j) break;
        char err[256];
        ProtobufCMessage *m = pbjson_to_msg(d, j, err, sizeof err);
        json_decref(j);
        int rc = m ? native_call_send(call, m) : -ENOMEM;
        if (m) protobuf_c_message_free_unpacked(m, NULL);
        if (rc < 0) {
            native_call_end(call, NC_INTERNAL, m ? "stream ended" : err);
            svc_op_free(&op->base);
            return;
        }
        if (rc == 1) return; /* full: produce runs again when the client has read */
    }
    native_call_end(call, NC_OK, NULL);
    svc_op_free(&op->base);
}

static void start_stream(struct jcall *op) {
    native_call_set_producer(op->base.call, produce, op);
    produce(op, op->base.call, false);
}

/* ---------------------------------------------------------------- query */

static bool contains(const char *hay, const char *needle) { return hay && needle && strstr(hay, needle); }

static bool query_match(const json_t *sum, const json_t *job, const json_t *q) {
    const char *name = jstr(q, "name"), *owner = jstr(q, "owner");
    if (name && *name && !contains(jstr(sum, "name"), name)) return false;
    if (owner && *owner && strcmp(owner, jstr(sum, "owner") ?: "")) return false;
    if (!v1_labels_have(json_object_get(sum, "labels"), json_object_get(q, "labels"))) return false;
    const char *path = jstr(json_object_get(q, "respool"), "value");
    if (path && *path) { /* the path's last pool is the Job's (pool names are unique here) */
        const char *last = strrchr(path, '/');
        if (strcmp(last ? last + 1 : path, jstr(json_object_get(job, "spec"), "resourcePool") ?: "")) return false;
    }
    const json_t *states = json_object_get(q, "jobStates");
    if (json_array_size(states)) {
        bool any = false;
        size_t i;
        const json_t *s;
        json_array_foreach(states, i, s) any |= json_equal((json_t *)s, json_object_get(json_object_get(sum, "status"), "state"));
        if (!any) return false;
    }
    size_t i;
    const json_t *kw;
    json_array_foreach(json_object_get(q, "keywords"), i, kw) {
        char *lab = json_dumps(json_object_get(sum, "labels"), JSON_COMPACT | JSON_ENCODE_ANY);
        bool hit = contains(jstr(sum, "name"), json_string_value(kw)) || contains(jstr(sum, "owner"), json_string_value(kw)) ||
                   contains(lab, json_string_value(kw));
        free(lab);
        if (!hit) return false;
    }
    return true;
}

struct order {
    bool by_name, desc;
};

static int by_order(const void *a, const void *b, void *ud) {
    const struct order *o = ud;
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = o->by_name ? 0
                       : strcmp(jstr(json_object_get(x, "status"), "creationTime") ?: "",
                                jstr(json_object_get(y, "status"), "creationTime") ?: "");
    if (!c) c = strcmp(jstr(x, "name") ?: "", jstr(y, "name") ?: "");
    return o->desc ? -c : c;
}

static void answer_query(struct jcall *op, const json_t *items) {
    const json_t *q = json_object_get(op->req, "spec"), *pg = json_object_get(q, "pagination");
    json_t *all = json_array();
    size_t i;
    const json_t *j;
    json_array_foreach(items, i, j) {
        json_t *s = v1_job_summary(j);
        if (query_match(s, j, q)) json_array_append_new(all, s);
        else json_decref(s);
    }
    size_t m = json_array_size(all);
    json_t **sel = calloc(m ? m : 1, sizeof *sel);
    if (!sel) {
        json_decref(all);
        native_call_fail(op->base.call, NC_INTERNAL, "out of memory");
        return;
    }
    for (size_t k = 0; k < m; k++) sel[k] = json_array_get(all, k);
    const json_t *ob = json_array_get(json_object_get(pg, "orderBy"), 0);
    struct order o = {!strcmp(jstr(json_object_get(ob, "property"), "value") ?: "", "name"),
                      !strcmp(jstr(ob, "order") ?: "", "DESC")};
    qsort_r(sel, m, sizeof *sel, by_order, &o);
    json_int_t off = json_integer_value(json_object_get(pg, "offset"));
    json_int_t lim = json_integer_value(json_object_get(pg, "limit"));
    json_int_t maxl = json_integer_value(json_object_get(pg, "maxLimit"));
    if (lim <= 0) lim = QUERY_DEFAULT_LIMIT;
    if (maxl > 0 && lim > maxl) lim = maxl;
    json_t *records = json_array();
    for (size_t k = (size_t)off; k < m && (json_int_t)(k - (size_t)off) < lim; k++) json_array_append(records, sel[k]);
    free(sel);
    json_decref(all);
    json_t *resp = json_pack("{s:o,s:{s:I,s:I,s:I}}", "records", records, "pagination", "offset", off, "limit", lim,
                             "total", (json_int_t)m);
    if (q) json_object_set(resp, "spec", (json_t *)q);
    svc_reply_json(op->base.call, D(query_jobs_response), resp);
}

/* ---------------------------------------------------------------- writes */

static void on_write(void *ud, const struct kc_response *r);

/* The UpdateSpec (JSON) into the Job's spec.updateStrategy; -1 with err. */
static int apply_update_spec(json_t *kspec, const json_t *us, char *err, size_t errlen) {
    if (json_is_true(json_object_get(us, "inPlace"))) {
        snprintf(err, errlen, "updateSpec.inPlace: not supported here yet (docs/native-api.md)");
        return -1;
    }
    json_t *st = json_object_get(kspec, "updateStrategy");
    if (!json_is_object(st)) json_object_set_new(kspec, "updateStrategy", st = json_object());
    static const struct {
        const char *from, *to;
    } m[] = {{"batchSize", "batchSize"},
             {"rollbackOnFailure", "rollbackOnFailure"},
             {"maxInstanceRetries", "maxInstanceAttempts"},
             {"maxTolerableInstanceFailures", "maxFailureInstances"},
             {"startPaused", "paused"}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (json_object_get(us, m[i].from)) json_object_set(st, m[i].to, json_object_get(us, m[i].from));
    return 0;
}

/* The Job changed as op asks (a copy), or NULL after failing the call. */
static json_t *changed_job(struct jcall *op) {
    json_t *job = json_deep_copy(op->job);
    json_t *md = json_object_get(job, "metadata"), *spec = json_object_get(job, "spec");
    char err[512] = "";
    if (op->kind == K_REPLACE) {
        const char *type = jstr(spec, "type") ?: "";
        json_t *want = NULL;
        if (strcmp(type, "STATELESS")) snprintf(err, sizeof err, "job %s is a %s job, not a stateless one", op->id, type);
        else if (!json_object_get(op->req, "spec")) snprintf(err, sizeof err, "spec: required");
        else want = v1_job_from_spec(json_object_get(op->req, "spec"), "", jstr(md, "namespace") ?: "",
                                     err, sizeof err);
        if (want && strcmp(jstr(json_object_get(want, "metadata"), "name"), jstr(md, "name") ?: "")) {
            snprintf(err, sizeof err, "spec.name: a job cannot be renamed (it is \"%s\")", jstr(md, "name") ?: "");
        } else if (want) {
            const json_t *wspec = json_object_get(want, "spec");
            const char *k;
            json_t *v;
            json_object_foreach((json_t *)wspec, k, v) json_object_set(spec, k, v);
            json_t *anns = json_object_get(md, "annotations");
            if (!json_is_object(anns)) json_object_set_new(md, "annotations", anns = json_object());
            json_object_update(anns, json_object_get(json_object_get(want, "metadata"), "annotations"));
            if (json_object_get(op->req, "updateSpec"))
                apply_update_spec(spec, json_object_get(op->req, "updateSpec"), err, sizeof err);
        }
        json_decref(want);
    } else if (op->kind == K_RESTART) { /* a new template: the update planner restarts every instance in batches */
        json_t *tpl = json_object_get(spec, "template");
        json_t *tmd = json_object_get(tpl, "metadata");
        if (!json_is_object(tmd)) json_object_set_new(tpl, "metadata", tmd = json_object());
        json_t *tann = json_object_get(tmd, "annotations");
        if (!json_is_object(tann)) json_object_set_new(tmd, "annotations", tann = json_object());
        char v[32];
        v1_job_version(op->job, v, sizeof v); /* the generation restarted from: a new value each time */
        json_object_set_new(tann, V1_A_RESTART, json_string(v));
        size_t i;
        const json_t *r;
        json_int_t n = json_integer_value(json_object_get(spec, "instanceCount"));
        json_array_foreach(json_object_get(op->req, "ranges"), i, r)
            if (json_integer_value(json_object_get(r, "from")) > 0 || json_integer_value(json_object_get(r, "to")) < n)
                snprintf(err, sizeof err, "ranges: only every instance is restarted here ([0, %lld))", (long long)n);
        json_int_t bs = json_integer_value(json_object_get(op->req, "batchSize"));
        if (bs > 0) {
            json_t *st = json_object_get(spec, "updateStrategy");
            if (!json_is_object(st)) json_object_set_new(spec, "updateStrategy", st = json_object());
            json_object_set_new(st, "batchSize", json_integer(bs));
        }
    } else if (op->kind == K_PAUSE || op->kind == K_RESUME) {
        json_t *st = json_object_get(spec, "updateStrategy");
        if (!json_is_object(st)) json_object_set_new(spec, "updateStrategy", st = json_object());
        json_object_set_new(st, "paused", json_boolean(op->kind == K_PAUSE));
    } else if (op->kind == K_ABORT) {
        json_t *anns = json_object_get(md, "annotations");
        if (!json_is_object(anns)) json_object_set_new(md, "annotations", anns = json_object());
        json_object_set_new(anns, A_UPDATE_ABORT, json_string("true"));
    }
    if (err[0]) {
        native_call_fail(op->base.call, NC_INVALID_ARGUMENT, "%s", err);
        json_decref(job);
        return NULL;
    }
    json_object_del(job, "status");
    return job;
}

/* ---------------------------------------------------------------- answers */

static void on_pods(void *ud, const struct kc_response *r) {
    struct jcall *op = ud;
    const json_t *items = svc_list_items_or_fail(&op->base, r);
    if (!items) return;
    op->items = json_incref((json_t *)items);
    op->npods = json_array_size(items);
    op->sorted = calloc(op->npods ? op->npods : 1, sizeof *op->sorted);
    if (!op->sorted) {
        native_call_fail(op->base.call, NC_INTERNAL, "out of memory");
        svc_op_free(&op->base);
        return;
    }
    for (size_t i = 0; i < op->npods; i++) op->sorted[i] = json_array_get(items, i);
    qsort(op->sorted, op->npods, sizeof *op->sorted, by_instance);
    json_int_t n = json_integer_value(json_object_get(json_object_get(op->job, "spec"), "instanceCount"));
    const json_t *range = json_object_get(op->req, "range");
    json_int_t from = json_integer_value(json_object_get(range, "from")), to = json_integer_value(json_object_get(range, "to"));
    if (!range || to <= 0 || to > n) to = n;
    op->inst = (uint32_t)(from < to ? from : to);
    op->end = (uint32_t)(to > 0 ? to : 0);
    start_stream(op);
}

static void on_jobs(void *ud, const struct kc_response *r) {
    struct jcall *op = ud;
    const json_t *items = svc_list_items_or_fail(&op->base, r);
    if (!items) return;
    if (op->kind == K_LIST_JOBS) {
        op->items = json_incref((json_t *)items);
        start_stream(op);
        return;
    }
    if (op->kind == K_QUERY) {
        answer_query(op, items);
        svc_op_free(&op->base);
        return;
    }
    size_t i;
    const json_t *j;
    if (op->kind == K_ID_BY_NAME) { /* newest first */
        json_t *ids = json_array();
        const char *want = jstr(op->req, "jobName") ?: "";
        json_array_foreach(items, i, j) {
            json_t *s = v1_job_spec(j);
            if (!strcmp(jstr(s, "name") ?: "", want)) json_array_insert_new(ids, 0, json_pack("{s:s}", "value", svc_job_id(j)));
            json_decref(s);
        }
        if (!json_array_size(ids)) {
            json_decref(ids);
            native_call_fail(op->base.call, NC_NOT_FOUND, "no job is named %.200s", want);
        } else {
            svc_reply_json(op->base.call, D(get_job_idfrom_job_name_response), json_pack("{s:o}", "jobId", ids));
        }
        svc_op_free(&op->base);
        return;
    }
    op->job = json_incref((json_t *)v1_find_job(items, op->id));
    if (!op->job) {
        native_call_fail(op->base.call, NC_NOT_FOUND, "job %s not found", op->id);
        svc_op_free(&op->base);
        return;
    }
    char cur[32], path[600];
    v1_job_version(op->job, cur, sizeof cur);
    if (op->version[0] && strcmp(op->version, cur) && op->kind != K_GET) {
        native_call_fail(op->base.call, NC_ABORTED, "unexpected entity version %s (the job is at %s)", op->version, cur);
        svc_op_free(&op->base);
        return;
    }
    job_path(op->job, path, sizeof path);
    switch (op->kind) {
    case K_GET: {
        if (op->version[0] && strcmp(op->version, cur)) {
            native_call_fail(op->base.call, NC_NOT_FOUND, "job %s version %s: only the current version (%s) is kept",
                             op->id, op->version, cur);
            break;
        }
        json_t *resp;
        if (json_is_true(json_object_get(op->req, "summaryOnly"))) {
            resp = json_pack("{s:o}", "summary", v1_job_summary(op->job));
        } else {
            resp = json_pack("{s:{s:{s:s},s:o,s:o}}", "jobInfo", "jobId", "value", op->id, "spec",
                             v1_job_spec(op->job), "status", v1_job_status(op->job));
            json_t *w = v1_workflow_status(op->job);
            if (w) json_object_set_new(resp, "workflowInfo", json_pack("{s:o,s:o}", "status", w, "updateSpec",
                                                                        v1_update_spec(op->job)));
        }
        svc_reply_json(op->base.call, D(get_job_response), resp);
        break;
    }
    case K_LIST_PODS: {
        const json_t *md = json_object_get(op->job, "metadata");
        char sel[512], p2[1200];
        kc_escape(PL_JOB "=", sel, sizeof sel);
        size_t n = strlen(sel);
        kc_escape(jstr(md, "name") ?: "", sel + n, sizeof sel - n);
        snprintf(p2, sizeof p2, "/api/v1/namespaces/%s/pods?labelSelector=%s", jstr(md, "namespace") ?: "", sel);
        svc_op_request(&op->base, "GET", p2, NULL, on_pods);
        return;
    }
    case K_DELETE: svc_op_request(&op->base, "DELETE", path, NULL, on_write); return;
    case K_REPLACE:
    case K_RESTART:
    case K_PAUSE:
    case K_RESUME:
    case K_ABORT: {
        json_t *job = changed_job(op);
        if (!job) break;
        svc_op_request(&op->base, "PUT", path, job, on_write);
        json_decref(job);
        return;
    }
    default: break;
    }
    svc_op_free(&op->base);
}

static void on_write(void *ud, const struct kc_response *r) {
    struct jcall *op = ud;
    const char *msg = r->error ? r->error : "";
    if (r->status == 409 && op->kind != K_CREATE && op->kind != K_DELETE && ++op->tries < V1_WRITE_TRIES) {
        /* lost to another writer: read the Job again; its entity version is
         * checked again there (a status write leaves it as it was) */
        json_decref(op->job);
        op->job = NULL;
        svc_op_request(&op->base, "GET", JOBS_PATH, NULL, on_jobs);
        return;
    }
    json_t *obj = r->status == 200 || r->status == 201 || r->status == 202 ? kc_response_body(r) : NULL;
    if (obj && op->kind == K_CREATE) {
        char v[32];
        v1_job_version(obj, v, sizeof v);
        svc_reply_json(op->base.call, D(create_job_response),
                       json_pack("{s:{s:s},s:{s:s}}", "jobId", "value", svc_job_id(obj), "version", "value", v));
    } else if (r->status >= 200 && r->status < 300 && op->kind == K_DELETE) {
        svc_reply_json(op->base.call, D(delete_job_response), json_object());
    } else if (obj) {
        const ProtobufCMessageDescriptor *d = op->kind == K_REPLACE   ? D(replace_job_response)
                                              : op->kind == K_RESTART ? D(restart_job_response)
                                              : op->kind == K_PAUSE ? D(pause_job_workflow_response)
                                              : op->kind == K_RESUME ? D(resume_job_workflow_response)
                                                                     : D(abort_job_workflow_response);
        svc_reply_json(op->base.call, d, version_reply(obj));
    } else if (r->status == 409) {
        native_call_fail(op->base.call, op->kind == K_CREATE ? NC_ALREADY_EXISTS : NC_ABORTED, "%s", msg);
    } else if (r->status == 404) {
        native_call_fail(op->base.call, op->kind == K_CREATE ? NC_INVALID_ARGUMENT : NC_NOT_FOUND, "%s", msg);
    } else if (r->status == 422 || r->status == 400) {
        native_call_fail(op->base.call, NC_INVALID_ARGUMENT, "%s", msg);
    } else {
        svc_fail_status(op->base.call, r);
    }
    svc_op_free(&op->base);
}

/* ---------------------------------------------------------------- handlers */

/* The per-call state with the request as JSON; NULL after failing the call. */
static struct jcall *op_new(struct v1_job *svc, struct native_call *call, const ProtobufCMessage *msg, enum kind kind) {
    char err[256];
    json_t *req = pbjson_from_msg(msg, err, sizeof err);
    if (!req) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "%s", err);
        return NULL;
    }
    struct jcall *op = svc_op_new(sizeof *op, svc->kc, call, op_release);
    if (!op) {
        json_decref(req);
        return NULL;
    }
    op->kind = kind;
    op->req = req;
    snprintf(op->id, sizeof op->id, "%s", jstr(json_object_get(req, "jobId"), "value") ?: "");
    snprintf(op->version, sizeof op->version, "%s", jstr(json_object_get(req, "version"), "value") ?: "");
    return op;
}

/* Calls that name a job: find it first (on_jobs). */
static void by_job(void *ud, struct native_call *call, const ProtobufCMessage *msg, enum kind kind) {
    struct jcall *op = op_new(ud, call, msg, kind);
    if (!op) return;
    if (!op->id[0]) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "jobId: required");
        svc_op_free(&op->base);
        return;
    }
    svc_op_request(&op->base, "GET", JOBS_PATH, NULL, on_jobs);
}

/* GetJob from the read cache: the reply (full or summary) built once per
 * version of the Job and sent as it is. false: read through the API server
 * (also for a version asked that is not the current one: it says why). */
static bool get_cached(struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V1alpha__Job__Stateless__Svc__GetJobRequest *req = (const void *)msg;
    const char *id = req->job_id && req->job_id->value ? req->job_id->value : "";
    struct ncache *c = svc_cache(call);
    const json_t *job = *id ? ncache_job(c, id) : NULL;
    if (!job) return false;
    if (req->version && req->version->value && *req->version->value) {
        char cur[32];
        v1_job_version(job, cur, sizeof cur);
        if (strcmp(req->version->value, cur)) return false;
    }
    enum ncache_memo which = req->summary_only ? NCACHE_MEMO_V1_SUMMARY : NCACHE_MEMO_V1_GET;
    const struct ncache_reply *m = ncache_job_memo(c, id, which);
    if (!m) {
        json_t *resp;
        if (req->summary_only) {
            resp = json_pack("{s:o}", "summary", v1_job_summary(job));
        } else {
            resp = json_pack("{s:{s:{s:s},s:o,s:o}}", "jobInfo", "jobId", "value", id, "spec", v1_job_spec(job),
                             "status", v1_job_status(job));
            json_t *w = v1_workflow_status(job);
            if (w && resp)
                json_object_set_new(resp, "workflowInfo", json_pack("{s:o,s:o}", "status", w, "updateSpec",
                                                                     v1_update_spec(job)));
            else json_decref(w);
        }
        char err[256];
        ProtobufCMessage *built = resp ? pbjson_to_msg(D(get_job_response), resp, err, sizeof err) : NULL;
        json_decref(resp);
        if (!built || !(m = ncache_job_memo_set(c, id, which, built))) return false; /* the slow path says why */
    }
    native_call_reply_packed(call, m->msg, m->packed, m->len);
    return true;
}

static void h_get(void *ud, struct native_call *c, const ProtobufCMessage *m) {
    if (!get_cached(c, m)) by_job(ud, c, m, K_GET);
}
static void h_replace(void *ud, struct native_call *c, const ProtobufCMessage *m) { by_job(ud, c, m, K_REPLACE); }
static void h_restart(void *ud, struct native_call *c, const ProtobufCMessage *m) { by_job(ud, c, m, K_RESTART); }
static void h_pause(void *ud, struct native_call *c, const ProtobufCMessage *m) { by_job(ud, c, m, K_PAUSE); }
static void h_resume(void *ud, struct native_call *c, const ProtobufCMessage *m) { by_job(ud, c, m, K_RESUME); }
static void h_abort(void *ud, struct native_call *c, const ProtobufCMessage *m) { by_job(ud, c, m, K_ABORT); }
static void h_delete(void *ud, struct native_call *c, const ProtobufCMessage *m) { by_job(ud, c, m, K_DELETE); }
static void h_list_pods(void *ud, struct native_call *c, const ProtobufCMessage *m) { by_job(ud, c, m, K_LIST_PODS); }

static void all_jobs(void *ud, struct native_call *call, const ProtobufCMessage *msg, enum kind kind) {
    struct jcall *op = op_new(ud, call, msg, kind);
    if (op) svc_op_request(&op->base, "GET", JOBS_PATH, NULL, on_jobs);
}

static void h_list_jobs(void *ud, struct native_call *c, const ProtobufCMessage *m) { all_jobs(ud, c, m, K_LIST_JOBS); }
static void h_query(void *ud, struct native_call *c, const ProtobufCMessage *m) { all_jobs(ud, c, m, K_QUERY); }
static void h_id_by_name(void *ud, struct native_call *c, const ProtobufCMessage *m) { all_jobs(ud, c, m, K_ID_BY_NAME); }

static void h_create(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    struct jcall *op = op_new(ud, call, msg, K_CREATE);
    if (!op) return;
    char err[512] = "";
    json_t *job = NULL;
    if (op->id[0] && !valid_id(op->id)) snprintf(err, sizeof err, "jobId: \"%.64s\" is not a UUID", op->id);
    else if (json_array_size(json_object_get(op->req, "secrets"))) snprintf(err, sizeof err, "secrets: not supported here yet");
    else if (!json_object_get(op->req, "spec")) snprintf(err, sizeof err, "spec: required");
    else job = v1_job_from_spec(json_object_get(op->req, "spec"), op->id, NATIVE_JOB_NAMESPACE, err, sizeof err);
    if (!job) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "%s", err);
        svc_op_free(&op->base);
        return;
    }
    svc_op_request(&op->base, "POST", "/apis/peloton.io/v1alpha1/namespaces/" NATIVE_JOB_NAMESPACE "/jobs", job, on_write);
    json_decref(job);
}

static void h_unimplemented(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud;
    (void)msg;
    native_call_fail(call, NC_UNIMPLEMENTED, "JobService.%s is not served here yet (docs/native-api.md)",
                     native_call_method(call));
}

/* ---------------------------------------------------------------- registration */

#define M(name, in, out, fn, stream) {name, D(in), D(out), fn, stream}
static const struct native_method methods[] = {
    M("CreateJob", create_job_request, create_job_response, h_create, false),
    M("ReplaceJob", replace_job_request, replace_job_response, h_replace, false),
    M("PatchJob", patch_job_request, patch_job_response, h_unimplemented, false),
    M("RestartJob", restart_job_request, restart_job_response, h_restart, false),
    M("PauseJobWorkflow", pause_job_workflow_request, pause_job_workflow_response, h_pause, false),
    M("ResumeJobWorkflow", resume_job_workflow_request, resume_job_workflow_response, h_resume, false),
    M("AbortJobWorkflow", abort_job_workflow_request, abort_job_workflow_response, h_abort, false),
    M("StartJob", start_job_request, start_job_response, h_unimplemented, false),
    M("StopJob", stop_job_request, stop_job_response, h_unimplemented, false),
    M("DeleteJob", delete_job_request, delete_job_response, h_delete, false),
    M("GetJob", get_job_request, get_job_response, h_get, false),
    M("GetJobIDFromJobName", get_job_idfrom_job_name_request, get_job_idfrom_job_name_response, h_id_by_name, false),
    M("GetWorkflowEvents", get_workflow_events_request, get_workflow_events_response, h_unimplemented, false),
    M("ListPods", list_pods_request, list_pods_response, h_list_pods, true),
    M("QueryPods", query_pods_request, query_pods_response, h_unimplemented, false),
    M("QueryJobs", query_jobs_request, query_jobs_response, h_query, false),
    M("ListJobs", list_jobs_request, list_jobs_response, h_list_jobs, true),
    M("ListJobUpdates", list_job_updates_request, list_job_updates_response, h_unimplemented, false),
    M("GetReplaceJobDiff", get_replace_job_diff_request, get_replace_job_diff_response, h_unimplemented, false),
    M("RefreshJob", refresh_job_request, refresh_job_response, h_unimplemented, false),
    M("GetJobCache", get_job_cache_request, get_job_cache_response, h_unimplemented, false),
};

struct v1_job *v1_job_new(struct kclient *kc) {
    struct v1_job *s = calloc(1, sizeof *s);
    if (s) s->kc = kc;
    return s;
}

void v1_job_free(struct v1_job *s) { free(s); }

int v1_job_register(struct v1_job *s, struct native_registry *r) {
    return native_registry_add(r, "peloton.api.v1alpha.job.stateless.svc.JobService", methods,
                               sizeof methods / sizeof methods[0], s);
}
