/* v1alpha PodService over Pods (v1_pod.h): the Job first (by the PodName's
 * JobID), then the instance's pods (labels peloton.io/job and
 * peloton.io/instance), then the answer or the pod's deletion. */
#include "v1_pod.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "pbjson.h"
#include "peloton/api/v1alpha/pod/svc/pod_svc.pb-c.h"
#include "svc_common.h"
#include "svc_job.h"
#include "v1_map.h"

#define JOBS_PATH "/apis/peloton.io/v1alpha1/jobs"
#define D(x) (&peloton__api__v1alpha__pod__svc__##x##__descriptor)

struct v1_pod {
    struct kclient *kc;
};

enum kind { K_GET, K_EVENTS, K_RESTART };

struct pcall {
    struct svc_op base;
    enum kind kind;
    char name[160], jid[128], run_id[200];
    long long inst;
    bool status_only;
    json_t *job;
};

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static void op_release(struct svc_op *base) {
    struct pcall *op = (struct pcall *)base;
    json_decref(op->job);
    free(op);
}

/* ---------------------------------------------------------------- answers */

/* The pods of the instance, oldest run first (borrowed from items), in a new array. */
static const json_t **runs_of(const json_t *items, long long inst, size_t *n) {
    size_t cap = json_array_size(items), k = 0, i;
    const json_t **runs = calloc(cap ? cap : 1, sizeof *runs), *p;
    if (!runs) return NULL;
    json_array_foreach(items, i, p) if (v1_pod_instance(p) == inst) runs[k++] = p;
    for (size_t a = 1; a < k; a++) /* insertion sort by run: a handful of runs */
        for (size_t b = a; b > 0; b--) {
            const char *x = jstr(json_object_get(json_object_get(runs[b - 1], "metadata"), "annotations"), "peloton.io/run");
            const char *y = jstr(json_object_get(json_object_get(runs[b], "metadata"), "annotations"), "peloton.io/run");
            if (atoll(x ? x : "1") <= atoll(y ? y : "1")) break;
            const json_t *t = runs[b];
            runs[b] = runs[b - 1];
            runs[b - 1] = t;
        }
    *n = k;
    return runs;
}

static json_t *pod_info(struct pcall *op, const json_t *pod) {
    json_t *sum = v1_pod_summary(op->jid, (uint32_t)op->inst, pod, false);
    json_t *info = json_pack("{s:O}", "status", json_object_get(sum, "status"));
    if (!op->status_only) {
        json_t *spec = v1_pod_spec(op->job);
        json_object_set(spec, "podName", json_object_get(sum, "podName"));
        json_object_set_new(info, "spec", spec);
    }
    json_decref(sum);
    return info;
}

static void add_event(json_t *evs, const json_t *status, const char *state, const char *ts, const char *reason,
                      const char *msg) {
    if (!ts) return;
    json_t *e = json_pack("{s:O,s:s,s:s,s:s}", "podId", json_object_get(status, "podId"), "actualState", state,
                          "desiredState", "POD_STATE_RUNNING", "timestamp", ts);
    static const char *const keys[] = {"jobVersion", "host"};
    if (json_object_get(status, keys[0])) json_object_set(e, "jobVersion", json_object_get(status, keys[0]));
    if (json_object_get(status, keys[1])) {
        json_object_set(e, "hostname", json_object_get(status, keys[1]));
        json_object_set(e, "agentId", json_object_get(status, keys[1]));
    }
    if (reason && *reason) json_object_set_new(e, "reason", json_string(reason));
    if (msg && *msg) json_object_set_new(e, "message", json_string(msg));
    json_array_append_new(evs, e);
}

/* The run's state transitions, oldest first, from what its pod object records. */
static void pod_events(struct pcall *op, const json_t *pod, json_t *evs) {
    json_t *sum = v1_pod_summary(op->jid, (uint32_t)op->inst, pod, false);
    const json_t *st = json_object_get(sum, "status"), *md = json_object_get(pod, "metadata");
    const json_t *pst = json_object_get(pod, "status");
    add_event(evs, st, "POD_STATE_PENDING", jstr(md, "creationTimestamp"), NULL, NULL);
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(pst, "conditions"), i, c)
        if (!strcmp(jstr(c, "type") ?: "", "PodScheduled") && !strcmp(jstr(c, "status") ?: "", "True"))
            add_event(evs, st, "POD_STATE_LAUNCHED", jstr(c, "lastTransitionTime"), NULL, NULL);
    const json_t *cs = json_object_get(json_array_get(json_object_get(pst, "containerStatuses"), 0), "state");
    const json_t *run = json_object_get(cs, "running"), *term = json_object_get(cs, "terminated");
    add_event(evs, st, "POD_STATE_RUNNING", jstr(run, "startedAt") ?: jstr(term, "startedAt"), NULL, NULL);
    if (term)
        add_event(evs, st, json_integer_value(json_object_get(term, "exitCode")) ? "POD_STATE_FAILED" : "POD_STATE_SUCCEEDED",
                  jstr(term, "finishedAt"), jstr(term, "reason"), jstr(term, "message"));
    add_event(evs, st, "POD_STATE_KILLING", jstr(md, "deletionTimestamp"), NULL, NULL);
    json_decref(sum);
}

static void on_deleted(void *ud, const struct kc_response *r) {
    struct pcall *op = ud;
    if (r->status == 200 || r->status == 202)
        svc_reply_json(op->base.call, D(restart_pod_response), json_object());
    else if (r->status == 404)
        native_call_fail(op->base.call, NC_NOT_FOUND, "pod %s not found", op->name);
    else svc_fail_status(op->base.call, r);
    svc_op_free(&op->base);
}

static void on_pods(void *ud, const struct kc_response *r) {
    struct pcall *op = ud;
    const json_t *items = svc_list_items_or_fail(&op->base, r);
    if (!items) return;
    size_t n;
    const json_t **runs = runs_of(items, op->inst, &n);
    if (!runs) {
        native_call_fail(op->base.call, NC_INTERNAL, "out of memory");
        svc_op_free(&op->base);
        return;
    }
    const json_t *cur = n ? runs[n - 1] : NULL;
    if (op->kind == K_GET) {
        json_t *prev = json_array();
        for (size_t i = n > 0 ? n - 1 : 0; i-- > 0;) json_array_append_new(prev, pod_info(op, runs[i])); /* newest first */
        svc_reply_json(op->base.call, D(get_pod_response),
                       json_pack("{s:o,s:o}", "current", pod_info(op, cur), "previous", prev));
    } else if (op->kind == K_EVENTS) {
        const json_t *which = cur;
        if (op->run_id[0]) { /* a given run: <PodName>-<run> */
            which = NULL;
            for (size_t i = 0; i < n; i++) {
                json_t *s = v1_pod_summary(op->jid, (uint32_t)op->inst, runs[i], false);
                if (!strcmp(jstr(json_object_get(json_object_get(s, "status"), "podId"), "value") ?: "", op->run_id))
                    which = runs[i];
                json_decref(s);
            }
        }
        if (!which && op->run_id[0]) {
            native_call_fail(op->base.call, NC_NOT_FOUND, "pod run %s not found (runs that ended are kept while "
                                                          "their pod objects are)", op->run_id);
        } else {
            json_t *evs = json_array();
            if (which) pod_events(op, which, evs);
            svc_reply_json(op->base.call, D(get_pod_events_response), json_pack("{s:o}", "events", evs));
        }
    } else if (!cur) {
        native_call_fail(op->base.call, NC_NOT_FOUND, "pod %s has no run to restart yet", op->name);
    } else {
        const json_t *md = json_object_get(cur, "metadata");
        char path[600];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", jstr(md, "namespace") ?: "", jstr(md, "name") ?: "");
        free(runs);
        svc_op_request(&op->base, "DELETE", path, NULL, on_deleted);
        return;
    }
    free(runs);
    svc_op_free(&op->base);
}

static void on_jobs(void *ud, const struct kc_response *r) {
    struct pcall *op = ud;
    const json_t *items = svc_list_items_or_fail(&op->base, r);
    if (!items) return;
    op->job = json_incref((json_t *)v1_find_job(items, op->jid));
    json_int_t count = json_integer_value(json_object_get(json_object_get(op->job, "spec"), "instanceCount"));
    if (!op->job || op->inst >= count) {
        native_call_fail(op->base.call, NC_NOT_FOUND, "pod %s not found (%s)", op->name,
                         op->job ? "instance out of range" : "no such job");
        svc_op_free(&op->base);
        return;
    }
    const json_t *md = json_object_get(op->job, "metadata");
    char sel[600], path[1000], inst[32];
    snprintf(inst, sizeof inst, ",%s=%lld", PL_INSTANCE, op->inst);
    kc_escape(PL_JOB "=", sel, sizeof sel);
    size_t n = strlen(sel);
    kc_escape(jstr(md, "name") ?: "", sel + n, sizeof sel - n);
    n = strlen(sel);
    kc_escape(inst, sel + n, sizeof sel - n);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s", jstr(md, "namespace") ?: "", sel);
    svc_op_request(&op->base, "GET", path, NULL, on_pods);
}

/* ---------------------------------------------------------------- handlers */

/* Splits "<JobID>-<instance>" into op; false after failing the call. */
static bool parse_name(struct pcall *op, const char *name) {
    const char *dash = name ? strrchr(name, '-') : NULL;
    size_t digits = dash ? strlen(dash + 1) : 0;
    if (!dash || dash == name || !digits || digits > 9 || strspn(dash + 1, "0123456789") != digits ||
        (size_t)(dash - name) >= sizeof op->jid) {
        native_call_fail(op->base.call, NC_INVALID_ARGUMENT, "podName: \"%.100s\" is not <JobID>-<instance>",
                         name ? name : "");
        return false;
    }
    snprintf(op->name, sizeof op->name, "%s", name);
    memcpy(op->jid, name, (size_t)(dash - name));
    op->jid[dash - name] = 0;
    op->inst = atoll(dash + 1);
    return true;
}

static void start(struct v1_pod *svc, struct native_call *call, enum kind kind, const Peloton__Api__V1alpha__Peloton__PodName *pn,
                  bool status_only, const char *run_id) {
    struct pcall *op = svc_op_new(sizeof *op, svc->kc, call, op_release);
    if (!op) return;
    op->kind = kind;
    op->status_only = status_only;
    snprintf(op->run_id, sizeof op->run_id, "%s", run_id ? run_id : "");
    if (!parse_name(op, pn ? pn->value : NULL)) {
        svc_op_free(&op->base);
        return;
    }
    svc_op_request(&op->base, "GET", JOBS_PATH, NULL, on_jobs);
}

static void h_get(void *ud, struct native_call *c, const ProtobufCMessage *m) {
    const Peloton__Api__V1alpha__Pod__Svc__GetPodRequest *r = (const void *)m;
    start(ud, c, K_GET, r->pod_name, r->status_only, NULL);
}

static void h_events(void *ud, struct native_call *c, const ProtobufCMessage *m) {
    const Peloton__Api__V1alpha__Pod__Svc__GetPodEventsRequest *r = (const void *)m;
    start(ud, c, K_EVENTS, r->pod_name, false, r->pod_id ? r->pod_id->value : NULL);
}

static void h_restart(void *ud, struct native_call *c, const ProtobufCMessage *m) {
    const Peloton__Api__V1alpha__Pod__Svc__RestartPodRequest *r = (const void *)m;
    start(ud, c, K_RESTART, r->pod_name, false, NULL);
}

static void h_unimplemented(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    (void)ud;
    (void)msg;
    native_call_fail(call, NC_UNIMPLEMENTED, "PodService.%s is not served here yet (docs/native-api.md)",
                     native_call_method(call));
}

#define M(name, in, out, fn) {name, D(in), D(out), fn, false}
static const struct native_method methods[] = {
    M("StartPod", start_pod_request, start_pod_response, h_unimplemented),
    M("StopPod", stop_pod_request, stop_pod_response, h_unimplemented),
    M("RestartPod", restart_pod_request, restart_pod_response, h_restart),
    M("GetPod", get_pod_request, get_pod_response, h_get),
    M("GetPodEvents", get_pod_events_request, get_pod_events_response, h_events),
    M("BrowsePodSandbox", browse_pod_sandbox_request, browse_pod_sandbox_response, h_unimplemented),
    M("RefreshPod", refresh_pod_request, refresh_pod_response, h_unimplemented),
    M("GetPodCache", get_pod_cache_request, get_pod_cache_response, h_unimplemented),
    M("DeletePodEvents", delete_pod_events_request, delete_pod_events_response, h_unimplemented),
};

struct v1_pod *v1_pod_new(struct kclient *kc) {
    struct v1_pod *s = calloc(1, sizeof *s);
    if (s) s->kc = kc;
    return s;
}

void v1_pod_free(struct v1_pod *s) { free(s); }

int v1_pod_register(struct v1_pod *s, struct native_registry *r) {
    return native_registry_add(r, "peloton.api.v1alpha.pod.svc.PodService", methods, sizeof methods / sizeof methods[0], s);
}
