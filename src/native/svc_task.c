/* v0 TaskManager over a Job's Pods (svc_task.h): Get, List, Query and
 * GetPodEvents read; Start, Stop and Restart write through svc_jobwrite. */
#include "svc_task.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "ncache.h"
#include "pbjson.h"
#include "peloton/api/v0/task/task.pb-c.h"
#include "svc_common.h"
#include "svc_job.h"
#include "svc_jobwrite.h"

#define JOBS_PATH "/apis/peloton.io/v1alpha1/jobs"
#define A_RUN "peloton.io/run"             /* docs/lifecycle.md: the run of an instance, 1 first */
#define A_FAILURES "peloton.io/failures"   /* failed runs before this one */
#define A_CONFIG_VERSION "peloton.io/config-version"
#define MAX_INSTANCES (1u << 24)           /* spec.instanceCount's bound */
#define QUERY_DEFAULT_LIMIT 100

struct svc_task {
    struct kclient *kc;
};

enum task_op { OP_GET, OP_LIST, OP_QUERY, OP_EVENTS };

struct task_call {
    struct svc_op base;
    enum task_op kind;
    char id[128];
    uint32_t instance, from, to; /* Get: instance; List: [from, to) (to 0: all) */
    json_t *req;                 /* the request as JSON (Query) */
    json_t *job;                 /* the Job, once found */
    json_t *pods;                /* GetPodEvents: the instance's pods (name -> pod) */
    uint64_t limit;              /* GetPodEvents: at most this many (0: all) */
    long long run;               /* GetPodEvents: only this run (0: every run) */
};

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* A decimal annotation or label value, or dflt. */
static long long num(const char *s, long long dflt) {
    char *end;
    long long v = s && *s ? strtoll(s, &end, 10) : -1;
    return s && *s && !*end && v >= 0 ? v : dflt;
}

/* docs/lifecycle.md, "Pod -> task state". */
static const char *pod_task_state(const json_t *pod) {
    const json_t *st = json_object_get(pod, "status"), *md = json_object_get(pod, "metadata");
    const char *phase = jstr(st, "phase"), *node = jstr(json_object_get(pod, "spec"), "nodeName");
    if (phase && !strcmp(phase, "Succeeded")) return "SUCCEEDED";
    if (phase && !strcmp(phase, "Failed")) return "FAILED";
    if (phase && !strcmp(phase, "Unknown")) return "LOST";
    if (json_object_get(md, "deletionTimestamp")) return "KILLING";
    if (phase && !strcmp(phase, "Running")) return "RUNNING";
    return node && *node ? "LAUNCHED" : "PENDING";
}

/* TaskInfo of instance i of the job, from its pod (NULL: none yet). */
static json_t *task_info(const json_t *job, uint32_t i, const json_t *pod, const json_t *config) {
    const char *jid = svc_job_id(job);
    const char *type = svc_job_type(json_object_get(job, "spec"));
    json_t *rt = json_pack("{s:s,s:s}", "state", pod ? pod_task_state(pod) : "INITIALIZED", "goalState",
                           !strcmp(type, "BATCH") ? "SUCCEEDED" : "RUNNING");
    if (pod) {
        const json_t *md = json_object_get(pod, "metadata"), *st = json_object_get(pod, "status");
        const json_t *ann = json_object_get(md, "annotations");
        char tid[256], v[32];
        snprintf(tid, sizeof tid, "%s-%u-%lld", jid, i, num(jstr(ann, A_RUN), 1)); /* Peloton's <job>-<inst>-<run> */
        json_object_set_new(rt, "mesosTaskId", json_pack("{s:s}", "value", tid));
        const char *node = jstr(json_object_get(pod, "spec"), "nodeName");
        if (node && *node) {
            json_object_set_new(rt, "host", json_string(node));
            json_object_set_new(rt, "agentID", json_pack("{s:s}", "value", node));
        }
        if (jstr(st, "startTime")) json_object_set_new(rt, "startTime", json_string(jstr(st, "startTime")));
        if (jstr(st, "message")) json_object_set_new(rt, "message", json_string(jstr(st, "message")));
        if (jstr(st, "reason")) json_object_set_new(rt, "reason", json_string(jstr(st, "reason")));
        json_object_set_new(rt, "failureCount", json_integer(num(jstr(ann, A_FAILURES), 0) & 0xffffffff));
        snprintf(v, sizeof v, "%lld", num(jstr(ann, A_CONFIG_VERSION), 0));
        json_object_set_new(rt, "configVersion", json_string(v));
        const json_t *cs = json_array_get(json_object_get(st, "containerStatuses"), 0);
        const char *fin = jstr(json_object_get(json_object_get(cs, "state"), "terminated"), "finishedAt");
        if (fin) json_object_set_new(rt, "completionTime", json_string(fin));
    }
    return json_pack("{s:I,s:{s:s},s:O,s:o}", "instanceId", (json_int_t)i, "jobId", "value", jid, "config", config,
                     "runtime", rt);
}

/* The pod of each instance in [from, to) (the latest run when several are
 * left), in pods[i - from]; borrowed from items. */
static void pick_pods(const json_t *items, uint32_t from, uint32_t to, const json_t **pods) {
    size_t k;
    const json_t *p;
    json_array_foreach(items, k, p) {
        const json_t *md = json_object_get(p, "metadata");
        long long inst = num(jstr(json_object_get(md, "labels"), PL_INSTANCE), -1);
        if (inst < from || inst >= to) continue;
        const json_t **slot = &pods[inst - from];
        long long run = num(jstr(json_object_get(md, "annotations"), A_RUN), 1);
        if (!*slot || run > num(jstr(json_object_get(json_object_get(*slot, "metadata"), "annotations"), A_RUN), 1))
            *slot = p;
    }
}

static json_t *not_found(const char *id) {
    char msg[256];
    snprintf(msg, sizeof msg, "job %.128s not found", id);
    return json_pack("{s:{s:s},s:s}", "id", "value", id, "message", msg);
}

static uint32_t instance_count(const json_t *job) {
    json_int_t n = json_integer_value(json_object_get(json_object_get(job, "spec"), "instanceCount"));
    return n > 0 && n <= MAX_INSTANCES ? (uint32_t)n : 0;
}

static bool in_list(const json_t *arr, const char *s) {
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) if (s && json_is_string(v) && !strcmp(json_string_value(v), s)) return true;
    return false;
}

static bool events_of(struct task_call *op, const json_t *pods_list);

static void answer(struct task_call *op, const json_t *pods_list) {
    const json_t *job = op->job;
    uint32_t n = instance_count(job);
    json_t *config = svc_job_task_config(json_object_get(job, "spec"));
    if (op->kind == OP_GET) {
        if (op->instance >= n) {
            svc_reply_json(op->base.call, &peloton__api__v0__task__get_response__descriptor,
                           json_pack("{s:{s:{s:s},s:I}}", "outOfRange", "jobId", "value", op->id, "instanceCount",
                                     (json_int_t)n));
        } else {
            const json_t *pod = NULL;
            pick_pods(pods_list, op->instance, op->instance + 1, &pod);
            json_t *all = json_array(); /* every run still present, oldest first */
            size_t k;
            const json_t *p;
            json_array_foreach(pods_list, k, p) {
                const json_t *md = json_object_get(p, "metadata");
                if (num(jstr(json_object_get(md, "labels"), PL_INSTANCE), -1) == op->instance && p != pod)
                    json_array_append_new(all, task_info(job, op->instance, p, config));
            }
            json_t *latest = task_info(job, op->instance, pod, config);
            json_array_append(all, latest);
            svc_reply_json(op->base.call, &peloton__api__v0__task__get_response__descriptor,
                           json_pack("{s:o,s:o}", "result", latest, "results", all));
        }
        json_decref(config);
        return;
    }
    uint32_t from = op->kind == OP_LIST ? op->from : 0, to = op->kind == OP_LIST && op->to ? op->to : n;
    if (to > n) to = n;
    if (from > to) from = to;
    const json_t **pods = calloc(to - from + 1, sizeof *pods);
    if (!pods) {
        json_decref(config);
        native_call_fail(op->base.call, NC_INTERNAL, "out of memory");
        return;
    }
    pick_pods(pods_list, from, to, pods);
    if (op->kind == OP_LIST) {
        json_t *m = json_object();
        for (uint32_t i = from; i < to; i++) {
            char k[16];
            snprintf(k, sizeof k, "%u", i);
            json_object_set_new(m, k, task_info(job, i, pods[i - from], config));
        }
        svc_reply_json(op->base.call, &peloton__api__v0__task__list_response__descriptor,
                       json_pack("{s:{s:o}}", "result", "value", m));
    } else {
        const json_t *spec = json_object_get(op->req, "spec"), *pg = json_object_get(spec, "pagination");
        const json_t *states = json_object_get(spec, "taskStates"), *hosts = json_object_get(spec, "hosts");
        const json_t *names = json_object_get(spec, "names");
        json_int_t off = json_integer_value(json_object_get(pg, "offset")), lim = json_integer_value(json_object_get(pg, "limit"));
        if (lim <= 0) lim = QUERY_DEFAULT_LIMIT;
        json_t *records = json_array();
        json_int_t total = 0;
        for (uint32_t i = from; i < to; i++) {
            json_t *t = task_info(job, i, pods[i - from], config);
            const json_t *rt = json_object_get(t, "runtime");
            bool ok = (!json_array_size(states) || in_list(states, jstr(rt, "state"))) &&
                      (!json_array_size(hosts) || in_list(hosts, jstr(rt, "host"))) &&
                      (!json_array_size(names) || in_list(names, jstr(config, "name")));
            if (ok && total >= off && total < off + lim) json_array_append(records, t);
            total += ok;
            json_decref(t);
        }
        svc_reply_json(op->base.call, &peloton__api__v0__task__query_response__descriptor,
                       json_pack("{s:o,s:{s:I,s:I,s:I}}", "records", records, "pagination", "offset", off, "limit", lim,
                                 "total", total));
    }
    free(pods);
    json_decref(config);
}

static void op_release(struct svc_op *base) {
    struct task_call *op = (struct task_call *)base;
    json_decref(op->req);
    json_decref(op->job);
    json_decref(op->pods);
    free(op);
}

static void on_pods(void *ud, const struct kc_response *r) {
    struct task_call *op = ud;
    const json_t *items = svc_list_items(r);
    if (!items) svc_fail_status(op->base.call, r);
    else if (op->kind == OP_EVENTS) {
        if (events_of(op, items)) return; /* on to the Events: op lives on there, or is freed */
    } else answer(op, items);
    svc_op_free(&op->base);
}

/* ---------------------------------------------------------------- GetPodEvents */

/* The task state an Event says a pod entered, by its reason ("" when it
 * says none). */
static const char *event_state(const char *reason) {
    static const struct {
        const char *reason, *state;
    } t[] = {{"FailedScheduling", "PENDING"}, {"Preempting", "PREEMPTING"}, {"Preempted", "KILLED"},
             {"Terminating", "KILLING"},     {"Killing", "KILLING"},       {"Scheduled", "LAUNCHED"},
             {"Started", "RUNNING"},         {"BackOff", "FAILED"}};
    for (size_t i = 0; reason && i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(reason, t[i].reason)) return t[i].state;
    return "";
}

static const char *event_time(const json_t *e) {
    const char *t = jstr(e, "lastTimestamp");
    if (!t) t = jstr(e, "eventTime");
    return t ? t : jstr(e, "firstTimestamp") ? jstr(e, "firstTimestamp") : "";
}

static int by_event_time(const void *a, const void *b) {
    return strcmp(event_time(*(json_t *const *)a), event_time(*(json_t *const *)b));
}

static void on_events(void *ud, const struct kc_response *r) {
    struct task_call *op = ud;
    const json_t *items = svc_list_items_or_fail(&op->base, r);
    if (!items) return;
    size_t n = json_array_size(items), m = 0, i;
    json_t **sel = calloc(n ? n : 1, sizeof *sel), *e;
    if (!sel) {
        native_call_fail(op->base.call, NC_INTERNAL, "out of memory");
        svc_op_free(&op->base);
        return;
    }
    json_array_foreach(items, i, e) if (json_object_get(op->pods, jstr(json_object_get(e, "involvedObject"), "name") ?: ""))
        sel[m++] = e;
    qsort(sel, m, sizeof *sel, by_event_time);
    size_t from = op->limit && m > op->limit ? m - op->limit : 0; /* the latest `limit` */
    const char *jid = svc_job_id(op->job);
    const char *goal = !strcmp(svc_job_type(json_object_get(op->job, "spec")), "BATCH") ? "SUCCEEDED" : "RUNNING";
    json_t *out = json_array();
    for (size_t k = from; k < m; k++) {
        const json_t *io = json_object_get(sel[k], "involvedObject");
        const json_t *pod = json_object_get(op->pods, jstr(io, "name"));
        const json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
        char tid[256], cv[32];
        snprintf(tid, sizeof tid, "%s-%u-%lld", jid, op->instance, num(jstr(ann, A_RUN), 1));
        snprintf(cv, sizeof cv, "%lld", num(jstr(ann, A_CONFIG_VERSION), 0));
        const char *host = jstr(json_object_get(sel[k], "source"), "host");
        if (!host) host = jstr(json_object_get(pod, "spec"), "nodeName");
        json_t *pe = json_pack("{s:{s:s},s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "taskId", "value", tid, "actualState",
                               event_state(jstr(sel[k], "reason")), "goalState", goal, "timestamp", event_time(sel[k]),
                               "configVersion", cv, "message", jstr(sel[k], "message") ?: "", "reason",
                               jstr(sel[k], "reason") ?: "", "hostname", host ? host : "");
        if (host) json_object_set_new(pe, "agentID", json_string(host));
        json_array_append_new(out, pe);
    }
    free(sel);
    svc_reply_json(op->base.call, &peloton__api__v0__task__get_pod_events_response__descriptor,
                   json_pack("{s:o}", "result", out));
    svc_op_free(&op->base);
}

/* The instance's pods (of run op->run, or all), then their Events: true
 * when op went on to ask for them; false when it answered already (the
 * caller frees op). */
static bool events_of(struct task_call *op, const json_t *pods_list) {
    uint32_t n = instance_count(op->job);
    if (op->instance >= n) {
        char msg[128];
        snprintf(msg, sizeof msg, "instance %u is out of range: the job has %u", op->instance, n);
        svc_reply_json(op->base.call, &peloton__api__v0__task__get_pod_events_response__descriptor,
                       json_pack("{s:{s:s}}", "error", "message", msg));
        return false;
    }
    op->pods = json_object();
    size_t k;
    const json_t *p;
    json_array_foreach(pods_list, k, p) {
        const json_t *md = json_object_get(p, "metadata");
        if (num(jstr(json_object_get(md, "labels"), PL_INSTANCE), -1) != op->instance) continue;
        if (op->run && num(jstr(json_object_get(md, "annotations"), A_RUN), 1) != op->run) continue;
        json_object_set(op->pods, jstr(md, "name") ?: "", (json_t *)p);
    }
    char path[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events?fieldSelector=involvedObject.kind%%3DPod",
             jstr(json_object_get(op->job, "metadata"), "namespace") ?: "default");
    svc_op_request(&op->base, "GET", path, NULL, on_events);
    return true;
}

static void on_jobs(void *ud, const struct kc_response *r) {
    struct task_call *op = ud;
    const json_t *items = svc_list_items_or_fail(&op->base, r);
    if (!items) return;
    size_t i;
    json_t *j;
    json_array_foreach(items, i, j) if (!op->job && !strcmp(svc_job_id(j), op->id)) op->job = json_incref(j);
    if (!op->job) {
        if (op->kind == OP_EVENTS) {
            char msg[256];
            snprintf(msg, sizeof msg, "job %.128s not found", op->id);
            svc_reply_json(op->base.call, &peloton__api__v0__task__get_pod_events_response__descriptor,
                           json_pack("{s:{s:s}}", "error", "message", msg));
            svc_op_free(&op->base);
            return;
        }
        const ProtobufCMessageDescriptor *d = op->kind == OP_GET    ? &peloton__api__v0__task__get_response__descriptor
                                              : op->kind == OP_LIST ? &peloton__api__v0__task__list_response__descriptor
                                                                    : &peloton__api__v0__task__query_response__descriptor;
        svc_reply_json(op->base.call, d,
                       op->kind == OP_QUERY ? json_pack("{s:{s:o}}", "error", "notFound", not_found(op->id))
                                            : json_pack("{s:o}", "notFound", not_found(op->id)));
        svc_op_free(&op->base);
        return;
    }
    const json_t *md = json_object_get(op->job, "metadata");
    char name[512], path[1024];
    kc_escape(PL_JOB "=", name, sizeof name);
    size_t n = strlen(name);
    kc_escape(jstr(md, "name") ? jstr(md, "name") : "", name + n, sizeof name - n);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s", jstr(md, "namespace") ?: "default", name);
    svc_op_request(&op->base, "GET", path, NULL, on_pods);
}

/* Finds the Job first (on_jobs), then its pods (on_pods); Get, List and
 * Query from the read cache when it has the Job and may answer pods. */
static void start(struct task_call *op) {
    struct ncache *c = op->kind != OP_EVENTS ? svc_cache(op->base.call) : NULL;
    const json_t *job = ncache_job(c, op->id);
    const json_t *pods = ncache_job_pods(c, job);
    if (pods) {
        op->job = json_incref((json_t *)job);
        answer(op, pods);
        svc_op_free(&op->base);
        return;
    }
    svc_op_request(&op->base, "GET", JOBS_PATH, NULL, on_jobs);
}

static struct task_call *op_new(struct svc_task *svc, struct native_call *call, enum task_op kind,
                                const Peloton__Api__V0__Peloton__JobID *id) {
    struct task_call *op = svc_op_new(sizeof *op, svc->kc, call, op_release);
    if (!op) return NULL;
    op->kind = kind;
    snprintf(op->id, sizeof op->id, "%s", id && id->value ? id->value : "");
    return op;
}

static void h_get(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Task__GetRequest *req = (const void *)msg;
    struct task_call *op = op_new(ud, call, OP_GET, req->jobid);
    if (!op) return;
    op->instance = req->instanceid;
    start(op);
}

static void h_list(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Task__ListRequest *req = (const void *)msg;
    struct task_call *op = op_new(ud, call, OP_LIST, req->jobid);
    if (!op) return;
    if (req->range) {
        op->from = req->range->from;
        op->to = req->range->to;
    }
    start(op);
}

static void h_query(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Task__QueryRequest *req = (const void *)msg;
    char err[256];
    struct task_call *op = op_new(ud, call, OP_QUERY, req->jobid);
    if (!op) return;
    if (!(op->req = pbjson_from_msg(msg, err, sizeof err))) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "%s", err);
        svc_op_free(&op->base);
        return;
    }
    start(op);
}

static void h_events(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Task__GetPodEventsRequest *req = (const void *)msg;
    struct task_call *op = op_new(ud, call, OP_EVENTS, req->jobid);
    if (!op) return;
    op->instance = req->instanceid;
    op->limit = req->limit;
    if (req->runid && *req->runid) { /* a task id "<JobID>-<instance>-<run>", or the run alone */
        const char *dash = strrchr(req->runid, '-');
        op->run = num(dash ? dash + 1 : req->runid, -1);
        if (op->run <= 0) {
            native_call_fail(call, NC_INVALID_ARGUMENT, "runId: \"%.100s\" is not a run (<JobID>-<instance>-<run>)",
                             req->runid);
            svc_op_free(&op->base);
            return;
        }
    }
    start(op);
}

/* ---------------------------------------------------------------- Start, Stop, Restart */

static json_t *job_not_found(const char *id) { return json_pack("{s:{s:o}}", "error", "notFound", not_found(id)); }
static json_t *restart_not_found(const char *id) { return json_pack("{s:o}", "notFound", not_found(id)); }

/* The instances the request's ranges name among n; NULL after failing the
 * call (INVALID_ARGUMENT naming the field) or answering *reply (outOfRange,
 * in_error: inside "error" as Start and Stop have it). */
static json_t *task_ranges(struct svc_jw *w, uint32_t n, bool in_error, json_t **reply) {
    char err[256];
    bool past;
    json_t *inst = svc_instances_of(json_object_get(w->req, "ranges"), n, &past, err, sizeof err);
    if (inst) return inst;
    if (!past) {
        native_call_fail(w->base.call, NC_INVALID_ARGUMENT, "%s", err);
        return NULL;
    }
    json_t *oor = json_pack("{s:{s:{s:s},s:I}}", "outOfRange", "jobId", "value", w->id, "instanceCount", (json_int_t)n);
    *reply = in_error ? json_pack("{s:o}", "error", oor) : oor;
    return NULL;
}

/* ---- per-instance stop: spec.stoppedInstances (docs/crds.md) ---- */


struct irange {
    uint32_t from, to;
};

static int irange_cmp(const void *a, const void *b) {
    uint32_t x = ((const struct irange *)a)->from, y = ((const struct irange *)b)->from;
    return (x > y) - (x < y);
}

static int u32_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The Job's spec.stoppedInstances with the instances inst added (stop) or
 * taken out (start), as sorted, merged {from, to} ranges ([from, to)); NULL
 * on ENOMEM or when it would take more than SVC_STOPPED_MAX_RANGES ranges. */
static json_t *stopped_with(const json_t *job, const json_t *inst, bool stop) {
    const json_t *cur = json_object_get(json_object_get(job, "spec"), "stoppedInstances");
    size_t ncur = json_array_size(cur), ninst = json_array_size(inst);
    struct irange *v = malloc((ncur + (stop ? ninst : 0) + 1) * sizeof *v);
    uint32_t *ids = malloc((ninst + 1) * sizeof *ids);
    json_t *out = NULL;
    if (!v || !ids) goto done;
    size_t n = 0, k;
    const json_t *r;
    json_array_foreach(cur, k, r) {
        json_int_t f = json_integer_value(json_object_get(r, "from")), t = json_integer_value(json_object_get(r, "to"));
        if (f >= 0 && t > f && t <= MAX_INSTANCES) v[n++] = (struct irange){(uint32_t)f, (uint32_t)t};
    }
    json_array_foreach(inst, k, r) ids[k] = (uint32_t)json_integer_value(r);
    if (stop)
        for (k = 0; k < ninst; k++) v[n++] = (struct irange){ids[k], ids[k] + 1};
    qsort(v, n, sizeof *v, irange_cmp);
    size_t m = 0;
    for (k = 0; k < n; k++) { /* merged: overlapping or adjacent ranges become one */
        if (m && v[k].from <= v[m - 1].to) {
            if (v[k].to > v[m - 1].to) v[m - 1].to = v[k].to;
        } else {
            v[m++] = v[k];
        }
    }
    if (!(out = json_array())) goto done;
    qsort(ids, ninst, sizeof *ids, u32_cmp);
    size_t j = 0; /* walks ids (start: the holes to cut) */
    for (k = 0; k < m; k++) {
        uint32_t from = v[k].from;
        if (!stop) {
            while (j < ninst && ids[j] < v[k].from) j++;
            for (; j < ninst && ids[j] < v[k].to; j++) {
                if (ids[j] > from) json_array_append_new(out, json_pack("{s:I, s:I}", "from", (json_int_t)from, "to",
                                                                        (json_int_t)ids[j]));
                from = ids[j] + 1;
            }
        }
        if (from < v[k].to)
            json_array_append_new(out, json_pack("{s:I, s:I}", "from", (json_int_t)from, "to", (json_int_t)v[k].to));
    }
    if (json_array_size(out) > SVC_STOPPED_MAX_RANGES) {
        json_decref(out);
        out = NULL;
    }
done:
    free(v);
    free(ids);
    return out;
}

int svc_job_stop_some(const json_t *job, const json_t *inst, bool stop, json_t **put) {
    *put = NULL;
    json_t *st = stopped_with(job, inst, stop);
    if (!st) return -1;
    const json_t *cur = json_object_get(json_object_get(job, "spec"), "stoppedInstances");
    if (json_equal(st, cur) || (!cur && !json_array_size(st))) { /* nothing changes */
        json_decref(st);
        return 0;
    }
    *put = json_deep_copy(job);
    json_t *spec = json_object_get(*put, "spec");
    if (json_array_size(st)) json_object_set_new(spec, "stoppedInstances", st);
    else json_decref(st), json_object_del(spec, "stoppedInstances");
    return 0;
}

/* Some instances of a running job stopped or started: the Job with its new
 * spec.stoppedInstances in *put, or *reply at once when nothing changes;
 * -1 after failing the call. inst is taken. */
static int stop_some(struct svc_jw *w, const json_t *job, json_t *inst, bool stop, json_t **put, json_t **reply) {
    if (svc_job_stop_some(job, inst, stop, put)) {
        json_decref(inst);
        native_call_fail(w->base.call, NC_INVALID_ARGUMENT,
                         "ranges: the job's stopped instances would need more than %d ranges", SVC_STOPPED_MAX_RANGES);
        return -1;
    }
    if (!*put) *reply = json_pack("{s:o}", stop ? "stoppedInstanceIds" : "startedInstanceIds", inst);
    else json_object_set_new(w->req, "instances", inst);
    return 0;
}

static int tstop_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    long long stopped = svc_job_stopped_count(job);
    uint32_t n = stopped >= 0 ? (uint32_t)stopped : svc_job_instances(job);
    json_t *inst = task_ranges(w, n, true, reply);
    if (!inst) return *reply ? 0 : -1;
    if (stopped >= 0) { /* stopped already */
        *reply = json_pack("{s:o}", "stoppedInstanceIds", inst);
        return 0;
    }
    if (!strcmp(svc_jstr(json_object_get(job, "spec"), "type") ?: "", "DAEMON")) {
        json_decref(inst);
        native_call_fail(w->base.call, NC_FAILED_PRECONDITION,
                         "job %.128s is a DAEMON job: stopping it is not supported here", w->id);
        return -1;
    }
    if (json_array_size(inst) != n) return stop_some(w, job, inst, true, put, reply); /* spec.stoppedInstances */
    *put = svc_job_stop(job);
    json_object_set_new(w->req, "instances", inst);
    return 0;
}

static int tstart_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    long long stopped = svc_job_stopped_count(job);
    uint32_t n = stopped >= 0 ? (uint32_t)stopped : svc_job_instances(job);
    json_t *inst = task_ranges(w, n, true, reply);
    if (!inst) return *reply ? 0 : -1;
    if (stopped < 0) /* running: those of its instances that were stopped start again */
        return stop_some(w, job, inst, false, put, reply);
    if (json_array_size(inst) != n) {
        *reply = json_pack("{s:{s:{s:s}},s:o}", "error", "failure", "message",
                           "starting some instances of a stopped job: start them all (no ranges)",
                           "invalidInstanceIds", inst);
        return 0;
    }
    *put = svc_job_start(job);
    json_object_del(json_object_get(*put, "spec"), "stoppedInstances"); /* every instance runs again */
    json_object_set_new(w->req, "instances", inst);
    return 0;
}

static json_t *tstop_done(struct svc_jw *w, const json_t *stored) {
    (void)stored;
    return json_pack("{s:O}", "stoppedInstanceIds", json_object_get(w->req, "instances"));
}

static json_t *tstart_done(struct svc_jw *w, const json_t *stored) {
    (void)stored;
    return json_pack("{s:O}", "startedInstanceIds", json_object_get(w->req, "instances"));
}

static int trestart_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    if (svc_job_stopped_count(job) >= 0) {
        native_call_fail(w->base.call, NC_FAILED_PRECONDITION, "job %.128s is stopped: start it", w->id);
        return -1;
    }
    json_t *inst = task_ranges(w, svc_job_instances(job), false, reply);
    if (!inst) return *reply ? 0 : -1;
    json_decref(w->del);
    w->del = inst; /* a new run of each */
    (void)put;
    return 0;
}

static json_t *trestart_done(struct svc_jw *w, const json_t *stored) {
    (void)w, (void)stored;
    return json_object();
}

#define TD(x) &peloton__api__v0__task__##x##__descriptor
static const struct svc_jw_ops tstop_ops = {TD(stop_response), job_not_found, tstop_plan, tstop_done, 0};
static const struct svc_jw_ops tstart_ops = {TD(start_response), job_not_found, tstart_plan, tstart_done, 0};
static const struct svc_jw_ops trestart_ops = {TD(restart_response), restart_not_found, trestart_plan, trestart_done, 0};

static void begin(void *ud, struct native_call *call, const ProtobufCMessage *msg, const struct svc_jw_ops *ops) {
    char err[256], id[160];
    json_t *req = pbjson_from_msg(msg, err, sizeof err);
    if (!req) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "%s", err);
        return;
    }
    snprintf(id, sizeof id, "%s", svc_jstr(json_object_get(req, "jobId"), "value") ?: "");
    svc_jw_start(((struct svc_task *)ud)->kc, call, ops, id, req);
}

static void h_start(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &tstart_ops); }
static void h_stop(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &tstop_ops); }
static void h_restart(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &trestart_ops); }

/* What this server has no counterpart for: UNIMPLEMENTED, saying why. */
static void h_sandbox(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud, (void)msg;
    native_call_fail(call, NC_UNIMPLEMENTED, "BrowseSandbox: tasks here are pods, which have no Mesos sandbox to "
                                             "browse (read their logs through the Kubernetes API)");
}

static void h_nocache(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud, (void)msg;
    native_call_fail(call, NC_UNIMPLEMENTED, "nothing is cached here: every call reads the pods (use Get)");
}

static void h_delete_events(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud, (void)msg;
    native_call_fail(call, NC_UNIMPLEMENTED, "DeletePodEvents: pod events are Kubernetes Events, which expire on their own");
}

static const struct native_method methods[] = {
    {"Get", &peloton__api__v0__task__get_request__descriptor, &peloton__api__v0__task__get_response__descriptor, h_get,
     false},
    {"List", &peloton__api__v0__task__list_request__descriptor, &peloton__api__v0__task__list_response__descriptor,
     h_list, false},
    {"Query", &peloton__api__v0__task__query_request__descriptor, &peloton__api__v0__task__query_response__descriptor,
     h_query, false},
    {"GetPodEvents", TD(get_pod_events_request), TD(get_pod_events_response), h_events, false},
    {"Start", TD(start_request), TD(start_response), h_start, false},
    {"Stop", TD(stop_request), TD(stop_response), h_stop, false},
    {"Restart", TD(restart_request), TD(restart_response), h_restart, false},
    {"BrowseSandbox", TD(browse_sandbox_request), TD(browse_sandbox_response), h_sandbox, false},
    {"Refresh", TD(refresh_request), TD(refresh_response), h_nocache, false},
    {"GetCache", TD(get_cache_request), TD(get_cache_response), h_nocache, false},
    {"DeletePodEvents", TD(delete_pod_events_request), TD(delete_pod_events_response), h_delete_events, false},
};

struct svc_task *svc_task_new(struct kclient *kc) {
    struct svc_task *s = calloc(1, sizeof *s);
    if (s) s->kc = kc;
    return s;
}

void svc_task_free(struct svc_task *s) { free(s); }

int svc_task_register(struct svc_task *s, struct native_registry *r) {
    size_t n = sizeof methods / sizeof methods[0];
    int rc = native_registry_add(r, "peloton.api.task.TaskManager", methods, n, s);
    return rc ? rc : native_registry_add(r, "peloton.api.v0.task.TaskManager", methods, n, s);
}
