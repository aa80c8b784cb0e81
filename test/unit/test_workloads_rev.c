/* The workloads controller's revision records (src/ctl/workloads_rev.c):
 * the template hash that names a Deployment's ReplicaSets, and the
 * annotations of a revision brought back by kubectl rollout undo. */
#include <stdlib.h>

#include "test.h"
#include "workloads_int.h"

static void hash_of(const char *tpl_json, char out[16]) {
    json_t *t = json_loads(tpl_json, 0, NULL);
    wl_template_hash(t, out);
    json_decref(t);
}

TEST(wl_template_hash_ignores_go_round_trip) {
    char a[16], b[16], c[16], d[16];
    hash_of("{\"metadata\":{\"labels\":{\"app\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:1\"}]}}",
            a);
    /* what kubectl rollout undo copies back: the ReplicaSet's hash label,
     * creationTimestamp null, resources {} */
    hash_of("{\"metadata\":{\"creationTimestamp\":null,\"labels\":{\"app\":\"x\",\"pod-template-hash\":\"zz\"}},"
            "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:1\",\"resources\":{}}]}}",
            b);
    hash_of("{\"metadata\":{\"labels\":{\"app\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:2\"}]}}",
            c);
    hash_of("{\"metadata\":{\"labels\":{\"pod-template-hash\":\"zz\"}},\"spec\":{\"containers\":[]}}", d);
    CHECK_STR(a, b);
    CHECK(strcmp(a, c) != 0);
    CHECK(strlen(a) >= 1 && strlen(a) <= 7);
    CHECK(strspn(a, "bcdfghjklmnpqrstvwxz2456789") == strlen(a));
    CHECK(strlen(d) >= 1);
}

static json_t *rs_with(const char *rev, const char *hist) {
    json_t *ann = json_pack("{s:s}", "deployment.kubernetes.io/revision", rev);
    if (hist) json_object_set_new(ann, "deployment.kubernetes.io/revision-history", json_string(hist));
    return json_pack("{s:{s:o}}", "metadata", "annotations", ann);
}

TEST(wl_rs_rollback_ann_history) {
    json_t *rs = rs_with("1", NULL);
    json_t *a = wl_rs_rollback_ann(rs, "3");
    CHECK_STR(json_string_value(json_object_get(a, "deployment.kubernetes.io/revision")), "3");
    CHECK_STR(json_string_value(json_object_get(a, "deployment.kubernetes.io/revision-history")), "1");
    json_decref(a);
    json_decref(rs);
    rs = rs_with("3", "1");
    a = wl_rs_rollback_ann(rs, "5");
    CHECK_STR(json_string_value(json_object_get(a, "deployment.kubernetes.io/revision-history")), "1,3");
    json_decref(a);
    json_decref(rs);
    /* bounded: the oldest revisions go first */
    char *hist = malloc(2100);
    REQUIRE(hist);
    size_t n = 0;
    for (int i = 1000; n + 5 <= 1999; i++) /* 1999 characters */ n += (size_t)snprintf(hist + n, 2100 - n, "%s%d", n ? "," : "", i);
    rs = rs_with("77777", hist);
    a = wl_rs_rollback_ann(rs, "77778");
    const char *h = json_string_value(json_object_get(a, "deployment.kubernetes.io/revision-history"));
    REQUIRE(h);
    CHECK(strlen(h) <= 2000);
    CHECK_I64(strlen(h), 2000);
    CHECK(strncmp(h, "1001,", 5) == 0);      /* the oldest dropped */
    CHECK_STR(h + strlen(h) - 6, ",77777"); /* the newest appended */
    json_decref(a);
    json_decref(rs);
    free(hist);
    rs = json_pack("{s:{}}", "metadata"); /* no revision yet: no history */
    a = wl_rs_rollback_ann(rs, "2");
    CHECK(json_object_get(a, "deployment.kubernetes.io/revision-history") == NULL);
    json_decref(a);
    json_decref(rs);
}
