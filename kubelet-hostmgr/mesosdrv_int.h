/* mesosdrv's own parts (mesosdrv.c: ops, calls, offers, launches, the pump,
 * the subscription; mesosdrv_node.c: agents and their Nodes, GET_AGENTS;
 * mesosdrv_pod.c: pod writes, updates as pod status, a pod's TaskInfo):
 * the driver's state and the helpers the three share. Not for other
 * modules: mesosdrv.h is the interface. */
#ifndef PELOTON_KUBELET_MESOSDRV_INT_H
#define PELOTON_KUBELET_MESOSDRV_INT_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kclient.h"
#include "mclient.h"
#include "mesos_json.h"
#include "mesosdrv.h"
#include "strmap.h"

#define NODES_PATH "/api/v1/nodes"
#define MERGE_PATCH "application/merge-patch+json"
#define NAME_MAX_LEN 253
#define RECONCILE_BATCH 1000
#define GET_AGENTS_MAX (64u << 20) /* bytes of a GET_AGENTS reply */
#define KILL_RESEND_MS 10000
#define REVIVE_MIN_MS 1000
#define OFFER_SWEEP_MS 100 /* pump visits every agent holding offers at most this often (declines) */
#define DECLINE_BATCH 1000 /* offer ids in one DECLINE */
#define OFFER_HOLD_MAX_MS 10000 /* an offer nobody takes is held this long at most while pods keep coming */
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
    bool drain;           /* the Node asks for a drain: cordoned, DRAIN_AGENT sent, its killed tasks lost */
    bool drain_sent;      /* DRAIN_AGENT answered 200 */
    unsigned fails;
    int64_t retry_at_ms;
    struct md_offer *offers;
    struct strmap wait;   /* "ns/name" of the pods bound here waiting for an offer (checked again at launch) */
};

/* An update that came while its task's write was in flight, kept till that write lands. */
struct md_held {
    int state;
    char *agent_id, *reason, *message, *uuid;
};

struct md_task {
    char *id, *agent_id, *ns, *name, *uid;
    int state;            /* the last state stored in the pod; -1: none yet */
    bool terminal, lost, delete_sent;
    bool busy;            /* a write of an update of it is in flight (one at a time, in order) */
    char *write_uuid;     /* the uuid of that update (NULL: none) */
    struct md_held *held; /* the newest update that came meanwhile (NULL: none) */
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

/* Offers a pass declines, sent at its end in one DECLINE per filter (a
 * master takes offers of any agents in one DECLINE; only an ACCEPT's must
 * share an agent). */
struct md_declines {
    char **ids;
    int n, cap;
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
    struct strmap bound;                  /* "ns/name" -> the pod (a reference) of every pod with a node: the
                                           * driver's own cache, its feed being the controllers' keys-only one */
    struct strmap todo;                   /* "ns/name" of the pods pump looks at (changed, waiting) */
    struct strmap offered;                /* ids of the agents holding offers: what pump launches on or declines */
    struct strmap ready;                  /* ids of the agents where a pod began to wait or an offer came */
    bool rescan;                          /* pump looks at every pod next time */
    bool agents_walk;                     /* pump walks every agent (Node writes, drains) next time */
    bool maybe_revive;                    /* a pod may wait on an agent without an offer */
    struct md_declines decl[2]; /* [0]: with a 1 s filter (what waits does not fit), [1]: refuse_seconds */
    struct md_op *ops;
    char *text;      /* a call or a write written as text, reused (md_ack, status patches) */
    size_t text_cap;
    int closed;   /* timers closed */
    bool orphan;  /* mdrv_start failed: freed when its timers close */
    bool stopped, known_built, reconciled, agents_busy, agents_again;
    int64_t last_revive_ms, last_reconcile_ms;
    int64_t last_wait_ms;  /* when a pod last began to wait for an offer */
    int64_t last_sweep_ms; /* when pump last visited every agent holding offers */
    struct mdrv_stats st;
    /* peloton_mesos_* (NULL without a registry): set from st every tick */
    struct metrics_series *m_calls[5], *m_launched, *m_updates, *m_lost, *m_agents, *m_subscribed;
    struct mdrv_stats m_last; /* st as the counters last had it */
};

/* ---- shared helpers (mesosdrv.c unless said) ---- */
int64_t md_wall_ms(void);
const char *md_str(const json_t *obj, const char *key);
const char *md_ann(const json_t *obj, const char *key);
struct md_op *md_op_new(struct mdrv *d, enum md_op_kind kind);
void md_op_free(struct md_op *op);
bool md_op_send(struct md_op *op, const char *method, const char *path, json_t *body, const char *ctype,
                    kc_done_fn done);
bool md_op_send_text(struct md_op *op, const char *method, const char *path, const char *body, size_t len,
                     const char *ctype, kc_done_fn done);
bool md_op_landed(struct md_op *op);
bool md_ok2xx(long s);
char *md_dup0(const char *s);
void md_call(struct mdrv *d, json_t *c);
void md_ack(struct mdrv *d, const char *agent_id, const char *task_id, const char *uuid);
void md_kill_task(struct mdrv *d, const char *task_id, const char *agent_id);
void md_kick(struct mdrv *d);
void md_task_free(struct md_task *t);
void md_held_free(struct md_held *h);
struct md_task *md_task_add(struct mdrv *d, const char *id, const char *agent_id, const json_t *pod);
unsigned md_pod_run(const json_t *pod);
bool md_state_lost(int s);
void md_pod_path(const char *ns, const char *name, const char *sub, char *out, size_t len);
bool md_phase_terminal(const char *ph);
const char *md_pod_phase(const json_t *pod);
/* The bound pod ns/name as the driver last saw it (borrowed), or NULL. */
const json_t *md_pod_get(struct mdrv *d, const char *ns, const char *name);
/* mesosdrv_node.c */
struct md_agent *md_agent_get(struct mdrv *d, const char *id, bool create);
void md_offers_free(struct md_offer *o);
void md_agent_free(struct md_agent *a);
void md_agent_learn(struct mdrv *d, const char *id, const char *hostname, const struct mesos_scalars *total,
                        const json_t *attrs, int state);
void md_node_write(struct mdrv *d, struct md_agent *a);
void md_get_agents(struct mdrv *d);
/* DRAIN_AGENT for a (operator API, on the thread pool); a->drain_sent once answered 200. */
void md_drain_agent(struct mdrv *d, struct md_agent *a);
/* mesosdrv_pod.c */
void md_pod_delete(struct mdrv *d, const char *ns, const char *name, const char *uid);
void md_on_update(struct mdrv *d, const struct mesos_task_status *s);
bool md_pod_write(struct mdrv *d, struct md_op *op, const char *method, const char *sub, json_t *body,
                      const char *ct);

#endif
