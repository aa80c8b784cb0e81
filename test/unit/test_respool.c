#include <errno.h>

#include "respool.h"
#include "test.h"

#define CORES(n) ((int64_t)(n) * 1000)

static struct respool_config cfg_cpu(int64_t res, int64_t lim) {
    struct respool_config c;
    respool_config_default(&c);
    c.res[RES_CPU].reservation = res;
    c.res[RES_CPU].limit = lim;
    return c;
}

static int mk(struct respool_tree *t, const char *path, int64_t res, int64_t lim, char *err) {
    struct respool_config c = cfg_cpu(res, lim);
    return respool_create(t, path, &c, NULL, err, 256);
}

TEST(respool_create_lookup_delete) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(t);
    CHECK_I64(respool_count(t), 1);
    CHECK(respool_lookup(t, "/") == respool_root(t));
    CHECK(mk(t, "/org", CORES(10), RES_UNLIMITED, err) == 0);
    CHECK(mk(t, "/org/a", CORES(4), RES_UNLIMITED, err) == 0);
    CHECK(mk(t, "/org/b", CORES(6), RES_UNLIMITED, err) == 0);
    struct respool *a = respool_lookup(t, "/org/a");
    REQUIRE(a);
    CHECK_STR(a->name, "a");
    CHECK_STR(a->parent->path, "/org");
    CHECK_I64(a->depth, 2);
    CHECK(respool_is_leaf(a));
    CHECK(!respool_is_leaf(respool_lookup(t, "/org")));
    CHECK(respool_by_index(t, a->index) == a);
    CHECK_I64(respool_count(t), 4);
    CHECK(respool_delete(t, "/org", err, sizeof err) == -ENOTEMPTY);
    CHECK_HAS(err, "has 2 child pools");
    CHECK(respool_delete(t, "/org/a", err, sizeof err) == 0);
    CHECK(respool_lookup(t, "/org/a") == NULL);
    CHECK(respool_lookup(t, "/org/b") != NULL);
    CHECK(respool_delete(t, "/org/a", err, sizeof err) == -ENOENT);
    CHECK(respool_delete(t, "/", err, sizeof err) == -EINVAL);
    CHECK_I64(respool_count(t), 3);
    respool_tree_free(t);
}

TEST(respool_many_pools_hash_and_delete) {
    struct respool_tree *t = respool_tree_new();
    char err[256], path[64];
    for (int i = 0; i < 2000; i++) {
        snprintf(path, sizeof path, "/p%d", i);
        REQUIRE(mk(t, path, 0, RES_UNLIMITED, err) == 0);
    }
    for (int i = 0; i < 2000; i += 2) {
        snprintf(path, sizeof path, "/p%d", i);
        REQUIRE(respool_delete(t, path, err, sizeof err) == 0);
    }
    for (int i = 0; i < 2000; i++) {
        snprintf(path, sizeof path, "/p%d", i);
        CHECK((respool_lookup(t, path) != NULL) == (i % 2 == 1));
    }
    CHECK_I64(respool_count(t), 1001);
    int n = 0;
    for (struct respool *p = respool_root(t); p; p = respool_next_preorder(p)) n++;
    CHECK_I64(n, 1001);
    respool_tree_free(t);
}

/* The name index (respool_by_name, what crd_pool_find is): every pool found
 * by its last segment through growth and deletes; a shared name gives the
 * one created first, then the next once that one is gone; the root and
 * unknown names give NULL. */
TEST(respool_by_name_index) {
    struct respool_tree *t = respool_tree_new();
    char err[256], path[64], name[32];
    REQUIRE(t);
    CHECK(respool_by_name(t, "") == NULL);
    CHECK(respool_by_name(t, NULL) == NULL);
    CHECK(respool_by_name(t, "nope") == NULL);
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof path, "/g%d", i);
        REQUIRE(mk(t, path, 0, RES_UNLIMITED, err) == 0);
        for (int j = 0; j < 25; j++) { /* 1,000 leaves: the buckets double several times */
            snprintf(path, sizeof path, "/g%d/l%d-%d", i, i, j);
            REQUIRE(mk(t, path, 0, RES_UNLIMITED, err) == 0);
        }
    }
    for (int i = 0; i < 40; i++)
        for (int j = 0; j < 25; j++) {
            snprintf(name, sizeof name, "l%d-%d", i, j);
            snprintf(path, sizeof path, "/g%d/l%d-%d", i, i, j);
            struct respool *p = respool_by_name(t, name);
            REQUIRE(p);
            CHECK_STR(p->path, path);
        }
    for (int j = 0; j < 25; j += 2) {
        snprintf(path, sizeof path, "/g7/l7-%d", j);
        REQUIRE(respool_delete(t, path, err, sizeof err) == 0);
    }
    for (int j = 0; j < 25; j++) {
        snprintf(name, sizeof name, "l7-%d", j);
        CHECK((respool_by_name(t, name) != NULL) == (j % 2 == 1));
    }
    /* one name under two parents: the first created, then the other */
    REQUIRE(mk(t, "/g3/twin", 0, RES_UNLIMITED, err) == 0);
    REQUIRE(mk(t, "/g1/twin", 0, RES_UNLIMITED, err) == 0);
    CHECK_STR(respool_by_name(t, "twin")->path, "/g3/twin");
    REQUIRE(respool_delete(t, "/g3/twin", err, sizeof err) == 0);
    CHECK_STR(respool_by_name(t, "twin")->path, "/g1/twin");
    REQUIRE(respool_delete(t, "/g1/twin", err, sizeof err) == 0);
    CHECK(respool_by_name(t, "twin") == NULL);
    CHECK_STR(respool_by_name(t, "g39")->path, "/g39");
    CHECK(respool_by_name(t, "/") == NULL);
    respool_tree_free(t);
}

TEST(respool_rule_reservation_le_limit) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    CHECK(mk(t, "/a", CORES(50), CORES(40), err) == -EINVAL);
    CHECK_STR(err, "pool /a: cpu reservation 50 exceeds its limit 40");
    CHECK(respool_lookup(t, "/a") == NULL);
    respool_tree_free(t);
}

TEST(respool_rule_negative_values) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    struct respool_config c = cfg_cpu(0, RES_UNLIMITED);
    c.res[RES_MEMORY].reservation = -1;
    CHECK(respool_create(t, "/a", &c, NULL, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "pool /a: memory reservation -1 is negative");
    c = cfg_cpu(0, RES_UNLIMITED);
    c.res[RES_GPU].share = -500;
    CHECK(respool_create(t, "/a", &c, NULL, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "pool /a: gpu share -0.500 is negative");
    c = cfg_cpu(0, RES_UNLIMITED);
    c.res[RES_DISK].limit = -3;
    CHECK(respool_create(t, "/a", &c, NULL, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "disk limit -3 is negative");
    respool_tree_free(t);
}

TEST(respool_rule_child_limit_le_parent_limit) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(mk(t, "/org", 0, CORES(80), err) == 0);
    CHECK(mk(t, "/org/t", 0, CORES(90), err) == -EINVAL);
    CHECK_STR(err, "pool /org/t: cpu limit 90 exceeds parent /org limit 80");
    CHECK(mk(t, "/org/t", 0, RES_UNLIMITED, err) == 0); /* unlimited: bounded by the parent */
    CHECK_I64(respool_effective_limit(respool_lookup(t, "/org/t"), RES_CPU), CORES(80));
    /* lowering the parent below a child's explicit limit is refused too */
    REQUIRE(mk(t, "/org/u", 0, CORES(70), err) == 0);
    struct respool_config c = cfg_cpu(0, CORES(60));
    CHECK(respool_update(t, "/org", NULL, &c, err, sizeof err) == -EINVAL);
    CHECK_STR(err, "pool /org: cpu limit 60 is below child /org/u limit 70");
    respool_tree_free(t);
}

TEST(respool_rule_children_reservations_le_parent) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(mk(t, "/org", CORES(40), RES_UNLIMITED, err) == 0);
    REQUIRE(mk(t, "/org/a", CORES(30), RES_UNLIMITED, err) == 0);
    CHECK(mk(t, "/org/b", CORES(20), RES_UNLIMITED, err) == -EINVAL);
    CHECK_STR(err, "pool /org/b: children of /org would reserve 50 cpu, more than its reservation 40");
    CHECK(mk(t, "/org/b", CORES(10), RES_UNLIMITED, err) == 0);
    /* growing a child past the parent, or shrinking the parent under its children */
    struct respool_config c = cfg_cpu(CORES(31), RES_UNLIMITED);
    CHECK(respool_update(t, "/org/a", NULL, &c, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "would reserve 41 cpu");
    c = cfg_cpu(CORES(39), RES_UNLIMITED);
    CHECK(respool_update(t, "/org", NULL, &c, err, sizeof err) == -EINVAL);
    CHECK_STR(err, "pool /org: cpu reservation 39 is below its children's total reservation 40");
    CHECK_I64(respool_lookup(t, "/org")->cfg.res[RES_CPU].reservation, CORES(40)); /* unchanged */
    /* top-level pools may reserve more than any capacity: not checked at the root */
    CHECK(mk(t, "/big", CORES(1000000), RES_UNLIMITED, err) == 0);
    respool_tree_free(t);
}

TEST(respool_rule_unique_siblings_and_paths) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(mk(t, "/a", 0, RES_UNLIMITED, err) == 0);
    CHECK(mk(t, "/a", 0, RES_UNLIMITED, err) == -EEXIST);
    CHECK_STR(err, "pool /a: already exists (sibling names are unique)");
    CHECK(mk(t, "/x/y", 0, RES_UNLIMITED, err) == -ENOENT);
    CHECK_STR(err, "pool /x/y: parent /x does not exist");
    const char *bad[] = {"", "a", "/", "/a/", "//a", "/a//b", "/a b", "/a/..", "/a/.", "/é", NULL};
    for (int i = 0; bad[i]; i++) {
        if (mk(t, bad[i], 0, RES_UNLIMITED, err) == 0) test_fail(__FILE__, __LINE__, "accepted %s", bad[i]);
        CHECK_HAS(err, "pool path");
    }
    char deep[256] = "";
    for (int i = 0; i < RESPOOL_DEPTH_MAX + 1; i++) strcat(deep, "/d");
    CHECK(mk(t, deep, 0, RES_UNLIMITED, err) == -EINVAL);
    CHECK_HAS(err, "deeper than 16 levels");
    respool_tree_free(t);
}

TEST(respool_rule_root_reserved) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    CHECK(mk(t, "/root", 0, RES_UNLIMITED, err) == -EINVAL);
    CHECK_HAS(err, "reserved for the root pool");
    struct respool_config c = cfg_cpu(0, RES_UNLIMITED);
    CHECK(respool_update(t, "/", NULL, &c, err, sizeof err) == -EINVAL);
    respool_tree_free(t);
}

TEST(respool_rule_parent_immutable) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(mk(t, "/a", 0, RES_UNLIMITED, err) == 0);
    REQUIRE(mk(t, "/b", 0, RES_UNLIMITED, err) == 0);
    REQUIRE(mk(t, "/a/x", 0, RES_UNLIMITED, err) == 0);
    struct respool_config c = cfg_cpu(0, RES_UNLIMITED);
    CHECK(respool_update(t, "/a/x", "/b", &c, err, sizeof err) == -EINVAL);
    CHECK_STR(err, "pool /a/x: parent is immutable (is /a, asked /b)");
    CHECK(respool_update(t, "/a/x", "/a", &c, err, sizeof err) == 0);
    respool_tree_free(t);
}

TEST(respool_rule_percent_limits) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    struct respool_config c = cfg_cpu(0, RES_UNLIMITED);
    c.controller_limit_pct = 101 * RESPOOL_PCT_ONE;
    CHECK(respool_create(t, "/a", &c, NULL, err, sizeof err) == -EINVAL);
    CHECK_STR(err, "pool /a: controller limit 101.000% is outside [0, 100]");
    c = cfg_cpu(0, RES_UNLIMITED);
    c.slack_limit_pct = -1;
    CHECK(respool_create(t, "/a", &c, NULL, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "slack limit");
    c = cfg_cpu(CORES(10), RES_UNLIMITED);
    c.controller_limit_pct = 50 * RESPOOL_PCT_ONE;
    REQUIRE(respool_create(t, "/a", &c, NULL, err, sizeof err) == 0);
    struct respool *a = respool_lookup(t, "/a");
    CHECK_I64(respool_controller_limit(a).v[RES_CPU], CORES(5));
    CHECK_I64(respool_slack_limit(a).v[RES_CPU], CORES(2)); /* default 20% */
    respool_tree_free(t);
}

TEST(respool_rule_only_leaves_hold_work) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(mk(t, "/a", 0, RES_UNLIMITED, err) == 0);
    struct respool *a = respool_lookup(t, "/a");
    usage_add(&a->alloc, WF_PREEMPTIBLE, (struct resvec){{1000, 0, 0, 0}});
    CHECK(mk(t, "/a/x", 0, RES_UNLIMITED, err) == -EINVAL);
    CHECK_STR(err, "pool /a/x: parent /a holds work; only leaf pools hold work");
    CHECK(respool_delete(t, "/a", err, sizeof err) == -EBUSY);
    usage_sub(&a->alloc, WF_PREEMPTIBLE, (struct resvec){{1000, 0, 0, 0}});
    CHECK(mk(t, "/a/x", 0, RES_UNLIMITED, err) == 0);
    respool_tree_free(t);
}

TEST(respool_usage_classes_and_rollup) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(mk(t, "/o", 0, RES_UNLIMITED, err) == 0);
    REQUIRE(mk(t, "/o/a", 0, RES_UNLIMITED, err) == 0);
    REQUIRE(mk(t, "/o/b", 0, RES_UNLIMITED, err) == 0);
    struct respool *a = respool_lookup(t, "/o/a"), *b = respool_lookup(t, "/o/b");
    struct resvec one = {{1000, 1 << 20, 0, 0}};
    usage_add(&a->alloc, 0, one);                                /* non-preemptible */
    usage_add(&a->alloc, WF_PREEMPTIBLE | WF_CONTROLLER, one);   /* preemptible controller */
    usage_add(&b->alloc, WF_REVOCABLE | WF_PREEMPTIBLE, one);    /* revocable */
    usage_add(&b->pending, WF_PREEMPTIBLE, one);
    CHECK(usage_class_of(WF_REVOCABLE | WF_PREEMPTIBLE) == UC_REVOCABLE);
    respool_rollup(t);
    struct respool *o = respool_lookup(t, "/o");
    CHECK_I64(o->alloc.c[UC_NONPREEMPT].v[RES_CPU], 1000);
    CHECK_I64(o->alloc.c[UC_PREEMPT].v[RES_CPU], 1000);
    CHECK_I64(o->alloc.c[UC_CONTROLLER].v[RES_CPU], 1000);
    CHECK_I64(o->alloc.c[UC_REVOCABLE].v[RES_CPU], 1000);
    CHECK_I64(o->pending.c[UC_PREEMPT].v[RES_MEMORY], 1 << 20);
    CHECK_I64(usage_nonslack(&o->alloc).v[RES_CPU], 2000);
    CHECK_I64(respool_root(t)->alloc.c[UC_REVOCABLE].v[RES_CPU], 1000);
    memset(&a->alloc, 0, sizeof a->alloc);
    memset(&b->alloc, 0, sizeof b->alloc);
    memset(&b->pending, 0, sizeof b->pending);
    respool_tree_free(t);
}

TEST(respool_validate_tree_whole) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(mk(t, "/o", CORES(10), RES_UNLIMITED, err) == 0);
    REQUIRE(mk(t, "/o/a", CORES(10), RES_UNLIMITED, err) == 0);
    CHECK(respool_validate_tree(t, err, sizeof err) == 0);
    respool_lookup(t, "/o")->cfg.res[RES_CPU].reservation = CORES(5); /* corrupt behind the API */
    CHECK(respool_validate_tree(t, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "/o");
    respool_tree_free(t);
}

/* A pool marked deleting (issue #16) keeps its place and usage until it is
 * empty: it takes no new child pools, and goes only without children or work. */
TEST(respool_deleting_pool_takes_no_children_and_goes_when_empty) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    REQUIRE(mk(t, "/org", 0, RES_UNLIMITED, err) == 0);
    REQUIRE(mk(t, "/org/a", 0, RES_UNLIMITED, err) == 0);
    struct respool *org = respool_lookup(t, "/org"), *a = respool_lookup(t, "/org/a");
    org->deleting = a->deleting = true;
    CHECK_I64(mk(t, "/org/b", 0, RES_UNLIMITED, err), -EPERM);
    CHECK_STR(err, "pool /org/b: parent /org is being deleted; it takes no new child pools");
    CHECK_I64(respool_delete(t, "/org", err, sizeof err), -ENOTEMPTY);
    usage_add(&a->alloc, WF_PREEMPTIBLE, (struct resvec){{1000, 0, 0, 0}});
    CHECK(respool_holds_work(a));
    CHECK_I64(respool_delete(t, "/org/a", err, sizeof err), -EBUSY);
    usage_sub(&a->alloc, WF_PREEMPTIBLE, (struct resvec){{1000, 0, 0, 0}});
    CHECK(!respool_holds_work(a));
    CHECK_I64(respool_delete(t, "/org/a", err, sizeof err), 0);
    CHECK_I64(respool_delete(t, "/org", err, sizeof err), 0);
    respool_tree_free(t);
}
