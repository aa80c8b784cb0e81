/* The Events and PodScheduled patches the controllers write (ctl_events.c):
 * their shape is what kubectl and the Python client read. */
#include <string.h>

#include "ctl.h"
#include "ctl_metrics.h"
#include "test.h"

static const char *str(const json_t *o, const char *a, const char *b) {
    const json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    return json_string_value(v);
}

TEST(ctl_event_json_shape) {
    json_t *ev = ctl_event_json("peloton-placement", "v1", "Pod", "team", "p1", "u-1", "Warning", "FailedScheduling",
                                "0/4 nodes are available: 4 Insufficient cpu.", "p1.abc", "2026-11-27T07:00:00Z",
                                "2026-11-27T07:05:00Z", 3);
    REQUIRE(ev);
    CHECK_STR(str(ev, "kind", NULL), "Event");
    CHECK_STR(str(ev, "metadata", "name"), "p1.abc");
    CHECK_STR(str(ev, "metadata", "namespace"), "team");
    CHECK_STR(str(ev, "involvedObject", "kind"), "Pod");
    CHECK_STR(str(ev, "involvedObject", "namespace"), "team");
    CHECK_STR(str(ev, "involvedObject", "uid"), "u-1");
    CHECK_STR(str(ev, "source", "component"), "peloton-placement");
    CHECK_STR(str(ev, "reason", NULL), "FailedScheduling");
    CHECK_STR(str(ev, "firstTimestamp", NULL), "2026-11-27T07:00:00Z");
    CHECK_STR(str(ev, "lastTimestamp", NULL), "2026-11-27T07:05:00Z");
    CHECK_I64(json_integer_value(json_object_get(ev, "count")), 3);
    json_decref(ev);
    /* a cluster-scoped object: the Event lives in "default", the object has no namespace */
    ev = ctl_event_json("peloton-resmgr", "peloton.io/v1alpha1", "ResourcePool", "", "pool-a", NULL, "Normal", "R",
                        "m", "pool-a.1", "t", "t", 1);
    REQUIRE(ev);
    CHECK_STR(str(ev, "metadata", "namespace"), "default");
    CHECK(!json_object_get(json_object_get(ev, "involvedObject"), "namespace"));
    CHECK_STR(str(ev, "involvedObject", "uid"), "");
    json_decref(ev);
}

TEST(ctl_pod_scheduled_patch_shape) {
    json_t *p = ctl_pod_scheduled_patch("u-1", false, CTL_REASON_ADMISSION, "waiting for admission: pool /a: x");
    REQUIRE(p);
    CHECK_STR(str(p, "metadata", "uid"), "u-1"); /* the precondition */
    const json_t *conds = json_object_get(json_object_get(p, "status"), "conditions");
    REQUIRE(json_array_size(conds) == 1);
    const json_t *c = json_array_get(conds, 0);
    CHECK_STR(str(c, "type", NULL), "PodScheduled");
    CHECK_STR(str(c, "status", NULL), "False");
    CHECK_STR(str(c, "reason", NULL), "WaitingForAdmission");
    CHECK_STR(str(c, "message", NULL), "waiting for admission: pool /a: x");
    CHECK(json_is_null(json_object_get(c, "lastProbeTime")));
    const char *ts = str(c, "lastTransitionTime", NULL);
    CHECK(ts && strlen(ts) == 20 && ts[10] == 'T' && ts[19] == 'Z');
    json_decref(p);
    p = ctl_pod_scheduled_patch(NULL, true, NULL, NULL); /* True: reason and message removed, no precondition */
    REQUIRE(p);
    CHECK(!json_object_get(p, "metadata"));
    c = json_array_get(json_object_get(json_object_get(p, "status"), "conditions"), 0);
    CHECK_STR(str(c, "status", NULL), "True");
    CHECK(json_is_null(json_object_get(c, "reason")) && json_is_null(json_object_get(c, "message")));
    json_decref(p);
}

/* The pods' timeline annotations (labels.h): RFC 3339 in UTC with
 * milliseconds, what the UI and kubectl read; nothing for no time. */
TEST(ctl_format_ms_rfc3339_millis) {
    char out[32];
    ctl_format_ms(1795785601123LL, out); /* 2026-11-27T13:20:01.123Z */
    CHECK_STR(out, "2026-11-27T13:20:01.123Z");
    ctl_format_ms(1795785601005LL, out);
    CHECK_STR(out, "2026-11-27T13:20:01.005Z");
    ctl_format_ms(0, out);
    CHECK_STR(out, "");
    ctl_format_ms(-5, out);
    CHECK_STR(out, "");
}
