/* jobmgr: informers on Jobs, Pods and Nodes; pod events into instance
 * records; the dirty set and the tick; the bounded write queue. One job's
 * reconcile is in jobmgr_sync.c; the pure pieces in jobmgr_pod.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobmgr_ctl.h"
#include "metrics.h"
#include "labels.h"

void jobmgr_options_default(struct jobmgr_options *o) {
    memset(o, 0, sizeof *o);
    o->scheduler_name = PELOTON_SCHEDULER;
    o->resync_ms = 10000;
    o->tick_ms = 10;
    o->max_inflight = 32;
    o->update_max_attempts = 2;
    o->backoff_ms = 10000;
    o->backoff_max_ms = 300000;
}

void jm_log(const char *level, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "level=%s role=jobmgr %s\n", level, buf);
}

int64_t jm_now_ms(const struct jobmgr *jm) { return (int64_t)uv_now(jm->loop); }

/* ---- the job map ---- */

static size_t hash_key(const char *ns, const char *name) {
    size_t h = 5381;
    for (const char *p = ns; *p; p++) h = h * 33 + (unsigned char)*p;
    h = h * 33 + '/';
    for (const char *p = name; *p; p++) h = h * 33 + (unsigned char)*p;
    return h;
}

struct jm_job *jm_job_find(struct jobmgr *jm, const char *ns, const char *name) {
    if (!jm->nbuckets) return NULL;
    for (struct jm_job *j = jm->buckets[hash_key(ns, name) & (jm->nbuckets - 1)]; j; j = j->hnext)
        if (!strcmp(j->ns, ns) && !strcmp(j->name, name)) return j;
    return NULL;
}

static int grow_map(struct jobmgr *jm) {
    size_t n = jm->nbuckets ? jm->nbuckets * 2 : 64;
    struct jm_job **b = calloc(n, sizeof *b);
    if (!b) return -ENOMEM;
    for (size_t i = 0; i < jm->nbuckets; i++) {
        for (struct jm_job *j = jm->buckets[i], *next; j; j = next) {
            next = j->hnext;
            size_t k = hash_key(j->ns, j->name) & (n - 1);
            j->hnext = b[k];
            b[k] = j;
        }
    }
    free(jm->buckets);
    jm->buckets = b;
    jm->nbuckets = n;
    return 0;
}

static struct jm_job *job_get(struct jobmgr *jm, const char *ns, const char *name) {
    struct jm_job *j = jm_job_find(jm, ns, name);
    if (j) return j;
    if (jm->njobs >= jm->nbuckets && grow_map(jm)) return NULL;
    j = calloc(1, sizeof *j);
    size_t kl = strlen(ns) + strlen(name) + 2;
    if (!j || !(j->key = malloc(kl)) || !(j->ns = strdup(ns)) || !(j->name = strdup(name))) {
        if (j) {
            free(j->key);
            free(j->ns);
        }
        free(j);
        return NULL;
    }
    snprintf(j->key, kl, "%s/%s", ns, name);
    size_t k = hash_key(ns, name) & (jm->nbuckets - 1);
    j->hnext = jm->buckets[k];
    jm->buckets[k] = j;
    jm->njobs++;
    return j;
}

static void job_destroy(struct jm_job *j) {
    for (uint32_t i = 0; i < j->ninst; i++) jm_inst_clear(&j->inst[i]);
    free(j->inst);
    free(j->tasks);
    free(j->snap);
    for (size_t i = 0; i < j->ngarbage; i++) free(j->garbage[i].name);
    free(j->garbage);
    json_decref(j->gindex);
    json_decref(j->stable_tpl);
    update_free(j->u);
    free(j->status_sent);
    free(j->last_err);
    for (int k = 0; k < JM_NONESHOT; k++) free(j->oneshot_seen[k]);
    free(j->key);
    free(j->ns);
    free(j->name);
    free(j->uid);
    free(j);
}

void jm_job_free(struct jobmgr *jm, struct jm_job *job) {
    struct jm_job **pp = &jm->buckets[hash_key(job->ns, job->name) & (jm->nbuckets - 1)];
    while (*pp && *pp != job) pp = &(*pp)->hnext;
    if (*pp) *pp = job->hnext;
    if (job->dirty) { /* take it off the dirty list too */
        struct jm_job **dp = &jm->dirty;
        while (*dp && *dp != job) dp = &(*dp)->dnext;
        if (*dp) *dp = job->dnext;
    }
    jm->njobs--;
    job_destroy(job);
}

/* ---- the dirty set and the tick ---- */

static void on_tick(uv_timer_t *t);

static void arm_tick(struct jobmgr *jm) {
    /* not before jobmgr_start made the timers: an informer joining a feed
     * another role already holds delivers its objects from inside
     * kc_informer_start (jobmgr_start arms the tick once they exist) */
    if (jm->tick_armed || jm->stopping || !jm->open_handles) return;
    jm->tick_armed = true;
    uv_timer_start(&jm->tick, on_tick, jm->o.tick_ms, 0);
}

void jm_mark_dirty(struct jobmgr *jm, struct jm_job *job) {
    if (!job->dirty) {
        job->dirty = true;
        job->dnext = jm->dirty;
        jm->dirty = job;
    }
    arm_tick(jm);
}

/* The wake timer: one for all jobs, at the earliest job->wake_ms. */
static void on_wake(uv_timer_t *t) {
    struct jobmgr *jm = t->data;
    int64_t now = jm_now_ms(jm), next = 0;
    jm->wake_at = 0;
    for (size_t i = 0; i < jm->nbuckets; i++) {
        for (struct jm_job *j = jm->buckets[i]; j; j = j->hnext) {
            if (!j->wake_ms) continue;
            if (j->wake_ms <= now) {
                j->wake_ms = 0;
                jm_mark_dirty(jm, j);
            } else if (!next || j->wake_ms < next) {
                next = j->wake_ms;
            }
        }
    }
    if (next && !jm->stopping) {
        jm->wake_at = next;
        uv_timer_start(&jm->wake, on_wake, (uint64_t)(next - now), 0);
    }
}

void jm_wake_at(struct jobmgr *jm, struct jm_job *job, int64_t at_ms) {
    if (jm->stopping || !jm->open_handles) return;
    if (job->wake_ms && job->wake_ms <= at_ms) return;
    job->wake_ms = at_ms;
    if (jm->wake_at && jm->wake_at <= at_ms) return;
    int64_t now = jm_now_ms(jm);
    jm->wake_at = at_ms;
    uv_timer_start(&jm->wake, on_wake, at_ms > now ? (uint64_t)(at_ms - now) : 0, 0);
}

static bool all_synced(const struct jobmgr *jm) {
    return kc_informer_synced(jm->jobs) && kc_informer_synced(jm->pods) && kc_informer_synced(jm->nodes) &&
           kc_informer_synced(jm->pools);
}

static void on_tick(uv_timer_t *t) {
    struct jobmgr *jm = t->data;
    jm->tick_armed = false;
    metrics_set(jm->m_jobs, (double)jm->njobs);
    metrics_set(jm->m_queued, (double)jm->queued);
    if (!all_synced(jm)) return; /* on_synced marks everything dirty again */
    struct jm_job *list = jm->dirty;
    jm->dirty = NULL;
    while (list) {
        struct jm_job *j = list;
        list = j->dnext;
        j->dnext = NULL;
        j->dirty = false;
        jm->stats.reconciles++;
        metrics_inc(jm->m_reconciles);
        jm_sync_job(jm, j);
        if (jm->stopping) return;
    }
}

/* ---- the write queue ---- */

static void req_free(struct jm_req *q) {
    free(q->path);
    json_decref(q->body);
    free(q->key);
    free(q->pod);
    free(q);
}

static void maybe_free(struct jobmgr *jm) {
    if (jm->stopping && jm->open_handles == 0 && jm->inflight == 0) {
        free(jm->buckets);
        free(jm);
    }
}

static void pump(struct jobmgr *jm);

static void complete(struct jobmgr *jm, struct jm_req *q, long status, const char *error) {
    jm->stats.writes++;
    if (q->kind == JM_RQ_STATUS && status == 409) {
        /* held to the resourceVersion it was decided from, and the Job moved
         * on meanwhile: decided again from the newer copy (jm_req_done) */
        metrics_inc(jm->m_writes_conflict);
    } else if ((status < 200 || status >= 300) && !(q->kind == JM_RQ_CREATE && status == 409) &&
               !((q->kind == JM_RQ_KILL || q->kind == JM_RQ_GARBAGE) && status == 404)) {
        jm->stats.write_errors++;
        metrics_inc(jm->m_writes_failed);
    } else {
        metrics_inc(jm->m_writes_ok);
    }
    if (!jm->stopping) {
        struct jm_job *job = NULL;
        if (q->key) {
            const char *slash = strchr(q->key, '/');
            char ns[256];
            size_t n = (size_t)(slash - q->key);
            if (slash && n < sizeof ns) {
                memcpy(ns, q->key, n);
                ns[n] = 0;
                job = jm_job_find(jm, ns, slash + 1);
            }
        }
        jm_req_done(jm, job, q, status, error);
    }
    req_free(q);
}

static void on_done(void *ud, const struct kc_response *r) {
    struct jm_req *q = ud;
    struct jobmgr *jm = q->jm;
    jm->inflight--;
    complete(jm, q, r->status, r->error);
    if (jm->stopping) {
        maybe_free(jm);
        return;
    }
    pump(jm);
}

static void pump(struct jobmgr *jm) {
    while (!jm->stopping && jm->qhead && jm->inflight < jm->o.max_inflight) {
        struct jm_req *q = jm->qhead;
        jm->qhead = q->next;
        if (!jm->qhead) jm->qtail = NULL;
        jm->queued--;
        q->next = NULL;
        jm->inflight++;
        int rc = kclient_request(jm->kc, q->method, q->path, q->body, q->ct, on_done, q);
        if (rc) { /* never called back */
            jm->inflight--;
            complete(jm, q, 0, "request not started");
        }
    }
}

void jm_send(struct jobmgr *jm, enum jm_req_kind kind, const char *method, char *path, json_t *body, const char *ct,
             const struct jm_job *job, const char *pod, uint32_t instance, uint32_t run) {
    struct jm_req *q = calloc(1, sizeof *q);
    if (q) q->kind = kind;
    if (!q || (job && !(q->key = strdup(job->key))) || (pod && !(q->pod = strdup(pod)))) {
        if (q) {
            q->path = path;
            q->body = body;
            complete(jm, q, 0, "out of memory");
        } else {
            free(path);
            json_decref(body);
        }
        return;
    }
    q->jm = jm;
    q->kind = kind;
    q->method = method;
    q->path = path;
    q->body = body;
    q->ct = ct;
    q->instance = instance;
    q->run = run;
    if (jm->qtail) jm->qtail->next = q;
    else jm->qhead = q;
    jm->qtail = q;
    jm->queued++;
    pump(jm);
}

bool jm_node_exists(const struct jobmgr *jm, const char *node) {
    return node && kc_informer_get(jm->nodes, "", node) != NULL;
}

bool jm_node_ready(const struct jobmgr *jm, const char *node) {
    const json_t *n = node ? kc_informer_get(jm->nodes, "", node) : NULL;
    if (!n) return false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(n, "status"), "conditions"), i, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *st = json_string_value(json_object_get(c, "status"));
        if (type && !strcmp(type, "Ready")) return st && !strcmp(st, "True");
    }
    return true; /* no conditions yet */
}

/* Annotated for maintenance and cordoned: a run moved off a Node that is not
 * cordoned yet could be placed right back on it. */
static bool node_in_maintenance(const json_t *n) {
    const char *m = json_string_value(json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"),
                                                      PA_MAINTENANCE));
    return m && (!strcmp(m, PA_MAINT_DRAINING) || !strcmp(m, PA_MAINT_DRAINED)) &&
           json_is_true(json_object_get(json_object_get(n, "spec"), "unschedulable"));
}

bool jm_node_in_maintenance(const struct jobmgr *jm, const char *node) {
    const json_t *n = node ? kc_informer_get(jm->nodes, "", node) : NULL;
    return n && node_in_maintenance(n);
}

struct node_list {
    const json_t **v;
    size_t n, cap;
};

static int collect_node(void *ud, json_t *node) {
    struct node_list *l = ud;
    if (l->n == l->cap) {
        size_t n = l->cap ? l->cap * 2 : 64;
        const json_t **v = realloc(l->v, n * sizeof *v);
        if (!v) return 1;
        l->v = v;
        l->cap = n;
    }
    l->v[l->n++] = node;
    return 0;
}

struct jm_fleet *jm_fleet(struct jobmgr *jm) {
    if (jm->fleet) return jm->fleet;
    struct node_list l = {0};
    kc_informer_foreach(jm->nodes, collect_node, &l);
    jm->fleet = jm_fleet_new(l.v, l.n, NULL);
    free(l.v);
    return jm->fleet;
}

static void fleet_stale(struct jobmgr *jm) {
    jm_fleet_free(jm->fleet);
    jm->fleet = NULL;
    jm->maint_nodes = -1;
}

static int count_maint(void *ud, json_t *node) {
    if (node_in_maintenance(node)) (*(long *)ud)++;
    return 0;
}

bool jm_any_maintenance(struct jobmgr *jm) {
    if (jm->maint_nodes < 0) {
        long n = 0;
        kc_informer_foreach(jm->nodes, count_maint, &n);
        jm->maint_nodes = n;
    }
    return jm->maint_nodes > 0;
}

static int collect_parent(void *ud, json_t *pool) {
    const char *parent = json_string_value(json_object_get(json_object_get(pool, "spec"), "parent"));
    if (parent && parent[0]) json_object_set_new(ud, parent, json_true());
    return 0;
}

enum jm_pool_check jm_pool_check(struct jobmgr *jm, const char *pool) {
    if (!kc_informer_get(jm->pools, "", pool)) return JM_POOL_NOT_FOUND;
    if (!jm->parents && (jm->parents = json_object())) kc_informer_foreach(jm->pools, collect_parent, jm->parents);
    return json_object_get(jm->parents, pool) ? JM_POOL_NOT_LEAF : JM_POOL_OK;
}

/* ---- pod events into records ---- */

static const char *ns_of(const json_t *obj) {
    const char *ns = json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
    return ns ? ns : "";
}

/* The pod v is (now) the current run of record r. */
static void adopt(struct jobmgr *jm, struct jm_inst *r, const struct jm_pod_view *v) {
    if (!r->used || r->run != v->run) {
        r->kill = r->kill_sent = r->restart_pending = r->moving = false;
        if (!r->used) r->version = v->version;
    }
    r->used = true;
    r->run = v->run;
    if (v->version) r->version = v->version;
    if (v->failures > r->failures) r->failures = v->failures;
    if (v->lost > r->lost) r->lost = v->lost;
    if (v->crash_loop > r->crash_loop) r->crash_loop = v->crash_loop;
    jm_set_str(&r->pod, v->name);
    r->present = true;
    r->bound = v->bound;
    r->deleting = v->deleting;
    r->preempted = v->preempted;
    r->creating = false;
    if (!r->host || !v->node || strcmp(r->host, v->node)) r->node_gen = 0; /* looked up on the next reconcile */
    jm_set_str(&r->host, v->node);
    if (v->node) jm_set_str(&r->last_host, v->node);
    if (v->pin) jm_set_str(&r->pin, v->pin);
    enum task_state st = v->state;
    /* a preemption victim's containers end (the kubelet reports Failed or
     * Succeeded as they stop): that is its preemption kill, not a failure */
    if (v->preempted && task_state_terminal(st)) st = TASK_KILLED;
    /* a pod deleted out from under the job (kubectl delete pod) whose run
     * ends because of it was killed, whatever exit its containers made: the
     * run is KILLED and runs again (as Kubernetes' Job controller re-creates
     * it), never counted as SUCCEEDED. One that had ended before keeps its end. */
    if (v->deleting && (!r->kill || r->moving) && task_state_terminal(st) && !task_state_terminal(r->state))
        st = TASK_KILLED; /* likewise a run moved off a node in maintenance: no failure, no backoff */
    jm_set_state(jm, r, st);
}

/* ---- what a resync would change ---- */

static uint64_t sum_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t sum_str(uint64_t h, const char *s) { return s ? sum_bytes(h, s, strlen(s) + 1) : sum_bytes(h, "", 0) * 31; }

/* Everything adopt reads or writes of r, and the uid of its Job's object
 * (pod_apply compares the pod's owner with it): equal sums, and the same
 * object adopted again would change nothing. */
static uint64_t inst_sum(const struct jm_inst *r, const char *job_uid) {
    uint32_t n[6] = {r->run, r->version, r->failures, r->lost, r->crash_loop, (uint32_t)r->state};
    bool f[9] = {r->used, r->present, r->bound, r->deleting, r->preempted, r->creating, r->kill, r->moving,
                 r->kill_sent};
    uint64_t h = sum_bytes(1469598103934665603ULL, n, sizeof n);
    h = sum_bytes(h, f, sizeof f);
    h = sum_str(h, r->pod);
    h = sum_str(h, r->host);
    h = sum_str(h, r->last_host);
    h = sum_str(h, r->pin);
    return sum_str(h, job_uid);
}

static const char *job_uid(const struct jobmgr *jm, const struct jm_job *job) {
    json_t *jobj = kc_informer_get(jm->jobs, job->ns, job->name);
    return json_string_value(json_object_get(json_object_get(jobj, "metadata"), "uid"));
}

const char jm_reason_other[] = "";

const char *jm_reason(struct jobmgr *jm, const char *reason) {
    if (!reason) return NULL;
    for (int i = 0; i < jm->nreasons; i++)
        if (!strcmp(jm->reasons[i], reason)) return jm->reasons[i];
    if (jm->nreasons == JM_REASONS_MAX || !(jm->reasons[jm->nreasons] = strdup(reason))) return jm_reason_other;
    return jm->reasons[jm->nreasons++];
}

/* adopt, remembering the object and what it left (pods_current). */
static void adopt_pod(struct jobmgr *jm, struct jm_job *job, struct jm_inst *r, const struct jm_pod_view *v,
                      json_t *pod) {
    adopt(jm, r, v);
    r->unsched = jm_reason(jm, jm_pod_unscheduled_reason(pod));
    const char *rv = json_string_value(json_object_get(json_object_get(pod, "metadata"), "resourceVersion"));
    free(r->applied);
    r->applied = rv ? strdup(rv) : NULL;
    r->applied_sum = inst_sum(r, job_uid(jm, job));
}

/* Whether a resync's pod pass would change nothing: every record's last
 * adopted object is still the cache's object of its pod, the record and its
 * Job's uid are as that adoption left them, and these objects are every pod
 * in the cache (a pod no record holds, such as one in the garbage or not a
 * Job's, sends the pass back to re-applying them all). O(records), no
 * parsing: an idle job manager does not decode every pod each resync. */
static bool pods_current(struct jobmgr *jm) {
    size_t held = 0;
    for (size_t b = 0; b < jm->nbuckets; b++)
        for (struct jm_job *j = jm->buckets[b]; j; j = j->hnext) {
            const char *uid = NULL;
            bool uid_read = false;
            for (uint32_t i = 0; i < j->ninst; i++) {
                const struct jm_inst *r = &j->inst[i];
                if (!r->applied) continue;
                if (!uid_read) {
                    uid = job_uid(jm, j);
                    uid_read = true;
                }
                const char *rv = r->pod ? kc_informer_version(jm->pods, j->ns, r->pod) : NULL;
                if (!rv || strcmp(rv, r->applied) ||
                    inst_sum(r, uid) != r->applied_sum)
                    return false;
                held++;
            }
        }
    return held == kc_informer_count(jm->pods);
}

static void pod_apply(struct jobmgr *jm, json_t *pod) {
    struct jm_pod_view v;
    if (jm_pod_parse(pod, &v) || !v.owner_uid) return; /* not a Job's pod */
    struct jm_job *job = job_get(jm, ns_of(pod), v.job);
    if (!job) return;
    jm_mark_dirty(jm, job);
    bool grace0 = !v.bound || task_state_terminal(v.state);
    struct jm_garbage *g = jm_garbage_find(job, v.name);
    if (g) {
        if (grace0 && !g->grace0) g->grace0 = true, g->sent = false;
        return;
    }
    json_t *jobj = kc_informer_get(jm->jobs, job->ns, job->name);
    const char *uid = json_string_value(json_object_get(json_object_get(jobj, "metadata"), "uid"));
    if (jobj && uid && v.owner_uid && strcmp(uid, v.owner_uid)) { /* a deleted Job's pod of the same name */
        jm_garbage_add(job, v.name, grace0);
        return;
    }
    struct jm_inst *r = jm_inst_get(job, v.instance);
    if (!r) return;
    if (!r->used || v.run > r->run) {
        if (r->used && r->pod && strcmp(r->pod, v.name)) {
            if (r->present) jm_garbage_add(job, r->pod, !r->bound || task_state_terminal(r->state));
        }
        adopt_pod(jm, job, r, &v, pod);
    } else if (v.run == r->run && (!r->pod || !strcmp(r->pod, v.name))) {
        adopt_pod(jm, job, r, &v, pod);
    } else {
        jm_garbage_add(job, v.name, grace0);
    }
}

static void pod_gone(struct jobmgr *jm, json_t *pod) {
    struct jm_pod_view v;
    if (jm_pod_parse(pod, &v) || !v.owner_uid) return;
    struct jm_job *job = jm_job_find(jm, ns_of(pod), v.job);
    if (!job) return;
    jm_mark_dirty(jm, job);
    if (jm_garbage_remove(job, v.name)) return;
    if (v.instance >= job->ninst) return;
    struct jm_inst *r = &job->inst[v.instance];
    if (!r->used || !r->pod || strcmp(r->pod, v.name)) return;
    r->present = r->deleting = r->bound = false;
    r->kill_sent = false;
    free(r->pod);
    r->pod = NULL;
    free(r->applied);
    r->applied = NULL;
    /* a preemption victim ends KILLED (run again unless killOnPreempt); anything
     * else that vanished under us is LOST (at least once) */
    if (!task_state_terminal(r->state)) jm_set_state(jm, r, r->kill || r->preempted ? TASK_KILLED : TASK_LOST);
}

static void count_event(void *ud) { ((struct jobmgr *)ud)->stats.events++; }

static void on_pod_add(void *ud, json_t *obj) {
    count_event(ud);
    pod_apply(ud, obj);
}
static void on_pod_update(void *ud, json_t *old, json_t *obj) {
    count_event(ud);
    pod_apply(ud, obj);
}
static void on_pod_delete(void *ud, json_t *obj) {
    count_event(ud);
    pod_gone(ud, obj);
}

/* ---- job and node events ---- */

static void job_touch(struct jobmgr *jm, json_t *obj) {
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!name) return;
    struct jm_job *job = job_get(jm, ns_of(obj), name);
    if (job) jm_mark_dirty(jm, job);
}

static void on_job_add(void *ud, json_t *obj) {
    count_event(ud);
    job_touch(ud, obj);
}
static void on_job_update(void *ud, json_t *old, json_t *obj) {
    count_event(ud);
    job_touch(ud, obj);
}
static void on_job_delete(void *ud, json_t *obj) {
    count_event(ud);
    job_touch(ud, obj);
}

static void mark_all(struct jobmgr *jm) {
    for (size_t i = 0; i < jm->nbuckets; i++)
        for (struct jm_job *j = jm->buckets[i]; j; j = j->hnext) jm_mark_dirty(jm, j);
}

static void on_node_add(void *ud, json_t *obj) {
    count_event(ud);
    ((struct jobmgr *)ud)->node_gen++;
    fleet_stale(ud);
    mark_all(ud);
}
static void on_node_delete(void *ud, json_t *obj) {
    count_event(ud);
    ((struct jobmgr *)ud)->node_gen++;
    fleet_stale(ud);
    mark_all(ud);
}
static void on_node_update(void *ud, json_t *old, json_t *obj) {
    count_event(ud);
    /* heartbeats change nothing here; readiness, taints, labels, allocatable may */
    if (!jm_node_same(old, obj)) {
        fleet_stale(ud);
        mark_all(ud);
    }
}

/* A pool came, went or changed parent: every Job naming one may change. */
static void on_pool_change(struct jobmgr *jm) {
    count_event(jm);
    json_decref(jm->parents);
    jm->parents = NULL;
    mark_all(jm);
}
static void on_pool_add(void *ud, json_t *obj) { on_pool_change(ud); }
static void on_pool_delete(void *ud, json_t *obj) { on_pool_change(ud); }
static void on_pool_update(void *ud, json_t *old, json_t *obj) {
    const json_t *a = json_object_get(json_object_get(old, "spec"), "parent");
    const json_t *b = json_object_get(json_object_get(obj, "spec"), "parent");
    if ((a || b) && !(a && b && json_equal(a, b))) on_pool_change(ud); /* status writes change nothing here */
}

static int touch_each_job(void *ud, json_t *obj) {
    job_touch(ud, obj);
    return 0;
}

static int apply_each_pod(void *ud, json_t *obj) {
    pod_apply(ud, obj);
    return 0;
}

static void on_synced(void *ud) {
    struct jobmgr *jm = ud;
    jm->node_gen++; /* a relist: every host is looked up again */
    if (!all_synced(jm)) return;
    kc_informer_foreach(jm->jobs, touch_each_job, jm);
    mark_all(jm);
}

/* Every resync: pods re-applied (repairs drift) unless that would change
 * nothing (pods_current), every job reconciled. */
static void on_resync(uv_timer_t *t) {
    struct jobmgr *jm = t->data;
    if (!all_synced(jm)) return;
    if (pods_current(jm)) {
        jm->stats.resync_skips++;
    } else {
        jm->stats.resync_passes++;
        kc_informer_foreach(jm->pods, apply_each_pod, jm);
    }
    kc_informer_foreach(jm->jobs, touch_each_job, jm);
    mark_all(jm);
}

void jobmgr_stats(const struct jobmgr *jm, struct jobmgr_stats *out) {
    *out = jm->stats;
    out->jobs = jm->njobs;
    out->queued = jm->queued;
    out->inflight = jm->inflight;
}

/* ---- start and stop ---- */

static void handle_closed(uv_handle_t *h) {
    struct jobmgr *jm = h->data;
    jm->open_handles--;
    maybe_free(jm);
}

static void jobmgr_metrics_init(struct jobmgr *jm, struct metrics *reg) {
    static const char *const result[] = {"result"};
    struct metrics_family *w = metrics_counter(reg, "peloton_jobmgr_writes_total",
                                               "API writes the job manager completed (pods created, killed, Job "
                                               "status), by result: ok, failed, or conflict (a Job status write refused by its "
                                               "resourceVersion: decided again).",
                                               1, result);
    jm->m_reconciles = metrics_series0(metrics_counter(reg, "peloton_jobmgr_reconciles_total",
                                                       "Job reconciles run (events coalesced per job per tick).", 0,
                                                       NULL));
    jm->m_writes_ok = metrics_series1(w, "ok");
    jm->m_writes_failed = metrics_series1(w, "failed");
    jm->m_writes_conflict = metrics_series1(w, "conflict");
    jm->m_jobs = metrics_series0(metrics_gauge(reg, "peloton_jobmgr_jobs", "Jobs the job manager follows.", 0, NULL));
    jm->m_queued = metrics_series0(metrics_gauge(reg, "peloton_jobmgr_queued_writes",
                                                 "Writes waiting for a slot (max_inflight in flight at once).", 0,
                                                 NULL));
}

struct jobmgr *jobmgr_start(uv_loop_t *loop, struct kclient *kc, const struct jobmgr_options *o, char *err,
                            size_t errlen) {
    struct jobmgr *jm = calloc(1, sizeof *jm);
    if (!jm) {
        snprintf(err, errlen, "jobmgr: out of memory");
        return NULL;
    }
    jm->loop = loop;
    jm->maint_nodes = -1;
    jm->node_gen = 1;
    jm->kc = kc;
    jobmgr_options_default(&jm->o);
    if (o) {
        if (o->scheduler_name) jm->o.scheduler_name = o->scheduler_name;
        if (o->resync_ms) jm->o.resync_ms = o->resync_ms;
        if (o->tick_ms) jm->o.tick_ms = o->tick_ms;
        if (o->max_inflight) jm->o.max_inflight = o->max_inflight;
        if (o->update_max_attempts) jm->o.update_max_attempts = o->update_max_attempts;
        if (o->backoff_ms) jm->o.backoff_ms = o->backoff_ms;
        if (o->backoff_max_ms) jm->o.backoff_max_ms = o->backoff_max_ms;
        if (o->metrics) jobmgr_metrics_init(jm, o->metrics);
    }
    static const struct kc_informer_handlers jh = {on_job_add, on_job_update, on_job_delete, on_synced};
    static const struct kc_informer_handlers ph = {on_pod_add, on_pod_update, on_pod_delete, on_synced};
    static const struct kc_informer_handlers nh = {on_node_add, on_node_update, on_node_delete, on_synced};
    static const struct kc_informer_handlers rh = {on_pool_add, on_pool_update, on_pool_delete, on_synced};
    char sel[128];
    char q[160];
    kc_escape(PL_JOB, sel, sizeof sel);
    snprintf(q, sizeof q, "labelSelector=%s", sel);
    jm->jobs = kc_informer_new(kc, JM_JOBS_PATH "/jobs", NULL, &jh, jm);
    /* compact: the pods' text, not their trees (the native role's cache shares the feed) */
    static const struct kc_informer_opts po = {.compact = true};
    jm->pods = kc_informer_new_opts(kc, "/api/v1/pods", q, &po, &ph, jm);
    jm->nodes = kc_informer_new(kc, "/api/v1/nodes", NULL, &nh, jm);
    jm->pools = kc_informer_new(kc, JM_JOBS_PATH "/resourcepools", NULL, &rh, jm);
    if (!jm->jobs || !jm->pods || !jm->nodes || !jm->pools || kc_informer_start(jm->jobs) ||
        kc_informer_start(jm->pods) || kc_informer_start(jm->nodes) || kc_informer_start(jm->pools)) {
        snprintf(err, errlen, "jobmgr: cannot start the informers");
        kc_informer_free(jm->jobs);
        kc_informer_free(jm->pods);
        kc_informer_free(jm->nodes);
        kc_informer_free(jm->pools);
        free(jm);
        return NULL;
    }
    uv_timer_init(loop, &jm->tick);
    uv_timer_init(loop, &jm->resync);
    uv_timer_init(loop, &jm->wake);
    jm->tick.data = jm->resync.data = jm->wake.data = jm;
    jm->open_handles = 3;
    if (jm->dirty) arm_tick(jm); /* marked while the informers started */
    uv_timer_start(&jm->resync, on_resync, jm->o.resync_ms, jm->o.resync_ms);
    jm_log("info", "msg=started scheduler=%s resync_ms=%u", jm->o.scheduler_name, jm->o.resync_ms);
    return jm;
}

void jobmgr_stop(struct jobmgr *jm) {
    if (!jm) return;
    jm->stopping = true;
    kc_informer_free(jm->jobs);
    kc_informer_free(jm->pods);
    kc_informer_free(jm->nodes);
    kc_informer_free(jm->pools);
    jm->jobs = jm->pods = jm->nodes = jm->pools = NULL;
    fleet_stale(jm);
    json_decref(jm->parents);
    jm->parents = NULL;
    for (size_t i = 0; i < jm->nbuckets; i++) {
        for (struct jm_job *j = jm->buckets[i], *next; j; j = next) {
            next = j->hnext;
            job_destroy(j);
        }
        jm->buckets[i] = NULL;
    }
    jm->dirty = NULL;
    for (struct jm_req *q = jm->qhead, *next; q; q = next) {
        next = q->next;
        req_free(q);
    }
    jm->qhead = jm->qtail = NULL;
    for (int i = 0; i < jm->nreasons; i++) free(jm->reasons[i]); /* no record is left to point at them */
    jm->nreasons = 0;
    uv_timer_stop(&jm->tick);
    uv_timer_stop(&jm->resync);
    uv_timer_stop(&jm->wake);
    uv_close((uv_handle_t *)&jm->tick, handle_closed);
    uv_close((uv_handle_t *)&jm->resync, handle_closed);
    uv_close((uv_handle_t *)&jm->wake, handle_closed);
}
