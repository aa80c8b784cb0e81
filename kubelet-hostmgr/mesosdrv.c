/* The host manager's Mesos driver (mesosdrv.h).
 *
 * State: agents by id (what the master said of each, its offers, where the
 * write-back of its Node stands), tasks by id (one per pod run the driver
 * launched or found bound to a Mesos Node), and two informers: pods (whole
 * objects) and the Mesos Nodes (label peloton.io/backend=mesos, the agent id
 * in an annotation). pump() compares them and starts what is missing:
 * launches on held offers, KILLs of pods being deleted, final DELETEs,
 * declines, REVIVE, Node writes. It scans every pod, so its cost grows with
 * the pod count (a first slice; an index per node would bound it).
 *
 * Writes are ops on a list owned by the driver; an op in flight is owned by
 * its request and only detached at stop (op->d = NULL). An ACKNOWLEDGE is
 * sent from the completion of the write that stored the update's effect. */
#include "mesosdrv.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errmsg.h"
#include "hostmgr.h"
#include "ksim.h"
#include "mclient.h"
#include "mesos_json.h"
#include "strmap.h"

#define NODES_PATH "/api/v1/nodes"
#define MERGE_PATCH "application/merge-patch+json"
#define NAME_MAX_LEN 253
#define RECONCILE_BATCH 1000
#define GET_AGENTS_MAX (64u << 20) /* bytes of a GET_AGENTS reply */
#define KILL_RESEND_MS 10000
#define REVIVE_MIN_MS 1000
#define POD_LIMIT "110" /* pods a Mesos Node takes, as a Kubelet's default */

enum { AG_ACTIVE, AG_UNREACHABLE, AG_GONE };

struct md_offer {
    struct md_offer *next;
    char *id;
    struct mesos_scalars res;
    int64_t got_ms;
};

struct md_agent {
    char *id, *hostname;
    struct mesos_scalars total;
    json_t *labels;       /* from the attributes */
    int state;
    bool dirty, busy;     /* the Node needs a write / one is in flight */
    unsigned fails;
    int64_t retry_at_ms;
    struct md_offer *offers;
    int waiting;          /* pods waiting for an offer (this pump) */
};

struct md_task {
    char *id, *agent_id, *ns, *name, *uid;
    int state;            /* the last state stored in the pod; -1: none yet */
    bool terminal, lost, delete_sent, busy;
    int64_t kill_at_ms;   /* 0: no KILL sent */
};

enum md_op_kind { OP_STATUS, OP_LOST, OP_DELETE, OP_NODE_POST, OP_NODE_META, OP_NODE_STATUS, OP_NODE_DELETE,
                  OP_ACCEPT };

struct md_op {
    struct md_op *prev, *next;
    struct mdrv *d;
    enum md_op_kind kind;
    bool inflight;
    int state;
    char *task_id, *agent_id, *uuid; /* the update to acknowledge (uuid NULL: none) */
    char *ns, *name, *uid;           /* the pod */
    char *node;                      /* node ops: the agent id */
    json_t *task_ids;                /* OP_ACCEPT: the tasks launched */
};

struct mdrv {
    uv_loop_t *loop;
    struct kclient *kc;
    struct ctl_db *db;
    struct mdrv_options o;
    char *master, *user, *name, *fid;
    struct mclient *mc;
    struct kc_informer *pods, *nodes;
    uv_timer_t tick, kick;
    struct strmap agents, tasks, deletes; /* deletes: "ns/name/uid" of pods whose DELETE was sent */
    struct strmap todo;                   /* "ns/name" of the pods pump looks at (changed, waiting) */
    bool rescan;                          /* pump looks at every pod next time */
    struct md_op *ops;
    int closed;   /* timers closed */
    bool orphan;  /* mdrv_start failed: freed when its timers close */
    bool stopped, known_built, reconciled, agents_busy, agents_again;
    int64_t last_revive_ms, last_reconcile_ms;
    struct mdrv_stats st;
};

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

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *md_str(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static const char *ann(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), key));
}

static const char *pod_phase(const json_t *pod) {
    return json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
}

static bool phase_terminal(const char *ph) { return ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed")); }

static bool state_lost(int s) {
    return s == MESOS_TASK_LOST || s == MESOS_TASK_GONE || s == MESOS_TASK_UNREACHABLE || s == MESOS_TASK_DROPPED ||
           s == MESOS_TASK_GONE_BY_OPERATOR || s == MESOS_TASK_UNKNOWN;
}

static void kick(struct mdrv *d);

static void pod_path(const char *ns, const char *name, const char *sub, char *out, size_t len) {
    int n = snprintf(out, len, "/api/v1/namespaces/");
    n += kc_escape(ns, out + n, len - (size_t)n);
    n += snprintf(out + n, len - (size_t)n, "/pods/");
    n += kc_escape(name, out + n, len - (size_t)n);
    snprintf(out + n, len - (size_t)n, "%s", sub);
}

/* The run of a pod (peloton.io/run, 1 when absent). */
static unsigned pod_run(const json_t *pod) {
    const char *r = ann(pod, "peloton.io/run");
    char *end;
    unsigned long v = r ? strtoul(r, &end, 10) : 1;
    return r && (*end || !v || v > UINT32_MAX) ? 1 : (unsigned)v;
}

/* ---- ops ---- */

static struct md_op *op_new(struct mdrv *d, enum md_op_kind kind) {
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

static void op_free(struct md_op *op) {
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

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

/* Sends op's request (body stolen); false when it did not start (op freed). */
static bool op_send(struct md_op *op, const char *method, const char *path, json_t *body, const char *ctype,
                    kc_done_fn done) {
    int rc = kclient_request(op->d->kc, method, path, body, ctype, done, op);
    json_decref(body);
    if (rc) {
        fprintf(stderr, "level=warn msg=\"mesos: request not started\" method=%s path=%s error=%d\n", method, path, rc);
        op_free(op);
        return false;
    }
    op->inflight = true;
    return true;
}

/* A request of op came back; false when the driver is gone (op freed). */
static bool op_landed(struct md_op *op) {
    op->inflight = false;
    if (!op->d || op->d->stopped) {
        op_free(op);
        return false;
    }
    return true;
}

static bool ok2xx(long s) { return s >= 200 && s < 300; }

/* ---- calls to the master ---- */

static void call(struct mdrv *d, json_t *c) {
    if (!c) return;
    if (!d->mc || mclient_call(d->mc, c, NULL, NULL)) /* not subscribed: what it was for is redone later */
        return;
}

static void ack(struct mdrv *d, const char *agent_id, const char *task_id, const char *uuid) {
    if (!uuid || !agent_id || !d->fid) return;
    call(d, mesos_call_acknowledge(d->fid, agent_id, task_id, uuid));
    d->st.acks++;
}

static void kill_task(struct mdrv *d, const char *task_id, const char *agent_id) {
    if (!d->fid) return;
    call(d, mesos_call_kill(d->fid, task_id, agent_id));
    d->st.kills++;
}

/* ---- tasks ---- */

static struct md_task *task_add(struct mdrv *d, const char *id, const char *agent_id, const json_t *pod) {
    struct md_task *t = calloc(1, sizeof *t);
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name"), *uid = md_str(pod, "uid");
    if (!t || !(t->id = strdup(id)) || !(t->ns = strdup(ns ? ns : "default")) || !(t->name = dup0(name)) ||
        !(t->uid = dup0(uid)) || (agent_id && !(t->agent_id = strdup(agent_id))) ||
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

static void task_free(struct md_task *t) {
    free(t->id);
    free(t->agent_id);
    free(t->ns);
    free(t->name);
    free(t->uid);
    free(t);
}

/* ---- agents and their Nodes ---- */

static struct md_agent *agent_get(struct mdrv *d, const char *id, bool create) {
    struct md_agent *a = strmap_get(&d->agents, id);
    if (a || !create) return a;
    if (!(a = calloc(1, sizeof *a)) || !(a->id = strdup(id)) || strmap_put(&d->agents, id, a, NULL)) {
        if (a) free(a->id);
        free(a);
        return NULL;
    }
    a->state = AG_ACTIVE;
    a->dirty = true;
    d->st.agents++;
    return a;
}

static void offers_free(struct md_offer *o) {
    while (o) {
        struct md_offer *n = o->next;
        free(o->id);
        free(o);
        o = n;
    }
}

static void agent_free(struct md_agent *a) {
    offers_free(a->offers);
    free(a->id);
    free(a->hostname);
    json_decref(a->labels);
    free(a);
}

/* A Kubernetes node name from a hostname: lowercase DNS subdomain, else NULL. */
static bool valid_node_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (!n || n > NAME_MAX_LEN) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.')) return false;
    return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

static bool valid_label_part(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n > max) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return false;
    return true;
}

json_t *mdrv_attr_labels(const json_t *attrs) {
    json_t *l = json_object();
    size_t i;
    const json_t *a;
    json_array_foreach(attrs, i, a) {
        if (i >= 64) break;
        const char *name = json_string_value(json_object_get(a, "name"));
        const char *text = json_string_value(json_object_get(json_object_get(a, "text"), "value"));
        char num[32];
        const json_t *sc = json_object_get(json_object_get(a, "scalar"), "value");
        if (!text && json_is_number(sc)) {
            snprintf(num, sizeof num, "%g", json_number_value(sc));
            text = num;
        }
        if (!name || !name[0] || !text || !valid_label_part(name, 63) || !valid_label_part(text, 63)) continue;
        json_object_set_new(l, name, json_string(text));
        if (!strcmp(name, "zone")) json_object_set_new(l, "topology.kubernetes.io/zone", json_string(text));
    }
    return l;
}

/* What an agent is known by: an offer or GET_AGENTS. */
static void agent_learn(struct mdrv *d, const char *id, const char *hostname, const struct mesos_scalars *total,
                        const json_t *attrs, int state) {
    struct md_agent *a = agent_get(d, id, true);
    if (!a) return;
    if (hostname && (!a->hostname || strcmp(a->hostname, hostname))) {
        free(a->hostname);
        a->hostname = strdup(hostname);
        a->dirty = true;
    }
    if (total && memcmp(total, &a->total, sizeof *total)) {
        a->total = *total;
        a->dirty = true;
    }
    if (attrs) {
        json_t *l = mdrv_attr_labels(attrs);
        if (!a->labels || !json_equal(l, a->labels)) {
            json_decref(a->labels);
            a->labels = l;
            a->dirty = true;
        } else {
            json_decref(l);
        }
    }
    if (state != a->state) {
        fprintf(stderr, "level=info msg=\"mesos: agent %s\" agent=%s hostname=%s\n",
                state == AG_ACTIVE ? "active" : state == AG_UNREACHABLE ? "unreachable" : "gone", id,
                a->hostname ? a->hostname : "");
        a->state = state;
        a->dirty = true;
        a->retry_at_ms = 0;
    }
    if (state != AG_ACTIVE) {
        offers_free(a->offers);
        a->offers = NULL;
    }
}

/* A quantity of v units (scale: of the suffix per unit); whole units without the suffix. */
static void quantity(char *out, size_t len, double v, const char *unit, double scale) {
    long long q = llround(v * scale), s = llround(scale);
    if (s > 1 && q % s == 0) snprintf(out, len, "%lld", q / s);
    else snprintf(out, len, "%lld%s", q, unit);
}

static json_t *node_resources(const struct md_agent *a) {
    char cpu[32], mem[32], disk[32], gpu[32];
    quantity(cpu, sizeof cpu, a->total.cpus, "m", 1000);
    quantity(mem, sizeof mem, a->total.mem, "Mi", 1);
    quantity(disk, sizeof disk, a->total.disk, "Mi", 1);
    quantity(gpu, sizeof gpu, a->total.gpus, "", 1);
    json_t *r = json_pack("{s:s, s:s, s:s, s:s}", "cpu", cpu, "memory", mem, "ephemeral-storage", disk, "pods",
                          POD_LIMIT);
    if (r && a->total.gpus > 0) json_object_set_new(r, "nvidia.com/gpu", json_string(gpu));
    return r;
}

static json_t *node_status(const struct md_agent *a) {
    char now[32];
    hostmgr_format_time(wall_ms(), false, now);
    bool up = a->state == AG_ACTIVE;
    json_t *cond = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "Ready", "status", up ? "True" : "Unknown",
                             "reason", up ? "AgentActive" : "AgentUnreachable", "message",
                             up ? "the Mesos agent is active" : "the Mesos master reports the agent unreachable",
                             "lastHeartbeatTime", now, "lastTransitionTime", now);
    return json_pack("{s:o, s:o, s:[o], s:[{s:s, s:s}]}", "capacity", node_resources(a), "allocatable",
                     node_resources(a), "conditions", cond, "addresses", "type", "Hostname", "address",
                     a->hostname);
}

static json_t *node_meta_labels(const struct md_agent *a) {
    json_t *l = a->labels ? json_deep_copy(a->labels) : json_object();
    json_object_set_new(l, MDRV_LABEL_BACKEND, json_string("mesos"));
    json_object_set_new(l, "kubernetes.io/hostname", json_string(a->hostname));
    json_object_set_new(l, "kubernetes.io/os", json_string("linux"));
    return l;
}

static json_t *node_taints(const struct md_agent *a) {
    if (a->state == AG_ACTIVE) return json_null();
    char now[32];
    hostmgr_format_time(wall_ms(), false, now);
    return json_pack("[{s:s, s:s, s:s}]", "key", HOSTMGR_TAINT_UNREACHABLE, "effect", "NoExecute", "timeAdded", now);
}

static void node_step(struct mdrv *d, struct md_op *op, struct md_agent *a);

static void node_write_end(struct mdrv *d, struct md_op *op, bool ok, long status, const char *error) {
    struct md_agent *a = agent_get(d, op->node, false);
    if (a) {
        a->busy = false;
        if (ok) {
            a->fails = 0;
            if (a->state == AG_GONE && op->kind == OP_NODE_DELETE) {
                strmap_del(&d->agents, a->id);
                agent_free(a);
            }
        } else {
            a->dirty = true;
            a->fails++;
            a->retry_at_ms = wall_ms() + (a->fails > 5 ? 30000 : 1000 << a->fails);
            fprintf(stderr, "level=warn msg=\"mesos: node write failed\" agent=%s status=%ld error=\"%s\"\n",
                    op->node, status, error ? error : "");
        }
    }
    op_free(op);
    kick(d);
}

static void on_node_done(void *ud, const struct kc_response *r) {
    struct md_op *op = ud;
    if (!op_landed(op)) return;
    struct mdrv *d = op->d;
    struct md_agent *a = agent_get(d, op->node, false);
    if (!a) {
        op_free(op);
        return;
    }
    switch (op->kind) {
    case OP_NODE_POST:
        if (ok2xx(r->status)) return node_write_end(d, op, true, r->status, NULL);
        if (r->status != 409) return node_write_end(d, op, false, r->status, r->error);
        if (kc_informer_synced(d->nodes) && !kc_informer_get(d->nodes, "", a->hostname)) {
            /* a Node of that name that is not a Mesos agent's (a Kubelet's): never taken over */
            a->fails = 5;
            return node_write_end(d, op, false, r->status, "the node name is taken by a node that is not a Mesos agent's");
        }
        op->kind = OP_NODE_META; /* it exists: bring it up to date */
        return node_step(d, op, a);
    case OP_NODE_META:
        if (!ok2xx(r->status)) return node_write_end(d, op, false, r->status, r->error);
        op->kind = OP_NODE_STATUS;
        return node_step(d, op, a);
    case OP_NODE_STATUS:
    case OP_NODE_DELETE:
        return node_write_end(d, op, ok2xx(r->status) || r->status == 404, r->status, r->error);
    default:
        op_free(op);
    }
}

static void node_step(struct mdrv *d, struct md_op *op, struct md_agent *a) {
    char path[sizeof NODES_PATH + 3 * NAME_MAX_LEN + 16];
    int n = snprintf(path, sizeof path, "%s", NODES_PATH);
    if (op->kind != OP_NODE_POST) {
        n += snprintf(path + n, sizeof path - (size_t)n, "/");
        n += kc_escape(a->hostname, path + n, sizeof path - (size_t)n);
    }
    json_t *body;
    const char *method = "PATCH", *ct = MERGE_PATCH;
    switch (op->kind) {
    case OP_NODE_POST:
        method = "POST";
        ct = NULL;
        body = json_pack("{s:s, s:s, s:{s:s, s:o, s:{s:s}}, s:{s:o}, s:o}", "kind", "Node", "apiVersion", "v1",
                         "metadata", "name", a->hostname, "labels", node_meta_labels(a), "annotations",
                         MDRV_ANN_AGENT, a->id, "spec", "taints", node_taints(a), "status", node_status(a));
        if (json_is_null(json_object_get(json_object_get(body, "spec"), "taints")))
            json_object_del(json_object_get(body, "spec"), "taints");
        break;
    case OP_NODE_META:
        body = json_pack("{s:{s:o, s:{s:s}}, s:{s:o}}", "metadata", "labels", node_meta_labels(a), "annotations",
                         MDRV_ANN_AGENT, a->id, "spec", "taints", node_taints(a));
        break;
    case OP_NODE_STATUS:
        snprintf(path + n, sizeof path - (size_t)n, "/status");
        body = json_pack("{s:o}", "status", node_status(a));
        break;
    default:
        method = "DELETE";
        ct = NULL;
        body = NULL;
    }
    if (!op_send(op, method, path, body, ct, on_node_done)) {
        a->busy = false;
        a->dirty = true;
        a->retry_at_ms = wall_ms() + 1000;
    }
}

static void node_write(struct mdrv *d, struct md_agent *a) {
    if (!a->hostname || !valid_node_name(a->hostname)) {
        a->dirty = false; /* a hostname that is no node name: the agent stays out of the fleet */
        fprintf(stderr, "level=warn msg=\"mesos: agent hostname is not a node name\" agent=%s\n", a->id);
        return;
    }
    struct md_op *op = op_new(d, a->state == AG_GONE ? OP_NODE_DELETE : OP_NODE_POST);
    if (!op || !(op->node = strdup(a->id))) {
        if (op) op_free(op);
        return;
    }
    a->dirty = false;
    a->busy = true;
    node_step(d, op, a);
}

/* ---- pod writes ---- */

static void on_pod_write_done(void *ud, const struct kc_response *r);

static bool pod_write(struct mdrv *d, struct md_op *op, const char *method, const char *sub, json_t *body,
                      const char *ct) {
    char path[64 + 6 * NAME_MAX_LEN];
    pod_path(op->ns, op->name, sub, path, sizeof path);
    return op_send(op, method, path, body, ct, on_pod_write_done);
}

static json_t *delete_body(const char *uid) {
    json_t *b = json_pack("{s:s, s:s, s:i}", "kind", "DeleteOptions", "apiVersion", "v1", "gracePeriodSeconds", 0);
    if (b && uid) json_object_set_new(b, "preconditions", json_pack("{s:s}", "uid", uid));
    return b;
}

/* The final DELETE of a pod whose task is over (or never ran). */
static void pod_delete(struct mdrv *d, const char *ns, const char *name, const char *uid) {
    char key[3 * NAME_MAX_LEN + 64];
    snprintf(key, sizeof key, "%s/%s/%s", ns, name, uid ? uid : "");
    if (strmap_get(&d->deletes, key)) return;
    struct md_op *op = op_new(d, OP_DELETE);
    if (!op || !(op->ns = strdup(ns)) || !(op->name = strdup(name)) || (uid && !(op->uid = strdup(uid))) ||
        strmap_put(&d->deletes, key, (void *)1, NULL)) {
        if (op) op_free(op);
        return;
    }
    pod_write(d, op, "DELETE", "", delete_body(uid), NULL);
}

static const char *reason_of(int state) {
    switch (state) {
    case MESOS_TASK_STARTING: return "TaskStarting";
    case MESOS_TASK_STAGING: return "TaskStaging";
    case MESOS_TASK_FINISHED: return "TaskFinished";
    case MESOS_TASK_FAILED: return "TaskFailed";
    case MESOS_TASK_KILLED: return "TaskKilled";
    case MESOS_TASK_ERROR: return "TaskError";
    default: return NULL;
    }
}

/* The status patch of a task state (NULL: the state changes nothing in the pod). */
static json_t *status_patch(const struct mesos_task_status *s, const char *uid) {
    const char *phase;
    switch (s->state) {
    case MESOS_TASK_STAGING:
    case MESOS_TASK_STARTING: phase = "Pending"; break;
    case MESOS_TASK_RUNNING: phase = "Running"; break;
    case MESOS_TASK_FINISHED: phase = "Succeeded"; break;
    case MESOS_TASK_FAILED:
    case MESOS_TASK_KILLED:
    case MESOS_TASK_ERROR: phase = "Failed"; break;
    default: return NULL;
    }
    char now[32], msg[512];
    hostmgr_format_time(wall_ms(), false, now);
    json_t *st = json_pack("{s:s}", "phase", phase);
    const char *reason = reason_of((int)s->state);
    if (reason) {
        snprintf(msg, sizeof msg, "Mesos task %s%s%s%s%.300s", mesos_task_state_name((int)s->state),
                 s->reason ? " (" : "", s->reason ? s->reason : "", s->reason ? "): " : ": ",
                 s->message ? s->message : "");
        json_object_set_new(st, "reason", json_string(reason));
        json_object_set_new(st, "message", json_string(msg));
    } else {
        json_object_set_new(st, "reason", json_null());
        json_object_set_new(st, "message", json_null());
    }
    if (s->state == MESOS_TASK_RUNNING) json_object_set_new(st, "startTime", json_string(now));
    bool ready = s->state == MESOS_TASK_RUNNING;
    json_object_set_new(st, "conditions",
                        json_pack("[{s:s, s:s, s:s}]", "type", "Ready", "status", ready ? "True" : "False",
                                  "lastTransitionTime", now));
    /* the uid is a precondition: a late update must not land on a new pod of the same name */
    return json_pack("{s:{s:s}, s:o}", "metadata", "uid", uid, "status", st);
}

static void on_pod_write_done(void *ud, const struct kc_response *r) {
    struct md_op *op = ud;
    if (!op_landed(op)) return;
    struct mdrv *d = op->d;
    /* 404: the pod is gone; 409: another pod holds the name now: nothing left to store either way */
    bool ok = ok2xx(r->status) || r->status == 404 || r->status == 409;
    struct md_task *t = op->task_id ? strmap_get(&d->tasks, op->task_id) : NULL;
    if (t) t->busy = false;
    if (!ok) {
        fprintf(stderr, "level=warn msg=\"mesos: pod write failed\" pod=%s/%s status=%ld error=\"%s\"\n", op->ns,
                op->name, r->status, r->error ? r->error : "");
        if (op->kind == OP_DELETE) {
            char key[3 * NAME_MAX_LEN + 64];
            snprintf(key, sizeof key, "%s/%s/%s", op->ns, op->name, op->uid ? op->uid : "");
            strmap_del(&d->deletes, key);
        }
        op_free(op); /* not acknowledged: the master sends the update again */
        kick(d);
        return;
    }
    if (op->kind == OP_STATUS || op->kind == OP_LOST) d->st.status_writes++;
    if (t && op->kind == OP_STATUS) {
        t->state = op->state;
        t->terminal = mesos_task_state_terminal(op->state);
    }
    if (t && op->kind == OP_LOST) t->lost = t->terminal = true;
    ack(d, op->agent_id, op->task_id, op->uuid);
    const json_t *pod = t ? kc_informer_get(d->pods, t->ns, t->name) : NULL;
    const char *uid = md_str(pod, "uid");
    if (t && !t->busy && (!uid || strcmp(uid, t->uid))) { /* its pod went meanwhile (on_pod_delete left it) */
        strmap_del(&d->tasks, t->id);
        task_free(t);
    }
    op_free(op);
    kick(d); /* a terminal task of a pod being deleted: its DELETE */
}

/* ---- updates ---- */

static void on_update(struct mdrv *d, const struct mesos_task_status *s) {
    d->st.updates++;
    int state = (int)s->state;
    struct md_task *t = strmap_get(&d->tasks, s->task_id);
    if (!t) {
        if (!d->known_built) return; /* not acknowledged: it comes again once the pods are known */
        if (!mesos_task_state_terminal(state) && !state_lost(state) && state != MESOS_TASK_KILLING) {
            fprintf(stderr, "level=warn msg=\"mesos: unknown task killed\" task=%s state=%s\n", s->task_id,
                    mesos_task_state_name(state));
            kill_task(d, s->task_id, s->agent_id);
        }
        ack(d, s->agent_id, s->task_id, s->uuid_b64);
        return;
    }
    if (s->agent_id && (!t->agent_id || strcmp(t->agent_id, s->agent_id))) {
        free(t->agent_id);
        t->agent_id = strdup(s->agent_id);
    }
    const json_t *pod = kc_informer_get(d->pods, t->ns, t->name);
    const char *uid = md_str(pod, "uid");
    bool pod_here = pod && uid && t->uid && !strcmp(uid, t->uid);
    if (!pod_here || t->lost || (t->terminal && state != t->state)) {
        /* the pod went (its task is killed if it still runs), or the update is stale */
        if (!pod_here && !mesos_task_state_terminal(state) && !state_lost(state)) kill_task(d, t->id, t->agent_id);
        ack(d, s->agent_id, s->task_id, s->uuid_b64);
        return;
    }
    if (state == MESOS_TASK_KILLING || (state == t->state && !state_lost(state))) {
        ack(d, s->agent_id, s->task_id, s->uuid_b64); /* nothing new to store */
        return;
    }
    struct md_op *op = op_new(d, state_lost(state) ? OP_LOST : OP_STATUS);
    if (!op) return;
    op->state = state;
    op->task_id = strdup(t->id);
    op->agent_id = dup0(s->agent_id ? s->agent_id : t->agent_id);
    op->uuid = dup0(s->uuid_b64);
    op->ns = strdup(t->ns);
    op->name = strdup(t->name);
    op->uid = strdup(t->uid);
    if (!op->task_id || !op->ns || !op->name || !op->uid) {
        op_free(op);
        return;
    }
    t->busy = true;
    if (op->kind == OP_LOST) {
        /* lost: the pod is deleted, as for a lost Kubelet node, and the job manager runs it again */
        d->st.lost++;
        fprintf(stderr, "level=warn msg=\"mesos: task lost\" task=%s pod=%s/%s state=%s reason=%s\n", t->id, t->ns,
                t->name, mesos_task_state_name(state), s->reason ? s->reason : "");
        ctl_pod_event(d->kc, MDRV_COMPONENT, t->ns, t->name, t->uid, "Warning", "TaskLost",
                      "Mesos task %s is %s (%s): pod %s/%s is lost and deleted", t->id, mesos_task_state_name(state),
                      s->reason ? s->reason : "no reason", t->ns, t->name);
        pod_write(d, op, "DELETE", "", delete_body(t->uid), NULL);
        return;
    }
    json_t *p = status_patch(s, t->uid);
    if (!p) {
        op_free(op);
        t->busy = false;
        ack(d, s->agent_id, s->task_id, s->uuid_b64);
        return;
    }
    pod_write(d, op, "PATCH", "/status", p, MERGE_PATCH);
}

/* ---- offers ---- */

static void on_offers(struct mdrv *d, const json_t *offers) {
    size_t i;
    const json_t *o;
    int64_t now = wall_ms();
    json_array_foreach(offers, i, o) {
        struct mesos_offer_decl od;
        char err[200] = "resources out of range";
        const double max = 1e12; /* past any machine */
        if (mesos_offer_parse(o, &od, err, sizeof err) ||
            !(od.res.cpus <= max && od.res.mem <= max && od.res.disk <= max && od.res.gpus <= max)) {
            fprintf(stderr, "level=warn msg=\"mesos: offer ignored\" error=\"%s\"\n", err);
            continue;
        }
        struct md_agent *a = agent_get(d, od.agent_id, false);
        bool fresh = !a;
        /* an agent first seen in an offer: its offer stands for its total until GET_AGENTS says */
        agent_learn(d, od.agent_id, od.hostname, fresh ? &od.res : NULL, od.attributes, AG_ACTIVE);
        a = agent_get(d, od.agent_id, false);
        struct md_offer *mo = a ? calloc(1, sizeof *mo) : NULL;
        if (!mo || !(mo->id = strdup(od.id))) {
            free(mo);
            continue;
        }
        mo->res = od.res;
        mo->got_ms = now;
        mo->next = a->offers;
        a->offers = mo;
    }
}

static void on_rescind(struct mdrv *d, const char *offer_id) {
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->agents, &pos, &k, &v)) {
        struct md_agent *a = v;
        for (struct md_offer **pp = &a->offers; *pp; pp = &(*pp)->next) {
            if (strcmp((*pp)->id, offer_id)) continue;
            struct md_offer *o = *pp;
            *pp = o->next;
            o->next = NULL;
            offers_free(o);
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

/* ---- launching ---- */

/* "k=v" strings for a task spec, malloc'd (freed by strs_free). */
struct strs {
    const char *v[MDRV_MAX_KV];
    char *own[MDRV_MAX_KV];
    int n;
};

static void strs_add(struct strs *s, const char *k, const char *v) {
    if (s->n >= MDRV_MAX_KV) return;
    size_t len = strlen(k) + strlen(v) + 2;
    char *x = malloc(len);
    if (!x) return;
    snprintf(x, len, "%s=%s", k, v);
    s->v[s->n] = s->own[s->n] = x;
    s->n++;
}

static void strs_free(struct strs *s) {
    for (int i = 0; i < s->n; i++) free(s->own[i]);
}

json_t *mdrv_pod_task_info(const json_t *pod, const char *task_id, const char *agent_id,
                           const struct mesos_scalars *res) {
    struct launch {
        struct mesos_task_spec spec;
        const char *argv[MDRV_MAX_KV];
        struct strs env, labels;
    } *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    const json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    const char *name = md_str(pod, "name");
    l->spec = (struct mesos_task_spec){.name = name ? name : task_id, .task_id = task_id, .agent_id = agent_id,
                                       .res = *res};
    l->spec.image = json_string_value(json_object_get(c, "image"));
    const json_t *cmd = json_object_get(c, "command"), *args = json_object_get(c, "args");
    size_t i;
    const json_t *v;
    int n = 0;
    json_array_foreach(cmd, i, v) if (json_is_string(v) && n < MDRV_MAX_KV) l->argv[n++] = json_string_value(v);
    json_array_foreach(args, i, v) if (json_is_string(v) && n < MDRV_MAX_KV) l->argv[n++] = json_string_value(v);
    if (n) { /* argv (command then args), its first word the program, as Mesos takes arguments */
        l->spec.command = l->argv[0];
        l->spec.args = l->argv;
        l->spec.nargs = n;
    }
    json_array_foreach(json_object_get(c, "env"), i, v) {
        const char *k = json_string_value(json_object_get(v, "name"));
        const char *val = json_string_value(json_object_get(v, "value"));
        if (k) strs_add(&l->env, k, val ? val : ""); /* valueFrom is not resolved */
    }
    const char *k;
    json_object_foreach(json_object_get(json_object_get(pod, "metadata"), "labels"), k, v)
        if (json_is_string(v)) strs_add(&l->labels, k, json_string_value(v));
    l->spec.env = l->env.v;
    l->spec.nenv = l->env.n;
    l->spec.labels = l->labels.v;
    l->spec.nlabels = l->labels.n;
    json_t *ti = mesos_task_info(&l->spec);
    strs_free(&l->env);
    strs_free(&l->labels);
    free(l);
    return ti;
}

int mdrv_pod_scalars(const json_t *pod, struct mesos_scalars *out) {
    struct ksim_res r;
    char err[200];
    if (ksim_pod_requests(pod, &r, err, sizeof err)) return -1;
    out->cpus = r.cpu / 1000.0;
    out->mem = (double)r.memory / (1024.0 * 1024.0);
    out->gpus = r.gpu / 1000.0;
    out->disk = 0;
    if (out->cpus < 0.01) out->cpus = 0.01;
    if (out->mem < 32) out->mem = 32;
    return 0;
}

static void on_accept_done(void *ud, int status, const char *body) {
    struct md_op *op = ud;
    if (!op_landed(op)) return;
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
                task_free(t);
                d->rescan = true; /* its pod waits again */
            } else if (d->fid) {
                const char *tid = t->id, *aid = t->agent_id;
                call(d, mesos_call_reconcile(d->fid, &tid, &aid, 1));
            }
        }
    }
    op_free(op);
    kick(d);
}

/* Launches what waits on a, within its offers. */
static void launch_on(struct mdrv *d, struct md_agent *a, json_t **waiting, int nw) {
    struct mesos_scalars left = {0};
    int k = 0;
    for (struct md_offer *o = a->offers; o && k < 64; o = o->next, k++) mesos_scalars_add(&left, &o->res);
    json_t *infos = json_array(), *ids = json_array();
    int more = 0;
    for (int i = 0; i < nw; i++) {
        const json_t *pod = waiting[i];
        struct mesos_scalars need;
        char tid[MESOS_ID_MAX + 1];
        if (mdrv_pod_scalars(pod, &need) || mdrv_task_id(md_str(pod, "uid"), pod_run(pod), tid, sizeof tid)) continue;
        if (!mesos_scalars_fit(&need, &left)) {
            more++;
            continue;
        }
        json_t *ti = mdrv_pod_task_info(pod, tid, a->id, &need);
        if (!ti || !task_add(d, tid, a->id, pod)) {
            json_decref(ti);
            continue;
        }
        mesos_scalars_sub(&left, &need);
        json_array_append_new(infos, ti);
        json_array_append_new(ids, json_string(tid));
        fprintf(stderr, "level=info msg=\"mesos: launching\" task=%s pod=%s/%s agent=%s\n", tid,
                md_str(pod, "namespace"), md_str(pod, "name"), a->id);
    }
    if (!json_array_size(infos)) {
        json_decref(infos);
        json_decref(ids);
        return;
    }
    const char *oids[64];
    char *own[64];
    int n = take_offers(a, oids, 64, own);
    struct md_op *op = op_new(d, OP_ACCEPT);
    d->st.launched += json_array_size(infos);
    d->st.accepts++;
    json_t *c = mesos_call_accept(d->fid, oids, n, infos, more ? 0 : d->o.refuse_seconds);
    for (int i = 0; i < n; i++) free(own[i]);
    if (!op) {
        json_decref(ids);
        call(d, c);
        return;
    }
    op->task_ids = ids;
    if (!c || mclient_call(d->mc, c, on_accept_done, op)) {
        on_accept_done(op, -ENOTCONN, NULL); /* as a call that never went */
        return;
    }
    op->inflight = true;
}

/* ---- the pump ---- */

struct scan {
    struct mdrv *d;
    struct strmap waiting; /* agent id -> json_t *[] (malloc'd, count in agent->waiting) */
    int64_t now;
};

static const char *pod_agent(struct mdrv *d, const json_t *pod) {
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    if (!node || !node[0]) return NULL;
    const json_t *n = kc_informer_get(d->nodes, "", node);
    return n ? ann(n, MDRV_ANN_AGENT) : NULL;
}

/* Acts on one pod; true when it needs another look later (it waits for an
 * offer or for reconciliation, or it is being deleted). */
static bool scan_one(struct scan *s, const json_t *pod) {
    struct mdrv *d = s->d;
    const char *agent_id = pod_agent(d, pod);
    if (!agent_id) return false; /* not on a Mesos Node (one that appears later brings a full pass) */
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name"), *uid = md_str(pod, "uid");
    if (!ns || !name || !uid || strlen(name) > NAME_MAX_LEN || strlen(ns) > NAME_MAX_LEN) return false;
    char tid[MESOS_ID_MAX + 1];
    if (mdrv_task_id(uid, pod_run(pod), tid, sizeof tid)) return false;
    struct md_task *t = strmap_get(&d->tasks, tid);
    bool deleting = md_str(pod, "deletionTimestamp") != NULL;
    bool terminal = phase_terminal(pod_phase(pod));
    if (!d->known_built) { /* the tasks of the pods bound before this driver started */
        if (!t && !terminal) task_add(d, tid, agent_id, pod);
        return deleting;
    }
    if (deleting) { /* looked at until it is gone */
        if (!t || terminal || (t->terminal && !t->busy)) {
            pod_delete(d, ns, name, uid);
        } else if (!t->busy && (!t->kill_at_ms || s->now - t->kill_at_ms > KILL_RESEND_MS) && d->reconciled) {
            t->kill_at_ms = s->now;
            fprintf(stderr, "level=info msg=\"mesos: killing\" task=%s pod=%s/%s\n", t->id, ns, name);
            kill_task(d, t->id, t->agent_id);
        }
        return true;
    }
    if (t || terminal) return false;
    if (!d->reconciled) return true;
    struct md_agent *a = agent_get(d, agent_id, false);
    if (!a || a->state != AG_ACTIVE) return true; /* placement should not have chosen it: it waits */
    json_t **w = strmap_get(&s->waiting, agent_id);
    json_t **nw = realloc(w, (size_t)(a->waiting + 1) * sizeof *nw);
    if (!nw) return true;
    nw[a->waiting++] = (json_t *)pod;
    if (nw != w) strmap_put(&s->waiting, agent_id, nw, NULL);
    return true;
}

static void pod_key(const json_t *pod, char *key, size_t len) {
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name");
    snprintf(key, len, "%s/%s", ns ? ns : "", name ? name : "");
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
    kc_informer_foreach(s->d->pods, scan_all_one, s);
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
            pod = kc_informer_get(d->pods, ns, slash + 1);
        }
        if (!pod || !scan_one(s, pod)) strmap_del(&d->todo, k);
    }
}

static void get_agents(struct mdrv *d);

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
            call(d, mesos_call_reconcile(d->fid, tids, aids, n));
            n = 0;
        }
    }
    if (n) call(d, mesos_call_reconcile(d->fid, tids, aids, n));
    call(d, mesos_call_reconcile(d->fid, NULL, NULL, 0)); /* then implicit: the tasks nobody named */
    d->last_reconcile_ms = wall_ms();
    fprintf(stderr, "level=info msg=\"mesos: reconciling\" tasks=%zu\n", strmap_count(&d->tasks));
}

static void pump(struct mdrv *d) {
    if (d->stopped || !kc_informer_synced(d->pods) || !kc_informer_synced(d->nodes)) return;
    struct scan s = {.d = d, .now = wall_ms()};
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->agents, &pos, &k, &v)) ((struct md_agent *)v)->waiting = 0;
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
    bool revive = false;
    pos = 0;
    while (strmap_next(&d->agents, &pos, &k, &v)) {
        struct md_agent *a = v;
        json_t **w = strmap_get(&s.waiting, a->id);
        if (subscribed && a->waiting && a->offers) {
            launch_on(d, a, w, a->waiting);
            /* what waits does not fit what is offered (a task still ending, another framework): the
             * offer goes back for a moment and comes again when the agent has more */
            if (a->offers && s.now - a->offers->got_ms >= (int64_t)d->o.hold_ms) {
                const char *oids[64];
                char *own[64];
                int n = take_offers(a, oids, 64, own);
                call(d, mesos_call_decline(d->fid, oids, n, 1));
                for (int i = 0; i < n; i++) free(own[i]);
                d->st.declines++;
            }
        } else if (a->waiting) {
            revive = true;
        }
        if (subscribed && !a->waiting && a->offers && s.now - a->offers->got_ms >= (int64_t)d->o.hold_ms) {
            const char *oids[64];
            char *own[64];
            int n = take_offers(a, oids, 64, own);
            call(d, mesos_call_decline(d->fid, oids, n, d->o.refuse_seconds));
            for (int i = 0; i < n; i++) free(own[i]);
            d->st.declines++;
        }
        if (a->dirty && !a->busy && s.now >= a->retry_at_ms) node_write(d, a);
    }
    pos = 0;
    while (strmap_next(&s.waiting, &pos, &k, &v)) free(v);
    strmap_free(&s.waiting);
    if (subscribed && revive && s.now - d->last_revive_ms >= REVIVE_MIN_MS) {
        call(d, mesos_call_roles(MESOS_CALL_REVIVE, d->fid, NULL, 0));
        d->last_revive_ms = s.now;
        d->st.revives++;
    }
    if (subscribed && s.now - d->last_reconcile_ms >= (int64_t)d->o.reconcile_ms) {
        /* implicit reconciliation, and the agents again: an unreachable agent marked gone brings no event */
        call(d, mesos_call_reconcile(d->fid, NULL, NULL, 0));
        get_agents(d);
        d->last_reconcile_ms = s.now;
    }
}

static void on_kick(uv_timer_t *t) { pump(t->data); }

static void kick(struct mdrv *d) {
    if (!d->stopped && !uv_is_active((uv_handle_t *)&d->kick)) uv_timer_start(&d->kick, on_kick, 0, 0);
}

static void on_tick(uv_timer_t *t) { pump(t->data); }

/* ---- GET_AGENTS on the operator API (a worker thread: one blocking POST) ---- */

struct agents_job {
    uv_work_t w;
    struct mdrv *d;
    char url[MCLIENT_URL_MAX + 16];
    char *body;
    size_t len;
    long status;
    bool too_big;
};

static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    struct agents_job *j = ud;
    size_t n = sz * nm;
    if (j->len + n > GET_AGENTS_MAX) {
        j->too_big = true;
        return 0;
    }
    char *b = realloc(j->body, j->len + n + 1);
    if (!b) return 0;
    memcpy(b + j->len, p, n);
    j->body = b;
    j->len += n;
    b[j->len] = 0;
    return n;
}

static void agents_work(uv_work_t *w) {
    struct agents_job *j = w->data;
    CURL *c = curl_easy_init();
    if (!c) return;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: application/json");
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"type\":\"GET_AGENTS\"}");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &j->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static void get_agents(struct mdrv *d);

static const char *agent_id_of(const json_t *x) {
    const char *id = mesos_id_get(json_object_get(x, "agent_info"), "id");
    return id ? id : mesos_id_get(x, "id");
}

int mdrv_agent_decode(const json_t *x, struct mdrv_agent_info *out) {
    const json_t *info = json_object_get(x, "agent_info");
    memset(out, 0, sizeof *out);
    out->id = mesos_id_get(info, "id");
    out->hostname = json_string_value(json_object_get(info, "hostname"));
    const json_t *res = json_object_get(x, "total_resources");
    if (!res) res = json_object_get(info, "resources");
    char err[200];
    if (!out->id || !out->id[0] || !out->hostname || mesos_resources_parse(res, &out->total, NULL, err, sizeof err))
        return -1;
    const double max = 1e12; /* past any machine: a quantity that would not format */
    if (!(out->total.cpus <= max && out->total.mem <= max && out->total.disk <= max && out->total.gpus <= max))
        return -1;
    out->attributes = json_object_get(info, "attributes");
    out->active = !json_is_false(json_object_get(x, "active"));
    return 0;
}

static void agents_apply(struct mdrv *d, const json_t *ga) {
    struct strmap seen = {0};
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(ga, "agents"), i, x) {
        struct mdrv_agent_info ai;
        if (mdrv_agent_decode(x, &ai)) continue;
        agent_learn(d, ai.id, ai.hostname, &ai.total, ai.attributes, ai.active ? AG_ACTIVE : AG_UNREACHABLE);
        strmap_put(&seen, ai.id, (void *)1, NULL);
    }
    json_array_foreach(json_object_get(ga, "unreachable_agents"), i, x) {
        const char *id = agent_id_of(x);
        if (!id) continue;
        const char *host = json_string_value(json_object_get(x, "hostname"));
        if (!host) host = json_string_value(json_object_get(json_object_get(x, "agent_info"), "hostname"));
        agent_learn(d, id, host, NULL, NULL, AG_UNREACHABLE);
        strmap_put(&seen, id, (void *)1, NULL);
    }
    /* agents the master no longer has: their Nodes go */
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->agents, &pos, &k, &v))
        if (!strmap_get(&seen, k)) agent_learn(d, k, NULL, NULL, NULL, AG_GONE);
    strmap_free(&seen);
}

/* Mesos Nodes whose agent the driver does not know after GET_AGENTS: gone too. */
static int stale_node(void *ud, json_t *node) {
    struct mdrv *d = ud;
    const char *id = ann(node, MDRV_ANN_AGENT), *name = md_str(node, "name");
    if (!id || !name || agent_get(d, id, false)) return 0;
    struct md_agent *a = agent_get(d, id, true);
    if (a) {
        a->hostname = strdup(name);
        a->state = AG_GONE;
        a->dirty = true;
    }
    return 0;
}

static void agents_done(uv_work_t *w, int status) {
    struct agents_job *j = w->data;
    struct mdrv *d = j->d;
    (void)status;
    if (!d->stopped) {
        d->agents_busy = false;
        json_error_t je;
        json_t *root = j->status == 200 && j->body ? json_loads(j->body, 0, &je) : NULL;
        const json_t *ga = json_object_get(root, "get_agents");
        if (json_is_object(ga)) {
            agents_apply(d, ga);
            if (kc_informer_synced(d->nodes)) kc_informer_foreach(d->nodes, stale_node, d);
        } else {
            fprintf(stderr, "level=warn msg=\"mesos: GET_AGENTS failed\" status=%ld too_big=%d\n", j->status,
                    j->too_big);
        }
        json_decref(root);
        if (d->agents_again) {
            d->agents_again = false;
            get_agents(d);
        }
        kick(d);
    }
    free(j->body);
    free(j);
}

static void get_agents(struct mdrv *d) {
    if (d->agents_busy) {
        d->agents_again = true;
        return;
    }
    struct agents_job *j = calloc(1, sizeof *j);
    if (!j) return;
    j->d = d;
    j->w.data = j;
    snprintf(j->url, sizeof j->url, "%s/api/v1", d->mc ? mclient_leader(d->mc) : d->master);
    d->agents_busy = true;
    if (uv_queue_work(d->loop, &j->w, agents_work, agents_done)) {
        d->agents_busy = false;
        free(j);
    }
}

/* ---- the subscription ---- */

static void on_subscribed(void *ud, const char *fid) {
    struct mdrv *d = ud;
    if (!d->fid || strcmp(d->fid, fid)) {
        free(d->fid);
        d->fid = strdup(fid);
        redisReply *r = ctl_redis(d->db, "SET %s %s", MDRV_KEY_FRAMEWORK, fid);
        if (r) freeReplyObject(r);
    }
    fprintf(stderr, "level=info msg=\"mesos: subscribed\" framework_id=%s master=%s\n", fid, mclient_leader(d->mc));
    d->reconciled = false; /* explicit then implicit reconciliation on every SUBSCRIBED */
    get_agents(d);
    kick(d);
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
        offers_free(a->offers);
        a->offers = NULL;
    }
}

static void on_event(void *ud, const struct mesos_event *ev, const json_t *root) {
    struct mdrv *d = ud;
    (void)root;
    switch (ev->type) {
    case MESOS_EVENT_OFFERS: on_offers(d, ev->offers); break;
    case MESOS_EVENT_RESCIND: on_rescind(d, ev->offer_id); break;
    case MESOS_EVENT_UPDATE: on_update(d, &ev->status); break;
    case MESOS_EVENT_FAILURE: get_agents(d); break;
    case MESOS_EVENT_ERROR:
        fprintf(stderr, "level=error msg=\"mesos: master error\" message=\"%s\"\n", ev->message ? ev->message : "");
        break;
    default: break;
    }
    kick(d);
}

/* ---- informers ---- */

/* A bound pod that changed is looked at by the next pump. */
static void pod_noted(struct mdrv *d, const json_t *pod) {
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    if (!node || !node[0]) return;
    char key[2 * NAME_MAX_LEN + 2];
    const char *ns = md_str(pod, "namespace"), *name = md_str(pod, "name");
    if (!ns || !name || strlen(ns) > NAME_MAX_LEN || strlen(name) > NAME_MAX_LEN) return;
    pod_key(pod, key, sizeof key);
    if (strmap_put(&d->todo, key, (void *)1, NULL)) d->rescan = true;
    kick(d);
}

static void on_pod_add(void *ud, json_t *obj) { pod_noted(ud, obj); }

static void on_pod_update(void *ud, json_t *old, json_t *obj) {
    (void)old;
    pod_noted(ud, obj);
}

/* A Mesos Node appeared or changed: its pods may have waited for it. */
static void on_node_change(void *ud, json_t *obj) {
    struct mdrv *d = ud;
    (void)obj;
    d->rescan = true;
    kick(d);
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
    /* the pod's tasks go with it (one still running is killed by the next update about it) */
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->tasks, &pos, &k, &v)) {
        struct md_task *t = v;
        if (strcmp(t->ns, ns) || strcmp(t->name, name) || (uid && t->uid && strcmp(uid, t->uid))) continue;
        if (!t->terminal && d->reconciled) kill_task(d, t->id, t->agent_id);
        if (t->busy) continue; /* its write's completion still looks it up */
        strmap_del(&d->tasks, k);
        task_free(t);
    }
    kick(d);
}

static void on_synced(void *ud) { kick(ud); }

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
    if (o->reconcile_ms) d->o.reconcile_ms = o->reconcile_ms;
    uv_timer_init(loop, &d->tick);
    uv_timer_init(loop, &d->kick);
    d->tick.data = d->kick.data = d;
    redisReply *r = ctl_redis(db, "GET %s", MDRV_KEY_FRAMEWORK);
    if (r && r->type == REDIS_REPLY_STRING && r->len > 0 && r->len <= MESOS_ID_MAX) d->fid = strdup(r->str);
    if (r) freeReplyObject(r);
    struct kc_informer_handlers ph = {on_pod_add, on_pod_update, on_pod_delete, on_synced};
    struct kc_informer_handlers nh = {on_node_change, on_node_update, NULL, on_synced};
    d->pods = kc_informer_new(kc, "/api/v1/pods", NULL, &ph, d);
    d->nodes = kc_informer_new(kc, NODES_PATH, "labelSelector=peloton.io%2Fbackend%3Dmesos", &nh, d);
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
        if (!op->inflight) op_free(op);
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
    while (strmap_next(&d->agents, &pos, &k, &v)) agent_free(v);
    strmap_free(&d->agents);
    pos = 0;
    while (strmap_next(&d->tasks, &pos, &k, &v)) task_free(v);
    strmap_free(&d->tasks);
    strmap_free(&d->deletes);
    strmap_free(&d->todo);
    free(d->master);
    free(d->user);
    free(d->name);
    free(d->fid);
    free(d);
}

void mdrv_get_stats(const struct mdrv *d, struct mdrv_stats *out) { *out = d->st; }
