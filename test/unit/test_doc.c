#include <stdlib.h>

#include "entitle.h"
#include "simjson.h"
#include "simpools.h"
#include "test.h"
#include "yamljson.h"

static json_t *parse(const char *s, char *err) { return doc_parse(s, strlen(s), err, 256); }

TEST(doc_yaml_scalars_resolve) {
    char err[256];
    json_t *v = parse("a: 1\nb: 1.5\nc: \"2\"\nd: true\ne: ~\nf: 250m\ng: 2Gi\nh: '1e3'\ni: -3\nj: [x, 2]\n", err);
    REQUIRE(v);
    CHECK(json_integer_value(json_object_get(v, "a")) == 1);
    CHECK(json_real_value(json_object_get(v, "b")) == 1.5);
    CHECK_STR(json_string_value(json_object_get(v, "c")), "2");
    CHECK(json_is_true(json_object_get(v, "d")));
    CHECK(json_is_null(json_object_get(v, "e")));
    CHECK_STR(json_string_value(json_object_get(v, "f")), "250m");
    CHECK_STR(json_string_value(json_object_get(v, "g")), "2Gi");
    CHECK_STR(json_string_value(json_object_get(v, "h")), "1e3");
    CHECK(json_integer_value(json_object_get(v, "i")) == -3);
    CHECK(json_array_size(json_object_get(v, "j")) == 2);
    json_decref(v);
}

TEST(doc_json_and_errors) {
    char err[256];
    json_t *v = parse("  {\"a\": [1, {\"b\": null}]}", err);
    REQUIRE(v);
    json_decref(v);
    CHECK(parse("{\"a\": 1,}", err) == NULL);
    CHECK_HAS(err, "JSON line 1");
    CHECK(parse("{\"a\": 1, \"a\": 2}", err) == NULL); /* duplicate keys */
    CHECK(parse("a: 1\na: 2\n", err) == NULL);
    CHECK_HAS(err, "duplicate key \"a\"");
    CHECK(parse("a: [1, 2\n", err) == NULL);
    CHECK_HAS(err, "YAML line");
    CHECK(parse("", err) == NULL);
    CHECK_HAS(err, "empty document");
    CHECK(parse("a: &x 1\nb: *x\n", err) == NULL);
    CHECK_HAS(err, "not supported");
    CHECK(parse("? [1, 2]\n: 3\n", err) == NULL);
    CHECK_HAS(err, "mapping keys must be scalars");
}

TEST(doc_depth_limits) {
    char err[256];
    char buf[4096];
    int n = DOC_MAX_DEPTH + 5;
    for (int i = 0; i < n; i++) buf[i] = '[';
    for (int i = 0; i < n; i++) buf[n + i] = ']';
    buf[2 * n] = 0;
    CHECK(parse(buf, err) == NULL);
    CHECK_HAS(err, "nested deeper");
    /* YAML flow nesting */
    buf[0] = 'a'; buf[1] = ':'; buf[2] = ' ';
    for (int i = 0; i < n; i++) buf[3 + i] = '[';
    for (int i = 0; i < n; i++) buf[3 + n + i] = ']';
    buf[3 + 2 * n] = 0;
    CHECK(parse(buf, err) == NULL);
    CHECK_HAS(err, "nested deeper");
    /* brackets inside strings do not count */
    json_t *v = parse("{\"a\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}", err);
    CHECK(v != NULL);
    json_decref(v);
}

TEST(doc_load_file_errors) {
    char err[256];
    CHECK(doc_load_file("/nonexistent/file.yaml", err, sizeof err) == NULL);
    CHECK_HAS(err, "No such file");
}

static json_t *load_pools(const char *doc, char *err, struct respool_tree **t, struct sim_cluster *cl) {
    json_t *v = parse(doc, err);
    if (!v) return NULL;
    if (sim_load_pools(v, t, cl, err, 256) != 0) { json_decref(v); return NULL; }
    return v;
}

TEST(simpools_loads_any_order_and_defaults) {
    char err[256];
    struct respool_tree *t;
    struct sim_cluster cl;
    json_t *v = load_pools("capacity: {cpu: 10, memory: 1Gi}\n"
                           "pools:\n"
                           "  - {path: /a/b, demand: {cpu: 4}}\n"
                           "  - {path: /a, reservation: {cpu: 2}, share: 3, static: [cpu]}\n",
                           err, &t, &cl);
    REQUIRE(v);
    CHECK_I64(cl.capacity.v[RES_CPU], 10000);
    CHECK_I64(cl.capacity.v[RES_MEMORY], 1LL << 30);
    CHECK_I64(cl.slack_cpu, 10000); /* default: capacity minus non-slack allocation */
    struct respool *a = respool_lookup(t, "/a"), *b = respool_lookup(t, "/a/b");
    REQUIRE(a && b);
    CHECK_I64(a->cfg.res[RES_CPU].share, 3000);
    CHECK_I64(a->cfg.res[RES_MEMORY].share, 3000);
    CHECK(a->cfg.res[RES_CPU].is_static);
    CHECK(!a->cfg.res[RES_MEMORY].is_static);
    CHECK_I64(b->cfg.res[RES_CPU].limit, RES_UNLIMITED);
    CHECK_I64(b->pending.c[UC_PREEMPT].v[RES_CPU], 4000);
    memset(&b->pending, 0, sizeof b->pending);
    respool_tree_free(t);
    json_decref(v);
}

TEST(simpools_errors_name_the_field) {
    char err[256];
    struct respool_tree *t;
    struct sim_cluster cl;
    struct { const char *doc, *msg; } cases[] = {
        {"[1]", "expected an object"},
        {"capacity: {cpu: 1}\n", "pools: expected a list"},
        {"capacity: {cpu: x}\npools: []\n", "capacity.cpu: quantity \"x\""},
        {"capacity: {cpus: 1}\npools: []\n", "unknown resource kind \"cpus\""},
        {"pools: [{path: /a, reservation: {cpu: \"-1\"}}]\n", "pools[0].reservation.cpu: quantity \"-1\": must not be negative"},
        {"pools: [{path: /a, reservation: {cpu: -1}}]\n", "pools[0].reservation.cpu: -1 is negative"},
        {"pools: [{path: /a, reservation: {cpu: -1.5}}]\n", "pools[0].reservation.cpu: -1.5 is negative"},
        {"pools: [{path: /a, bogus: 1}]\n", "pools[0]: unknown field \"bogus\""},
        {"pools: [{reservation: {}}]\n", "pools[0].path: required"},
        {"pools: [{path: /a, share: -1}]\n", "pools[0].share: expected a number"},
        {"pools: [{path: /a, share: {gpux: 1}}]\n", "unknown resource kind \"gpux\""},
        {"pools: [{path: /a, static: [cpux]}]\n", "pools[0].static[0]"},
        {"pools: [{path: /a, policy: FIFO}]\n", "is not supported"},
        {"pools: [{path: /a, reservation: {cpu: 5}, limit: {cpu: 4}}]\n", "pool /a: cpu reservation 5 exceeds its limit 4"},
        {"pools: [{path: /a, demand: {cpu: 1}}, {path: /a/b}]\n", "pool /a/b: parent /a holds work; only leaf pools hold work"},
        {"pools: [{path: /x/y}]\n", "parent /x does not exist"},
        {"pools: [{path: /a, controllerLimit: 150}]\n", "controller limit 150.000% is outside [0, 100]"},
        {NULL, NULL},
    };
    for (int i = 0; cases[i].doc; i++) {
        err[0] = 0;
        json_t *v = load_pools(cases[i].doc, err, &t, &cl);
        if (v) {
            test_fail(__FILE__, __LINE__, "accepted: %s", cases[i].doc);
            respool_tree_free(t);
            json_decref(v);
            continue;
        }
        CHECK_HAS(err, cases[i].msg);
    }
}
