/* jobmgr's controller state, shared by jobmgr.c (informers, events, the
 * request queue, the tick) and jobmgr_sync.c (one job's reconcile). Not for
 * users: the public interface is jobmgr.h.
 *
 * Model: per Job a record per instance (struct jm_inst), kept from the pod
 * informer's events (the pod of the current run) and from what the job
 * manager itself did (creates, kills, restarts). The records are the
 * struct task inputs of job_reconcile and update_plan. Pods to remove (older
 * runs, instances no longer wanted, pods of a deleted Job) wait in the job's
 * garbage list until the pod informer reports them gone.
 *
 * Ownership: the jobmgr owns every job, record and string here; requests
 * name their job by key (never by pointer), so a job may be freed while its
 * requests are in flight. */
#ifndef PELOTON_CTL_JOBMGR_CTL_H
#define PELOTON_CTL_JOBMGR_CTL_H
#include <stdarg.h>

#include "jobmgr.h"
#include "jobmgr_int.h"

struct jm_inst {
    bool used;                /* the instance has a record */
    uint32_t run, version, failures, lost;
    enum task_state state;
    int64_t since_ms;
    char *pod;                /* name of the current run's pod (set at create), or NULL */
    bool present;             /* that pod is in the informer's cache */
    bool bound;               /* it has spec.nodeName */
    bool deleting;            /* it has a deletionTimestamp */
    bool creating;            /* create sent, pod not yet seen */
    bool create_inflight;
    int64_t create_ms;        /* when the create was sent */
    bool kill;                /* this run is to end (KILL or an update's restart) */
    bool preempted;           /* this run was chosen as a preemption victim */
    bool kill_sent;
    bool restart_pending;     /* an update wants a new run at restart_version once this one ends */
    bool moving;              /* this run is killed to move off a node in maintenance (jobmgr_drain.c) */
    bool stopped;             /* spec.stoppedInstances names it: killed, not run again (set each reconcile) */
    uint32_t name_salt;       /* generated pod names: bumped when another pod holds the name */
    uint32_t restart_version;
    uint32_t crash_loop;      /* task.crash_loop: restarts in the current crash loop */
    int64_t running_ms;       /* when this run was seen RUNNING (task.running_since_ms); 0: not yet */
    uint32_t backoff_run;     /* the run whose backoff was last reported (Event), 0: none */
    int64_t backoff_wall;     /* its restart time, Unix seconds (fixed when first seen, for status) */
    char *host, *last_host;   /* node of the current run; node of the latest placed run */
    char *pin;                /* DAEMON: the node the instance belongs to */
    uint32_t gang_first, gang_run, gang_size; /* the gang this run was started in (size 1: none) */
    uint64_t node_gen;        /* host was among the Nodes at jobmgr.node_gen (0: not looked up since it changed) */
    char *applied;            /* the resourceVersion of the pod last adopted into the record, or NULL (the
                               * pod cache keeps text, not objects: kc_informer_version) */
    const char *unsched;      /* the reason of its pod's PodScheduled=False condition (jm_reason), or NULL: the
                               * status counts waiting pods by it and decodes one pod of each reason */
    uint64_t applied_sum;     /* what adopt read and left of the record then, with its Job's uid (jobmgr.c) */
};

struct jm_garbage {
    char *name;
    bool grace0;  /* nothing runs (terminal, unbound, node gone): no grace period */
    bool sent;
};

/* The operator's one-shot requests on a Job (annotations). */
enum { JM_ONESHOT_ABORT, JM_ONESHOT_ROLLBACK, JM_NONESHOT };
extern const char *const jm_oneshot_annotation[JM_NONESHOT];

struct jm_job {
    struct jm_job *hnext;     /* hash chain */
    struct jm_job *dnext;     /* dirty list */
    bool dirty;
    char *key, *ns, *name, *uid;
    struct jm_inst *inst;     /* indexed by instance id */
    uint32_t ninst;
    struct jm_garbage *garbage;
    size_t ngarbage, capgarbage;
    json_t *gindex;           /* garbage name -> index */
    /* template versions (docs/lifecycle.md, "The jobmgr role") */
    bool loaded;
    uint32_t stable;          /* the version new runs use outside an update */
    json_t *stable_tpl;       /* its template */
    uint32_t update_to;       /* the latest update's target version (0: none) */
    struct update *u;         /* the update in progress, or NULL */
    struct jm_update_status ust;
    bool persist, persist_inflight; /* the Job's annotations need writing */
    char *status_sent;        /* the status last patched (JSON), NULL: none yet */
    bool status_inflight;
    char *last_err;           /* the last decode error logged */
    int64_t wake_ms;          /* reconcile again at this time (backoff end, settle time); 0: none */
    char *oneshot_seen[JM_NONESHOT]; /* update-abort/-rollback annotation values handled last */
    bool oneshot_clear[JM_NONESHOT]; /* remove that annotation with the next persist */
    enum jm_pool_check pool_told; /* what the last pool Event said (JM_POOL_OK: nothing wrong was told) */
    struct task *tasks;       /* job_reconcile's input, kept between reconciles (no large allocation per sync) */
    size_t cap_tasks;
    struct update_instance *snap; /* update_plan's input, likewise */
    size_t cap_snap;
};

enum jm_req_kind { JM_RQ_CREATE, JM_RQ_KILL, JM_RQ_GARBAGE, JM_RQ_STATUS, JM_RQ_ANNOTATE };

struct jm_req {
    struct jm_req *next;
    struct jobmgr *jm;
    enum jm_req_kind kind;
    const char *method, *ct;
    char *path;
    json_t *body;
    char *key, *pod;
    uint32_t instance, run;
};

#define JM_REASONS_MAX 32
/* jm_reason's answer for a reason past JM_REASONS_MAX: the pod is read to know. */
extern const char jm_reason_other[];

struct jobmgr {
    uv_loop_t *loop;
    struct kclient *kc;
    struct jobmgr_options o;
    struct kc_informer *jobs, *pods, *nodes, *pools;
    uv_timer_t tick, resync, wake;
    int64_t wake_at;          /* when the wake timer fires; 0: not armed */
    int open_handles;
    bool stopping, tick_armed;
    struct jm_job **buckets;
    size_t nbuckets, njobs;
    struct jm_job *dirty;
    struct jm_req *qhead, *qtail;
    size_t inflight, queued;
    struct jobmgr_stats stats;
    struct metrics_series *m_reconciles, *m_writes_ok, *m_writes_failed, *m_writes_conflict, *m_jobs, *m_queued; /* may be NULL */
    struct jm_fleet *fleet;   /* the nodes as placement sees them (DAEMON eligibility), NULL: stale */
    json_t *parents;          /* names of the pools that have children, NULL: stale */
    long maint_nodes;         /* Nodes in maintenance; -1: stale (counted again on a node change) */
    uint64_t node_gen;        /* bumped when a Node comes or goes: a record's host is looked up again */
    char *reasons[JM_REASONS_MAX]; /* the PodScheduled=False reasons seen (jm_reason), freed with the job manager */
    int nreasons;
};

/* jobmgr.c */
/* reason as a pointer the job manager keeps (equal reasons: one pointer),
 * jm_reason_other when JM_REASONS_MAX are kept already, NULL for NULL. */
const char *jm_reason(struct jobmgr *jm, const char *reason);
void jm_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int64_t jm_now_ms(const struct jobmgr *jm);
struct jm_job *jm_job_find(struct jobmgr *jm, const char *ns, const char *name);
void jm_job_free(struct jobmgr *jm, struct jm_job *job); /* unlinks it from the map */
void jm_mark_dirty(struct jobmgr *jm, struct jm_job *job);
/* Reconciles job again at at_ms (a backoff ends, an instance settles); the
 * earliest of several asks wins. */
void jm_wake_at(struct jobmgr *jm, struct jm_job *job, int64_t at_ms);
/* Queues a write; takes path and body. NULL key/pod allowed. */
void jm_send(struct jobmgr *jm, enum jm_req_kind kind, const char *method, char *path, json_t *body, const char *ct,
             const struct jm_job *job, const char *pod, uint32_t instance, uint32_t run);
bool jm_node_exists(const struct jobmgr *jm, const char *node);
bool jm_node_ready(const struct jobmgr *jm, const char *node); /* exists, Ready not False/Unknown */
/* The node's annotation peloton.io/maintenance is "draining" or "drained",
 * and the node is cordoned (spec.unschedulable). */
bool jm_node_in_maintenance(const struct jobmgr *jm, const char *node);
/* Whether any node is (kept per node change, so a reconcile pays nothing
 * for maintenance while there is none). */
bool jm_any_maintenance(struct jobmgr *jm);
/* The fleet of the current nodes (built when a node changed since); NULL on ENOMEM. */
struct jm_fleet *jm_fleet(struct jobmgr *jm);
/* Whether the ResourcePool exists and is a leaf (the only pools that take
 * work): JM_POOL_OK, JM_POOL_NOT_FOUND, JM_POOL_NOT_LEAF. */
enum jm_pool_check jm_pool_check(struct jobmgr *jm, const char *pool);

/* jobmgr_sync.c */
void jm_set_str(char **dst, const char *v); /* replaces *dst by a copy of v (NULL: none); no-op when equal */
struct jm_inst *jm_inst_get(struct jm_job *job, uint32_t instance); /* grows; NULL on ENOMEM */
void jm_inst_clear(struct jm_inst *r);
void jm_set_state(struct jobmgr *jm, struct jm_inst *r, enum task_state s);
void jm_garbage_add(struct jm_job *job, const char *name, bool grace0);
bool jm_garbage_remove(struct jm_job *job, const char *name);
struct jm_garbage *jm_garbage_find(struct jm_job *job, const char *name);
/* One job's reconcile; may free the job (returns true then). */
bool jm_sync_job(struct jobmgr *jm, struct jm_job *job);
/* Request completions. */
void jm_req_done(struct jobmgr *jm, struct jm_job *job, const struct jm_req *q, long status, const char *error);

/* jobmgr_drain.c: host maintenance */
/* Instances of a service a node's maintenance may take down at once:
 * sla.maximumUnavailableInstances, else updateStrategy.batchSize, else 1. */
uint32_t jm_drain_budget(const struct crd_job_extra *x);
/* Marks the instances of the job (type, instanceCount count) that leave a
 * node in maintenance now (restart_pending at their own version): BATCH ones
 * all at once; a service's only while fewer than budget of its instances
 * [0, count) are not Running, counting those it moves (one that is not
 * Running moves at any time); DAEMON none. Returns how many it marked. */
uint32_t jm_drain_step(struct jobmgr *jm, struct jm_job *job, enum job_type type, uint32_t count, uint32_t budget);

/* jobmgr_update.c */
/* The task timeouts and restart backoff of the options. */
void jm_task_config(const struct jobmgr *jm, struct task_config *cfg);
/* task_restart_at for record r whose next run is at version. */
int64_t jm_restart_at(const struct task_config *cfg, const struct jm_inst *r, uint32_t version, uint32_t *loop);
/* The operator's intent for the job's update: paused (spec.updateStrategy.paused)
 * and an abort or rollback from the annotations JM_A_UPDATE_ABORT and
 * JM_A_UPDATE_ROLLBACK, each handled once per value (marked for removal with
 * the next persist; one that cannot apply to the update in progress is a
 * Warning Event). */
void jm_update_intent(struct jobmgr *jm, struct jm_job *job, const json_t *obj, bool paused,
                      struct update_intent *out);
/* An Event on the Job when the update's state moved from before. */
void jm_update_event(struct jobmgr *jm, const struct jm_job *job, enum update_state before, const struct update *u);
/* The update's progress for the status. */
void jm_update_progress(const struct update *u, struct jm_update_status *st);
/* Instances of a service waiting out a restart backoff (cur: the version
 * runs use outside an update): filled into out, a BackOff Event for each new
 * wait, and a wake-up at each one's end. */
void jm_backoff_scan(struct jobmgr *jm, struct jm_job *job, enum job_type type, const struct task_config *cfg,
                     uint32_t cur, int64_t now, struct jm_backoff_status *out);

#endif
