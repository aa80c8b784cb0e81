/* Host maintenance's pure parts: a Node's HostState (svc_host.h) and a
 * Job's maintenance budget (jm_drain_budget, jobmgr_ctl.h). The moves
 * themselves and the HostService calls are covered end to end by
 * test/e2e/test_mesos_migration.py. */
#include <string.h>

#include "jobmgr_ctl.h"
#include "svc_host.h"
#include "test.h"

/* A Node with the maintenance annotation m (NULL: none) and Ready status
 * ready (NULL: no conditions); cordoned when unschedulable. */
static enum svc_host_state state_of(const char *m, const char *ready, bool unschedulable) {
    json_t *n = json_pack("{s:{s:s, s:{}}, s:{s:b}, s:{s:[]}}", "metadata", "name", "h", "annotations", "spec",
                          "unschedulable", unschedulable, "status", "conditions");
    if (m) json_object_set_new(json_object_get(json_object_get(n, "metadata"), "annotations"),
                               "peloton.io/maintenance", json_string(m));
    if (ready)
        json_array_append_new(json_object_get(json_object_get(n, "status"), "conditions"),
                              json_pack("{s:s, s:s}", "type", "Ready", "status", ready));
    enum svc_host_state st = svc_host_state(n);
    json_decref(n);
    return st;
}

TEST(native_host_state_from_the_node) {
    CHECK_I64(state_of(NULL, "True", false), SVC_HOST_UP);
    CHECK_I64(state_of(NULL, NULL, false), SVC_HOST_UP);          /* no condition yet */
    CHECK_I64(state_of(NULL, "True", true), SVC_HOST_UP);         /* a cordon is not maintenance */
    CHECK_I64(state_of(NULL, "False", false), SVC_HOST_UNKNOWN);
    CHECK_I64(state_of(NULL, "Unknown", false), SVC_HOST_UNKNOWN);
    CHECK_I64(state_of("draining", "True", true), SVC_HOST_DRAINING);
    CHECK_I64(state_of("draining", "Unknown", true), SVC_HOST_DRAINING);
    CHECK_I64(state_of("drained", "True", true), SVC_HOST_DRAINED);
    CHECK_I64(state_of("drained", "False", true), SVC_HOST_DOWN);
    CHECK_I64(state_of("later", "True", false), SVC_HOST_UP);     /* not a maintenance value */
    CHECK_I64(svc_host_state(NULL), SVC_HOST_UP);
}

TEST(jobmgr_drain_budget) {
    struct crd_job_extra x;
    memset(&x, 0, sizeof x);
    CHECK_I64(jm_drain_budget(&x), 1);
    x.update.batch_size = 3;
    CHECK_I64(jm_drain_budget(&x), 3);
    x.max_unavailable = 5;
    CHECK_I64(jm_drain_budget(&x), 5);
}
