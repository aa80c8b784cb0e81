/* The host manager, kubelet driver (hostmgr.h).
 *
 * State: one struct hm_node per node name (created by a Node or by a pod
 * bound to a name not seen yet), holding the set of pods bound to it (an
 * index kept by the pods informer's handlers) and where its write-back stands.
 * The check timer decides up/down; pump() then starts the writes that are
 * still missing, within max_inflight. Each completion kicks pump() again
 * through a zero timer, so a large node drains as fast as the server answers.
 *
 * Writes are operations (struct hm_op) on a list owned by the hostmgr. An op
 * whose request is in flight is owned by that request: hostmgr_stop only
 * detaches it (op->h = NULL) and the callback frees it. A pod op stays in
 * pod_ops after a failure (until its retry time) and after its delete (until
 * the pod leaves the informer's cache), so each pod gets one Event and one
 * delete however late the watch reports it gone. */
#include "hostmgr.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "errmsg.h"
#include "labels.h"
#include "strmap.h"

#define NODES_PATH "/api/v1/nodes"
#define LEASES_PATH "/apis/coordination.k8s.io/v1/namespaces/" HOSTMGR_LEASE_NS "/leases"
#define PODS_PATH "/api/v1/pods"
#define MERGE_PATCH "application/merge-patch+json"
#define NAME_MAX_LEN 253 /* longer names are not Kubernetes names: ignored (bounds the paths built) */

struct hm_node {
    char *name;
    struct strmap pods;   /* "ns/name" of the pods bound here -> struct hm_pod */
    int64_t appeared_ms;  /* wall clock when the Node was first seen */
    bool has_node;        /* a Node object exists (else only pods name it) */
    bool down;            /* the verdict of the last check */
    bool lapsed;          /* what the lease cache said at the last check (down once a read confirms it) */
    bool confirming;      /* the direct read of its Lease is in flight */
    bool busy;            /* a node write in flight */
    bool cond_ok, taint_ok, marked; /* since going down: Ready patched, taint added, one attempt done */
    bool untaint_ok;      /* since going up: the taint is gone */
    unsigned fails;
    int64_t retry_at_ms;
    bool maint_busy;      /* a maintenance write (cordon, "drained") in flight */
    unsigned maint_fails;
    int64_t maint_retry_ms;
    json_t *lease;        /* its Lease in the cache (a reference), kept by the Lease events; NULL: none */
    /* The Lease as the last check read it (lease_view): the object (a
     * reference, so its address is not another's) and what it says. */
    json_t *lease_seen;
    bool lease_renew_ok;  /* spec.renewTime parsed */
    int64_t lease_renew_ms, lease_period_ms;
};

/* What hostmgr keeps of a bound pod (the pod feed keeps no objects). */
struct hm_pod {
    struct hm_node *n; /* where it is bound */
    char *uid;
    bool terminal;     /* Succeeded or Failed */
};

enum hm_op_kind { OP_COND, OP_TAINT, OP_UNTAINT, OP_POD, OP_MAINT, OP_CONFIRM };

#define HM_HOLD_REASONS 6 /* enum hm_hold */

struct hm_op {
    struct hm_op *prev, *next;
    struct hostmgr *h;    /* NULL once the hostmgr is gone */
    enum hm_op_kind kind;
    bool inflight;
    bool cond_on_node;    /* OP_COND: the status subresource said 404, patch the node */
    bool event_posted;    /* OP_POD */
    bool deleted;         /* OP_POD: done; kept until the pod leaves the cache */
    unsigned fails;
    int64_t retry_at_ms;
    uint64_t sent_ms;     /* OP_CONFIRM: loop time when the read was sent */
    char *node;           /* node name */
    char *key, *ns, *name, *uid; /* OP_POD: the pod */
};

struct hostmgr {
    uv_loop_t *loop;
    struct kclient *kc;
    struct hostmgr_options o;
    struct kc_informer *nodes, *leases, *pods;
    uv_timer_t *tick, *kick; /* heap: freed by their close callbacks */
    struct strmap byname;    /* node name -> struct hm_node */
    struct strmap pod_ops;   /* "ns/name" -> struct hm_op (OP_POD) */
    struct strmap bound;     /* "ns/name" -> struct hm_pod, every bound pod */
    struct strmap draining;  /* names of the Nodes whose maintenance annotation says draining (values unused) */
    struct hm_op *ops;       /* every op, in flight or parked */
    uint32_t inflight;
    bool checked;            /* the first check ran (verdicts exist) */
    bool maint_due;          /* the maintenance pass runs at the next pump (each check, and after its writes) */
    bool stale;              /* an informer is not current: every judgement is held */
    bool said_stale;         /* the log line saying so was written (its pair comes when they are current) */
    bool paused;             /* a mass event: no pod is deleted as lost */
    int64_t calm_since;      /* wall clock since when a paused mass event is below the threshold (0: not) */
    int64_t current_since;   /* wall clock since when the informers have been current and the lease
                              * cache not rebuilt (0: they are not current) */
    unsigned lease_lists;    /* the lease informer's list generation at the last check */
    uint64_t last_tick;      /* loop time of the last check timer */
    uint64_t held;           /* judgements held (hostmgr_held) */
    struct metrics_series *m_paused;   /* peloton_hostmgr_evictions_paused */
    struct metrics_series *m_held[HM_HOLD_REASONS];  /* peloton_hostmgr_judgements_held_total by reason (enum hm_hold) */
};

/* Why a judgement was held (the reason label of the counter). */
enum hm_hold { HOLD_NOT_CURRENT, HOLD_RENEWED, HOLD_READ_FAILED, HOLD_PAUSED, HOLD_SETTLING, HOLD_SLOW_READ };
static const char *const hold_reason[HM_HOLD_REASONS] = {"informer-not-current", "lease-renewed-on-read", "read-failed",
                                                         "evictions-paused",     "settling",              "slow-read"};

/* ---- time and the verdict (pure) ---- */

static bool digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m) {
    static const int dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

int hostmgr_parse_microtime(const char *s, int64_t *ms) {
    int y, mo, d, hh, mi, ss;
    if (!s || strnlen(s, 64) >= 64 || strlen(s) < 20) return -EINVAL;
    if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' || !digits(s + 8, 2, &d) ||
        (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &hh) || s[13] != ':' || !digits(s + 14, 2, &mi) ||
        s[16] != ':' || !digits(s + 17, 2, &ss))
        return -EINVAL;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || hh > 23 || mi > 59 || ss > 60) return -EINVAL;
    const char *p = s + 19;
    int64_t frac_ms = 0;
    if (*p == '.') {
        p++;
        int n = 0, scale = 100;
        while (*p >= '0' && *p <= '9') {
            if (n >= 9) return -EINVAL; /* at most nanoseconds */
            if (scale) {
                frac_ms += (*p - '0') * scale;
                scale /= 10;
            }
            n++;
            p++;
        }
        if (!n) return -EINVAL;
    }
    int64_t off_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om) || oh > 23 || om > 59) return -EINVAL;
        off_s = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p) return -EINVAL;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss - off_s;
    *ms = secs * 1000 + frac_ms;
    return 0;
}

void hostmgr_format_time(int64_t ms, bool micro, char out[32]) {
    int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    if (micro) snprintf(out + n, 32 - n, ".%06" PRId64 "Z", (ms - secs * 1000) * 1000);
    else snprintf(out + n, 32 - n, "Z");
}

bool hostmgr_lease_lapsed(int64_t renew_ms, int64_t duration_s, int64_t now_ms, int64_t grace_ms) {
    return now_ms > renew_ms + duration_s * 1000 + grace_ms;
}

/* How long a lease lasts, grace included (ms); for no lease, no_lease_ms. */
static int64_t lease_period_ms(const json_t *lease, const struct hostmgr_options *o) {
    if (!lease) return o->no_lease_ms;
    json_t *dur = json_object_get(json_object_get(lease, "spec"), "leaseDurationSeconds");
    int64_t d = json_is_integer(dur) && json_integer_value(dur) > 0 ? json_integer_value(dur)
                                                                    : HOSTMGR_DEFAULT_LEASE_SECONDS;
    if (d > 366 * 86400) d = 366 * 86400;
    return d * 1000 + o->grace_ms;
}

bool hostmgr_node_is_down(const json_t *lease, int64_t appeared_ms, int64_t now_ms, const struct hostmgr_options *o) {
    json_t *spec = json_object_get(lease, "spec");
    int64_t renew;
    if (!spec || hostmgr_parse_microtime(json_string_value(json_object_get(spec, "renewTime")), &renew))
        return now_ms > appeared_ms + (int64_t)o->no_lease_ms;
    json_t *dur = json_object_get(spec, "leaseDurationSeconds");
    int64_t d = json_is_integer(dur) && json_integer_value(dur) > 0 ? json_integer_value(dur)
                                                                    : HOSTMGR_DEFAULT_LEASE_SECONDS;
    if (d > 366 * 86400) d = 366 * 86400; /* keep the sum far from overflow */
    return hostmgr_lease_lapsed(renew, d, now_ms, o->grace_ms);
}

void hostmgr_options_default(struct hostmgr_options *o) {
    o->check_ms = 1000;
    o->grace_ms = 0;
    o->no_lease_ms = 80000;
    o->max_inflight = 32;
    o->retry_max_ms = 30000;
    o->mass_fraction = 0.55;
    o->mass_min_nodes = 3;
    o->slow_read_ms = 2000;
    o->metrics = NULL;
}

/* ---- small helpers ---- */

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *md_str(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static const char *pod_node(const json_t *pod) {
    return json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
}

static bool pod_terminal(const json_t *pod) {
    const char *ph = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    return ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed"));
}

static bool is_our_taint(const json_t *t) {
    const char *k = json_string_value(json_object_get(t, "key"));
    const char *e = json_string_value(json_object_get(t, "effect"));
    return k && e && !strcmp(k, HOSTMGR_TAINT_UNREACHABLE) && !strcmp(e, "NoExecute");
}

static bool has_our_taint(const json_t *node) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t) if (is_our_taint(t)) return true;
    return false;
}

static const char *ready_status(const json_t *node) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        if (type && !strcmp(type, "Ready")) return json_string_value(json_object_get(c, "status"));
    }
    return NULL;
}

/* The next backoff after fails failures: check_ms doubling, at most retry_max_ms. */
static int64_t backoff_ms(const struct hostmgr *h, unsigned fails) {
    int64_t b = h->o.check_ms;
    for (unsigned i = 1; i < fails && b < h->o.retry_max_ms; i++) b *= 2;
    return b > h->o.retry_max_ms ? h->o.retry_max_ms : b;
}

static void kick(struct hostmgr *h);

/* ---- the node index ---- */

static struct hm_node *node_get(struct hostmgr *h, const char *name, bool create) {
    struct hm_node *n = strmap_get(&h->byname, name);
    if (n || !create) return n;
    n = calloc(1, sizeof *n);
    if (!n || !(n->name = strdup(name))) {
        free(n);
        return NULL;
    }
    if (strmap_put(&h->byname, name, n, NULL)) {
        free(n->name);
        free(n);
        return NULL;
    }
    return n;
}

static void node_free(struct hm_node *n) {
    json_decref(n->lease);
    json_decref(n->lease_seen);
    strmap_free(&n->pods);
    free(n->name);
    free(n);
}

/* Drops an entry that neither a Node nor a pod needs any more. */
static void node_maybe_drop(struct hostmgr *h, struct hm_node *n) {
    if (n->has_node || strmap_count(&n->pods) || n->busy || n->maint_busy || n->confirming) return;
    strmap_del(&h->byname, n->name);
    node_free(n);
}

/* Keeps h->draining: whether Node obj is to be drained (the maintenance
 * pass visits only those, not every Node each check). */
static void track_draining(struct hostmgr *h, const json_t *obj, bool gone) {
    const char *name = md_str(obj, "name");
    if (!name) return;
    const char *m =
        json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), PA_MAINTENANCE));
    if (!gone && m && !strcmp(m, PA_MAINT_DRAINING)) {
        if (!strmap_get(&h->draining, name)) strmap_put(&h->draining, name, (void *)1, NULL);
    } else {
        strmap_del(&h->draining, name);
    }
}

static void on_node_add(void *ud, json_t *obj) {
    struct hostmgr *h = ud;
    track_draining(h, obj, false);
    const char *name = md_str(obj, "name");
    if (!name || strlen(name) > NAME_MAX_LEN) return; /* not a valid name: ignored */
    /* a Mesos agent's Node has no lease: the Mesos driver (mesosdrv.c) keeps it */
    const char *backend = json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), "peloton.io/backend"));
    if (backend && !strcmp(backend, "mesos")) return;
    struct hm_node *n = node_get(h, name, true);
    if (!n || n->has_node) return;
    n->has_node = true;
    n->appeared_ms = wall_ms();
    json_t *lease = kc_informer_get(h->leases, HOSTMGR_LEASE_NS, name); /* it may have come first */
    json_incref(lease);
    json_decref(n->lease);
    n->lease = lease;
}

/* A Lease came, was renewed or went: its node's entry points at the cached
 * object, so a check reads it without a lookup. */
static void lease_set(struct hostmgr *h, json_t *obj, bool gone) {
    const char *name = md_str(obj, "name"), *ns = md_str(obj, "namespace");
    struct hm_node *n = name && (!ns || !strcmp(ns, HOSTMGR_LEASE_NS)) ? node_get(h, name, false) : NULL;
    if (!n) return;
    if (!gone) json_incref(obj);
    json_decref(n->lease);
    n->lease = gone ? NULL : obj;
}

static void on_lease_add(void *ud, json_t *obj) { lease_set(ud, obj, false); }
static void on_lease_update(void *ud, json_t *old, json_t *obj) { lease_set(ud, obj, false); }
static void on_lease_delete(void *ud, json_t *obj) { lease_set(ud, obj, true); }

static void on_node_update(void *ud, json_t *old, json_t *obj) { on_node_add(ud, obj); }

static void on_node_delete(void *ud, json_t *obj) {
    struct hostmgr *h = ud;
    track_draining(h, obj, true);
    const char *name = md_str(obj, "name");
    struct hm_node *n = name ? node_get(h, name, false) : NULL;
    if (!n) return;
    n->has_node = false;
    node_maybe_drop(h, n);
}

static void pod_key(const json_t *pod, char *key, size_t len) {
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name");
    snprintf(key, len, "%s/%s", ns ? ns : "", name ? name : "");
}

static void pod_unindex(struct hostmgr *h, const char *key, struct hm_pod *rec) {
    struct hm_node *n = rec->n;
    strmap_del(&h->bound, key);
    strmap_del(&n->pods, key);
    free(rec->uid);
    free(rec);
    node_maybe_drop(h, n);
}

/* A pod as the feed reports it: indexed under its node with its uid and
 * whether it ended; one that is not bound (or not validly named) is not. */
static void pod_seen(struct hostmgr *h, const json_t *pod) {
    const char *node = pod_node(pod), *ns = md_str(pod, "namespace"), *name = md_str(pod, "name");
    char key[2 * NAME_MAX_LEN + 2];
    pod_key(pod, key, sizeof key);
    struct hm_pod *rec = strmap_get(&h->bound, key);
    bool valid = node && node[0] && strlen(node) <= NAME_MAX_LEN && name && strlen(name) <= NAME_MAX_LEN &&
                 (!ns || strlen(ns) <= NAME_MAX_LEN);
    if (rec && (!valid || strcmp(rec->n->name, node))) { /* unbound, or on another node now */
        pod_unindex(h, key, rec);
        rec = NULL;
    }
    if (!valid) return;
    if (!rec) {
        struct hm_node *n = node_get(h, node, true);
        rec = n ? calloc(1, sizeof *rec) : NULL;
        bool in_bound = rec && !strmap_put(&h->bound, key, rec, NULL);
        if (!in_bound || strmap_put(&n->pods, key, rec, NULL)) {
            if (in_bound) strmap_del(&h->bound, key);
            free(rec);
            if (n) node_maybe_drop(h, n);
            fprintf(stderr, "level=error msg=\"hostmgr: out of memory indexing a pod\" pod=%s\n", key);
            return;
        }
        rec->n = n;
    }
    const char *uid = md_str(pod, "uid");
    if (!uid || !rec->uid || strcmp(uid, rec->uid)) {
        free(rec->uid);
        rec->uid = uid ? strdup(uid) : NULL;
    }
    rec->terminal = pod_terminal(pod);
}

static void pod_gone(struct hostmgr *h, const json_t *pod) {
    char key[2 * NAME_MAX_LEN + 2];
    pod_key(pod, key, sizeof key);
    struct hm_pod *rec = strmap_get(&h->bound, key);
    if (rec) pod_unindex(h, key, rec);
}

static void on_pod_add(void *ud, json_t *obj) { pod_seen(ud, obj); }

static void on_pod_update(void *ud, json_t *old, json_t *obj) { pod_seen(ud, obj); }

static void on_pod_delete(void *ud, json_t *obj) { pod_gone(ud, obj); }

static void on_synced(void *ud) { kick(ud); }

/* ---- operations ---- */

static struct hm_op *op_new(struct hostmgr *h, enum hm_op_kind kind, const char *node) {
    struct hm_op *op = calloc(1, sizeof *op);
    if (!op || !(op->node = strdup(node))) {
        free(op);
        return NULL;
    }
    op->h = h;
    op->kind = kind;
    op->next = h->ops;
    if (h->ops) h->ops->prev = op;
    h->ops = op;
    return op;
}

static void op_free(struct hm_op *op) {
    struct hostmgr *h = op->h;
    if (h) {
        if (op->prev) op->prev->next = op->next;
        else h->ops = op->next;
        if (op->next) op->next->prev = op->prev;
        if (op->kind == OP_POD && op->key && strmap_get(&h->pod_ops, op->key) == op) strmap_del(&h->pod_ops, op->key);
    }
    free(op->node);
    free(op->key);
    free(op->ns);
    free(op->name);
    free(op->uid);
    free(op);
}

/* Sends op's request; false when it could not be started (op not in flight). */
static bool op_send(struct hm_op *op, const char *method, const char *path, json_t *body, const char *ctype,
                    kc_done_fn done) {
    struct hostmgr *h = op->h;
    int rc = kclient_request(h->kc, method, path, body, ctype, done, op);
    json_decref(body);
    if (rc) {
        fprintf(stderr, "level=warn msg=\"hostmgr: request not started\" method=%s path=%s error=%d\n", method, path,
                rc);
        return false;
    }
    op->inflight = true;
    h->inflight++;
    return true;
}

/* Bookkeeping when a request of op completed; false when the hostmgr is gone
 * (op freed). */
static bool op_landed(struct hm_op *op) {
    if (!op->h) {
        op_free(op);
        return false;
    }
    op->inflight = false;
    op->h->inflight--;
    return true;
}

static bool ok2xx(long s) { return s >= 200 && s < 300; }

/* ---- node writes: Ready=Unknown, then the taint; or the taint's removal ---- */

static void node_write_done(struct hostmgr *h, struct hm_op *op, bool ok, long status, const char *error) {
    struct hm_node *n = node_get(h, op->node, false);
    if (n) {
        n->busy = false;
        if (ok) {
            n->fails = 0;
        } else {
            n->fails++;
            n->retry_at_ms = wall_ms() + backoff_ms(h, n->fails);
            fprintf(stderr, "level=warn msg=\"hostmgr: node write failed\" node=%s op=%s status=%ld error=\"%s\"\n",
                    op->node, op->kind == OP_UNTAINT ? "untaint" : op->kind == OP_TAINT ? "taint" : "ready-unknown",
                    status, error ? error : "");
        }
        if (op->kind != OP_UNTAINT) n->marked = true;
        node_maybe_drop(h, n);
    }
    op_free(op);
    kick(h);
}

/* The taints list of node with ours added (add) or removed; NULL when it
 * would not change. */
static json_t *taints_with(const json_t *node, bool add) {
    json_t *cur = json_object_get(json_object_get(node, "spec"), "taints");
    json_t *out = json_array();
    bool found = false;
    size_t i;
    json_t *t;
    json_array_foreach(cur, i, t) {
        if (is_our_taint(t)) {
            found = true;
            if (!add) continue;
        }
        json_array_append(out, t);
    }
    if (found == add) {
        json_decref(out);
        return NULL;
    }
    if (add) {
        char ts[32];
        hostmgr_format_time(wall_ms(), false, ts);
        json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "key", HOSTMGR_TAINT_UNREACHABLE, "effect",
                                             "NoExecute", "timeAdded", ts));
    }
    return out;
}

/* A merge patch of spec.taints with the node's resourceVersion as precondition. */
static json_t *taint_patch(const json_t *node, json_t *taints) {
    json_t *p = json_pack("{s:{}, s:{s:o}}", "metadata", "spec", "taints",
                          json_array_size(taints) ? taints : (json_decref(taints), json_null()));
    const char *rv = md_str(node, "resourceVersion");
    if (p && rv) json_object_set_new(json_object_get(p, "metadata"), "resourceVersion", json_string(rv));
    return p;
}

static void on_taint_done(void *ud, const struct kc_response *r) {
    struct hm_op *op = ud;
    if (!op_landed(op)) return;
    struct hostmgr *h = op->h;
    struct hm_node *n = node_get(h, op->node, false);
    bool ok = ok2xx(r->status) || r->status == 404; /* a Node that is gone needs nothing */
    if (n && ok2xx(r->status)) {
        if (op->kind == OP_TAINT) n->taint_ok = true;
        else n->untaint_ok = true;
    }
    node_write_done(h, op, ok, r->status, r->error);
}

/* Starts the taint write of op (OP_TAINT or OP_UNTAINT) from the node as
 * given (a reply or the cache); finishes op when there is nothing to do. */
static void taint_step(struct hostmgr *h, struct hm_op *op, const json_t *node) {
    struct hm_node *n = node_get(h, op->node, false);
    json_t *taints = node ? taints_with(node, op->kind == OP_TAINT) : NULL;
    if (!taints) { /* already as wanted */
        if (n && node) {
            if (op->kind == OP_TAINT) n->taint_ok = true;
            else n->untaint_ok = true;
        }
        node_write_done(h, op, node != NULL, 0, node ? NULL : "no such node");
        return;
    }
    char path[sizeof NODES_PATH + 3 * NAME_MAX_LEN + 8];
    int len = snprintf(path, sizeof path, "%s/", NODES_PATH);
    kc_escape(op->node, path + len, sizeof path - (size_t)len);
    if (!op_send(op, "PATCH", path, taint_patch(node, taints), MERGE_PATCH, on_taint_done))
        node_write_done(h, op, false, 0, "request not started");
}

/* The conditions of node with Ready set to Unknown (the others kept). */
static json_t *conditions_unknown(const json_t *node) {
    json_t *out = json_array();
    char now[32];
    hostmgr_format_time(wall_ms(), false, now);
    bool found = false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        if (!type || strcmp(type, "Ready") || !json_is_object(c)) {
            json_array_append(out, c);
            continue;
        }
        found = true;
        json_t *nc = json_deep_copy(c);
        const char *was = json_string_value(json_object_get(c, "status"));
        json_object_set_new(nc, "status", json_string("Unknown"));
        json_object_set_new(nc, "reason", json_string("NodeStatusUnknown"));
        json_object_set_new(nc, "message", json_string("Kubelet stopped posting node status (lease expired)"));
        if (!was || strcmp(was, "Unknown")) json_object_set_new(nc, "lastTransitionTime", json_string(now));
        json_array_append_new(out, nc);
    }
    if (!found)
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "Ready", "status", "Unknown",
                                             "reason", "NodeStatusUnknown", "message",
                                             "Kubelet stopped posting node status (lease expired)",
                                             "lastTransitionTime", now));
    return out;
}

static void cond_send(struct hostmgr *h, struct hm_op *op, const json_t *node);

static void on_cond_done(void *ud, const struct kc_response *r) {
    struct hm_op *op = ud;
    if (!op_landed(op)) return;
    struct hostmgr *h = op->h;
    struct hm_node *n = node_get(h, op->node, false);
    if (r->status == 404 && !op->cond_on_node && n && n->has_node) {
        /* a server without the status subresource: patch the node itself */
        op->cond_on_node = true;
        cond_send(h, op, kc_informer_get(h->nodes, "", op->node));
        return;
    }
    if (!ok2xx(r->status)) {
        node_write_done(h, op, r->status == 404, r->status, r->error);
        return;
    }
    if (n) n->cond_ok = true;
    if (n && !n->down) { /* came back meanwhile: the next check decides */
        node_write_done(h, op, true, r->status, NULL);
        return;
    }
    /* the reply is the node as it is now: its resourceVersion and taints */
    op->kind = OP_TAINT;
    json_t *now = kc_response_body(r);
    taint_step(h, op, json_is_object(now) && md_str(now, "name") ? now : kc_informer_get(h->nodes, "", op->node));
}

static void cond_send(struct hostmgr *h, struct hm_op *op, const json_t *node) {
    if (!node) {
        node_write_done(h, op, true, 404, NULL);
        return;
    }
    json_t *p = json_pack("{s:{}, s:{s:o}}", "metadata", "status", "conditions", conditions_unknown(node));
    const char *rv = md_str(node, "resourceVersion");
    if (p && rv) json_object_set_new(json_object_get(p, "metadata"), "resourceVersion", json_string(rv));
    char path[sizeof NODES_PATH + 3 * NAME_MAX_LEN + 16];
    int len = snprintf(path, sizeof path, "%s/", NODES_PATH);
    len += kc_escape(op->node, path + len, sizeof path - (size_t)len);
    if (!op->cond_on_node) snprintf(path + len, sizeof path - (size_t)len, "/status");
    if (!op_send(op, "PATCH", path, p, MERGE_PATCH, on_cond_done)) node_write_done(h, op, false, 0, "not started");
}

/* Starts the write-back a down node still needs (Ready, then the taint). */
static void node_mark(struct hostmgr *h, struct hm_node *n, const json_t *node) {
    bool need_cond = !n->cond_ok && !(ready_status(node) && !strcmp(ready_status(node), "Unknown"));
    if (!need_cond) n->cond_ok = true;
    if (!need_cond && (n->taint_ok || has_our_taint(node))) {
        n->taint_ok = n->marked = true;
        return;
    }
    struct hm_op *op = op_new(h, need_cond ? OP_COND : OP_TAINT, n->name);
    if (!op) return;
    n->busy = true;
    if (need_cond) cond_send(h, op, node);
    else taint_step(h, op, node);
}

static void node_unmark(struct hostmgr *h, struct hm_node *n, const json_t *node) {
    if (!has_our_taint(node)) {
        n->untaint_ok = true;
        return;
    }
    struct hm_op *op = op_new(h, OP_UNTAINT, n->name);
    if (!op) return;
    n->busy = true;
    taint_step(h, op, node);
}

/* ---- pod writes: a NodeLost Event (fire and forget), then the DELETE ---- */

static void pod_op_failed(struct hostmgr *h, struct hm_op *op, long status, const char *what, const char *error) {
    op->fails++;
    op->retry_at_ms = wall_ms() + backoff_ms(h, op->fails);
    fprintf(stderr, "level=warn msg=\"hostmgr: lost pod write failed\" pod=%s node=%s op=%s status=%ld error=\"%s\"\n",
            op->key, op->node, what, status, error ? error : "");
}

static void on_pod_deleted(void *ud, const struct kc_response *r) {
    struct hm_op *op = ud;
    if (!op_landed(op)) return;
    struct hostmgr *h = op->h;
    /* 404: already gone; 409: the uid precondition failed, a new pod of that name */
    if (ok2xx(r->status) || r->status == 404 || r->status == 409) op->deleted = true;
    else pod_op_failed(h, op, r->status, "delete", r->error);
    kick(h);
}

static void pod_delete(struct hostmgr *h, struct hm_op *op) {
    char path[64 + 6 * NAME_MAX_LEN];
    int len = snprintf(path, sizeof path, "/api/v1/namespaces/");
    len += kc_escape(op->ns, path + len, sizeof path - (size_t)len);
    len += snprintf(path + len, sizeof path - (size_t)len, "/pods/");
    kc_escape(op->name, path + len, sizeof path - (size_t)len);
    json_t *body = json_pack("{s:s, s:s, s:i}", "kind", "DeleteOptions", "apiVersion", "v1", "gracePeriodSeconds", 0);
    if (op->uid) json_object_set_new(body, "preconditions", json_pack("{s:s}", "uid", op->uid));
    if (!op_send(op, "DELETE", path, body, NULL, on_pod_deleted)) pod_op_failed(h, op, 0, "delete", "not started");
}

/* Starts (or resumes) the loss of one pod of a down node. */
static void pod_lose(struct hostmgr *h, struct hm_node *n, const char *key, const struct hm_pod *pod, int64_t now) {
    struct hm_op *op = strmap_get(&h->pod_ops, key);
    const char *uid = pod->uid, *slash = strchr(key, '/');
    if (!slash) return;
    if (op && op->uid && uid && strcmp(op->uid, uid) && !op->inflight) { /* a new pod under the old name */
        op_free(op);
        op = NULL;
    }
    if (op && (op->inflight || op->deleted || now < op->retry_at_ms)) return;
    if (!op) {
        op = op_new(h, OP_POD, n->name);
        if (!op) return;
        op->key = strdup(key);
        op->ns = slash > key ? strndup(key, (size_t)(slash - key)) : strdup("default");
        op->name = strdup(slash + 1);
        op->uid = uid ? strdup(uid) : NULL;
        if (!op->key || !op->ns || !op->name || (uid && !op->uid) || strmap_put(&h->pod_ops, key, op, NULL)) {
            op_free(op);
            return;
        }
        fprintf(stderr, "level=info msg=\"hostmgr: pod lost\" pod=%s node=%s\n", key, n->name);
    }
    if (!op->event_posted) { /* once per pod, even when the delete is retried */
        ctl_pod_event(h->kc, HOSTMGR_COMPONENT, op->ns, op->name, op->uid, "Warning", "NodeLost",
                      "Node %s is down (lease expired): pod %s/%s is lost and deleted", op->node, op->ns, op->name);
        op->event_posted = true;
    }
    pod_delete(h, op);
}

/* ---- host maintenance (docs/migration.md) ----
 *
 * A Node annotated peloton.io/maintenance=draining (Kubelet or Mesos agent
 * alike) is cordoned if it is not yet; the job manager moves its instances
 * within each Job's budget (jobmgr_drain.c); once no pod that has not ended
 * is bound to it, the annotation becomes "drained". Both writes are merge
 * patches with the Node's resourceVersion as precondition, so a maintenance
 * completed meanwhile (annotation removed, uncordoned) is not undone. */

static void on_maint_done(void *ud, const struct kc_response *r) {
    struct hm_op *op = ud;
    if (!op_landed(op)) return;
    struct hostmgr *h = op->h;
    struct hm_node *n = node_get(h, op->node, false);
    if (n) {
        n->maint_busy = false;
        if (ok2xx(r->status) || r->status == 404 || r->status == 409) { /* 409: decided again from the next view */
            n->maint_fails = 0;
            if (ok2xx(r->status))
                fprintf(stderr, "level=info msg=\"hostmgr: maintenance\" node=%s step=%s\n", op->node, op->name);
        } else {
            n->maint_fails++;
            n->maint_retry_ms = wall_ms() + backoff_ms(h, n->maint_fails);
            fprintf(stderr,
                    "level=warn msg=\"hostmgr: maintenance write failed\" node=%s step=%s status=%ld error=\"%s\"\n",
                    op->node, op->name, r->status, r->error ? r->error : "");
        }
        node_maybe_drop(h, n);
    }
    op_free(op);
    h->maint_due = true; /* the next step (drained after cordon) without waiting for a check */
    kick(h);
}

static size_t live_pods(const struct hm_node *n) {
    size_t live = 0, pos = 0;
    const char *key;
    void *v;
    while (strmap_next(&n->pods, &pos, &key, &v)) live += !((const struct hm_pod *)v)->terminal;
    return live;
}

/* One Node's next maintenance step, if it has one. */
static int maint_visit(void *ud, json_t *node) {
    struct hostmgr *h = ud;
    if (h->inflight >= h->o.max_inflight) return 1; /* the rest at the next check */
    const json_t *md = json_object_get(node, "metadata");
    const char *m = json_string_value(json_object_get(json_object_get(md, "annotations"), PA_MAINTENANCE));
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!m || strcmp(m, PA_MAINT_DRAINING) || !name || strlen(name) > NAME_MAX_LEN) return 0;
    struct hm_node *n = node_get(h, name, true);
    if (!n || n->maint_busy || wall_ms() < n->maint_retry_ms) return 0;
    bool cordoned = json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"));
    if (cordoned && live_pods(n)) return 0; /* the job manager is moving them */
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
    json_t *p = cordoned ? json_pack("{s:{s:{s:s}}}", "metadata", "annotations", PA_MAINTENANCE, PA_MAINT_DRAINED)
                         : json_pack("{s:{}, s:{s:b}}", "metadata", "spec", "unschedulable", 1);
    if (p && rv) json_object_set_new(json_object_get(p, "metadata"), "resourceVersion", json_string(rv));
    struct hm_op *op = p ? op_new(h, OP_MAINT, name) : NULL;
    if (!op || !(op->name = strdup(cordoned ? "drained" : "cordon"))) {
        if (op) op_free(op);
        json_decref(p);
        return 0;
    }
    char path[sizeof NODES_PATH + 3 * NAME_MAX_LEN + 8];
    int len = snprintf(path, sizeof path, "%s/", NODES_PATH);
    kc_escape(name, path + len, sizeof path - (size_t)len);
    n->maint_busy = true;
    if (!op_send(op, "PATCH", path, p, MERGE_PATCH, on_maint_done)) {
        n->maint_busy = false;
        n->maint_retry_ms = wall_ms() + h->o.check_ms;
        op_free(op);
    }
    return 0;
}

/* ---- the checks ---- */

static void held(struct hostmgr *h, enum hm_hold why) {
    h->held++;
    metrics_inc(h->m_held[why]);
}

/* The verdict changes (one log line); the write-back starts at the next pump. */
static void set_verdict(struct hostmgr *h, struct hm_node *n, bool down, const json_t *lease, const char *how) {
    n->down = down;
    n->cond_ok = n->taint_ok = n->marked = n->untaint_ok = false;
    n->fails = 0;
    n->retry_at_ms = 0;
    if (down) {
        const char *renew = json_string_value(json_object_get(json_object_get(lease, "spec"), "renewTime"));
        fprintf(stderr, "level=warn msg=\"hostmgr: node down\" node=%s reason=%s renewTime=%s pods=%zu seen=%s\n",
                n->name, lease ? "lease-expired" : "no-lease", renew ? renew : "none", strmap_count(&n->pods), how);
    } else {
        fprintf(stderr, "level=info msg=\"hostmgr: node up\" node=%s reason=lease-renewed\n", n->name);
    }
}

/* Are the informers a verdict rests on up to date? The Lease watch must be
 * open too: between a watch that ended and the next one nothing is known. */
static bool judging_ok(const struct hostmgr *h) {
    return kc_informer_fresh(h->leases, 0) && kc_informer_current(h->nodes) && kc_informer_current(h->pods);
}

static void on_confirm_done(void *ud, const struct kc_response *r) {
    struct hm_op *op = ud;
    if (!op_landed(op)) return;
    struct hostmgr *h = op->h;
    struct hm_node *n = node_get(h, op->node, false);
    if (n) {
        n->confirming = false;
        json_t *lease = r->status == 200 ? kc_response_body(r) : NULL;
        uint64_t rtt = uv_now(h->loop) - op->sent_ms;
        if (!judging_ok(h)) {
            held(h, HOLD_NOT_CURRENT);
        } else if (rtt > h->o.slow_read_ms) {
            /* the server took that long to answer: it was stalled, and the
             * kubelets' renewals were stuck behind the same stall. Nothing it
             * said about leases meanwhile is evidence: every lease gets one
             * more period from now. */
            held(h, HOLD_SLOW_READ);
            h->current_since = wall_ms();
            fprintf(stderr,
                    "level=warn msg=\"hostmgr: lease read slow, server stalled: leases get one more period\" "
                    "node=%s rtt_ms=%" PRIu64 "\n",
                    n->name, rtt);
        } else if (r->status != 404 && !json_is_object(json_object_get(lease, "spec"))) {
            held(h, HOLD_READ_FAILED); /* the next check asks again */
            fprintf(stderr,
                    "level=warn msg=\"hostmgr: lease read failed, node not judged\" node=%s status=%ld error=\"%s\"\n",
                    n->name, r->status, r->error ? r->error : "no lease spec");
        } else if (!hostmgr_node_is_down(lease, n->appeared_ms, wall_ms(), &h->o)) {
            held(h, HOLD_RENEWED); /* the cache was behind */
            fprintf(stderr, "level=info msg=\"hostmgr: lease renewed on a direct read, node not down\" node=%s\n",
                    n->name);
        } else if (n->has_node && !n->down) {
            set_verdict(h, n, true, lease, "direct-read");
        }
        node_maybe_drop(h, n);
    }
    op_free(op);
    kick(h);
}

/* A direct GET of n's Lease before it is declared down: the informer's copy
 * may be behind however current it says it is (a watch silently stalled).
 * At most max_inflight requests at once; the rest are asked at the next check. */
static void confirm_start(struct hostmgr *h, struct hm_node *n) {
    if (n->confirming || h->inflight >= h->o.max_inflight) return;
    struct hm_op *op = op_new(h, OP_CONFIRM, n->name);
    if (!op) return;
    char path[sizeof LEASES_PATH + 3 * NAME_MAX_LEN + 8];
    int len = snprintf(path, sizeof path, "%s/", LEASES_PATH);
    kc_escape(n->name, path + len, sizeof path - (size_t)len);
    n->confirming = true;
    op->sent_ms = uv_now(h->loop);
    if (!op_send(op, "GET", path, NULL, NULL, on_confirm_done)) {
        n->confirming = false;
        op_free(op);
    }
}

/* Evictions pause while a mass event lasts: a Warning Event when it starts, a
 * Normal one when it ends, about the Namespace of the node leases (one
 * cluster-level object rather than thousands of Nodes). */
static void set_paused(struct hostmgr *h, bool on, size_t lapsed, size_t total) {
    if (on == h->paused) return;
    h->paused = on;
    metrics_set(h->m_paused, on ? 1 : 0);
    fprintf(stderr, "level=%s msg=\"hostmgr: evictions %s\" lapsed=%zu nodes=%zu fraction=%.2f min_nodes=%u\n",
            on ? "warn" : "info", on ? "paused" : "resumed", lapsed, total, h->o.mass_fraction, h->o.mass_min_nodes);
    ctl_object_event(h->kc, HOSTMGR_COMPONENT, "v1", "Namespace", "", HOSTMGR_LEASE_NS, "", on ? "Warning" : "Normal",
                     on ? "NodeEvictionsPaused" : "NodeEvictionsResumed",
                     on ? "%zu of %zu nodes have lapsed leases (threshold %.2f, at least %u nodes): no pod is deleted "
                          "as lost until fewer have"
                        : "%zu of %zu nodes have lapsed leases (threshold %.2f, at least %u nodes): pods of down "
                          "nodes are deleted as lost again",
                     lapsed, total, h->o.mass_fraction, h->o.mass_min_nodes);
}

static bool all_synced(const struct hostmgr *h) {
    return kc_informer_synced(h->nodes) && kc_informer_synced(h->leases) && kc_informer_synced(h->pods);
}

/* Decides every known node's verdict from the caches, or (hold) counts the
 * verdicts that would change as held. A node goes up from the cache; it goes
 * down once a direct read of its Lease agrees (confirm_start). The share of
 * lapsed nodes decides whether evictions are paused. */
/* n's Lease in the cache, read again only when the cache holds another
 * object than at the last check (a renewal replaces it): a check of every
 * node each second costs a lookup per node, not a parse of its renewTime. */
static void lease_view(struct hostmgr *h, struct hm_node *n) {
    json_t *lease = n->lease;
    if (lease == n->lease_seen && (lease || n->lease_period_ms)) return;
    json_incref(lease);
    json_decref(n->lease_seen);
    n->lease_seen = lease;
    n->lease_period_ms = lease_period_ms(lease, &h->o);
    n->lease_renew_ok = lease && !hostmgr_parse_microtime(
                                     json_string_value(json_object_get(json_object_get(lease, "spec"), "renewTime")),
                                     &n->lease_renew_ms);
}

/* hostmgr_node_is_down on what lease_view read. */
static bool lease_lapsed(const struct hostmgr *h, const struct hm_node *n, int64_t now) {
    if (!n->lease_renew_ok) return now > n->appeared_ms + (int64_t)h->o.no_lease_ms;
    return now > n->lease_renew_ms + n->lease_period_ms;
}

static void check_all(struct hostmgr *h, bool hold) {
    int64_t now = wall_ms();
    size_t pos = 0, total = 0, lapsed = 0;
    int64_t longest = 0; /* the longest lease period of a lapsed node */
    const char *name;
    void *v;
    while (strmap_next(&h->byname, &pos, &name, &v)) {
        struct hm_node *n = v;
        if (!n->has_node) continue;
        lease_view(h, n);
        n->lapsed = lease_lapsed(h, n, now);
        total++;
        lapsed += n->lapsed;
        if (n->lapsed && n->lease_period_ms > longest) longest = n->lease_period_ms;
    }
    if (!hold) {
        /* A mass event ends one lease period after it went below the
         * threshold, not at once: its kubelets come back one by one, and
         * the last ones must not lose their pods for being late. */
        bool mass = lapsed >= h->o.mass_min_nodes && (double)lapsed >= h->o.mass_fraction * (double)total;
        if (mass || !h->paused) h->calm_since = 0;
        else if (!h->calm_since) h->calm_since = now;
        set_paused(h, mass || (h->paused && now - h->calm_since < longest), lapsed, total);
    }
    pos = 0;
    while (strmap_next(&h->byname, &pos, &name, &v)) {
        struct hm_node *n = v;
        if (h->paused && !hold && n->has_node && n->down && live_pods(n)) held(h, HOLD_PAUSED);
        if (!n->has_node || n->lapsed == n->down) continue;
        if (hold) {
            held(h, HOLD_NOT_CURRENT);
        } else if (!n->lapsed) {
            set_verdict(h, n, false, NULL, "informer");
        } else if (now - h->current_since < n->lease_period_ms) {
            /* watched for less than one lease period since the last (re)list: a
             * kubelet that renewed meanwhile may not have been seen yet */
            held(h, HOLD_SETTLING);
        } else {
            confirm_start(h, n);
        }
    }
    if (!hold) h->checked = true;
}

/* Judges when the informers allow it; otherwise holds, with one log line
 * when holding starts and one when it ends. */
static void check(struct hostmgr *h) {
    bool ok = judging_ok(h);
    unsigned gen = kc_informer_lists(h->leases); /* a re-list between two checks counts too */
    if (!ok) h->current_since = 0;
    else if (!h->current_since || gen != h->lease_lists) h->current_since = wall_ms();
    h->lease_lists = gen;
    h->stale = !ok;
    if (ok && h->said_stale) {
        h->said_stale = false;
        fprintf(stderr, "level=info msg=\"hostmgr: informers current again, judging nodes\" lease_lists=%u\n",
                kc_informer_lists(h->leases));
    } else if (!ok && !h->said_stale && h->checked) { /* not before the first verdicts: informers are starting */
        h->said_stale = true;
        fprintf(stderr,
                "level=warn msg=\"hostmgr: informers not current, node judgements held\" leases_current=%d "
                "leases_watching=%d nodes_current=%d pods_current=%d\n",
                kc_informer_current(h->leases), kc_informer_fresh(h->leases, 0), kc_informer_current(h->nodes),
                kc_informer_current(h->pods));
    }
    check_all(h, !ok);
}

/* Starts the writes still missing, within max_inflight. Nothing before the
 * informers are synced and the first check has given every node a verdict. */
static void pump(struct hostmgr *h) {
    if (!all_synced(h)) return;
    if (!h->checked) check(h);
    if (!h->checked) return; /* the first verdicts wait for current informers */
    int64_t now = wall_ms();
    size_t pos = 0;
    const char *name;
    void *v;
    while (strmap_next(&h->byname, &pos, &name, &v) && h->inflight < h->o.max_inflight) {
        struct hm_node *n = v;
        if (!n->has_node) continue;
        json_t *node = kc_informer_get(h->nodes, "", n->name);
        if (!node) continue;
        bool retry_ok = now >= n->retry_at_ms;
        if (n->down) {
            if (!n->busy && retry_ok && (!n->cond_ok || !n->taint_ok)) node_mark(h, n, node);
            if (!n->marked) continue;
            if (h->stale || h->paused) continue; /* no pod is lost on what may be a stale or mass view */
            size_t pp = 0;
            const char *key;
            void *pv;
            while (strmap_next(&n->pods, &pp, &key, &pv) && h->inflight < h->o.max_inflight) {
                const struct hm_pod *pod = pv;
                if (!pod->terminal) pod_lose(h, n, key, pod, now);
            }
        } else if (!n->busy && retry_ok && !n->untaint_ok) {
            node_unmark(h, n, node);
        }
    }
    if (h->maint_due) { /* a pass over the draining Nodes: once per check, not at every kick */
        h->maint_due = false;
        size_t dpos = 0;
        const char *dname;
        while (strmap_next(&h->draining, &dpos, &dname, NULL)) {
            json_t *node = kc_informer_get(h->nodes, NULL, dname);
            if (node && maint_visit(h, node)) break;
        }
    }
    /* parked or finished pod ops whose pod went away, or is no longer on a down node */
    pos = 0;
    while (strmap_next(&h->pod_ops, &pos, &name, &v)) {
        struct hm_op *op = v;
        if (op->inflight) continue;
        const struct hm_pod *pod = strmap_get(&h->bound, op->key);
        struct hm_node *n = node_get(h, op->node, false);
        const char *uid = pod ? pod->uid : NULL;
        if (!pod || pod->terminal || !n || !n->down || (uid && op->uid && strcmp(uid, op->uid))) op_free(op);
    }
}

static void on_kick(uv_timer_t *t) { pump(t->data); }

static void kick(struct hostmgr *h) {
    if (!uv_is_active((uv_handle_t *)h->kick)) uv_timer_start(h->kick, on_kick, 0, 0);
}

static void on_tick(uv_timer_t *t) {
    struct hostmgr *h = t->data;
    uint64_t now = uv_now(h->loop), gap = now - h->last_tick;
    h->last_tick = now;
    if (!all_synced(h)) return;
    if (gap > (uint64_t)h->o.check_ms + h->o.slow_read_ms) {
        /* this loop itself was stalled (the process stopped, starved of CPU):
         * the events of that time are still unread, and if the API server
         * shares the process the kubelets could not renew either. Hold this
         * check; every lease gets one more period. */
        h->current_since = wall_ms();
        held(h, HOLD_SLOW_READ);
        fprintf(stderr, "level=warn msg=\"hostmgr: check late, loop stalled: leases get one more period\" late_ms=%" PRIu64
                        "\n",
                gap - h->o.check_ms);
        return;
    }
    check(h);
    h->maint_due = true;
    pump(h);
}

/* ---- the public part ---- */

static void timer_closed(uv_handle_t *t) { free(t); }

static uv_timer_t *timer_new(uv_loop_t *loop, void *data) {
    uv_timer_t *t = malloc(sizeof *t);
    if (!t) return NULL;
    uv_timer_init(loop, t);
    t->data = data;
    return t;
}

struct hostmgr *hostmgr_start(uv_loop_t *loop, struct kclient *kc, const struct hostmgr_options *o, char *err,
                              size_t errlen) {
    if (!loop || !kc) {
        core_fail(err, errlen, -EINVAL, "hostmgr: a loop and a client are required");
        return NULL;
    }
    struct hostmgr *h = calloc(1, sizeof *h);
    if (!h) {
        core_fail(err, errlen, -ENOMEM, "hostmgr: out of memory");
        return NULL;
    }
    h->loop = loop;
    h->kc = kc;
    struct hostmgr_options d;
    hostmgr_options_default(&d);
    h->o = o ? *o : d;
    if (!h->o.check_ms) h->o.check_ms = d.check_ms;
    if (!h->o.max_inflight) h->o.max_inflight = d.max_inflight;
    if (!h->o.retry_max_ms) h->o.retry_max_ms = d.retry_max_ms;
    if (!h->o.no_lease_ms) h->o.no_lease_ms = d.no_lease_ms;
    if (!(h->o.mass_fraction > 0)) h->o.mass_fraction = d.mass_fraction; /* also NaN */
    if (!h->o.mass_min_nodes) h->o.mass_min_nodes = d.mass_min_nodes;
    if (!h->o.slow_read_ms) h->o.slow_read_ms = d.slow_read_ms;
    if (h->o.metrics) {
        static const char *const why[] = {"reason"};
        h->m_paused = metrics_series0(metrics_gauge(h->o.metrics, "peloton_hostmgr_evictions_paused",
                                                    "1 while a mass event pauses evictions (too many nodes lapsed "
                                                    "at once).",
                                                    0, NULL));
        struct metrics_family *fam = metrics_counter(h->o.metrics, "peloton_hostmgr_judgements_held_total",
                                                     "Node judgements and evictions held, by reason.", 1, why);
        for (int i = 0; i < HM_HOLD_REASONS; i++) h->m_held[i] = metrics_series1(fam, hold_reason[i]);
    }
    struct kc_informer_handlers nh = {on_node_add, on_node_update, on_node_delete, on_synced};
    struct kc_informer_handlers lh = {on_lease_add, on_lease_update, on_lease_delete, on_synced};
    struct kc_informer_handlers ph = {on_pod_add, on_pod_update, on_pod_delete, on_synced};
    /* all pods, unbound ones ignored by the handlers: in pelotond the feed
     * is the one resmgr and placement follow (kclient shares it) */
    h->nodes = kc_informer_new(kc, NODES_PATH, NULL, &nh, h);
    h->leases = kc_informer_new(kc, LEASES_PATH, NULL, &lh, h);
    h->pods = kc_informer_new_opts(kc, PODS_PATH, NULL, &ctl_pods_slim, &ph, h);
    h->tick = timer_new(loop, h);
    h->kick = timer_new(loop, h);
    int rc = -ENOMEM;
    if (h->nodes && h->leases && h->pods && h->tick && h->kick) {
        rc = kc_informer_start(h->nodes);
        if (!rc) rc = kc_informer_start(h->leases);
        if (!rc) rc = kc_informer_start(h->pods);
    }
    if (rc) {
        core_fail(err, errlen, rc, "hostmgr: cannot start the informers: %s", strerror(-rc));
        hostmgr_stop(h);
        return NULL;
    }
    h->last_tick = uv_now(loop);
    uv_timer_start(h->tick, on_tick, h->o.check_ms, h->o.check_ms);
    fprintf(stderr,
            "level=info msg=\"hostmgr: started\" check_ms=%u grace_ms=%u no_lease_ms=%u mass_fraction=%.2f "
            "mass_min_nodes=%u\n",
            h->o.check_ms, h->o.grace_ms, h->o.no_lease_ms, h->o.mass_fraction, h->o.mass_min_nodes);
    return h;
}

void hostmgr_stop(struct hostmgr *h) {
    if (!h) return;
    kc_informer_free(h->nodes);
    kc_informer_free(h->leases);
    kc_informer_free(h->pods);
    uv_timer_t *timers[2] = {h->tick, h->kick};
    for (int i = 0; i < 2; i++) {
        if (!timers[i]) continue;
        uv_timer_stop(timers[i]);
        uv_close((uv_handle_t *)timers[i], timer_closed);
    }
    while (h->ops) { /* detach: an op in flight is freed by its callback */
        struct hm_op *op = h->ops;
        h->ops = op->next;
        op->h = NULL;
        op->prev = op->next = NULL;
        if (!op->inflight) op_free(op);
    }
    strmap_free(&h->pod_ops);
    size_t pos = 0;
    const char *name;
    void *v;
    while (strmap_next(&h->bound, &pos, &name, &v)) {
        free(((struct hm_pod *)v)->uid);
        free(v);
    }
    strmap_free(&h->bound);
    strmap_free(&h->draining);
    pos = 0;
    while (strmap_next(&h->byname, &pos, &name, &v)) node_free(v);
    strmap_free(&h->byname);
    free(h);
}

bool hostmgr_node_down(const struct hostmgr *h, const char *name) {
    struct hm_node *n = h && name ? strmap_get(&h->byname, name) : NULL;
    return n && n->has_node && n->down;
}

size_t hostmgr_node_count(const struct hostmgr *h, size_t *down) {
    size_t total = 0, nd = 0;
    if (h) {
        size_t pos = 0;
        const char *name;
        void *v;
        while (strmap_next(&h->byname, &pos, &name, &v)) {
            const struct hm_node *n = v;
            total += n->has_node;
            nd += n->has_node && n->down;
        }
    }
    if (down) *down = nd;
    return total;
}

bool hostmgr_evictions_paused(const struct hostmgr *h) { return h && h->paused; }

uint64_t hostmgr_held(const struct hostmgr *h) { return h ? h->held : 0; }
