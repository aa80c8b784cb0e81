/* resmgr: the resource manager role (ctl.h, docs/architecture.md).
 *
 * The leader (a Redis lease with a fencing token) keeps the cluster model
 * (pools, nodes, pods through informers), turns unbound pods that ask for
 * Peloton into gangs, queues them per pool in priority order (admit.c, mirrored
 * in Redis ZSETs), admits them against entitlement each round and pushes the
 * admitted gangs to the Redis ready queue for placement. It plans preemption
 * (preempt.c) and evicts the victims, and writes each pool's entitlement,
 * allocation and demand into its status. A new leader rebuilds everything from
 * the API and Redis: bound pods are allocation, gangs already in the ready or
 * retry queue stay admitted, every other unbound pod is pending.
 *
 * It is also the pool controller for deletion: a pool marked for deletion
 * (deletionTimestamp, kept by the CRD_POOL_FINALIZER finalizer) admits no new
 * work (admit.c) and loses its finalizer here once it has no child pools and
 * no pod holds work in it, so no usage ever leaves the tree's accounting.
 *
 * This file: informers, gangs, admission rounds, the lease, start and stop;
 * resmgr_preempt.c the preemption pass; resmgr_pools.c pool status and
 * deletion; resmgr_int.h what they share. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admit.h"
#include "cluster.h"
#include "crd_pool.h"
#include "ctl.h"
#include "labels.h"
#include "ctl_metrics.h"
#include "preempt.h"
#include "quantity.h"
#include "strmap.h"

#include "ctl_lease.h"
#include "resmgr_int.h"

void resmgr_options_default(struct resmgr_options *o) {
    memset(o, 0, sizeof *o);
    o->serve_default_scheduler = true;
    o->round_ms = 20;
    o->lease_ms = 10000;
    o->preempt_ms = 1000;
    o->status_ms = 1000;
    o->over_checks = 3;
    o->gang_wait_ms = 1000;
    o->ready_timeout_ms = 30000;
}

static bool eligible(const struct resmgr *r, const struct cm_pod *p) {
    if (p->bad || p->node || p->info.terminal || p->info.deleting) return false;
    if (!strcmp(p->info.scheduler, PELOTON_SCHEDULER)) return true;
    return r->o.serve_default_scheduler && !strcmp(p->info.scheduler, "default-scheduler");
}

void rm_gang_key(const char *ns, const char *name, const char *gang, char *out, size_t len) {
    if (gang) snprintf(out, len, "%s/%s", ns, gang);
    else snprintf(out, len, "%s/pod:%s", ns, name);
}

static void on_round(uv_timer_t *t);

static uint64_t round_period(const struct resmgr *r) { return r->o.round_ms ? r->o.round_ms : 20; }

/* A gang to look at. The first one after a whole round period without work
 * brings the round forward to the next loop turn (the rest of this turn's
 * events join it): a pod arriving at an idle scheduler does not wait up to a
 * period. While work keeps coming the rounds keep their period, since small
 * rounds cost more per pod. */
static void mark(struct resmgr *r, const char *key) {
    bool first = strmap_count(&r->dirty) == 0;
    strmap_put(&r->dirty, key, (void *)1, NULL);
    uint64_t now = uv_now(r->env.loop), period = round_period(r);
    if (first && r->leader && now - r->busy_ms >= period) {
        r->busy_ms = now; /* once per idle spell */
        uv_timer_start(&r->round_t, on_round, 0, period);
    }
}

/* The gang a pod belongs to (its gang label, else itself), marked. */
static void mark_gang(struct resmgr *r, const char *ns, const char *name, const char *gang) {
    char key[600];
    rm_gang_key(ns, name, gang && gang[0] ? gang : NULL, key, sizeof key);
    mark(r, key);
}

static void mark_obj(struct resmgr *r, json_t *obj) {
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace")),
               *name = json_string_value(json_object_get(md, "name")),
               *gang = json_string_value(json_object_get(json_object_get(md, "labels"), PL_GANG));
    if (ns && name) mark_gang(r, ns, name, gang);
}

static void gang_free(struct rm_gang *g) {
    if (!g) return;
    free(g->key);
    free(g->ns);
    free(g->label);
    free(g->pool);
    free(g);
}

static void gang_drop(struct resmgr *r, struct rm_gang *g) {
    if (g->st == RG_QUEUED) admit_remove(&g->g);
    if (r->leader) {
        if (g->pool) ctl_lease_defer(r->lease, r->env.db, "ZREM %s%s %s", CTL_KEY_PENDING, g->pool, g->key);
        ctl_lease_defer(r->lease, r->env.db, "DEL %s%s", CTL_KEY_GANG, g->key);
    }
    strmap_del(&r->gangs, g->key);
    gang_free(g);
}

/* ---- informer handlers ---- */

/* The gang the model has p in, marked (a cluster_foreach_pod callback). */
static int mark_each(void *ud, struct cm_pod *p) {
    mark_gang(ud, p->ns, p->name, p->info.gang);
    return 0;
}

/* The gang the model has the pod in (before a change to it), marked: the
 * pod feed keeps no objects, so an update brings no old one. */
static void mark_known(struct resmgr *r, const json_t *obj) {
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace")),
               *name = json_string_value(json_object_get(md, "name"));
    struct cm_pod *p = ns && name ? cluster_pod(r->cm, ns, name) : NULL;
    if (p) mark_each(r, p);
}

/* The running-gang count follows the model's pod (resmgr_pools.c). */
static void track_obj(struct resmgr *r, const json_t *obj) {
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace")),
               *name = json_string_value(json_object_get(md, "name"));
    if (!ns || !name) return;
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    rm_track_pod(r, key, cluster_pod(r->cm, ns, name));
}

static void on_pod_add(void *ud, json_t *obj) {
    struct resmgr *r = ud;
    mark_known(r, obj); /* a re-list's add may be a pod the model has */
    cluster_pod_set(r->cm, obj);
    mark_obj(r, obj);
    track_obj(r, obj);
}
static void on_pod_update(void *ud, json_t *old, json_t *obj) { on_pod_add(ud, obj); }
static void on_pod_delete(void *ud, json_t *obj) {
    struct resmgr *r = ud;
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace")),
               *name = json_string_value(json_object_get(md, "name"));
    mark_known(r, obj); /* a re-list reports a deletion without labels */
    mark_obj(r, obj);
    if (ns && name) {
        char key[600];
        snprintf(key, sizeof key, "%s/%s", ns, name);
        strmap_del(&r->evicting, key);
        cluster_pod_del(r->cm, ns, name);
        rm_track_pod(r, key, NULL);
    }
}
static const char *obj_name(const json_t *obj) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}
static void on_node_add(void *ud, json_t *obj) { cluster_node_set(((struct resmgr *)ud)->cm, obj); }
static void on_node_update(void *ud, json_t *old, json_t *obj) { on_node_add(ud, obj); }
static void on_node_delete(void *ud, json_t *obj) {
    if (obj_name(obj)) cluster_node_del(((struct resmgr *)ud)->cm, obj_name(obj));
}
/* What was last written to a pool's status is kept so that an unchanged one
 * is not written again; a pool whose stored status no longer holds it (one
 * deleted and created again under its name, or status written by someone
 * else) is written at the next status tick. Only the fields written are
 * compared, so a condition added by another writer causes no write loop. */
static void forget_sent_unless_stored(struct resmgr *r, const json_t *obj) {
    const char *name = obj_name(obj);
    json_t *sent = name ? json_object_get(r->sent, name) : NULL;
    if (!sent) return;
    const json_t *stored = json_object_get(obj, "status");
    const char *key;
    json_t *v;
    json_object_foreach(sent, key, v) {
        if (!json_equal(v, json_object_get(stored, key))) {
            json_object_del(r->sent, name);
            return;
        }
    }
}

static void on_pool_add(void *ud, json_t *obj) {
    struct resmgr *r = ud;
    cluster_pool_set(r->cm, obj);
    forget_sent_unless_stored(r, obj);
    const char *name = obj_name(obj);
    if (!name) return;
    if (crd_pool_deleting(obj) && crd_pool_has_finalizer(obj)) json_object_set(r->terminating, name, obj);
    else json_object_del(r->terminating, name);
}
static void on_pool_update(void *ud, json_t *old, json_t *obj) { on_pool_add(ud, obj); }
static void on_pool_delete(void *ud, json_t *obj) {
    struct resmgr *r = ud;
    if (!obj_name(obj)) return;
    cluster_pool_del(r->cm, obj_name(obj));
    json_object_del(r->sent, obj_name(obj));
    json_object_del(r->terminating, obj_name(obj));
    json_object_del(r->told_waiting, obj_name(obj));
}
static void on_ns_add(void *ud, json_t *obj) {
    struct resmgr *r = ud;
    cluster_ns_set(r->cm, obj);
    r->retrack = true; /* its default pool may have changed (rare: a walk is fine) */
}
static void on_ns_update(void *ud, json_t *old, json_t *obj) { on_ns_add(ud, obj); }
static void on_ns_delete(void *ud, json_t *obj) {
    if (obj_name(obj)) cluster_ns_del(((struct resmgr *)ud)->cm, obj_name(obj));
    ((struct resmgr *)ud)->retrack = true;
}

static bool synced(const struct resmgr *r) {
    return kc_informer_synced(r->pods) && kc_informer_synced(r->nodes) && kc_informer_synced(r->pools) &&
           kc_informer_synced(r->nss);
}

/* ---- gangs ---- */

static void admit_pod(struct resmgr *r, struct cm_pod *p) {
    cluster_admit(r->cm, p, true);
    rm_track_pod(r, p->key, p);
}

static struct rm_gang *gang_get(struct resmgr *r, const char *key, const char *ns, const char *label) {
    struct rm_gang *g = strmap_get(&r->gangs, key);
    if (g) return g;
    if (!(g = calloc(1, sizeof *g)) || !(g->key = strdup(key)) || !(g->ns = strdup(ns)) ||
        (label && !(g->label = strdup(label))) || strmap_put(&r->gangs, key, g, NULL)) {
        gang_free(g);
        return NULL;
    }
    return g;
}

/* The gang's live members: pods of the gang label in ns, or the single pod. */
size_t rm_gang_members(struct resmgr *r, const char *key, struct cm_pod **out, size_t cap, const char **ns_out,
                       const char **label_out, char *nsbuf, size_t nslen) {
    const char *slash = strchr(key, '/');
    if (!slash || (size_t)(slash - key) >= nslen) return 0;
    memcpy(nsbuf, key, (size_t)(slash - key));
    nsbuf[slash - key] = 0;
    *ns_out = nsbuf;
    if (!strncmp(slash + 1, "pod:", 4)) {
        *label_out = NULL;
        struct cm_pod *p = cluster_pod(r->cm, nsbuf, slash + 5);
        if (!p || p->info.terminal) return 0;
        out[0] = p;
        return 1;
    }
    *label_out = slash + 1;
    return cluster_gang_members(r->cm, nsbuf, slash + 1, out, cap);
}

/* Keeps track of a gang whose members do not all exist yet (waiting, with
 * `have` of `size`), or forgets it. A change of count makes its members due
 * again gang_wait_ms later, so members created in one burst say nothing. */
static void note_incomplete(struct resmgr *r, const char *key, bool waiting, uint32_t have, uint32_t size) {
    if (!waiting) {
        if (strmap_count(&r->incomplete)) free(strmap_del(&r->incomplete, key));
        return;
    }
    struct rm_incomplete *w = strmap_get(&r->incomplete, key);
    if (!w) {
        if (!(w = calloc(1, sizeof *w))) return;
        if (strmap_put(&r->incomplete, key, w, NULL)) {
            free(w);
            return;
        }
    } else if (w->have == have && w->size == size) {
        return;
    }
    w->since_ms = uv_now(r->env.loop);
    w->have = have;
    w->size = size;
    w->told = false;
}

/* Tells every member of a gang that cannot queue (its pool is missing or
 * not a leaf, or its queue refuses it) why: a FailedScheduling Event
 * (aggregated by the recorder) and PodScheduled=False, reason
 * WaitingForPool, with the same message. Told again only when the message
 * changes (a pool deleted under a queued gang: "not found" once it is gone). */
static void tell_held(struct resmgr *r, struct rm_gang *g, struct cm_pod **m, uint32_t n, const char *msg) {
    uint64_t h = strmap_hash(msg) | 1;
    if (g->held == h) return;
    g->held = h;
    for (uint32_t j = 0; j < n; j++) {
        ctl_record(r->rec, "v1", "Pod", m[j]->ns, m[j]->name, m[j]->uid, "Warning", "FailedScheduling", "%s", msg);
        ctl_pod_unschedulable(r->env.kc, m[j]->ns, m[j]->name, m[j]->uid, CTL_REASON_POOL, msg);
    }
}

static void process_gang(struct resmgr *r, const char *key, struct cm_pod **buf) {
    char nsbuf[256];
    const char *ns = NULL, *label = NULL;
    size_t n = rm_gang_members(r, key, buf, RM_GANG_MAX, &ns, &label, nsbuf, sizeof nsbuf);
    if (n > RM_GANG_MAX) n = RM_GANG_MAX;
    struct rm_gang *g = strmap_get(&r->gangs, key);
    size_t nel = 0, nbound = 0, nadm = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i]->node) nbound++;
        else if (eligible(r, buf[i])) {
            buf[nel++] = buf[i]; /* compact: eligible first (bound ones are counted only) */
            if (buf[i]->admitted) nadm++;
        }
    }
    if (g && g->st == RG_ADMITTED) {
        if (nadm == 0) gang_drop(r, g); /* every member bound, ended or gone: placement is done */
        return;
    }
    uint32_t size = nel ? buf[0]->info.gang_size : 1;
    if (nel < size || nel == 0) { /* incomplete (or nothing to do) */
        if (g && (g->st == RG_QUEUED || nel == 0)) gang_drop(r, g);
        note_incomplete(r, key, nel && !nbound, (uint32_t)nel, size);
        return;
    }
    note_incomplete(r, key, false, 0, 0);
    if (g && g->st == RG_QUEUED) {
        /* membership unchanged and still queued: nothing to do; otherwise re-queue */
        if (g->g.ntasks == (uint32_t)size) return;
        admit_remove(&g->g);
        g->st = RG_WAIT;
    }
    if (!(g = gang_get(r, key, ns, label))) return;
    struct cm_pod *p0 = buf[0];
    struct respool *leaf = cluster_pod_pool(r->cm, p0);
    struct resvec demand = resvec_zero();
    uint32_t prio = 0;
    for (uint32_t i = 0; i < size; i++) {
        demand = resvec_add(demand, buf[i]->info.req);
        if (buf[i]->info.priority > prio) prio = buf[i]->info.priority;
    }
    if (!leaf) {
        char why[300];
        if (!p0->pool) { /* unmanaged: no admission, straight to placement */
            for (uint32_t i = 0; i < size; i++) admit_pod(r, buf[i]);
            g->st = RG_ADMITTED;
            g->readied_at = uv_now(r->env.loop);
            json_t *names = json_array();
            for (uint32_t i = 0; i < size; i++) json_array_append_new(names, json_string(buf[i]->name));
            char *s = json_dumps(names, JSON_COMPACT);
            json_decref(names);
            ctl_lease_defer(r->lease, r->env.db, "HSET %s%s ns %s pods %s pool %s epoch %lld", CTL_KEY_GANG, key,
                            ns, s ? s : "[]", "", r->epoch);
            ctl_lease_defer(r->lease, r->env.db, "RPUSH %s %s", CTL_KEY_READY, key);
            r->readied = true;
            free(s);
            return;
        }
        tell_held(r, g, buf, size, cluster_pod_pool_problem(r->cm, p0, why, sizeof why) ? why : "no resource pool");
        return;
    }
    admit_gang_init(&g->g, g->key, prio, p0->info.flags, size, demand);
    g->g.data = g;
    char err[256];
    if (admit_enqueue(leaf, &g->g, err, sizeof err)) {
        tell_held(r, g, buf, size, err);
        return;
    }
    g->st = RG_QUEUED;
    g->held = 0;
    g->queued_ns = metrics_now_ns();
    if (!g->queue_timed) { /* created -> queued, once a gang: from its first member's arrival */
        uint64_t first = g->queued_ns;
        for (uint32_t i = 0; i < size; i++)
            if (buf[i]->seen_ns && buf[i]->seen_ns < first) first = buf[i]->seen_ns;
        metrics_observe(metrics_series0(r->m.queueing), (double)(g->queued_ns - first) / 1e9);
        g->queue_timed = true;
        g->queued_ms = ctl_now_ms();
    }
    free(g->pool);
    g->pool = strdup(leaf->name);
    /* priority first (higher first), then FIFO: a lower score pops first */
    double score = -(double)prio * 1e12 + (double)g->g.seq;
    ctl_lease_defer(r->lease, r->env.db, "ZADD %s%s %.0f %s", CTL_KEY_PENDING, leaf->name, score, key);
}

/* After a new tree (pools changed), every queue is gone: queue again. */
static void requeue_all(struct resmgr *r) {
    size_t pos = 0;
    void *v;
    const char *k;
    while (strmap_next(&r->gangs, &pos, &k, &v)) {
        struct rm_gang *g = v;
        if (g->st == RG_QUEUED) g->st = RG_WAIT; /* its queue was released with the old tree */
        if (g->st == RG_WAIT) mark(r, k);
    }
}

static void admit_pass(struct resmgr *r) {
    static struct gang *out[RM_ROUND_CAP];
    struct respool_tree *t = cluster_tree(r->cm);
    size_t n = admit_round(t, out, RM_ROUND_CAP);
    if (!n) return;
    static struct cm_pod *buf[RM_GANG_MAX];
    for (size_t i = 0; i < n; i++) {
        struct rm_gang *g = out[i]->data;
        admit_release(out[i]->pool, out[i]->flags, out[i]->demand); /* the model keeps the allocation */
        char nsbuf[256];
        const char *ns, *label;
        size_t m = rm_gang_members(r, g->key, buf, RM_GANG_MAX, &ns, &label, nsbuf, sizeof nsbuf);
        json_t *names = json_array();
        uint32_t took = 0;
        for (size_t j = 0; j < m && took < out[i]->ntasks; j++)
            if (eligible(r, buf[j])) {
                admit_pod(r, buf[j]);
                json_array_append_new(names, json_string(buf[j]->name));
                took++;
            }
        g->st = RG_ADMITTED;
        g->readied_at = uv_now(r->env.loop);
        char *s = json_dumps(names, JSON_COMPACT);
        json_decref(names);
        ctl_lease_defer(r->lease, r->env.db, "ZREM %s%s %s", CTL_KEY_PENDING, g->pool, g->key);
        /* queued and admitted: placement puts them on the pods with their Bindings (no write of their own) */
        ctl_lease_defer(r->lease, r->env.db, "HSET %s%s ns %s pods %s pool %s epoch %lld admitted %lld queued %lld",
                        CTL_KEY_GANG, g->key, g->ns, s ? s : "[]", g->pool, r->epoch, (long long)ctl_now_ms(),
                        (long long)g->queued_ms);
        ctl_lease_defer(r->lease, r->env.db, "RPUSH %s %s", CTL_KEY_READY, g->key);
        r->readied = true;
        rm_metrics_decision(&r->m, g->pool, 0, true);
        metrics_observe(metrics_series0(r->m.admit_wait), (double)(metrics_now_ns() - g->queued_ns) / 1e9);
        free(s);
    }
    ctl_redis_settle(r->env.db); /* placement may pop them at once */
    r->admitted_total += n;
    cluster_invalidate(r->cm);
}

/* One gang record read back (recover): the gang admitted again, and its
 * members the model has. */
static bool recover_gang(struct resmgr *r, const char *key, const redisReply *rec) {
    if (!rec || rec->type != REDIS_REPLY_ARRAY || rec->elements != 2) return false;
    const redisReply *ns = rec->element[0], *pods = rec->element[1];
    json_t *names = pods->type == REDIS_REPLY_STRING ? json_loads(pods->str, 0, NULL) : NULL;
    bool ok = ns->type == REDIS_REPLY_STRING && json_is_array(names);
    if (ok) {
        const char *slash = strchr(key, '/');
        struct rm_gang *g = gang_get(r, key, ns->str, slash && strncmp(slash + 1, "pod:", 4) ? slash + 1 : NULL);
        if (g) {
            g->st = RG_ADMITTED;
            g->readied_at = uv_now(r->env.loop);
        }
        size_t j;
        json_t *nm;
        json_array_foreach(names, j, nm) {
            struct cm_pod *p = cluster_pod(r->cm, ns->str, json_string_value(nm) ? json_string_value(nm) : "");
            if (p && eligible(r, p)) admit_pod(r, p);
        }
    }
    json_decref(names);
    return ok;
}

/* Gang records read per pipeline (recover): one round trip each, not two
 * per gang (at 160,000 admitted gangs, two blocking round trips each held
 * the controllers' loop past the leases, which the next term repeated). */
#define RM_RECOVER_BATCH 1024

/* A new leader: gangs in the ready and retry queues were admitted by the
 * previous one; their unbound members stay admitted. */
static void recover(struct resmgr *r) {
    redisReply *ready = ctl_redis(r->env.db, "LRANGE %s 0 -1", CTL_KEY_READY);
    redisReply *retry = ctl_redis(r->env.db, "ZRANGE %s 0 -1", CTL_KEY_RETRY);
    redisReply *lists[2] = {ready, retry};
    size_t n = 0;
    for (int l = 0; l < 2; l++) {
        if (!lists[l] || lists[l]->type != REDIS_REPLY_ARRAY) continue;
        for (size_t at = 0; at < lists[l]->elements; at += RM_RECOVER_BATCH) {
            size_t end = at + RM_RECOVER_BATCH < lists[l]->elements ? at + RM_RECOVER_BATCH : lists[l]->elements;
            for (size_t i = at; i < end; i++)
                ctl_redis_append(r->env.db, "HMGET %s%s ns pods", CTL_KEY_GANG, lists[l]->element[i]->str);
            for (size_t i = at; i < end; i++) {
                redisReply *rec = ctl_redis_reply(r->env.db);
                if (recover_gang(r, lists[l]->element[i]->str, rec)) n++;
                freeReplyObject(rec);
            }
        }
    }
    freeReplyObject(ready);
    freeReplyObject(retry);
    /* pending queues are rebuilt from the pods */
    redisReply *keys = ctl_redis(r->env.db, "KEYS %s*", CTL_KEY_PENDING);
    if (keys && keys->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < keys->elements; i++)
            freeReplyObject(ctl_lease_redis(r->lease, r->env.db, "DEL %s", keys->element[i]->str));
    freeReplyObject(keys);
    fprintf(stderr, "level=info msg=\"resmgr: recovered\" epoch=%lld recovered_gangs=%zu\n", r->epoch, n);
}

/* What a waiting gang is told, as a code: the rule that holds it and the
 * kind it fails in; gangs not yet tried (behind others) have their own. Its
 * members hear again only when the code changes, not when the figures in
 * the message move. */
static uint32_t wait_code(const struct gang *h) { return 1 + ((uint32_t)h->why.check << 4 | (uint32_t)h->why.kind); }

/* Tells every member of a gang still waiting for admission why, when that
 * changed since it was last told: a FailedScheduling Event (aggregated by
 * the recorder) and PodScheduled=False, reason WaitingForAdmission, with
 * the same message (admit_why_format's: "waiting for admission: pool /a/b at
 * its cpu entitlement: 3 of 4 cores allocated, gang needs 2; position 1 of 2
 * in the pool's queue; ...", or "...: queued behind higher-priority or
 * earlier gangs, ..."). */
static void tell_wait(struct resmgr *r, struct rm_gang *g) {
    static struct cm_pod *buf[RM_GANG_MAX];
    uint32_t code = wait_code(&g->g);
    if (g->st != RG_QUEUED || g->said == code) return;
    char why[700], msg[760], nsbuf[256];
    const char *ns, *label;
    admit_why_format(&g->g, why, sizeof why);
    snprintf(msg, sizeof msg, "waiting for admission: %s", why);
    rm_metrics_decision(&r->m, g->pool, (int)g->g.why.check, false);
    size_t m = rm_gang_members(r, g->key, buf, RM_GANG_MAX, &ns, &label, nsbuf, sizeof nsbuf);
    for (size_t j = 0; j < m; j++) {
        if (!eligible(r, buf[j])) continue;
        ctl_record(r->rec, "v1", "Pod", buf[j]->ns, buf[j]->name, buf[j]->uid, "Warning", "FailedScheduling", "%s",
                   msg);
        ctl_pod_unschedulable(r->env.kc, buf[j]->ns, buf[j]->name, buf[j]->uid, CTL_REASON_ADMISSION, msg);
    }
    g->said = code;
}

/* Tells the members of gangs missing members for gang_wait_ms why they
 * wait: a FailedScheduling Event and PodScheduled=False, reason
 * WaitingForGang ("gang g8: 5/8 members, waiting for 3 more ..."), once per
 * member count. A gang created in a burst is complete before it is due: no
 * write for it. */
static void tell_incomplete(struct resmgr *r) {
    static struct cm_pod *buf[RM_GANG_MAX];
    if (!strmap_count(&r->incomplete)) return;
    uint64_t now = uv_now(r->env.loop), wait = r->o.gang_wait_ms ? r->o.gang_wait_ms : 1000;
    size_t pos = 0;
    const char *key;
    void *v;
    while (strmap_next(&r->incomplete, &pos, &key, &v)) {
        struct rm_incomplete *w = v;
        if (w->told || now - w->since_ms < wait) continue;
        char nsbuf[256], msg[400];
        const char *ns, *label;
        size_t m = rm_gang_members(r, key, buf, RM_GANG_MAX, &ns, &label, nsbuf, sizeof nsbuf);
        snprintf(msg, sizeof msg,
                 "gang %.200s: %u/%u members, waiting for %u more (peloton.io/gang-size: a gang is admitted and "
                 "placed all or nothing)",
                 label ? label : "", w->have, w->size, w->size > w->have ? w->size - w->have : 0);
        for (size_t j = 0; j < m; j++) {
            if (!eligible(r, buf[j]) ||
                ctl_recorder_has(r->rec, buf[j]->ns, buf[j]->name, buf[j]->uid, "Warning", "FailedScheduling", msg))
                continue;
            ctl_record(r->rec, "v1", "Pod", buf[j]->ns, buf[j]->name, buf[j]->uid, "Warning", "FailedScheduling",
                       "%s", msg);
            ctl_pod_unschedulable(r->env.kc, buf[j]->ns, buf[j]->name, buf[j]->uid, CTL_REASON_GANG, msg);
        }
        w->told = true;
    }
}

/* After the round's admissions: every queue's head (whose rule may have
 * changed) is told why it waits, and so are the gangs queued in the round
 * before this one that are still waiting. A gang behind others is told a
 * round late: most of a burst is admitted at the next round (a round admits
 * up to RM_ROUND_CAP gangs), and telling them would be a write per pod on the
 * scheduling path. */
static void tell_waiting(struct resmgr *r) {
    for (size_t i = 0; i < r->naged; i++) {
        struct rm_gang *g = strmap_get(&r->gangs, r->aged[i]);
        if (g) tell_wait(r, g);
        free(r->aged[i]);
    }
    r->naged = 0;
    for (size_t i = 0; i < r->nfresh; i++) {
        struct rm_gang *g = r->fresh[i];
        if (g->st != RG_QUEUED || g->said) continue;
        if (r->naged == r->capaged) {
            size_t cap = r->capaged ? r->capaged * 2 : 256;
            char **v = realloc(r->aged, cap * sizeof *v);
            if (!v) break; /* told when it reaches its queue's head */
            r->aged = v;
            r->capaged = cap;
        }
        if ((r->aged[r->naged] = strdup(g->key))) r->naged++;
    }
    r->nfresh = 0;
    tell_incomplete(r);
    size_t n;
    struct respool *const *all = respool_preorder(cluster_tree(r->cm), &n);
    for (size_t i = 0; all && i < n; i++) {
        if (!respool_is_leaf(all[i]) || !all[i]->admit) continue;
        for (int q = 0; q < ADMIT_NQUEUES; q++) {
            struct gang *h = admit_head(all[i], (enum admit_queue)q);
            if (h && h->data) tell_wait(r, h->data);
        }
    }
}

/* Notes a gang that process_gang left queued, for tell_waiting. */
static void note_fresh(struct resmgr *r, const char *key) {
    struct rm_gang *g = strmap_get(&r->gangs, key);
    if (!g || g->st != RG_QUEUED || g->said) return;
    if (r->nfresh == r->capfresh) {
        size_t cap = r->capfresh ? r->capfresh * 2 : 256;
        struct rm_gang **v = realloc(r->fresh, cap * sizeof *v);
        if (!v) return; /* told when it reaches its queue's head */
        r->fresh = v;
        r->capfresh = cap;
    }
    r->fresh[r->nfresh++] = g;
}

static void forget_gangs(struct resmgr *r);

/* Placement takes a gang off the ready queue and binds its members or puts
 * it on the retry queue; an engine that dies in between leaves the gang
 * admitted here and in no queue. Once a second, a gang admitted (or readied
 * again) ready_timeout_ms ago that still has unbound members, and that
 * neither queue holds, goes back on the ready queue: at least once, not at
 * most once (a second engine binding a member already bound gets 409).
 * LPOS reads the ready queue from its head: while the queue is longer than
 * RM_LOST_SCAN_MAX (placement far behind, its gangs waiting there as they
 * should), the check is put off for another timeout: in bench_scale's
 * backlog, 256 LPOS a second over 160,000 queued gangs took 2.6 ms each,
 * Redis was busy two thirds of the time, and every request through the API
 * server (lease renewals too) waited on it. A gang lost meanwhile goes back
 * once the queue is short, behind as many gangs as it would have been. */
#define RM_LOST_CHECK_MAX 256 /* gangs looked up per check */
#define RM_LOST_SCAN_MAX 4096 /* the longest ready queue LPOS is run over */
static void ready_lost(struct resmgr *r) {
    uint64_t now = uv_now(r->env.loop), timeout = r->o.ready_timeout_ms;
    if (!timeout || !r->env.db || now - r->lost_check_ms < 1000) return;
    /* The connection was renewed during this round (or these lookups): the
     * gang records written on the old one may be lost, and the next round
     * rebuilds every gang from Redis; readied now, a gang whose record was
     * lost would be admitted and queued a second time by the rebuild. */
    if (r->env.db->gen != r->db_gen) return;
    r->lost_check_ms = now;
    struct rm_gang *due[RM_LOST_CHECK_MAX];
    size_t n = 0, pos = 0;
    void *v;
    while (n < RM_LOST_CHECK_MAX && strmap_next(&r->gangs, &pos, NULL, &v)) {
        struct rm_gang *g = v;
        if (g->st == RG_ADMITTED && now - g->readied_at >= timeout) due[n++] = g;
    }
    if (!n) return;
    redisReply *len = ctl_redis(r->env.db, "LLEN %s", CTL_KEY_READY);
    bool long_queue = !len || len->type != REDIS_REPLY_INTEGER || len->integer > RM_LOST_SCAN_MAX;
    if (long_queue && len && len->type == REDIS_REPLY_INTEGER && now - r->lost_postponed_ms >= 60000) {
        r->lost_postponed_ms = now;
        fprintf(stderr, "level=info msg=\"resmgr: ready queue long, lost-gang check put off\" queued=%lld "
                "timeout_ms=%llu\n", len->integer, (unsigned long long)timeout);
    }
    freeReplyObject(len);
    if (long_queue || r->env.db->gen != r->db_gen) {
        for (size_t i = 0; i < n; i++) due[i]->readied_at = now;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        ctl_redis_append(r->env.db, "LPOS %s %s", CTL_KEY_READY, due[i]->key);
        ctl_redis_append(r->env.db, "ZSCORE %s %s", CTL_KEY_RETRY, due[i]->key);
    }
    size_t again = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *in_ready = ctl_redis_reply(r->env.db), *in_retry = ctl_redis_reply(r->env.db);
        if (r->env.db->gen != r->db_gen) { /* see below */
            freeReplyObject(in_ready);
            freeReplyObject(in_retry);
            continue;
        }
        bool held = !in_ready || !in_retry || in_ready->type != REDIS_REPLY_NIL || in_retry->type != REDIS_REPLY_NIL;
        freeReplyObject(in_ready);
        freeReplyObject(in_retry);
        due[i]->readied_at = now;
        if (held) continue; /* queued, or Redis did not say: looked at again after the timeout */
        ctl_lease_defer(r->lease, r->env.db, "RPUSH %s %s", CTL_KEY_READY, due[i]->key);
        again++;
    }
    if (!again) return;
    r->readied = true;
    fprintf(stderr, "level=warn msg=\"resmgr: admitted gangs in no queue, readied again\" gangs=%zu "
            "timeout_ms=%llu\n", again, (unsigned long long)timeout);
}

static void on_round(uv_timer_t *t) {
    struct resmgr *r = t->data;
    if (!r->leader || !synced(r)) return;
    if (r->env.db && r->env.db->gen != r->db_gen) {
        /* Redis came back on a new connection (an outage, a failover) within
         * the lease: queue writes deferred on the old one may be lost, so
         * what was admitted is read back as at a new term */
        if (r->recovered)
            fprintf(stderr, "level=warn msg=\"resmgr: redis connection renewed, rebuilding\" epoch=%lld\n", r->epoch);
        r->db_gen = r->env.db->gen;
        forget_gangs(r);
        r->recovered = false;
    }
    if (!r->recovered) {
        cluster_refresh(r->cm);
        recover(r);
        cluster_foreach_pod(r->cm, mark_each, r);
        r->recovered = true;
    }
    if (cluster_refresh(r->cm)) return;
    if (cluster_tree(r->cm) != r->last_tree) {
        r->last_tree = cluster_tree(r->cm);
        requeue_all(r);
    }
    if (strmap_count(&r->dirty)) {
        r->busy_ms = uv_now(r->env.loop);
        static struct cm_pod *buf[RM_GANG_MAX];
        struct strmap d = r->dirty;
        memset(&r->dirty, 0, sizeof r->dirty);
        size_t pos = 0;
        const char *k;
        while (strmap_next(&d, &pos, &k, NULL)) {
            process_gang(r, k, buf);
            note_fresh(r, k);
        }
        strmap_free(&d);
        cluster_invalidate(r->cm);
        cluster_refresh(r->cm);
    }
    admit_pass(r);
    ready_lost(r);
    tell_waiting(r);
    if (r->readied && r->o.on_ready) {
        ctl_redis_settle(r->env.db); /* the ready queue holds them before anyone looks */
        r->o.on_ready(r->o.on_ready_ud);
    }
    r->readied = false;
}

/* ---- the lease ---- */

/* A term begins or ends (ctl_lease.h). */
static void on_term(void *ud, bool leader, long long epoch) {
    struct resmgr *r = ud;
    r->recovered = false;
    if (!leader) {
        r->leader = false; /* stop acting; a later term rebuilds from scratch */
        return;
    }
    r->epoch = epoch;
    forget_gangs(r); /* state from an earlier term is not trusted: rebuild */
    r->leader = true;
}

/* Drops every gang; the next round rebuilds them from Redis and the pods (recover). */
static void forget_gangs(struct resmgr *r) {
    size_t pos = 0;
    void *v;
    while (strmap_next(&r->gangs, &pos, NULL, &v)) {
        struct rm_gang *g = v;
        if (g->st == RG_QUEUED) admit_remove(&g->g);
        gang_free(g);
    }
    strmap_free(&r->gangs);
    r->nfresh = 0; /* they pointed at the gangs just freed */
}

/* ---- start and stop ---- */

struct resmgr *resmgr_start(const struct ctl_env *env, const struct resmgr_options *o, char *err, size_t errlen) {
    struct resmgr *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->env = *env;
    if (o) r->o = *o;
    else resmgr_options_default(&r->o);
    rm_metrics_init(&r->m, env->metrics);
    snprintf(r->id, sizeof r->id, "%s-%ld-%d", env->identity ? env->identity : "pelotond", (long)time(NULL),
             (int)getpid());
    struct cm_options co;
    cm_options_default(&co);
    co.default_pool = r->o.default_pool;
    co.count_pending = false; /* pending demand lives in the admission queues */
    co.no_engine = true;      /* resmgr admits and preempts; placement places */
    co.keep = CM_KEEP_NONE;   /* resmgr reads what the model decodes, and the events' own objects */
    struct preempt_config pc;
    preempt_config_default(&pc);
    pc.over_checks = r->o.over_checks ? r->o.over_checks : 3;
    r->cm = cluster_new(&co);
    r->sent = json_object();
    r->terminating = json_object();
    r->holders = json_object();
    r->held_n = json_object();
    r->running = json_object();
    r->told_waiting = json_object();
    r->rec = ctl_recorder_new(env->kc, RM_COMPONENT, 0);
    if (!r->cm || !r->sent || !r->terminating || !r->holders || !r->held_n || !r->running || !r->told_waiting || !r->rec || preempt_state_init(&r->ps, &pc)) {
        snprintf(err, errlen, "out of memory");
        resmgr_stop(r);
        return NULL;
    }
    static const struct kc_informer_handlers hp = {on_pod_add, on_pod_update, on_pod_delete, NULL},
                                             hn = {on_node_add, on_node_update, on_node_delete, NULL},
                                             hr = {on_pool_add, on_pool_update, on_pool_delete, NULL},
                                             hs = {on_ns_add, on_ns_update, on_ns_delete, NULL};
    r->pods = kc_informer_new_opts(env->kc, "/api/v1/pods", NULL, &ctl_pods_slim, &hp, r);
    r->nodes = kc_informer_new(env->kc, "/api/v1/nodes", NULL, &hn, r);
    r->pools = kc_informer_new(env->kc, "/apis/peloton.io/v1alpha1/resourcepools", NULL, &hr, r);
    r->nss = kc_informer_new(env->kc, "/api/v1/namespaces", NULL, &hs, r);
    if (!r->pods || !r->nodes || !r->pools || !r->nss || kc_informer_start(r->pods) ||
        kc_informer_start(r->nodes) || kc_informer_start(r->pools) || kc_informer_start(r->nss)) {
        snprintf(err, errlen, "resmgr: cannot start informers");
        resmgr_stop(r);
        return NULL;
    }
    uv_timer_t *ts[3] = {&r->round_t, &r->preempt_t, &r->status_t};
    for (int i = 0; i < 3; i++) {
        uv_timer_init(env->loop, ts[i]);
        ts[i]->data = r;
        r->timers_open++;
    }
    if (!(r->lease = ctl_lease_new(env->loop, env->db, "resmgr", r->id, r->o.lease_ms, on_term, r))) {
        snprintf(err, errlen, "out of memory");
        resmgr_stop(r);
        return NULL;
    }
    ctl_lease_metrics(r->lease, env->metrics);
    ctl_lease_begin(r->lease); /* its writes name r->lease: kept before the first term begins */
    uv_timer_start(&r->round_t, on_round, r->o.round_ms, round_period(r));
    uv_timer_start(&r->preempt_t, rm_on_preempt, r->o.preempt_ms, r->o.preempt_ms ? r->o.preempt_ms : 1000);
    uv_timer_start(&r->status_t, rm_on_status, r->o.status_ms, r->o.status_ms ? r->o.status_ms : 1000);
    return r;
}

bool resmgr_is_leader(const struct resmgr *r) { return r && r->leader; }

static void on_closed(uv_handle_t *h) {
    struct resmgr *r = h->data;
    if (--r->timers_open == 0) free(r);
}

void resmgr_stop(struct resmgr *r) {
    if (!r) return;
    ctl_lease_stop(r->lease); /* hands over at once rather than after the lease runs out */
    r->lease = NULL;
    kc_informer_free(r->pods);
    kc_informer_free(r->nodes);
    kc_informer_free(r->pools);
    kc_informer_free(r->nss);
    size_t pos = 0;
    void *v;
    while (strmap_next(&r->gangs, &pos, NULL, &v)) gang_free(v);
    strmap_free(&r->gangs);
    strmap_free(&r->dirty);
    strmap_free(&r->evicting);
    rm_metrics_free(&r->m);
    cluster_free(r->cm); /* releases the admission queues */
    preempt_state_free(&r->ps);
    json_decref(r->sent);
    json_decref(r->terminating);
    json_decref(r->holders);
    json_decref(r->held_n);
    json_decref(r->running);
    json_decref(r->told_waiting);
    if (r->rec) {
        uint64_t posted, counted;
        ctl_recorder_counts(r->rec, &posted, &counted);
        fprintf(stderr, "level=info msg=\"resmgr: stopped\" events_posted=%llu events_counted=%llu\n",
                (unsigned long long)posted, (unsigned long long)counted);
    }
    ctl_recorder_free(r->rec);
    free(r->fresh);
    for (size_t i = 0; i < r->naged; i++) free(r->aged[i]);
    free(r->aged);
    pos = 0;
    while (strmap_next(&r->incomplete, &pos, NULL, &v)) free(v);
    strmap_free(&r->incomplete);
    if (!r->timers_open) {
        free(r);
        return;
    }
    uv_timer_t *ts[3] = {&r->round_t, &r->preempt_t, &r->status_t};
    for (int i = 0; i < 3; i++) uv_close((uv_handle_t *)ts[i], on_closed);
}
