#include <jansson.h>
#include <stdlib.h>

#include "sim.h"
#include "test.h"

static json_t *run(const char *doc, char *err, size_t errlen) {
    json_error_t je;
    json_t *in = json_loads(doc, 0, &je);
    if (!in) {
        test_fail(__FILE__, __LINE__, "bad test json: %s", je.text);
        return NULL;
    }
    err[0] = 0;
    json_t *out = sim_plan(in, err, errlen);
    json_decref(in);
    return out;
}

static const char *str_at(json_t *arr, size_t i, const char *key) {
    json_t *o = json_array_get(arr, i);
    return key ? json_string_value(json_object_get(o, key)) : json_string_value(o);
}

/* The blog's scenario, second half: team2's demand is back, entitlement is
 * 50/50 and team1, over for the configured checks, gives back 30 cores. */
TEST(admit_plan_sim_blog_scenario) {
    const char *doc =
        "{\"capacity\":{\"cpu\":100},\"preemptionChecks\":2,\"overEntitlementChecks\":{\"/org/team1\":1},"
        "\"pools\":[{\"path\":\"/org\",\"reservation\":{\"cpu\":100}},"
        "{\"path\":\"/org/team1\",\"reservation\":{\"cpu\":50}},"
        "{\"path\":\"/org/team2\",\"reservation\":{\"cpu\":50}}],"
        "\"tasks\":["
        "{\"id\":\"a\",\"pool\":\"/org/team1\",\"resources\":{\"cpu\":40},\"preemptible\":true,\"startTime\":1},"
        "{\"id\":\"b\",\"pool\":\"/org/team1\",\"resources\":{\"cpu\":20},\"preemptible\":true,\"startTime\":2},"
        "{\"id\":\"c\",\"pool\":\"/org/team1\",\"resources\":{\"cpu\":20},\"preemptible\":true,\"startTime\":3,"
        "\"state\":\"READY\"},"
        "{\"id\":\"d\",\"pool\":\"/org/team2\",\"resources\":{\"cpu\":10},\"preemptible\":true}],"
        "\"gangs\":[{\"id\":\"g1\",\"pool\":\"/org/team2\",\"priority\":3,\"preemptible\":true,\"count\":4,"
        "\"resources\":{\"cpu\":10}},"
        "{\"id\":\"g2\",\"pool\":\"/org/team2\",\"preemptible\":true,\"tasks\":[{\"resources\":{\"cpu\":1}}]}]}";
    char err[256];
    json_t *out = run(doc, err, sizeof err);
    REQUIRE(out);
    json_t *pools = json_object_get(out, "pools");
    REQUIRE_I64(json_array_size(pools), 3);
    CHECK_STR(str_at(pools, 1, "path"), "/org/team1");
    CHECK_I64(json_integer_value(json_object_get(json_object_get(json_array_get(pools, 1), "entitlement"), "cpu")),
              50000);
    CHECK_I64(json_integer_value(json_object_get(json_object_get(json_array_get(pools, 2), "entitlement"), "cpu")),
              50000);
    json_t *adm = json_object_get(out, "admitted");
    REQUIRE_I64(json_array_size(adm), 1);
    CHECK_STR(str_at(adm, 0, NULL), "g1");
    json_t *pend = json_object_get(out, "pending");
    REQUIRE_I64(json_array_size(pend), 1);
    CHECK_STR(str_at(pend, 0, "gang"), "g2");
    CHECK_STR(str_at(pend, 0, "check"), "entitlement");
    CHECK_STR(str_at(pend, 0, "reason"), "pool /org/team2 at its cpu entitlement: 50 of 50 cores allocated, gang needs 1; "
                                               "position 1 of 1 in the pool's queue; admitted once its work frees 1 "
                                               "core or its entitlement grows by 1 core");
    json_t *pre = json_object_get(out, "preemptions");
    /* 80 - 50 = 30: c (READY, cheapest) then b (newest running) */
    REQUIRE_I64(json_array_size(pre), 2);
    CHECK_STR(str_at(pre, 0, "task"), "c");
    CHECK_STR(str_at(pre, 1, "task"), "b");
    CHECK_STR(str_at(pre, 0, "reason"), "pool /org/team1 over cpu entitlement by 30 for 2 checks");
    CHECK_STR(str_at(pre, 0, "kind"), "over-entitlement");
    CHECK_I64(json_object_size(json_object_get(out, "overEntitlementChecks")), 0);
    json_decref(out);
}

TEST(admit_plan_sim_intra_pool) {
    const char *doc =
        "{\"capacity\":{\"cpu\":10},\"pools\":[{\"path\":\"/a\",\"reservation\":{\"cpu\":10}}],"
        "\"tasks\":[{\"id\":\"low\",\"pool\":\"/a\",\"resources\":{\"cpu\":6},\"priority\":1,\"preemptible\":true},"
        "{\"id\":\"np\",\"pool\":\"/a\",\"resources\":{\"cpu\":4},\"priority\":0}],"
        "\"gangs\":[{\"id\":\"g7\",\"pool\":\"/a\",\"priority\":5,\"preemptible\":true,\"count\":2,"
        "\"resources\":{\"cpu\":2}}]}";
    char err[256];
    json_t *out = run(doc, err, sizeof err);
    REQUIRE(out);
    json_t *pre = json_object_get(out, "preemptions");
    REQUIRE_I64(json_array_size(pre), 1);
    CHECK_STR(str_at(pre, 0, "task"), "low");
    CHECK_STR(str_at(pre, 0, "gang"), "g7");
    CHECK_STR(str_at(pre, 0, "reason"), "priority 5 gang g7 preempts priority 1 (pool /a short of cpu entitlement by 4)");
    json_decref(out);
}

TEST(admit_plan_sim_bad_input_names_field) {
    static const struct {
        const char *doc, *msg;
    } cases[] = {
        {"{\"capacity\":{},\"pools\":[{\"path\":\"/a\"}],\"tasks\":[{\"id\":\"x\",\"pool\":\"/b\"}]}",
         "tasks[0].pool: no pool \"/b\""},
        {"{\"capacity\":{},\"pools\":[{\"path\":\"/a\"},{\"path\":\"/a/b\"}],\"gangs\":[{\"id\":\"g\",\"pool\":\"/a\"}]}",
         "gangs[0].pool: /a is not a leaf pool"},
        {"{\"capacity\":{},\"pools\":[{\"path\":\"/a\"}],\"tasks\":[{\"id\":\"x\",\"pool\":\"/a\",\"state\":\"DONE\"}]}",
         "tasks[0].state"},
        {"{\"capacity\":{},\"pools\":[{\"path\":\"/a\"}],\"gangs\":[{\"id\":\"g\",\"pool\":\"/a\"},"
         "{\"id\":\"g\",\"pool\":\"/a\"}]}",
         "gangs[1].id: duplicate"},
        {"{\"capacity\":{},\"pools\":[],\"gangs\":[{\"id\":\"g\",\"pool\":\"/a\",\"colour\":1}]}",
         "gangs[0]: unknown field \"colour\""},
        {"{\"capacity\":{},\"pools\":[],\"gangs\":{}}", "gangs: expected a list"},
        {"{\"capacity\":{},\"pools\":[],\"preemptionChecks\":0}", "preemptionChecks"},
        {"{\"capacity\":{},\"pools\":[],\"overEntitlementChecks\":{\"/zz\":1}}", "overEntitlementChecks./zz"},
        {"{\"capacity\":{},\"pools\":[{\"path\":\"/a\"}],\"gangs\":[{\"id\":\"g\",\"pool\":\"/a\",\"tasks\":[]}]}",
         "gangs[0].tasks"},
        {"[]", "input"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256];
        json_t *out = run(cases[i].doc, err, sizeof err);
        CHECK(out == NULL);
        if (out) json_decref(out);
        CHECK_HAS(err, cases[i].msg);
    }
}
