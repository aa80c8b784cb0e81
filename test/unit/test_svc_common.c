/* svc_common.h: the services' unit conversions (native cores and MB <->
 * quantity strings and members), reading a list answer, the gRPC code for
 * an API-server answer, instance ranges and UpdateIDs (svc_jobwrite.h). The calls'
 * request and failure paths are covered end to end by
 * test/e2e/test_native_respool.py and test_native_job.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "svc_common.h"
#include "svc_jobwrite.h"
#include "test.h"

/* n units of k written as a quantity and read back, n again. */
static double round_trip(enum res_kind k, double n) {
    char q[64];
    if (svc_quantity(k, n, q, sizeof q)) return NAN;
    json_t *s = json_string(q);
    double back = svc_native_amount(k, s);
    json_decref(s);
    return back;
}

TEST(native_svc_quantities_round_trip) {
    CHECK(round_trip(RES_CPU, 1.5) == 1.5);
    CHECK(round_trip(RES_CPU, 0) == 0);
    CHECK(round_trip(RES_GPU, 2) == 2);
    CHECK(round_trip(RES_MEMORY, 512) == 512);
    CHECK(round_trip(RES_DISK, 0.5) == 0.5);
    char q[64];
    CHECK(svc_quantity(RES_CPU, -1, q, sizeof q) == -1);
    CHECK(svc_quantity(RES_CPU, NAN, q, sizeof q) == -1);
    CHECK(svc_quantity(RES_MEMORY, INFINITY, q, sizeof q) == -1);
    CHECK(svc_quantity(RES_MEMORY, 1e300, q, sizeof q) == -1);
}

TEST(native_svc_amount_members) {
    json_t *v = json_integer(2);
    CHECK(svc_native_amount(RES_CPU, v) == 2); /* an integer is whole cores */
    json_decref(v);
    v = json_integer(3 * 1024 * 1024);
    CHECK(svc_native_amount(RES_MEMORY, v) == 3); /* ... and bytes of memory */
    json_decref(v);
    v = json_string("250m");
    CHECK(svc_native_amount(RES_CPU, v) == 0.25);
    json_decref(v);
    v = json_string("lots");
    CHECK(isnan(svc_native_amount(RES_CPU, v)));
    json_decref(v);
    v = json_true();
    CHECK(isnan(svc_native_amount(RES_CPU, v)));
    CHECK(isnan(svc_native_amount(RES_CPU, NULL)));
}

/* svc_list_items on an answer of status with body raw: whether it finds items. */
static bool has_items(long status, const char *raw) {
    struct kc_response r = {.status = status, .raw = raw, .rawlen = strlen(raw)};
    bool found = svc_list_items(&r) != NULL;
    json_decref(r.body); /* what kc_response_body parsed; kclient frees it after a callback */
    return found;
}

TEST(native_svc_list_items) {
    CHECK(has_items(200, "{\"kind\":\"JobList\",\"items\":[]}"));
    CHECK(has_items(200, "{\"items\":[{\"metadata\":{}}]}"));
    CHECK(!has_items(200, "{\"items\":{}}"));
    CHECK(!has_items(200, "{}"));
    CHECK(!has_items(200, "not json"));
    CHECK(!has_items(200, ""));
    CHECK(!has_items(404, "{\"items\":[]}"));
    CHECK(!has_items(0, ""));
}

/* One mapping of API-server answers to gRPC codes for every service. */
TEST(native_svc_status_codes) {
    CHECK(svc_status_code(0) == NC_UNAVAILABLE);
    CHECK(svc_status_code(400) == NC_INVALID_ARGUMENT);
    CHECK(svc_status_code(422) == NC_INVALID_ARGUMENT);
    CHECK(svc_status_code(401) == NC_UNAUTHENTICATED);
    CHECK(svc_status_code(403) == NC_PERMISSION_DENIED);
    CHECK(svc_status_code(404) == NC_NOT_FOUND);
    CHECK(svc_status_code(409) == NC_ABORTED);
    CHECK(svc_status_code(429) == NC_RESOURCE_EXHAUSTED);
    CHECK(svc_status_code(503) == NC_UNAVAILABLE);
    CHECK(svc_status_code(504) == NC_DEADLINE_EXCEEDED);
    CHECK(svc_status_code(500) == NC_INTERNAL);
    CHECK(svc_status_code(201) == NC_INTERNAL); /* an answer the mapping did not expect */
}

/* svc_jobwrite.h: instance ranges as the writes read them. */
static char *ranges_str(const char *ranges, uint32_t n, bool *past, char *err, size_t errlen) {
    json_t *r = json_loads(ranges, 0, NULL);
    json_t *inst = svc_instances_of(r, n, past, err, errlen);
    json_decref(r);
    char *s = inst ? json_dumps(inst, JSON_COMPACT) : NULL;
    json_decref(inst);
    return s;
}

TEST(native_svc_instance_ranges) {
    char err[256], *s;
    bool past;
    CHECK_STR((s = ranges_str("[]", 3, &past, err, sizeof err)), "[0,1,2]"); /* none: all */
    free(s);
    CHECK_STR((s = ranges_str("[{\"from\":1,\"to\":3},{\"to\":2}]", 5, &past, err, sizeof err)), "[1,2,0]");
    free(s); /* [0,2) after [1,3): 1 is listed once */
    CHECK(!ranges_str("[{\"from\":3,\"to\":1}]", 5, &past, err, sizeof err) && !past);
    CHECK(strstr(err, "ranges[0]: from 3 is not below to 1") != NULL);
    /* past the end: clamped to the job's instances (an open end), unless it starts past them */
    CHECK_STR((s = ranges_str("[{\"to\":1},{\"from\":3,\"to\":2147483647}]", 5, &past, err, sizeof err)), "[0,3,4]");
    free(s);
    CHECK(!ranges_str("[{\"to\":1},{\"from\":7,\"to\":9}]", 5, &past, err, sizeof err) && past);
    CHECK(strstr(err, "ranges[1].from: 7 is past the job's instanceCount 5") != NULL);
    CHECK(!ranges_str("[{}]", 5, &past, err, sizeof err) && !past); /* an empty range names nothing */
}

TEST(native_svc_update_ids) {
    char id[64];
    CHECK(svc_update_job_id("7b1f3c2e-0000-4000-8000-000000000001-12", id, sizeof id) == 0);
    CHECK_STR(id, "7b1f3c2e-0000-4000-8000-000000000001");
    CHECK(svc_update_job_id("abc", id, sizeof id) == -1);
    CHECK(svc_update_job_id("abc-", id, sizeof id) == -1);
    CHECK(svc_update_job_id("-5", id, sizeof id) == -1);
    CHECK(svc_update_job_id("abc-5x", id, sizeof id) == -1);
    json_t *job = json_pack("{s:{s:s,s:{s:s}}}", "metadata", "uid", "j1", "annotations", SVC_A_UPDATE_ID, "j1-4");
    svc_next_update_id(job, id, sizeof id);
    CHECK_STR(id, "j1-5");
    svc_job_annotate(job, SVC_A_UPDATE_ID, NULL);
    svc_next_update_id(job, id, sizeof id);
    CHECK_STR(id, "j1-1");
    json_decref(job);
}
