/* Strategic merge patch does work linear in the lists it merges: the steps
 * a patch is charged (patch_apply_counted) grow as n for lists of n = 1,000,
 * 10,000 and 50,000 elements, for every kind of list merge; a 10,000-container
 * merge is accepted under the default limits with most of the budget left;
 * merge keys that cannot be told apart by their hash still pay for every
 * comparison, so a hostile list is refused for its work. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "patch.h"
#include "patch_int.h"
#include "test.h"

/* Limits that hold the largest lists here; work is only counted. */
static struct patch_limits roomy(void) {
    struct patch_limits lim = PATCH_LIMITS_DEFAULT;
    lim.max_bytes = lim.max_nodes = (size_t)1 << 40;
    lim.max_work = SIZE_MAX;
    lim.max_list = 200000;
    return lim;
}

/* [{"name": "<prefix><i>", <field>: <value>}] for i in [from, to). */
static json_t *containers(const char *prefix, int from, int to, const char *field, const char *value) {
    json_t *a = json_array();
    char name[32];
    for (int i = from; i < to; i++) {
        snprintf(name, sizeof name, "%s%d", prefix, i);
        json_array_append_new(a, json_pack("{s:s, s:s}", "name", name, field, value));
    }
    return a;
}

static const char *name_at(const json_t *list, size_t i) {
    return json_string_value(json_object_get(json_array_get(list, i), "name"));
}

/* The kinds of list merge, each built for lists of n. */
enum shape { UPDATE_ALL, ADD_ALL, REORDER_ALL, DELETE_HALF, SCALAR_UNION, RETAIN_HALF, NSHAPES };
static const char *const SHAPE_NAMES[] = {"update every container", "add n containers", "$setElementOrder reversing",
                                          "$patch: delete half", "scalar union and $deleteFromPrimitiveList",
                                          "$retainKeys of half"};

static void build(enum shape sh, int n, json_t **target, json_t **patch) {
    json_t *live = containers("c", 0, n, "image", "x");
    switch (sh) {
    case UPDATE_ALL:
        *patch = json_pack("{s:{s:o}}", "spec", "containers", containers("c", 0, n, "image", "y"));
        break;
    case ADD_ALL:
        *patch = json_pack("{s:{s:o}}", "spec", "containers", containers("p", 0, n, "image", "y"));
        break;
    case REORDER_ALL: {
        json_t *order = json_array(), *list = json_array();
        char name[32];
        for (int i = n - 1; i >= 0; i--) {
            snprintf(name, sizeof name, "c%d", i);
            json_array_append_new(order, json_pack("{s:s}", "name", name));
            if (i % 2) json_array_append_new(list, json_pack("{s:s, s:s}", "name", name, "image", "z"));
        }
        *patch = json_pack("{s:{s:o, s:o}}", "spec", "$setElementOrder/containers", order, "containers", list);
        break;
    }
    case DELETE_HALF: {
        json_t *list = json_array();
        char name[32];
        for (int i = 0; i < n; i += 2) {
            snprintf(name, sizeof name, "c%d", i);
            json_array_append_new(list, json_pack("{s:s, s:s}", "name", name, "$patch", "delete"));
        }
        *patch = json_pack("{s:{s:o}}", "spec", "containers", list);
        break;
    }
    case SCALAR_UNION: {
        json_t *fin = json_array(), *add = json_array(), *del = json_array();
        for (int i = 0; i < n; i++) {
            json_array_append_new(fin, json_sprintf("f%d", i));
            json_array_append_new(add, json_sprintf("f%d", i + n / 2)); /* half of them new */
            if (i % 4 == 0 && i < n / 2) json_array_append_new(del, json_sprintf("f%d", i)); /* none re-added */
        }
        json_decref(live);
        live = NULL;
        *target = json_pack("{s:{s:o}}", "metadata", "finalizers", fin);
        *patch = json_pack("{s:{s:o, s:o}}", "metadata", "finalizers", add, "$deleteFromPrimitiveList/finalizers", del);
        return;
    }
    case RETAIN_HALF: {
        json_t *data = json_object(), *keep = json_array();
        char k[32];
        for (int i = 0; i < n; i++) {
            snprintf(k, sizeof k, "k%d", i);
            json_object_set_new(data, k, json_string("v"));
            if (i % 2) json_array_append_new(keep, json_string(k));
        }
        json_decref(live);
        *target = json_pack("{s:o}", "data", data);
        *patch = json_pack("{s:{s:o}}", "data", "$retainKeys", keep);
        return;
    }
    default: abort();
    }
    *target = json_pack("{s:{s:o}}", "spec", "containers", live);
}

/* Checks the merged result of shape sh for lists of n. */
static void check_result(enum shape sh, int n, const json_t *out) {
    const json_t *cs = json_object_get(json_object_get(out, "spec"), "containers");
    char want[32];
    switch (sh) {
    case UPDATE_ALL:
        CHECK_I64(json_array_size(cs), n);
        CHECK_STR(name_at(cs, 0), "c0");
        snprintf(want, sizeof want, "c%d", n - 1);
        CHECK_STR(name_at(cs, (size_t)n - 1), want);
        CHECK_STR(json_string_value(json_object_get(json_array_get(cs, (size_t)n - 1), "image")), "y");
        break;
    case ADD_ALL: /* new items come before the server-only ones */
        CHECK_I64(json_array_size(cs), 2 * n);
        CHECK_STR(name_at(cs, 0), "p0");
        CHECK_STR(name_at(cs, (size_t)n), "c0");
        break;
    case REORDER_ALL:
        CHECK_I64(json_array_size(cs), n);
        snprintf(want, sizeof want, "c%d", n - 1);
        CHECK_STR(name_at(cs, 0), want);
        CHECK_STR(name_at(cs, (size_t)n - 1), "c0");
        CHECK_STR(json_string_value(json_object_get(json_array_get(cs, 0), "image")), "z");
        break;
    case DELETE_HALF:
        CHECK_I64(json_array_size(cs), n / 2);
        CHECK_STR(name_at(cs, 0), "c1");
        break;
    case SCALAR_UNION: { /* f0..f(n-1) less every fourth below n/2, then f(n)..f(n + n/2 - 1) */
        const json_t *fin = json_object_get(json_object_get(out, "metadata"), "finalizers");
        CHECK_I64(json_array_size(fin), n - n / 8 + n / 2);
        CHECK_STR(json_string_value(json_array_get(fin, 0)), "f1");
        snprintf(want, sizeof want, "f%d", n + n / 2 - 1);
        CHECK_STR(json_string_value(json_array_get(fin, json_array_size(fin) - 1)), want);
        break;
    }
    case RETAIN_HALF: {
        const json_t *data = json_object_get(out, "data");
        CHECK_I64(json_object_size(data), n / 2);
        CHECK(json_object_get(data, "k1") && !json_object_get(data, "k0"));
        break;
    }
    default: abort();
    }
}

/* The steps shape sh costs for lists of n, after checking its result. */
static size_t work_of(enum shape sh, int n) {
    json_t *t, *p, *out = NULL;
    build(sh, n, &t, &p);
    struct patch_limits lim = roomy();
    char err[512] = "";
    size_t work = 0;
    int rc = patch_apply_counted(PATCH_STRATEGIC, t, p, &lim, &out, err, sizeof err, NULL, &work);
    if (rc) test_fail(__FILE__, __LINE__, "%s, n = %d: %d %s", SHAPE_NAMES[sh], n, rc, err);
    else check_result(sh, n, out);
    json_decref(out);
    json_decref(t);
    json_decref(p);
    return work;
}

/* Work per element stays the same from 1,000 to 50,000 (a quadratic merge's
 * would grow 50 times); the bounds leave room for the index's load. */
TEST(patch_linear_work_grows_as_n) {
    for (int sh = 0; sh < NSHAPES; sh++) {
        size_t w1 = work_of((enum shape)sh, 1000), w10 = work_of((enum shape)sh, 10000),
               w50 = work_of((enum shape)sh, 50000);
        double per1 = (double)w1 / 1000, per10 = (double)w10 / 10000, per50 = (double)w50 / 50000;
        if (per10 > 1.15 * per1 || per50 > 1.15 * per10 || per10 < 0.85 * per1 || per50 < 0.85 * per10)
            test_fail(__FILE__, __LINE__, "%s: %.1f, %.1f, %.1f steps an element at 1,000, 10,000, 50,000",
                      SHAPE_NAMES[sh], per1, per10, per50);
        if (getenv("TEST_VERBOSE"))
            fprintf(stderr, "  %s: %zu, %zu, %zu steps (%.1f, %.1f, %.1f an element)\n", SHAPE_NAMES[sh], w1, w10, w50,
                    per1, per10, per50);
    }
}

/* A 10,000-container pod's strategic merge, updating each, under the
 * default limits: accepted, for under a twentieth of the budget. */
TEST(patch_linear_10000_containers_within_default_limits) {
    json_t *t, *p, *out = NULL;
    build(UPDATE_ALL, 10000, &t, &p);
    char err[512] = "";
    size_t work = 0;
    static const struct patch_limits dflt = PATCH_LIMITS_DEFAULT;
    REQUIRE(patch_apply_counted(PATCH_STRATEGIC, t, p, &dflt, &out, err, sizeof err, NULL, &work) == 0);
    check_result(UPDATE_ALL, 10000, out);
    CHECK(work < PATCH_MAX_WORK / 20);
    json_decref(out);
    json_decref(p);
    /* a list longer than max_list is refused before any work */
    json_array_append_new(json_object_get(json_object_get(t, "spec"), "containers"), json_pack("{s:s}", "name", "x"));
    p = json_pack("{s:{s:[]}}", "spec", "containers");
    CHECK_I64(patch_strategic(t, p, &out, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "list \"containers\" has more than 10000 elements");
    json_decref(p);
    json_decref(t);
}

/* containerPorts 2^62 + k * 2^20 + j for j < 512 are distinct integers that
 * all equal the real 2^62 + k * 2^20, their nearest double (patch_value_equal
 * compares an integer with a real as doubles), so no hash separates them:
 * each lookup compares along a bucket of 512, and pays for each comparison. */
static json_t *colliding_ports(int n, const char *extra) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_int_t v = ((json_int_t)1 << 62) + (json_int_t)(i / 512) * (1 << 20) + i % 512;
        json_array_append_new(a, extra ? json_pack("{s:I, s:s}", "containerPort", v, "name", extra)
                                       : json_pack("{s:I}", "containerPort", v));
    }
    return a;
}

TEST(patch_linear_colliding_keys_pay_for_each_comparison) {
    json_t *t = json_pack("{s:[{s:s, s:o}]}", "containers", "name", "c", "ports", colliding_ports(2048, NULL));
    json_t *p = json_pack("{s:[{s:s, s:o}]}", "containers", "name", "c", "ports", colliding_ports(2048, "p"));
    json_t *out = NULL;
    struct patch_limits lim = roomy();
    char err[512] = "";
    size_t work = 0;
    REQUIRE(patch_apply_counted(PATCH_STRATEGIC, t, p, &lim, &out, err, sizeof err, NULL, &work) == 0);
    /* each of 2,048 lookups in the merge, and again in the ordering, passes
     * half a bucket of 512 on average */
    CHECK(work > 2 * 2048 * 256 * PATCH_STEPS_CMP);
    json_t *ports = json_object_get(json_array_get(json_object_get(out, "containers"), 0), "ports");
    CHECK_I64(json_array_size(ports), 2048);
    CHECK_STR(json_string_value(json_object_get(json_array_get(ports, 2047), "name")), "p");
    json_decref(out);
    json_decref(t);
    json_decref(p);
    /* two such lists of 10,000 pass the default budget: refused */
    t = json_pack("{s:[{s:s, s:o}, {s:s, s:o}]}", "containers", "name", "a", "ports", colliding_ports(10000, NULL),
                  "name", "b", "ports", colliding_ports(10000, NULL));
    p = json_pack("{s:[{s:s, s:o}, {s:s, s:o}]}", "containers", "name", "a", "ports", colliding_ports(10000, "p"),
                  "name", "b", "ports", colliding_ports(10000, "p"));
    CHECK_I64(patch_strategic(t, p, &out, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "strategic merge patch: the patch needs more than 12582912 steps of work");
    json_decref(t);
    json_decref(p);
}
