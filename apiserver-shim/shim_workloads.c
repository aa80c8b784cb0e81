/* The workload kinds: apps/v1 Deployments, StatefulSets, DaemonSets and
 * ReplicaSets, and batch/v1 Jobs (docs/workloads.md). The API server stores
 * them as kube-apiserver does, with its defaults, refuses with 422 what the
 * translating controller (src/ctl/workloads.c) cannot honour, prints their
 * Table rows as kube-apiserver's printers do, and serves the scale
 * subresource (autoscaling/v1 Scale) that `kubectl scale` writes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"
#include "ktime.h"
#include "shim.h"
#include "shim_proto.h"

#define WL_MAX_REPLICAS (1 << 24) /* a Peloton Job's instanceCount bound (docs/crds.md) */

bool shim_is_workload(const struct shim_resource *r) {
    return !r->custom && (!strcmp(r->group, "apps") || !strcmp(r->group, "batch"));
}

static bool is(const struct shim_resource *r, const char *plural) { return !strcmp(r->plural, plural); }

bool shim_workload_scales(const struct shim_resource *r) {
    return shim_is_workload(r) && (is(r, "deployments") || is(r, "statefulsets") || is(r, "replicasets"));
}

/* ---- defaults and what is refused ---- */

struct wl_check {
    const struct shim_resource *r;
    const char *name;
    json_t *causes;
    const char *prefix; /* before every field named: "spec.jobTemplate." inside a CronJob, else "" */
    char first[700];    /* the first cause, for the Status message */
};

static void cause(struct wl_check *c, const char *reason, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cause(struct wl_check *c, const char *reason, const char *field, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char f[256];
    snprintf(f, sizeof f, "%s%s", c->prefix ? c->prefix : "", field);
    if (!c->first[0]) snprintf(c->first, sizeof c->first, "%s: %s", f, msg);
    json_array_append_new(c->causes, json_pack("{s:s, s:s, s:s}", "reason", reason, "message", msg, "field", f));
}

static json_t *obj_at(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (json_is_object(v)) return v;
    if (v && !json_is_null(v)) return NULL; /* the schema refuses it first */
    v = json_object();
    json_object_set_new(o, key, v);
    return v;
}

static void set_default(json_t *o, const char *key, json_t *v) {
    if (o && !json_object_get(o, key)) json_object_set(o, key, v);
    json_decref(v);
}

static void unsupported(struct wl_check *c, const char *field, const char *why) {
    cause(c, "FieldValueNotSupported", field, "Unsupported value: %s", why);
}

/* The selector's matchLabels must all be on the template (matchExpressions
 * are not translated: refused). */
static void check_selector(struct wl_check *c, json_t *spec) {
    json_t *sel = json_object_get(spec, "selector");
    json_t *tl = json_object_get(json_object_get(json_object_get(spec, "template"), "metadata"), "labels");
    if (!json_is_object(sel) || !json_object_size(json_object_get(sel, "matchLabels"))) {
        if (json_array_size(json_object_get(sel, "matchExpressions")))
            unsupported(c, "spec.selector.matchExpressions", "the workload's Peloton Job selects its pods by "
                        "matchLabels; use matchLabels");
        else cause(c, "FieldValueRequired", "spec.selector", "Required value");
        return;
    }
    if (json_array_size(json_object_get(sel, "matchExpressions")))
        unsupported(c, "spec.selector.matchExpressions", "the workload's Peloton Job selects its pods by matchLabels; "
                    "use matchLabels");
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(sel, "matchLabels"), k, v) {
        const char *tv = json_string_value(json_object_get(tl, k));
        if (!tv || !json_is_string(v) || strcmp(tv, json_string_value(v))) {
            cause(c, "FieldValueInvalid", "spec.template.metadata.labels",
                  "Invalid value: `selector` does not match template `labels`");
            return;
        }
    }
}

static void check_template(struct wl_check *c, json_t *tspec, bool batch) {
    if (!json_is_object(tspec) || !json_array_size(json_object_get(tspec, "containers"))) {
        cause(c, "FieldValueRequired", "spec.template.spec.containers", "Required value");
        return;
    }
    const char *rp = json_string_value(json_object_get(tspec, "restartPolicy"));
    if (batch) {
        if (!rp || (strcmp(rp, "Never") && strcmp(rp, "OnFailure")))
            cause(c, "FieldValueNotSupported", "spec.template.spec.restartPolicy",
                  "Unsupported value: \"%s\": supported values: \"OnFailure\", \"Never\"", rp ? rp : "");
    } else {
        set_default(tspec, "restartPolicy", json_string("Always"));
        rp = json_string_value(json_object_get(tspec, "restartPolicy"));
        if (rp && strcmp(rp, "Always"))
            cause(c, "FieldValueNotSupported", "spec.template.spec.restartPolicy",
                  "Unsupported value: \"%s\": supported values: \"Always\"", rp);
    }
    set_default(tspec, "terminationGracePeriodSeconds", json_integer(30));
    set_default(tspec, "dnsPolicy", json_string("ClusterFirst"));
    set_default(tspec, "schedulerName", json_string("default-scheduler"));
    set_default(tspec, "securityContext", json_object());
}

static void check_replicas(struct wl_check *c, json_t *spec, const char *field) {
    set_default(spec, field, json_integer(1));
    json_t *v = json_object_get(spec, field);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > WL_MAX_REPLICAS)
        cause(c, "FieldValueInvalid", !strcmp(field, "replicas") ? "spec.replicas" : "spec.parallelism",
              "Invalid value: must be an integer in [0, %d]", WL_MAX_REPLICAS);
}

static void check_deployment(struct wl_check *c, json_t *spec) {
    check_replicas(c, spec, "replicas");
    set_default(spec, "revisionHistoryLimit", json_integer(10));
    set_default(spec, "progressDeadlineSeconds", json_integer(600));
    json_t *st = obj_at(spec, "strategy");
    set_default(st, "type", json_string("RollingUpdate"));
    const char *t = json_string_value(json_object_get(st, "type"));
    if (t && !strcmp(t, "RollingUpdate"))
        set_default(obj_at(st, "rollingUpdate"), "maxUnavailable", json_string("25%")),
            set_default(obj_at(st, "rollingUpdate"), "maxSurge", json_string("25%"));
    else if (t && strcmp(t, "Recreate"))
        cause(c, "FieldValueNotSupported", "spec.strategy.type",
              "Unsupported value: \"%s\": supported values: \"Recreate\", \"RollingUpdate\"", t);
}

static void check_statefulset(struct wl_check *c, json_t *spec) {
    check_replicas(c, spec, "replicas");
    set_default(spec, "revisionHistoryLimit", json_integer(10));
    set_default(spec, "podManagementPolicy", json_string("OrderedReady"));
    json_t *st = obj_at(spec, "updateStrategy");
    set_default(st, "type", json_string("RollingUpdate"));
    const char *t = json_string_value(json_object_get(st, "type"));
    if (t && !strcmp(t, "RollingUpdate")) {
        json_t *ru = obj_at(st, "rollingUpdate");
        set_default(ru, "partition", json_integer(0));
        if (json_integer_value(json_object_get(ru, "partition")) != 0)
            unsupported(c, "spec.updateStrategy.rollingUpdate.partition",
                        "a Peloton rolling update moves every instance; only 0 is supported");
    } else if (t) {
        unsupported(c, "spec.updateStrategy.type", "only \"RollingUpdate\" is supported (Peloton updates every "
                    "instance; OnDelete has no equivalent)");
    }
    if (json_array_size(json_object_get(spec, "volumeClaimTemplates")))
        unsupported(c, "spec.volumeClaimTemplates", "PersistentVolumeClaims are not served; use volumes in "
                    "the pod template");
    json_t *ord = json_object_get(spec, "ordinals");
    if (json_integer_value(json_object_get(ord, "start")) != 0)
        unsupported(c, "spec.ordinals.start", "instances are numbered from 0");
}

static void check_daemonset(struct wl_check *c, json_t *spec) {
    set_default(spec, "revisionHistoryLimit", json_integer(10));
    json_t *st = obj_at(spec, "updateStrategy");
    set_default(st, "type", json_string("RollingUpdate"));
    const char *t = json_string_value(json_object_get(st, "type"));
    if (t && !strcmp(t, "RollingUpdate"))
        set_default(obj_at(st, "rollingUpdate"), "maxUnavailable", json_integer(1)),
            set_default(obj_at(st, "rollingUpdate"), "maxSurge", json_integer(0));
    else if (t)
        unsupported(c, "spec.updateStrategy.type", "only \"RollingUpdate\" is supported (OnDelete has no "
                    "equivalent in Peloton)");
}

/* A batch Job without a selector gets one on its own name (kube-apiserver
 * uses its uid, which is not known before the store writes it). */
static void check_job(struct wl_check *c, json_t *spec, bool gen_selector) {
    check_replicas(c, spec, "parallelism");
    json_t *comp = json_object_get(spec, "completions");
    if (comp && !json_is_null(comp) &&
        (!json_is_integer(comp) || json_integer_value(comp) < 0 || json_integer_value(comp) > WL_MAX_REPLICAS))
        cause(c, "FieldValueInvalid", "spec.completions", "Invalid value: must be an integer in [0, %d]",
              WL_MAX_REPLICAS);
    set_default(spec, "backoffLimit", json_integer(6));
    set_default(spec, "completionMode", json_string("NonIndexed"));
    set_default(spec, "suspend", json_false());
    const char *cm = json_string_value(json_object_get(spec, "completionMode"));
    if (cm && strcmp(cm, "NonIndexed")) unsupported(c, "spec.completionMode", "only \"NonIndexed\" is supported");
    if (json_is_true(json_object_get(spec, "suspend"))) unsupported(c, "spec.suspend", "suspended Jobs are not supported");
    static const char *const refused[] = {"activeDeadlineSeconds", "ttlSecondsAfterFinished", "podFailurePolicy",
                                          "backoffLimitPerIndex", "maxFailedIndexes", "successPolicy",
                                          "podReplacementPolicy", "managedBy"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        json_t *v = json_object_get(spec, refused[i]);
        if (v && !json_is_null(v)) {
            char f[64];
            snprintf(f, sizeof f, "spec.%s", refused[i]);
            unsupported(c, f, "not translated to a Peloton Job (docs/workloads.md)");
        }
    }
    if (gen_selector && !json_is_true(json_object_get(spec, "manualSelector")) && !json_object_get(spec, "selector")) {
        json_t *tmd = obj_at(obj_at(spec, "template"), "metadata");
        json_t *tl = obj_at(tmd, "labels");
        if (tl) {
            set_default(tl, "batch.kubernetes.io/job-name", json_string(c->name));
            set_default(tl, "job-name", json_string(c->name));
        }
        json_object_set_new(spec, "selector",
                            json_pack("{s:{s:s}}", "matchLabels", "batch.kubernetes.io/job-name", c->name));
    }
}

/* A CronJob: its schedule and time zone, and its jobTemplate as a Job's
 * (whose selector is made when each Job is). */
static void check_cronjob(struct wl_check *c, json_t *spec) {
    const char *sched = json_string_value(json_object_get(spec, "schedule"));
    struct cron_sched cs;
    char why[200];
    if (!sched) cause(c, "FieldValueRequired", "spec.schedule", "Required value");
    else if (cron_parse(sched, &cs, why, sizeof why))
        cause(c, "FieldValueInvalid", "spec.schedule", "Invalid value: \"%.100s\": %s", sched, why);
    const char *tz = json_string_value(json_object_get(spec, "timeZone"));
    if (tz && strcmp(tz, "UTC") && strcmp(tz, "Etc/UTC"))
        unsupported(c, "spec.timeZone", "only UTC schedules are run (leave timeZone unset or \"UTC\")");
    set_default(spec, "concurrencyPolicy", json_string("Allow"));
    set_default(spec, "suspend", json_false());
    set_default(spec, "successfulJobsHistoryLimit", json_integer(3));
    set_default(spec, "failedJobsHistoryLimit", json_integer(1));
    const char *cp = json_string_value(json_object_get(spec, "concurrencyPolicy"));
    if (cp && strcmp(cp, "Allow") && strcmp(cp, "Forbid") && strcmp(cp, "Replace"))
        cause(c, "FieldValueNotSupported", "spec.concurrencyPolicy",
              "Unsupported value: \"%s\": supported values: \"Allow\", \"Forbid\", \"Replace\"", cp);
    json_t *jt = json_object_get(json_object_get(spec, "jobTemplate"), "spec");
    if (!json_is_object(jt)) {
        cause(c, "FieldValueRequired", "spec.jobTemplate.spec", "Required value");
        return;
    }
    c->prefix = "spec.jobTemplate.";
    check_job(c, jt, false);
    check_template(c, json_object_get(json_object_get(jt, "template"), "spec"), true);
    c->prefix = "";
}

int shim_workload_check(const struct shim_resource *r, json_t *obj, const char *name, char *msg, size_t msglen,
                        json_t **details) {
    if (!shim_is_workload(r) || is(r, "controllerrevisions")) return 0; /* a record: nothing to translate */
    struct wl_check c = {.r = r, .name = name, .causes = json_array()};
    if (!c.causes) return -ENOMEM;
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) {
        cause(&c, "FieldValueRequired", "spec", "Required value");
    } else if (is(r, "cronjobs")) {
        check_cronjob(&c, spec);
    } else {
        bool batch = is(r, "jobs");
        if (is(r, "deployments")) check_deployment(&c, spec);
        else if (is(r, "statefulsets")) check_statefulset(&c, spec);
        else if (is(r, "daemonsets")) check_daemonset(&c, spec);
        else if (is(r, "replicasets")) check_replicas(&c, spec, "replicas");
        else if (batch) check_job(&c, spec, true);
        check_selector(&c, spec);
        json_t *tpl = obj_at(spec, "template");
        check_template(&c, json_object_get(tpl, "spec"), batch);
    }
    if (!json_array_size(c.causes)) {
        json_decref(c.causes);
        return 0;
    }
    snprintf(msg, msglen, "%s.%s \"%s\" is invalid: %s", r->kind, r->group, name, c.first);
    *details = json_pack("{s:s, s:s, s:s, s:o}", "name", name, "group", r->group, "kind", r->kind, "causes", c.causes);
    return -EINVAL;
}

/* ---- Table rows, as kube-apiserver's printers ---- */

struct wl_col {
    const char *name, *type;
    int priority;
};

static const struct wl_col deploy_cols[] = {{"Name", "string", 0},       {"Ready", "string", 0},
                                            {"Up-to-date", "integer", 0}, {"Available", "integer", 0},
                                            {"Age", "string", 0},         {"Containers", "string", 1},
                                            {"Images", "string", 1},      {"Selector", "string", 1}};
static const struct wl_col sts_cols[] = {{"Name", "string", 0},       {"Ready", "string", 0}, {"Age", "string", 0},
                                         {"Containers", "string", 1}, {"Images", "string", 1}};
static const struct wl_col ds_cols[] = {{"Name", "string", 0},          {"Desired", "integer", 0},
                                        {"Current", "integer", 0},      {"Ready", "integer", 0},
                                        {"Up-to-date", "integer", 0},   {"Available", "integer", 0},
                                        {"Node Selector", "string", 0}, {"Age", "string", 0},
                                        {"Containers", "string", 1},    {"Images", "string", 1},
                                        {"Selector", "string", 1}};
static const struct wl_col rs_cols[] = {{"Name", "string", 0},       {"Desired", "integer", 0},
                                        {"Current", "integer", 0},   {"Ready", "integer", 0},
                                        {"Age", "string", 0},        {"Containers", "string", 1},
                                        {"Images", "string", 1},     {"Selector", "string", 1}};
static const struct wl_col job_cols[] = {{"Name", "string", 0},       {"Status", "string", 0},
                                         {"Completions", "string", 0}, {"Duration", "string", 0},
                                         {"Age", "string", 0},        {"Containers", "string", 1},
                                         {"Images", "string", 1},     {"Selector", "string", 1}};

static const struct wl_col cj_cols[] = {{"Name", "string", 0},          {"Schedule", "string", 0},
                                        {"Timezone", "string", 0},      {"Suspend", "boolean", 0},
                                        {"Active", "integer", 0},       {"Last Schedule", "string", 0},
                                        {"Age", "string", 0},           {"Containers", "string", 1},
                                        {"Images", "string", 1},        {"Selector", "string", 1}};

static const struct wl_col cr_cols[] = {{"Name", "string", 0}, {"Controller", "string", 0},
                                        {"Revision", "integer", 0}, {"Age", "string", 0}};

static json_t *cols_json(const struct wl_col *c, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", c[i].name, "type", c[i].type, "format",
                                           i ? "" : "name", "description", "", "priority", c[i].priority));
    return a;
}

json_t *shim_workload_columns(const struct shim_resource *r) {
#define WCOLS(a) cols_json(a, sizeof a / sizeof a[0])
    if (!shim_is_workload(r)) return NULL;
    if (is(r, "deployments")) return WCOLS(deploy_cols);
    if (is(r, "statefulsets")) return WCOLS(sts_cols);
    if (is(r, "daemonsets")) return WCOLS(ds_cols);
    if (is(r, "replicasets")) return WCOLS(rs_cols);
    if (is(r, "jobs")) return WCOLS(job_cols);
    if (is(r, "cronjobs")) return WCOLS(cj_cols);
    if (is(r, "controllerrevisions")) return WCOLS(cr_cols);
    return NULL;
#undef WCOLS
}

static json_int_t num(const json_t *o, const char *a, const char *b) {
    return json_integer_value(json_object_get(json_object_get(o, a), b));
}

/* "a=1,b=2" from a label map (keys in the map's order, which the store keeps). */
static void labels_text(const json_t *m, char *out, size_t len) {
    size_t off = 0;
    const char *k;
    json_t *v;
    out[0] = 0;
    json_object_foreach((json_t *)m, k, v) {
        int n = snprintf(out + off, len - off, "%s%s=%s", off ? "," : "", k, json_string_value(v) ? json_string_value(v) : "");
        if (n < 0 || (size_t)n >= len - off) break;
        off += (size_t)n;
    }
}

/* The template's containers' names and images, comma-separated (a
 * CronJob's: its jobTemplate's). */
static void containers_text(const json_t *o, char *names, char *images, size_t len) {
    json_t *spec = json_object_get(o, "spec");
    if (json_object_get(spec, "jobTemplate")) spec = json_object_get(json_object_get(spec, "jobTemplate"), "spec");
    json_t *cs = json_object_get(json_object_get(json_object_get(spec, "template"), "spec"), "containers");
    size_t i, no = 0, io = 0;
    json_t *c;
    names[0] = images[0] = 0;
    json_array_foreach(cs, i, c) {
        const char *n = json_string_value(json_object_get(c, "name")), *im = json_string_value(json_object_get(c, "image"));
        int a = snprintf(names + no, len - no, "%s%s", i ? "," : "", n ? n : "");
        int b = snprintf(images + io, len - io, "%s%s", i ? "," : "", im ? im : "");
        if (a < 0 || b < 0 || (size_t)a >= len - no || (size_t)b >= len - io) break;
        no += (size_t)a;
        io += (size_t)b;
    }
}

static bool cond_true(const json_t *o, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(o, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type")), *s = json_string_value(json_object_get(c, "status"));
        if (t && s && !strcmp(t, type) && !strcmp(s, "True")) return true;
    }
    return false;
}

static bool utc(const char *ts, time_t *out) {
    int64_t s;
    if (!ktime_parse(ts, &s)) return false;
    *out = (time_t)s;
    return true;
}

/* A Job's DURATION: start to completion, or to now while it runs. */
static void job_duration(const json_t *o, char *out, size_t len) {
    time_t a, b;
    out[0] = 0;
    if (!utc(json_string_value(json_object_get(json_object_get(o, "status"), "startTime")), &a)) return;
    if (!utc(json_string_value(json_object_get(json_object_get(o, "status"), "completionTime")), &b)) b = time(NULL);
    long d = (long)(b - a);
    if (d < 0) d = 0;
    if (d < 120) snprintf(out, len, "%lds", d);
    else if (d < 3600) snprintf(out, len, "%ldm%lds", d / 60, d % 60);
    else snprintf(out, len, "%ldh%ldm", d / 3600, (d / 60) % 60);
}

json_t *shim_workload_cells(const struct shim_resource *r, const json_t *o, const char *name, const char *age) {
    if (!shim_is_workload(r)) return NULL;
    char names[512], images[1024], sel[512], ready[48], comp[48], dur[32];
    containers_text(o, names, images, sizeof names < sizeof images ? sizeof names : sizeof images);
    labels_text(json_object_get(json_object_get(json_object_get(o, "spec"), "selector"), "matchLabels"), sel,
                sizeof sel);
    json_int_t want = num(o, "spec", "replicas");
    if (is(r, "deployments")) {
        snprintf(ready, sizeof ready, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT, num(o, "status", "readyReplicas"),
                 want);
        return json_pack("[ssIIssss]", name, ready, num(o, "status", "updatedReplicas"),
                         num(o, "status", "availableReplicas"), age, names, images, sel);
    }
    if (is(r, "statefulsets")) {
        snprintf(ready, sizeof ready, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT, num(o, "status", "readyReplicas"),
                 want);
        return json_pack("[sssss]", name, ready, age, names, images);
    }
    if (is(r, "daemonsets")) {
        char nsel[512];
        labels_text(json_object_get(json_object_get(json_object_get(json_object_get(o, "spec"), "template"), "spec"),
                                    "nodeSelector"),
                    nsel, sizeof nsel);
        return json_pack("[sIIIIIsssss]", name, num(o, "status", "desiredNumberScheduled"),
                         num(o, "status", "currentNumberScheduled"), num(o, "status", "numberReady"),
                         num(o, "status", "updatedNumberScheduled"), num(o, "status", "numberAvailable"),
                         nsel[0] ? nsel : "<none>", age, names, images, sel);
    }
    if (is(r, "replicasets"))
        return json_pack("[sIIIssss]", name, want, num(o, "status", "replicas"), num(o, "status", "readyReplicas"), age,
                         names, images, sel);
    if (is(r, "controllerrevisions")) {
        char ctl[320] = "<none>", lower[64];
        size_t i;
        json_t *ref;
        json_array_foreach(json_object_get(json_object_get(o, "metadata"), "ownerReferences"), i, ref) {
            const char *k = json_string_value(json_object_get(ref, "kind")), *n = json_string_value(json_object_get(ref, "name"));
            const char *av = json_string_value(json_object_get(ref, "apiVersion"));
            if (!json_is_true(json_object_get(ref, "controller")) || !k || !n) continue;
            size_t j = 0;
            for (; k[j] && j < sizeof lower - 1; j++) lower[j] = (char)(k[j] >= 'A' && k[j] <= 'Z' ? k[j] + 32 : k[j]);
            lower[j] = 0;
            const char *slash = av ? strchr(av, '/') : NULL;
            snprintf(ctl, sizeof ctl, "%s%s%.*s/%s", lower, slash ? "." : "", slash ? (int)(slash - av) : 0,
                     slash ? av : "", n);
        }
        return json_pack("[ssIs]", name, ctl, json_integer_value(json_object_get(o, "revision")), age);
    }
    if (is(r, "cronjobs")) {
        const json_t *spec = json_object_get(o, "spec");
        const char *tz = json_string_value(json_object_get(spec, "timeZone"));
        const char *sch = json_string_value(json_object_get(spec, "schedule"));
        time_t t;
        char ls[32] = "<none>";
        if (utc(json_string_value(json_object_get(json_object_get(o, "status"), "lastScheduleTime")), &t)) {
            long d = (long)(time(NULL) - t);
            if (d < 0) d = 0;
            if (d < 120) snprintf(ls, sizeof ls, "%lds", d);
            else if (d < 7200) snprintf(ls, sizeof ls, "%ldm", d / 60);
            else snprintf(ls, sizeof ls, "%ldh", d / 3600);
        }
        labels_text(json_object_get(json_object_get(json_object_get(json_object_get(spec, "jobTemplate"), "spec"),
                                                    "selector"),
                                    "matchLabels"),
                    sel, sizeof sel);
        return json_pack("[sssbIsssss]", name, sch ? sch : "", tz ? tz : "<none>",
                         json_is_true(json_object_get(spec, "suspend")),
                         (json_int_t)json_array_size(json_object_get(json_object_get(o, "status"), "active")), ls, age,
                         names, images, sel[0] ? sel : "<none>");
    }
    /* jobs */
    json_t *c = json_object_get(json_object_get(o, "spec"), "completions");
    json_int_t ok = num(o, "status", "succeeded");
    if (json_is_integer(c))
        snprintf(comp, sizeof comp, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT, ok, json_integer_value(c));
    else
        snprintf(comp, sizeof comp, "%" JSON_INTEGER_FORMAT "/1 of %" JSON_INTEGER_FORMAT, ok,
                 num(o, "spec", "parallelism"));
    const char *st = cond_true(o, "Complete") ? "Complete" : cond_true(o, "Failed") ? "Failed" : "Running";
    job_duration(o, dur, sizeof dur);
    return json_pack("[ssssssss]", name, st, comp, dur, age, names, images, sel);
}

/* ---- the scale subresource ---- */

static const char *selector_of(const json_t *obj, char *buf, size_t len) {
    labels_text(json_object_get(json_object_get(json_object_get(obj, "spec"), "selector"), "matchLabels"), buf, len);
    return buf;
}

/* The autoscaling/v1 Scale of a stored workload (new reference). */
static json_t *scale_of(const json_t *obj) {
    json_t *md = json_object_get(obj, "metadata");
    char sel[512];
    json_t *smd = json_object();
    static const char *const keep[] = {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (json_object_get(md, keep[i])) json_object_set(smd, keep[i], json_object_get(md, keep[i]));
    return json_pack("{s:s, s:s, s:o, s:{s:I}, s:{s:I, s:s}}", "kind", "Scale", "apiVersion", "autoscaling/v1",
                     "metadata", smd, "spec", "replicas", num(obj, "spec", "replicas"), "status", "replicas",
                     num(obj, "status", "replicas"), "selector", selector_of(obj, sel, sizeof sel));
}

struct scale_req {
    json_int_t replicas;
    const char *rv; /* the Scale's resourceVersion precondition, or NULL */
};

static int scale_fn(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct scale_req *q = ud;
    const char *have = json_string_value(json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
    if (q->rv && q->rv[0] && (!have || strcmp(q->rv, have))) {
        snprintf(err, errlen, "the object has been modified; please apply your changes to the latest version and "
                 "try again");
        return STORE_ECONFLICT;
    }
    json_t *n = json_deep_copy(cur);
    if (!n) return -ENOMEM;
    json_object_set_new(json_object_get(n, "spec"), "replicas", json_integer(q->replicas));
    *next = n;
    return 0;
}

void shim_workload_scale(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                         const struct http_request *req, struct http_response *resp) {
    json_t *cur = NULL;
    int rc = store_get(s->st, r->store_key, ns, name, &cur);
    if (rc) {
        shim_store_error(s, resp, rc, r, name);
        return;
    }
    json_t *scale = scale_of(cur);
    json_decref(cur);
    if (req->method == HTTP_GET) {
        shim_json(resp, 200, scale);
        return;
    }
    json_t *want = NULL;
    if (req->method == HTTP_PUT && shim_pb_request(req)) { /* a client-go scale client's protobuf Scale */
        if (!(want = shim_pb_body("Scale", req, resp))) {
            json_decref(scale);
            return;
        }
    } else if (req->method == HTTP_PUT) {
        json_error_t je;
        want = json_loadb(req->body, req->body_len, 0, &je);
        if (!json_is_object(want)) {
            json_decref(want);
            json_decref(scale);
            shim_status(resp, 400, "BadRequest", NULL, "the body of the request could not be decoded as a Scale: %s",
                        je.text);
            return;
        }
    } else if (req->method == HTTP_PATCH) {
        bool ssa = false;
        json_t *patch = NULL;
        shim_patch_fn apply = shim_patch_parse(req, &patch, &ssa, resp);
        if (!apply) {
            json_decref(scale);
            return;
        }
        char msg[512] = "";
        rc = apply(scale, patch, &want, msg, sizeof msg);
        json_decref(patch);
        if (rc) {
            json_decref(scale);
            shim_status(resp, 422, "Invalid", NULL, "Scale.autoscaling \"%s\" is invalid: %s", name, msg);
            return;
        }
    } else {
        json_decref(scale);
        shim_status(resp, 405, "MethodNotAllowed", NULL, "the server does not allow this method on the requested "
                    "resource");
        return;
    }
    json_decref(scale);
    json_t *rep = json_object_get(json_object_get(want, "spec"), "replicas");
    if (!json_is_integer(rep) || json_integer_value(rep) < 0 || json_integer_value(rep) > WL_MAX_REPLICAS) {
        json_decref(want);
        shim_status(resp, 422, "Invalid",
                    json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:s}]}", "name", name, "group", "autoscaling", "kind",
                              "Scale", "causes", "reason", "FieldValueInvalid", "message",
                              "Invalid value: must be an integer in [0, 16777216]", "field", "spec.replicas"),
                    "Scale.autoscaling \"%s\" is invalid: spec.replicas: Invalid value: must be an integer in "
                    "[0, %d]", name, WL_MAX_REPLICAS);
        return;
    }
    /* a PUT's resourceVersion is a precondition; a patch's Scale carries the one read above */
    struct scale_req q = {.replicas = json_integer_value(rep),
                          .rv = req->method == HTTP_PUT ? json_string_value(json_object_get(
                                                              json_object_get(want, "metadata"), "resourceVersion"))
                                                        : NULL};
    const char *dr = http_req_arg(req, "dryRun");
    json_t *out = NULL;
    if (dr && !strcmp(dr, "All")) {
        rc = store_get(s->st, r->store_key, ns, name, &cur);
        if (!rc) {
            char err[256];
            rc = scale_fn(&q, cur, &out, err, sizeof err);
            json_decref(cur);
        }
    } else {
        rc = store_modify(s->st, r->store_key, ns, name, scale_fn, &q, &out, NULL);
        if (!rc && s->hub) watch_kick(s->hub);
    }
    json_decref(want);
    if (rc) {
        json_decref(out);
        shim_store_error(s, resp, rc, r, name);
        return;
    }
    shim_json(resp, 200, scale_of(out));
    json_decref(out);
}
