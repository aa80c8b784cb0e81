/* ncache.h: which requests raise the read cache's read-your-writes fence
 * (ncache_write_kind), and that a NULL cache (no native role context)
 * answers nothing and takes every report. The cache's serving rules are
 * covered end to end by test/e2e/test_native_cache.py (real API servers). */
#include "ncache.h"
#include "test.h"

TEST(native_ncache_write_kinds) {
    CHECK(ncache_write_kind("POST", "/apis/peloton.io/v1alpha1/namespaces/default/jobs") == NCACHE_JOBS);
    CHECK(ncache_write_kind("PUT", "/apis/peloton.io/v1alpha1/namespaces/a/jobs/b") == NCACHE_JOBS);
    CHECK(ncache_write_kind("DELETE", "/apis/peloton.io/v1alpha1/namespaces/a/jobs/b?x=1") == NCACHE_JOBS);
    CHECK(ncache_write_kind("DELETE", "/api/v1/namespaces/default/pods/p-0") == NCACHE_PODS);
    CHECK(ncache_write_kind("PATCH", "/api/v1/namespaces/default/pods/p-0/status") == NCACHE_PODS);
    CHECK(ncache_write_kind("POST", "/apis/peloton.io/v1alpha1/resourcepools") == NCACHE_POOLS);
    CHECK(ncache_write_kind("PUT", "/apis/peloton.io/v1alpha1/resourcepools/a") == NCACHE_POOLS);
    /* reads, kinds not cached, a namespace named like a kind, odd paths */
    CHECK(ncache_write_kind("GET", "/apis/peloton.io/v1alpha1/jobs") == -1);
    CHECK(ncache_write_kind("PATCH", "/api/v1/nodes/n1") == -1);
    CHECK(ncache_write_kind("DELETE", "/api/v1/namespaces/pods") == -1);
    CHECK(ncache_write_kind("POST", "/api/v1/namespaces/jobs/events") == -1);
    CHECK(ncache_write_kind("POST", "/apis/batch/v1/namespaces/x/jobs") == -1);
    CHECK(ncache_write_kind("POST", "/apis/peloton.io/v1alpha1/namespaces/x/jobsx") == -1);
    CHECK(ncache_write_kind("POST", "/api/v2/namespaces/x/pods") == -1);
    CHECK(ncache_write_kind("POST", "/apis") == -1);
    CHECK(ncache_write_kind("POST", "/api/") == -1);
    CHECK(ncache_write_kind("POST", "") == -1);
    CHECK(ncache_write_kind("POST", "/healthz") == -1);
}

TEST(native_ncache_null_cache) {
    struct kc_response r = {.status = 200, .raw = "", .rawlen = 0};
    ncache_wrote(NULL, NCACHE_JOBS, &r);
    CHECK(!ncache_usable(NULL, NCACHE_JOBS));
    CHECK(ncache_job(NULL, "x") == NULL);
    CHECK(ncache_pools(NULL) == NULL);
    CHECK(ncache_job_pods(NULL, NULL) == NULL);
}
