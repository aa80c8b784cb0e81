/* The controller roles' metrics (docs/metrics.md): families each role
 * registers on its own thread in the process's registry (ctl_env.metrics),
 * and the few updates that are more than one increment. Without a registry
 * every family is NULL and every update does nothing. */
#ifndef PELOTON_CTL_METRICS_H
#define PELOTON_CTL_METRICS_H

#include "metrics.h"
#include "strmap.h"

struct respool_tree;
struct host_fleet;

struct rm_metrics {
    struct metrics_family *decisions, *preemptions, *queued, *queueing, *admit_wait;
    struct metrics_family *entitlement, *allocation, *demand, *reservation;
    struct metrics_family *hosts;
    struct strmap pools; /* pool name -> the status round it was last written in (its gauges go with it) */
    uint64_t round;
};

struct pl_metrics {
    struct metrics_family *placements, *bindings, *bind_duration, *place_wait, *run_wait, *catchups, *catchup_wait;
};

void rm_metrics_init(struct rm_metrics *m, struct metrics *reg);
/* An admission decision about a gang of pool: "admitted", or why it waits
 * (an admit_check: entitlement, slack_entitlement, controller_limit,
 * reservation, deletion, queued). */
void rm_metrics_decision(struct rm_metrics *m, const char *pool, int admit_check, bool admitted);
/* Every pool's gauges from the tree (entitlement, allocation, demand and
 * reservation per kind in base units: cores, bytes; gangs queued), and the
 * hosts of the fleet by state and backend (fleet may be NULL). */
void rm_metrics_pools(struct rm_metrics *m, struct respool_tree *t, const struct host_fleet *fleet);
/* Forgets what rm_metrics_pools remembers (the registry keeps the series). */
void rm_metrics_free(struct rm_metrics *m);

void pl_metrics_init(struct pl_metrics *m, struct metrics *reg);

/* Wall-clock ms (CLOCK_REALTIME): the admission time written into a gang's
 * record, read by placement, perhaps in another process. */
int64_t ctl_now_ms(void);

/* ms (wall clock) as RFC 3339 with milliseconds, "2026-11-27T13:20:01.123Z"
 * (the pods' timeline annotations, labels.h); "" for ms <= 0. */
void ctl_format_ms(int64_t ms, char out[32]);

#endif
