/* msim: the simulated Mesos master behind mesos-master-sim (docs/mesos-master-sim.md).
 *
 * One cluster state (agents, frameworks, offers, tasks) served on one or
 * two ports: the leading master's, and optionally a standby's that answers
 * 307 to the leader until a failover (a test hook) swaps the two, the way a
 * Mesos HA pair behaves for a scheduler. Everything runs on the caller's
 * libuv loop; no global state.
 *
 * Files: msim_master.c (state, allocation, task lifecycle, status update
 * retries, timers), msim_sched.c (the v1 scheduler API), msim_operator.c
 * (the operator API and the test hooks), msim_http.c (HTTP/1.1). */
#ifndef PELOTON_MESOS_MSIM_H
#define PELOTON_MESOS_MSIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "mesos_json.h"
#include "msim_http.h"
#include "strmap.h"

#define MSIM_MAX_ATTRS 8

/* Every number that matters, with mesos-master-sim's flags naming them. */
struct msim_config {
    const char *addr;        /* 127.0.0.1 */
    int port, standby_port;  /* standby_port < 0: none; 0: a free port */
    int agents;              /* --agents */
    struct mesos_scalars agent_res; /* --agent-cpus, --agent-mem (MB), --agent-disk (MB), --agent-gpus */
    const char *attributes;  /* --agent-attributes "k=v,k=v" for every agent */
    int zones;               /* --zones N: attribute zone=zone-<i % N> */
    const char *hostname_prefix;
    double heartbeat_s;      /* --heartbeat-seconds (the master's 15) */
    unsigned allocation_ms;  /* --allocation-interval-ms (the master's 1000) */
    unsigned staging_ms, starting_ms, kill_ms; /* task progress delays */
    double task_run_s;       /* --task-run-seconds: < 0 forever (per task: label or env MESOS_SIM_RUN_SECONDS) */
    unsigned update_retry_ms, update_retry_max_ms; /* the agent's status update retry: 10 s doubling to 10 min */
    int max_tasks, max_frameworks;
    size_t chunk_bytes;      /* --chunk-bytes: 0 one chunk per event, else events re-cut into chunks of N bytes */
    unsigned conn_idle_ms;   /* --conn-idle-ms: an idle kept-alive connection is closed after this (0: 120000) */
    size_t max_body;
    const char *master_id;   /* prefix of every ID; random when NULL */
    bool quiet;
};
void msim_config_defaults(struct msim_config *c);

enum msim_agent_state { MSIM_AGENT_ACTIVE, MSIM_AGENT_UNREACHABLE, MSIM_AGENT_GONE };
enum msim_drain { MSIM_DRAIN_NONE, MSIM_DRAIN_DRAINING, MSIM_DRAIN_DRAINED };

struct msim_task;
struct msim_framework;

struct msim_offer {
    char id[64];
    struct msim_framework *fw;
    struct msim_agent *agent;
    struct mesos_scalars res;
};

struct msim_agent {
    int index;
    char id[64], hostname[64];
    struct mesos_scalars total, used;  /* used: by tasks not yet terminal */
    struct mesos_attr attrs[MSIM_MAX_ATTRS];
    int nattrs;
    char attr_buf[512];
    enum msim_agent_state state;
    enum msim_drain drain;
    bool deactivated;
    double registered_time;
    struct msim_offer *offer;      /* at most one outstanding offer */
    struct msim_task *tasks;       /* doubly linked through agent_next */
    int ntasks;
};

enum msim_step { MSIM_STEP_NONE, MSIM_STEP_STARTING, MSIM_STEP_RUNNING, MSIM_STEP_FINISH, MSIM_STEP_KILLED };

struct msim_update {
    struct msim_update *next;
    struct mesos_task_status st; /* st.uuid set; strings point into the task */
    char message[128], reason[48];
};

#define MSIM_WHEEL 1024

struct msim_task {
    char *id, *name;
    struct msim_framework *fw;
    struct msim_agent *agent;      /* NULL once removed from an agent */
    struct msim_task *agent_prev, *agent_next;
    struct msim_task *busy_prev, *busy_next;
    bool busy;
    struct msim_task *wprev, *wnext; /* in the wheel's slot of wtick (when filed) */
    uint64_t wtick;
    bool filed;
    struct mesos_scalars res;
    json_t *info;                  /* the TaskInfo, kept for GET_TASKS */
    enum mesos_task_state state;   /* the latest state */
    bool resources_released;
    double run_s;                  /* < 0: forever */
    bool fail;                     /* finishes as TASK_FAILED */
    enum msim_step step;
    uint64_t step_at;              /* loop ms */
    struct msim_update *uq, *uq_tail; /* updates not yet acknowledged; uq is the one sent */
    uint64_t retry_at;
    unsigned retry_ms;
    unsigned sends;                /* times uq was sent */
};

struct msim_framework {
    struct msim *m;
    char id[80];
    json_t *info;                  /* the last FrameworkInfo */
    struct mhttp_conn *stream;     /* NULL when disconnected */
    char stream_id[40];
    bool suppressed, partition_aware, killing_state;
    double failover_timeout;
    uint64_t disconnected_at, next_heartbeat;
    uint64_t stall_until;          /* /sim/stall: events to stall_stream dropped until then (loop ms) */
    struct mhttp_conn *stall_stream;
    double registered_time;
    uint64_t *refuse_until;        /* per agent index, loop ms */
    struct strmap tasks;           /* id -> struct msim_task */
    char *pend;                    /* --chunk-bytes: framed events not yet sent */
    size_t plen, pcap;
};

struct msim_completed {
    char task_id[MESOS_ID_MAX + 1], fw_id[80], agent_id[64];
    enum mesos_task_state state;
};
#define MSIM_COMPLETED_KEEP 1000
#define MSIM_REMOVED_KEEP 10000 /* torn-down framework ids refused on SUBSCRIBE */

struct msim_stats {
    uint64_t offers_sent, offers_declined, offers_rescinded, tasks_launched, updates_sent, update_resends, acks,
        heartbeats, calls, bad_calls;
    uint64_t revives;
    uint64_t acks_ignored;       /* acknowledgements with no pending update of that uuid (a task's or none) */
    uint64_t running_acks;       /* acknowledgements of TASK_RUNNING updates (benchmarks time launches by them) */
    double last_running_ack;     /* wall seconds of the latest one */
};

struct msim {
    uv_loop_t *loop;
    struct msim_config cfg;
    char master_id[40];
    struct mhttp_server *http[2];
    int leader;                    /* index of the listener that leads */
    uv_timer_t tick;
    uv_check_t flush;
    struct msim_agent *agents;
    int nagents;
    struct strmap agent_by_id;
    struct msim_framework **fws;
    int nfws;
    struct strmap removed_fws;     /* ids of torn-down frameworks */
    struct strmap offers;          /* id -> struct msim_offer */
    uint64_t offer_seq, fw_seq, uuid_seq;
    uint64_t next_alloc, alloc_round;
    struct msim_task *busy;
    /* When busy tasks are next due (a step, or a resend): a wheel of
     * MSIM_WHEEL slots of one tick each; the tick looks only at the slots
     * that came due (their tasks, not every busy task) */
    struct msim_task *wheel[MSIM_WHEEL];
    uint64_t wtick;                /* the next tick the wheel looks at */
    int ntasks;
    int pending_tasks;             /* tasks with updates not yet acknowledged (uq not empty) */
    struct msim_completed *completed; /* ring */
    int ncompleted, completed_at;
    struct msim_stats stats;
    bool stopping;
};

/* Builds the cluster and listens. 0, or a negative errno with err set. */
int msim_start(uv_loop_t *loop, const struct msim_config *cfg, struct msim **out, char *err, size_t errlen);
int msim_port(const struct msim *m, int which);
/* Closes the listeners and streams; the loop then runs dry; msim_free after. */
void msim_stop(struct msim *m);
void msim_free(struct msim *m);

/* ---- shared between the msim files ---- */
void msim_log(struct msim *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double msim_wall(void);
/* Writes "Mesos-Stream-Id: <new uuid>\r\n" into out (at least 64 bytes); returns the id's offset in it. */
int msim_new_stream_id(struct msim *m, char *out);
void msim_reply_text(const struct mhttp_req *req, int status, const char *text);
void msim_reply_json(const struct mhttp_req *req, int status, json_t *v); /* steals v */
/* Whether the request may be served here; answers 307 otherwise. */
bool msim_is_leader(struct msim *m, const struct mhttp_req *req);

/* msim_master.c */
struct msim_framework *msim_fw_find(struct msim *m, const char *id);
struct msim_framework *msim_fw_add(struct msim *m, const char *id);
void msim_fw_connect(struct msim *m, struct msim_framework *fw, const struct mhttp_req *req, const json_t *info);
void msim_fw_disconnect(struct msim *m, struct msim_framework *fw, bool abort_stream);
void msim_fw_remove(struct msim *m, struct msim_framework *fw);
void msim_send(struct msim *m, struct msim_framework *fw, json_t *event); /* steals event */
void msim_offer_release(struct msim *m, struct msim_offer *o, bool rescind, double refuse_s);
struct msim_task *msim_task_launch(struct msim *m, struct msim_framework *fw, struct msim_agent *a,
                                   const struct mesos_task_decl *d);
void msim_task_kill(struct msim *m, struct msim_task *t);
void msim_task_ack(struct msim *m, struct msim_task *t, const unsigned char uuid[MESOS_UUID_LEN]);
/* A master-generated update (no uuid, not retried). */
void msim_master_update(struct msim *m, struct msim_framework *fw, const char *task_id, const char *agent_id,
                        enum mesos_task_state state, const char *reason, const char *message);
void msim_reconcile(struct msim *m, struct msim_framework *fw, const json_t *tasks);
void msim_agent_unreachable(struct msim *m, struct msim_agent *a);
void msim_agent_gone(struct msim *m, struct msim_agent *a);
void msim_agent_drain(struct msim *m, struct msim_agent *a);
void msim_failover(struct msim *m);
json_t *msim_task_json(const struct msim_task *t);

/* msim_sched.c / msim_operator.c */
void msim_scheduler_call(struct msim *m, const struct mhttp_req *req);
void msim_operator_call(struct msim *m, const struct mhttp_req *req);
void msim_hook(struct msim *m, const struct mhttp_req *req);

#endif
