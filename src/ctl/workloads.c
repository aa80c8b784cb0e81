/* The translating controller (workloads.h; docs/workloads.md): workload in,
 * Peloton Job out, status back. Level-triggered: any event on a workload, on
 * its Peloton Job or on a namespace reconciles what it touches, and a timer
 * reconciles everything; a write is sent only when what is stored differs
 * from what is wanted, so a reconcile that finds nothing to do costs no
 * request. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "labels.h"
#include "workloads_int.h"

const struct wl_kind_info wl_kinds[WL_NKINDS] = {
    {"apps/v1", "Deployment", "/apis/apps/v1/deployments", "STATELESS"},
    {"apps/v1", "ReplicaSet", "/apis/apps/v1/replicasets", "STATELESS"},
    {"apps/v1", "StatefulSet", "/apis/apps/v1/statefulsets", "STATEFUL"},
    {"apps/v1", "DaemonSet", "/apis/apps/v1/daemonsets", "DAEMON"},
    {"batch/v1", "Job", "/apis/batch/v1/jobs", "BATCH"},
};

static void wl_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wl_log(const char *level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "level=%s component=workloads ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Whether every member of want is in have with the same value (objects
 * recursively; what the API server defaulted in have is not a difference). */
static bool subset(const json_t *want, const json_t *have) {
    if (json_is_object(want)) {
        if (!json_is_object(have)) return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)want, k, v) if (!subset(v, json_object_get(have, k))) return false;
        return true;
    }
    if (json_is_array(want)) {
        if (!json_is_array(have) || json_array_size(want) != json_array_size(have)) return false;
        for (size_t i = 0; i < json_array_size(want); i++)
            if (!subset(json_array_get(want, i), json_array_get(have, i))) return false;
        return true;
    }
    return json_equal(want, have);
}

/* An IntOrString (count or "N%") against total; round_up as kube-controller-manager does for maxSurge. */
static json_int_t int_or_percent(const json_t *v, json_int_t total, bool round_up, json_int_t dflt) {
    if (json_is_integer(v)) return json_integer_value(v);
    const char *s = json_string_value(v);
    if (!s) return dflt;
    char *end;
    long p = strtol(s, &end, 10);
    if (*end != '%' || p < 0) return dflt;
    return round_up ? (total * p + 99) / 100 : total * p / 100;
}

/* The workload's pool: the template's label, the workload's label, its
 * namespace's annotation, the default pool; NULL when none. */
static const char *pool_of(const struct workloads *w, const json_t *obj) {
    const json_t *spec = json_object_get(obj, "spec");
    const char *p = json_string_value(json_object_get(
        json_object_get(json_object_get(json_object_get(spec, "template"), "metadata"), "labels"), PL_POOL));
    if (!p) p = json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), PL_POOL));
    if (!p) {
        json_t *ns = kc_informer_get(w->nss, "", str(obj, "metadata", "namespace"));
        p = json_string_value(json_object_get(json_object_get(json_object_get(ns, "metadata"), "annotations"), PL_POOL));
    }
    return p && p[0] ? p : w->o.default_pool;
}

/* The Peloton Job's spec for workload obj of kind k (new reference). */
static json_t *pj_spec(enum wl_kind k, const json_t *obj, const char *pool) {
    const json_t *spec = json_object_get(obj, "spec");
    json_t *tpl = json_deep_copy(json_object_get(spec, "template"));
    json_t *tmd = json_object_get(tpl, "metadata");
    if (json_is_object(tmd)) json_object_del(tmd, "creationTimestamp");
    if (k == WL_DEPLOY && json_is_object(tpl)) {
        /* its pods carry their ReplicaSet's hash, and are named after it
         * (<deployment>-<hash>-<5 characters>, the job manager) */
        char hash[16];
        wl_template_hash(tpl, hash);
        if (!json_is_object(tmd)) json_object_set_new(tpl, "metadata", tmd = json_object());
        json_t *lb = json_object_get(tmd, "labels");
        if (!json_is_object(lb)) json_object_set_new(tmd, "labels", lb = json_object());
        json_object_set_new(lb, "pod-template-hash", json_string(hash));
    }
    json_t *out = json_pack("{s:s, s:s, s:o}", "type", wl_kinds[k].pj_type, "resourcePool", pool, "template", tpl);
    json_int_t replicas = json_is_integer(json_object_get(spec, "replicas")) ? num(obj, "spec", "replicas") : 1;
    json_t *us = json_object();
    json_int_t batch = 1;
    bool recreate = false;
    if (k == WL_DEPLOY || k == WL_RS) {
        json_object_set_new(out, "instanceCount", json_integer(replicas));
        const json_t *st = json_object_get(spec, "strategy");
        const json_t *ru = json_object_get(st, "rollingUpdate");
        if (str(st, "type", NULL) && !strcmp(str(st, "type", NULL), "Recreate")) {
            recreate = true; /* every instance at once */
        } else {
            json_int_t mu = int_or_percent(json_object_get(ru, "maxUnavailable"), replicas, false, replicas / 4);
            json_int_t ms = int_or_percent(json_object_get(ru, "maxSurge"), replicas, true, (replicas + 3) / 4);
            batch = mu > 0 ? mu : ms > 0 ? ms : 1;
        }
        json_object_set_new(us, "paused", json_boolean(json_is_true(json_object_get(spec, "paused"))));
    } else if (k == WL_STS) {
        json_object_set_new(out, "instanceCount", json_integer(replicas));
        const json_t *ru = json_object_get(json_object_get(spec, "updateStrategy"), "rollingUpdate");
        batch = int_or_percent(json_object_get(ru, "maxUnavailable"), replicas, false, 1);
    } else if (k == WL_DS) {
        const json_t *ru = json_object_get(json_object_get(spec, "updateStrategy"), "rollingUpdate");
        batch = int_or_percent(json_object_get(ru, "maxUnavailable"), 1, false, 1);
    } else { /* WL_JOB */
        json_int_t par = json_is_integer(json_object_get(spec, "parallelism")) ? num(obj, "spec", "parallelism") : 1;
        const json_t *comp = json_object_get(spec, "completions");
        json_int_t n = json_is_integer(comp) ? json_integer_value(comp) : par;
        json_object_set_new(out, "instanceCount", json_integer(n));
        if (par < n) json_object_set_new(out, "sla", json_pack("{s:I}", "maximumRunningInstances", par));
        json_int_t bl = json_is_integer(json_object_get(spec, "backoffLimit")) ? num(obj, "spec", "backoffLimit") : 6;
        json_object_set_new(out, "restartPolicy", json_pack("{s:I}", "maxFailures", bl > 100 ? 100 : bl < 0 ? 0 : bl));
    }
    if (batch < 1) batch = 1; /* a percentage that rounds to 0 still moves one at a time */
    if (recreate) batch = 0;    /* Peloton's "all at once" */
    json_object_set_new(us, "batchSize", json_integer(batch));
    json_int_t mrs = num(obj, "spec", "minReadySeconds");
    json_object_set_new(us, "minReadySeconds", json_integer(mrs < 0 ? 0 : mrs > 86400 ? 86400 : mrs));
    /* an instance that keeps failing at the new template fails the rollout
     * (Progressing=False), which then waits for kubectl rollout undo */
    json_object_set_new(us, "maxFailureInstances", json_integer(1));
    if (k != WL_JOB) json_object_set_new(out, "updateStrategy", us);
    else json_decref(us);
    return out;
}

/* Pods named as kube-controller-manager names them, <base>-<5 characters>
 * (the job manager, JM_A_POD_NAMES): all but a StatefulSet's, whose pods
 * keep <name>-<ordinal>. */
#define PJ_A_POD_NAMES "peloton.io/pod-names"
static bool generated_names(enum wl_kind k) { return k != WL_STS; }

static bool names_as_wanted(enum wl_kind k, const json_t *pj) {
    const char *v = str(json_object_get(pj, "metadata"), "annotations", PJ_A_POD_NAMES);
    return generated_names(k) ? v && !strcmp(v, "generated") : !v;
}

/* Whether pj's controller owner is uid. */
static bool owned_by(const json_t *pj, const char *uid) {
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(pj, "metadata"), "ownerReferences"), i, r) {
        const char *u = str(r, "uid", NULL);
        if (u && uid && !strcmp(u, uid) && json_is_true(json_object_get(r, "controller"))) return true;
    }
    return false;
}

static void on_written(void *ud, const struct kc_response *r) {
    char *what = ud;
    if (r->status >= 300 && r->status != 409 && r->status != 404)
        wl_log("warn", "msg=\"write failed\" what=\"%s\" status=%ld error=\"%s\"", what, r->status,
               r->error ? r->error : "");
    free(what);
}

void wl_send(struct workloads *w, const char *method, const char *path, json_t *body, const char *ct) {
    kclient_request(w->kc, method, path, body, ct, on_written, strdup(path));
    json_decref(body);
}

/* ---- status in the workload's own shape ---- */

static void now_rfc3339(char out[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A condition, keeping lastTransitionTime (and lastUpdateTime) from the
 * stored one of the same type when its status did not change. */
static json_t *condition(const json_t *old_status, const char *type, bool ok, const char *reason, const char *msg,
                         bool update_time) {
    char now[32];
    now_rfc3339(now);
    const char *since = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(old_status, "conditions"), i, c) {
        const char *t = str(c, "type", NULL), *s = str(c, "status", NULL);
        if (t && s && !strcmp(t, type) && !strcmp(s, ok ? "True" : "False")) since = str(c, "lastTransitionTime", NULL);
    }
    json_t *out = json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", type, "status", ok ? "True" : "False", "reason",
                            reason, "message", msg, "lastTransitionTime", since ? since : now);
    if (update_time) json_object_set_new(out, "lastUpdateTime", json_string(since ? since : now));
    return out;
}

struct counts {
    json_int_t running, active, succeeded, failed, total;
    bool updating;      /* a rolling update is in progress */
    bool update_failed; /* the last one failed, rolled back or was aborted */
    json_int_t updated; /* instances at the new template while updating */
    const char *update_state;
    bool observed; /* the job manager has seen the Job's current generation */
};

static struct counts counts_of(const json_t *pj) {
    struct counts c = {0};
    const json_t *st = json_object_get(pj, "status");
    const json_t *ts = json_object_get(st, "taskStats");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ts, k, v) {
        json_int_t n = json_integer_value(v);
        if (!strcmp(k, "RUNNING")) c.running += n;
        if (!strcmp(k, "SUCCEEDED")) c.succeeded += n;
        else if (!strcmp(k, "FAILED") || !strcmp(k, "LOST")) c.failed += n;
        else if (strcmp(k, "KILLED") && strcmp(k, "DELETED")) c.active += n;
        c.total += n;
    }
    const json_t *u = json_object_get(st, "update");
    c.update_state = str(u, "state", NULL);
    if (c.update_state) {
        const char *s = c.update_state;
        c.updating = !strcmp(s, "INITIALIZED") || !strcmp(s, "ROLLING_FORWARD") || !strcmp(s, "PAUSED") ||
                     !strcmp(s, "ROLLING_BACKWARD");
        c.update_failed = !strcmp(s, "FAILED") || !strcmp(s, "ROLLED_BACK") || !strcmp(s, "ABORTED");
        c.updated = num(st, "update", "instancesDone");
    }
    json_int_t og = num(pj, "status", "observedGeneration"), g = num(pj, "metadata", "generation");
    c.observed = json_object_get(st, "observedGeneration") && og >= g;
    return c;
}

/* The workload's status from its Peloton Job (pj may be NULL: not there
 * yet); problem, when set, says why there is no Peloton Job. New reference. */
static json_t *status_of(enum wl_kind k, const json_t *obj, const json_t *pj, const char *problem) {
    const json_t *old = json_object_get(obj, "status");
    json_t *st = json_object();
    struct counts c = pj ? counts_of(pj) : (struct counts){0};
    json_int_t gen = num(obj, "metadata", "generation");
    /* the spec is observed once the Peloton Job carries it and the job manager saw that */
    json_int_t og = pj && c.observed ? gen : num(obj, "status", "observedGeneration");
    if (k != WL_JOB && og) json_object_set_new(st, "observedGeneration", json_integer(og));
    json_int_t want = json_is_integer(json_object_get(json_object_get(obj, "spec"), "replicas"))
                          ? num(obj, "spec", "replicas")
                          : 1;
    json_int_t replicas = c.active, updated = c.updating ? c.updated : c.active;
    if (updated > replicas) updated = replicas;
    char msg[256];
    if (k == WL_DEPLOY || k == WL_RS || k == WL_STS) {
        json_object_set_new(st, "replicas", json_integer(replicas));
        json_object_set_new(st, "readyReplicas", json_integer(c.running));
        json_object_set_new(st, "availableReplicas", json_integer(c.running));
        if (k != WL_RS) json_object_set_new(st, "updatedReplicas", json_integer(updated));
        if (k == WL_DEPLOY) json_object_set_new(st, "unavailableReplicas",
                                                json_integer(want > c.running ? want - c.running : 0));
        if (k == WL_STS) {
            char rev[300];
            snprintf(rev, sizeof rev, "%s-%" JSON_INTEGER_FORMAT, str(obj, "metadata", "name"), og);
            json_object_set_new(st, "currentReplicas", json_integer(c.updating ? replicas - updated : replicas));
            json_object_set_new(st, "updateRevision", json_string(rev));
            if (c.updating) snprintf(rev, sizeof rev, "%s-previous", str(obj, "metadata", "name"));
            json_object_set_new(st, "currentRevision", json_string(rev));
        }
    } else if (k == WL_DS) {
        json_int_t desired = pj ? c.active : 0;
        json_object_set_new(st, "desiredNumberScheduled", json_integer(desired));
        json_object_set_new(st, "currentNumberScheduled", json_integer(c.active));
        json_object_set_new(st, "numberReady", json_integer(c.running));
        json_object_set_new(st, "numberAvailable", json_integer(c.running));
        json_object_set_new(st, "updatedNumberScheduled", json_integer(updated));
        json_object_set_new(st, "numberMisscheduled", json_integer(0));
        if (desired > c.running) json_object_set_new(st, "numberUnavailable", json_integer(desired - c.running));
    } else { /* WL_JOB */
        if (c.active) json_object_set_new(st, "active", json_integer(c.active));
        if (c.succeeded) json_object_set_new(st, "succeeded", json_integer(c.succeeded));
        if (c.failed) json_object_set_new(st, "failed", json_integer(c.failed));
        json_object_set_new(st, "ready", json_integer(c.running));
        char now[32];
        now_rfc3339(now);
        const char *start = str(old, "startTime", NULL);
        if (pj) json_object_set_new(st, "startTime", json_string(start ? start : now));
        const char *state = str(pj, "status", "state");
        bool done = state && !strcmp(state, "SUCCEEDED"), failed = state && !strcmp(state, "FAILED");
        json_t *conds = json_array();
        if (done) {
            const char *ct = str(old, "completionTime", NULL);
            json_object_set_new(st, "completionTime", json_string(ct ? ct : now));
            json_array_append_new(conds, condition(old, "SuccessCriteriaMet", true, "CompletionsReached",
                                                   "Reached expected number of succeeded pods", false));
            json_array_append_new(conds, condition(old, "Complete", true, "CompletionsReached",
                                                   "Reached expected number of succeeded pods", false));
        } else if (failed) {
            json_array_append_new(conds, condition(old, "FailureTarget", true, "BackoffLimitExceeded",
                                                   "Job has reached the specified backoff limit", false));
            json_array_append_new(conds, condition(old, "Failed", true, "BackoffLimitExceeded",
                                                   "Job has reached the specified backoff limit", false));
        } else if (problem) {
            json_array_append_new(conds, condition(old, "Failed", false, "NoPelotonJob", problem, false));
        }
        json_object_set_new(st, "conditions", conds);
        return st;
    }
    json_t *conds = json_array();
    if (k == WL_DEPLOY) {
        const json_t *ru = json_object_get(json_object_get(json_object_get(obj, "spec"), "strategy"), "rollingUpdate");
        json_int_t mu = int_or_percent(json_object_get(ru, "maxUnavailable"), want, false, want / 4);
        bool avail = c.running >= want - mu;
        json_array_append_new(conds, condition(old, "Available", avail,
                                               avail ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
                                               avail ? "Deployment has minimum availability."
                                                     : "Deployment does not have minimum availability.",
                                               true));
    }
    if (problem) {
        json_array_append_new(conds, condition(old, k == WL_DEPLOY ? "Progressing" : "ReplicaFailure", k != WL_DEPLOY,
                                               "NoPelotonJob", problem, true));
    } else if (k == WL_DEPLOY && c.update_failed) {
        snprintf(msg, sizeof msg, "the Peloton Job's rolling update ended %s (kubectl describe pj %s)", c.update_state,
                 str(obj, "metadata", "name"));
        json_array_append_new(conds, condition(old, "Progressing", false, "ProgressDeadlineExceeded", msg, true));
    } else if (k == WL_DEPLOY) {
        bool done = !c.updating && c.running >= want;
        snprintf(msg, sizeof msg, "Peloton Job \"%s\" %s.", str(obj, "metadata", "name"),
                 done ? "has successfully progressed" : "is progressing");
        json_array_append_new(conds, condition(old, "Progressing", true,
                                               done ? "NewReplicaSetAvailable" : "ReplicaSetUpdated", msg, true));
    }
    json_object_set_new(st, "conditions", conds);
    return st;
}

/* Equal but for the conditions' timestamps (they are kept from old anyway). */
bool wl_status_same(const json_t *old, const json_t *st) { return subset(st, old) && subset(old, st); }

/* The merge patch that makes the stored status st: what st leaves out of
 * old is removed (null), or a count that fell to 0 would stay. Takes st. */
json_t *wl_status_patch(const json_t *old, json_t *st) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)old, k, v) if (!json_object_get(st, k)) json_object_set_new(st, k, json_null());
    return json_pack("{s:o}", "status", st);
}

/* ---- reconciling ---- */

void wl_path_of(enum wl_kind k, const char *ns, const char *name, const char *sub, char *out, size_t len) {
    const char *coll = wl_kinds[k].collection; /* "/apis/G/V/plural" */
    const char *plural = strrchr(coll, '/');
    snprintf(out, len, "%.*s/namespaces/%s%s/%s%s%s", (int)(plural - coll), coll, ns, plural, name, sub ? "/" : "",
             sub ? sub : "");
}

bool wl_selects(const json_t *obj, const json_t *labels) {
    const json_t *sel = json_object_get(json_object_get(json_object_get(obj, "spec"), "selector"), "matchLabels");
    return json_is_object(sel) && json_object_size(sel) && subset(sel, labels);
}

/* Whether workload obj of kind k may adopt pj, the Peloton Job of its name,
 * which nobody controls (a workload deleted with --cascade=orphan left it):
 * of the kind's type, its pods' labels matched by obj's selector, as
 * kube-controller-manager adopts an orphan its selector matches. Not a
 * batch Job: on a cluster its default selector names its own uid, so a new
 * Job never takes an old one's pods (nor a finished run's result). */
static bool adoptable(enum wl_kind k, const json_t *obj, const json_t *pj) {
    const char *type = str(pj, "spec", "type");
    const json_t *tpl = json_object_get(json_object_get(pj, "spec"), "template");
    return k != WL_JOB && !wl_controller_kind(pj, NULL)[0] && type && !strcmp(type, wl_kinds[k].pj_type) &&
           wl_selects(obj, json_object_get(json_object_get(tpl, "metadata"), "labels"));
}

/* ref (borrowed) added to a copy of obj's ownerReferences (new reference). */
json_t *wl_refs_with(const json_t *obj, const json_t *ref) {
    json_t *refs = json_deep_copy(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"));
    if (!json_is_array(refs)) {
        json_decref(refs);
        refs = json_array();
    }
    json_array_append(refs, (json_t *)ref);
    return refs;
}

static void reconcile(struct workloads *w, enum wl_kind k, const json_t *obj) {
    const json_t *md = json_object_get(obj, "metadata");
    const char *ns = str(md, "namespace", NULL), *name = str(md, "name", NULL), *uid = str(md, "uid", NULL);
    if (!ns || !name || !uid || json_object_get(md, "deletionTimestamp")) return;
    if (k == WL_RS && wl_rs_is_record(obj)) return; /* a Deployment's revision record: wl_mirror_rs */
    json_t *pj = kc_informer_get(w->pjs, ns, name);
    const char *pool = pool_of(w, obj);
    char problem[300] = "";
    char path[512];
    bool adopt = pj && !owned_by(pj, uid) && pool && adoptable(k, obj, pj);
    if (pj && !owned_by(pj, uid) && !adopt) {
        snprintf(problem, sizeof problem, "Peloton Job %s/%s exists and belongs to another owner; rename the %s",
                 ns, name, wl_kinds[k].kind);
        pj = NULL;
    } else if (!pool) {
        snprintf(problem, sizeof problem, "no resource pool: label the %s or its pod template with %s, annotate "
                 "namespace %s with it, or start pelotond with --default-pool", wl_kinds[k].kind, PL_POOL, ns);
    } else {
        json_t *spec = pj_spec(k, obj, pool);
        json_t *ref = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", wl_kinds[k].api_version, "kind",
                                wl_kinds[k].kind, "name", name, "uid", uid, "controller", 1, "blockOwnerDeletion", 1);
        if (!pj) {
            json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s, s:O*, s:[O]}, s:o}", "apiVersion",
                                     "peloton.io/v1alpha1", "kind", "Job", "metadata", "name", name, "namespace", ns,
                                     "labels", json_object_get(md, "labels"), "ownerReferences", ref, "spec", spec);
            if (body && generated_names(k))
                json_object_set_new(json_object_get(body, "metadata"), "annotations",
                                    json_pack("{s:s}", PJ_A_POD_NAMES, "generated"));
            snprintf(path, sizeof path, PJ_PATH "/namespaces/%s/jobs", ns);
            if (body) wl_send(w, "POST", path, body, NULL);
            wl_log("info", "msg=\"Peloton Job created\" kind=%s ns=%s name=%s pool=%s", wl_kinds[k].kind, ns, name, pool);
        } else if (adopt || !subset(spec, json_object_get(pj, "spec")) ||
                   !json_equal(json_object_get(spec, "template"), json_object_get(json_object_get(pj, "spec"), "template")) ||
                   !names_as_wanted(k, pj)) {
            /* the template whole: a member taken out of it is a change too */
            json_t *body = json_deep_copy(pj);
            json_t *bmd = json_object_get(body, "metadata");
            json_t *ann = json_object_get(bmd, "annotations");
            if (!json_is_object(ann)) json_object_set_new(bmd, "annotations", ann = json_object());
            if (generated_names(k)) json_object_set_new(ann, PJ_A_POD_NAMES, json_string("generated"));
            else json_object_del(ann, PJ_A_POD_NAMES);
            json_t *merged = json_deep_copy(json_object_get(pj, "spec"));
            json_object_update(merged, spec); /* defaults the API server added to the rest stay */
            json_object_set_new(body, "spec", merged);
            json_object_del(body, "status");
            if (adopt) { /* its pods carry on under this workload; a template that differs rolls them */
                json_object_set_new(json_object_get(body, "metadata"), "ownerReferences", wl_refs_with(pj, ref));
                wl_log("info", "msg=\"orphaned Peloton Job adopted\" kind=%s ns=%s name=%s", wl_kinds[k].kind, ns,
                       name);
            }
            snprintf(path, sizeof path, PJ_PATH "/namespaces/%s/jobs/%s", ns, name);
            wl_send(w, "PUT", path, body, NULL);
            json_decref(spec);
            json_decref(ref);
            return; /* the status follows the Peloton Job's next event */
        } else {
            json_decref(spec);
        }
        json_decref(ref);
    }
    json_t *st = status_of(k, obj, pj, problem[0] ? problem : NULL);
    if (st && k == WL_DEPLOY && !problem[0]) wl_mirror_rs(w, obj, st);
    if (st && (k == WL_STS || k == WL_DS) && !problem[0]) wl_mirror_cr(w, k, obj);
    if (!st || wl_status_same(json_object_get(obj, "status"), st)) {
        json_decref(st);
        return;
    }
    wl_path_of(k, ns, name, "status", path, sizeof path);
    wl_send(w, "PATCH", path, wl_status_patch(json_object_get(obj, "status"), st), "application/merge-patch+json");
}

/* The workload a Peloton Job belongs to, and its kind; NULL when none of ours. */
static const json_t *owner_of(struct workloads *w, const json_t *pj, enum wl_kind *k) {
    size_t i;
    json_t *r;
    const char *ns = str(pj, "metadata", "namespace");
    json_array_foreach(json_object_get(json_object_get(pj, "metadata"), "ownerReferences"), i, r) {
        if (!json_is_true(json_object_get(r, "controller"))) continue;
        for (int j = 0; j < WL_NKINDS; j++) {
            const char *av = str(r, "apiVersion", NULL), *kind = str(r, "kind", NULL);
            if (!av || !kind || strcmp(av, wl_kinds[j].api_version) || strcmp(kind, wl_kinds[j].kind)) continue;
            *k = (enum wl_kind)j;
            const json_t *obj = kc_informer_get(w->inf[j], ns, str(r, "name", NULL));
            return obj && !strcmp(str(obj, "metadata", "uid") ? str(obj, "metadata", "uid") : "",
                                  str(r, "uid", NULL) ? str(r, "uid", NULL) : "-")
                       ? obj
                       : (const json_t *)pj; /* owned by a workload that is gone: pj itself */
        }
    }
    return NULL;
}

/* ---- deleting what a deleted workload owned ----
 * kubectl delete --cascade=orphan: the API server drops the dependents'
 * references to the owner, then deletes the owner; but those writes reach
 * this controller in separate watch streams (the Peloton Jobs', the
 * ReplicaSets', the owner's), so when the owner's deletion is seen the
 * caches may still show a dependent as owned. A dependent is therefore read
 * again before it is deleted (a read made after the owner's deletion was
 * seen shows the references as the API server left them) and deleted only
 * when it still names the owner as its controller (with its uid as the
 * precondition: not a namesake made since). No resourceVersion
 * precondition: the owner is gone by then, so nothing orphans the dependent
 * any more, and a status write meanwhile must not leave it behind. */

struct owned_check {
    struct workloads *w;
    char uid[128];  /* the owner's */
    char path[512]; /* the dependent's */
};

static void on_owned_read(void *ud, const struct kc_response *r) {
    struct owned_check *c = ud;
    json_t *obj = r->status == 200 ? kc_response_body(r) : NULL;
    const json_t *md = json_object_get(obj, "metadata");
    if (obj && owned_by(obj, c->uid) && !json_object_get(md, "deletionTimestamp")) {
        wl_log("info", "msg=\"owner gone: deleting what it owned\" path=%s", c->path);
        json_t *body = json_pack("{s:s, s:s, s:s, s:{s:s?}}", "kind", "DeleteOptions", "apiVersion", "v1",
                                 "propagationPolicy", "Background", "preconditions", "uid", str(md, "uid", NULL));
        if (body) wl_send(c->w, "DELETE", c->path, body, NULL);
    } else if (obj && !json_object_get(md, "deletionTimestamp")) {
        wl_log("info", "msg=\"owner gone, dependent orphaned: kept\" path=%s", c->path);
    }
    free(c);
}

void wl_delete_if_owned(struct workloads *w, const char *path, const char *owner_uid) {
    struct owned_check *c = calloc(1, sizeof *c);
    if (!c || !owner_uid) {
        free(c);
        return;
    }
    c->w = w;
    snprintf(c->uid, sizeof c->uid, "%s", owner_uid);
    snprintf(c->path, sizeof c->path, "%s", path);
    if (kclient_request(w->kc, "GET", path, NULL, NULL, on_owned_read, c)) free(c); /* not sent: no callback */
}

/* pj's controller (uid) is gone: pj goes, unless it was orphaned meanwhile. */
static void delete_pj(struct workloads *w, const json_t *pj, const char *owner_uid) {
    char path[512];
    snprintf(path, sizeof path, PJ_PATH "/namespaces/%s/jobs/%s", str(pj, "metadata", "namespace"),
             str(pj, "metadata", "name"));
    wl_delete_if_owned(w, path, owner_uid);
}

/* The uid of obj's controller owner, or NULL. */
static const char *controller_uid(const json_t *obj) {
    const char *uid = NULL;
    wl_controller_kind(obj, &uid);
    return uid;
}

/* A Peloton Job changed: its owner's status follows; an orphan of ours goes. */
static void pj_touch(struct workloads *w, const json_t *pj) {
    enum wl_kind k;
    const json_t *owner = owner_of(w, pj, &k);
    if (!owner) return;
    if (owner == pj) {
        if (kc_informer_synced(w->inf[k]) && !json_object_get(json_object_get(pj, "metadata"), "deletionTimestamp"))
            delete_pj(w, pj, controller_uid(pj));
        return;
    }
    reconcile(w, k, owner);
}

static void on_wl_add(void *ud, json_t *obj) {
    struct wl_sub *s = ud;
    reconcile(s->w, s->k, obj);
}
static void on_wl_update(void *ud, json_t *old, json_t *obj) {
    (void)old;
    on_wl_add(ud, obj);
}
static void on_wl_delete(void *ud, json_t *obj) {
    struct wl_sub *s = ud;
    json_t *pj = kc_informer_get(s->w->pjs, str(obj, "metadata", "namespace"), str(obj, "metadata", "name"));
    if (pj && owned_by(pj, str(obj, "metadata", "uid"))) delete_pj(s->w, pj, str(obj, "metadata", "uid"));
    if (str(obj, "metadata", "uid")) wl_delete_revisions(s->w, s->k, str(obj, "metadata", "uid"));
}
static void on_synced(void *ud) { (void)ud; }
/* ControllerRevisions are only read (the cache): their events need nothing */
static void on_none(void *ud, json_t *obj) {
    (void)ud;
    (void)obj;
}
static void on_none2(void *ud, json_t *old, json_t *obj) {
    (void)ud;
    (void)old;
    (void)obj;
}

static void on_pj_add(void *ud, json_t *obj) { pj_touch(ud, obj); }
static void on_pj_update(void *ud, json_t *old, json_t *obj) {
    (void)old;
    pj_touch(ud, obj);
}
static void on_pj_delete(void *ud, json_t *obj) {
    struct workloads *w = ud;
    enum wl_kind k;
    const json_t *owner = owner_of(w, obj, &k);
    if (owner && owner != obj) reconcile(w, k, owner); /* deleted by hand: made again */
}

struct each_ctx {
    struct workloads *w;
    enum wl_kind k;
    const char *ns; /* NULL: every namespace */
};
static int reconcile_one(void *ud, json_t *obj) {
    struct each_ctx *c = ud;
    if (!c->ns || !strcmp(c->ns, str(obj, "metadata", "namespace") ? str(obj, "metadata", "namespace") : ""))
        reconcile(c->w, c->k, obj);
    return 0;
}
static void reconcile_all(struct workloads *w, const char *ns) {
    for (int k = 0; k < WL_NKINDS; k++) {
        struct each_ctx c = {w, (enum wl_kind)k, ns};
        if (kc_informer_synced(w->inf[k])) kc_informer_foreach(w->inf[k], reconcile_one, &c);
    }
}
static int pj_each(void *ud, json_t *pj) {
    pj_touch(ud, pj);
    return 0;
}

/* A namespace's pool annotation may have changed: its workloads follow. */
static void on_ns_add(void *ud, json_t *obj) { reconcile_all(ud, str(obj, "metadata", "name")); }
static void on_ns_update(void *ud, json_t *old, json_t *obj) {
    (void)old;
    on_ns_add(ud, obj);
}
static void on_ns_delete(void *ud, json_t *obj) {
    (void)ud;
    (void)obj;
}

static void on_resync(uv_timer_t *t) {
    struct workloads *w = t->data;
    reconcile_all(w, NULL);
    if (kc_informer_synced(w->pjs)) kc_informer_foreach(w->pjs, pj_each, w);
}

struct workloads *workloads_start(uv_loop_t *loop, struct kclient *kc, const struct workloads_options *o, char *err,
                                  size_t errlen) {
    struct workloads *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "workloads: out of memory");
        return NULL;
    }
    w->loop = loop;
    w->kc = kc;
    if (o) w->o = *o;
    if (!w->o.resync_ms) w->o.resync_ms = 10000;
    static const struct kc_informer_handlers wh = {on_wl_add, on_wl_update, on_wl_delete, on_synced};
    static const struct kc_informer_handlers ph = {on_pj_add, on_pj_update, on_pj_delete, on_synced};
    static const struct kc_informer_handlers nh = {on_ns_add, on_ns_update, on_ns_delete, on_synced};
    bool bad = false;
    w->nss = kc_informer_new(kc, "/api/v1/namespaces", NULL, &nh, w);
    w->pjs = kc_informer_new(kc, PJ_PATH "/jobs", NULL, &ph, w);
    static const struct kc_informer_handlers none = {on_none, on_none2, on_none, on_synced};
    w->crs = kc_informer_new(kc, "/apis/apps/v1/controllerrevisions", NULL, &none, w);
    for (int k = 0; k < WL_NKINDS; k++) {
        w->subs[k] = (struct wl_sub){w, (enum wl_kind)k};
        w->inf[k] = kc_informer_new(kc, wl_kinds[k].collection, NULL, &wh, &w->subs[k]);
        bad |= !w->inf[k];
    }
    bad |= !w->nss || !w->pjs || !w->crs;
    if (!bad) bad |= kc_informer_start(w->nss) || kc_informer_start(w->pjs) || kc_informer_start(w->crs);
    for (int k = 0; k < WL_NKINDS && !bad; k++) bad |= kc_informer_start(w->inf[k]) != 0;
    if (!bad) bad |= !(w->cron = wl_cron_start(loop, kc));
    if (bad) {
        snprintf(err, errlen, "workloads: cannot start the informers");
        kc_informer_free(w->nss);
        kc_informer_free(w->pjs);
        kc_informer_free(w->crs);
        for (int k = 0; k < WL_NKINDS; k++) kc_informer_free(w->inf[k]);
        free(w);
        return NULL;
    }
    uv_timer_init(loop, &w->resync);
    w->resync.data = w;
    uv_timer_start(&w->resync, on_resync, w->o.resync_ms, w->o.resync_ms);
    wl_log("info", "msg=started default_pool=%s", w->o.default_pool ? w->o.default_pool : "");
    return w;
}

static void closed(uv_handle_t *h) { free(h->data); }

void workloads_stop(struct workloads *w) {
    if (!w) return;
    kc_informer_free(w->nss);
    kc_informer_free(w->pjs);
    kc_informer_free(w->crs);
    for (int k = 0; k < WL_NKINDS; k++) kc_informer_free(w->inf[k]);
    wl_cron_stop(w->cron);
    uv_timer_stop(&w->resync);
    uv_close((uv_handle_t *)&w->resync, closed);
}
