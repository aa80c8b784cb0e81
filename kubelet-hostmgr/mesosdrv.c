/* The host manager's Mesos driver (mesosdrv.h): ops, calls to the master,
 * offers and launches, the pump, the subscription, the informers.
 *
 * State (mesosdrv_int.h): agents by id (what the master said of each, its offers, where the
 * write-back of its Node stands), tasks by id (one per pod run the driver
 * launched or found bound to a Mesos Node), and two informers: pods (the
 * controllers' shared keys-only feed, ctl_pods_slim; the driver keeps the
 * bound pods' trees in `bound`) and the Mesos Nodes (label
 * peloton.io/backend=mesos, the agent id in an annotation; their metadata).
 * pump() compares them and starts what is missing: launches on held offers,
 * KILLs of pods being deleted, final DELETEs, declines, REVIVE, Node writes.
 * It looks at the pods noted in todo (those that changed since, and those
 * that wait for reconciliation or their deletion), and at every pod only at
 * start and when a Mesos Node appears or changes (every pod: every bound one). A pod waiting for an offer
 * is on its agent's wait set; pump visits the agents where a pod began to
 * wait or an offer came (ready), those holding offers every OFFER_SWEEP_MS,
 * and every agent only on the tick or when an agent or Node changed.
 *
 * Writes are ops on a list owned by the driver; an op in flight is owned by
 * its request and only detached at stop (op->d = NULL). An ACKNOWLEDGE is
 * sent from the completion of the write that stored the update's effect. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_lease.h"
#include "errmsg.h"
#include "jparse.h"
#include "mesosdrv_int.h"

void mdrv_options_default(struct mdrv_options *o) {
    *o = (struct mdrv_options){.user = "peloton", .name = "peloton", .failover_timeout = 4 * 7 * 86400.0,
                               .hold_ms = 1000, .refuse_seconds = 30, .reconcile_ms = 60000};
}

int mdrv_task_id(const char *uid, unsigned run, char *out, size_t outlen) {
    if (!uid || !uid[0]) return -1;
    int n = snprintf(out, outlen, "%s-%u", uid, run);
    return n < 0 || (size_t)n >= outlen || (size_t)n > MESOS_ID_MAX ? -1 : 0;
}

/* ---- small helpers ---- */

int64_t md_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *md_str(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

const char *md_ann(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), key));
}

const char *md_pod_phase(const json_t *pod) {
    return json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
}

bool md_phase_terminal(const char *ph) { return ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed")); }

bool md_state_lost(int s) {
    return s == MESOS_TASK_LOST || s == MESOS_TASK_GONE || s == MESOS_TASK_UNREACHABLE || s == MESOS_TASK_DROPPED ||
           s == MESOS_TASK_GONE_BY_OPERATOR || s == MESOS_TASK_UNKNOWN;
}


void md_pod_path(const char *ns, const char *name, const char *sub, char *out, size_t len) {
    int n = snprintf(out, len, "/api/v1/namespaces/");
    n += kc_escape(ns, out + n, len - (size_t)n);
    n += snprintf(out + n, len - (size_t)n, "/pods/");
    n += kc_escape(name, out + n, len - (size_t)n);
    snprintf(out + n, len - (size_t)n, "%s", sub);
}

/* The run of a pod (peloton.io/run, 1 when absent). */
unsigned md_pod_run(const json_t *pod) {
    const char *r = md_ann(pod, "peloton.io/run");
    char *end;
    unsigned long v = r ? strtoul(r, &end, 10) : 1;
    return r && (*end || !v || v > UINT32_MAX) ? 1 : (unsigned)v;
}

/* ---- ops ---- */

struct md_op *md_op_new(struct mdrv *d, enum md_op_kind kind) {
    struct md_op *op = calloc(1, sizeof *op);
    if (!op) return NULL;
    op->d = d;
    op->kind = kind;
    op->state = -1;
    op->next = d->ops;
    if (d->ops) d->ops->prev = op;
    d->ops = op;
    return op;
}

void md_op_free(struct md_op *op) {
    struct mdrv *d = op->d;
    if (d) {
        if (op->prev) op->prev->next = op->next;
        else d->ops = op->next;
        if (op->next) op->next->prev = op->prev;
    }
    free(op->task_id);
    free(op->agent_id);
    free(op->uuid);
    free(op->ns);
    free(op->name);
    free(op->uid);
    free(op->node);
    json_decref(op->task_ids);
    free(op);
}

char *md_dup0(const char *s) { return s ? strdup(s) : NULL; }

/* op in flight when its request started (rc 0), else freed: false. */
static bool op_started(struct md_op *op, int rc, const char *method, const char *path) {
    if (rc) {
        fprintf(stderr, "level=warn msg=\"mesos: request not started\" method=%s path=%s error=%d\n", method, path, rc);
        md_op_free(op);
        return false;
    }
    op->inflight = true;
    return true;
}

/* Sends op's request (body stolen); false when it did not start (op freed). */
bool md_op_send(struct md_op *op, const char *method, const char *path, json_t *body, const char *ctype,
                    kc_done_fn done) {
    int rc = kclient_request(op->d->kc, method, path, body, ctype, done, op);
    json_decref(body);
    return op_started(op, rc, method, path);
}

/* The same with the body as JSON text (len bytes, copied). */
bool md_op_send_text(struct md_op *op, const char *method, const char *path, const char *body, size_t len,
                     const char *ctype, kc_done_fn done) {
    return op_started(op, kclient_request_text(op->d->kc, method, path, body, len, ctype, done, op), method, path);
}

/* A request of op came back; false when the driver is gone (op freed). */
bool md_op_landed(struct md_op *op) {
    op->inflight = false;
    if (!op->d || op->d->stopped) {
        md_op_free(op);
        return false;
    }
    return true;
}

bool md_ok2xx(long s) { return s >= 200 && s < 300; }

/* ---- calls to the master ---- */

void md_call(struct mdrv *d, json_t *c) {
    if (!c) return;
    if (!d->mc || mclient_call(d->mc, c, NULL, NULL)) /* not subscribed: what it was for is redone later */
        return;
}

void md_ack(struct mdrv *d, const char *agent_id, const char *task_id, const char *uuid) {
    if (!uuid || !agent_id || !d->fid) return;
    /* written as text into the driver's buffer (two a launch): no tree built and dumped */
    size_t len = 0;
    if (mesos_ack_members(&d->text, &len, &d->text_cap, agent_id, task_id, uuid))
        md_call(d, mesos_call_acknowledge(d->fid, agent_id, task_id, uuid)); /* out of memory or not UTF-8 */
    else if (d->mc)
        mclient_call_members(d->mc, d->text, len, NULL, NULL); /* not subscribed: the master sends it again */
    d->st.acks++;
}

void md_kill_task(struct mdrv *d, const char *task_id, const char *agent_id) {
    if (!d->fid) return;
    md_call(d, mesos_call_kill(d->fid, task_id, agent_id));
    d->st.kills++;
}

/* ---- tasks ---- */

struct md_task *md_task_add(struct mdrv *d, const char *id, const char *agent_id, const json_t *pod) {
    struct md_task *t = calloc(1, sizeof *t);
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name"), *uid = md_str(pod, "uid");
    if (!t || !(t->id = strdup(id)) || !(t->ns = strdup(ns ? ns : "default")) || !(t->name = md_dup0(name)) ||
        !(t->uid = md_dup0(uid)) || (agent_id && !(t->agent_id = strdup(agent_id))) ||
        strmap_put(&d->tasks, id, t, NULL)) {
        if (t) {
            free(t->id);
            free(t->ns);
            free(t->name);
            free(t->uid);
            free(t->agent_id);
        }
        free(t);
        return NULL;
    }
    t->state = -1;
    return t;
}

void md_held_free(struct md_held *h) {
    if (!h) return;
    free(h->agent_id);
    free(h->reason);
    free(h->message);
    free(h->uuid);
    free(h);
}

void md_task_free(struct md_task *t) {
    md_held_free(t->held);
    free(t->write_uuid);
    free(t->id);
    free(t->agent_id);
    free(t->ns);
    free(t->name);
    free(t->uid);
    free(t);
}

/* ---- offers ---- */

static void on_offers(struct mdrv *d, const json_t *offers) {
    size_t i;
    const json_t *o;
    int64_t now = md_wall_ms();
    json_array_foreach(offers, i, o) {
        struct mesos_offer_decl od;
        char err[200] = "resources out of range";
        const double max = MDRV_SCALAR_MAX;
        if (mesos_offer_parse(o, &od, err, sizeof err) ||
            !(od.res.cpus <= max && od.res.mem <= max && od.res.disk <= max && od.res.gpus <= max)) {
            fprintf(stderr, "level=warn msg=\"mesos: offer ignored\" error=\"%s\"\n", err);
            continue;
        }
        struct md_agent *a = md_agent_get(d, od.agent_id, false);
        bool fresh = !a;
        /* an agent first seen in an offer: its offer stands for its total until GET_AGENTS says */
        md_agent_learn(d, od.agent_id, od.hostname, fresh ? &od.res : NULL, od.attributes, AG_ACTIVE);
        a = md_agent_get(d, od.agent_id, false);
        struct md_offer *mo = a ? calloc(1, sizeof *mo) : NULL;
        if (!mo || !(mo->id = strdup(od.id))) {
            free(mo);
            continue;
        }
        mo->res = od.res;
        mo->got_ms = now;
        mo->next = a->offers;
        a->offers = mo;
        strmap_put(&d->offered, a->id, (void *)1, NULL);
        if (strmap_count(&a->wait)) strmap_put(&d->ready, a->id, (void *)1, NULL);
    }
}

static void on_rescind(struct mdrv *d, const char *offer_id) {
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->offered, &pos, &k, &v)) {
        struct md_agent *a = md_agent_get(d, k, false);
        if (!a) continue;
        for (struct md_offer **pp = &a->offers; *pp; pp = &(*pp)->next) {
            if (strcmp((*pp)->id, offer_id)) continue;
            struct md_offer *o = *pp;
            *pp = o->next;
            o->next = NULL;
            md_offers_free(o);
            return;
        }
    }
}

/* Takes a's offers (at most max) for an ACCEPT or a DECLINE: their ids into
 * ids, owned by own (the caller frees them). */
static int take_offers(struct md_agent *a, const char **ids, int max, char **own) {
    int n = 0;
    while (a->offers && n < max) { /* the rest (past max) stay for the next turn */
        struct md_offer *o = a->offers;
        a->offers = o->next;
        own[n] = o->id;
        ids[n] = own[n];
        n++;
        free(o);
    }
    return n;
}

static void on_accept_done(void *ud, int status, const char *body) {
    struct md_op *op = ud;
    if (!md_op_landed(op)) return;
    struct mdrv *d = op->d;
    if (status != 202) {
        fprintf(stderr, "level=warn msg=\"mesos: ACCEPT not accepted\" status=%d body=\"%.200s\"\n", status,
                body ? body : "");
        /* refused outright (4xx): nothing launched, the pods wait for another offer; otherwise
         * the tasks' fate is unknown and reconciliation tells it */
        size_t i;
        json_t *v;
        json_array_foreach(op->task_ids, i, v) {
            const char *id = json_string_value(v);
            struct md_task *t = strmap_get(&d->tasks, id);
            if (!t) continue;
            if (status >= 400 && status < 500) {
                strmap_del(&d->tasks, id);
                md_task_free(t);
                d->rescan = true; /* its pod waits again */
            } else if (d->fid) {
                const char *tid = t->id, *aid = t->agent_id;
                md_call(d, mesos_call_reconcile(d->fid, &tid, &aid, 1));
            }
        }
    }
    md_op_free(op);
    md_kick(d);
}

static void pod_key(const json_t *pod, char *key, size_t len) {
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name");
    snprintf(key, len, "%s/%s", ns ? ns : "", name ? name : "");
}

/* Launches what waits on a, within its offers; a launched pod leaves a->wait. */
static void launch_on(struct mdrv *d, struct md_agent *a, const json_t **waiting, int nw) {
    struct mesos_scalars left = {0};
    int k = 0;
    for (struct md_offer *o = a->offers; o && k < 64; o = o->next, k++) mesos_scalars_add(&left, &o->res);
    /* the TaskInfos written as text, comma-separated (no trees built and dumped) */
    char *infos = NULL;
    size_t ilen = 0, icap = 0;
    json_t *ids = json_array();
    for (int i = 0; i < nw; i++) {
        const json_t *pod = waiting[i];
        struct mesos_scalars need;
        char tid[MESOS_ID_MAX + 1];
        if (mdrv_pod_scalars(pod, &need) || mdrv_task_id(md_str(pod, "uid"), md_pod_run(pod), tid, sizeof tid)) continue;
        if (!mesos_scalars_fit(&need, &left)) continue;
        size_t before = ilen;
        if ((ilen && jdump_append(&infos, &ilen, &icap, ",", 1)) ||
            mdrv_pod_task_info_text(pod, tid, a->id, &need, &infos, &ilen, &icap) || !md_task_add(d, tid, a->id, pod)) {
            ilen = before; /* what was written of it is dropped */
            continue;
        }
        mesos_scalars_sub(&left, &need);
        char key[2 * NAME_MAX_LEN + 2];
        pod_key(pod, key, sizeof key);
        strmap_del(&a->wait, key);
        json_array_append_new(ids, json_string(tid));
        fprintf(stderr, "level=info msg=\"mesos: launching\" task=%s pod=%s/%s agent=%s\n", tid,
                md_str(pod, "namespace"), md_str(pod, "name"), a->id);
    }
    size_t ntasks = json_array_size(ids);
    if (!ntasks) {
        free(infos);
        json_decref(ids);
        return;
    }
    const char *oids[64];
    char *own[64];
    int n = take_offers(a, oids, 64, own);
    struct md_op *op = md_op_new(d, OP_ACCEPT);
    d->st.launched += ntasks;
    d->st.accepts++;
    /* no refuse filter: what is left comes back at the next allocation and is held (hold_ms) for
     * the pods still coming to this agent, instead of waiting for a REVIVE */
    size_t len = 0;
    int rc = mesos_accept_members(&d->text, &len, &d->text_cap, oids, n, infos, ilen, 0);
    for (int i = 0; i < n; i++) free(own[i]);
    free(infos);
    if (!op) { /* out of memory: sent all the same, its answer unread (reconciliation tells the tasks' fate) */
        json_decref(ids);
        if (!rc && d->mc) mclient_call_members(d->mc, d->text, len, NULL, NULL);
        return;
    }
    op->task_ids = ids;
    if (rc || !d->mc || mclient_call_members(d->mc, d->text, len, on_accept_done, op)) {
        on_accept_done(op, -ENOTCONN, NULL); /* as a call that never went */
        return;
    }
    op->inflight = true;
}

/* ---- the pump ---- */

struct scan {
    struct mdrv *d;
    int64_t now;
};

static const char *pod_agent(struct mdrv *d, const json_t *pod) {
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    if (!node || !node[0]) return NULL;
    const json_t *n = kc_informer_get(d->nodes, "", node);
    return n ? md_ann(n, MDRV_ANN_AGENT) : NULL;
}

/* The task state a pod shows (what the driver stored before a restart), -1
 * when none: Running, or Pending with the reason of STARTING or STAGING. */
static int stored_state(const json_t *pod) {
    const char *phase = md_pod_phase(pod);
    const json_t *st = json_object_get(pod, "status");
    const char *reason = json_string_value(json_object_get(st, "reason"));
    if (phase && !strcmp(phase, "Running")) return MESOS_TASK_RUNNING;
    if (!phase || strcmp(phase, "Pending") || !reason) return -1;
    if (!strcmp(reason, "TaskStarting")) return MESOS_TASK_STARTING;
    if (!strcmp(reason, "TaskStaging")) return MESOS_TASK_STAGING;
    return -1;
}

/* Acts on one pod; true when it needs another look later (it waits for
 * reconciliation or for its agent to be active, or it is being deleted). A
 * pod waiting for an offer goes on its agent's wait set instead: what looks
 * at it again is an offer on that agent (or a change of the pod). */
static bool scan_one(struct scan *s, const json_t *pod) {
    struct mdrv *d = s->d;
    const char *agent_id = pod_agent(d, pod);
    if (!agent_id) return false; /* not on a Mesos Node (one that appears later brings a full pass) */
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name"), *uid = md_str(pod, "uid");
    if (!ns || !name || !uid || strlen(name) > NAME_MAX_LEN || strlen(ns) > NAME_MAX_LEN) return false;
    char tid[MESOS_ID_MAX + 1];
    if (mdrv_task_id(uid, md_pod_run(pod), tid, sizeof tid)) return false;
    struct md_task *t = strmap_get(&d->tasks, tid);
    bool deleting = md_str(pod, "deletionTimestamp") != NULL;
    bool terminal = md_phase_terminal(md_pod_phase(pod));
    if (!d->known_built) { /* the tasks of the pods bound before this driver started */
        if (!t && !terminal && (t = md_task_add(d, tid, agent_id, pod))) t->state = stored_state(pod);
        return deleting;
    }
    if (deleting) { /* looked at until it is gone */
        if (!t || terminal || (t->terminal && !t->busy)) {
            md_pod_delete(d, ns, name, uid);
        } else if (!t->busy && (!t->kill_at_ms || s->now - t->kill_at_ms > KILL_RESEND_MS) && d->reconciled) {
            t->kill_at_ms = s->now;
            fprintf(stderr, "level=info msg=\"mesos: killing\" task=%s pod=%s/%s\n", t->id, ns, name);
            md_kill_task(d, t->id, t->agent_id);
        }
        return true;
    }
    if (t || terminal) return false;
    if (!d->reconciled) return true;
    struct md_agent *a = md_agent_get(d, agent_id, false);
    if (!a || a->state != AG_ACTIVE) return true; /* placement should not have chosen it: it waits */
    char key[2 * NAME_MAX_LEN + 2];
    pod_key(pod, key, sizeof key);
    if (strmap_put(&a->wait, key, (void *)1, NULL)) return true;
    if (!a->offers) d->maybe_revive = true;
    else strmap_put(&d->ready, agent_id, (void *)1, NULL);
    d->last_wait_ms = s->now;
    return false;
}

/* A full pass: every pod, the ones to look at again noted in todo. */
static int scan_all_one(void *ud, json_t *pod) {
    struct scan *s = ud;
    if (scan_one(s, pod)) {
        char key[2 * NAME_MAX_LEN + 2];
        pod_key(pod, key, sizeof key);
        strmap_put(&s->d->todo, key, (void *)1, NULL);
    }
    return 0;
}

static void scan_all(struct scan *s) {
    strmap_free(&s->d->todo);
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&s->d->bound, &pos, &k, &v)) scan_all_one(s, v); /* an unbound pod has nothing to do */
    s->d->rescan = false;
}

/* The usual pass: only the pods noted (changed since, or waiting). */
static void scan_todo(struct scan *s) {
    struct mdrv *d = s->d;
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->todo, &pos, &k, &v)) {
        const char *slash = strchr(k, '/');
        char ns[NAME_MAX_LEN + 1];
        const json_t *pod = NULL;
        if (slash && (size_t)(slash - k) <= NAME_MAX_LEN) {
            memcpy(ns, k, (size_t)(slash - k));
            ns[slash - k] = 0;
            pod = md_pod_get(d, ns, slash + 1);
        }
        if (!pod || !scan_one(s, pod)) strmap_del(&d->todo, k);
    }
}


static void reconcile(struct mdrv *d) {
    const char *tids[RECONCILE_BATCH], *aids[RECONCILE_BATCH];
    int n = 0;
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->tasks, &pos, &k, &v)) {
        struct md_task *t = v;
        if (t->terminal) continue;
        tids[n] = t->id;
        aids[n] = t->agent_id;
        if (++n == RECONCILE_BATCH) {
            md_call(d, mesos_call_reconcile(d->fid, tids, aids, n));
            n = 0;
        }
    }
    if (n) md_call(d, mesos_call_reconcile(d->fid, tids, aids, n));
    md_call(d, mesos_call_reconcile(d->fid, NULL, NULL, 0)); /* then implicit: the tasks nobody named */
    d->last_reconcile_ms = md_wall_ms();
    fprintf(stderr, "level=info msg=\"mesos: reconciling\" tasks=%zu\n", strmap_count(&d->tasks));
}

/* Whether a pod on a's wait set is still to launch there (it may have
 * changed, gone or been launched since it was put there). */
static bool still_waits(struct mdrv *d, const struct md_agent *a, const json_t *pod) {
    const char *agent_id = pod_agent(d, pod), *uid = md_str(pod, "uid");
    char tid[MESOS_ID_MAX + 1];
    return agent_id && !strcmp(agent_id, a->id) && !md_str(pod, "deletionTimestamp") &&
           !md_phase_terminal(md_pod_phase(pod)) && !mdrv_task_id(uid, md_pod_run(pod), tid, sizeof tid) &&
           !strmap_get(&d->tasks, tid);
}

/* The pods on a's wait set that still wait, into *out (malloc'd); their count. */
static int waiting_pods(struct mdrv *d, struct md_agent *a, const json_t ***out) {
    *out = NULL;
    size_t n = strmap_count(&a->wait), pos = 0;
    const json_t **w = n ? malloc(n * sizeof *w) : NULL;
    if (!w) return 0;
    int k = 0;
    const char *key;
    void *v;
    while (strmap_next(&a->wait, &pos, &key, &v)) {
        const char *slash = strchr(key, '/');
        char ns[NAME_MAX_LEN + 1];
        const json_t *pod = NULL;
        if (slash && (size_t)(slash - key) <= NAME_MAX_LEN) {
            memcpy(ns, key, (size_t)(slash - key));
            ns[slash - key] = 0;
            pod = md_pod_get(d, ns, slash + 1);
        }
        if (pod && still_waits(d, a, pod) && (size_t)k < n) w[k++] = pod;
        else strmap_del(&a->wait, key);
    }
    *out = w;
    return k;
}

/* The DECLINEs of what this pass declined: one call per filter and
 * DECLINE_BATCH offers, whatever their agents. */
static void flush_declines(struct mdrv *d) {
    for (int cls = 0; cls < 2; cls++) {
        struct md_declines *q = &d->decl[cls];
        double refuse = cls ? d->o.refuse_seconds : 1;
        for (int off = 0; off < q->n; off += DECLINE_BATCH) {
            int n = q->n - off < DECLINE_BATCH ? q->n - off : DECLINE_BATCH;
            md_call(d, mesos_call_decline(d->fid, (const char *const *)q->ids + off, n, refuse));
            d->st.declines++;
        }
        for (int i = 0; i < q->n; i++) free(q->ids[i]);
        q->n = 0;
    }
}

static bool decline_room(struct md_declines *q) {
    if (q->n < q->cap) return true;
    int cap = q->cap ? q->cap * 2 : 256;
    char **ids = realloc(q->ids, (size_t)cap * sizeof *ids);
    if (!ids) return false;
    q->ids = ids;
    q->cap = cap;
    return true;
}

/* a's offers declined (cls: which filter, md_declines), sent at the end of the pass. */
static void decline_all(struct mdrv *d, struct md_agent *a, int cls) {
    struct md_declines *q = &d->decl[cls];
    while (a->offers) {
        if (!decline_room(q)) { /* out of memory: this agent's offers in a call of their own */
            const char *oids[64] = {0};
            char *own[64];
            int n = take_offers(a, oids, 64, own);
            md_call(d, mesos_call_decline(d->fid, oids, n, cls ? d->o.refuse_seconds : 1));
            for (int i = 0; i < n; i++) free(own[i]);
            d->st.declines++;
            continue;
        }
        struct md_offer *o = a->offers;
        a->offers = o->next;
        q->ids[q->n++] = o->id;
        free(o);
    }
}

/* An agent that may hold offers: launches on it of what waits there, and
 * declines of what nobody takes. */
static void visit_offered(struct mdrv *d, const char *k, int64_t now) {
    struct md_agent *a = md_agent_get(d, k, false);
    if (a && a->offers && strmap_count(&a->wait)) {
        const json_t **w;
        int nw = waiting_pods(d, a, &w);
        if (nw) launch_on(d, a, w, nw);
        free(w);
        /* what waits does not fit what is offered (a task still ending, another framework): the
         * offer goes back for a moment and comes again when the agent has more */
        if (a->offers && nw && now - a->offers->got_ms >= (int64_t)d->o.hold_ms) decline_all(d, a, 0);
        if (strmap_count(&a->wait)) d->maybe_revive = true;
    }
    /* held while pods keep coming (they may come here), at most OFFER_HOLD_MAX_MS */
    if (a && a->offers && !strmap_count(&a->wait) && now - a->offers->got_ms >= (int64_t)d->o.hold_ms &&
        (now - d->last_wait_ms >= (int64_t)d->o.hold_ms || now - a->offers->got_ms >= OFFER_HOLD_MAX_MS))
        decline_all(d, a, 1);
    if (!a || !a->offers) strmap_del(&d->offered, k);
}

/* The agents where a pod began to wait or an offer came (d->ready); every
 * agent holding offers at most every OFFER_SWEEP_MS, for the declines. */
static void pump_offers(struct mdrv *d, int64_t now) {
    size_t pos = 0;
    const char *k;
    void *v;
    bool sweep = now - d->last_sweep_ms >= OFFER_SWEEP_MS;
    if (sweep) d->last_sweep_ms = now;
    while (strmap_next(sweep ? &d->offered : &d->ready, &pos, &k, &v)) visit_offered(d, k, now);
    strmap_free(&d->ready);
    flush_declines(d);
}

/* Whether a pod waits on an active agent that has no offer (then REVIVE). */
static bool any_wait_unoffered(struct mdrv *d) {
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->agents, &pos, &k, &v)) {
        const struct md_agent *a = v;
        if (strmap_count(&a->wait) && !a->offers) return true;
    }
    return false;
}

/* Every agent: its Node's writes and drains (on the tick, and when an agent
 * or a Mesos Node changed). */
static void walk_agents(struct mdrv *d, int64_t now, bool subscribed) {
    size_t pos = 0;
    const char *k;
    void *v;
    d->agents_walk = false;
    while (strmap_next(&d->agents, &pos, &k, &v)) {
        struct md_agent *a = v;
        const json_t *node = a->hostname ? kc_informer_get(d->nodes, "", a->hostname) : NULL;
        const char *dr = node ? md_ann(node, MDRV_ANN_DRAIN) : NULL;
        bool drain = dr && !strcmp(dr, "true");
        if (drain != a->drain) { /* the operator asked (or no longer asks) for a drain: cordon (uncordon) first */
            a->drain = drain;
            a->drain_sent = false;
            a->dirty = true;
        }
        if (a->dirty && !a->busy && now >= a->retry_at_ms) md_node_write(d, a);
        else if (subscribed && a->drain && !a->drain_sent && !a->dirty && !a->busy && now >= a->retry_at_ms &&
                 a->state == AG_ACTIVE)
            md_drain_agent(d, a);
    }
}

static void pump(struct mdrv *d) {
    if (d->stopped || !kc_informer_synced(d->pods) || !kc_informer_synced(d->nodes)) return;
    struct scan s = {.d = d, .now = md_wall_ms()};
    if (!d->known_built) {
        scan_all(&s);
        d->known_built = true;
    }
    bool subscribed = d->mc && mclient_subscribed(d->mc) && d->fid;
    if (subscribed && !d->reconciled) {
        reconcile(d);
        d->reconciled = true;
    }
    if (subscribed && d->rescan) scan_all(&s);
    else if (subscribed) scan_todo(&s);
    if (subscribed) pump_offers(d, s.now);
    if (d->agents_walk) walk_agents(d, s.now, subscribed);
    if (subscribed && d->maybe_revive && s.now - d->last_revive_ms >= REVIVE_MIN_MS) {
        d->maybe_revive = any_wait_unoffered(d);
        if (d->maybe_revive) {
            md_call(d, mesos_call_roles(MESOS_CALL_REVIVE, d->fid, NULL, 0));
            d->last_revive_ms = s.now;
            d->st.revives++;
        }
    }
    if (subscribed && s.now - d->last_reconcile_ms >= (int64_t)d->o.reconcile_ms) {
        /* implicit reconciliation, and the agents again: an unreachable agent marked gone brings no event */
        md_call(d, mesos_call_reconcile(d->fid, NULL, NULL, 0));
        md_get_agents(d);
        d->last_reconcile_ms = s.now;
    }
}

static void on_kick(uv_timer_t *t) { pump(t->data); }

void md_kick(struct mdrv *d) {
    if (!d->stopped && !uv_is_active((uv_handle_t *)&d->kick)) uv_timer_start(&d->kick, on_kick, 0, 0);
}

/* The metrics from the driver's counts: what changed since the last tick. */
static void md_metrics(struct mdrv *d) {
    if (!d->o.metrics) return;
    const struct mdrv_stats *n = &d->st, *o = &d->m_last;
    metrics_add(d->m_calls[0], n->accepts - o->accepts);
    metrics_add(d->m_calls[1], n->declines - o->declines);
    metrics_add(d->m_calls[2], n->revives - o->revives);
    metrics_add(d->m_calls[3], n->kills - o->kills);
    metrics_add(d->m_calls[4], n->acks - o->acks);
    metrics_add(d->m_launched, n->launched - o->launched);
    metrics_add(d->m_updates, n->updates - o->updates);
    metrics_add(d->m_lost, n->lost - o->lost);
    metrics_set(d->m_agents, (double)strmap_count(&d->agents));
    metrics_set(d->m_subscribed, d->mc && mclient_subscribed(d->mc) && d->fid ? 1 : 0);
    d->m_last = d->st;
}

static void md_metrics_init(struct mdrv *d) {
    struct metrics *reg = d->o.metrics;
    if (!reg) return;
    static const char *const call[] = {"ACCEPT", "DECLINE", "REVIVE", "KILL", "ACKNOWLEDGE"};
    struct metrics_family *calls = metrics_counter(reg, "peloton_mesos_calls_total",
                                                   "Calls the Mesos driver sent to the master, by type.", 1,
                                                   (const char *const[]){"call"});
    for (int i = 0; i < 5; i++) d->m_calls[i] = metrics_series1(calls, call[i]);
    d->m_launched = metrics_series0(metrics_counter(reg, "peloton_mesos_tasks_launched_total",
                                                    "Tasks launched on Mesos agents (one per pod).", 0, NULL));
    d->m_updates = metrics_series0(metrics_counter(reg, "peloton_mesos_status_updates_total",
                                                   "Task status updates received from the master.", 0, NULL));
    d->m_lost = metrics_series0(metrics_counter(reg, "peloton_mesos_tasks_lost_total",
                                                "Pods failed because their task was lost, gone or dropped.", 0, NULL));
    d->m_agents = metrics_series0(metrics_gauge(reg, "peloton_mesos_agents",
                                                "Agents the driver knows (each a Node).", 0, NULL));
    d->m_subscribed = metrics_series0(metrics_gauge(reg, "peloton_mesos_subscribed",
                                                    "1 while the framework is subscribed to the master.", 0, NULL));
}

static void on_tick(uv_timer_t *t) {
    struct mdrv *d = t->data;
    d->agents_walk = true; /* retries of Node writes and drains come due */
    pump(d);
    md_metrics(d);
}

/* ---- the subscription ---- */

static void on_subscribed(void *ud, const char *fid) {
    struct mdrv *d = ud;
    if (!d->fid || strcmp(d->fid, fid)) {
        free(d->fid);
        d->fid = strdup(fid);
        redisReply *r = ctl_lease_redis(d->o.lease, d->db, "SET %s %s", MDRV_KEY_FRAMEWORK, fid); /* fenced */
        if (r) freeReplyObject(r);
    }
    fprintf(stderr, "level=info msg=\"mesos: subscribed\" framework_id=%s master=%s\n", fid, mclient_leader(d->mc));
    d->reconciled = false; /* explicit then implicit reconciliation on every SUBSCRIBED */
    md_get_agents(d);
    md_kick(d);
}

static void on_lost(void *ud, const char *why, bool final) {
    struct mdrv *d = ud;
    fprintf(stderr, "level=%s msg=\"mesos: subscription lost\" why=\"%s\" final=%d\n", final ? "error" : "warn", why,
            final);
    /* offers die with the stream */
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->agents, &pos, &k, &v)) {
        struct md_agent *a = v;
        md_offers_free(a->offers);
        a->offers = NULL;
    }
    strmap_free(&d->offered);
    for (int cls = 0; cls < 2; cls++) {
        for (int i = 0; i < d->decl[cls].n; i++) free(d->decl[cls].ids[i]);
        free(d->decl[cls].ids);
    }
}

static void on_event(void *ud, const struct mesos_event *ev, const json_t *root) {
    struct mdrv *d = ud;
    (void)root;
    switch (ev->type) {
    case MESOS_EVENT_OFFERS: on_offers(d, ev->offers); break;
    case MESOS_EVENT_RESCIND: on_rescind(d, ev->offer_id); break;
    case MESOS_EVENT_UPDATE: md_on_update(d, &ev->status); break;
    case MESOS_EVENT_FAILURE: md_get_agents(d); break;
    case MESOS_EVENT_ERROR:
        fprintf(stderr, "level=error msg=\"mesos: master error\" message=\"%s\"\n", ev->message ? ev->message : "");
        break;
    default: break;
    }
    md_kick(d);
}

/* ---- informers ---- */

const json_t *md_pod_get(struct mdrv *d, const char *ns, const char *name) {
    char key[2 * NAME_MAX_LEN + 2];
    if (strlen(ns) > NAME_MAX_LEN || strlen(name) > NAME_MAX_LEN) return NULL;
    snprintf(key, sizeof key, "%s/%s", ns, name);
    return strmap_get(&d->bound, key);
}

/* Forgets the pod of key (its reference dropped). */
static void unbind(struct mdrv *d, const char *key) { json_decref(strmap_del(&d->bound, key)); }

/* A pod that changed: kept when bound (the feed caches keys alone; each
 * event brings a new tree, which no subscriber changes), and looked at by
 * the next pump. */
static void pod_noted(struct mdrv *d, json_t *pod) {
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name");
    if (!ns || !name || strlen(ns) > NAME_MAX_LEN || strlen(name) > NAME_MAX_LEN) return;
    char key[2 * NAME_MAX_LEN + 2];
    pod_key(pod, key, sizeof key);
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    if (!node || !node[0]) { /* unbound: nothing for the driver (a pod is bound once, never unbound) */
        unbind(d, key);
        return;
    }
    void *old = NULL;
    if (strmap_put(&d->bound, key, json_incref(pod), &old)) {
        json_decref(pod); /* out of memory: the next full pass finds it missing, as an unbound pod */
        d->rescan = true;
    }
    json_decref(old);
    if (strmap_put(&d->todo, key, (void *)1, NULL)) d->rescan = true;
    md_kick(d);
}

static void on_pod_add(void *ud, json_t *obj) { pod_noted(ud, obj); }

static void on_pod_update(void *ud, json_t *old, json_t *obj) {
    (void)old;
    pod_noted(ud, obj);
}

/* A Mesos Node appeared or changed: its pods may have waited for it (and
 * its drain annotation may have changed). */
static void on_node_change(void *ud, json_t *obj) {
    struct mdrv *d = ud;
    (void)obj;
    d->rescan = true;
    d->agents_walk = true;
    md_kick(d);
}

static void on_node_update(void *ud, json_t *old, json_t *obj) {
    (void)old;
    on_node_change(ud, obj);
}

static void on_pod_delete(void *ud, json_t *obj) {
    struct mdrv *d = ud;
    const char *ns = md_str(obj, "namespace"), *name = md_str(obj, "name"), *uid = md_str(obj, "uid");
    if (!ns || !name) return;
    char key[3 * NAME_MAX_LEN + 64];
    snprintf(key, sizeof key, "%s/%s/%s", ns, name, uid ? uid : "");
    strmap_del(&d->deletes, key);
    snprintf(key, sizeof key, "%s/%s", ns, name);
    strmap_del(&d->todo, key);
    unbind(d, key);
    /* the pod's tasks go with it (one still running is killed by the next update about it) */
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->tasks, &pos, &k, &v)) {
        struct md_task *t = v;
        if (strcmp(t->ns, ns) || strcmp(t->name, name) || (uid && t->uid && strcmp(uid, t->uid))) continue;
        if (!t->terminal && d->reconciled) md_kill_task(d, t->id, t->agent_id);
        if (t->busy) continue; /* its write's completion still looks it up */
        strmap_del(&d->tasks, k);
        md_task_free(t);
    }
    md_kick(d);
}

static void on_synced(void *ud) { md_kick(ud); }

#define KEY_IS(lit) (len == sizeof lit - 1 && !memcmp(key, lit, len))

/* Of a Mesos Node, the driver reads its name and annotations (the agent id, a drain). */
static bool node_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    (void)ud;
    if (depth == 0) return KEY_IS("metadata");
    if (depth == 1 && JPARSE_SEG_IS(&path[0], "metadata")) return !KEY_IS("managedFields");
    return true;
}

static const struct kc_informer_opts node_opts = {.keep = node_keep};

/* ---- the public part ---- */

struct mdrv *mdrv_start(uv_loop_t *loop, struct kclient *kc, struct ctl_db *db, const struct mdrv_options *o,
                        char *err, size_t errlen) {
    if (!loop || !kc || !db || !o || !o->master) {
        core_fail(err, errlen, -EINVAL, "mesos: a loop, an API client, Redis and a master are required");
        return NULL;
    }
    struct mdrv *d = calloc(1, sizeof *d);
    if (!d) {
        core_fail(err, errlen, -ENOMEM, "mesos: out of memory");
        return NULL;
    }
    d->loop = loop;
    d->kc = kc;
    d->db = db;
    mdrv_options_default(&d->o);
    d->master = strdup(o->master);
    d->user = strdup(o->user ? o->user : d->o.user);
    d->name = strdup(o->name ? o->name : d->o.name);
    if (o->failover_timeout > 0) d->o.failover_timeout = o->failover_timeout;
    if (o->hold_ms) d->o.hold_ms = o->hold_ms;
    if (o->refuse_seconds > 0) d->o.refuse_seconds = o->refuse_seconds;
    d->o.lease = o->lease;
    if (o->reconcile_ms) d->o.reconcile_ms = o->reconcile_ms;
    d->o.metrics = o->metrics;
    md_metrics_init(d);
    uv_timer_init(loop, &d->tick);
    uv_timer_init(loop, &d->kick);
    d->tick.data = d->kick.data = d;
    redisReply *r = ctl_redis(db, "GET %s", MDRV_KEY_FRAMEWORK);
    if (r && r->type == REDIS_REPLY_STRING && r->len > 0 && r->len <= MESOS_ID_MAX) d->fid = strdup(r->str);
    if (r) freeReplyObject(r);
    struct kc_informer_handlers ph = {on_pod_add, on_pod_update, on_pod_delete, on_synced};
    struct kc_informer_handlers nh = {on_node_change, on_node_update, NULL, on_synced};
    /* the feed of resmgr, placement and hostmgr (ctl.h): one decoding of each pod event for all */
    d->pods = kc_informer_new_opts(kc, "/api/v1/pods", NULL, &ctl_pods_slim, &ph, d);
    d->nodes = kc_informer_new_opts(kc, NODES_PATH, "labelSelector=peloton.io%2Fbackend%3Dmesos", &node_opts, &nh, d);
    static const char *const roles[] = {"*"};
    static const char *const caps[] = {"GPU_RESOURCES", "PARTITION_AWARE", "TASK_KILLING_STATE", "MULTI_ROLE"};
    struct mclient_config mc = {.master = d->master,
                                .fi = {.user = d->user, .name = d->name, .id = d->fid, .roles = roles, .nroles = 1,
                                       .capabilities = caps, .ncapabilities = 4,
                                       .failover_timeout = d->o.failover_timeout},
                                .on_subscribed = on_subscribed, .on_event = on_event, .on_lost = on_lost, .ud = d};
    int rc = !d->master || !d->user || !d->name || !d->pods || !d->nodes ? -ENOMEM : 0;
    if (!rc) rc = kc_informer_start(d->pods);
    if (!rc) rc = kc_informer_start(d->nodes);
    if (!rc) rc = mclient_start(loop, &mc, &d->mc, err, errlen);
    else core_fail(err, errlen, rc, "mesos: cannot start the informers: %s", strerror(-rc));
    if (rc) {
        d->orphan = true; /* freed once its timers have closed, when the caller's loop runs */
        mdrv_stop(d);
        return NULL;
    }
    uv_timer_start(&d->tick, on_tick, 500, 500);
    fprintf(stderr, "level=info msg=\"mesos: started\" master=%s framework_id=%s\n", d->master,
            d->fid ? d->fid : "(new)");
    return d;
}

static void timer_closed(uv_handle_t *h) {
    struct mdrv *d = h->data;
    if (++d->closed == 2 && d->orphan) mdrv_free(d);
}

void mdrv_stop(struct mdrv *d) {
    if (!d || d->stopped) return;
    d->stopped = true;
    while (d->ops) { /* detach: an op in flight is freed by its callback */
        struct md_op *op = d->ops;
        d->ops = op->next;
        op->d = NULL;
        op->prev = op->next = NULL;
        if (!op->inflight) md_op_free(op);
    }
    if (d->mc) mclient_stop(d->mc); /* answers the calls in flight (-ECANCELED) */
    kc_informer_free(d->pods);
    kc_informer_free(d->nodes);
    d->pods = d->nodes = NULL;
    uv_close((uv_handle_t *)&d->tick, timer_closed);
    uv_close((uv_handle_t *)&d->kick, timer_closed);
}

void mdrv_free(struct mdrv *d) {
    if (!d) return;
    mdrv_stop(d);
    mclient_free(d->mc);
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->agents, &pos, &k, &v)) md_agent_free(v);
    strmap_free(&d->agents);
    pos = 0;
    while (strmap_next(&d->tasks, &pos, &k, &v)) md_task_free(v);
    strmap_free(&d->tasks);
    strmap_free(&d->deletes);
    pos = 0;
    while (strmap_next(&d->bound, &pos, &k, &v)) json_decref(v);
    strmap_free(&d->bound);
    strmap_free(&d->todo);
    strmap_free(&d->offered);
    strmap_free(&d->ready);
    free(d->text);
    free(d->master);
    free(d->user);
    free(d->name);
    free(d->fid);
    free(d);
}

void mdrv_get_stats(const struct mdrv *d, struct mdrv_stats *out) { *out = d->st; }
