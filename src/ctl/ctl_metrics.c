/* The controller roles' metrics: ctl_metrics.h. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "admit.h"
#include "ctl_metrics.h"
#include "host.h"
#include "respool.h"

/* Latency bounds for the stages of a pod's way, seconds. */
static const double stage_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define NSTAGE (int)(sizeof stage_bounds / sizeof stage_bounds[0])

int64_t ctl_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ctl_format_ms(int64_t ms, char out[32]) {
    out[0] = 0;
    if (ms <= 0) return;
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

void rm_metrics_init(struct rm_metrics *m, struct metrics *reg) {
    static const char *const pool_reason[] = {"pool", "reason"}, *const pool[] = {"pool"},
                             *const pool_kind[] = {"pool", "kind"};
    *m = (struct rm_metrics){0};
    if (!reg) return;
    m->decisions = metrics_counter(reg, "peloton_resmgr_admission_decisions_total",
                                   "Admission decisions about gangs, by leaf pool and reason: admitted, or the rule "
                                   "a waiting gang failed (counted when that rule changes).",
                                   2, pool_reason);
    m->preemptions = metrics_counter(reg, "peloton_resmgr_preemptions_total",
                                     "Pods preempted, by their pool and the rule (inter-pool over entitlement, "
                                     "intra-pool priority).",
                                     2, pool_reason);
    m->queued = metrics_gauge(reg, "peloton_resmgr_queued_gangs", "Gangs waiting for admission, by leaf pool.", 1,
                              pool);
    m->queueing = metrics_histogram(reg, "peloton_resmgr_queueing_seconds",
                                    "Stage created -> queued: from the first member of a gang reaching this "
                                    "resource manager (its pod informer) to the gang's first queueing on its pool "
                                    "(a gang waits here for its members).",
                                    0, NULL, stage_bounds, NSTAGE);
    m->admit_wait = metrics_histogram(reg, "peloton_resmgr_admission_wait_seconds",
                                      "Stage queued -> admitted: from a gang's queueing on its pool (all members "
                                      "present) to its admission, as this resource manager saw it.",
                                      0, NULL, stage_bounds, NSTAGE);
    m->entitlement = metrics_gauge(reg, "peloton_pool_entitlement",
                                   "A pool's entitlement per kind (cpu and gpu in cores, memory and disk in bytes).",
                                   2, pool_kind);
    m->allocation = metrics_gauge(reg, "peloton_pool_allocation",
                                  "A pool's admitted work per kind (cores, bytes), preemptible and not, revocable too.",
                                  2, pool_kind);
    m->demand = metrics_gauge(reg, "peloton_pool_demand", "A pool's demand per kind (cores, bytes).", 2, pool_kind);
    m->reservation = metrics_gauge(reg, "peloton_pool_reservation",
                                   "A pool's configured reservation per kind (cores, bytes).", 2, pool_kind);
    static const char *const host_labels[] = {"state", "backend"};
    m->hosts = metrics_gauge(reg, "peloton_hosts",
                             "Hosts (Nodes) by state: ready (takes work), cordoned (unschedulable), draining, "
                             "not_ready; and backend: kubelet, mesos.",
                             2, host_labels);
}

static const char *check_label(int c) {
    switch (c) {
    case ADMIT_CHECK_ENTITLEMENT: return "entitlement";
    case ADMIT_CHECK_SLACK: return "slack_entitlement";
    case ADMIT_CHECK_CONTROLLER: return "controller_limit";
    case ADMIT_CHECK_RESERVATION: return "reservation";
    case ADMIT_CHECK_DELETING: return "deletion";
    default: return "queued";
    }
}

void rm_metrics_decision(struct rm_metrics *m, const char *pool, int admit_check, bool admitted) {
    if (!m->decisions) return;
    const char *v[2] = {pool, admitted ? "admitted" : check_label(admit_check)};
    metrics_inc(metrics_series(m->decisions, v));
}

/* Base units as Prometheus wants them: millicores to cores. */
static double base(enum res_kind k, int64_t v) {
    return (k == RES_CPU || k == RES_GPU) ? (double)v / 1000.0 : (double)v;
}

static void hosts_by_state(struct rm_metrics *m, const struct host_fleet *f) {
    static const char *const states[] = {"ready", "cordoned", "draining", "not_ready"};
    static const char *const backends[] = {"kubelet", "mesos"};
    uint32_t n[4][2] = {{0}};
    for (uint32_t i = 0; f && i < f->nhosts; i++) {
        const struct host *h = &f->hosts[i];
        int s = (h->flags & HOST_NOT_READY)       ? 3
                : (h->flags & HOST_DRAINING)      ? 2
                : (h->flags & HOST_UNSCHEDULABLE) ? 1
                                                  : 0;
        n[s][h->backend == HOST_MESOS]++;
    }
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < 2; b++) {
            const char *v[2] = {states[s], backends[b]};
            metrics_set(metrics_series(m->hosts, v), n[s][b]);
        }
}

/* A pool gone from the tree takes its gauges with it: a deleted pool must
 * not keep reporting its last allocation. */
static void drop_pool(struct rm_metrics *m, const char *pool) {
    metrics_series_drop(m->queued, &pool);
    for (int k = 0; k < RES_NKINDS; k++) {
        const char *v[2] = {pool, res_kind_name((enum res_kind)k)};
        metrics_series_drop(m->entitlement, v);
        metrics_series_drop(m->allocation, v);
        metrics_series_drop(m->demand, v);
        metrics_series_drop(m->reservation, v);
    }
}

void rm_metrics_free(struct rm_metrics *m) { strmap_free(&m->pools); }

void rm_metrics_pools(struct rm_metrics *m, struct respool_tree *t, const struct host_fleet *fleet) {
    if (!m->entitlement || !t) return;
    hosts_by_state(m, fleet);
    m->round++;
    size_t n;
    struct respool *const *all = respool_preorder(t, &n);
    for (size_t i = 0; all && i < n; i++) {
        const struct respool *p = all[i];
        if (!p->parent) continue;
        struct resvec alloc = usage_nonslack(&p->alloc);
        alloc = resvec_add(alloc, p->alloc.c[UC_REVOCABLE]);
        for (int k = 0; k < RES_NKINDS; k++) {
            const char *v[2] = {p->name, res_kind_name((enum res_kind)k)};
            metrics_set(metrics_series(m->entitlement, v), base((enum res_kind)k, p->entitlement.v[k]));
            metrics_set(metrics_series(m->allocation, v), base((enum res_kind)k, alloc.v[k]));
            metrics_set(metrics_series(m->demand, v), base((enum res_kind)k, p->demand.v[k]));
            metrics_set(metrics_series(m->reservation, v), base((enum res_kind)k, p->cfg.res[k].reservation));
        }
        if (respool_is_leaf(p)) metrics_set(metrics_series1(m->queued, p->name), (double)admit_queued(p, -1));
        else metrics_series_drop(m->queued, (const char *const *)&p->name); /* a leaf that got children */
        strmap_put(&m->pools, p->name, (void *)(uintptr_t)m->round, NULL);
    }
    size_t pos = 0;
    const char *name;
    void *seen;
    while (strmap_next(&m->pools, &pos, &name, &seen))
        if ((uintptr_t)seen != m->round) {
            drop_pool(m, name);
            strmap_del(&m->pools, name);
        }
}

void pl_metrics_init(struct pl_metrics *m, struct metrics *reg) {
    static const char *const result[] = {"result"};
    static const double bind_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
    *m = (struct pl_metrics){0};
    if (!reg) return;
    m->placements = metrics_counter(reg, "peloton_placement_gangs_total",
                                    "Gangs placement tried, by result: placed, unplaceable (sent to the retry "
                                    "queue), claim_conflict (engines run active-active: another engine's claims "
                                    "took the room) or claim_failed (the claim could not be made).",
                                    1, result);
    m->bindings = metrics_counter(reg, "peloton_placement_bindings_total",
                                  "Bindings posted, by result: bound, conflict (409: bound already), gone (404), "
                                  "fenced (409: the engine's term has ended, a newer one has begun), "
                                  "failed (refused: retried), unknown (no answer or a 5xx: the pod is read).",
                                  1, result);
    m->place_wait = metrics_histogram(reg, "peloton_placement_wait_seconds",
                                      "Stage admitted -> placed: from a gang's admission (the wall clock written in "
                                      "its record) to placement's decision, retries included.",
                                      0, NULL, stage_bounds, NSTAGE);
    m->run_wait = metrics_histogram(reg, "peloton_placement_bound_to_running_seconds",
                                    "Stage bound -> Running: from the API server's answer to a Binding this engine "
                                    "posted to the pod's first event in phase Running (its Kubelet's start and "
                                    "status write, and the watch's delivery).",
                                    0, NULL, stage_bounds, NSTAGE);
    m->bind_duration = metrics_histogram(reg, "peloton_placement_binding_duration_seconds",
                                         "From placement's decision to the API server's answer to the Binding.", 0,
                                         NULL, bind_bounds, (int)(sizeof bind_bounds / sizeof bind_bounds[0]));
    m->catchups = metrics_counter(reg, "peloton_placement_catchups_total",
                                  "Terms of a leased engine that began placing, by how its pod and node informers "
                                  "reached the store's resourceVersion read at the term's start: caught_up (an event, "
                                  "a bookmark or their first list), relisted (not within a second: "
                                  "listed again).",
                                  1, result);
    m->catchup_wait = metrics_histogram(reg, "peloton_placement_catchup_seconds",
                                        "From a leased engine's term start to its first placement round: the "
                                        "store's resourceVersion read, and the informers at or past it.",
                                        0, NULL, bind_bounds, (int)(sizeof bind_bounds / sizeof bind_bounds[0]));
}
