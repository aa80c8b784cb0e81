#include <errno.h>
#include <stdlib.h>

#include "job.h"
#include "test.h"

#define WMAX 64

/* A tiny job-manager world: instance records plus the spec, and the glue
 * that applies a plan's actions the way the job manager would. */
struct world {
    struct job_spec spec;
    struct task t[WMAX];
    size_t n;
    const char *hosts[WMAX];
    size_t nhosts;
    int64_t now;
};

static void world_init(struct world *w, enum job_type type, uint32_t count) {
    memset(w, 0, sizeof *w);
    w->spec.type = type;
    w->spec.instance_count = count;
    w->spec.config_version = 1;
}

static struct task *world_find(struct world *w, uint32_t instance) {
    for (size_t i = 0; i < w->n; i++)
        if (w->t[i].instance == instance) return &w->t[i];
    return NULL;
}

static struct task *add(struct world *w, uint32_t instance, enum task_state s) {
    struct task *t = &w->t[w->n++];
    task_init(t, instance, w->spec.config_version, 0);
    t->state = s;
    return t;
}

static int plan(struct world *w, struct job_plan *p) {
    struct job_input in = {.spec = &w->spec, .tasks = w->t, .ntasks = w->n, .hosts = w->hosts,
                           .nhosts = w->nhosts, .now_ms = w->now};
    char err[256];
    return job_reconcile(&in, p, err, sizeof err);
}

static void apply(struct world *w, const struct job_plan *p) {
    for (size_t i = 0; i < p->n; i++) {
        const struct job_action *a = &p->v[i];
        struct task *t = world_find(w, a->instance);
        switch (a->kind) {
        case JOB_ACT_CREATE:
            if (w->n < WMAX) {
                t = &w->t[w->n++];
                task_init(t, a->instance, a->version, w->now);
                if (a->host_pinned) t->pinned_host = a->host;
            }
            break;
        case JOB_ACT_RESTART:
            if (t) {
                t->desired_version = a->version;
                CHECK_I64(task_restart(t, a->count_failure, w->now, NULL, 0), 0);
                CHECK_I64(t->run, a->run);
            }
            break;
        case JOB_ACT_KILL:
            if (t) {
                bool soft = t->state == TASK_RUNNING || t->state == TASK_LAUNCHED ||
                            t->state == TASK_STARTING || t->state == TASK_PREEMPTING;
                CHECK_I64(task_transition(t, soft ? TASK_KILLING : TASK_KILLED, NULL, w->now, NULL, 0), 0);
            }
            break;
        case JOB_ACT_DELETE:
            if (t) {
                *t = w->t[w->n - 1];
                w->n--;
            }
            break;
        case JOB_ACT_TIMEOUT:
            if (t) CHECK_I64(task_transition(t, a->to, NULL, w->now, NULL, 0), 0);
            break;
        case JOB_ACT_MARK:
            w->spec.state = a->state;
            break;
        }
    }
}

static const struct job_action *find_act(const struct job_plan *p, enum job_action_kind k, uint32_t inst) {
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].kind == k && (k == JOB_ACT_MARK || p->v[i].instance == inst)) return &p->v[i];
    return NULL;
}

static size_t count_kind(const struct job_plan *p, enum job_action_kind k) {
    size_t c = 0;
    for (size_t i = 0; i < p->n; i++) c += p->v[i].kind == k;
    return c;
}

TEST(job_names_and_validation) {
    CHECK_STR(job_type_name(JOB_DAEMON), "DAEMON");
    CHECK_STR(job_state_name(JOB_KILLING), "KILLING");
    CHECK_STR(job_state_name(JOB_DELETED), "DELETED");
    CHECK_I64(JOB_UNKNOWN, 0);
    CHECK_I64(JOB_DELETED, 9);
    struct job_spec s = {.type = JOB_BATCH, .instance_count = 4, .max_failures = 100};
    char err[256];
    CHECK_I64(job_spec_validate(&s, err, sizeof err), 0);
    s.max_failures = 101;
    CHECK_I64(job_spec_validate(&s, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "maxFailures 101");
    s.max_failures = 3;
    s.min_running = 5;
    CHECK_I64(job_spec_validate(&s, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "minimumRunningInstances 5");
    s.min_running = 4;
    CHECK_I64(job_spec_validate(&s, err, sizeof err), 0);
    s.type = (enum job_type)9;
    CHECK_I64(job_spec_validate(&s, err, sizeof err), -EINVAL);
    /* The reconciler refuses a bad spec too. */
    struct world w;
    world_init(&w, JOB_BATCH, 2);
    w.spec.max_failures = 200;
    struct job_plan p;
    CHECK_I64(plan(&w, &p), -EINVAL);
    job_plan_free(&p);
}

TEST(job_gangs_from_min_running) {
    struct job_spec s = {.type = JOB_BATCH, .instance_count = 5, .min_running = 3};
    CHECK_I64(job_gang_of(&s, 0), 0);
    CHECK_I64(job_gang_of(&s, 2), 0);
    CHECK_I64(job_gang_of(&s, 3), 3);
    CHECK_I64(job_gang_of(&s, 4), 4);
    CHECK_I64(job_gang_size(&s, 0), 3);
    CHECK_I64(job_gang_size(&s, 4), 1);
    s.min_running = 1; /* m <= 1: every instance alone */
    CHECK_I64(job_gang_of(&s, 1), 1);
    CHECK_I64(job_gang_size(&s, 0), 1);

    struct world w;
    world_init(&w, JOB_BATCH, 5);
    w.spec.min_running = 3;
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(count_kind(&p, JOB_ACT_CREATE), 5);
    for (uint32_t i = 0; i < 5; i++) {
        const struct job_action *a = find_act(&p, JOB_ACT_CREATE, i);
        REQUIRE(a);
        CHECK_I64(a->gang, i < 3 ? 0 : i);
        CHECK_I64(a->gang_size, i < 3 ? 3 : 1);
    }
    job_plan_free(&p);
}

/* Members lost while the rest of the gang runs are started as a gang of
 * their own (named by the lowest of them and its new run); one alone joins
 * no gang. Before, the job manager labelled them with the whole gang's size
 * and they waited forever for members that were running. */
TEST(job_gang_replacements_form_their_own_gang) {
    struct world w;
    world_init(&w, JOB_BATCH, 6);
    w.spec.min_running = 4;
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    const struct job_action *a0 = find_act(&p, JOB_ACT_CREATE, 0);
    REQUIRE(a0);
    CHECK_I64(a0->gang_size, 4);
    CHECK_I64(a0->gang_first, 0);
    CHECK_I64(a0->gang_first_run, 1);
    const struct job_action *a3 = find_act(&p, JOB_ACT_CREATE, 3);
    REQUIRE(a3);
    CHECK_I64(a3->gang_first, 0);
    const struct job_action *a5 = find_act(&p, JOB_ACT_CREATE, 5);
    REQUIRE(a5);
    CHECK_I64(a5->gang_size, 1);
    CHECK_I64(a5->gang_first, 5);
    apply(&w, &p);
    job_plan_free(&p);
    for (size_t i = 0; i < w.n; i++) w.t[i].state = TASK_RUNNING;
    /* a node with instances 2 and 3 (and 5, not in the gang) is lost */
    world_find(&w, 2)->state = TASK_LOST;
    world_find(&w, 3)->state = TASK_LOST;
    world_find(&w, 5)->state = TASK_LOST;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(count_kind(&p, JOB_ACT_RESTART), 3);
    for (uint32_t i = 2; i <= 3; i++) {
        const struct job_action *a = find_act(&p, JOB_ACT_RESTART, i);
        REQUIRE(a);
        CHECK_I64(a->gang, 0);
        CHECK_I64(a->gang_size, 2); /* not 4: instances 0 and 1 still run */
        CHECK_I64(a->gang_first, 2);
        CHECK_I64(a->gang_first_run, 2);
    }
    const struct job_action *r5 = find_act(&p, JOB_ACT_RESTART, 5);
    REQUIRE(r5);
    CHECK_I64(r5->gang_size, 1);
    apply(&w, &p);
    job_plan_free(&p);
    /* later, instance 1 alone: a gang of one, that is no gang */
    for (size_t i = 0; i < w.n; i++) w.t[i].state = TASK_RUNNING;
    world_find(&w, 1)->state = TASK_FAILED;
    w.spec.max_failures = 3;
    REQUIRE(plan(&w, &p) == 0);
    const struct job_action *r1 = find_act(&p, JOB_ACT_RESTART, 1);
    REQUIRE(r1);
    CHECK_I64(r1->gang_size, 1);
    CHECK_I64(r1->gang_first, 1);
    CHECK_I64(r1->gang_first_run, 2);
    job_plan_free(&p);
}

TEST(job_batch_creates_then_succeeds) {
    struct world w;
    world_init(&w, JOB_BATCH, 4);
    w.spec.config_version = 7;
    struct job_plan p, q;
    REQUIRE(plan(&w, &p) == 0);
    REQUIRE(plan(&w, &q) == 0); /* deterministic */
    REQUIRE(p.n == q.n);
    CHECK(memcmp(p.v, q.v, p.n * sizeof *p.v) == 0);
    job_plan_free(&q);
    CHECK_I64(p.n, 5);
    for (uint32_t i = 0; i < 4; i++) {
        CHECK_I64(p.v[i].kind, JOB_ACT_CREATE);
        CHECK_I64(p.v[i].instance, i);
        CHECK_I64(p.v[i].run, 1);
        CHECK_I64(p.v[i].version, 7);
        CHECK(p.v[i].host == NULL);
    }
    CHECK_I64(p.v[4].kind, JOB_ACT_MARK);
    CHECK_I64(p.v[4].state, JOB_INITIALIZED);
    apply(&w, &p);
    job_plan_free(&p);
    CHECK_I64(w.n, 4);
    /* Two running, two pending -> RUNNING; counts reported as they are. */
    w.t[0].state = TASK_RUNNING;
    w.t[1].state = TASK_RUNNING;
    w.t[2].state = TASK_PENDING;
    w.t[3].state = TASK_PENDING;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(p.state, JOB_RUNNING);
    CHECK_I64(p.counts.n[TASK_RUNNING], 2);
    CHECK_I64(p.counts.n[TASK_PENDING], 2);
    CHECK_I64(p.counts.total, 4);
    CHECK_I64(count_kind(&p, JOB_ACT_MARK), 1);
    apply(&w, &p);
    job_plan_free(&p);
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(p.n, 0); /* nothing to do, state unchanged */
    job_plan_free(&p);
    for (size_t i = 0; i < 4; i++) w.t[i].state = TASK_SUCCEEDED;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(p.n, 1);
    CHECK_I64(p.state, JOB_SUCCEEDED);
    CHECK(find_act(&p, JOB_ACT_MARK, 0) && find_act(&p, JOB_ACT_MARK, 0)->state == JOB_SUCCEEDED);
    job_plan_free(&p);
}

TEST(job_batch_restart_policy_exhaustion) {
    struct world w;
    world_init(&w, JOB_BATCH, 2);
    w.spec.max_failures = 2;
    add(&w, 0, TASK_RUNNING);
    add(&w, 1, TASK_FAILED);
    struct job_plan p;
    for (int attempt = 0; attempt < 2; attempt++) {
        REQUIRE(plan(&w, &p) == 0);
        const struct job_action *a = find_act(&p, JOB_ACT_RESTART, 1);
        REQUIRE(a);
        CHECK(a->count_failure);
        CHECK_I64(a->run, w.t[1].run + 1);
        apply(&w, &p);
        job_plan_free(&p);
        CHECK_I64(w.t[1].failures, attempt + 1);
        CHECK_I64(w.t[1].state, TASK_INITIALIZED);
        w.t[1].state = TASK_FAILED; /* and it fails again */
    }
    /* Third failure: maxFailures = 2 exhausted, no restart; job waits for the rest. */
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_RESTART, 1) == NULL);
    CHECK_I64(p.state, JOB_RUNNING);
    job_plan_free(&p);
    w.t[0].state = TASK_SUCCEEDED;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(p.state, JOB_FAILED);
    CHECK_I64(p.counts.n[TASK_FAILED], 1);
    job_plan_free(&p);
    /* maxFailures 0: the first failure is final. */
    world_init(&w, JOB_BATCH, 1);
    add(&w, 0, TASK_FAILED);
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(count_kind(&p, JOB_ACT_RESTART), 0);
    CHECK_I64(p.state, JOB_FAILED);
    job_plan_free(&p);
}

TEST(job_lost_requeued_not_counted) {
    struct world w;
    world_init(&w, JOB_BATCH, 1);
    w.spec.max_failures = 1;
    struct task *t = add(&w, 0, TASK_LOST);
    t->failures = 1; /* budget already used: LOST still restarts */
    t->host = "h1";
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    const struct job_action *a = find_act(&p, JOB_ACT_RESTART, 0);
    REQUIRE(a);
    CHECK(!a->count_failure);
    CHECK(a->host == NULL); /* BATCH: no host preference */
    CHECK_I64(p.state, JOB_INITIALIZED);
    apply(&w, &p);
    job_plan_free(&p);
    CHECK_I64(w.t[0].failures, 1);
    CHECK_I64(w.t[0].lost, 1);
    CHECK_I64(w.t[0].run, 2);
}

TEST(job_preemption_requeue_both_ways) {
    for (int kop = 0; kop < 2; kop++) {
        struct world w;
        world_init(&w, JOB_BATCH, 2);
        w.spec.kill_on_preempt = kop;
        add(&w, 0, TASK_SUCCEEDED);
        struct task *t = add(&w, 1, TASK_RUNNING);
        CHECK_I64(task_transition(t, TASK_PREEMPTING, NULL, 1, NULL, 0), 0);
        CHECK_I64(task_transition(t, TASK_KILLED, NULL, 2, NULL, 0), 0);
        struct job_plan p;
        REQUIRE(plan(&w, &p) == 0);
        const struct job_action *a = find_act(&p, JOB_ACT_RESTART, 1);
        if (kop) {
            CHECK(a == NULL);
            CHECK_I64(p.state, JOB_KILLED); /* stays killed; the batch job ends KILLED */
        } else {
            REQUIRE(a);
            CHECK(!a->count_failure);
            CHECK_I64(p.state, JOB_PENDING);
        }
        job_plan_free(&p);
    }
    /* A run killed without preemption (e.g. on the host) is restarted either way. */
    struct world w;
    world_init(&w, JOB_STATELESS, 1);
    w.spec.kill_on_preempt = true;
    add(&w, 0, TASK_KILLED);
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_RESTART, 0) != NULL);
    job_plan_free(&p);
}

TEST(job_stateless_replaces_and_scales) {
    struct world w;
    world_init(&w, JOB_STATELESS, 4);
    w.spec.max_failures = 0;
    add(&w, 0, TASK_RUNNING);
    add(&w, 1, TASK_SUCCEEDED);
    struct task *f = add(&w, 3, TASK_FAILED);
    f->failures = 100;
    add(&w, 5, TASK_RUNNING); /* beyond instanceCount: scale down */
    add(&w, 6, TASK_KILLED);
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_RESTART, 1) && !find_act(&p, JOB_ACT_RESTART, 1)->count_failure);
    CHECK(find_act(&p, JOB_ACT_RESTART, 3) && find_act(&p, JOB_ACT_RESTART, 3)->count_failure);
    CHECK(find_act(&p, JOB_ACT_CREATE, 2) != NULL);
    CHECK(find_act(&p, JOB_ACT_KILL, 5) != NULL);
    CHECK(find_act(&p, JOB_ACT_DELETE, 6) != NULL);
    CHECK_I64(count_kind(&p, JOB_ACT_CREATE), 1);
    CHECK_I64(p.state, JOB_RUNNING);
    /* Actions come in instance order, MARK last. */
    for (size_t i = 1; i + 1 < p.n; i++)
        if (p.v[i].kind != JOB_ACT_CREATE && p.v[i - 1].kind != JOB_ACT_CREATE)
            CHECK(p.v[i - 1].instance < p.v[i].instance);
    CHECK_I64(p.v[p.n - 1].kind, JOB_ACT_MARK);
    apply(&w, &p);
    job_plan_free(&p);
    /* Killed instance 5 finishes; it is then deleted. */
    world_find(&w, 5)->state = TASK_KILLED;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_DELETE, 5) != NULL);
    apply(&w, &p);
    job_plan_free(&p);
    CHECK_I64(w.n, 4);
    for (uint32_t i = 0; i < 4; i++) CHECK(world_find(&w, i) != NULL);
}

TEST(job_stateful_previous_host_hint) {
    struct world w;
    world_init(&w, JOB_STATEFUL, 2);
    struct task *t = add(&w, 0, TASK_RUNNING);
    CHECK_I64(task_transition(t, TASK_LOST, NULL, 1, NULL, 0), 0);
    t->last_host = "host-7";
    struct task *u = add(&w, 1, TASK_FAILED);
    u->host = "host-9";
    u->last_host = "host-9";
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    const struct job_action *a = find_act(&p, JOB_ACT_RESTART, 0);
    REQUIRE(a);
    CHECK_STR(a->host, "host-7");
    CHECK(!a->host_pinned);
    a = find_act(&p, JOB_ACT_RESTART, 1);
    REQUIRE(a);
    CHECK_STR(a->host, "host-9");
    apply(&w, &p);
    job_plan_free(&p);
    /* Same identity: the same instance ids, a new run each. */
    CHECK_I64(world_find(&w, 0)->run, 2);
    CHECK_I64(world_find(&w, 1)->run, 2);
    CHECK_STR(world_find(&w, 1)->last_host, "host-9");
    CHECK_I64(w.n, 2);
    /* The same records under STATELESS get no hint. */
    w.spec.type = JOB_STATELESS;
    world_find(&w, 0)->state = TASK_FAILED;
    REQUIRE(plan(&w, &p) == 0);
    a = find_act(&p, JOB_ACT_RESTART, 0);
    REQUIRE(a);
    CHECK(a->host == NULL);
    job_plan_free(&p);
}

TEST(job_daemon_follows_hosts) {
    struct world w;
    world_init(&w, JOB_DAEMON, 0);
    w.hosts[0] = "c";
    w.hosts[1] = "a";
    w.hosts[2] = "b";
    w.hosts[3] = "a"; /* duplicate */
    w.nhosts = 4;
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(count_kind(&p, JOB_ACT_CREATE), 3);
    CHECK_STR(find_act(&p, JOB_ACT_CREATE, 0)->host, "a");
    CHECK_STR(find_act(&p, JOB_ACT_CREATE, 1)->host, "b");
    CHECK_STR(find_act(&p, JOB_ACT_CREATE, 2)->host, "c");
    CHECK(find_act(&p, JOB_ACT_CREATE, 0)->host_pinned);
    apply(&w, &p);
    job_plan_free(&p);
    for (size_t i = 0; i < w.n; i++) w.t[i].state = TASK_RUNNING;
    /* a leaves, d joins. */
    w.hosts[0] = "b";
    w.hosts[1] = "c";
    w.hosts[2] = "d";
    w.nhosts = 3;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_KILL, 0) != NULL);
    CHECK_I64(count_kind(&p, JOB_ACT_KILL), 1);
    const struct job_action *c = find_act(&p, JOB_ACT_CREATE, 3);
    REQUIRE(c);
    CHECK_STR(c->host, "d");
    CHECK_I64(count_kind(&p, JOB_ACT_CREATE), 1);
    apply(&w, &p);
    job_plan_free(&p);
    world_find(&w, 0)->state = TASK_KILLED;
    /* Instance 0 is deleted; the id is free again for the next new host. */
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_DELETE, 0) != NULL);
    CHECK_I64(count_kind(&p, JOB_ACT_CREATE), 0);
    apply(&w, &p);
    job_plan_free(&p);
    w.hosts[w.nhosts++] = "e";
    world_find(&w, 3)->state = TASK_FAILED; /* daemon on d fails: restarted there */
    REQUIRE(plan(&w, &p) == 0);
    c = find_act(&p, JOB_ACT_CREATE, 0);
    REQUIRE(c);
    CHECK_STR(c->host, "e");
    const struct job_action *r = find_act(&p, JOB_ACT_RESTART, 3);
    REQUIRE(r);
    CHECK_STR(r->host, "d");
    CHECK(r->host_pinned);
    apply(&w, &p);
    job_plan_free(&p);
    /* A second instance pinned to a host already taken is stopped. */
    struct task *dup = add(&w, 9, TASK_RUNNING);
    dup->pinned_host = "b";
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_KILL, 9) != NULL);
    CHECK(find_act(&p, JOB_ACT_KILL, 1) == NULL);
    job_plan_free(&p);
    /* No hosts: every instance stops. */
    w.nhosts = 0;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(count_kind(&p, JOB_ACT_KILL) + count_kind(&p, JOB_ACT_DELETE), w.n);
    job_plan_free(&p);
}

TEST(job_kill_and_delete_goals) {
    struct world w;
    world_init(&w, JOB_STATELESS, 5);
    add(&w, 0, TASK_RUNNING);
    add(&w, 1, TASK_PENDING);
    add(&w, 2, TASK_KILLING);
    add(&w, 3, TASK_SUCCEEDED);
    add(&w, 4, TASK_INITIALIZED);
    w.spec.goal = JOB_GOAL_KILL;
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_KILL, 0) && find_act(&p, JOB_ACT_KILL, 1) && find_act(&p, JOB_ACT_KILL, 4));
    CHECK(!find_act(&p, JOB_ACT_KILL, 2) && !find_act(&p, JOB_ACT_KILL, 3));
    CHECK_I64(count_kind(&p, JOB_ACT_CREATE) + count_kind(&p, JOB_ACT_RESTART), 0);
    CHECK_I64(p.state, JOB_KILLING);
    apply(&w, &p);
    job_plan_free(&p);
    for (size_t i = 0; i < w.n; i++)
        if (w.t[i].state == TASK_KILLING) w.t[i].state = TASK_KILLED;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(p.state, JOB_KILLED);
    CHECK_I64(count_kind(&p, JOB_ACT_DELETE), 0);
    job_plan_free(&p);
    w.spec.goal = JOB_GOAL_DELETE;
    REQUIRE(plan(&w, &p) == 0);
    CHECK_I64(count_kind(&p, JOB_ACT_DELETE), 5);
    CHECK_I64(p.state, JOB_DELETED);
    apply(&w, &p);
    job_plan_free(&p);
    CHECK_I64(w.n, 0);
    /* Back to RUN (job start): instances come back. */
    w.spec.goal = JOB_GOAL_RUN;
    add(&w, 0, TASK_KILLED);
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_RESTART, 0) != NULL);
    CHECK_I64(count_kind(&p, JOB_ACT_CREATE), 4);
    job_plan_free(&p);
}

TEST(job_instance_stop_and_held) {
    struct world w;
    world_init(&w, JOB_STATELESS, 3);
    add(&w, 0, TASK_RUNNING)->stop = true;
    add(&w, 1, TASK_KILLED)->stop = true;
    add(&w, 2, TASK_FAILED)->held = true;
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_KILL, 0) != NULL);
    CHECK(find_act(&p, JOB_ACT_RESTART, 1) == NULL);
    CHECK(find_act(&p, JOB_ACT_DELETE, 1) == NULL);
    CHECK(find_act(&p, JOB_ACT_RESTART, 2) == NULL); /* the update restarts it */
    job_plan_free(&p);
    w.t[2].held = false;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_RESTART, 2) != NULL);
    job_plan_free(&p);
}

TEST(job_timeouts_and_deadline) {
    struct world w;
    world_init(&w, JOB_BATCH, 3);
    add(&w, 0, TASK_PLACING)->state_since_ms = 0;
    add(&w, 1, TASK_LAUNCHING)->state_since_ms = 0;
    add(&w, 2, TASK_RUNNING);
    w.now = 600000;
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    const struct job_action *a = find_act(&p, JOB_ACT_TIMEOUT, 0);
    REQUIRE(a);
    CHECK_I64(a->to, TASK_READY);
    CHECK(find_act(&p, JOB_ACT_TIMEOUT, 1) == NULL);
    CHECK_I64(p.next_deadline_ms, 1200000);
    apply(&w, &p);
    job_plan_free(&p);
    CHECK_I64(world_find(&w, 0)->state, TASK_READY);
    w.now = 1200000;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_TIMEOUT, 1) != NULL);
    CHECK_I64(p.next_deadline_ms, INT64_MAX);
    job_plan_free(&p);
    /* Custom timeouts are an input. */
    struct task_config cfg = {.placing_timeout_ms = 10, .launching_timeout_ms = 20};
    w.now = 10;
    w.t[0].state = TASK_PLACING;
    w.t[0].state_since_ms = 0;
    struct job_input in = {.spec = &w.spec, .tasks = w.t, .ntasks = w.n, .task_cfg = &cfg, .now_ms = 10};
    REQUIRE(job_reconcile(&in, &p, NULL, 0) == 0);
    CHECK(find_act(&p, JOB_ACT_TIMEOUT, 0) != NULL);
    job_plan_free(&p);
}

TEST(job_state_derive_rules) {
    struct job_spec s = {.type = JOB_BATCH};
    struct job_counts c;
    memset(&c, 0, sizeof c);
    CHECK_I64(job_state_derive(&s, &c), JOB_INITIALIZED);
    c.n[TASK_INITIALIZED] = 2;
    c.total = 2;
    CHECK_I64(job_state_derive(&s, &c), JOB_INITIALIZED);
    c.n[TASK_INITIALIZED] = 1;
    c.n[TASK_PENDING] = 1;
    CHECK_I64(job_state_derive(&s, &c), JOB_PENDING);
    c.n[TASK_PENDING] = 0;
    c.n[TASK_RUNNING] = 1;
    CHECK_I64(job_state_derive(&s, &c), JOB_RUNNING);
    memset(&c, 0, sizeof c);
    c.n[TASK_SUCCEEDED] = 3;
    c.total = 3;
    CHECK_I64(job_state_derive(&s, &c), JOB_SUCCEEDED);
    c.n[TASK_SUCCEEDED] = 2;
    c.n[TASK_KILLED] = 1;
    CHECK_I64(job_state_derive(&s, &c), JOB_KILLED);
    c.n[TASK_KILLED] = 0;
    c.n[TASK_FAILED] = 1;
    CHECK_I64(job_state_derive(&s, &c), JOB_FAILED);
    c.n[TASK_DELETED] = 4; /* deleted records do not count */
    c.total += 4;
    CHECK_I64(job_state_derive(&s, &c), JOB_FAILED);
    s.goal = JOB_GOAL_KILL;
    CHECK_I64(job_state_derive(&s, &c), JOB_KILLED);
    c.n[TASK_RUNNING] = 1;
    c.total++;
    CHECK_I64(job_state_derive(&s, &c), JOB_KILLING);
    s.goal = JOB_GOAL_DELETE;
    memset(&c, 0, sizeof c);
    CHECK_I64(job_state_derive(&s, &c), JOB_DELETED);
}

TEST(job_reconcile_rejects_bad_records) {
    struct world w;
    world_init(&w, JOB_BATCH, 3);
    add(&w, 1, TASK_RUNNING);
    add(&w, 1, TASK_PENDING);
    struct job_plan p;
    char err[256];
    struct job_input in = {.spec = &w.spec, .tasks = w.t, .ntasks = w.n};
    CHECK_I64(job_reconcile(&in, &p, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "duplicate records for instance 1");
    job_plan_free(&p);
    w.t[1].instance = 2;
    w.t[1].state = TASK_RESERVED;
    CHECK_I64(job_reconcile(&in, &p, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "RESERVED");
    job_plan_free(&p);
    /* A DELETED record is ignored, its id reusable. */
    w.t[1].state = TASK_DELETED;
    w.t[1].instance = 1;
    REQUIRE(job_reconcile(&in, &p, err, sizeof err) == 0);
    CHECK_I64(count_kind(&p, JOB_ACT_CREATE), 2);
    job_plan_free(&p);
}

/* job_reconcile takes records in any order; the job manager passes them by
 * id, which job_reconcile reads in place (no copy, no sort): a large job's
 * plan is the same either way. */
TEST(job_reconcile_same_plan_in_any_record_order) {
    enum { N = 3000 };
    static const enum task_state states[] = {TASK_INITIALIZED, TASK_PENDING, TASK_LAUNCHED, TASK_RUNNING,
                                             TASK_KILLING,     TASK_SUCCEEDED, TASK_FAILED, TASK_LOST,
                                             TASK_KILLED}; /* no DELETED: the in-place path */
    struct task *t = calloc(N, sizeof *t);
    REQUIRE(t != NULL);
    struct job_spec spec = {.type = JOB_STATEFUL, .instance_count = N + 10, .min_running = 5, .config_version = 2};
    uint64_t seed = 11;
    size_t n = 0;
    for (uint32_t i = 0; i < N; i++) {
        if (test_range(&seed, 0, 9) == 0) continue; /* missing: a CREATE */
        task_init(&t[n], i, 1, 0);
        t[n].state = states[test_range(&seed, 0, (int64_t)(sizeof states / sizeof *states) - 1)];
        t[n].state_since_ms = test_range(&seed, 0, 5000);
        t[n].failures = (uint32_t)test_range(&seed, 0, 2);
        t[n].desired_version = 2;
        t[n].last_host = i % 2 ? "h1" : "h2";
        n++;
    }
    struct job_input in = {.spec = &spec, .tasks = t, .ntasks = n, .now_ms = 100000};
    struct job_plan a, b;
    char err[256];
    REQUIRE(job_reconcile(&in, &a, err, sizeof err) == 0);
    for (size_t i = n - 1; i > 0; i--) { /* shuffled */
        size_t j = (size_t)test_range(&seed, 0, (int64_t)i);
        struct task x = t[i];
        t[i] = t[j];
        t[j] = x;
    }
    REQUIRE(job_reconcile(&in, &b, err, sizeof err) == 0);
    CHECK(a.n > 100);
    CHECK_I64(a.n, b.n);
    CHECK_I64(a.state, b.state);
    CHECK_I64(a.next_deadline_ms, b.next_deadline_ms);
    CHECK(!memcmp(&a.counts, &b.counts, sizeof a.counts));
    size_t same = 0;
    for (size_t k = 0; k < a.n && k < b.n; k++) {
        const struct job_action *x = &a.v[k], *y = &b.v[k];
        same += x->kind == y->kind && x->instance == y->instance && x->run == y->run && x->version == y->version &&
                x->gang == y->gang && x->gang_size == y->gang_size && x->gang_first == y->gang_first &&
                x->gang_first_run == y->gang_first_run && x->count_failure == y->count_failure &&
                ((!x->host && !y->host) || (x->host && y->host && !strcmp(x->host, y->host)));
    }
    CHECK_I64(same, a.n);
    job_plan_free(&a);
    job_plan_free(&b);
    /* a duplicate in otherwise ascending records is still refused */
    struct task d[3];
    static const uint32_t ids[3] = {0, 1, 1};
    for (uint32_t i = 0; i < 3; i++) task_init(&d[i], ids[i], 1, 0);
    in.tasks = d;
    in.ntasks = 3;
    CHECK_I64(job_reconcile(&in, &a, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "duplicate records for instance 1");
    job_plan_free(&a);
    free(t);
}

/* Batch jobs under random failures, losses and preemptions, driven to the end
 * through the reconciler: restarts never exceed maxFailures, LOST and preempted
 * runs are never counted, and the final state matches the instances. */
TEST(job_batch_random_world_runs_to_completion) {
    uint64_t seed = 7;
    for (int round = 0; round < 40; round++) {
        struct world w;
        world_init(&w, JOB_BATCH, (uint32_t)test_range(&seed, 1, 12));
        w.spec.max_failures = (uint32_t)test_range(&seed, 0, 3);
        w.spec.kill_on_preempt = false;
        int steps = 0;
        for (; steps < 500; steps++) {
            struct job_plan p;
            REQUIRE(plan(&w, &p) == 0);
            apply(&w, &p);
            enum job_state st = p.state;
            job_plan_free(&p);
            if (st == JOB_SUCCEEDED || st == JOB_FAILED) break;
            w.now += 1000;
            for (size_t i = 0; i < w.n; i++) {
                struct task *t = &w.t[i];
                if (task_state_terminal(t->state)) continue;
                int64_t r = test_range(&seed, 0, 99);
                if (t->state == TASK_INITIALIZED) task_transition(t, TASK_PENDING, NULL, w.now, NULL, 0);
                else if (t->state == TASK_PENDING) task_transition(t, TASK_READY, NULL, w.now, NULL, 0);
                else if (t->state == TASK_READY) task_transition(t, TASK_PLACING, NULL, w.now, NULL, 0);
                else if (t->state == TASK_PLACING) task_transition(t, TASK_PLACED, "h", w.now, NULL, 0);
                else if (t->state == TASK_PLACED) task_transition(t, TASK_LAUNCHING, NULL, w.now, NULL, 0);
                else if (t->state == TASK_LAUNCHING) task_transition(t, TASK_RUNNING, NULL, w.now, NULL, 0);
                else if (t->state == TASK_PREEMPTING || t->state == TASK_KILLING)
                    task_transition(t, TASK_KILLED, NULL, w.now, NULL, 0);
                else if (t->state == TASK_RUNNING) {
                    enum task_state to = r < 40 ? TASK_SUCCEEDED : r < 60 ? TASK_FAILED
                                       : r < 70 ? TASK_LOST : r < 80 ? TASK_PREEMPTING : TASK_RUNNING;
                    if (to != TASK_RUNNING) CHECK_I64(task_transition(t, to, NULL, w.now, NULL, 0), 0);
                }
            }
        }
        REQUIRE(steps < 500);
        bool any_exhausted = false;
        for (size_t i = 0; i < w.n; i++) {
            CHECK(w.t[i].failures <= w.spec.max_failures);
            CHECK(w.t[i].state == TASK_SUCCEEDED || w.t[i].state == TASK_FAILED);
            if (w.t[i].state == TASK_FAILED) {
                CHECK_I64(w.t[i].failures, w.spec.max_failures);
                any_exhausted = true;
            }
            CHECK(w.t[i].run >= 1 + w.t[i].failures + w.t[i].lost); /* preempted runs add more */
        }
        CHECK_I64(w.n, w.spec.instance_count);
        CHECK_I64(w.spec.state, any_exhausted ? JOB_FAILED : JOB_SUCCEEDED);
    }
}

/* Services back off a crash loop; the plan says how many wait and until when;
 * BATCH restarts are bounded by maxFailures instead and do not wait. */
TEST(job_service_restart_backoff) {
    struct world w;
    world_init(&w, JOB_STATELESS, 2);
    w.now = 100000;
    struct task *t = add(&w, 0, TASK_FAILED);
    t->state_since_ms = 95000;
    t->crash_loop = 2; /* third restart of the loop: 20 s */
    struct task *ok = add(&w, 1, TASK_FAILED);
    ok->state_since_ms = 95000; /* first of a loop: at once */
    struct job_plan p;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_RESTART, 0) == NULL);
    const struct job_action *a = find_act(&p, JOB_ACT_RESTART, 1);
    REQUIRE(a);
    CHECK_I64(a->crash_loop, 1);
    CHECK_I64(p.nbackoff, 1);
    CHECK_I64(p.next_deadline_ms, 115000);
    CHECK_I64(p.state, JOB_INITIALIZED);
    job_plan_free(&p);
    w.now = 115000;
    REQUIRE(plan(&w, &p) == 0);
    a = find_act(&p, JOB_ACT_RESTART, 0);
    REQUIRE(a);
    CHECK_I64(a->crash_loop, 3);
    CHECK_I64(p.nbackoff, 0);
    job_plan_free(&p);
    /* A custom config: 1 s initial. */
    struct task_config cfg;
    task_config_default(&cfg);
    cfg.backoff_initial_ms = 1000;
    w.now = 96000;
    struct job_input in = {.spec = &w.spec, .tasks = w.t, .ntasks = w.n, .task_cfg = &cfg, .now_ms = w.now};
    REQUIRE(job_reconcile(&in, &p, NULL, 0) == 0);
    CHECK_I64(p.next_deadline_ms, 97000);
    job_plan_free(&p);
    /* Every instance waiting: the job is not FAILED, it will run again. */
    w.t[1].crash_loop = 2;
    REQUIRE(job_reconcile(&in, &p, NULL, 0) == 0);
    CHECK_I64(p.nbackoff, 2);
    CHECK_I64(p.state, JOB_INITIALIZED);
    CHECK_I64(p.counts.n[TASK_FAILED], 2);
    job_plan_free(&p);

    world_init(&w, JOB_BATCH, 1);
    w.spec.max_failures = 3;
    w.now = 100000;
    t = add(&w, 0, TASK_FAILED);
    t->state_since_ms = 99000;
    t->crash_loop = 5;
    REQUIRE(plan(&w, &p) == 0);
    CHECK(find_act(&p, JOB_ACT_RESTART, 0) != NULL);
    CHECK_I64(p.nbackoff, 0);
    job_plan_free(&p);
}
