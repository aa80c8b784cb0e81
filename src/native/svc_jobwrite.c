/* Writes to one Job: find, plan, PUT and/or delete pods, reply (svc_jobwrite.h). */
#include "svc_jobwrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "ncache.h"
#include "svc_job.h"

#define MAX_INSTANCES (1u << 24) /* spec.instanceCount's bound */

const char *svc_jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

json_int_t svc_job_generation(const json_t *job) {
    json_int_t g = json_integer_value(json_object_get(json_object_get(job, "metadata"), "generation"));
    return g ? g : 1;
}

uint32_t svc_job_instances(const json_t *job) {
    json_int_t n = json_integer_value(json_object_get(json_object_get(job, "spec"), "instanceCount"));
    return n > 0 && n <= MAX_INSTANCES ? (uint32_t)n : 0;
}

const char *svc_job_annotation(const json_t *job, const char *k) {
    return svc_jstr(json_object_get(json_object_get(job, "metadata"), "annotations"), k);
}

void svc_job_annotate(json_t *job, const char *k, const char *value) {
    json_t *md = json_object_get(job, "metadata");
    json_t *ann = json_object_get(md, "annotations");
    if (!json_is_object(ann)) {
        if (!value) return;
        json_object_set_new(md, "annotations", ann = json_object());
    }
    if (value) json_object_set_new(ann, k, json_string(value));
    else json_object_del(ann, k);
}

json_t *svc_instances_of(const json_t *ranges, uint32_t n, bool *past, char *err, size_t errlen) {
    *past = false;
    json_t *out = json_array();
    if (!json_array_size(ranges)) {
        for (uint32_t i = 0; i < n; i++) json_array_append_new(out, json_integer(i));
        return out;
    }
    char *seen = calloc(n ? n : 1, 1); /* an instance named twice is listed once */
    size_t k;
    const json_t *r;
    json_array_foreach(ranges, k, r) {
        json_int_t from = json_integer_value(json_object_get(r, "from"));
        json_int_t to = json_integer_value(json_object_get(r, "to"));
        if (from >= to) {
            snprintf(err, errlen, "ranges[%zu]: from %lld is not below to %lld (a range is [from, to))", k,
                     (long long)from, (long long)to);
            goto bad;
        }
        if (from >= n) {
            snprintf(err, errlen, "ranges[%zu].from: %lld is past the job's instanceCount %u", k, (long long)from,
                     n);
            *past = true;
            goto bad;
        }
        /* an open end (Peloton's CLI sends `to` = 2^31-1 for "from i on") names
         * the instances the job has, as Peloton's own server reads it */
        if (to > n) to = n;
        for (json_int_t i = from; i < to; i++)
            if (seen && !seen[i]) {
                seen[i] = 1;
                json_array_append_new(out, json_integer(i));
            }
    }
    free(seen);
    return out;
bad:
    free(seen);
    json_decref(out);
    return NULL;
}

void svc_next_update_id(const json_t *job, char *out, size_t len) {
    const char *jid = svc_job_id(job), *last = svc_job_annotation(job, SVC_A_UPDATE_ID);
    size_t jl = strlen(jid);
    long long n = 0;
    if (last && !strncmp(last, jid, jl) && last[jl] == '-') n = strtoll(last + jl + 1, NULL, 10);
    snprintf(out, len, "%s-%lld", jid, (n > 0 ? n : 0) + 1);
}

int svc_update_job_id(const char *uid, char *out, size_t len) {
    const char *dash = strrchr(uid, '-');
    size_t n = dash ? strlen(dash + 1) : 0;
    if (!dash || dash == uid || !n || strspn(dash + 1, "0123456789") != n || (size_t)(dash - uid) >= len) return -1;
    memcpy(out, uid, (size_t)(dash - uid));
    out[dash - uid] = 0;
    return 0;
}

int svc_jw_check_version(struct svc_jw *w, const json_t *v) {
    const char *s = json_string_value(v);
    long long want = s ? strtoll(s, NULL, 10) : json_integer_value(v);
    if (want <= 0) return 0;
    if (want == svc_job_generation(w->job)) return 0;
    native_call_fail(w->base.call, NC_ABORTED, "stale version %lld: job %.128s is at configuration version %lld", want,
                     w->id, (long long)svc_job_generation(w->job));
    return -1;
}

/* ---------------------------------------------------------------- the call */

static void jw_release(struct svc_op *base) {
    struct svc_jw *w = (struct svc_jw *)base;
    json_decref(w->req);
    json_decref(w->job);
    json_decref(w->put);
    json_decref(w->del);
    json_decref(w->deleted);
    free(w);
}

static void on_jobs(void *ud, const struct kc_response *r);

static void finish(struct svc_jw *w, const json_t *stored) {
    svc_reply_json(w->base.call, w->ops->resp, w->ops->done(w, stored));
    svc_op_free(&w->base);
}

static void on_pod_deleted(void *ud, const struct kc_response *r) {
    struct svc_jw *w = ud;
    ncache_wrote(w->del_cache, NCACHE_PODS, r);
    /* 404: the pod went meanwhile, which is what was asked */
    if (r->status != 200 && r->status != 202 && r->status != 404 && !w->tries) {
        w->tries = -1; /* the first failure answers the call */
        svc_fail_status(w->base.call, r);
    }
    if (--w->pending) return;
    if (w->tries == -1) svc_op_free(&w->base);
    else finish(w, NULL);
}

/* The pods of the Job: delete those of the instances in w->del. */
static void on_pods(void *ud, const struct kc_response *r) {
    struct svc_jw *w = ud;
    const json_t *items = svc_list_items_or_fail(&w->base, r);
    if (!items) return;
    /* the instances asked for, as a bitmap: one look-up per pod */
    json_int_t top = 0;
    size_t i;
    const json_t *p;
    json_array_foreach(w->del, i, p) if (json_integer_value(p) >= top) top = json_integer_value(p) + 1;
    char *want = calloc((size_t)top + 1, 1);
    if (!want) {
        native_call_fail(w->base.call, NC_INTERNAL, "out of memory");
        svc_op_free(&w->base);
        return;
    }
    json_array_foreach(w->del, i, p) want[json_integer_value(p)] = 1;
    w->deleted = json_array();
    w->tries = 0;
    w->del_cache = svc_cache(w->base.call);
    json_array_foreach(items, i, p) {
        const json_t *md = json_object_get(p, "metadata");
        const char *inst = svc_jstr(json_object_get(md, "labels"), PL_INSTANCE);
        long long k = inst ? strtoll(inst, NULL, 10) : -1;
        if (k < 0 || k >= top || !want[k] || json_object_get(md, "deletionTimestamp")) continue;
        char path[512];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", svc_jstr(md, "namespace") ?: "default",
                 svc_jstr(md, "name") ?: "");
        json_array_append_new(w->deleted, json_integer(k));
        w->pending++;
        if (kclient_request(w->base.kc, "DELETE", path, NULL, NULL, on_pod_deleted, w)) {
            w->pending--;
            if (!w->tries) native_call_fail(w->base.call, NC_UNAVAILABLE, "API server unreachable");
            w->tries = -1;
            break;
        }
    }
    free(want);
    if (w->pending) return;
    if (w->tries == -1) svc_op_free(&w->base);
    else finish(w, NULL);
}

static void delete_pods(struct svc_jw *w) {
    const json_t *md = json_object_get(w->job, "metadata");
    char sel[512], path[1024];
    kc_escape(PL_JOB "=", sel, sizeof sel);
    size_t n = strlen(sel);
    kc_escape(svc_jstr(md, "name") ?: "", sel + n, sizeof sel - n);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s", svc_jstr(md, "namespace") ?: "default",
             sel);
    svc_op_request(&w->base, "GET", path, NULL, on_pods);
}

static void on_put(void *ud, const struct kc_response *r) {
    struct svc_jw *w = ud;
    /* lost a race: read and plan again; with the client's version too, since
     * plan checks it again against the Job read: a status write meanwhile
     * (the job manager's) leaves the configuration version as it was, a
     * spec write does not (then ABORTED, stale version) */
    if (r->status == 409 && ++w->tries < SVC_JW_TRIES) {
        json_decref(w->job);
        json_decref(w->put);
        json_decref(w->del);
        w->job = w->put = w->del = NULL;
        svc_op_request(&w->base, "GET", SVC_JOBS_PATH, NULL, on_jobs);
        return;
    }
    const json_t *stored = r->status == 200 || r->status == 201 ? kc_response_body(r) : NULL;
    if (!stored) {
        if (r->status == 409)
            native_call_fail(w->base.call, NC_ABORTED, "the job changed meanwhile (read it again): %s", r->error ?: "");
        else svc_fail_status(w->base.call, r);
        svc_op_free(&w->base);
        return;
    }
    json_decref(w->job);
    w->job = json_incref((json_t *)stored);
    if (w->del) delete_pods(w);
    else finish(w, stored);
}

static void on_jobs(void *ud, const struct kc_response *r) {
    struct svc_jw *w = ud;
    const json_t *items = svc_list_items_or_fail(&w->base, r);
    if (!items) return;
    size_t i;
    json_t *j;
    json_array_foreach(items, i, j) if (!w->job && !strcmp(svc_job_id(j), w->id)) w->job = json_incref(j);
    if (!w->job) {
        json_t *nf = w->ops->not_found ? w->ops->not_found(w->id) : NULL;
        if (nf) svc_reply_json(w->base.call, w->ops->resp, nf);
        else native_call_fail(w->base.call, NC_NOT_FOUND, "job %.128s not found", w->id);
        svc_op_free(&w->base);
        return;
    }
    json_t *put = NULL, *reply = NULL;
    if (w->ops->plan(w, w->job, &put, &reply)) {
        json_decref(put);
        svc_op_free(&w->base);
        return;
    }
    if (reply || (!put && !w->del)) {
        json_decref(put);
        svc_reply_json(w->base.call, w->ops->resp, reply ? reply : w->ops->done(w, NULL));
        svc_op_free(&w->base);
        return;
    }
    if (!put) {
        delete_pods(w);
        return;
    }
    const json_t *md = json_object_get(w->job, "metadata");
    char path[512];
    snprintf(path, sizeof path, "/apis/peloton.io/v1alpha1/namespaces/%s/jobs/%s", svc_jstr(md, "namespace") ?: "",
             svc_jstr(md, "name") ?: "");
    /* the read's resourceVersion: a write between the read and this PUT is a 409 */
    json_object_set(json_object_get(put, "metadata"), "resourceVersion", json_object_get(md, "resourceVersion"));
    json_object_del(put, "status");
    w->put = put;
    svc_op_request(&w->base, "PUT", path, put, on_put);
}

void svc_jw_start(struct kclient *kc, struct native_call *call, const struct svc_jw_ops *ops, const char *id,
                  json_t *req) {
    struct svc_jw *w = svc_op_new(sizeof *w, kc, call, jw_release);
    if (!w) {
        json_decref(req);
        return;
    }
    w->ops = ops;
    w->arg = ops->arg;
    w->req = req;
    snprintf(w->id, sizeof w->id, "%s", id ? id : "");
    svc_op_request(&w->base, "GET", SVC_JOBS_PATH, NULL, on_jobs);
}
