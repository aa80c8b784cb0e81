/* What the resource manager's files share (resmgr.c: informers, gangs,
 * admission rounds, the lease; resmgr_preempt.c: the preemption pass;
 * resmgr_pools.c: pool status and pool deletion). Not an interface: ctl.h
 * is. Everything here runs on the controllers' loop. */
#ifndef PELOTON_CTL_RESMGR_INT_H
#define PELOTON_CTL_RESMGR_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "admit.h"
#include "cluster.h"
#include "ctl.h"
#include "ctl_metrics.h"
#include "preempt.h"
#include "strmap.h"

#define RM_COMPONENT "peloton-resmgr"
#define RM_ROUND_CAP 4096
#define RM_GANG_MAX 100000

enum rg_state { RG_WAIT = 0, RG_QUEUED, RG_ADMITTED };

struct rm_gang {
    char *key, *ns, *label; /* label: the gang label, NULL for a pod alone */
    struct gang g;
    enum rg_state st;
    char *pool;             /* the leaf's name while queued or admitted */
    uint64_t held;          /* strmap_hash of what its members were told of why it cannot queue, 0: nothing */
    uint32_t said;          /* the admission wait its members were told (wait_code), 0: none */
    uint64_t queued_ns;     /* metrics_now_ns when queued, for the admission wait */
    bool queue_timed;       /* its first queueing was timed (created -> queued) */
    int64_t queued_ms;      /* wall clock of its first queueing (the pods' peloton.io/queued-at) */
    uint64_t readied_at;    /* loop time it was last put on the ready queue (admitted or readied again) */
};

/* A gang waiting for its members to exist (none of them bound yet). */
struct rm_incomplete {
    uint64_t since_ms; /* loop time its member count last changed */
    uint32_t have;     /* its members that exist (unbound, eligible) */
    uint32_t size;     /* its gang-size */
    bool told;         /* its members were told of this count */
};

struct resmgr {
    struct ctl_env env;
    struct resmgr_options o;
    struct cluster *cm;
    struct kc_informer *pods, *nodes, *pools, *nss;
    struct strmap gangs, dirty, evicting;
    uv_timer_t round_t, preempt_t, status_t;
    int timers_open;
    struct ctl_lease *lease; /* the leader's term (ctl_lease.h) */
    bool leader, recovered;
    long long epoch;
    unsigned db_gen; /* the Redis connection its state was built on (ctl_db.gen) */
    uint64_t lost_check_ms; /* loop time of the last look for admitted gangs no queue holds */
    uint64_t lost_postponed_ms; /* loop time the put-off check was last logged */
    char id[96];
    struct respool_tree *last_tree;
    struct preempt_state ps;
    json_t *sent; /* pool name -> last status written */
    json_t *terminating; /* pool name -> its object, for pools marked for deletion that keep our finalizer */
    /* Running gangs, counted as pods change (no walk of the pods): */
    json_t *holders;  /* pod key -> "pool\tgang key": pods that hold work (bound or admitted, not ended) */
    json_t *held_n;   /* "pool\tgang key" -> its members in holders */
    json_t *running;  /* pool name -> gangs in held_n for it */
    bool retrack;     /* a namespace changed: pods' pools may resolve anew, count them all again */
    json_t *told_waiting; /* pool name -> true: its Event said what its deletion waits for */
    uint64_t admitted_total;
    uint64_t busy_ms; /* when a round last found gangs to look at */
    bool readied;     /* this round queued gangs ready */
    struct ctl_recorder *rec;
    struct rm_gang **fresh; /* gangs queued this round (valid until its end) */
    size_t nfresh, capfresh;
    char **aged;            /* keys of gangs the last round queued and left waiting: told at this one's end */
    size_t naged, capaged;
    struct strmap incomplete; /* gang key -> struct rm_incomplete: gangs whose members do not all exist */
    struct rm_metrics m;
};

/* The gang's live members (the pods of the gang label in its namespace, or
 * the single pod its key names) into out[0..cap); returns how many there are
 * (may exceed cap). *ns_out points into nsbuf, *label_out into key. */
size_t rm_gang_members(struct resmgr *r, const char *key, struct cm_pod **out, size_t cap, const char **ns_out,
                       const char **label_out, char *nsbuf, size_t nslen);

/* A gang's key: "ns/gang" for a gang label, else "ns/pod:name". */
void rm_gang_key(const char *ns, const char *name, const char *gang, char *out, size_t len);

/* Recounts pod key's holding of work after the model changed it (p: the
 * model's pod, NULL when gone): keeps the running gangs per pool. */
void rm_track_pod(struct resmgr *r, const char *key, const struct cm_pod *p);

/* Timer callbacks (data: the resmgr), each acting only while leader. */
void rm_on_preempt(uv_timer_t *tm); /* plans preemption and evicts the victims (resmgr_preempt.c) */
void rm_on_status(uv_timer_t *tm);  /* writes pool status, releases empty pools marked for deletion (resmgr_pools.c) */

#endif
