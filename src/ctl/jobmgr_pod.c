/* The job manager's pure pieces (jobmgr_int.h): pods for instances, pod
 * state, template versions, Job status. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jobmgr_int.h"
#include "labels.h"

uint32_t jm_template_version(const json_t *tpl) {
    if (!tpl) return 1;
    char *s = json_dumps(tpl, JSON_COMPACT | JSON_SORT_KEYS);
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    free(s);
    return h ? h : 1;
}

int jm_pod_name(char *out, size_t len, const char *job, uint32_t instance, uint32_t run) {
    int n = run <= 1 ? snprintf(out, len, "%s-%" PRIu32, job, instance)
                     : snprintf(out, len, "%s-%" PRIu32 "-%" PRIu32, job, instance, run);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int jm_pod_name_generated(char *out, size_t len, const char *base, const char *uid, uint32_t instance,
                          uint32_t run, uint32_t salt) {
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789"; /* kube's: no vowels, no 0 1 3 */
    char key[400];
    snprintf(key, sizeof key, "%.300s/%" PRIu32 "/%" PRIu32 "/%" PRIu32, uid ? uid : "", instance, run, salt);
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    char sfx[6];
    for (int i = 0; i < 5; i++) {
        sfx[i] = alphabet[h % (sizeof alphabet - 1)];
        h /= sizeof alphabet - 1;
    }
    sfx[5] = 0;
    int n = snprintf(out, len, "%s-%s", base, sfx);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int jm_gang_name(char *out, size_t len, const char *job, uint32_t first, uint32_t run) {
    int n = run <= 1 ? snprintf(out, len, "%s-gang-%" PRIu32, job, first)
                     : snprintf(out, len, "%s-gang-%" PRIu32 "-%" PRIu32, job, first, run);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int put_str(json_t *o, const char *k, const char *v) { return json_object_set_new(o, k, json_string(v)); }

static int put_u32(json_t *o, const char *k, uint32_t v) {
    char b[16];
    snprintf(b, sizeof b, "%" PRIu32, v);
    return put_str(o, k, b);
}

/* A copy of the string members of src (template labels or annotations). */
static json_t *string_map(const json_t *src) {
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v) if (out && json_is_string(v)) json_object_set(out, k, v);
    return out;
}

static json_t *hostname_term(const char *host) {
    return json_pack("{s:[{s:s, s:s, s:[s]}]}", "matchExpressions", "key", JM_HOSTNAME_LABEL, "operator", "In",
                     "values", host);
}

static json_t *child(json_t *o, const char *k, bool array) {
    json_t *c = json_object_get(o, k);
    if (array ? !json_is_array(c) : !json_is_object(c)) {
        c = array ? json_array() : json_object();
        json_object_set_new(o, k, c);
    }
    return c;
}

/* DAEMON: every required term also requires the node (terms are ORed, so the
 * requirement goes into each); no terms: one term with just the node. */
static void pin_required(json_t *spec, const char *host) {
    json_t *na = child(child(spec, "affinity", false), "nodeAffinity", false);
    json_t *req = child(na, "requiredDuringSchedulingIgnoredDuringExecution", false);
    json_t *terms = child(req, "nodeSelectorTerms", true);
    json_t *expr = json_pack("{s:s, s:s, s:[s]}", "key", JM_HOSTNAME_LABEL, "operator", "In", "values", host);
    if (json_array_size(terms) == 0) {
        json_t *t = json_object();
        json_object_set_new(t, "matchExpressions", json_array());
        json_array_append_new(terms, t);
    }
    size_t i;
    json_t *t;
    json_array_foreach(terms, i, t) {
        if (!json_is_object(t)) continue;
        json_array_append(child(t, "matchExpressions", true), expr);
    }
    json_decref(expr);
}

/* STATEFUL: the previous node, preferred with the highest weight. */
static void prefer_host(json_t *spec, const char *host) {
    json_t *na = child(child(spec, "affinity", false), "nodeAffinity", false);
    json_t *pref = child(na, "preferredDuringSchedulingIgnoredDuringExecution", true);
    json_array_append_new(pref, json_pack("{s:i, s:o}", "weight", 100, "preference", hostname_term(host)));
}

json_t *jm_pod_build(const json_t *tpl, const struct jm_pod_params *p, char *err, size_t errlen) {
    const json_t *tspec = json_object_get(tpl, "spec");
    const json_t *tmd = json_object_get(tpl, "metadata");
    if (!json_is_object(tpl) || !json_is_object(tspec)) {
        snprintf(err, errlen, "job %s/%s: spec.template.spec: expected an object", p->ns, p->job);
        return NULL;
    }
    char name[512], base[400];
    const char *hash = json_string_value(json_object_get(json_object_get(tmd, "labels"), JM_HASH_LABEL));
    if (p->generated) snprintf(base, sizeof base, "%.250s%s%.60s", p->job, hash ? "-" : "", hash ? hash : "");
    if (p->generated ? jm_pod_name_generated(name, sizeof name, base, p->uid, p->instance, p->run, p->salt)
                     : jm_pod_name(name, sizeof name, p->job, p->instance, p->run)) {
        snprintf(err, errlen, "job %s/%s: pod name too long", p->ns, p->job);
        return NULL;
    }
    json_t *labels = string_map(json_object_get(tmd, "labels"));
    json_t *ann = string_map(json_object_get(tmd, "annotations"));
    json_t *spec = json_deep_copy(tspec);
    json_t *pod = json_object();
    json_t *md = json_object();
    if (!labels || !ann || !spec || !pod || !md) goto nomem;
    int bad = put_str(labels, PL_JOB, p->job);
    bad |= put_u32(labels, PL_INSTANCE, p->instance);
    if (p->pool) bad |= put_str(labels, PL_POOL, p->pool);
    if (p->gang_size > 1) {
        char g[600];
        bad |= jm_gang_name(g, sizeof g, p->job, p->gang, p->gang_run) ? -1 : put_str(labels, PL_GANG, g);
        bad |= put_u32(labels, PL_GANG_SIZE, p->gang_size);
    }
    if (p->x) {
        bad |= put_u32(ann, PA_PRIORITY, p->x->priority);
        bad |= put_str(ann, PA_PREEMPTIBLE, p->x->preemptible || p->x->revocable ? "true" : "false");
        bad |= put_str(ann, PA_REVOCABLE, p->x->revocable ? "true" : "false");
    }
    /* Services spread their instances over hosts unless the template says
     * otherwise, as Peloton placed them; batch work packs (the default). */
    if ((p->type == JOB_STATELESS || p->type == JOB_STATEFUL) && !json_object_get(ann, PA_STRATEGY))
        bad |= put_str(ann, PA_STRATEGY, "SPREAD_JOB");
    bad |= put_u32(ann, JM_A_CONFIG_VERSION, p->version);
    bad |= put_u32(ann, JM_A_RUN, p->run ? p->run : 1);
    bad |= put_u32(ann, JM_A_FAILURES, p->failures);
    bad |= put_u32(ann, JM_A_LOST, p->lost);
    if (p->crash_loop) bad |= put_u32(ann, JM_A_CRASH_LOOP, p->crash_loop);
    if (p->host && p->type == JOB_DAEMON) {
        bad |= put_str(ann, JM_A_DAEMON_NODE, p->host);
        pin_required(spec, p->host);
    } else if (p->host && p->type == JOB_STATEFUL) {
        bad |= put_str(ann, JM_A_HOST_HINT, p->host);
        prefer_host(spec, p->host);
    }
    bad |= put_str(spec, "schedulerName", p->scheduler ? p->scheduler : PELOTON_SCHEDULER);
    bad |= put_str(spec, "restartPolicy", "Never");
    json_object_del(spec, "nodeName"); /* the scheduler binds it */

    bad |= put_str(md, "name", name);
    bad |= put_str(md, "namespace", p->ns);
    bad |= json_object_set_new(md, "labels", labels);
    bad |= json_object_set_new(md, "annotations", ann);
    labels = ann = NULL;
    bad |= json_object_set_new(md, "ownerReferences",
                               json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", JM_API_VERSION, "kind",
                                         "Job", "name", p->job, "uid", p->uid ? p->uid : "", "controller", 1,
                                         "blockOwnerDeletion", 1));
    bad |= put_str(pod, "apiVersion", "v1");
    bad |= put_str(pod, "kind", "Pod");
    bad |= json_object_set_new(pod, "metadata", md);
    bad |= json_object_set_new(pod, "spec", spec);
    if (bad) {
        json_decref(pod);
        snprintf(err, errlen, "job %s/%s: out of memory", p->ns, p->job);
        return NULL;
    }
    return pod;
nomem:
    json_decref(labels);
    json_decref(ann);
    json_decref(spec);
    json_decref(pod);
    json_decref(md);
    snprintf(err, errlen, "job %s/%s: out of memory", p->ns, p->job);
    return NULL;
}

int64_t jm_parse_u32(const char *s) {
    if (!s || !*s || strlen(s) > 10) return -1;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    return v > UINT32_MAX ? -1 : v;
}

static const char *str_at(const json_t *o, const char *a, const char *b) {
    const json_t *x = json_object_get(o, a);
    return json_string_value(b ? json_object_get(x, b) : x);
}

enum task_state jm_pod_state(const json_t *pod, bool node_gone) {
    const char *phase = str_at(pod, "status", "phase");
    const char *node = str_at(pod, "spec", "nodeName");
    bool bound = node && node[0];
    if (phase && !strcmp(phase, "Succeeded")) return TASK_SUCCEEDED;
    if (phase && !strcmp(phase, "Failed")) return TASK_FAILED;
    if ((bound && node_gone) || (phase && !strcmp(phase, "Unknown"))) return TASK_LOST;
    if (str_at(pod, "metadata", "deletionTimestamp")) return TASK_KILLING;
    if (phase && !strcmp(phase, "Running")) return TASK_RUNNING;
    return bound ? TASK_LAUNCHED : TASK_PENDING;
}

int jm_pod_parse(const json_t *pod, struct jm_pod_view *v) {
    memset(v, 0, sizeof *v);
    const json_t *md = json_object_get(pod, "metadata");
    const json_t *labels = json_object_get(md, "labels"), *ann = json_object_get(md, "annotations");
    v->name = json_string_value(json_object_get(md, "name"));
    v->job = json_string_value(json_object_get(labels, PL_JOB));
    int64_t inst = jm_parse_u32(json_string_value(json_object_get(labels, PL_INSTANCE)));
    if (!v->name || !v->job || !v->job[0] || inst < 0 || inst >= JM_MAX_INSTANCE) return -EINVAL;
    v->instance = (uint32_t)inst;
    int64_t x;
    v->run = (x = jm_parse_u32(json_string_value(json_object_get(ann, JM_A_RUN)))) > 0 ? (uint32_t)x : 1;
    v->version = (x = jm_parse_u32(json_string_value(json_object_get(ann, JM_A_CONFIG_VERSION)))) > 0 ? (uint32_t)x : 0;
    v->failures = (x = jm_parse_u32(json_string_value(json_object_get(ann, JM_A_FAILURES)))) > 0 ? (uint32_t)x : 0;
    v->lost = (x = jm_parse_u32(json_string_value(json_object_get(ann, JM_A_LOST)))) > 0 ? (uint32_t)x : 0;
    v->crash_loop = (x = jm_parse_u32(json_string_value(json_object_get(ann, JM_A_CRASH_LOOP)))) > 0 ? (uint32_t)x : 0;
    v->preempted = json_object_get(ann, PA_PREEMPTED) != NULL;
    v->pin = json_string_value(json_object_get(ann, JM_A_DAEMON_NODE));
    v->node = str_at(pod, "spec", "nodeName");
    if (v->node && !v->node[0]) v->node = NULL;
    v->bound = v->node != NULL;
    v->deleting = json_object_get(md, "deletionTimestamp") != NULL;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(md, "ownerReferences"), i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *av = json_string_value(json_object_get(o, "apiVersion"));
        if (json_is_true(json_object_get(o, "controller")) && kind && !strcmp(kind, "Job") && av &&
            !strncmp(av, "peloton.io/", 11)) /* not a batch/v1 Job */
            v->owner_uid = json_string_value(json_object_get(o, "uid"));
    }
    v->state = jm_pod_state(pod, false);
    return 0;
}

static json_t *backoff_build(const struct jm_backoff_status *bo) {
    json_t *items = json_array();
    json_t *o = json_pack("{s:I, s:o}", "instances", (json_int_t)bo->n, "items", items);
    if (!o) return NULL;
    for (uint32_t k = 0; k < bo->n && k < JM_STATUS_BACKOFF_MAX; k++) {
        char at[32];
        time_t t = (time_t)bo->items[k].restart_at;
        struct tm tm;
        if (!gmtime_r(&t, &tm) || !strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm)) at[0] = 0;
        if (json_array_append_new(items, json_pack("{s:I, s:I, s:I, s:s}", "instance", (json_int_t)bo->items[k].instance,
                                                   "restarts", (json_int_t)bo->items[k].restarts, "delaySeconds",
                                                   (json_int_t)bo->items[k].delay_s, "restartAt", at))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *update_build(const struct jm_update_status *u, const char *msg) {
    char progress[64];
    if (u->failed)
        snprintf(progress, sizeof progress, "%" PRIu32 "/%" PRIu32 ", %" PRIu32 " failed", u->done, u->count, u->failed);
    else
        snprintf(progress, sizeof progress, "%" PRIu32 "/%" PRIu32, u->done, u->count);
    json_t *cur = json_array();
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:s, s:s}", "state", update_state_name(u->state),
                          "fromVersion", (json_int_t)u->from, "toVersion", (json_int_t)u->to, "batchSize",
                          (json_int_t)u->batch, "instancesTotal", (json_int_t)u->count, "instancesDone",
                          (json_int_t)u->done, "instancesFailed", (json_int_t)u->failed, "currentBatch", cur,
                          "progress", progress, "message", msg);
    if (!o) return NULL;
    for (uint32_t k = 0; k < u->ncurrent && k < JM_STATUS_BATCH_MAX; k++) {
        if (json_array_append_new(cur, json_integer(u->current[k]))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

json_t *jm_status_build(enum job_state state, const struct job_counts *counts, const struct jm_update_status *u,
                        const struct jm_backoff_status *bo) {
    json_t *st = crd_job_status(state, counts);
    if (!st) return NULL;
    if (bo && json_object_set_new(st, "backoff", backoff_build(bo))) {
        json_decref(st);
        return NULL;
    }
    if (!u || u->state == UPDATE_INVALID) return st;
    const char *cs = u->state == UPDATE_SUCCEEDED                                   ? "True"
                     : update_state_terminal(u->state) || u->state == UPDATE_FAILED ? "False"
                                                                                     : "Unknown";
    char msg[256];
    snprintf(msg, sizeof msg, "template version %" PRIu32 " -> %" PRIu32 ": %" PRIu32 "/%" PRIu32 " done, %" PRIu32
             " failed", u->from, u->to, u->done, u->count, u->failed);
    json_t *cond = json_pack("[{s:s, s:s, s:s, s:s}]", "type", "Update", "status", cs, "reason",
                             update_state_name(u->state), "message", msg);
    if (!cond || json_object_set_new(st, "conditions", cond) || json_object_set_new(st, "update", update_build(u, msg))) {
        json_decref(st);
        return NULL;
    }
    return st;
}

bool jm_status_same(const json_t *current, const json_t *desired) {
    if (!json_is_object(current)) return false;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)desired, k, v) if (!json_equal(json_object_get(current, k), v)) return false;
    return true;
}

const char *jm_pool_reason(enum jm_pool_check c) {
    return c == JM_POOL_NOT_FOUND ? "PoolNotFound" : c == JM_POOL_NOT_LEAF ? "PoolNotLeaf" : "PoolFound";
}

void jm_pool_message(enum jm_pool_check c, const char *pool, char *out, size_t len) {
    if (c == JM_POOL_NOT_FOUND)
        snprintf(out, len, "resource pool \"%s\" not found: the job's pods are created once it exists", pool);
    else if (c == JM_POOL_NOT_LEAF)
        snprintf(out, len, "resource pool \"%s\" has child pools and only leaf pools take work: the job's pods "
                 "are created once it is a leaf", pool);
    else
        snprintf(out, len, "resource pool \"%s\" found", pool);
}

static const json_t *condition(const json_t *status, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && !strcmp(t, type)) return c;
    }
    return NULL;
}

int jm_status_set_pool(json_t *st, const json_t *current, enum jm_pool_check c, const char *pool, const char *now) {
    const char *status = c == JM_POOL_OK ? "True" : "False";
    const json_t *was = condition(current, "PoolReady");
    const char *was_status = json_string_value(json_object_get(was, "status"));
    const char *was_time = json_string_value(json_object_get(was, "lastTransitionTime"));
    const char *since = was_status && was_time && !strcmp(was_status, status) ? was_time : now;
    char msg[600];
    jm_pool_message(c, pool, msg, sizeof msg);
    json_t *cond = json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "PoolReady", "status", status, "reason",
                             jm_pool_reason(c), "message", msg, "lastTransitionTime", since);
    json_t *conds = json_object_get(st, "conditions");
    if (!cond) return -ENOMEM;
    if (!json_is_array(conds)) {
        conds = json_array();
        if (!conds || json_object_set_new(st, "conditions", conds)) {
            json_decref(cond);
            return -ENOMEM;
        }
    }
    for (size_t i = json_array_size(conds); i-- > 0;) {
        const char *t = json_string_value(json_object_get(json_array_get(conds, i), "type"));
        if (t && !strcmp(t, "PoolReady")) json_array_remove(conds, i);
    }
    return json_array_append_new(conds, cond) ? -ENOMEM : 0;
}

/* The reason and message of a pod's PodScheduled=False condition (NULL when
 * it has none). */
static const json_t *unscheduled(const json_t *pod) {
    const json_t *c = condition(json_object_get(pod, "status"), "PodScheduled");
    const char *st = json_string_value(json_object_get(c, "status"));
    return st && !strcmp(st, "False") && json_is_string(json_object_get(c, "reason")) ? c : NULL;
}

const char *jm_pod_unscheduled_reason(const json_t *pod) {
    return json_string_value(json_object_get(unscheduled(pod), "reason"));
}

int jm_status_set_running(json_t *st, const json_t *current, const json_t *const *waiting, size_t nwaiting,
                          const struct job_counts *counts, const char *now) {
    enum { MAXR = 8 };
    const json_t *first[MAXR]; /* the first pod of each reason seen */
    const char *reason[MAXR];
    size_t n[MAXR], nr = 0, none = 0;
    for (size_t i = 0; i < nwaiting; i++) {
        const json_t *c = unscheduled(waiting[i]);
        if (!c) { none++; continue; }
        const char *why = json_string_value(json_object_get(c, "reason"));
        size_t k = 0;
        while (k < nr && strcmp(reason[k], why)) k++;
        if (k == nr && nr < MAXR) first[nr] = c, reason[nr] = why, n[nr++] = 0;
        if (k < nr) n[k]++;
    }
    size_t best = 0;
    for (size_t k = 1; k < nr; k++)
        if (n[k] > n[best]) best = k;
    uint32_t running = counts->n[TASK_RUNNING], total = counts->total;
    bool status = false;
    const char *why;
    char msg[900];
    if (nr) {
        const char *ex = json_string_value(json_object_get(first[best], "message"));
        why = reason[best];
        snprintf(msg, sizeof msg, "%zu of %zu waiting pods: %s; e.g. %.700s", n[best], nwaiting, why, ex ? ex : "");
    } else if (nwaiting) {
        why = "WaitingForScheduler";
        snprintf(msg, sizeof msg, "%zu pods wait to be looked at by the scheduler", none);
    } else if (total && running == total) {
        status = true;
        why = "AllRunning";
        snprintf(msg, sizeof msg, "%" PRIu32 " of %" PRIu32 " instances run", running, total);
    } else {
        why = "NotAllRunning";
        snprintf(msg, sizeof msg, "%" PRIu32 " of %" PRIu32 " instances run; none waits to be scheduled", running,
                 total);
    }
    const char *cs = status ? "True" : "False";
    const json_t *was = condition(current, "Running");
    const char *was_status = json_string_value(json_object_get(was, "status"));
    const char *was_time = json_string_value(json_object_get(was, "lastTransitionTime"));
    const char *since = was_status && was_time && !strcmp(was_status, cs) ? was_time : now;
    json_t *cond = json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "Running", "status", cs, "reason", why, "message",
                             msg, "lastTransitionTime", since);
    json_t *conds = json_object_get(st, "conditions");
    if (!cond) return -ENOMEM;
    if (!json_is_array(conds)) {
        conds = json_array();
        if (!conds || json_object_set_new(st, "conditions", conds)) {
            json_decref(cond);
            return -ENOMEM;
        }
    }
    return json_array_append_new(conds, cond) ? -ENOMEM : 0;
}
