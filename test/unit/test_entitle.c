#include <errno.h>
#include <stdlib.h>

#include "entitle.h"
#include "respool.h"
#include "test.h"

#define CORES(n) ((int64_t)(n) * 1000)

struct pool_spec {
    const char *path;
    int64_t res, lim, share; /* cpu, cores; share in whole units (-1 = default) */
    bool is_static;
    int64_t demand;          /* pending non-preemptible cpu, cores */
};

static struct respool_tree *build(const struct pool_spec *ps, int n) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    for (int i = 0; i < n; i++) {
        struct respool_config c;
        respool_config_default(&c);
        c.res[RES_CPU].reservation = CORES(ps[i].res);
        c.res[RES_CPU].limit = ps[i].lim < 0 ? RES_UNLIMITED : CORES(ps[i].lim);
        if (ps[i].share >= 0) c.res[RES_CPU].share = ps[i].share * RESPOOL_SHARE_ONE;
        c.res[RES_CPU].is_static = ps[i].is_static;
        struct respool *p;
        if (respool_create(t, ps[i].path, &c, &p, err, sizeof err) != 0) {
            test_fail(__FILE__, __LINE__, "create %s: %s", ps[i].path, err);
            continue;
        }
        p->pending.c[UC_NONPREEMPT].v[RES_CPU] = CORES(ps[i].demand);
    }
    return t;
}

static int64_t ent(struct respool_tree *t, const char *path) {
    struct respool *p = respool_lookup(t, path);
    return p ? p->entitlement.v[RES_CPU] : -1;
}

static void clear_work(struct respool_tree *t) {
    for (struct respool *p = respool_root(t); p; p = respool_next_preorder(p)) {
        memset(&p->alloc, 0, sizeof p->alloc);
        memset(&p->pending, 0, sizeof p->pending);
    }
}

static struct resvec cap_cpu(int64_t cores) { return (struct resvec){{CORES(cores), 0, 0, 0}}; }

TEST(entitle_waterfill_basic) {
    int64_t w[4] = {1, 1, 2, 0}, cap[4] = {10, 100, 100, 100}, out[4], s[8];
    CHECK_I64(entitle_waterfill(4, w, cap, 70, out, s), 70);
    CHECK_I64(out[0], 10); /* saturates */
    CHECK_I64(out[1], 20); /* 60 split 1:2 */
    CHECK_I64(out[2], 40);
    CHECK_I64(out[3], 0);  /* weight 0 gets nothing */
    /* more than all caps: gives only the caps of weighted slots */
    CHECK_I64(entitle_waterfill(4, w, cap, 1000, out, s), 210);
    CHECK_I64(out[3], 0);
    /* remainders: 10 units over weights 1,1,1 -> 4,3,3 (lowest index wins the tie) */
    int64_t w3[3] = {1, 1, 1}, c3[3] = {100, 100, 100}, o3[3], s3[6];
    CHECK_I64(entitle_waterfill(3, w3, c3, 10, o3, s3), 10);
    CHECK_I64(o3[0], 4); CHECK_I64(o3[1], 3); CHECK_I64(o3[2], 3);
    /* largest remainder first: 5 over weights 1,3 -> exact 1.25, 3.75 -> 1, 4 */
    int64_t w2[2] = {1, 3}, c2[2] = {100, 100}, o2[2], s2[4];
    entitle_waterfill(2, w2, c2, 5, o2, s2);
    CHECK_I64(o2[0], 1); CHECK_I64(o2[1], 4);
    CHECK_I64(entitle_waterfill(2, w2, c2, 0, o2, s2), 0);
    CHECK_I64(entitle_waterfill(2, w2, c2, -5, o2, s2), 0);
}

TEST(entitle_waterfill_huge_values) {
    int64_t w[2] = {1000000000, 1}, cap[2] = {INT64_MAX / 2, INT64_MAX / 2}, out[2], s[4];
    int64_t amount = INT64_MAX / 2 + 12345;
    CHECK_I64(entitle_waterfill(2, w, cap, amount, out, s), amount);
    /* neither saturates: the level amount / (1e9 + 1) times each weight, exactly */
    int64_t exp1 = (int64_t)((__int128)amount / 1000000001); /* floor; the odd unit goes by remainder */
    CHECK(out[1] == exp1 || out[1] == exp1 + 1);
    CHECK_I64(out[0] + out[1], amount);
    /* one saturates when its cap is below its fair level; the other stops at its cap */
    cap[0] = 1000;
    CHECK_I64(entitle_waterfill(2, w, cap, amount, out, s), 1000 + INT64_MAX / 2);
    CHECK_I64(out[0], 1000);
    CHECK_I64(out[1], INT64_MAX / 2);
}

/* The worked example of docs/concepts.md and the issue's sample input. */
TEST(entitle_issue_example) {
    struct pool_spec ps[] = {
        {"/org1", 40, 80, 2, true, 0},
        {"/org1/team1", 10, -1, -1, false, 30},
    };
    struct respool_tree *t = build(ps, 2);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    /* org1: demand 30 < static reservation 40; phase 3 fills to its limit 80 */
    CHECK_I64(ent(t, "/org1"), CORES(80));
    CHECK_I64(ent(t, "/org1/team1"), CORES(80));
    CHECK_I64(respool_lookup(t, "/org1")->demand.v[RES_CPU], CORES(30));
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_blog_borrow_and_give_back) {
    struct pool_spec ps[] = {
        {"/team1", 50, -1, -1, false, 80},
        {"/team2", 50, -1, -1, false, 10},
    };
    struct respool_tree *t = build(ps, 2);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    /* team1 borrows team2's idle reservation: 50 + 30 unmet demand + half the idle 10 */
    CHECK_I64(ent(t, "/team1"), CORES(85));
    CHECK_I64(ent(t, "/team2"), CORES(15));
    /* team1 now runs 80; team2's demand returns */
    struct respool *t1 = respool_lookup(t, "/team1"), *t2 = respool_lookup(t, "/team2");
    t1->pending.c[UC_NONPREEMPT].v[RES_CPU] = 0;
    t1->alloc.c[UC_PREEMPT].v[RES_CPU] = CORES(80);
    t2->pending.c[UC_NONPREEMPT].v[RES_CPU] = CORES(50);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    CHECK_I64(ent(t, "/team1"), CORES(50));
    CHECK_I64(ent(t, "/team2"), CORES(50));
    CHECK_I64(t1->alloc.c[UC_PREEMPT].v[RES_CPU] - ent(t, "/team1"), CORES(30)); /* to give back */
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_shares_weight_the_surplus) {
    struct pool_spec ps[] = {
        {"/a", 10, -1, 3, false, 100},
        {"/b", 10, -1, 1, false, 100},
    };
    struct respool_tree *t = build(ps, 2);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    CHECK_I64(ent(t, "/a"), CORES(70)); /* 10 + 60 */
    CHECK_I64(ent(t, "/b"), CORES(30)); /* 10 + 20 */
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_renormalises_when_children_saturate) {
    /* c saturates at demand 5; a and b split the rest 1:1 */
    struct pool_spec ps[] = {
        {"/a", 0, -1, -1, false, 100},
        {"/b", 0, -1, -1, false, 100},
        {"/c", 0, -1, -1, false, 5},
    };
    struct respool_tree *t = build(ps, 3);
    REQUIRE(respool_entitle(t, cap_cpu(65), 0) == 0);
    CHECK_I64(ent(t, "/c"), CORES(5));
    CHECK_I64(ent(t, "/a"), CORES(30));
    CHECK_I64(ent(t, "/b"), CORES(30));
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_static_reservation_without_demand) {
    struct pool_spec ps[] = {
        {"/s", 30, 30, -1, true, 0},  /* static, idle, limit = reservation */
        {"/e", 30, -1, -1, false, 100},
    };
    struct respool_tree *t = build(ps, 2);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    CHECK_I64(ent(t, "/s"), CORES(30));
    CHECK_I64(ent(t, "/e"), CORES(70));
    /* the same pool elastic gives its idle reservation away */
    respool_lookup(t, "/s")->cfg.res[RES_CPU].is_static = false;
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    CHECK_I64(ent(t, "/s"), CORES(0));
    CHECK_I64(ent(t, "/e"), CORES(100));
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_static_child_under_elastic_parent) {
    struct pool_spec ps[] = {
        {"/org", 40, -1, -1, false, 0},
        {"/org/s", 20, 20, -1, true, 0},
        {"/x", 0, -1, -1, false, 1000},
    };
    struct respool_tree *t = build(ps, 3);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    CHECK_I64(ent(t, "/org/s"), CORES(20)); /* the parent's demand counts the static child */
    CHECK_I64(ent(t, "/x"), CORES(80));
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_capacity_below_reservations_scales_down) {
    struct pool_spec ps[] = {
        {"/a", 60, -1, -1, false, 100},
        {"/b", 30, -1, -1, false, 100},
        {"/c", 10, -1, -1, false, 5},
    };
    struct respool_tree *t = build(ps, 3);
    REQUIRE(respool_entitle(t, cap_cpu(50), 0) == 0); /* hosts were lost */
    /* 50 over reservations 60:30:10 capped at a = 60,30,5 -> 30,15,5 */
    CHECK_I64(ent(t, "/a"), CORES(30));
    CHECK_I64(ent(t, "/b"), CORES(15));
    CHECK_I64(ent(t, "/c"), CORES(5));
    CHECK_I64(ent(t, "/a") + ent(t, "/b") + ent(t, "/c"), CORES(50));
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_share_zero_gets_only_reservation) {
    struct pool_spec ps[] = {
        {"/z", 10, -1, 0, false, 100},
        {"/n", 0, 20, -1, false, 100},
    };
    struct respool_tree *t = build(ps, 2);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    CHECK_I64(ent(t, "/z"), CORES(10));
    CHECK_I64(ent(t, "/n"), CORES(20)); /* limited: 70 cores stay with the root, nobody can take them */
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_limits_cap_and_idle_goes_to_others) {
    struct pool_spec ps[] = {
        {"/a", 0, 25, -1, false, 100},
        {"/b", 0, -1, -1, false, 10},
        {"/c", 0, 40, -1, false, 0},
    };
    struct respool_tree *t = build(ps, 3);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    CHECK_I64(ent(t, "/a"), CORES(25));
    /* phase 2: a 25 (limit), b 10; phase 3: 65 over a (0 room), b, c (40 room) by share */
    CHECK_I64(ent(t, "/c"), CORES(32) + 500);
    CHECK_I64(ent(t, "/b"), CORES(42) + 500);
    CHECK_I64(ent(t, "/a") + ent(t, "/b") + ent(t, "/c"), CORES(100));
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_recursion_three_levels) {
    struct pool_spec ps[] = {
        {"/o1", 60, -1, -1, false, 0},
        {"/o1/t1", 30, -1, -1, false, 50},
        {"/o1/t2", 30, -1, -1, false, 5},
        {"/o2", 40, -1, -1, false, 0},
        {"/o2/t1", 40, -1, -1, false, 40},
    };
    struct respool_tree *t = build(ps, 5);
    REQUIRE(respool_entitle(t, cap_cpu(100), 0) == 0);
    /* top: o1 demand 55 (reservation 60 is elastic: only 55 counts), o2 40;
     * the idle 5 is split 1:1 in phase 3 */
    CHECK_I64(ent(t, "/o1"), CORES(57) + 500);
    CHECK_I64(ent(t, "/o2"), CORES(42) + 500);
    /* o1's 57.5: t1 30 + t2 5, t1's unmet 20, then the idle 2.5 split 1:1 */
    CHECK_I64(ent(t, "/o1/t1"), CORES(51) + 250);
    CHECK_I64(ent(t, "/o1/t2"), CORES(6) + 250);
    CHECK_I64(ent(t, "/o2/t1"), CORES(42) + 500);
    CHECK_I64(respool_lookup(t, "/o1")->demand.v[RES_CPU], CORES(55));
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_multi_kind_independent) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    struct respool_config c;
    respool_config_default(&c);
    c.res[RES_MEMORY].reservation = 100LL << 30;
    struct respool *a, *b;
    REQUIRE(respool_create(t, "/a", &c, &a, err, sizeof err) == 0);
    respool_config_default(&c);
    c.res[RES_GPU].limit = 2000;
    REQUIRE(respool_create(t, "/b", &c, &b, err, sizeof err) == 0);
    a->pending.c[UC_PREEMPT] = (struct resvec){{CORES(10), 200LL << 30, 0, 4000}};
    b->pending.c[UC_PREEMPT] = (struct resvec){{CORES(10), 200LL << 30, 0, 4000}};
    struct resvec cap = {{CORES(16), 256LL << 30, 1LL << 40, 8000}};
    REQUIRE(respool_entitle(t, cap, 0) == 0);
    CHECK_I64(a->entitlement.v[RES_CPU], CORES(8));
    CHECK_I64(a->entitlement.v[RES_MEMORY], 178LL << 30); /* 100 + half of 156 */
    CHECK_I64(b->entitlement.v[RES_MEMORY], 78LL << 30);
    CHECK_I64(b->entitlement.v[RES_GPU], 2000);
    CHECK_I64(a->entitlement.v[RES_GPU], 6000);
    CHECK_I64(a->entitlement.v[RES_DISK] + b->entitlement.v[RES_DISK], 1LL << 40);
    clear_work(t);
    respool_tree_free(t);
}

TEST(entitle_slack) {
    struct respool_tree *t = respool_tree_new();
    char err[256];
    struct respool_config c;
    respool_config_default(&c);
    c.res[RES_MEMORY].reservation = 10LL << 30;
    c.slack_limit_pct = 50 * RESPOOL_PCT_ONE;
    struct respool *a, *b;
    REQUIRE(respool_create(t, "/a", &c, &a, err, sizeof err) == 0);
    REQUIRE(respool_create(t, "/b", &c, &b, err, sizeof err) == 0);
    a->pending.c[UC_REVOCABLE] = (struct resvec){{CORES(30), 8LL << 30, 0, 0}};
    b->pending.c[UC_REVOCABLE] = (struct resvec){{CORES(2), 1LL << 30, 0, 0}};
    a->alloc.c[UC_PREEMPT] = (struct resvec){{0, 4LL << 30, 0, 0}};
    struct resvec cap = {{CORES(100), 40LL << 30, 0, 0}};
    REQUIRE(respool_entitle(t, cap, CORES(20)) == 0);
    CHECK_I64(a->slack_entitlement.v[RES_CPU], CORES(18)); /* slack cpu by revocable demand */
    CHECK_I64(b->slack_entitlement.v[RES_CPU], CORES(2));
    /* revocable memory counts in demand up to the slack limit (5Gi): a demands 4 + 5 */
    CHECK_I64(a->demand.v[RES_MEMORY], 9LL << 30);
    CHECK_I64(a->slack_demand.v[RES_MEMORY], 8LL << 30);
    /* slack memory entitlement = min(slack limit 5Gi, entitlement - non-slack alloc) */
    CHECK_I64(a->slack_entitlement.v[RES_MEMORY], 5LL << 30);
    clear_work(t);
    respool_tree_free(t);
}

/* ---- properties on random trees ---- */

struct rnd_tree {
    struct respool_tree *t;
    int n;
};

static struct respool_tree *random_tree(uint64_t *seed, int npools) {
    struct respool_tree *t = respool_tree_new();
    char path[RESPOOL_PATH_MAX], err[256];
    struct respool *all[512];
    int n = 0;
    all[n++] = respool_root(t);
    for (int i = 0; i < npools; i++) {
        struct respool *parent = all[test_range(seed, 0, n - 1)];
        if (parent->depth >= 4 || (parent->parent && !resvec_is_zero(parent->pending.c[UC_PREEMPT])))
            parent = respool_root(t);
        snprintf(path, sizeof path, "%s/p%d", parent->parent ? parent->path : "", i);
        struct respool_config c;
        respool_config_default(&c);
        for (int k = 0; k < RES_NKINDS; k++) {
            int64_t room = parent->parent ? parent->cfg.res[k].reservation : 1000000;
            for (struct respool *s = parent->first_child; s && parent->parent; s = s->next_sibling)
                room -= s->cfg.res[k].reservation;
            c.res[k].reservation = test_range(seed, 0, 3) == 0 ? 0 : test_range(seed, 0, room > 0 ? room : 0) / 2;
            int64_t plim = respool_effective_limit(parent, (enum res_kind)k);
            if (test_range(seed, 0, 2) == 0) {
                int64_t hi = plim == RES_UNLIMITED ? 2000000 : plim;
                c.res[k].limit = test_range(seed, c.res[k].reservation, hi > c.res[k].reservation ? hi : c.res[k].reservation);
            }
            c.res[k].share = test_range(seed, 0, 5) == 0 ? 0 : test_range(seed, 1, 4000);
            c.res[k].is_static = test_range(seed, 0, 4) == 0;
        }
        struct respool *p;
        if (respool_create(t, path, &c, &p, err, sizeof err) != 0) continue;
        if (n < 512) all[n++] = p;
    }
    /* demand on leaves only */
    for (struct respool *p = respool_root(t); p; p = respool_next_preorder(p))
        if (respool_is_leaf(p))
            for (int k = 0; k < RES_NKINDS; k++) p->pending.c[UC_PREEMPT].v[k] = test_range(seed, 0, 300000);
    return t;
}

static void check_properties(struct respool_tree *t, struct resvec cap, const char *label) {
    for (struct respool *p = respool_root(t); p; p = respool_next_preorder(p)) {
        if (!p->first_child) continue;
        for (int k = 0; k < RES_NKINDS; k++) {
            int64_t E = p->entitlement.v[k], sum = 0, sum_a = 0;
            bool room = false, unmet = false;
            for (struct respool *c = p->first_child; c; c = c->next_sibling) {
                const struct respool_kind_cfg *kc = &c->cfg.res[k];
                int64_t e = c->entitlement.v[k];
                sum += e;
                int64_t a = kc->is_static ? kc->reservation : res_min(kc->reservation, c->demand.v[k]);
                sum_a += a;
                if (e > kc->limit)
                    test_fail(__FILE__, __LINE__, "%s: %s above limit", label, c->path);
                if (e < 0) test_fail(__FILE__, __LINE__, "%s: %s negative", label, c->path);
                if (kc->share > 0 && e < kc->limit) room = true;
                if (kc->share > 0 && e < c->demand.v[k]) unmet = true;
            }
            if (sum > E) test_fail(__FILE__, __LINE__, "%s: children of %s exceed it (k=%d)", label, p->path, k);
            if (room && sum != E)
                test_fail(__FILE__, __LINE__, "%s: %s loses %lld of kind %d", label, p->path, (long long)(E - sum), k);
            for (struct respool *c = p->first_child; c; c = c->next_sibling) {
                const struct respool_kind_cfg *kc = &c->cfg.res[k];
                int64_t a = kc->is_static ? kc->reservation : res_min(kc->reservation, c->demand.v[k]);
                if (sum_a <= E && c->entitlement.v[k] < a)
                    test_fail(__FILE__, __LINE__, "%s: %s below min(reservation, demand)", label, c->path);
            }
            /* No child below its fair share while another above it has spare:
             * while any weighted child has unmet demand nothing reached phase 3,
             * and phase-2 gains are proportional to share, each within one unit
             * of lambda * share: (xj - 1) / wj <= (xi + 1) / wi. */
            if (!unmet || sum_a > E) continue;
            for (struct respool *i = p->first_child; i; i = i->next_sibling) {
                const struct respool_kind_cfg *ki = &i->cfg.res[k];
                int64_t ai = ki->is_static ? ki->reservation : res_min(ki->reservation, i->demand.v[k]);
                if (ki->share == 0 || i->entitlement.v[k] >= i->demand.v[k]) continue;
                int64_t xi = i->entitlement.v[k] - ai;
                for (struct respool *j = p->first_child; j; j = j->next_sibling) {
                    const struct respool_kind_cfg *kj = &j->cfg.res[k];
                    int64_t aj = kj->is_static ? kj->reservation : res_min(kj->reservation, j->demand.v[k]);
                    int64_t xj = j->entitlement.v[k] - aj;
                    if ((__int128)(xj - 1) * ki->share > (__int128)(xi + 1) * kj->share)
                        test_fail(__FILE__, __LINE__, "%s: %s has unmet demand at %lld/%lld while %s got %lld/%lld",
                                  label, i->path, (long long)xi, (long long)ki->share, j->path, (long long)xj,
                                  (long long)kj->share);
                }
            }
        }
    }
    (void)cap;
}

TEST(entitle_property_random_trees) {
    uint64_t seed = 7;
    for (int round = 0; round < 300; round++) {
        struct respool_tree *t = random_tree(&seed, (int)test_range(&seed, 1, 60));
        char err[256];
        if (respool_validate_tree(t, err, sizeof err) != 0) test_fail(__FILE__, __LINE__, "invalid tree: %s", err);
        struct resvec cap;
        for (int k = 0; k < RES_NKINDS; k++) cap.v[k] = test_range(&seed, 0, 3000000);
        REQUIRE(respool_entitle(t, cap, test_range(&seed, 0, 100000)) == 0);
        char label[32];
        snprintf(label, sizeof label, "round %d", round);
        check_properties(t, cap, label);
        /* determinism: the same input gives the same entitlement */
        struct resvec first[512];
        int n = 0;
        for (struct respool *p = respool_root(t); p && n < 512; p = respool_next_preorder(p)) first[n++] = p->entitlement;
        REQUIRE(respool_entitle(t, cap, 0) == 0);
        n = 0;
        for (struct respool *p = respool_root(t); p && n < 512; p = respool_next_preorder(p), n++)
            if (!resvec_eq(first[n], p->entitlement)) test_fail(__FILE__, __LINE__, "%s: not deterministic", label);
        clear_work(t);
        respool_tree_free(t);
    }
}

/* A leaf marked deleting admits nothing new, so its waiting work asks for no
 * entitlement (which would otherwise be taken from others, by preemption),
 * while what it holds stays entitled (issue #16). */
TEST(entitle_deleting_leaf_asks_only_for_what_it_holds) {
    struct pool_spec ps[] = {{"/a", 0, -1, -1, false, 80}, {"/b", 0, -1, -1, false, 80}};
    struct respool_tree *t = build(ps, 2);
    struct respool *a = respool_lookup(t, "/a");
    REQUIRE(a);
    a->alloc.c[UC_PREEMPT].v[RES_CPU] = CORES(10);
    a->pending.c[UC_REVOCABLE].v[RES_CPU] = CORES(5);
    REQUIRE(respool_entitle(t, cap_cpu(100), CORES(10)) == 0);
    CHECK_I64(a->demand.v[RES_CPU], CORES(90));
    CHECK_I64(ent(t, "/a"), CORES(50));
    CHECK_I64(a->slack_demand.v[RES_CPU], CORES(5));
    a->deleting = true;
    REQUIRE(respool_entitle(t, cap_cpu(100), CORES(10)) == 0);
    CHECK_I64(a->demand.v[RES_CPU], CORES(10)); /* its allocation only */
    CHECK_I64(a->slack_demand.v[RES_CPU], 0);
    CHECK_I64(a->slack_entitlement.v[RES_CPU], 0);
    /* b's 80 met (before: 50); a keeps its 10, the idle 10 is split by share */
    CHECK_I64(ent(t, "/b"), CORES(85));
    CHECK_I64(ent(t, "/a"), CORES(15));
    respool_tree_free(t);
}
