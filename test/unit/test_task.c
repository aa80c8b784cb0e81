#include <errno.h>

#include "task.h"
#include "test.h"

/* The expected edge set, written out independently of task.c's table. */
static const char *const k_expected_edges[] = {
    /* resmgr, exactly as notes/peloton.md */
    "INITIALIZED>PENDING", "PENDING>READY", "PENDING>KILLED", "READY>PLACING", "READY>KILLED",
    "READY>PENDING", "PLACING>PLACED", "PLACING>READY", "PLACING>PENDING", "PLACING>KILLED",
    "PLACED>LAUNCHING", "PLACED>KILLED", "LAUNCHING>RUNNING", "LAUNCHING>READY", "LAUNCHING>KILLED",
    "RUNNING>SUCCEEDED", "RUNNING>FAILED", "RUNNING>LOST", "RUNNING>PREEMPTING", "RUNNING>KILLING",
    "RUNNING>KILLED",
    /* job manager / host */
    "INITIALIZED>KILLED", "LAUNCHING>LAUNCHED", "LAUNCHED>STARTING", "LAUNCHED>RUNNING",
    "LAUNCHED>SUCCEEDED", "LAUNCHED>FAILED", "LAUNCHED>LOST", "LAUNCHED>KILLING", "LAUNCHED>KILLED",
    "STARTING>RUNNING", "STARTING>SUCCEEDED", "STARTING>FAILED", "STARTING>LOST", "STARTING>KILLING",
    "STARTING>KILLED", "PREEMPTING>KILLED", "PREEMPTING>KILLING", "PREEMPTING>LOST", "KILLING>KILLED",
    "KILLING>LOST", "SUCCEEDED>INITIALIZED", "FAILED>INITIALIZED", "LOST>INITIALIZED",
    "KILLED>INITIALIZED", "SUCCEEDED>DELETED", "FAILED>DELETED", "LOST>DELETED", "KILLED>DELETED",
};
#define NEXPECTED (sizeof k_expected_edges / sizeof k_expected_edges[0])

static int expected_legal(int from, int to) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s>%s", task_state_name((enum task_state)from),
             task_state_name((enum task_state)to));
    for (size_t i = 0; i < NEXPECTED; i++)
        if (strcmp(k_expected_edges[i], buf) == 0) return 1;
    return 0;
}

TEST(task_state_numbers_and_names) {
    CHECK_I64(TASK_UNKNOWN, 0);
    CHECK_I64(TASK_INITIALIZED, 1);
    CHECK_I64(TASK_PENDING, 2);
    CHECK_I64(TASK_READY, 3);
    CHECK_I64(TASK_PLACING, 4);
    CHECK_I64(TASK_PLACED, 5);
    CHECK_I64(TASK_LAUNCHING, 6);
    CHECK_I64(TASK_STARTING, 7);
    CHECK_I64(TASK_RUNNING, 8);
    CHECK_I64(TASK_SUCCEEDED, 9);
    CHECK_I64(TASK_FAILED, 10);
    CHECK_I64(TASK_LOST, 11);
    CHECK_I64(TASK_PREEMPTING, 12);
    CHECK_I64(TASK_KILLING, 13);
    CHECK_I64(TASK_KILLED, 14);
    CHECK_I64(TASK_LAUNCHED, 15);
    CHECK_I64(TASK_DELETED, 16);
    CHECK_I64(TASK_RESERVED, 17);
    CHECK_I64(TASK_NSTATES, 18);
    CHECK_STR(task_state_name(TASK_RUNNING), "RUNNING");
    CHECK_STR(task_state_name(TASK_RESERVED), "RESERVED");
    CHECK_STR(task_state_name((enum task_state)99), "INVALID");
    for (int s = 0; s < TASK_NSTATES; s++) CHECK_I64(task_state_parse(task_state_name((enum task_state)s)), s);
    CHECK_I64(task_state_parse("running"), -EINVAL);
    CHECK_I64(task_state_parse(NULL), -EINVAL);
}

TEST(task_table_matches_expected_edges) {
    size_t n;
    const struct task_edge *e = task_edges(&n);
    CHECK_I64(n, NEXPECTED);
    for (size_t i = 0; i < n; i++) {
        CHECK(expected_legal(e[i].from, e[i].to));
        CHECK(e[i].cause && e[i].cause[0]);
        for (size_t j = 0; j < i; j++) CHECK(!(e[j].from == e[i].from && e[j].to == e[i].to));
    }
    for (size_t i = 0; i < NEXPECTED; i++) {
        char from[32], to[32];
        CHECK(sscanf(k_expected_edges[i], "%31[A-Z]>%31[A-Z]", from, to) == 2);
        int f = task_state_parse(from), t = task_state_parse(to);
        REQUIRE(f >= 0 && t >= 0);
        CHECK(task_transition_legal((enum task_state)f, (enum task_state)t));
    }
}

/* Every pair of states, against the table: legal edges succeed, everything
 * else is refused with a message naming both states and leaves t alone. */
TEST(task_transition_whole_matrix) {
    int legal = 0, refused = 0;
    for (int from = 0; from < TASK_NSTATES; from++) {
        for (int to = 0; to < TASK_NSTATES; to++) {
            struct task t;
            char err[128] = "";
            task_init(&t, 3, 1, 0);
            t.state = (enum task_state)from;
            t.run = 5;
            int rc = task_transition(&t, (enum task_state)to, "h1", 1000, err, sizeof err);
            if (from == to) {
                CHECK_I64(rc, -EALREADY);
                CHECK_HAS(err, task_state_name((enum task_state)to));
                CHECK_I64(t.state, from);
                refused++;
            } else if (expected_legal(from, to)) {
                CHECK_I64(rc, 0);
                CHECK_I64(t.state, to);
                CHECK_I64(t.state_since_ms, 1000);
                CHECK_I64(t.run, to == TASK_INITIALIZED ? 6 : 5);
                legal++;
            } else {
                CHECK_I64(rc, -EINVAL);
                CHECK_HAS(err, "illegal task transition");
                char both[64];
                snprintf(both, sizeof both, "%s -> %s", task_state_name((enum task_state)from),
                         task_state_name((enum task_state)to));
                CHECK_HAS(err, both);
                CHECK_I64(t.state, from);
                CHECK_I64(t.state_since_ms, 0);
                CHECK_I64(t.run, 5);
                refused++;
            }
        }
    }
    CHECK_I64(legal, (int64_t)NEXPECTED);
    CHECK_I64(legal + refused, TASK_NSTATES * TASK_NSTATES);
    /* UNKNOWN and RESERVED have no edges at all. */
    for (int s = 0; s < TASK_NSTATES; s++) {
        CHECK(!task_transition_legal(TASK_UNKNOWN, (enum task_state)s));
        CHECK(!task_transition_legal((enum task_state)s, TASK_UNKNOWN));
        CHECK(!task_transition_legal(TASK_RESERVED, (enum task_state)s));
        CHECK(!task_transition_legal((enum task_state)s, TASK_RESERVED));
        CHECK(!task_transition_legal(TASK_DELETED, (enum task_state)s));
    }
}

TEST(task_terminal_and_on_host) {
    for (int s = 0; s < TASK_NSTATES; s++) {
        bool term = s == TASK_SUCCEEDED || s == TASK_FAILED || s == TASK_LOST || s == TASK_KILLED ||
                    s == TASK_DELETED;
        CHECK(task_state_terminal((enum task_state)s) == term);
    }
    CHECK(task_state_on_host(TASK_RUNNING));
    CHECK(task_state_on_host(TASK_PLACED));
    CHECK(!task_state_on_host(TASK_READY));
    CHECK(!task_state_on_host(TASK_KILLED));
}

TEST(task_happy_path_and_hosts) {
    struct task t;
    char err[128];
    task_init(&t, 7, 3, 100);
    CHECK_I64(t.state, TASK_INITIALIZED);
    CHECK_I64(t.run, 1);
    CHECK_I64(t.config_version, 3);
    static const enum task_state path[] = {TASK_PENDING, TASK_READY, TASK_PLACING, TASK_PLACED,
                                           TASK_LAUNCHING, TASK_LAUNCHED, TASK_STARTING, TASK_RUNNING,
                                           TASK_SUCCEEDED};
    int64_t now = 100;
    for (size_t i = 0; i < sizeof path / sizeof path[0]; i++) {
        now += 10;
        REQUIRE(task_transition(&t, path[i], "host-a", now, err, sizeof err) == 0);
        if (path[i] == TASK_PLACED) CHECK_STR(t.host, "host-a");
    }
    CHECK_STR(t.last_host, "host-a");
    CHECK_I64(t.state_since_ms, now);
    /* A restart keeps the previous host as last_host only. */
    t.desired_version = 4;
    REQUIRE(task_restart(&t, false, now + 1, err, sizeof err) == 0);
    CHECK(t.host == NULL);
    CHECK_STR(t.last_host, "host-a");
    CHECK_I64(t.run, 2);
    CHECK_I64(t.config_version, 4);
    CHECK_I64(t.failures, 0);
    /* PLACING -> READY clears the host of a later placement attempt. */
    task_transition(&t, TASK_PENDING, NULL, now, err, sizeof err);
    task_transition(&t, TASK_READY, NULL, now, err, sizeof err);
    task_transition(&t, TASK_PLACING, NULL, now, err, sizeof err);
    task_transition(&t, TASK_PLACED, "host-b", now, err, sizeof err);
    task_transition(&t, TASK_LAUNCHING, NULL, now, err, sizeof err);
    CHECK_STR(t.host, "host-b");
    REQUIRE(task_transition(&t, TASK_READY, NULL, now, err, sizeof err) == 0);
    CHECK(t.host == NULL);
    CHECK_STR(t.last_host, "host-b");
}

TEST(task_timeouts_default_and_custom) {
    struct task_config cfg;
    task_config_default(&cfg);
    CHECK_I64(cfg.placing_timeout_ms, 600000);
    CHECK_I64(cfg.launching_timeout_ms, 1200000);
    struct task t;
    task_init(&t, 0, 1, 0);
    CHECK_I64(task_deadline(&t, &cfg), INT64_MAX);
    CHECK_I64(task_check_timeout(&t, &cfg, INT64_MAX - 1), 0);
    task_transition(&t, TASK_PENDING, NULL, 1000, NULL, 0);
    task_transition(&t, TASK_READY, NULL, 1000, NULL, 0);
    task_transition(&t, TASK_PLACING, NULL, 5000, NULL, 0);
    CHECK_I64(task_deadline(&t, &cfg), 605000);
    CHECK_I64(task_check_timeout(&t, &cfg, 604999), 0);
    CHECK_I64(t.state, TASK_PLACING);
    CHECK_I64(task_check_timeout(&t, &cfg, 605000), 1);
    CHECK_I64(t.state, TASK_READY);
    CHECK_I64(t.state_since_ms, 605000);
    /* LAUNCHING times out after 20 minutes, back to READY. */
    task_transition(&t, TASK_PLACING, NULL, 700000, NULL, 0);
    task_transition(&t, TASK_PLACED, "h", 700000, NULL, 0);
    task_transition(&t, TASK_LAUNCHING, NULL, 800000, NULL, 0);
    CHECK_I64(task_check_timeout(&t, &cfg, 800000 + 1199999), 0);
    CHECK_I64(t.state, TASK_LAUNCHING);
    CHECK_I64(task_check_timeout(&t, &cfg, 800000 + 1200000), 1);
    CHECK_I64(t.state, TASK_READY);
    CHECK(t.host == NULL);
    /* Custom: 1 s placing; 0 disables launching. */
    cfg.placing_timeout_ms = 1000;
    cfg.launching_timeout_ms = 0;
    task_transition(&t, TASK_PLACING, NULL, 0, NULL, 0);
    CHECK_I64(task_check_timeout(&t, &cfg, 999), 0);
    CHECK_I64(task_check_timeout(&t, &cfg, 1000), 1);
    task_transition(&t, TASK_PLACING, NULL, 0, NULL, 0);
    task_transition(&t, TASK_PLACED, "h", 0, NULL, 0);
    task_transition(&t, TASK_LAUNCHING, NULL, 0, NULL, 0);
    CHECK_I64(task_deadline(&t, &cfg), INT64_MAX);
    CHECK_I64(task_check_timeout(&t, &cfg, INT64_MAX - 1), 0);
    /* Other states never time out. */
    task_transition(&t, TASK_RUNNING, NULL, 0, NULL, 0);
    CHECK_I64(task_check_timeout(&t, &cfg, INT64_MAX - 1), 0);
    CHECK_I64(t.state, TASK_RUNNING);
}

TEST(task_restart_counts_and_refusals) {
    struct task t;
    char err[128];
    task_init(&t, 1, 1, 0);
    CHECK_I64(task_restart(&t, true, 0, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "INITIALIZED");
    t.state = TASK_RUNNING;
    CHECK_I64(task_restart(&t, true, 0, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "RUNNING -> INITIALIZED");
    CHECK_I64(t.run, 1);
    CHECK_I64(t.failures, 0);
    t.state = TASK_FAILED;
    CHECK_I64(task_restart(&t, true, 10, err, sizeof err), 0);
    CHECK_I64(t.failures, 1);
    CHECK_I64(t.run, 2);
    t.state = TASK_LOST;
    CHECK_I64(task_restart(&t, false, 20, err, sizeof err), 0);
    CHECK_I64(t.failures, 1);
    CHECK_I64(t.lost, 1);
    CHECK_I64(t.run, 3);
    /* Preemption marks the run; the next run starts clean. */
    t.state = TASK_RUNNING;
    CHECK_I64(task_transition(&t, TASK_PREEMPTING, NULL, 30, err, sizeof err), 0);
    CHECK(t.preempted);
    CHECK_I64(task_transition(&t, TASK_KILLED, NULL, 31, err, sizeof err), 0);
    CHECK(t.preempted);
    CHECK_I64(task_restart(&t, false, 32, err, sizeof err), 0);
    CHECK(!t.preempted);
    t.state = TASK_DELETED;
    CHECK_I64(task_restart(&t, false, 40, err, sizeof err), -EINVAL);
}

/* Random walks along the table: every step the table allows succeeds and
 * moves; the state never leaves the enum; terminal states restart. */
TEST(task_random_walks) {
    uint64_t seed = 42;
    size_t n;
    const struct task_edge *e = task_edges(&n);
    for (int walk = 0; walk < 200; walk++) {
        struct task t;
        task_init(&t, 0, 1, 0);
        for (int step = 0; step < 50; step++) {
            const struct task_edge *out[TASK_NSTATES];
            int k = 0;
            for (size_t i = 0; i < n; i++)
                if (e[i].from == t.state) out[k++] = &e[i];
            if (k == 0) {
                CHECK(t.state == TASK_DELETED);
                break;
            }
            const struct task_edge *pick = out[test_range(&seed, 0, k - 1)];
            uint32_t run = t.run;
            REQUIRE(task_transition(&t, pick->to, "h", step, NULL, 0) == 0);
            CHECK_I64(t.state, pick->to);
            CHECK_I64(t.run, pick->to == TASK_INITIALIZED ? run + 1 : run);
            if (task_state_on_host(t.state) && t.state != TASK_PLACED) CHECK(t.host != NULL);
        }
    }
}

/* CrashLoopBackOff as a Kubelet: the first restart of a loop at once, then
 * 10 s doubling to 5 min; a run RUNNING for 10 min starts a new loop; a new
 * version starts over; LOST and KILLED runs neither wait nor count. */
TEST(task_restart_backoff) {
    struct task t;
    task_init(&t, 0, 1, 0);
    uint32_t loop;
    static const int64_t want[] = {0, 10000, 20000, 40000, 80000, 160000, 300000, 300000, 300000};
    int64_t now = 1000;
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        t.state = TASK_FAILED;
        t.state_since_ms = now;
        int64_t at = task_restart_at(&t, NULL, &loop);
        CHECK_I64(at - now, want[k]);
        CHECK_I64(loop, k + 1);
        CHECK_I64(task_restart(&t, true, at, NULL, 0), 0);
        t.crash_loop = loop;
        CHECK_I64(task_transition(&t, TASK_PENDING, NULL, at, NULL, 0), 0);
        CHECK_I64(t.running_since_ms, 0);
        t.state = TASK_LAUNCHING;
        CHECK_I64(task_transition(&t, TASK_RUNNING, NULL, at + 500, NULL, 0), 0);
        CHECK_I64(t.running_since_ms, at + 500);
        now = at + 2000; /* crashes 1.5 s after it started running */
    }
    /* SUCCEEDED is a crash too (a service should not exit). */
    t.state = TASK_SUCCEEDED;
    t.state_since_ms = now;
    CHECK_I64(task_restart_at(&t, NULL, &loop) - now, 300000);
    /* Ran for 10 min: a new loop (at once; the next crash waits 10 s). */
    t.state_since_ms = t.running_since_ms + 600000;
    CHECK_I64(task_restart_at(&t, NULL, &loop), t.state_since_ms);
    CHECK_I64(loop, 1);
    t.state_since_ms = t.running_since_ms + 599999;
    CHECK(task_restart_at(&t, NULL, &loop) > t.state_since_ms);
    /* LOST or KILLED: no wait, the loop is kept. */
    t.state = TASK_LOST;
    CHECK_I64(task_restart_at(&t, NULL, &loop), t.state_since_ms);
    CHECK_I64(loop, t.crash_loop);
    /* A new version: no wait, a new loop. */
    t.state = TASK_FAILED;
    t.desired_version = 2;
    CHECK_I64(task_restart_at(&t, NULL, &loop), t.state_since_ms);
    CHECK_I64(loop, 0);
    /* Custom figures; initial 0 disables the wait. */
    struct task_config cfg;
    task_config_default(&cfg);
    cfg.backoff_initial_ms = 2000;
    cfg.backoff_max_ms = 5000;
    t.desired_version = 1;
    t.crash_loop = 3;
    t.running_since_ms = 0; /* never ran */
    CHECK_I64(task_restart_at(&t, &cfg, &loop) - t.state_since_ms, 5000);
    t.crash_loop = 2;
    CHECK_I64(task_restart_at(&t, &cfg, &loop) - t.state_since_ms, 4000);
    cfg.backoff_initial_ms = 0;
    CHECK_I64(task_restart_at(&t, &cfg, &loop), t.state_since_ms);
    CHECK_I64(loop, 3);
    t.crash_loop = UINT32_MAX; /* no overflow of the count or the delay */
    cfg.backoff_initial_ms = 2000;
    CHECK_I64(task_restart_at(&t, &cfg, &loop) - t.state_since_ms, 5000);
    CHECK_I64(loop, UINT32_MAX);
}
