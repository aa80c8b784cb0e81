/* Placement engine: filters, strategies, gangs, failure reasons. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "place.h"
#include "test.h"

#define CORES(n) ((int64_t)(n) * 1000)
#define GIB(n) ((int64_t)(n) << 30)

static struct resvec rv(int64_t cpu, int64_t mem, int64_t disk, int64_t gpu) {
    return (struct resvec){{cpu, mem, disk, gpu}};
}

/* A host with cpu cores and mem GiB (disk 100 GiB), gpu whole gpus. */
static uint32_t add(struct host_fleet *f, const char *name, int cpu, int mem, int gpu,
                    struct resvec used) {
    struct host_spec s = {0};
    s.name = name;
    s.allocatable = rv(CORES(cpu), GIB(mem), GIB(100), CORES(gpu));
    s.allocated = used;
    uint32_t idx = HOST_NONE;
    int rc = host_fleet_add(f, &s, &idx);
    if (rc) test_fail(__FILE__, __LINE__, "host_fleet_add(%s) = %d", name, rc);
    return idx;
}

static uint32_t add_spec(struct host_fleet *f, struct host_spec s) {
    uint32_t idx = HOST_NONE;
    if (!s.allocatable.v[RES_CPU]) s.allocatable = rv(CORES(8), GIB(32), GIB(100), 0);
    int rc = host_fleet_add(f, &s, &idx);
    if (rc) test_fail(__FILE__, __LINE__, "host_fleet_add(%s) = %d", s.name, rc);
    return idx;
}

static struct place_task tcpu(int64_t milli) {
    struct place_task t = {0};
    t.req = rv(milli, GIB(1), 0, 0);
    return t;
}

/* Places a one-task gang; returns the host index, or -errno. */
static int64_t place1(struct place_engine *e, enum place_strategy s, const struct place_task *t,
                      const char *job, struct place_failure *fail) {
    struct place_gang g = {job, job, s, t, 1};
    uint32_t h = HOST_NONE;
    struct place_failure tmp;
    int rc = place_gang(e, &g, &h, fail ? fail : &tmp);
    return rc ? rc : (int64_t)h;
}

TEST(place_host_model_basics) {
    struct host_fleet *f = host_fleet_new();
    REQUIRE(f);
    struct host_kv labels[] = {{"zone", "a"}, {"hostname", "spoof"}, {HOST_LABEL_EXCLUSIVE, "db"}};
    struct host_taint_spec taints[] = {{"k", "v", TAINT_PREFER_NO_SCHEDULE}};
    struct host_spec s = {.name = "h1", .backend = HOST_MESOS, .labels = labels, .nlabels = 3,
                          .taints = taints, .ntaints = 1};
    s.allocatable = rv(CORES(4), GIB(8), 0, CORES(1));
    uint32_t idx;
    CHECK_I64(host_fleet_add(f, &s, &idx), 0);
    CHECK_I64(idx, 0);
    CHECK_I64(host_fleet_add(f, &s, NULL), -EEXIST);
    s.name = "";
    CHECK_I64(host_fleet_add(f, &s, NULL), -EINVAL);
    s.name = "neg";
    s.allocatable.v[RES_CPU] = -1;
    CHECK_I64(host_fleet_add(f, &s, NULL), -EINVAL);
    CHECK_I64(f->nhosts, 1);
    const struct host *h = &f->hosts[0];
    CHECK(h->flags & HOST_EXCLUSIVE);
    CHECK(h->flags & HOST_GPU);
    CHECK(!(h->flags & HOST_BLOCK_TAINT)); /* PreferNoSchedule only */
    CHECK_I64(h->backend, HOST_MESOS);
    CHECK_STR(host_name(f, 0), "h1");
    CHECK_I64(host_fleet_find(f, "h1"), 0);
    CHECK_I64(host_fleet_find(f, "nope"), HOST_NONE);
    /* hostname is always the host's own name */
    uint32_t kh = host_str_find(f, "hostname", 8);
    CHECK_STR(host_str(f, host_label_value(f, 0, kh)), "h1");
    uint32_t kz = host_str_find(f, "zone", 4), va = host_str_find(f, "a", 1);
    CHECK_I64(host_label_count(f, 0, kz, va), 1);
    CHECK_I64(host_str_find(f, "never", 5), 0);
    CHECK(host_fleet_bytes(f) > 0);
    host_fleet_free(f);
}

TEST(place_count_map_growth_and_clamp) {
    struct host_countmap m = {0};
    CHECK_I64(host_count_get(&m, 5), 0);
    CHECK_I64(host_count_add(&m, 5, -1), 0); /* absent: nothing to subtract */
    for (uint64_t k = 0; k < 5000; k++) REQUIRE(host_count_add(&m, k * 7919, (int32_t)(k % 3 + 1)) == 0);
    for (uint64_t k = 0; k < 5000; k++) CHECK_I64(host_count_get(&m, k * 7919), k % 3 + 1);
    CHECK_I64(host_count_add(&m, 7919, -10), 0);
    CHECK_I64(host_count_get(&m, 7919), 0);
    free(m.keys);
    free(m.vals);
}

TEST(place_fit_every_kind_with_reasons) {
    struct host_fleet *f = host_fleet_new();
    add(f, "cpu", 1, 64, 0, resvec_zero());
    add(f, "mem", 16, 1, 0, resvec_zero());
    struct host_spec s = {.name = "disk"};
    s.allocatable = rv(CORES(16), GIB(64), GIB(1), 0);
    add_spec(f, s);
    struct place_engine *e = place_engine_new(f, NULL);
    REQUIRE(e);
    struct place_task t = {0};
    t.req = rv(CORES(2), GIB(2), GIB(2), 0);
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.nhosts, 3);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_CPU], 1);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_MEMORY], 1);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_DISK], 1);
    char msg[256];
    place_failure_format(&fail, msg, sizeof msg);
    CHECK_STR(msg, "0/3 hosts: 1 insufficient cpu, 1 insufficient disk, 1 insufficient memory");
    /* gpu: a gpu task on a host without gpus */
    t.req = rv(CORES(1), GIB(1), 0, 500);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_GPU], 3); /* everything else fits exactly */
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_CPU], 0);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_MEMORY], 0);
    /* exactly full fits */
    t.req = rv(CORES(1), GIB(64), GIB(100), 0);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    CHECK(resvec_eq(f->hosts[0].allocated, t.req));
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_pack_is_best_fit_across_host_sizes) {
    struct host_fleet *f = host_fleet_new();
    add(f, "big", 64, 256, 0, rv(CORES(54), 0, 0, 0)); /* 10 free */
    add(f, "small", 4, 16, 0, rv(CORES(1), 0, 0, 0));  /* 3 free */
    add(f, "tight", 8, 4, 0, rv(CORES(6), GIB(3), 0, 0)); /* 2 free, 1 GiB free */
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(2));
    t.req.v[RES_MEMORY] = GIB(2);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1); /* tight lacks memory; small is the best fit */
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0); /* small has 1 core left */
    t.req.v[RES_MEMORY] = GIB(1);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 2); /* now tight fits exactly */
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &t, "j", NULL), 0); /* most free cpu */
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_pack_takes_most_allocated_that_fits) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 10, 100, 0, rv(CORES(1), 0, 0, 0));   /* 10% */
    add(f, "b", 10, 100, 0, rv(CORES(5), 0, 0, 0));   /* 50% */
    add(f, "c", 10, 100, 0, rv(CORES(9), 0, 0, 0));   /* 90%, 1 core free */
    add(f, "d", 10, 100, 0, rv(CORES(5), 0, 0, 0));   /* 50%, ties with b */
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(2));
    t.req.v[RES_MEMORY] = 0;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1); /* b: most allocated that fits, lower index than d */
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1); /* b again: now 90% */
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 3); /* b has 1 core left: d */
    struct place_task small = tcpu(CORES(1));
    small.req.v[RES_MEMORY] = 0;
    CHECK_I64(place1(e, PLACE_PACK, &small, "j", NULL), 1); /* b 90%, c 90%: tie -> lower index */
    CHECK_I64(place1(e, PLACE_PACK, &small, "j", NULL), 2); /* b full */
    CHECK_I64(f->hosts[1].allocated.v[RES_CPU], CORES(10));
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_least_loaded_takes_emptiest) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 10, 100, 0, rv(CORES(3), 0, 0, 0));
    add(f, "b", 10, 100, 0, rv(CORES(1), 0, 0, 0));
    add(f, "c", 10, 100, 0, rv(CORES(2), 0, 0, 0));
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(2));
    t.req.v[RES_MEMORY] = 0;
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &t, "j", NULL), 1); /* b 10% -> 30% */
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &t, "j", NULL), 2); /* c 20% */
    /* a 30%, b 30%: tie goes to the higher index */
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &t, "j", NULL), 1);
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &t, "j", NULL), 0);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_spread_job_fewest_instances) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 10, 100, 0, resvec_zero());
    add(f, "b", 10, 100, 0, rv(CORES(5), 0, 0, 0));
    add(f, "c", 10, 100, 0, resvec_zero());
    struct host_kv lbl[] = {{"app", "web"}};
    CHECK_I64(host_fleet_add_task(f, 0, "web", lbl, 1), 0);
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(1));
    t.req.v[RES_MEMORY] = 0;
    /* a has one web task already; c is emptiest without one */
    CHECK_I64(place1(e, PLACE_SPREAD_JOB, &t, "web", NULL), 2);
    CHECK_I64(place1(e, PLACE_SPREAD_JOB, &t, "web", NULL), 1); /* b: 0 instances, though busier */
    int64_t third = place1(e, PLACE_SPREAD_JOB, &t, "web", NULL);
    CHECK(third == 0 || third == 2); /* every host has one: least loaded of them */
    CHECK_I64(third, 0);               /* a 0% vs c 10% */
    /* another job is unaffected by web's counts: least loaded first */
    CHECK_I64(place1(e, PLACE_SPREAD_JOB, &t, "other", NULL), 2);
    /* a gang of 3 spreads over three hosts */
    struct place_task ts[3] = {t, t, t};
    struct place_gang g = {"g", "spread", PLACE_SPREAD_JOB, ts, 3};
    uint32_t hosts[3];
    CHECK_I64(place_gang(e, &g, hosts, NULL), 0);
    CHECK(hosts[0] != hosts[1] && hosts[1] != hosts[2] && hosts[0] != hosts[2]);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_spread_job_candidate_limit) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 10, 100, 0, rv(CORES(1), 0, 0, 0)); /* least loaded, has the job */
    add(f, "b", 10, 100, 0, rv(CORES(2), 0, 0, 0)); /* has the job */
    add(f, "c", 10, 100, 0, rv(CORES(3), 0, 0, 0)); /* no task of the job */
    CHECK_I64(host_fleet_add_task(f, 0, "web", NULL, 0), 0);
    CHECK_I64(host_fleet_add_task(f, 1, "web", NULL, 0), 0);
    struct place_task t = tcpu(CORES(1));
    struct place_options o;
    place_options_default(&o);
    struct place_engine *e = place_engine_new(f, &o);
    CHECK_I64(place1(e, PLACE_SPREAD_JOB, &t, "web", NULL), 2); /* exact: c */
    CHECK_I64(place_host_set_allocated(e, 2, rv(CORES(3), 0, 0, 0)), 0);
    place_engine_free(e);
    host_fleet_add_task(f, 0, "web", NULL, 0); /* a: 2, b: 1 */
    o.spread_max_candidates = 2;
    e = place_engine_new(f, &o);
    /* only a and b are looked at: b has fewer */
    CHECK_I64(place1(e, PLACE_SPREAD_JOB, &t, "web", NULL), 1);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_gpu_hosts_kept_for_gpu_tasks) {
    struct host_fleet *f = host_fleet_new();
    add(f, "gpu", 16, 64, 4, resvec_zero());
    add(f, "plain", 2, 64, 0, resvec_zero());
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(4));
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_GPU_RESERVED], 1);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_CPU], 1);
    struct place_task g = tcpu(CORES(4));
    g.req.v[RES_GPU] = CORES(1);
    CHECK_I64(place1(e, PLACE_PACK, &g, "j", NULL), 0);
    place_engine_free(e);
    /* configured otherwise: any task may use a GPU host */
    struct place_options o;
    place_options_default(&o);
    o.gpu_hosts_any_task = true;
    e = place_engine_new(f, &o);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_exclusive_hosts_need_explicit_target) {
    struct host_fleet *f = host_fleet_new();
    struct host_kv ex[] = {{HOST_LABEL_EXCLUSIVE, "db"}};
    add_spec(f, (struct host_spec){.name = "ex", .labels = ex, .nlabels = 1});
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(1));
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_EXCLUSIVE], 1);
    /* node selector naming the value */
    struct host_kv sel[] = {{HOST_LABEL_EXCLUSIVE, "db"}};
    t.selector = sel;
    t.nselector = 1;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    /* another value is not enough */
    struct host_kv sel2[] = {{HOST_LABEL_EXCLUSIVE, "web"}};
    t.selector = sel2;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_EXCLUSIVE], 1);
    /* affinity In */
    const char *vals[] = {"web", "db"};
    struct place_expr x = {HOST_LABEL_EXCLUSIVE, SEL_IN, vals, 2};
    struct place_term term = {&x, 1};
    struct place_task ta = tcpu(CORES(1));
    ta.terms = &term;
    ta.nterms = 1;
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &ta, "j", NULL), 0);
    /* Peloton constraint: HOST label peloton/exclusive=db EQUAL 1 */
    struct place_constraint c = {.type = PC_LABEL, .kind = PC_HOST, .cond = PC_EQUAL,
                                 .key = HOST_LABEL_EXCLUSIVE, .value = "db", .requirement = 1};
    struct place_task tc = tcpu(CORES(1));
    tc.constraint = &c;
    CHECK_I64(place1(e, PLACE_SPREAD_JOB, &tc, "j", NULL), 0);
    /* a negative constraint (LESS_THAN 1) does not target the host */
    c.cond = PC_LESS_THAN;
    CHECK_I64(place1(e, PLACE_PACK, &tc, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_EXCLUSIVE], 1);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_node_selector) {
    struct host_fleet *f = host_fleet_new();
    struct host_kv la[] = {{"zone", "a"}, {"disk", "ssd"}};
    struct host_kv lb[] = {{"zone", "b"}};
    add_spec(f, (struct host_spec){.name = "a", .labels = la, .nlabels = 2});
    add_spec(f, (struct host_spec){.name = "b", .labels = lb, .nlabels = 1});
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(1));
    struct host_kv s1[] = {{"zone", "b"}};
    t.selector = s1;
    t.nselector = 1;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    struct host_kv s2[] = {{"zone", "a"}, {"disk", "ssd"}};
    t.selector = s2;
    t.nselector = 2;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    struct host_kv s3[] = {{"zone", "b"}, {"disk", "ssd"}};
    t.selector = s3;
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_NODE_SELECTOR], 2);
    struct host_kv s4[] = {{"unknown", "x"}};
    t.selector = s4;
    t.nselector = 1;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_NODE_SELECTOR], 2);
    struct host_kv s5[] = {{"hostname", "b"}};
    t.selector = s5;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    /* pinned by hostname: other hosts are not searched, but still counted on failure */
    struct host_kv s6[] = {{"hostname", "nosuch"}};
    t.selector = s6;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_NODE_SELECTOR], 2);
    struct host_kv s7[] = {{"hostname", "a"}, {"zone", "b"}};
    t.selector = s7;
    t.nselector = 2;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_NODE_SELECTOR], 2);
    t.req.v[RES_CPU] = CORES(100);
    t.nselector = 1;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_NODE_SELECTOR], 1);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_CPU], 1);
    struct place_stats st;
    place_engine_stats(e, &st);
    CHECK_I64(st.index_misses, 0);
    place_engine_free(e);
    host_fleet_free(f);
}

/* One-expression affinity against hosts with label n=1, n=5, n=x and none. */
static int64_t aff_mask(struct place_engine *e, enum sel_op op, const char *const *vals, uint32_t nv) {
    struct place_expr x = {"n", op, vals, nv};
    struct place_term term = {&x, 1};
    int64_t mask = 0;
    for (uint32_t h = 0; h < 4; h++) {
        struct place_task t = tcpu(1);
        t.terms = &term;
        t.nterms = 1;
        struct host_kv sel[] = {{"hostname", h == 0 ? "n1" : h == 1 ? "n5" : h == 2 ? "nx" : "none"}};
        t.selector = sel;
        t.nselector = 1;
        struct place_failure fail;
        int64_t r = place1(e, PLACE_PACK, &t, "j", &fail);
        if (r == -EINVAL) return -EINVAL;
        if (r >= 0) mask |= 1 << h;
    }
    return mask;
}

TEST(place_node_affinity_operators) {
    struct host_fleet *f = host_fleet_new();
    struct host_kv l1[] = {{"n", "1"}, {"z", "a"}}, l5[] = {{"n", "5"}}, lx[] = {{"n", "x"}};
    add_spec(f, (struct host_spec){.name = "n1", .labels = l1, .nlabels = 2});
    add_spec(f, (struct host_spec){.name = "n5", .labels = l5, .nlabels = 1});
    add_spec(f, (struct host_spec){.name = "nx", .labels = lx, .nlabels = 1});
    add_spec(f, (struct host_spec){.name = "none"});
    struct place_engine *e = place_engine_new(f, NULL);
    const char *v1[] = {"1"}, *v15[] = {"1", "5"}, *v3[] = {"3"}, *bad[] = {"x"};
    CHECK_I64(aff_mask(e, SEL_IN, v15, 2), 0x3);
    CHECK_I64(aff_mask(e, SEL_NOT_IN, v1, 1), 0xe); /* hosts without the key match NotIn */
    CHECK_I64(aff_mask(e, SEL_EXISTS, NULL, 0), 0x7);
    CHECK_I64(aff_mask(e, SEL_DOES_NOT_EXIST, NULL, 0), 0x8);
    CHECK_I64(aff_mask(e, SEL_GT, v3, 1), 0x2);
    CHECK_I64(aff_mask(e, SEL_LT, v3, 1), 0x1);
    CHECK_I64(aff_mask(e, SEL_GT, bad, 1), -EINVAL);
    CHECK_I64(aff_mask(e, SEL_IN, NULL, 0), -EINVAL);
    CHECK_I64(aff_mask(e, SEL_EXISTS, v1, 1), -EINVAL);
    /* terms ORed, expressions ANDed */
    struct place_expr t1[] = {{"n", SEL_IN, v1, 1}, {"z", SEL_EXISTS, NULL, 0}};
    struct place_expr t2[] = {{"n", SEL_IN, v1, 1}, {"z", SEL_DOES_NOT_EXIST, NULL, 0}};
    struct place_expr t3[] = {{"n", SEL_GT, v3, 1}};
    struct place_term and_fail = {t2, 2}, and_ok = {t1, 2}, other = {t3, 1}, empty = {NULL, 0};
    struct place_task t = tcpu(1);
    struct place_term terms1[] = {and_fail};
    t.terms = terms1;
    t.nterms = 1;
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_NODE_AFFINITY], 4);
    struct place_term terms2[] = {and_fail, and_ok};
    t.terms = terms2;
    t.nterms = 2;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    struct place_term terms3[] = {empty, other};
    t.terms = terms3;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    struct place_term terms4[] = {empty};
    t.terms = terms4;
    t.nterms = 1;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), -ENOSPC); /* an empty term matches nothing */
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_taints_and_tolerations) {
    struct host_fleet *f = host_fleet_new();
    struct host_taint_spec ns[] = {{"dedicated", "gpu", TAINT_NO_SCHEDULE}};
    struct host_taint_spec ne[] = {{"evict", NULL, TAINT_NO_EXECUTE}};
    struct host_taint_spec pr[] = {{"soft", "x", TAINT_PREFER_NO_SCHEDULE}};
    add_spec(f, (struct host_spec){.name = "ns", .taints = ns, .ntaints = 1});
    add_spec(f, (struct host_spec){.name = "ne", .taints = ne, .ntaints = 1});
    add_spec(f, (struct host_spec){.name = "pr", .taints = pr, .ntaints = 1});
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(1);
    struct host_kv only[1];
    t.selector = only;
    t.nselector = 1;
    struct place_failure fail;
    /* no tolerations: PreferNoSchedule does not block, the others do */
    only[0] = (struct host_kv){"hostname", "pr"};
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 2);
    t.nselector = 0;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 2);
    t.nselector = 1;
    only[0] = (struct host_kv){"hostname", "ns"};
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_TAINT], 1);
    only[0] = (struct host_kv){"hostname", "ne"};
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_TAINT], 1);
    /* Equal with the right value */
    struct place_toleration tol = {"dedicated", TOL_EQUAL, "gpu", TAINT_NO_SCHEDULE};
    t.tols = &tol;
    t.ntols = 1;
    only[0] = (struct host_kv){"hostname", "ns"};
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    tol.value = "cpu";
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), -ENOSPC);
    /* Exists, any effect */
    tol = (struct place_toleration){"dedicated", TOL_EXISTS, NULL, TOL_ANY_EFFECT};
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    /* wrong effect */
    tol.effect = TAINT_NO_EXECUTE;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), -ENOSPC);
    /* empty key with Exists tolerates everything */
    tol = (struct place_toleration){"", TOL_EXISTS, NULL, TOL_ANY_EFFECT};
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    only[0] = (struct host_kv){"hostname", "ne"};
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    /* empty key with Equal is invalid */
    tol.op = TOL_EQUAL;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), -EINVAL);
    /* NoExecute taint with no value: Equal with empty value tolerates */
    tol = (struct place_toleration){"evict", TOL_EQUAL, "", TOL_ANY_EFFECT};
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_label_constraint_host_kind) {
    struct host_fleet *f = host_fleet_new();
    struct host_kv la[] = {{"rack", "r1"}, {"ssd", "yes"}}, lb[] = {{"rack", "r2"}};
    add_spec(f, (struct host_spec){.name = "a", .labels = la, .nlabels = 2});
    add_spec(f, (struct host_spec){.name = "b", .labels = lb, .nlabels = 1});
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_constraint c = {.type = PC_LABEL, .kind = PC_HOST, .cond = PC_EQUAL, .key = "rack",
                                 .value = "r2", .requirement = 1};
    struct place_task t = tcpu(1);
    t.constraint = &c;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    c.cond = PC_LESS_THAN; /* rack=r2 count < 1: not b */
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &t, "j", NULL), 0);
    c.cond = PC_GREATER_THAN;
    c.requirement = 0;
    c.value = "r1";
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &t, "j", NULL), 0);
    c.requirement = 1; /* count is 1, not > 1 */
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_LABEL_CONSTRAINT], 2);
    /* AND / OR */
    struct place_constraint subs[] = {
        {.type = PC_LABEL, .kind = PC_HOST, .cond = PC_EQUAL, .key = "rack", .value = "r2", .requirement = 1},
        {.type = PC_LABEL, .kind = PC_HOST, .cond = PC_EQUAL, .key = "ssd", .value = "yes", .requirement = 1},
    };
    struct place_constraint and_c = {.type = PC_AND, .subs = subs, .nsubs = 2};
    struct place_constraint or_c = {.type = PC_OR, .subs = subs, .nsubs = 2};
    t.constraint = &and_c;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), -ENOSPC);
    t.constraint = &or_c;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL) >= 0, 1);
    struct place_constraint empty_and = {.type = PC_AND}, empty_or = {.type = PC_OR};
    t.constraint = &empty_and;
    CHECK(place1(e, PLACE_PACK, &t, "j", NULL) >= 0);
    t.constraint = &empty_or;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), -ENOSPC);
    /* too deep */
    struct place_constraint chain[PLACE_MAX_CONSTRAINT_DEPTH + 2];
    for (int i = 0; i < PLACE_MAX_CONSTRAINT_DEPTH + 2; i++) {
        chain[i] = (struct place_constraint){.type = PC_AND, .subs = &chain[i + 1], .nsubs = 1};
    }
    chain[PLACE_MAX_CONSTRAINT_DEPTH + 1] = (struct place_constraint){.type = PC_AND};
    t.constraint = chain;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), -EINVAL);
    t.constraint = &chain[2];
    CHECK(place1(e, PLACE_PACK, &t, "j", NULL) >= 0);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_label_constraint_task_kind_anti_affinity_in_gang) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 8, 32, 0, resvec_zero());
    add(f, "b", 8, 32, 0, resvec_zero());
    add(f, "c", 8, 32, 0, resvec_zero());
    struct host_kv pre[] = {{"app", "db"}};
    CHECK_I64(host_fleet_add_task(f, 2, "old", pre, 1), 0);
    struct place_engine *e = place_engine_new(f, NULL);
    /* at most zero other app=db tasks on the host: one per host */
    struct place_constraint c = {.type = PC_LABEL, .kind = PC_TASK, .cond = PC_LESS_THAN, .key = "app",
                                 .value = "db", .requirement = 1};
    struct host_kv lbl[] = {{"app", "db"}};
    struct place_task t = tcpu(CORES(1));
    t.constraint = &c;
    t.labels = lbl;
    t.nlabels = 1;
    struct place_task ts[3] = {t, t, t};
    struct place_gang g = {"g", "db", PLACE_PACK, ts, 2};
    uint32_t hosts[3];
    CHECK_I64(place_gang(e, &g, hosts, NULL), 0);
    CHECK(hosts[0] != hosts[1]);
    CHECK(hosts[0] != 2 && hosts[1] != 2); /* c already has an app=db task */
    /* a third db task cannot go anywhere: the gang fails with the reason */
    struct place_failure fail;
    struct place_gang g3 = {"g3", "db", PLACE_PACK, ts, 1};
    CHECK_I64(place_gang(e, &g3, hosts, &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_LABEL_CONSTRAINT], 3);
    /* count EQUAL 1: co-locate with a db task */
    struct place_constraint co = {.type = PC_LABEL, .kind = PC_TASK, .cond = PC_GREATER_THAN, .key = "app",
                                  .value = "db", .requirement = 0};
    struct place_task tc = tcpu(CORES(1));
    tc.constraint = &co;
    CHECK(place1(e, PLACE_LEAST_LOADED, &tc, "x", NULL) >= 0);
    struct place_constraint none = {.type = PC_LABEL, .kind = PC_TASK, .cond = PC_GREATER_THAN, .key = "app",
                                    .value = "cache", .requirement = 0};
    tc.constraint = &none;
    CHECK_I64(place1(e, PLACE_LEAST_LOADED, &tc, "x", NULL), -ENOSPC);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_host_hint_taken_when_it_fits) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 8, 32, 0, rv(CORES(6), 0, 0, 0));
    add(f, "b", 8, 32, 0, resvec_zero());
    add(f, "c", 8, 32, 0, resvec_zero());
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(1));
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0); /* pack: a */
    t.host_hint = "c";
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 2); /* hint wins */
    t.host_hint = "nosuch";
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    /* hint that does not fit: ignored */
    t.host_hint = "a";
    t.req.v[RES_CPU] = CORES(4);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 2);
    /* hint that fails a filter: ignored */
    struct host_kv sel[] = {{"hostname", "b"}};
    t.selector = sel;
    t.nselector = 1;
    t.host_hint = "c";
    t.req.v[RES_CPU] = CORES(1);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_gang_tentative_accounting) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 4, 32, 0, resvec_zero());
    add(f, "b", 4, 32, 0, resvec_zero());
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(3));
    struct place_task ts[2] = {t, t};
    struct place_gang g = {"g", "j", PLACE_PACK, ts, 2};
    uint32_t hosts[2];
    CHECK_I64(place_gang(e, &g, hosts, NULL), 0);
    CHECK(hosts[0] != hosts[1]);
    CHECK_I64(f->hosts[0].allocated.v[RES_CPU], CORES(3));
    CHECK_I64(f->hosts[1].allocated.v[RES_CPU], CORES(3));
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_gang_all_or_nothing) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 4, 32, 0, rv(CORES(1), 0, 0, 0));
    add(f, "b", 4, 32, 0, resvec_zero());
    add(f, "c", 4, 32, 0, resvec_zero());
    struct place_engine *e = place_engine_new(f, NULL);
    struct host_kv lbl[] = {{"app", "x"}};
    struct place_task t = tcpu(CORES(3));
    t.labels = lbl;
    t.nlabels = 1;
    struct place_task ts[4] = {t, t, t, t};
    struct place_gang g = {"g", "j", PLACE_SPREAD_JOB, ts, 4};
    uint32_t hosts[4];
    struct place_failure fail;
    struct resvec before[3];
    for (int i = 0; i < 3; i++) before[i] = f->hosts[i].allocated;
    CHECK_I64(place_gang(e, &g, hosts, &fail), -ENOSPC);
    CHECK_I64(fail.task, 3);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_CPU], 3); /* counted with the gang's tentative tasks */
    for (int i = 0; i < 3; i++) CHECK(resvec_eq(f->hosts[i].allocated, before[i]));
    uint32_t jid = host_str_find(f, "j", 1), pid = host_pair_find(f, "app", "x");
    for (uint32_t i = 0; i < 3; i++) {
        CHECK_I64(host_count_get(&f->jobs, host_count_key(i, jid)), 0);
        CHECK_I64(host_count_get(&f->tlabels, host_count_key(i, pid)), 0);
    }
    /* and the index is back as it was: three 3-core tasks still fit */
    g.ntasks = 3;
    CHECK_I64(place_gang(e, &g, hosts, &fail), 0);
    struct place_stats st;
    place_engine_stats(e, &st);
    CHECK_I64(st.gangs_failed, 1);
    CHECK_I64(st.gangs_placed, 1);
    CHECK_I64(st.index_misses, 0);
    CHECK_I64(place_gang(e, &(struct place_gang){"z", "j", PLACE_PACK, ts, 0}, hosts, &fail), -EINVAL);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_unschedulable_and_draining) {
    struct host_fleet *f = host_fleet_new();
    add_spec(f, (struct host_spec){.name = "u", .unschedulable = true});
    add_spec(f, (struct host_spec){.name = "d", .draining = true});
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(1);
    t.host_hint = "u";
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_UNSCHEDULABLE], 1);
    CHECK_I64(fail.rejected[PR_DRAINING], 1);
    char msg[128];
    place_failure_format(&fail, msg, sizeof msg);
    CHECK_STR(msg, "0/2 hosts: 1 draining, 1 unschedulable");
    place_engine_free(e);
    host_fleet_free(f);
}

/* Issue #16 item 14: each closed host is counted against what is true of it.
 * A cordoned host is unschedulable; a host that is not ready and carries a
 * taint the task does not tolerate is named by the taint (kube-scheduler's
 * words); not ready alone says so. Before, all of them read "unschedulable". */
TEST(place_closed_hosts_say_why) {
    struct host_fleet *f = host_fleet_new();
    struct host_taint_spec unreach = {"node.kubernetes.io/unreachable", NULL, TAINT_NO_EXECUTE};
    struct host_taint_spec ded = {"dedicated", "ml", TAINT_NO_SCHEDULE};
    add_spec(f, (struct host_spec){.name = "cordoned", .unschedulable = true});
    add_spec(f, (struct host_spec){.name = "gone", .not_ready = true, .taints = &unreach, .ntaints = 1});
    add_spec(f, (struct host_spec){.name = "starting", .not_ready = true});
    add_spec(f, (struct host_spec){.name = "ml1", .taints = &ded, .ntaints = 1});
    add_spec(f, (struct host_spec){.name = "ml2", .taints = &ded, .ntaints = 1});
    add_spec(f, (struct host_spec){.name = "small", .allocatable = rv(CORES(1), GIB(32), GIB(100), 0)});
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(2));
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_UNSCHEDULABLE], 1);
    CHECK_I64(fail.rejected[PR_NOT_READY], 1);
    CHECK_I64(fail.rejected[PR_TAINT], 3);
    CHECK_I64(fail.rejected[PR_INSUFFICIENT_CPU], 1);
    CHECK_I64(fail.ntaints, 2);
    char msg[512];
    int n = place_failure_format_k8s(f, &fail, 1, msg, sizeof msg);
    CHECK_STR(msg, "0/6 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint "
                   "{node.kubernetes.io/unreachable: }, 1 node(s) were not ready, 1 node(s) were unschedulable, "
                   "2 node(s) had untolerated taint {dedicated: ml}.");
    CHECK_I64(n, (int64_t)strlen(msg));
    char small[16];
    CHECK_I64(place_failure_format_k8s(f, &fail, 1, small, sizeof small), n);
    CHECK_STR(small, "0/6 nodes are a");
    /* tolerating the unreachable taint leaves "not ready" */
    struct place_toleration tol = {"node.kubernetes.io/unreachable", TOL_EXISTS, NULL, TOL_ANY_EFFECT};
    t.tols = &tol;
    t.ntols = 1;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.rejected[PR_NOT_READY], 2);
    CHECK_I64(fail.rejected[PR_TAINT], 2);
    place_engine_free(e);
    host_fleet_free(f);
}

/* More distinct taints than a failure names: the rest are counted together. */
TEST(place_failure_names_the_most_frequent_taints) {
    struct host_fleet *f = host_fleet_new();
    char names[8][16], keys[6][16];
    struct host_taint_spec ts[6];
    for (int i = 0; i < 6; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        ts[i] = (struct host_taint_spec){keys[i], "v", TAINT_NO_SCHEDULE};
    }
    /* k5 on three hosts, k0..k4 on one each */
    int which[8] = {0, 1, 2, 3, 4, 5, 5, 5};
    for (int i = 0; i < 8; i++) {
        snprintf(names[i], sizeof names[i], "h%d", i);
        add_spec(f, (struct host_spec){.name = names[i], .taints = &ts[which[i]], .ntaints = 1});
    }
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(1));
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.ntaints, PLACE_FAIL_TAINTS);
    char msg[512];
    place_failure_format_k8s(f, &fail, 1, msg, sizeof msg);
    CHECK_STR(msg, "0/8 nodes are available: 1 node(s) had untolerated taint {k0: v}, 1 node(s) had untolerated "
                   "taint {k1: v}, 1 node(s) had untolerated taint {k2: v}, 2 node(s) had untolerated taints, "
                   "3 node(s) had untolerated taint {k5: v}.");
    place_engine_free(e);
    host_fleet_free(f);
}

/* Issue #16 item 14: a gang that does not fit says how much of it fits and
 * where. Before, four hosts too small for a third member read "4 insufficient
 * cpu (gang: all or nothing)" though two of them could each host a member. */
TEST(place_gang_failure_says_what_fits) {
    struct host_fleet *f = host_fleet_new();
    add(f, "n1", 4, 32, 0, resvec_zero());
    add(f, "n2", 4, 32, 0, resvec_zero());
    add(f, "n3", 1, 32, 0, resvec_zero());
    add(f, "n4", 1, 32, 0, resvec_zero());
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task ts[4] = {tcpu(CORES(3)), tcpu(CORES(3)), tcpu(CORES(3)), tcpu(CORES(3))};
    struct place_gang g = {"g", "g", PLACE_PACK, ts, 4};
    uint32_t hosts[4];
    struct place_failure fail;
    CHECK_I64(place_gang(e, &g, hosts, &fail), -ENOSPC);
    CHECK_I64(fail.task, 2);
    CHECK_I64(fail.fit, 2);
    CHECK_I64(fail.unfit, 2);
    CHECK_I64(fail.untried, 0);
    char msg[512];
    place_failure_format_k8s(f, &fail, 4, msg, sizeof msg);
    CHECK_STR(msg, "gang of 4: 2 members fit (on n1, n2), 2 do not: 0/4 nodes are available: 4 Insufficient cpu.");
    for (uint32_t i = 0; i < 4; i++) CHECK_I64(f->hosts[i].allocated.v[RES_CPU], 0); /* all undone */
    /* a later, smaller member is still tried: it fits (on n1, best fit) */
    ts[3] = tcpu(CORES(1));
    CHECK_I64(place_gang(e, &g, hosts, &fail), -ENOSPC);
    CHECK_I64(fail.fit, 3);
    CHECK_I64(fail.unfit, 1);
    place_failure_format_k8s(f, &fail, 4, msg, sizeof msg);
    CHECK_STR(msg, "gang of 4: 3 members fit (on n1, n2), 1 does not: 0/4 nodes are available: 4 Insufficient cpu.");
    /* nothing fits */
    for (int i = 0; i < 4; i++) ts[i] = tcpu(CORES(5));
    CHECK_I64(place_gang(e, &g, hosts, &fail), -ENOSPC);
    place_failure_format_k8s(f, &fail, 4, msg, sizeof msg);
    CHECK_STR(msg, "gang of 4: no member fits: 0/4 nodes are available: 4 Insufficient cpu.");
    for (uint32_t i = 0; i < 4; i++) CHECK_I64(f->hosts[i].allocated.v[RES_CPU], 0);
    struct place_stats st;
    place_engine_stats(e, &st);
    CHECK_I64(st.index_misses, 0);
    place_engine_free(e);
    host_fleet_free(f);
}

/* Members after the first failure share a bounded search: a gang of many
 * members that no host takes (every host is checked and rejected) stops
 * trying and says how many it did not try. */
TEST(place_gang_failure_bounds_the_rest) {
    struct host_fleet *f = host_fleet_new();
    char names[16][16];
    struct host_kv zone = {"zone", "a"};
    for (int i = 0; i < 16; i++) {
        snprintf(names[i], sizeof names[i], "h%d", i);
        add_spec(f, (struct host_spec){.name = names[i], .labels = &zone, .nlabels = 1});
    }
    struct place_engine *e = place_engine_new(f, NULL);
    struct host_kv sel = {"zone", "b"};
    enum { N = 200 };
    struct place_task *ts = calloc(N, sizeof *ts);
    uint32_t *hosts = calloc(N, sizeof *hosts);
    for (int i = 0; i < N; i++) {
        ts[i] = tcpu(CORES(1));
        ts[i].selector = &sel;
        ts[i].nselector = 1;
    }
    struct place_gang g = {"g", "g", PLACE_PACK, ts, N};
    struct place_failure fail;
    struct place_stats a, b;
    place_engine_stats(e, &a);
    CHECK_I64(place_gang(e, &g, hosts, &fail), -ENOSPC);
    place_engine_stats(e, &b);
    CHECK_I64(fail.fit, 0);
    CHECK(fail.untried > 0);
    CHECK_I64(fail.fit + fail.unfit + fail.untried, N);
    CHECK(b.candidates - a.candidates <= 16 + 2 * 16 + 64 + 16); /* the first search, then the budget */
    char msg[512];
    place_failure_format_k8s(f, &fail, N, msg, sizeof msg);
    char want[512];
    snprintf(want, sizeof want,
             "gang of 200: %u do not fit, %u not tried: 0/16 nodes are available: 16 node(s) didn't match Pod's "
             "node affinity/selector.",
             fail.unfit, fail.untried);
    CHECK_STR(msg, want);
    free(ts);
    free(hosts);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_failure_message_format) {
    struct place_failure fl = {0};
    fl.nhosts = 5000;
    fl.rejected[PR_TAINT] = 1000;
    fl.rejected[PR_INSUFFICIENT_CPU] = 4000;
    char msg[256];
    int n = place_failure_format(&fl, msg, sizeof msg);
    CHECK_STR(msg, "0/5000 hosts: 4000 insufficient cpu, 1000 taint");
    CHECK_I64(n, (int64_t)strlen(msg));
    fl.rejected[PR_NODE_SELECTOR] = 1000; /* tie with taint: by name */
    fl.rejected[PR_INSUFFICIENT_CPU] = 3000;
    place_failure_format(&fl, msg, sizeof msg);
    CHECK_STR(msg, "0/5000 hosts: 3000 insufficient cpu, 1000 node selector, 1000 taint");
    char small[10];
    n = place_failure_format(&fl, small, sizeof small);
    CHECK_I64(n, (int64_t)strlen(msg));
    CHECK_STR(small, "0/5000 ho");
    struct place_failure none = {0};
    place_failure_format(&none, msg, sizeof msg);
    CHECK_STR(msg, "0/0 hosts: no hosts");
    CHECK_STR(place_reason_name(PR_GPU_RESERVED), "gpu host reserved");
}

TEST(place_failure_counts_on_empty_fleet) {
    struct host_fleet *f = host_fleet_new();
    struct place_engine *e = place_engine_new(f, NULL);
    REQUIRE(e);
    struct place_task t = tcpu(1);
    struct place_failure fail;
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", &fail), -ENOSPC);
    CHECK_I64(fail.nhosts, 0);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_round_limits_and_results) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 4, 32, 0, resvec_zero());
    struct place_options o;
    place_options_default(&o);
    o.max_gangs = 3;
    struct place_engine *e = place_engine_new(f, &o);
    struct place_task t = tcpu(CORES(2)), bad = tcpu(1);
    const char *nov[] = {"x"};
    struct place_expr x = {"k", SEL_GT, nov, 1};
    struct place_term term = {&x, 1};
    bad.terms = &term;
    bad.nterms = 1;
    struct place_task two[2] = {t, t};
    struct place_gang gangs[4] = {
        {"g0", "j", PLACE_PACK, &t, 1},
        {"g1", "j", PLACE_PACK, two, 2}, /* only 2 cores left */
        {"g2", "j", PLACE_PACK, &bad, 1},
        {"g3", "j", PLACE_PACK, &t, 1},
    };
    struct place_round r;
    REQUIRE(place_round(e, gangs, 4, &r) == 0);
    CHECK_I64(r.ntried, 3);
    CHECK_I64(r.gangs[0].rc, 0);
    CHECK_I64(r.hosts[r.gangs[0].first], 0);
    CHECK_I64(r.gangs[1].rc, -ENOSPC);
    CHECK_I64(r.gangs[1].fail.task, 1);
    CHECK_I64(r.gangs[1].fail.rejected[PR_INSUFFICIENT_CPU], 1);
    CHECK_I64(r.gangs[2].rc, -EINVAL);
    CHECK_I64(f->hosts[0].allocated.v[RES_CPU], CORES(2));
    place_round_free(&r);
    place_engine_free(e);
    host_fleet_free(f);
}

TEST(place_host_set_allocated_reindexes) {
    struct host_fleet *f = host_fleet_new();
    add(f, "a", 4, 32, 0, resvec_zero());
    add(f, "b", 4, 32, 0, resvec_zero());
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = tcpu(CORES(3));
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 0);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), -ENOSPC);
    CHECK_I64(place_host_set_allocated(e, 1, resvec_zero()), 0); /* the task on b ended */
    CHECK_I64(place1(e, PLACE_PACK, &t, "j", NULL), 1);
    CHECK_I64(place_host_set_allocated(e, 7, resvec_zero()), -EINVAL);
    CHECK_I64(place_host_set_allocated(e, 0, rv(-1, 0, 0, 0)), -EINVAL);
    CHECK(place_engine_bytes(e) > 0);
    place_engine_free(e);
    host_fleet_free(f);
}
