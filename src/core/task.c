/* Task state table and transitions (see task.h, docs/lifecycle.md). */
#include "task.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const g_state_names[TASK_NSTATES] = {
    [TASK_UNKNOWN] = "UNKNOWN",       [TASK_INITIALIZED] = "INITIALIZED",
    [TASK_PENDING] = "PENDING",       [TASK_READY] = "READY",
    [TASK_PLACING] = "PLACING",       [TASK_PLACED] = "PLACED",
    [TASK_LAUNCHING] = "LAUNCHING",   [TASK_STARTING] = "STARTING",
    [TASK_RUNNING] = "RUNNING",       [TASK_SUCCEEDED] = "SUCCEEDED",
    [TASK_FAILED] = "FAILED",         [TASK_LOST] = "LOST",
    [TASK_PREEMPTING] = "PREEMPTING", [TASK_KILLING] = "KILLING",
    [TASK_KILLED] = "KILLED",         [TASK_LAUNCHED] = "LAUNCHED",
    [TASK_DELETED] = "DELETED",       [TASK_RESERVED] = "RESERVED",
};

#define R TASK_BY_RESMGR
#define J TASK_BY_JOBMGR
#define H TASK_BY_HOST

/* The one table. Order: by source state, then target. */
static const struct task_edge g_edges[] = {
    /* resmgr (notes/peloton.md "States") */
    {TASK_INITIALIZED, TASK_PENDING, R, "enqueued in its pool's pending queue"},
    {TASK_INITIALIZED, TASK_KILLED, J, "killed before it was enqueued"},
    {TASK_PENDING, TASK_READY, R, "gang admitted within entitlement"},
    {TASK_PENDING, TASK_KILLED, R, "killed while pending"},
    {TASK_READY, TASK_PLACING, R, "gang handed to a placement engine"},
    {TASK_READY, TASK_PENDING, R, "preempted before placement: admission undone"},
    {TASK_READY, TASK_KILLED, R, "killed while ready"},
    {TASK_PLACING, TASK_PLACED, R, "placement chose a host"},
    {TASK_PLACING, TASK_READY, R, "placement timeout or no host found: back to the ready queue"},
    {TASK_PLACING, TASK_PENDING, R, "preempted while placing: admission undone"},
    {TASK_PLACING, TASK_KILLED, R, "killed while placing"},
    {TASK_PLACED, TASK_LAUNCHING, R, "launch sent to the host manager"},
    {TASK_PLACED, TASK_KILLED, R, "killed after placement, before launch"},
    {TASK_LAUNCHING, TASK_LAUNCHED, J, "host manager accepted the launch (offer accepted / pod bound)"},
    {TASK_LAUNCHING, TASK_RUNNING, H, "host reports running before the launch ack"},
    {TASK_LAUNCHING, TASK_READY, R, "launch timeout or launch failure: placed again"},
    {TASK_LAUNCHING, TASK_KILLED, R, "killed while launching"},
    /* job manager / host status after the launch */
    {TASK_STARTING, TASK_RUNNING, H, "host reports running"},
    {TASK_STARTING, TASK_SUCCEEDED, H, "exited 0 before reporting running"},
    {TASK_STARTING, TASK_FAILED, H, "exited non-zero while starting"},
    {TASK_STARTING, TASK_LOST, H, "host or agent lost while starting"},
    {TASK_STARTING, TASK_KILLING, J, "kill requested while starting"},
    {TASK_STARTING, TASK_KILLED, H, "killed while starting"},
    {TASK_RUNNING, TASK_SUCCEEDED, H, "exited 0"},
    {TASK_RUNNING, TASK_FAILED, H, "exited non-zero"},
    {TASK_RUNNING, TASK_LOST, H, "host or agent lost"},
    {TASK_RUNNING, TASK_PREEMPTING, R, "chosen as a preemption victim"},
    {TASK_RUNNING, TASK_KILLING, J, "kill requested (stop, update, scale down)"},
    {TASK_RUNNING, TASK_KILLED, H, "killed on the host without a request"},
    {TASK_SUCCEEDED, TASK_INITIALIZED, J, "restart: new run of the same instance"},
    {TASK_SUCCEEDED, TASK_DELETED, J, "instance removed"},
    {TASK_FAILED, TASK_INITIALIZED, J, "restart: new run of the same instance"},
    {TASK_FAILED, TASK_DELETED, J, "instance removed"},
    {TASK_LOST, TASK_INITIALIZED, J, "restart: new run of the same instance"},
    {TASK_LOST, TASK_DELETED, J, "instance removed"},
    {TASK_PREEMPTING, TASK_KILLING, J, "explicit kill supersedes preemption (no requeue)"},
    {TASK_PREEMPTING, TASK_KILLED, H, "preemption kill completed"},
    {TASK_PREEMPTING, TASK_LOST, H, "host lost during the preemption kill"},
    {TASK_KILLING, TASK_KILLED, H, "kill completed"},
    {TASK_KILLING, TASK_LOST, H, "host lost during the kill"},
    {TASK_KILLED, TASK_INITIALIZED, J, "restart: new run of the same instance"},
    {TASK_KILLED, TASK_DELETED, J, "instance removed"},
    {TASK_LAUNCHED, TASK_STARTING, H, "host reports starting"},
    {TASK_LAUNCHED, TASK_RUNNING, H, "host reports running"},
    {TASK_LAUNCHED, TASK_SUCCEEDED, H, "exited 0 before reporting running"},
    {TASK_LAUNCHED, TASK_FAILED, H, "launch failed on the host or exited non-zero"},
    {TASK_LAUNCHED, TASK_LOST, H, "host or agent lost after launch"},
    {TASK_LAUNCHED, TASK_KILLING, J, "kill requested after launch"},
    {TASK_LAUNCHED, TASK_KILLED, H, "killed after launch"},
};

#undef R
#undef J
#undef H

const char *task_state_name(enum task_state s) {
    if ((int)s < 0 || s >= TASK_NSTATES) return "INVALID";
    return g_state_names[s];
}

int task_state_parse(const char *name) {
    if (!name) return -EINVAL;
    for (int s = 0; s < TASK_NSTATES; s++)
        if (strcmp(g_state_names[s], name) == 0) return s;
    return -EINVAL;
}

bool task_state_terminal(enum task_state s) {
    return s == TASK_SUCCEEDED || s == TASK_FAILED || s == TASK_LOST || s == TASK_KILLED ||
           s == TASK_DELETED;
}

bool task_state_on_host(enum task_state s) {
    switch (s) {
    case TASK_PLACED: case TASK_LAUNCHING: case TASK_LAUNCHED: case TASK_STARTING:
    case TASK_RUNNING: case TASK_PREEMPTING: case TASK_KILLING:
        return true;
    default:
        return false;
    }
}

void task_config_default(struct task_config *cfg) {
    cfg->placing_timeout_ms = 10 * 60 * 1000;
    cfg->launching_timeout_ms = 20 * 60 * 1000;
    cfg->backoff_initial_ms = 10 * 1000;
    cfg->backoff_max_ms = 5 * 60 * 1000;
    cfg->backoff_reset_ms = 10 * 60 * 1000;
}

int64_t task_restart_at(const struct task *t, const struct task_config *cfg, uint32_t *next_loop) {
    struct task_config def;
    if (!cfg) {
        task_config_default(&def);
        cfg = &def;
    }
    if (t->desired_version != t->config_version) {
        *next_loop = 0;
        return t->state_since_ms;
    }
    if (t->state != TASK_FAILED && t->state != TASK_SUCCEEDED) {
        *next_loop = t->crash_loop;
        return t->state_since_ms;
    }
    if (t->running_since_ms > 0 && t->state_since_ms - t->running_since_ms >= cfg->backoff_reset_ms) {
        *next_loop = 1;
        return t->state_since_ms;
    }
    uint32_t k = t->crash_loop;
    *next_loop = k < UINT32_MAX ? k + 1 : k;
    if (k == 0 || cfg->backoff_initial_ms <= 0) return t->state_since_ms;
    int64_t d = cfg->backoff_initial_ms;
    for (uint32_t i = 1; i < k && d < cfg->backoff_max_ms; i++) d *= 2;
    if (d > cfg->backoff_max_ms) d = cfg->backoff_max_ms;
    return t->state_since_ms + d;
}

const struct task_edge *task_edges(size_t *n) {
    *n = sizeof g_edges / sizeof g_edges[0];
    return g_edges;
}

const struct task_edge *task_edge_find(enum task_state from, enum task_state to) {
    for (size_t i = 0; i < sizeof g_edges / sizeof g_edges[0]; i++)
        if (g_edges[i].from == from && g_edges[i].to == to) return &g_edges[i];
    return NULL;
}

static void set_err(char *err, size_t errlen, const char *fmt, const char *a, const char *b) {
    if (err && errlen) snprintf(err, errlen, fmt, a, b);
}

void task_init(struct task *t, uint32_t instance, uint32_t version, int64_t now_ms) {
    memset(t, 0, sizeof *t);
    t->instance = instance;
    t->run = 1;
    t->state = TASK_INITIALIZED;
    t->state_since_ms = now_ms;
    t->config_version = version;
    t->desired_version = version;
}

int task_transition(struct task *t, enum task_state to, const char *host, int64_t now_ms, char *err,
                    size_t errlen) {
    if (t->state == to) {
        set_err(err, errlen, "task already %s (transition %s -> itself refused)", task_state_name(to),
                task_state_name(to));
        return -EALREADY;
    }
    if (!task_edge_find(t->state, to)) {
        set_err(err, errlen, "illegal task transition %s -> %s", task_state_name(t->state),
                task_state_name(to));
        return -EINVAL;
    }
    if (to == TASK_INITIALIZED) { /* a restart: the next run of this instance */
        if (t->state == TASK_LOST) t->lost++;
        if (t->host) t->last_host = t->host;
        t->host = NULL;
        t->run++;
        t->config_version = t->desired_version;
        t->preempted = false;
        t->running_since_ms = 0;
    }
    t->state = to;
    t->state_since_ms = now_ms;
    if (to == TASK_RUNNING) t->running_since_ms = now_ms;
    if (to == TASK_PREEMPTING) t->preempted = true;
    if (to == TASK_PLACED && host) {
        t->host = host;
        t->last_host = host;
    }
    if (to == TASK_READY || to == TASK_PENDING) t->host = NULL; /* placed again from scratch */
    return 0;
}

int64_t task_deadline(const struct task *t, const struct task_config *cfg) {
    int64_t timeout = 0;
    if (t->state == TASK_PLACING) timeout = cfg->placing_timeout_ms;
    else if (t->state == TASK_LAUNCHING) timeout = cfg->launching_timeout_ms;
    if (timeout <= 0) return INT64_MAX;
    int64_t d;
    if (__builtin_add_overflow(t->state_since_ms, timeout, &d)) return INT64_MAX;
    return d;
}

int task_check_timeout(struct task *t, const struct task_config *cfg, int64_t now_ms) {
    int64_t d = task_deadline(t, cfg);
    if (d == INT64_MAX || now_ms < d) return 0;
    int rc = task_transition(t, TASK_READY, NULL, now_ms, NULL, 0);
    return rc == 0 ? 1 : rc;
}

int task_restart(struct task *t, bool count_failure, int64_t now_ms, char *err, size_t errlen) {
    if (t->state == TASK_INITIALIZED || !task_edge_find(t->state, TASK_INITIALIZED)) {
        set_err(err, errlen, "cannot restart a task in %s (illegal task transition %s -> INITIALIZED)",
                task_state_name(t->state), task_state_name(t->state));
        return -EINVAL;
    }
    int rc = task_transition(t, TASK_INITIALIZED, NULL, now_ms, err, errlen);
    if (rc == 0 && count_failure) t->failures++;
    return rc;
}
