#include <errno.h>

#include "job.h"
#include "task.h"
#include "test.h"
#include "update.h"

#define UMAX 40

static struct update_spec spec_batch(uint32_t batch) {
    struct update_spec s = {.batch_size = batch};
    return s;
}

/* --- a tiny world: tasks that move through the lifecycle a step at a time,
 * a job reconciler restarting what the update does not hold, and glue that
 * applies update actions as the job manager would. --- */
struct uworld {
    struct job_spec spec;
    struct task t[UMAX];
    uint32_t n;
    bool restart_pending[UMAX];
    bool bad_version[8];           /* every instance fails at these versions */
    uint32_t bad_instance_version; /* with bad_instance: one instance fails at this version */
    int bad_instance;              /* -1: none */
    const char *hostnames[UMAX];
    uint64_t seed;
    int64_t now;
    int advance_pct; /* chance a task advances one step per tick */
    int chaos_permille; /* chance a RUNNING task fails on its own per tick */
    uint32_t crash_version;   /* tasks at this version fail after running crash_after_ms */
    int64_t crash_after_ms;
};

static const char *k_hosts[] = {"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9"};

static void uw_init(struct uworld *w, enum job_type type, uint32_t n, uint64_t seed) {
    memset(w, 0, sizeof *w);
    w->spec.type = type;
    w->spec.instance_count = n;
    w->spec.config_version = 1;
    w->n = n;
    w->seed = seed;
    w->bad_instance = -1;
    w->advance_pct = 70;
    for (uint32_t i = 0; i < n; i++) {
        task_init(&w->t[i], i, 1, 0);
        w->t[i].state = TASK_RUNNING;
        w->t[i].host = w->t[i].last_host = k_hosts[i % 10];
    }
}

static bool uw_bad(const struct uworld *w, const struct task *t) {
    if (t->config_version < 8 && w->bad_version[t->config_version]) return true;
    return w->bad_instance == (int)t->instance && t->config_version == w->bad_instance_version;
}

static void uw_snapshot(const struct uworld *w, struct update_instance *snap) {
    for (uint32_t i = 0; i < w->n; i++) update_instance_of(&w->t[i], &snap[i]);
}

/* The job manager applying one update action: new desired version, kill the
 * current run if there is one, restart once it is over. */
static void uw_apply_update(struct uworld *w, const struct update_action *a) {
    struct task *t = &w->t[a->instance];
    t->desired_version = a->version;
    w->restart_pending[a->instance] = true;
    if (task_state_terminal(t->state)) return;
    if (t->state == TASK_KILLING) return;
    bool soft = t->state == TASK_RUNNING || t->state == TASK_LAUNCHED || t->state == TASK_STARTING ||
                t->state == TASK_PREEMPTING;
    CHECK_I64(task_transition(t, soft ? TASK_KILLING : TASK_KILLED, NULL, w->now, NULL, 0), 0);
}

/* One tick of the world: tasks advance, pending restarts happen, and the job
 * reconciler restarts instances the update does not hold. */
static void uw_tick(struct uworld *w, const struct update *u) {
    w->now += 1000;
    for (uint32_t i = 0; i < w->n; i++) {
        struct task *t = &w->t[i];
        t->held = u && update_holds(u, i);
        if (task_state_terminal(t->state)) {
            if (w->restart_pending[i]) {
                CHECK_I64(task_restart(t, false, w->now, NULL, 0), 0);
                w->restart_pending[i] = false;
            }
            continue;
        }
        if (t->state == TASK_RUNNING && w->crash_version && t->config_version == w->crash_version &&
            w->now - t->running_since_ms >= w->crash_after_ms) {
            CHECK_I64(task_transition(t, TASK_FAILED, NULL, w->now, NULL, 0), 0);
            continue;
        }
        if (t->state == TASK_RUNNING && w->chaos_permille &&
            test_range(&w->seed, 0, 999) < w->chaos_permille) {
            CHECK_I64(task_transition(t, TASK_FAILED, NULL, w->now, NULL, 0), 0);
            continue;
        }
        if (test_range(&w->seed, 0, 99) >= w->advance_pct) continue;
        enum task_state to = TASK_UNKNOWN;
        const char *host = NULL;
        switch (t->state) {
        case TASK_INITIALIZED: to = TASK_PENDING; break;
        case TASK_PENDING: to = TASK_READY; break;
        case TASK_READY: to = TASK_PLACING; break;
        case TASK_PLACING:
            to = TASK_PLACED;
            host = t->last_host ? t->last_host : k_hosts[i % 10];
            break;
        case TASK_PLACED: to = TASK_LAUNCHING; break;
        case TASK_LAUNCHING: to = uw_bad(w, t) ? TASK_LAUNCHED : TASK_RUNNING; break;
        case TASK_LAUNCHED: to = TASK_FAILED; break;
        case TASK_KILLING: to = TASK_KILLED; break;
        default: break;
        }
        if (to != TASK_UNKNOWN) CHECK_I64(task_transition(t, to, host, w->now, NULL, 0), 0);
    }
    /* The reconciler (restarts failed instances the update does not hold). */
    struct job_input in = {.spec = &w->spec, .tasks = w->t, .ntasks = w->n, .now_ms = w->now};
    struct job_plan p;
    REQUIRE(job_reconcile(&in, &p, NULL, 0) == 0);
    for (size_t k = 0; k < p.n; k++) {
        const struct job_action *a = &p.v[k];
        if (a->kind == JOB_ACT_RESTART) {
            struct task *t = &w->t[a->instance];
            CHECK(!t->held);
            CHECK_I64(task_restart(t, a->count_failure, w->now, NULL, 0), 0);
            t->crash_loop = a->crash_loop;
        }
        CHECK(a->kind == JOB_ACT_RESTART || a->kind == JOB_ACT_MARK);
    }
    job_plan_free(&p);
}

static uint32_t uw_not_running(const struct uworld *w) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < w->n; i++) c += w->t[i].state != TASK_RUNNING;
    return c;
}

/* Unavailable as the planner's contract defines it. */
static uint32_t uw_unavailable(const struct uworld *w, const struct update *u) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < w->n; i++)
        if (!update_gave_up(u, i) && (w->t[i].state != TASK_RUNNING || update_holds(u, i))) c++;
    return c;
}

struct urun {
    int steps;
    uint32_t starts[UMAX];
    bool saw_state[UPDATE_NSTATES];
    uint32_t max_not_running;
};

/* Drives an update until it ends (or max steps), checking the unavailability
 * bound after every planner step. */
static void uw_drive(struct uworld *w, struct update *u, struct urun *r, int max_steps) {
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    memset(r, 0, sizeof *r);
    for (r->steps = 0; r->steps < max_steps && !update_state_terminal(u->state); r->steps++) {
        uw_snapshot(w, snap);
        size_t na;
        char err[256];
        REQUIRE(update_plan(u, snap, w->n, UPDATE_CMD_NONE, w->now, acts, UMAX, &na, err, sizeof err) == 0);
        r->saw_state[u->state] = true;
        CHECK(na <= update_max_actions(u));
        bool took_down = false;
        for (size_t k = 0; k < na; k++) {
            CHECK_I64(acts[k].version, u->target);
            r->starts[acts[k].instance]++;
            took_down |= acts[k].takes_down;
            uw_apply_update(w, &acts[k]);
        }
        uint32_t unav = uw_unavailable(w, u);
        if (took_down) CHECK(unav <= u->batch);
        CHECK(u->ninflight <= u->batch);
        uint32_t nr = uw_not_running(w);
        if (nr > r->max_not_running) r->max_not_running = nr;
        uw_tick(w, u);
    }
}

TEST(update_create_validation) {
    struct update *u;
    struct update_spec s = spec_batch(1);
    char err[256];
    CHECK_I64(update_create(&u, JOB_BATCH, 3, 1, 2, &s, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "BATCH");
    CHECK(u == NULL);
    CHECK_I64(update_create(&u, JOB_DAEMON, 3, 1, 2, &s, err, sizeof err), -EINVAL);
    CHECK_I64(update_create(&u, JOB_STATELESS, 0, 1, 2, &s, err, sizeof err), -EINVAL);
    CHECK_I64(update_create(&u, JOB_STATELESS, 3, 2, 2, &s, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "same version");
    s.batch_percentage = 101;
    CHECK_I64(update_create(&u, JOB_STATELESS, 3, 1, 2, &s, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "batchPercentage 101");
    s.batch_percentage = 0;
    REQUIRE(update_create(&u, JOB_STATEFUL, 3, 1, 2, &s, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_INITIALIZED);
    CHECK_STR(update_state_name(u->state), "INITIALIZED");
    CHECK_STR(update_state_name(UPDATE_ROLLED_BACK), "ROLLED_BACK");
    update_free(u);
}

TEST(update_batch_size_and_percentage) {
    struct {
        uint32_t count, size, pct, want;
    } cases[] = {
        {5, 2, 0, 2}, {5, 0, 30, 2}, {5, 0, 100, 5}, {5, 0, 0, 5}, {5, 9, 0, 5},
        {5, 0, 1, 1}, {10, 0, 25, 3}, {10, 3, 90, 3}, {1, 0, 50, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct update *u;
        struct update_spec s = {.batch_size = cases[i].size, .batch_percentage = cases[i].pct};
        REQUIRE(update_create(&u, JOB_STATELESS, cases[i].count, 1, 2, &s, NULL, 0) == 0);
        CHECK_I64(u->batch, cases[i].want);
        CHECK_I64(update_max_actions(u), cases[i].want);
        update_free(u);
    }
}

TEST(update_first_steps_respect_batch) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 5, 1);
    struct update *u;
    struct update_spec s = spec_batch(2);
    REQUIRE(update_create(&u, JOB_STATELESS, 5, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 5, UPDATE_CMD_NONE, 0, acts, UMAX, &na, NULL, 0) == 0);
    CHECK_I64(u->state, UPDATE_ROLLING_FORWARD);
    REQUIRE(na == 2);
    CHECK_I64(acts[0].instance, 0);
    CHECK_I64(acts[1].instance, 1);
    CHECK(acts[0].takes_down);
    CHECK_I64(acts[0].version, 2);
    CHECK_I64(acts[0].attempt, 1);
    CHECK(acts[0].host_hint == NULL); /* STATELESS */
    CHECK(update_holds(u, 0) && update_holds(u, 1) && !update_holds(u, 2));
    /* The same (stale) snapshot again: nothing new, nothing double-counted. */
    REQUIRE(update_plan(u, snap, 5, UPDATE_CMD_NONE, 0, acts, UMAX, &na, NULL, 0) == 0);
    CHECK_I64(na, 0);
    CHECK_I64(u->ninflight, 2);
    CHECK_I64(u->ndone, 0);
    update_free(u);
}

TEST(update_prefers_instances_already_down) {
    struct uworld w;
    uw_init(&w, JOB_STATEFUL, 4, 1);
    w.t[3].state = TASK_FAILED;
    struct update *u;
    struct update_spec s = spec_batch(2);
    REQUIRE(update_create(&u, JOB_STATEFUL, 4, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_NONE, 0, acts, UMAX, &na, NULL, 0) == 0);
    /* 3 is down already (1 unavailable): it is updated, and only one running
     * instance may be taken down. */
    REQUIRE(na == 2);
    CHECK_I64(acts[0].instance, 3);
    CHECK(!acts[0].takes_down);
    CHECK_I64(acts[1].instance, 0);
    CHECK(acts[1].takes_down);
    CHECK_STR(acts[1].host_hint, "h0"); /* STATEFUL: same host preferred */
    CHECK_STR(acts[0].host_hint, "h3");
    update_free(u);
}

TEST(update_missing_instances_and_stale_ids) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 3, 1);
    struct update *u;
    struct update_spec s = spec_batch(1);
    REQUIRE(update_create(&u, JOB_STATELESS, 3, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    char err[256];
    uw_snapshot(&w, snap);
    snap[1] = snap[2]; /* instance 1 missing; 2 duplicated */
    CHECK_I64(update_plan(u, snap, 3, UPDATE_CMD_NONE, 0, acts, UMAX, &na, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "duplicate snapshot for instance 2");
    CHECK_I64(u->state, UPDATE_INITIALIZED);
    snap[1].instance = 99; /* ids beyond the count are ignored */
    REQUIRE(update_plan(u, snap, 3, UPDATE_CMD_NONE, 0, acts, UMAX, &na, err, sizeof err) == 0);
    REQUIRE(na == 1);
    CHECK_I64(acts[0].instance, 1); /* the missing one is down already: first */
    CHECK(!acts[0].takes_down);
    update_free(u);
}

TEST(update_start_paused_pause_resume) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 4, 3);
    struct update *u;
    struct update_spec s = spec_batch(1);
    s.start_paused = true;
    REQUIRE(update_create(&u, JOB_STATELESS, 4, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    char err[256];
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_NONE, 0, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_PAUSED);
    CHECK_I64(na, 0);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_NONE, 0, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(na, 0);
    CHECK_I64(update_plan(u, snap, 4, UPDATE_CMD_PAUSE, 0, acts, UMAX, &na, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "PAUSED");
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_RESUME, 0, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_ROLLING_FORWARD);
    CHECK_I64(na, 1);
    CHECK_I64(update_plan(u, snap, 4, UPDATE_CMD_RESUME, 0, acts, UMAX, &na, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "not PAUSED");
    uw_apply_update(&w, &acts[0]);
    /* Pause mid-way: in-flight work finishes, nothing new starts. */
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_PAUSE, 0, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_PAUSED);
    CHECK_I64(na, 0);
    for (int i = 0; i < 40; i++) {
        uw_tick(&w, u);
        uw_snapshot(&w, snap);
        REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_NONE, w.now, acts, UMAX, &na, err, sizeof err) == 0);
        CHECK_I64(na, 0);
    }
    CHECK_I64(u->ndone, 1);
    CHECK_I64(u->ninflight, 0);
    CHECK_I64(w.t[0].config_version, 2);
    CHECK_I64(w.t[1].config_version, 1);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_RESUME, w.now, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_ROLLING_FORWARD);
    REQUIRE(na == 1);
    CHECK_I64(acts[0].instance, 1);
    uw_apply_update(&w, &acts[0]);
    struct urun r;
    uw_drive(&w, u, &r, 400);
    CHECK_I64(u->state, UPDATE_SUCCEEDED);
    update_free(u);
}

TEST(update_abort) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 3, 5);
    struct update *u;
    struct update_spec s = spec_batch(2);
    REQUIRE(update_create(&u, JOB_STATELESS, 3, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    char err[256];
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 3, UPDATE_CMD_NONE, 0, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(na, 2);
    CHECK(update_holds(u, 0));
    REQUIRE(update_plan(u, snap, 3, UPDATE_CMD_ABORT, 0, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_ABORTED);
    CHECK_I64(na, 0);
    CHECK(!update_holds(u, 0));
    CHECK_I64(u->ninflight, 0);
    REQUIRE(update_plan(u, snap, 3, UPDATE_CMD_NONE, 0, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(na, 0);
    CHECK_I64(update_plan(u, snap, 3, UPDATE_CMD_ABORT, 0, acts, UMAX, &na, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "ABORTED");
    CHECK_I64(update_plan(u, snap, 3, UPDATE_CMD_PAUSE, 0, acts, UMAX, &na, err, sizeof err), -EINVAL);
    update_free(u);
    /* Abort from PAUSED too. */
    s.start_paused = true;
    REQUIRE(update_create(&u, JOB_STATELESS, 3, 1, 2, &s, NULL, 0) == 0);
    REQUIRE(update_plan(u, snap, 3, UPDATE_CMD_NONE, 0, acts, UMAX, &na, err, sizeof err) == 0);
    REQUIRE(update_plan(u, snap, 3, UPDATE_CMD_ABORT, 0, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_ABORTED);
    update_free(u);
}

/* The simulation: many worlds, batch sizes and percentages; a good template
 * always reaches SUCCEEDED with every instance RUNNING the new version, and
 * never more than `batch` instances are down at any step. */
TEST(update_sim_good_template_respects_bound) {
    uint64_t seed = 2026;
    for (int round = 0; round < 60; round++) {
        uint32_t n = (uint32_t)test_range(&seed, 1, 30);
        struct uworld w;
        uw_init(&w, round % 2 ? JOB_STATEFUL : JOB_STATELESS, n, seed + (uint64_t)round);
        w.advance_pct = (int)test_range(&seed, 30, 100);
        struct update_spec s = {0};
        if (round % 3 == 0) s.batch_percentage = (uint32_t)test_range(&seed, 1, 100);
        else s.batch_size = (uint32_t)test_range(&seed, 1, n);
        struct update *u;
        REQUIRE(update_create(&u, w.spec.type, n, 1, 2, &s, NULL, 0) == 0);
        struct urun r;
        uw_drive(&w, u, &r, 3000);
        CHECK_I64(u->state, UPDATE_SUCCEEDED);
        CHECK(r.max_not_running <= u->batch);
        CHECK(r.saw_state[UPDATE_ROLLING_FORWARD]);
        CHECK_I64(u->ndone, n);
        for (uint32_t i = 0; i < n; i++) {
            CHECK_I64(w.t[i].state, TASK_RUNNING);
            CHECK_I64(w.t[i].config_version, 2);
            CHECK_I64(r.starts[i], 1); /* each instance started exactly once */
            CHECK_I64(w.t[i].run, 2);
            if (w.spec.type == JOB_STATEFUL) CHECK_STR(w.t[i].host, k_hosts[i % 10]);
            CHECK(!update_holds(u, i));
        }
        update_free(u);
    }
}

TEST(update_failure_without_rollback_fails) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 10, 11);
    w.bad_version[2] = true;
    struct update_spec s = spec_batch(2);
    s.max_failure_instances = 2;
    s.max_instance_attempts = 3;
    struct update *u;
    REQUIRE(update_create(&u, JOB_STATELESS, 10, 1, 2, &s, NULL, 0) == 0);
    struct urun r;
    uw_drive(&w, u, &r, 2000);
    CHECK_I64(u->state, UPDATE_FAILED);
    CHECK_I64(u->nfailed, 2);
    CHECK_I64(u->ninflight, 0);
    uint32_t touched = 0;
    for (uint32_t i = 0; i < 10; i++) {
        CHECK(r.starts[i] <= 3); /* maxInstanceAttempts */
        if (r.starts[i]) touched++;
        if (update_gave_up(u, i)) CHECK_I64(r.starts[i], 3);
    }
    /* A given-up instance leaves the batch (it is charged to the failure
     * budget), so one more instance may start before the second failure. */
    CHECK(touched >= 2 && touched <= 3);
    CHECK(r.max_not_running <= 2 + 2);
    CHECK_I64(w.t[9].config_version, 1); /* untouched instances kept the old version */
    CHECK_I64(w.t[9].state, TASK_RUNNING);
    update_free(u);
}

TEST(update_failure_with_rollback_rolls_back) {
    uint64_t seed = 99;
    for (int round = 0; round < 20; round++) {
        uint32_t n = (uint32_t)test_range(&seed, 3, 20);
        struct uworld w;
        uw_init(&w, round % 2 ? JOB_STATEFUL : JOB_STATELESS, n, seed + 17u * (uint64_t)round);
        w.bad_version[2] = true;
        struct update_spec s = {.batch_size = (uint32_t)test_range(&seed, 1, 3),
                                .max_failure_instances = (uint32_t)test_range(&seed, 1, 2),
                                .max_instance_attempts = (uint32_t)test_range(&seed, 1, 3),
                                .rollback_on_failure = true};
        struct update *u;
        REQUIRE(update_create(&u, w.spec.type, n, 1, 2, &s, NULL, 0) == 0);
        struct urun r;
        uw_drive(&w, u, &r, 4000);
        CHECK_I64(u->state, UPDATE_ROLLED_BACK);
        CHECK(r.saw_state[UPDATE_ROLLING_BACKWARD]);
        /* Failures seen in the same step can overshoot the budget by the batch. */
        CHECK(u->nfailed_forward >= s.max_failure_instances);
        CHECK(u->nfailed_forward < s.max_failure_instances + u->batch);
        CHECK_I64(u->target, 1);
        CHECK(r.max_not_running <= u->batch + s.max_failure_instances);
        for (uint32_t i = 0; i < n; i++) {
            CHECK_I64(w.t[i].state, TASK_RUNNING);
            CHECK_I64(w.t[i].config_version, 1);
        }
        update_free(u);
    }
}

/* One instance fails at the new version; no early stop (maxFailureInstances
 * 0): the rest are updated, then the update ends FAILED, or rolls back. */
TEST(update_failure_under_budget_finishes_then_fails) {
    for (int rb = 0; rb < 2; rb++) {
        struct uworld w;
        uw_init(&w, JOB_STATELESS, 6, 4);
        w.bad_instance = 4;
        w.bad_instance_version = 2;
        struct update_spec s = spec_batch(2);
        s.max_instance_attempts = 2;
        s.rollback_on_failure = rb;
        struct update *u;
        REQUIRE(update_create(&u, JOB_STATELESS, 6, 1, 2, &s, NULL, 0) == 0);
        struct urun r;
        uw_drive(&w, u, &r, 3000);
        if (rb) {
            CHECK_I64(u->state, UPDATE_ROLLED_BACK);
            for (uint32_t i = 0; i < 6; i++) CHECK_I64(w.t[i].config_version, 1);
        } else {
            CHECK_I64(u->state, UPDATE_FAILED);
            CHECK_I64(u->nfailed, 1);
            CHECK(update_gave_up(u, 4));
            for (uint32_t i = 0; i < 6; i++)
                if (i != 4) {
                    CHECK_I64(w.t[i].config_version, 2);
                    CHECK_I64(w.t[i].state, TASK_RUNNING);
                }
        }
        CHECK_I64(r.starts[4], rb ? 3 : 2); /* two attempts forward (+1 back) */
        update_free(u);
    }
}

/* Unlimited attempts and no budget: the planner keeps retrying (it never
 * gives up on its own), one attempt counted per failed run. */
TEST(update_unlimited_attempts_keep_retrying) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 2, 8);
    w.bad_version[2] = true;
    w.advance_pct = 100;
    struct update_spec s = spec_batch(1);
    struct update *u;
    REQUIRE(update_create(&u, JOB_STATELESS, 2, 1, 2, &s, NULL, 0) == 0);
    struct urun r;
    uw_drive(&w, u, &r, 100);
    CHECK_I64(u->state, UPDATE_ROLLING_FORWARD);
    CHECK(r.starts[0] > 5);
    CHECK_I64(r.starts[1], 0);
    CHECK_I64(u->attempts[0], r.starts[0]);
    CHECK(w.t[0].failures == 0); /* held: the reconciler never restarted it */
    CHECK_I64(w.t[1].config_version, 1);
    update_free(u);
}

TEST(update_pause_during_rollback) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 4, 21);
    w.bad_version[2] = true;
    w.advance_pct = 100;
    struct update_spec s = spec_batch(1);
    s.max_failure_instances = 1;
    s.max_instance_attempts = 1;
    s.rollback_on_failure = true;
    struct update *u;
    REQUIRE(update_create(&u, JOB_STATELESS, 4, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    for (int i = 0; i < 100 && u->state != UPDATE_ROLLING_BACKWARD; i++) {
        uw_snapshot(&w, snap);
        REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_NONE, w.now, acts, UMAX, &na, NULL, 0) == 0);
        for (size_t k = 0; k < na; k++) uw_apply_update(&w, &acts[k]);
        uw_tick(&w, u);
    }
    REQUIRE(u->state == UPDATE_ROLLING_BACKWARD);
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_PAUSE, w.now, acts, UMAX, &na, NULL, 0) == 0);
    CHECK_I64(u->state, UPDATE_PAUSED);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_RESUME, w.now, acts, UMAX, &na, NULL, 0) == 0);
    CHECK_I64(u->state, UPDATE_ROLLING_BACKWARD);
    for (size_t k = 0; k < na; k++) uw_apply_update(&w, &acts[k]);
    struct urun r;
    uw_drive(&w, u, &r, 500);
    CHECK_I64(u->state, UPDATE_ROLLED_BACK);
    update_free(u);
}

/* A failing rollback (the old version is bad too) ends FAILED. */
TEST(update_rollback_failure_fails) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 3, 2);
    w.bad_version[1] = true; /* instances are running v1 now; any new v1 run fails */
    w.bad_version[2] = true;
    struct update_spec s = spec_batch(1);
    s.max_failure_instances = 1;
    s.max_instance_attempts = 1;
    s.rollback_on_failure = true;
    struct update *u;
    REQUIRE(update_create(&u, JOB_STATELESS, 3, 1, 2, &s, NULL, 0) == 0);
    struct urun r;
    uw_drive(&w, u, &r, 500);
    CHECK(r.saw_state[UPDATE_ROLLING_BACKWARD]);
    CHECK_I64(u->state, UPDATE_FAILED);
    update_free(u);
}

/* min_running_ms: an instance must stay RUNNING at the new version that long
 * before the next one is taken down. */
TEST(update_min_running_window) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 2, 6);
    w.advance_pct = 100;
    struct update_spec s = spec_batch(1);
    s.min_running_ms = 10000;
    struct update *u;
    REQUIRE(update_create(&u, JOB_STATELESS, 2, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, w.now, acts, UMAX, &na, NULL, 0) == 0);
    REQUIRE(na == 1);
    uw_apply_update(&w, &acts[0]);
    while (w.t[0].state != TASK_RUNNING) uw_tick(&w, u);
    int64_t up = w.t[0].state_since_ms;
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, up + 9999, acts, UMAX, &na, NULL, 0) == 0);
    CHECK_I64(na, 0);
    CHECK(update_holds(u, 0));
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, up + 10000, acts, UMAX, &na, NULL, 0) == 0);
    REQUIRE(na == 1);
    CHECK_I64(acts[0].instance, 1);
    CHECK(!update_holds(u, 0));
    update_free(u);
}

/* Instances down for reasons of their own count against the batch: with one
 * instance at the new version but not running (restarted, waiting to be
 * placed), only batch - 1 running instances may be taken down. */
TEST(update_counts_other_unavailability) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 5, 1);
    w.t[4].config_version = w.t[4].desired_version = 2;
    w.t[4].state = TASK_PENDING;
    struct update *u;
    struct update_spec s = spec_batch(2);
    REQUIRE(update_create(&u, JOB_STATELESS, 5, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 5, UPDATE_CMD_NONE, 0, acts, UMAX, &na, NULL, 0) == 0);
    REQUIRE(na == 1);
    CHECK_I64(acts[0].instance, 0);
    CHECK(acts[0].takes_down);
    CHECK(!update_holds(u, 4)); /* not the update's: the reconciler restarts it */
    /* Two down already: nothing may be taken down. */
    w.t[3].state = TASK_LOST;
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 5, UPDATE_CMD_NONE, 0, acts, UMAX, &na, NULL, 0) == 0);
    REQUIRE(na == 1);
    CHECK_I64(acts[0].instance, 3); /* down anyway: updated at no cost */
    CHECK(!acts[0].takes_down);
    update_free(u);
}

/* The simulation with chaos: running tasks also fail on their own and the
 * reconciler restarts them. The planner still never takes an instance down
 * past the bound, and the update still completes. */
TEST(update_sim_chaos_bound_and_completion) {
    uint64_t seed = 314;
    for (int round = 0; round < 30; round++) {
        uint32_t n = (uint32_t)test_range(&seed, 2, 25);
        struct uworld w;
        uw_init(&w, round % 2 ? JOB_STATEFUL : JOB_STATELESS, n, seed ^ (uint64_t)round);
        w.chaos_permille = 5;
        struct update_spec s = {.batch_size = (uint32_t)test_range(&seed, 1, 4)};
        struct update *u;
        REQUIRE(update_create(&u, w.spec.type, n, 1, 2, &s, NULL, 0) == 0);
        struct urun r;
        uw_drive(&w, u, &r, 5000);
        CHECK_I64(u->state, UPDATE_SUCCEEDED);
        for (uint32_t i = 0; i < n; i++) CHECK_I64(w.t[i].config_version, 2);
        update_free(u);
    }
}

/* The worked example in docs/lifecycle.md, call by call. */
static void snap_set(struct update_instance *s, uint32_t i, uint32_t version, uint32_t run, enum task_state st) {
    s[i] = (struct update_instance){.instance = i, .version = version, .run = run, .state = st};
}

TEST(update_worked_example_from_docs) {
    struct update_spec s = {.batch_size = 2, .max_instance_attempts = 2, .max_failure_instances = 1,
                            .rollback_on_failure = true};
    struct update *u;
    REQUIRE(update_create(&u, JOB_STATELESS, 4, 1, 2, &s, NULL, 0) == 0);
    struct update_instance sn[4];
    struct update_action a[8];
    size_t na;
    for (uint32_t i = 0; i < 4; i++) snap_set(sn, i, 1, 1, TASK_RUNNING);
    /* call 1 */
    REQUIRE(update_plan(u, sn, 4, UPDATE_CMD_NONE, 0, a, 8, &na, NULL, 0) == 0);
    CHECK_I64(u->state, UPDATE_ROLLING_FORWARD);
    REQUIRE(na == 2);
    CHECK(a[0].instance == 0 && a[1].instance == 1 && a[0].takes_down && a[1].takes_down);
    /* call 2 */
    snap_set(sn, 0, 1, 1, TASK_KILLING);
    snap_set(sn, 1, 1, 1, TASK_KILLED);
    REQUIRE(update_plan(u, sn, 4, UPDATE_CMD_NONE, 0, a, 8, &na, NULL, 0) == 0);
    CHECK_I64(na, 0);
    /* call 3 */
    snap_set(sn, 0, 2, 2, TASK_RUNNING);
    snap_set(sn, 1, 2, 2, TASK_PLACING);
    REQUIRE(update_plan(u, sn, 4, UPDATE_CMD_NONE, 0, a, 8, &na, NULL, 0) == 0);
    REQUIRE(na == 1);
    CHECK(a[0].instance == 2 && a[0].version == 2);
    CHECK_I64(u->ndone, 1);
    /* call 4 */
    snap_set(sn, 1, 2, 2, TASK_RUNNING);
    snap_set(sn, 2, 2, 2, TASK_FAILED);
    REQUIRE(update_plan(u, sn, 4, UPDATE_CMD_NONE, 0, a, 8, &na, NULL, 0) == 0);
    REQUIRE(na == 2);
    CHECK(a[0].instance == 2 && a[0].attempt == 2 && !a[0].takes_down);
    CHECK(a[1].instance == 3 && a[1].takes_down);
    /* call 5 */
    snap_set(sn, 2, 2, 3, TASK_FAILED);
    snap_set(sn, 3, 2, 2, TASK_PENDING);
    REQUIRE(update_plan(u, sn, 4, UPDATE_CMD_NONE, 0, a, 8, &na, NULL, 0) == 0);
    CHECK_I64(u->state, UPDATE_ROLLING_BACKWARD);
    CHECK_I64(u->nfailed_forward, 1);
    REQUIRE(na == 2);
    CHECK(a[0].instance == 3 && a[0].version == 1);
    CHECK(a[1].instance == 2 && a[1].version == 1 && !a[1].takes_down);
    /* call 6: 2 and 3 back at v1; 0 and 1 are taken down */
    snap_set(sn, 2, 1, 4, TASK_RUNNING);
    snap_set(sn, 3, 1, 3, TASK_RUNNING);
    REQUIRE(update_plan(u, sn, 4, UPDATE_CMD_NONE, 0, a, 8, &na, NULL, 0) == 0);
    REQUIRE(na == 2);
    CHECK(a[0].instance == 0 && a[1].instance == 1 && a[0].version == 1 && a[0].takes_down);
    /* end */
    snap_set(sn, 0, 1, 3, TASK_RUNNING);
    snap_set(sn, 1, 1, 3, TASK_RUNNING);
    REQUIRE(update_plan(u, sn, 4, UPDATE_CMD_NONE, 0, a, 8, &na, NULL, 0) == 0);
    CHECK_I64(na, 0);
    CHECK_I64(u->state, UPDATE_ROLLED_BACK);
    update_free(u);
}

/* Issue #16 item 6: a template that crashes a few seconds after it starts.
 * Counted as updated as soon as RUNNING (min_running_ms 0, what the Job CRD
 * used to give), the update "succeeds" and leaves a crash loop behind; with a
 * settle time longer than the crash delay every run at the new version is a
 * failed attempt, and the update rolls back. */
TEST(update_crash_after_start_fails_within_settle_time) {
    for (int settle = 0; settle < 2; settle++) {
        struct uworld w;
        uw_init(&w, JOB_STATELESS, 3, 21);
        w.advance_pct = 100;
        w.crash_version = 2;
        w.crash_after_ms = 3000;
        struct update_spec s = {.batch_size = 1, .max_failure_instances = 1, .max_instance_attempts = 2,
                                .rollback_on_failure = true, .min_running_ms = settle ? 10000 : 0};
        struct update *u;
        REQUIRE(update_create(&u, JOB_STATELESS, 3, 1, 2, &s, NULL, 0) == 0);
        struct urun r;
        uw_drive(&w, u, &r, 500);
        if (!settle) {
            CHECK_I64(u->state, UPDATE_SUCCEEDED); /* the bug, for the record */
        } else {
            CHECK_I64(u->state, UPDATE_ROLLED_BACK);
            CHECK_I64(u->nfailed_forward, 1);
            CHECK_I64(r.starts[0], 3);  /* two attempts at v2, then back to v1 */
            CHECK_I64(r.starts[1], 0);  /* never touched */
            for (uint32_t i = 0; i < 3; i++) {
                CHECK_I64(w.t[i].config_version, 1);
                CHECK_I64(w.t[i].state, TASK_RUNNING);
            }
        }
        update_free(u);
    }
}

/* An instance at the target that the planner did not start (the reconciler
 * restarted it) counts only once settled, and its failed run before that is
 * a failed attempt charged to the failure budget. */
TEST(update_settles_and_adopts_runs_it_did_not_start) {
    struct update *u;
    struct update_spec s = {.batch_size = 1, .max_failure_instances = 1, .max_instance_attempts = 1,
                            .min_running_ms = 5000};
    REQUIRE(update_create(&u, JOB_STATELESS, 2, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[2] = {
        {.instance = 0, .version = 2, .run = 3, .state = TASK_RUNNING, .state_since_ms = 1000},
        {.instance = 1, .version = 2, .run = 2, .state = TASK_RUNNING, .state_since_ms = 4000},
    };
    struct update_action acts[4];
    size_t na;
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, 6000, acts, 4, &na, NULL, 0) == 0);
    CHECK_I64(na, 0);
    CHECK_I64(u->ndone, 1); /* 0 settled at 6000; 1 not before 9000 */
    CHECK_I64(u->state, UPDATE_ROLLING_FORWARD);
    CHECK_I64(u->next_check_ms, 9000);
    snap[1].state = TASK_FAILED;
    snap[1].state_since_ms = 7000;
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, 7000, acts, 4, &na, NULL, 0) == 0);
    CHECK(update_gave_up(u, 1));
    CHECK_I64(u->state, UPDATE_FAILED);
    CHECK_I64(u->ndone, 1);
    update_free(u);

    /* The same with instance 1 staying up: SUCCEEDED once it settles, not before. */
    REQUIRE(update_create(&u, JOB_STATELESS, 2, 1, 2, &s, NULL, 0) == 0);
    snap[1].state = TASK_RUNNING;
    snap[1].state_since_ms = 4000;
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, 8999, acts, 4, &na, NULL, 0) == 0);
    CHECK_I64(u->state, UPDATE_ROLLING_FORWARD);
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, 9000, acts, 4, &na, NULL, 0) == 0);
    CHECK_I64(u->state, UPDATE_SUCCEEDED);
    CHECK_I64(u->ndone, 2);
    update_free(u);
}

/* A settled instance that crashes later is the restart policy's business:
 * it stays counted and does not hold the update. */
TEST(update_settled_stays_settled) {
    struct update *u;
    struct update_spec s = {.batch_size = 1, .max_failure_instances = 1, .min_running_ms = 1000};
    REQUIRE(update_create(&u, JOB_STATELESS, 2, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[2] = {
        {.instance = 0, .version = 2, .run = 2, .state = TASK_RUNNING, .state_since_ms = 0},
        {.instance = 1, .version = 1, .run = 1, .state = TASK_RUNNING, .state_since_ms = 0},
    };
    struct update_action acts[4];
    size_t na;
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, 2000, acts, 4, &na, NULL, 0) == 0);
    REQUIRE(na == 1);
    CHECK_I64(acts[0].instance, 1);
    snap[0].state = TASK_FAILED; /* long after it settled */
    snap[1] = (struct update_instance){.instance = 1, .version = 2, .run = 2, .state = TASK_RUNNING,
                                       .state_since_ms = 3000};
    REQUIRE(update_plan(u, snap, 2, UPDATE_CMD_NONE, 4000, acts, 4, &na, NULL, 0) == 0);
    CHECK_I64(u->state, UPDATE_SUCCEEDED);
    CHECK_I64(u->nfailed, 0);
    update_free(u);
}

TEST(update_cmd_for_intent) {
    struct update *u;
    struct update_spec s = spec_batch(1);
    REQUIRE(update_create(&u, JOB_STATELESS, 2, 1, 2, &s, NULL, 0) == 0);
    struct update_intent none = {0}, pause = {.paused = true}, abort_ = {.abort = true, .paused = true},
                         back = {.rollback = true};
    CHECK_I64(update_cmd_for(u, &none), UPDATE_CMD_NONE);
    CHECK_I64(update_cmd_for(u, &pause), UPDATE_CMD_PAUSE); /* from INITIALIZED too */
    CHECK_I64(update_cmd_for(u, &abort_), UPDATE_CMD_ABORT);
    CHECK_I64(update_cmd_for(u, &back), UPDATE_CMD_ROLLBACK);
    u->state = UPDATE_PAUSED;
    CHECK_I64(update_cmd_for(u, &none), UPDATE_CMD_RESUME);
    CHECK_I64(update_cmd_for(u, &pause), UPDATE_CMD_NONE);
    CHECK_I64(update_cmd_for(u, &back), UPDATE_CMD_ROLLBACK); /* paused while rolling forward */
    u->resume_state = UPDATE_ROLLING_BACKWARD;
    CHECK_I64(update_cmd_for(u, &back), UPDATE_CMD_RESUME); /* already going back: only the pause differs */
    u->state = UPDATE_ROLLING_BACKWARD;
    CHECK_I64(update_cmd_for(u, &back), UPDATE_CMD_NONE);
    CHECK_I64(update_cmd_for(u, &pause), UPDATE_CMD_PAUSE);
    for (int st = UPDATE_SUCCEEDED; st < UPDATE_NSTATES; st++) {
        if (!update_state_terminal((enum update_state)st)) continue;
        u->state = (enum update_state)st;
        CHECK_I64(update_cmd_for(u, &abort_), UPDATE_CMD_NONE);
        CHECK_I64(update_cmd_for(u, &pause), UPDATE_CMD_NONE);
    }
    update_free(u);
}

/* The operator's rollback (the UpdateService's RollbackUpdate) turns a
 * healthy update around at once; from PAUSED too; not while going back. */
TEST(update_rollback_command) {
    struct uworld w;
    uw_init(&w, JOB_STATELESS, 4, 5);
    struct update_spec s = spec_batch(2);
    struct update *u;
    REQUIRE(update_create(&u, JOB_STATELESS, 4, 1, 2, &s, NULL, 0) == 0);
    struct update_instance snap[UMAX];
    struct update_action acts[UMAX];
    size_t na;
    char err[256];
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_NONE, w.now, acts, UMAX, &na, err, sizeof err) == 0);
    REQUIRE(na == 2);
    for (size_t k = 0; k < na; k++) uw_apply_update(&w, &acts[k]);
    for (int i = 0; i < 30 && w.t[0].config_version != 2; i++) uw_tick(&w, u);
    uw_snapshot(&w, snap);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_PAUSE, w.now, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_PAUSED);
    REQUIRE(update_plan(u, snap, 4, UPDATE_CMD_ROLLBACK, w.now, acts, UMAX, &na, err, sizeof err) == 0);
    CHECK_I64(u->state, UPDATE_ROLLING_BACKWARD);
    CHECK_I64(u->target, 1);
    for (size_t k = 0; k < na; k++) {
        CHECK_I64(acts[k].version, 1);
        uw_apply_update(&w, &acts[k]);
    }
    CHECK_I64(update_plan(u, snap, 4, UPDATE_CMD_ROLLBACK, w.now, acts, UMAX, &na, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "ROLLING_BACKWARD");
    struct urun r;
    uw_drive(&w, u, &r, 500);
    CHECK_I64(u->state, UPDATE_ROLLED_BACK);
    for (uint32_t i = 0; i < 4; i++) CHECK_I64(w.t[i].config_version, 1);
    update_free(u);
}
