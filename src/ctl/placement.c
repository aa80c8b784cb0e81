/* placement: the placement role (ctl.h, docs/architecture.md).
 *
 * Pops admitted gangs from the Redis ready queue in batches (LPOP is atomic,
 * so several placement engines can run at once, each gang going to one),
 * places each gang all or nothing with the core against its own view of the
 * hosts (Nodes and bound Pods through informers), and binds every member
 * through the binding subresource. A gang that does not fit goes to the
 * retry queue with a backoff, and each member gets a FailedScheduling Event
 * and the condition PodScheduled=False (reason Unschedulable) saying why, in
 * kube-scheduler's words ("0/5000 nodes are available: 1000 node(s) had
 * untolerated taint {k: v}, 4000 Insufficient cpu."). The condition is
 * written when the reason changes (the gang's record keeps a hash of the
 * last one), not at every attempt; the Event is counted again (count,
 * lastTimestamp) every tenth attempt while the reason stays.
 *
 * Catch-up: an engine that takes the lease may follow one that bound pods
 * its informers have not shown yet (a Binding stored while its answer was
 * a 500, a watch held back). A term's engine reads the store's
 * resourceVersion R as it starts (a pod list of one item, through the API
 * server), and places nothing until both its informers have seen R or
 * past it (a list, an event or a bookmark). One still behind is listed
 * again, and that list is at or past R: at once when it joined a feed
 * another role had listed before (its cache is as late as that feed's
 * watch), else after catchup_ms (its first list may have been read just
 * before R; its watch usually moves it on first). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "ctl.h"
#include "ctl_lease.h"
#include "ctl_metrics.h"
#include "placement_claim.h"
#include "labels.h"
#include "podspec.h"
#include "strmap.h"

#define PL_COMPONENT "peloton-placement"
#define PL_GANG_MAX 100000
#define PL_MISSING_MAX 50 /* attempts while a member is not yet in the cache */
#define PL_VERIFY_MS 1000 /* a pod whose binding's outcome is unknown is read again this often... */
#define PL_VERIFY_MAX 60  /* ...so many times at most (then its room goes back and its gang is tried again) */
#define PL_CHECKING_MAX 4096 /* assumed members read at once (place_one) */

struct placement {
    struct ctl_env env;
    struct placement_options o;
    struct cluster *cm;
    struct kc_informer *pods, *nodes;
    struct ctl_recorder *rec;
    uv_timer_t tick, retry;
    int timers_open;
    size_t inflight;
    uint64_t placed, unplaceable;
    struct pl_metrics m;
    struct strmap bound_at; /* "ns/name" -> metrics_now_ns when its Binding was answered, until it runs (metrics) */
    uint64_t busy_ms; /* when a tick last found gangs */
    struct bind_ctx *unsure; /* bindings of unknown outcome whose pod could not be read yet, to read again */
    struct strmap checking;  /* uid -> bind_ctx: assumed members being read (place_one), once each */
    bool stopping;
    bool claiming;            /* o.claims: capacity claimed in Redis before binding (placement_claim.h) */
    struct pl_claims claims;
    /* catch-up (the head of this file): a leased engine places nothing
     * until caught_up */
    bool caught_up;
    bool catchup_asked;     /* the read of R is out */
    bool relisted;          /* the informers behind were listed again */
    uint64_t catchup_rv;    /* R; 0 until read */
    uint64_t term_ms;       /* loop ms at the term's start */
    uint64_t catchup_since; /* loop ms when R was read */
    unsigned catchup_fails; /* reads of R that failed */
    bool pods_late, nodes_late; /* joined a feed that had listed before R was read: listed again at once if behind */
    long long epoch;            /* the term's (its lease's fencing token), sent with each Binding; 0: no lease */
    bool fenced;                /* a Binding of this term was refused as stale (logged once) */
};

/* Pods bound and not yet seen running that bound -> Running waits for; past
 * this many (pods that never run), new ones are not timed. */
#define PL_BOUND_AT_MAX 200000

struct bind_ctx {
    struct placement *p;
    char *ns, *name, *node, *gang, *uid;
    uint64_t t0;     /* metrics_now_ns when posted */
    bool event_asked; /* the API server was asked to make the Scheduled Event */
    int reads;        /* outcome unknown: the pod read so many times */
    bool check;       /* not a binding's answer: an assumed member of a gang readied again (p->checking) */
    uint64_t due_ms;  /* on the unsure list: when to read it again */
    struct bind_ctx *next;
};

void placement_options_default(struct placement_options *o) {
    o->batch = 512;
    o->tick_ms = 10;
    o->retry_max_ms = 5000;
    o->max_inflight = 512;
    o->claims = false;
    o->claim_ttl_ms = 30000;
    o->claim_grace_ms = 3000;
    o->catchup_ms = 1000;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *obj_name(json_t *obj) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}
/* Stage bound -> Running, for pods this engine bound: observed when their
 * phase leaves Pending (Running; an ended or deleted one is forgotten). */
static void note_phase(struct placement *p, json_t *obj, bool gone) {
    if (!strmap_count(&p->bound_at)) return;
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace")), *name = obj_name(obj);
    const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
    if (!ns || !name || (!gone && (!phase || !strcmp(phase, "Pending")))) return;
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    void *t = strmap_del(&p->bound_at, key);
    if (t && !gone && !strcmp(phase, "Running"))
        metrics_observe(metrics_series0(p->m.run_wait), (double)(metrics_now_ns() - (uint64_t)(uintptr_t)t) / 1e9);
}

static void on_pod_add(void *ud, json_t *obj) {
    note_phase(ud, obj, false);
    cluster_pod_set(((struct placement *)ud)->cm, obj);
}
static void on_pod_update(void *ud, json_t *old, json_t *obj) { on_pod_add(ud, obj); }
static void on_pod_delete(void *ud, json_t *obj) {
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    note_phase(ud, obj, true);
    if (ns && obj_name(obj)) cluster_pod_del(((struct placement *)ud)->cm, ns, obj_name(obj));
}
static void on_node_add(void *ud, json_t *obj) { cluster_node_set(((struct placement *)ud)->cm, obj); }
static void on_node_update(void *ud, json_t *old, json_t *obj) { on_node_add(ud, obj); }
static void on_node_delete(void *ud, json_t *obj) {
    if (obj_name(obj)) cluster_node_del(((struct placement *)ud)->cm, obj_name(obj));
}

static void retry_later(struct placement *p, const char *key, int64_t delay_ms) {
    ctl_lease_defer(p->env.lease, p->env.db, "ZADD %s %lld %s", CTL_KEY_RETRY, (long long)(now_ms() + delay_ms), key);
}

static void bind_ctx_free(struct bind_ctx *b) {
    if (b->check && b->uid && !b->p->stopping) strmap_del(&b->p->checking, b->uid);
    free(b->ns);
    free(b->name);
    free(b->node);
    free(b->gang);
    free(b->uid);
    free(b);
}

/* A binding's context for pod on node, of gang; NULL when out of memory. */
static struct bind_ctx *bind_ctx_new(struct placement *p, const char *gang, const struct cm_pod *pod,
                                     const char *node) {
    struct bind_ctx *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->p = p;
    if (!(b->ns = strdup(pod->ns)) || !(b->name = strdup(pod->name)) || !(b->node = strdup(node)) ||
        !(b->gang = strdup(gang)) || (pod->uid && !(b->uid = strdup(pod->uid)))) {
        bind_ctx_free(b);
        return NULL;
    }
    return b;
}

/* A reply that comes after the role stopped: b (if any) freed, and the role
 * with the last of them. */
static bool after_stop(struct placement *p, struct bind_ctx *b) {
    if (!p->stopping) return false;
    if (b) bind_ctx_free(b);
    if (!p->inflight && !p->timers_open) free(p);
    return true;
}

static void read_pod(struct placement *p, struct bind_ctx *b);
static void read_later(struct placement *p, struct bind_ctx *b);
static bool assumed_still(struct placement *p, const struct bind_ctx *b);

static void on_bound(void *ud, const struct kc_response *res) {
    struct bind_ctx *b = ud;
    struct placement *p = b->p;
    p->inflight--;
    if (after_stop(p, b)) return; /* the role is gone: the last reply frees it */
    metrics_observe(metrics_series0(p->m.bind_duration), (double)(metrics_now_ns() - b->t0) / 1e9);
    if (res->status == 0 || res->status >= 500) {
        /* no answer, or the server's error after it may have stored the
         * binding (a WAIT that timed out, a lost Redis connection): the
         * room stays taken until the pod itself says where it is */
        metrics_inc(metrics_series1(p->m.bindings, "unknown"));
        fprintf(stderr, "level=warn msg=\"placement: bind outcome unknown; reading the pod\" pod=%s/%s node=%s "
                "status=%ld error=\"%s\"\n", b->ns, b->name, b->node, res->status, res->error ? res->error : "");
        read_pod(p, b);
        return;
    }
    if (p->claiming && b->uid) pl_claims_settle(&p->claims, b->node, b->uid, res->status >= 200 && res->status < 300);
    /* a Binding of this term refused because a newer term has begun (the
     * API server's fence, labels.h): not bound, and this engine's term is
     * over (its next fenced Redis write is refused too, which ends it) */
    bool fenced = res->status == 409 && res->raw && strstr(res->raw, PELOTON_PLACEMENT_TERM_ENDED);
    metrics_inc(metrics_series1(p->m.bindings, res->status >= 200 && res->status < 300 ? "bound"
                                               : fenced                                ? "fenced"
                                               : res->status == 409                    ? "conflict"
                                               : res->status == 404                    ? "gone"
                                                                                       : "failed"));
    if (fenced && !p->fenced) {
        p->fenced = true;
        fprintf(stderr, "level=warn msg=\"placement: binding refused: this term has ended\" pod=%s/%s node=%s "
                "epoch=%lld error=\"%s\"\n", b->ns, b->name, b->node, p->epoch, res->error ? res->error : "");
    }
    if (res->status >= 200 && res->status < 300) {
        /* the Event kube-scheduler posts for each pod it binds: made by our
         * API server with the binding, whose answer then names it (a Status
         * whose details are of kind events); another server's answer does
         * not, and the Event is posted here */
        if (b->event_asked && !(res->raw && strstr(res->raw, "\"kind\":\"events\""))) {
            char msg[700];
            snprintf(msg, sizeof msg, "Successfully assigned %s/%s to %s", b->ns, b->name, b->node);
            ctl_event_post(p->env.kc, PL_COMPONENT, "v1", "Pod", b->ns, b->name, b->uid, "Normal", "Scheduled", msg);
        }
        p->placed++;
        if (p->m.run_wait && strmap_count(&p->bound_at) < PL_BOUND_AT_MAX) {
            char key[600];
            snprintf(key, sizeof key, "%s/%s", b->ns, b->name);
            uint64_t now = metrics_now_ns();
            strmap_put(&p->bound_at, key, (void *)(uintptr_t)(now ? now : 1), NULL);
        }
    } else {
        /* already bound elsewhere (409), gone (404) or refused for a term
         * that has ended (409: the gang is the next term's): nothing to
         * retry; else (refused: 4xx) try the gang again */
        cluster_forget(p->cm, b->ns, b->name);
        if (res->status != 409 && res->status != 404) {
            fprintf(stderr, "level=warn msg=\"placement: bind %s/%s to %s: %ld %s\"\n", b->ns, b->name, b->node,
                    res->status, res->error ? res->error : "");
            retry_later(p, b->gang, 200);
        }
    }
    bind_ctx_free(b);
}

/* The pod of a binding whose outcome is unknown, read directly: the
 * informer's copy may lag the store by seconds, and taking the room back
 * while the binding is in fact stored lets the next gangs onto a node that
 * is full. Bound where it was sent: as if answered 201. Not bound: the room
 * back and the gang again. Bound elsewhere, deleted or replaced (another
 * uid): the room back, nothing to retry. No answer: read again later. */
static void on_pod_read(void *ud, const struct kc_response *res) {
    struct bind_ctx *b = ud;
    struct placement *p = b->p;
    p->inflight--;
    if (after_stop(p, b)) return;
    json_t *pod = res->status == 200 ? kc_response_body(res) : NULL;
    if (res->status != 404 && !json_is_object(pod)) {
        read_later(p, b);
        return;
    }
    json_t *md = json_object_get(pod, "metadata");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    bool same = pod && (!b->uid || (uid && !strcmp(uid, b->uid)));
    bool bound_here = same && node && !strcmp(node, b->node);
    if (p->claiming && b->uid && !b->check && (b->reads == 1 || !bound_here))
        pl_claims_settle(&p->claims, b->node, b->uid, bound_here);
    if (bound_here) {
        if (b->reads == 1) {
            fprintf(stderr, "level=info msg=\"placement: bind outcome known: bound\" pod=%s/%s node=%s\n", b->ns,
                    b->name, b->node);
            if (!b->check) p->placed++;
        }
        if (assumed_still(p, b)) {
            /* a write not yet on a replica can still be lost in a failover:
             * read again until this engine's watch shows it */
            read_later(p, b);
            return;
        }
    } else {
        cluster_forget(p->cm, b->ns, b->name);
        fprintf(stderr, "level=info msg=\"placement: bind outcome known: not bound there\" pod=%s/%s node=%s "
                "now=%s reads=%d\n", b->ns, b->name, b->node,
                !pod ? "(gone)" : !same ? "(replaced)" : node ? node : "(none)", b->reads);
        if (same && !node) retry_later(p, b->gang, 200);
    }
    bind_ctx_free(b);
}

static void read_pod(struct placement *p, struct bind_ctx *b) {
    char path[600];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", b->ns, b->name);
    b->reads++;
    p->inflight++;
    if (kclient_request_text(p->env.kc, "GET", path, NULL, 0, NULL, on_pod_read, b)) {
        p->inflight--;
        read_later(p, b);
    }
}

static void read_later(struct placement *p, struct bind_ctx *b) {
    if (b->reads >= PL_VERIFY_MAX) { /* a second binding of a pod that was bound gets 409 */
        fprintf(stderr, "level=warn msg=\"placement: bind outcome still unknown; trying the gang again\" pod=%s/%s "
                "node=%s reads=%d\n", b->ns, b->name, b->node, b->reads);
        if (p->claiming && b->uid && !b->check) pl_claims_settle(&p->claims, b->node, b->uid, false);
        cluster_forget(p->cm, b->ns, b->name);
        retry_later(p, b->gang, 200);
        bind_ctx_free(b);
        return;
    }
    b->due_ms = uv_now(p->env.loop) + PL_VERIFY_MS;
    b->next = p->unsure;
    p->unsure = b;
}

/* Whether the model still counts b's pod on b's node by assumption alone
 * (its watch has not shown the binding). */
static bool assumed_still(struct placement *p, const struct bind_ctx *b) {
    struct cm_pod *pod = cluster_pod(p->cm, b->ns, b->name);
    return pod && pod->assumed && pod->node && !strcmp(pod->node, b->node) &&
           (!b->uid || (pod->uid && !strcmp(pod->uid, b->uid)));
}

/* The unsure bindings whose time has come, read again (on the retry timer);
 * one whose binding the watch has shown meanwhile is done. */
static void read_due(struct placement *p) {
    uint64_t now = uv_now(p->env.loop);
    struct bind_ctx **pp = &p->unsure, *due = NULL;
    while (*pp) {
        struct bind_ctx *b = *pp;
        if (b->due_ms <= now) {
            *pp = b->next;
            b->next = due;
            due = b;
        } else {
            pp = &b->next;
        }
    }
    while (due) {
        struct bind_ctx *b = due;
        due = b->next;
        b->next = NULL;
        struct cm_pod *pod = b->reads ? cluster_pod(p->cm, b->ns, b->name) : NULL;
        if (pod && pod->node && !strcmp(pod->node, b->node) && !assumed_still(p, b)) { /* the watch shows it there */
            bind_ctx_free(b);
            continue;
        }
        read_pod(p, b);
    }
}

/* When a gang was queued, admitted (resource manager) and placed (here):
 * the Binding's annotations, which the API server copies onto the pod
 * (Kubernetes' rule), so the timeline costs no write of its own. */
struct stamps {
    char queued[32], admitted[32], placed[32];
};

static int append_stamp(char **body, size_t *len, size_t *cap, bool *first, const char *key, const char *v) {
    if (!v[0]) return 0;
    int rc = jdump_append(body, len, cap, *first ? ",\"annotations\":{" : ",", *first ? 16 : 1);
    *first = false;
    rc = rc ? rc : jdump_append_string(body, len, cap, key, strlen(key));
    rc = rc ? rc : jdump_append(body, len, cap, ":", 1);
    return rc ? rc : jdump_append_string(body, len, cap, v, strlen(v));
}

static void bind_pod(struct placement *p, const char *gang, struct cm_pod *pod, const char *node,
                     const struct stamps *st) {
    struct bind_ctx *b = bind_ctx_new(p, gang, pod, node);
    if (!b) return;
    b->t0 = metrics_now_ns();
    char path[700], epoch[48] = "";
    b->event_asked = ctl_events_on();
    /* a leased term's Binding names its epoch: the API server binds it only
     * while no newer term has begun (labels.h) */
    if (p->epoch)
        snprintf(epoch, sizeof epoch, "%c" PELOTON_PLACEMENT_EPOCH_ARG "=%lld", b->event_asked ? '&' : '?', p->epoch);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/binding%s%s", pod->ns, pod->name,
             b->event_asked ? "?scheduledEvent=" PL_COMPONENT : "", epoch);
    /* the Binding as text: built as a tree and dumped, it cost more than the rest of the binding */
    char *body = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    static const char head[] = "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":";
    rc = rc ? rc : jdump_append(&body, &len, &cap, head, sizeof head - 1);
    rc = rc ? rc : jdump_append_string(&body, &len, &cap, pod->name, strlen(pod->name));
    if (pod->uid) {
        rc = rc ? rc : jdump_append(&body, &len, &cap, ",\"uid\":", 7);
        rc = rc ? rc : jdump_append_string(&body, &len, &cap, pod->uid, strlen(pod->uid));
    }
    bool first = true;
    rc = rc ? rc : append_stamp(&body, &len, &cap, &first, PA_QUEUED_AT, st->queued);
    rc = rc ? rc : append_stamp(&body, &len, &cap, &first, PA_ADMITTED_AT, st->admitted);
    rc = rc ? rc : append_stamp(&body, &len, &cap, &first, PA_PLACED_AT, st->placed);
    if (!first) rc = rc ? rc : jdump_append(&body, &len, &cap, "}", 1);
    static const char target[] = "},\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":";
    rc = rc ? rc : jdump_append(&body, &len, &cap, target, sizeof target - 1);
    rc = rc ? rc : jdump_append_string(&body, &len, &cap, node, strlen(node));
    rc = rc ? rc : jdump_append(&body, &len, &cap, "}}", 2);
    cluster_assume(p->cm, pod->ns, pod->name, node);
    p->inflight++;
    if (rc || kclient_request_text(p->env.kc, "POST", path, body, len, NULL, on_bound, b)) {
        p->inflight--;
        cluster_forget(p->cm, pod->ns, pod->name);
        bind_ctx_free(b);
    }
    free(body);
}

/* A gang of nt members (pods) did not fit, for the reason why; attempts
 * before this one, told: the hash of the reason its members were last told
 * (NULL: none). Tells the members when the reason is new, else counts the
 * Event again every tenth attempt. */
static void tell_unplaced(struct placement *p, const char *key, struct cm_pod **pods, uint32_t nt, const char *why,
                          long attempts, const char *told) {
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)strmap_hash(why));
    bool changed = attempts == 0 || !told || strcmp(told, hash);
    if (!changed && attempts % 10) return;
    for (uint32_t j = 0; j < nt; j++) {
        ctl_record(p->rec, "v1", "Pod", pods[j]->ns, pods[j]->name, pods[j]->uid, "Warning", "FailedScheduling",
                   "%s", why);
        if (changed) ctl_pod_unschedulable(p->env.kc, pods[j]->ns, pods[j]->name, pods[j]->uid,
                                           CTL_REASON_UNSCHEDULABLE, why);
    }
    if (changed) ctl_lease_defer(p->env.lease, p->env.db, "HSET %s%s why %s", CTL_KEY_GANG, key, hash);
}

/* Claims the capacity a placed gang takes in Redis (active-active): 0 when
 * claimed, else the gang goes back to the queue soon (another engine
 * claimed room this engine's copy does not show yet) and -1. */
static int claim(struct placement *p, const char *key, struct cm_pod **pods, const struct place_task *pt,
                 const uint32_t *hosts, uint32_t nt) {
    const char **uids = malloc(nt * sizeof *uids);
    struct resvec *req = malloc(nt * sizeof *req);
    char node[256];
    int rc = -1;
    if (uids && req) {
        for (uint32_t j = 0; j < nt; j++) {
            uids[j] = pods[j]->uid ? pods[j]->uid : pods[j]->name;
            req[j] = pt[j].req;
        }
        rc = pl_claims_take(&p->claims, cluster_fleet(p->cm), hosts, uids, req, nt, node, sizeof node);
    }
    free(uids);
    free(req);
    if (!rc) return 0;
    /* counted, not logged: while the other engines' bindings reach this
     * engine's copy of the nodes, every attempt on their room is refused */
    metrics_inc(metrics_series1(p->m.placements, rc > 0 ? "claim_conflict" : "claim_failed"));
    retry_later(p, key, 20);
    return -1;
}

/* One gang from the ready queue; h is its record (HMGET ns pods attempts why admitted queued), taken. */
static void place_one(struct placement *p, const char *key, redisReply *h, struct cm_pod **pods,
                      struct pod_task *tasks, struct place_task *pt, uint32_t *hosts) {
    if (!h || h->type != REDIS_REPLY_ARRAY || h->elements != 6 || h->element[0]->type != REDIS_REPLY_STRING ||
        h->element[1]->type != REDIS_REPLY_STRING) {
        freeReplyObject(h); /* gone: its pods ended or were bound; nothing to do */
        return;
    }
    const char *ns = h->element[0]->str;
    long attempts = h->element[2]->type == REDIS_REPLY_STRING ? atol(h->element[2]->str) : 0;
    json_t *names = json_loads(h->element[1]->str, 0, NULL);
    size_t n = 0, missing = 0, assumed = 0, i;
    json_t *nm;
    json_array_foreach(names, i, nm) {
        const char *s = json_string_value(nm);
        struct cm_pod *pod = s ? cluster_pod(p->cm, ns, s) : NULL;
        if (!pod) {
            missing++;
            continue;
        }
        if (pod->assumed && !pod->info.terminal && !pod->info.deleting) {
            assumed++;
            if (!pod->uid || strmap_count(&p->checking) >= PL_CHECKING_MAX || strmap_get(&p->checking, pod->uid))
                continue;
            /* readied again with a member this engine bound and its watch has
             * never shown bound: the binding may be lost (a write not yet on
             * a replica when the primary failed over); read it */
            struct bind_ctx *b = bind_ctx_new(p, key, pod, pod->node);
            if (b) {
                b->check = true;
                strmap_put(&p->checking, pod->uid, b, NULL);
                fprintf(stderr, "level=warn msg=\"placement: gang readied again with a member assumed bound; reading "
                        "it\" pod=%s/%s node=%s gang=%s\n", b->ns, b->name, b->node, key);
                read_pod(p, b);
            }
            continue;
        }
        if (pod->node || pod->info.terminal || pod->info.deleting || pod->bad || !pod->obj || n >= PL_GANG_MAX)
            continue;
        pods[n++] = pod;
    }
    json_decref(names);
    if (assumed) { /* its other members wait for the reads: a member found unbound tries the gang again */
        if (n) retry_later(p, key, 1000);
        freeReplyObject(h);
        return;
    }
    if (missing && (attempts < PL_MISSING_MAX || !n)) {
        /* the cache lags the resource manager: look again soon, then every
         * 5 s; a gang is never dropped for it (its record goes when its pods
         * do) */
        if (attempts == PL_MISSING_MAX)
            fprintf(stderr, "level=warn msg=\"placement: gang members not in the cache\" gang=%s missing=%zu "
                    "attempts=%ld\n", key, missing, attempts);
        ctl_lease_defer(p->env.lease, p->env.db, "HINCRBY %s%s attempts 1", CTL_KEY_GANG, key);
        retry_later(p, key, attempts < PL_MISSING_MAX ? 50 : 5000);
        freeReplyObject(h);
        return;
    }
    uint32_t nt = 0;
    char err[256];
    for (size_t j = 0; j < n; j++) {
        if (pod_task_build(pods[j]->obj, &pods[j]->info, &tasks[nt], err, sizeof err)) continue;
        pt[nt] = tasks[nt].t;
        pods[nt] = pods[j];
        nt++;
    }
    if (nt) {
        struct place_gang g = {.id = key,
                               .job = pods[0]->info.job ? pods[0]->info.job : pods[0]->info.gang,
                               .strategy = pods[0]->info.strategy,
                               .tasks = pt,
                               .ntasks = nt};
        struct place_failure fail;
        int rc = cluster_place_gang(p->cm, &g, hosts, &fail); /* held to the nodes' pod limits too */
        if (rc == 0) { /* the model counts them on assume */
            if (p->claiming && claim(p, key, pods, pt, hosts, nt)) goto done;
            metrics_inc(metrics_series1(p->m.placements, "placed"));
            if (h->element[4]->type == REDIS_REPLY_STRING) /* admitted by this version of resmgr */
                metrics_observe(metrics_series0(p->m.place_wait),
                                (double)(now_ms() - atoll(h->element[4]->str)) / 1e3);
            struct stamps st;
            ctl_format_ms(h->element[5]->type == REDIS_REPLY_STRING ? atoll(h->element[5]->str) : 0, st.queued);
            ctl_format_ms(h->element[4]->type == REDIS_REPLY_STRING ? atoll(h->element[4]->str) : 0, st.admitted);
            ctl_format_ms(now_ms(), st.placed);
            for (uint32_t j = 0; j < nt; j++)
                bind_pod(p, key, pods[j], host_name(cluster_fleet(p->cm), hosts[j]), &st);
        } else {
            char why[1024];
            if (rc == -ENOSPC)
                place_failure_format_k8s(cluster_fleet(p->cm), &fail, nt, why, sizeof why);
            else
                snprintf(why, sizeof why, "cannot place: %s", strerror(-rc));
            p->unplaceable++;
            metrics_inc(metrics_series1(p->m.placements, "unplaceable"));
            tell_unplaced(p, key, pods, nt, why, attempts,
                          h->element[3]->type == REDIS_REPLY_STRING ? h->element[3]->str : NULL);
            ctl_lease_defer(p->env.lease, p->env.db, "HINCRBY %s%s attempts 1", CTL_KEY_GANG, key);
            int64_t backoff = 100, most = p->o.retry_max_ms;
            for (long a = 0; a < attempts && backoff < most; a++) backoff *= 2;
            retry_later(p, key, backoff > most ? most : backoff);
        }
    }
done:
    for (uint32_t j = 0; j < nt; j++) pod_task_free(&tasks[j]);
    freeReplyObject(h);
}

/* ---- catch-up at a term's start (the head of this file) ---- */

static uint64_t rv_num(const char *rv) {
    if (!rv || *rv < '0' || *rv > '9') return 0;
    return strtoull(rv, NULL, 10);
}

static void on_store_rv(void *ud, const struct kc_response *res) {
    struct placement *p = ud;
    p->inflight--;
    p->catchup_asked = false;
    if (after_stop(p, NULL)) return;
    json_t *body = res->status == 200 ? kc_response_body(res) : NULL;
    uint64_t rv = rv_num(json_string_value(json_object_get(json_object_get(body, "metadata"), "resourceVersion")));
    if (!rv) { /* read again at the next retry tick (100 ms): logged once in 50 */
        if (p->catchup_fails++ % 50 == 0)
            fprintf(stderr, "level=warn msg=\"placement: cannot read the store's resourceVersion; not placing yet\" "
                    "status=%ld error=\"%s\" attempts=%u\n", res->status, res->error ? res->error : "",
                    p->catchup_fails);
        return;
    }
    p->catchup_rv = rv;
    p->catchup_since = uv_now(p->env.loop);
}

/* Asks the API server for the store's resourceVersion (a consistent list of
 * one pod), once at a time. */
static void read_store_rv(struct placement *p) {
    if (p->catchup_asked || p->catchup_rv) return;
    p->catchup_asked = true;
    p->inflight++;
    if (kclient_request_text(p->env.kc, "GET", "/api/v1/pods?limit=1", NULL, 0, NULL, on_store_rv, p)) {
        p->inflight--;
        p->catchup_asked = false;
    }
}

/* Whether the informers have reached the store as of the term's start;
 * lists those still behind again (once): at once one that joined a feed
 * listed before R was read (waiting for its watch would take a bookmark's
 * period on a quiet resource), else after catchup_ms. */
static bool catch_up(struct placement *p) {
    if (!p->catchup_rv) return false;
    bool pods = rv_num(kc_informer_rv(p->pods)) >= p->catchup_rv;
    bool nodes = rv_num(kc_informer_rv(p->nodes)) >= p->catchup_rv;
    uint64_t now = uv_now(p->env.loop);
    if (!pods || !nodes) {
        bool late = (!pods && p->pods_late) || (!nodes && p->nodes_late);
        if (!p->relisted && (late || now - p->catchup_since >= p->o.catchup_ms)) {
            fprintf(stderr, "level=warn msg=\"placement: informers behind the store as of the term's start; "
                    "listing again\" store_rv=%llu pods_rv=%s nodes_rv=%s waited_ms=%llu\n",
                    (unsigned long long)p->catchup_rv, kc_informer_rv(p->pods), kc_informer_rv(p->nodes),
                    (unsigned long long)(now - p->catchup_since));
            if ((pods || !kc_informer_relist(p->pods)) && (nodes || !kc_informer_relist(p->nodes)))
                p->relisted = true; /* else tried again at the next tick */
        }
        return false;
    }
    p->caught_up = true;
    metrics_inc(metrics_series1(p->m.catchups, p->relisted ? "relisted" : "caught_up"));
    metrics_observe(metrics_series0(p->m.catchup_wait), (double)(now - p->term_ms) / 1e3);
    fprintf(stderr, "level=info msg=\"placement: caught up with the store as of the term's start\" store_rv=%llu "
            "pods_rv=%s nodes_rv=%s waited_ms=%llu relisted=%d\n", (unsigned long long)p->catchup_rv,
            kc_informer_rv(p->pods), kc_informer_rv(p->nodes), (unsigned long long)(now - p->term_ms),
            p->relisted);
    return true;
}

static void on_tick(uv_timer_t *t) {
    struct placement *p = t->data;
    if (!kc_informer_synced(p->pods) || !kc_informer_synced(p->nodes) || p->inflight >= p->o.max_inflight) return;
    if (!p->caught_up && !catch_up(p)) return;
    if (cluster_refresh(p->cm)) return;
    /* a pop is a write: a stale engine's is refused, the gangs left to the current one */
    redisReply *rep = ctl_lease_redis(p->env.lease, p->env.db, "LPOP %s %u", CTL_KEY_READY, p->o.batch);
    if (!rep || rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        return;
    }
    static struct cm_pod *pods[PL_GANG_MAX];
    static struct pod_task tasks[PL_GANG_MAX];
    static struct place_task pt[PL_GANG_MAX];
    static uint32_t hosts[PL_GANG_MAX];
    /* the gangs' records in one round trip, then each gang */
    redisReply **recs = calloc(rep->elements ? rep->elements : 1, sizeof *recs);
    if (!recs) {
        freeReplyObject(rep);
        return;
    }
    for (size_t i = 0; i < rep->elements; i++)
        ctl_redis_append(p->env.db, "HMGET %s%s ns pods attempts why admitted queued", CTL_KEY_GANG,
                         rep->element[i]->str);
    for (size_t i = 0; i < rep->elements; i++) recs[i] = ctl_redis_reply(p->env.db);
    if (rep->elements) p->busy_ms = uv_now(p->env.loop);
    for (size_t i = 0; i < rep->elements; i++) place_one(p, rep->element[i]->str, recs[i], pods, tasks, pt, hosts);
    free(recs);
    freeReplyObject(rep);
}

void placement_kick(struct placement *p) {
    if (!p || p->stopping) return;
    uint64_t now = uv_now(p->env.loop);
    /* busy (a burst finds gangs at every round): the ticks go on as they
     * are; telling it at every round made bindings trickle and cost more
     * per pod */
    if (now - p->busy_ms < 3 * (uint64_t)p->o.tick_ms) return;
    p->busy_ms = now; /* once per idle spell */
    uv_timer_start(&p->tick, on_tick, 0, p->o.tick_ms);
}

static void on_retry(uv_timer_t *t) {
    struct placement *p = t->data;
    if (!p->caught_up) {
        read_store_rv(p); /* no-op once read */
        /* caught up between ticks (they may be seconds apart): a round now,
         * so that a kick that came meanwhile is not lost */
        if (kc_informer_synced(p->pods) && kc_informer_synced(p->nodes) && catch_up(p))
            uv_timer_start(&p->tick, on_tick, 0, p->o.tick_ms);
    }
    if (p->unsure) read_due(p);
    char epoch[24] = "";
    if (p->env.lease) snprintf(epoch, sizeof epoch, "%lld", ctl_lease_epoch(p->env.lease));
    if (p->env.lease && !ctl_lease_held(p->env.lease)) return;
    /* fenced as ctl_lease_defer's writes are (ARGV[2] the term's epoch, "" for none) */
    freeReplyObject(ctl_redis(p->env.db, "EVAL %s 3 %s %s %s %lld %s",
                              "if ARGV[2] ~= '' then local held = redis.call('GET', KEYS[3]) "
                              "if held ~= ARGV[2] then return redis.error_reply('" CTL_FENCE_REFUSED
                              " ' .. KEYS[3] .. ' ' .. ARGV[2] .. ' ' .. (held or 'none')) end end "
                              "local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1024) "
                              "for _, k in ipairs(due) do redis.call('ZREM', KEYS[1], k) "
                              "redis.call('RPUSH', KEYS[2], k) end return #due",
                              CTL_KEY_RETRY, CTL_KEY_READY, PELOTON_PLACEMENT_EPOCH_KEY, (long long)now_ms(), epoch));
}

struct placement *placement_start(const struct ctl_env *env, const struct placement_options *o, char *err,
                                  size_t errlen) {
    struct placement *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->env = *env;
    placement_options_default(&p->o);
    pl_metrics_init(&p->m, env->metrics);
    if (o) {
        if (o->batch) p->o.batch = o->batch;
        if (o->tick_ms) p->o.tick_ms = o->tick_ms;
        if (o->retry_max_ms) p->o.retry_max_ms = o->retry_max_ms;
        if (o->max_inflight) p->o.max_inflight = o->max_inflight;
        p->o.claims = o->claims;
        if (o->claim_ttl_ms) p->o.claim_ttl_ms = o->claim_ttl_ms;
        if (o->claim_grace_ms) p->o.claim_grace_ms = o->claim_grace_ms;
        if (o->catchup_ms) p->o.catchup_ms = o->catchup_ms;
    }
    struct cm_options co;
    cm_options_default(&co);
    co.count_pending = false;
    co.keep = CM_KEEP_TASKS; /* a pending pod's task is built from what is kept of it */
    p->cm = cluster_new(&co);
    if (p->o.claims) {
        char owner[64];
        snprintf(owner, sizeof owner, "%s-%ld-%llx", env->identity ? env->identity : "placement", (long)getpid(),
                 (unsigned long long)uv_hrtime());
        p->claiming = !pl_claims_init(&p->claims, env->db, owner, p->o.claim_ttl_ms, p->o.claim_grace_ms);
        if (!p->claiming) fprintf(stderr, "level=error msg=\"placement: no capacity claims\" reason=\"scripts\"\n");
    }
    p->rec = ctl_recorder_new(env->kc, PL_COMPONENT, 0);
    static const struct kc_informer_handlers hp = {on_pod_add, on_pod_update, on_pod_delete, NULL},
                                             hn = {on_node_add, on_node_update, on_node_delete, NULL};
    if (p->cm) {
        p->pods = kc_informer_new_opts(env->kc, "/api/v1/pods", NULL, &ctl_pods_slim, &hp, p);
        p->nodes = kc_informer_new(env->kc, "/api/v1/nodes", NULL, &hn, p);
    }
    /* a term's engine catches up before it places (the head of this file);
     * one without a lease (the only engine, or active-active from the
     * process's start) follows nobody. An informer that joins a feed
     * another role listed already has that feed's cache, as late as its
     * watch; one started with its feed (at the process's start, the pod
     * feed the resource manager shares) lists with it, and its first
     * events decide */
    p->caught_up = !env->lease;
    p->epoch = ctl_lease_epoch(env->lease); /* started at its term's start: that term's (0 without a lease) */
    p->pods_late = kc_informer_lists(p->pods) > 0;
    p->nodes_late = kc_informer_lists(p->nodes) > 0;
    if (!p->cm || !p->rec || !p->pods || !p->nodes || kc_informer_start(p->pods) || kc_informer_start(p->nodes)) {
        snprintf(err, errlen, "placement: cannot start");
        placement_stop(p);
        return NULL;
    }
    p->term_ms = uv_now(env->loop);
    if (!p->caught_up) read_store_rv(p);
    uv_timer_init(env->loop, &p->tick);
    uv_timer_init(env->loop, &p->retry);
    p->tick.data = p->retry.data = p;
    p->timers_open = 2;
    uv_timer_start(&p->tick, on_tick, p->o.tick_ms, p->o.tick_ms);
    uv_timer_start(&p->retry, on_retry, 100, 100);
    return p;
}

static void on_closed(uv_handle_t *h) {
    struct placement *p = h->data;
    if (--p->timers_open == 0 && !p->inflight) free(p);
}

void placement_stop(struct placement *p) {
    if (!p) return;
    p->stopping = true;
    kc_informer_free(p->pods);
    kc_informer_free(p->nodes);
    cluster_free(p->cm);
    p->cm = NULL;
    if (p->rec) {
        uint64_t posted, counted;
        ctl_recorder_counts(p->rec, &posted, &counted);
        fprintf(stderr, "level=info msg=\"placement: stopped\" placed=%llu unplaceable=%llu events_posted=%llu "
                "events_counted=%llu\n", (unsigned long long)p->placed, (unsigned long long)p->unplaceable,
                (unsigned long long)posted, (unsigned long long)counted);
    }
    ctl_recorder_free(p->rec);
    p->rec = NULL;
    strmap_free(&p->bound_at);
    strmap_free(&p->checking); /* its reads end with the role (on_pod_read, the unsure list) */
    while (p->unsure) {
        struct bind_ctx *b = p->unsure;
        p->unsure = b->next;
        bind_ctx_free(b);
    }
    if (!p->timers_open) {
        if (!p->inflight) free(p);
        return;
    }
    uv_close((uv_handle_t *)&p->tick, on_closed);
    uv_close((uv_handle_t *)&p->retry, on_closed);
}
