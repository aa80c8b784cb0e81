/* Placement properties on random fleets and gangs: no host is overcommitted,
 * gangs are atomic, every placement passes the filters, the indexed search
 * picks what a brute-force scan picks, and the same input gives the same
 * placement. */
#include <errno.h>
#include <stdlib.h>

#include "host.h"
#include "place.h"
#include "place_int.h"
#include "test.h"

#define GIB(n) ((int64_t)(n) << 30)

static const char *const zones[] = {"a", "b", "c"};

/* features: labels, GPU, unschedulable, tainted and exclusive hosts. */
static struct host_fleet *random_fleet(uint64_t *s, uint32_t n, bool features) {
    struct host_fleet *f = host_fleet_new();
    char name[32];
    for (uint32_t i = 0; i < n; i++) {
        struct host_spec h = {0};
        snprintf(name, sizeof name, "h%05u", i);
        h.name = name;
        int64_t cores = test_range(s, 1, 4) * 4;
        h.allocatable = (struct resvec){{cores * 1000, GIB(cores * 4), GIB(200), 0}};
        struct host_kv labels[2] = {{"zone", zones[test_range(s, 0, 2)]}, {HOST_LABEL_EXCLUSIVE, "db"}};
        struct host_taint_spec taint = {"dedicated", "x", TAINT_NO_SCHEDULE};
        h.labels = labels;
        h.nlabels = 1;
        if (features) {
            int64_t r = test_range(s, 0, 99);
            if (r < 10) h.allocatable.v[RES_GPU] = 4000;
            else if (r < 15) h.unschedulable = true;
            else if (r < 20) { h.taints = &taint; h.ntaints = 1; }
            else if (r < 23) h.nlabels = 2;
            else if (r < 25) h.draining = true;
            else if (r < 27) h.not_ready = true;
            else if (r < 28) { h.not_ready = true; h.taints = &taint; h.ntaints = 1; }
        }
        for (int k = 0; k < RES_NKINDS; k++)
            h.allocated.v[k] = h.allocatable.v[k] ? test_range(s, 0, h.allocatable.v[k]) : 0;
        if (test_range(s, 0, 3) == 0) h.allocated = resvec_zero();
        if (host_fleet_add(f, &h, NULL)) test_fail(__FILE__, __LINE__, "host_fleet_add");
    }
    return f;
}

static struct place_task random_task(uint64_t *s, bool features, struct host_kv *sel,
                                     struct place_toleration *tol) {
    struct place_task t = {0};
    t.req = (struct resvec){{test_range(s, 1, 40) * 100, test_range(s, 1, 16) * (GIB(1) / 2),
                             test_range(s, 0, 3) * GIB(1), 0}};
    if (features) {
        if (test_range(s, 0, 9) == 0) t.req.v[RES_GPU] = 1000;
        int64_t r = test_range(s, 0, 19);
        if (r == 0) {
            /* pinned to one host by name (the fleets have fewer than 300 hosts) */
            static char names[300][8];
            int64_t h = test_range(s, 0, 299);
            snprintf(names[h], sizeof names[h], "h%05d", (int)h);
            *sel = (struct host_kv){"hostname", names[h]};
            t.selector = sel;
            t.nselector = 1;
        } else if (r < 7) {
            *sel = (struct host_kv){"zone", zones[test_range(s, 0, 2)]};
            t.selector = sel;
            t.nselector = 1;
        }
        if (test_range(s, 0, 4) == 0) {
            *tol = (struct place_toleration){"dedicated", TOL_EXISTS, NULL, TOL_ANY_EFFECT};
            t.tols = tol;
            t.ntols = 1;
        }
    }
    return t;
}

static bool resvec_within(struct resvec a, struct resvec cap) { return resvec_le(a, cap); }

/* Checks one placed task against the filters the random tasks use. */
static void check_host_ok(const struct host_fleet *f, uint32_t h, const struct place_task *t) {
    const struct host *x = &f->hosts[h];
    CHECK(!(x->flags & HOST_CLOSED));
    CHECK(!(x->flags & HOST_EXCLUSIVE));
    if (x->flags & HOST_GPU) CHECK(t->req.v[RES_GPU] > 0);
    if (x->flags & HOST_BLOCK_TAINT) CHECK(t->ntols == 1);
    if (t->nselector) {
        const char *key = t->selector[0].key;
        uint32_t k = host_str_find(f, key, strlen(key));
        CHECK_STR(host_str(f, host_label_value(f, h, k)), t->selector[0].value);
    }
}

TEST(place_prop_no_overcommit_atomic_filters) {
    uint64_t seed = 0x5eed;
    for (int round = 0; round < 6; round++) {
        struct host_fleet *f = random_fleet(&seed, (uint32_t)test_range(&seed, 1, 150), true);
        uint32_t n = f->nhosts;
        struct resvec *base = malloc(n * sizeof *base), *expect = malloc(n * sizeof *expect);
        bool *under = malloc(n * sizeof *under);
        for (uint32_t i = 0; i < n; i++) {
            base[i] = expect[i] = f->hosts[i].allocated;
            under[i] = resvec_within(base[i], f->hosts[i].allocatable);
        }
        struct place_engine *e = place_engine_new(f, NULL);
        REQUIRE(e);
        int placed = 0, failed = 0;
        for (int gi = 0; gi < 300; gi++) {
            struct place_task ts[6];
            struct host_kv sels[6];
            struct place_toleration tols[6];
            uint32_t nt = (uint32_t)test_range(&seed, 1, 6), hosts[6];
            for (uint32_t k = 0; k < nt; k++) ts[k] = random_task(&seed, true, &sels[k], &tols[k]);
            char job[8];
            snprintf(job, sizeof job, "j%d", (int)test_range(&seed, 0, 4));
            struct place_gang g = {job, job, (enum place_strategy)test_range(&seed, 0, 2), ts, nt};
            struct place_failure fail;
            int rc = place_gang(e, &g, hosts, &fail);
            if (rc == 0) {
                placed++;
                for (uint32_t k = 0; k < nt; k++) {
                    REQUIRE(hosts[k] < n);
                    check_host_ok(f, hosts[k], &ts[k]);
                    expect[hosts[k]] = resvec_add(expect[hosts[k]], ts[k].req);
                }
            } else {
                REQUIRE_I64(rc, -ENOSPC);
                failed++;
                uint64_t sum = 0;
                for (int r = 0; r < PR_NREASONS; r++) sum += fail.rejected[r];
                CHECK_I64(sum, n);
                CHECK(fail.task < nt);
            }
            /* atomic: the fleet holds exactly the placed tasks */
            for (uint32_t i = 0; i < n; i++) {
                CHECK(resvec_eq(f->hosts[i].allocated, expect[i]));
                if (under[i]) CHECK(resvec_within(f->hosts[i].allocated, f->hosts[i].allocatable));
            }
        }
        CHECK(placed > 0);
        CHECK(failed > 0);
        struct place_stats st;
        place_engine_stats(e, &st);
        CHECK_I64(st.index_misses, 0);
        CHECK_I64(st.gangs_placed, placed);
        place_engine_free(e);
        host_fleet_free(f);
        free(base);
        free(expect);
        free(under);
    }
}

/* Brute force: the host each strategy should pick for a plain one-task gang. */
static uint32_t oracle(const struct host_fleet *f, const struct place_task *t, enum place_strategy s,
                       const uint32_t *jobcount) {
    uint32_t best = HOST_NONE;
    for (uint32_t i = 0; i < f->nhosts; i++) {
        const struct host *h = &f->hosts[i];
        if (h->flags & (HOST_CLOSED | HOST_EXCLUSIVE | HOST_BLOCK_TAINT)) continue;
        if ((h->flags & HOST_GPU) && t->req.v[RES_GPU] == 0) continue;
        if (!resvec_le(t->req, host_free(h))) continue;
        if (best == HOST_NONE) { best = i; continue; }
        int64_t li = host_free(h).v[RES_CPU], lb = host_free(&f->hosts[best]).v[RES_CPU];
        bool better;
        if (s == PLACE_PACK) better = li < lb; /* best fit; ties: lower index, already best */
        else if (s == PLACE_LEAST_LOADED) better = li >= lb; /* ties: higher index */
        else better = jobcount[i] < jobcount[best] || (jobcount[i] == jobcount[best] && li >= lb);
        if (better) best = i;
    }
    return best;
}

TEST(place_prop_index_matches_brute_force) {
    uint64_t seed = 42;
    for (int round = 0; round < 4; round++) {
        struct host_fleet *f = random_fleet(&seed, round == 3 ? 2000 : (uint32_t)test_range(&seed, 1, 300), true);
        struct place_engine *e = place_engine_new(f, NULL);
        REQUIRE(e);
        uint32_t *jobcount = calloc(f->nhosts, sizeof *jobcount);
        int mismatches = 0, placed = 0;
        for (int i = 0; i < 1500; i++) {
            struct place_task t = random_task(&seed, false, NULL, NULL);
            if (test_range(&seed, 0, 9) == 0) t.req.v[RES_GPU] = 1000;
            enum place_strategy s = (enum place_strategy)test_range(&seed, 0, 2);
            uint32_t want = oracle(f, &t, s, jobcount), got = HOST_NONE;
            struct place_gang g = {"g", "spread", s, &t, 1};
            struct place_failure fail;
            int rc = place_gang(e, &g, &got, &fail);
            if (want == HOST_NONE) {
                CHECK_I64(rc, -ENOSPC);
            } else {
                CHECK_I64(rc, 0);
                if (got != want && mismatches++ < 5)
                    test_fail(__FILE__, __LINE__, "strategy %d: got host %u, brute force %u", s, got, want);
                if (rc == 0) { jobcount[got]++; placed++; }
            }
            /* now and then a host frees everything (its tasks ended) */
            if (test_range(&seed, 0, 19) == 0) {
                uint32_t h = (uint32_t)test_range(&seed, 0, f->nhosts - 1);
                CHECK_I64(place_host_set_allocated(e, h, resvec_zero()), 0);
            }
        }
        CHECK(placed > 0);
        free(jobcount);
        place_engine_free(e);
        host_fleet_free(f);
    }
}

/* Runs a fixed random workload and returns a digest of every decision. */
static uint64_t run_digest(uint64_t seed) {
    struct host_fleet *f = random_fleet(&seed, 200, true);
    struct place_engine *e = place_engine_new(f, NULL);
    uint64_t d = 1469598103934665603ull;
    struct place_task ts[400];
    struct host_kv sels[400];
    struct place_toleration tols[400];
    struct place_gang gangs[100];
    uint32_t off = 0;
    for (int i = 0; i < 100; i++) {
        uint32_t nt = (uint32_t)test_range(&seed, 1, 4);
        for (uint32_t k = 0; k < nt; k++) ts[off + k] = random_task(&seed, true, &sels[off + k], &tols[off + k]);
        gangs[i] = (struct place_gang){"g", i % 2 ? "a" : "b", (enum place_strategy)(i % 3), ts + off, nt};
        off += nt;
    }
    struct place_round r;
    if (place_round(e, gangs, 100, &r) == 0) {
        for (uint32_t i = 0; i < r.ntried; i++) {
            d = (d ^ (uint64_t)(r.gangs[i].rc + 100)) * 1099511628211ull;
            if (r.gangs[i].rc == 0) {
                for (uint32_t k = 0; k < gangs[i].ntasks; k++)
                    d = (d ^ r.hosts[r.gangs[i].first + k]) * 1099511628211ull;
            } else {
                for (int k = 0; k < PR_NREASONS; k++) d = (d ^ r.gangs[i].fail.rejected[k]) * 1099511628211ull;
            }
        }
        place_round_free(&r);
    }
    place_engine_free(e);
    host_fleet_free(f);
    return d;
}

TEST(place_prop_deterministic) {
    for (uint64_t seed = 1; seed <= 5; seed++) {
        uint64_t a = run_digest(seed), b = run_digest(seed);
        CHECK(a == b);
        CHECK(a != run_digest(seed + 100)); /* the digest does see the decisions */
    }
}

/* The scores of place.h, written out plainly (host_free, resvec_le, the
 * division by the kinds counted): what place_score_hosts must give. */
static int64_t ref_score(const struct host_fleet *f, uint32_t h, struct resvec req, uint32_t same,
                         enum place_strategy s) {
    const struct host *x = &f->hosts[h];
    if (!resvec_le(req, host_free(x))) return 0;
    double sum = 0;
    int kinds = 0;
    for (int k = RES_CPU; k <= RES_MEMORY; k++) {
        if (x->allocatable.v[k] <= 0) continue;
        int64_t used = x->allocated.v[k] + req.v[k];
        if (used > x->allocatable.v[k]) used = x->allocatable.v[k];
        sum += (double)used / (double)x->allocatable.v[k];
        kinds++;
    }
    int64_t full = kinds ? (int64_t)(sum * 1000.0 / kinds) : 0, r;
    if (s == PLACE_PACK) r = (full + 50) / 100;
    else if (s == PLACE_LEAST_LOADED) r = (1000 - full + 50) / 100;
    else r = 10 - (int64_t)same * 2 - (full >= 500 ? 1 : 0);
    return r < 0 ? 0 : r > 10 ? 10 : r;
}

TEST(place_prop_judge_is_check_and_score) {
    uint64_t seed = 0x70d6e;
    for (int round = 0; round < 8; round++) {
        struct host_fleet *f = random_fleet(&seed, 200, true);
        struct place_engine *e = place_engine_new(f, NULL);
        REQUIRE(e);
        /* some tasks of job "j" on some hosts, for SPREAD_JOB */
        for (int i = 0; i < 60; i++) host_fleet_add_task(f, (uint32_t)test_range(&seed, 0, 199), "j", NULL, 0);
        uint32_t jid = host_str_find(f, "j", 1);
        for (int k = 0; k < 40; k++) {
            struct host_kv sel;
            struct place_toleration tol;
            struct place_task t = random_task(&seed, true, &sel, &tol);
            uint32_t n = (uint32_t)test_range(&seed, 0, 300), hosts[300], known[300], nk = 0;
            for (uint32_t i = 0; i < n; i++) {
                hosts[i] = test_range(&seed, 0, 9) == 0 ? HOST_NONE : (uint32_t)test_range(&seed, 0, 199);
                if (hosts[i] != HOST_NONE) known[nk++] = hosts[i];
            }
            enum place_strategy s = (enum place_strategy)test_range(&seed, 0, 2);
            uint8_t why[300], why2[300];
            int64_t sc[300], sc2[300];
            REQUIRE_I64(place_judge_hosts(e, &t, "j", s, hosts, n, why, sc), 0);
            REQUIRE_I64(place_check_hosts(e, &t, "j", known, nk, why2), 0);
            REQUIRE_I64(place_score_hosts(e, &t, "j", s, known, nk, sc2), 0);
            for (uint32_t i = 0, j = 0; i < n; i++) {
                if (hosts[i] == HOST_NONE) {
                    CHECK(why[i] == PR_NONE && sc[i] == 0);
                    continue;
                }
                uint32_t same = host_count_get(&f->jobs, host_count_key(hosts[i], jid));
                CHECK_I64(why[i], why2[j]);
                CHECK_I64(sc[i], sc2[j]);
                CHECK_I64(sc[i], ref_score(f, hosts[i], t.req, same, s));
                int over = resvec_first_over(t.req, host_free(&f->hosts[hosts[i]]));
                if (why[i] >= PR_INSUFFICIENT_CPU && why[i] != PR_NONE) CHECK_I64(why[i], PR_INSUFFICIENT_CPU + over);
                if (why[i] == PR_NONE) CHECK_I64(over, -1);
                j++;
            }
        }
        uint32_t bad[2] = {0, 200};
        uint8_t why[2];
        int64_t sc[2];
        struct place_task t = {0};
        CHECK_I64(place_judge_hosts(e, &t, NULL, PLACE_PACK, bad, 2, why, sc), -EINVAL);
        CHECK_I64(place_judge_hosts(e, &t, NULL, (enum place_strategy)7, bad, 1, why, sc), -EINVAL);
        place_engine_free(e);
        host_fleet_free(f);
    }
}
