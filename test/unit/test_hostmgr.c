/* hostmgr's pure parts: MicroTime parsing and formatting, the lease verdict. */
#include <errno.h>

#include "hostmgr.h"
#include "test.h"

TEST(hostmgr_microtime_parses) {
    int64_t ms = -1;
    CHECK_I64(hostmgr_parse_microtime("1970-01-01T00:00:00.000000Z", &ms), 0);
    CHECK_I64(ms, 0);
    CHECK_I64(hostmgr_parse_microtime("2006-01-02T15:04:05.000000Z", &ms), 0);
    CHECK_I64(ms, 1136214245000LL);
    CHECK_I64(hostmgr_parse_microtime("2006-01-02T15:04:05.123456Z", &ms), 0);
    CHECK_I64(ms, 1136214245123LL);
    CHECK_I64(hostmgr_parse_microtime("2006-01-02T15:04:05Z", &ms), 0); /* plain RFC 3339 */
    CHECK_I64(ms, 1136214245000LL);
    CHECK_I64(hostmgr_parse_microtime("2006-01-02T15:04:05.5Z", &ms), 0);
    CHECK_I64(ms, 1136214245500LL);
    CHECK_I64(hostmgr_parse_microtime("2006-01-02T15:04:05.999999999Z", &ms), 0); /* nanoseconds, truncated */
    CHECK_I64(ms, 1136214245999LL);
    CHECK_I64(hostmgr_parse_microtime("2006-01-02T22:04:05+07:00", &ms), 0);
    CHECK_I64(ms, 1136214245000LL);
    CHECK_I64(hostmgr_parse_microtime("2006-01-02T08:04:05.25-07:00", &ms), 0);
    CHECK_I64(ms, 1136214245250LL);
    CHECK_I64(hostmgr_parse_microtime("2024-02-29T00:00:00Z", &ms), 0); /* a leap day */
    CHECK_I64(ms, 1709164800000LL);
    CHECK_I64(hostmgr_parse_microtime("2026-01-01t00:00:00z", &ms), 0);
    CHECK_I64(ms, 1767225600000LL);
}

TEST(hostmgr_microtime_rejects) {
    static const char *bad[] = {
        "", "2006", "2006-01-02", "2006-01-02 15:04:05Z", "2006-01-02T15:04:05", "2006-01-02T15:04:05.Z",
        "2006-13-02T15:04:05Z", "2006-00-02T15:04:05Z", "2006-02-29T00:00:00Z", "2006-04-31T00:00:00Z",
        "2006-01-02T24:00:00Z", "2006-01-02T15:60:05Z", "2006-01-02T15:04:61Z", "2006-01-02T15:04:05.1234567890Z",
        "2006-01-02T15:04:05Zjunk", "2006-01-02T15:04:05+0700", "2006-01-02T15:04:05+24:00", "2006-1-02T15:04:05Z",
        "x006-01-02T15:04:05Z", "2006-01-02T15:04:05.000000Z2006-01-02T15:04:05.000000Z2006-01-02T15:04:05Z",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        if (hostmgr_parse_microtime(bad[i], &ms) != -EINVAL) test_fail(__FILE__, __LINE__, "accepted \"%s\"", bad[i]);
        CHECK_I64(ms, 42);
    }
    int64_t ms;
    CHECK_I64(hostmgr_parse_microtime(NULL, &ms), -EINVAL);
}

TEST(hostmgr_time_round_trips) {
    char buf[32];
    hostmgr_format_time(1136214245123LL, true, buf);
    CHECK_STR(buf, "2006-01-02T15:04:05.123000Z");
    hostmgr_format_time(1136214245123LL, false, buf);
    CHECK_STR(buf, "2006-01-02T15:04:05Z");
    uint64_t seed = 7;
    for (int i = 0; i < 2000; i++) {
        int64_t ms = test_range(&seed, 0, 4102444800000LL); /* up to 2100 */
        int64_t back = -1;
        hostmgr_format_time(ms, true, buf);
        REQUIRE_I64(hostmgr_parse_microtime(buf, &back), 0);
        REQUIRE_I64(back, ms);
    }
}

TEST(hostmgr_lease_lapse) {
    int64_t renew = 1000000;
    /* duration 2 s: fresh up to and including renew + 2000, down after */
    CHECK(!hostmgr_lease_lapsed(renew, 2, renew, 0));
    CHECK(!hostmgr_lease_lapsed(renew, 2, renew + 2000, 0));
    CHECK(hostmgr_lease_lapsed(renew, 2, renew + 2001, 0));
    /* grace extends it */
    CHECK(!hostmgr_lease_lapsed(renew, 2, renew + 2500, 500));
    CHECK(hostmgr_lease_lapsed(renew, 2, renew + 2501, 500));
    /* a renewal in the future (clock skew) is fresh */
    CHECK(!hostmgr_lease_lapsed(renew + 60000, 40, renew, 0));
    CHECK(hostmgr_lease_lapsed(renew, 40, renew + 40001, 0));
}

static json_t *lease(const char *renew, int duration) {
    json_t *l = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                          "metadata", "name", "n1", "namespace", "kube-node-lease", "spec", "holderIdentity", "n1");
    if (renew) json_object_set_new(json_object_get(l, "spec"), "renewTime", json_string(renew));
    if (duration >= 0)
        json_object_set_new(json_object_get(l, "spec"), "leaseDurationSeconds", json_integer(duration));
    return l;
}

TEST(hostmgr_node_verdict) {
    struct hostmgr_options o;
    hostmgr_options_default(&o);
    CHECK_I64(o.check_ms, 1000);
    CHECK_I64(o.grace_ms, 0);
    CHECK_I64(o.no_lease_ms, 80000);
    CHECK(o.mass_fraction == 0.55); /* kube-controller-manager's --unhealthy-zone-threshold */
    CHECK_I64(o.mass_min_nodes, 3);
    CHECK(o.metrics == NULL);
    int64_t t0;
    REQUIRE(hostmgr_parse_microtime("2026-01-01T00:00:00.000000Z", &t0) == 0);

    json_t *l = lease("2026-01-01T00:00:00.000000Z", 2);
    CHECK(!hostmgr_node_is_down(l, t0 - 100000, t0 + 1999, &o));
    CHECK(hostmgr_node_is_down(l, t0 - 100000, t0 + 2001, &o));
    o.grace_ms = 1000;
    CHECK(!hostmgr_node_is_down(l, t0 - 100000, t0 + 2999, &o));
    CHECK(hostmgr_node_is_down(l, t0 - 100000, t0 + 3001, &o));
    o.grace_ms = 0;
    json_decref(l);

    /* no leaseDurationSeconds: the Kubernetes default, 40 s */
    l = lease("2026-01-01T00:00:00.000000Z", -1);
    CHECK(!hostmgr_node_is_down(l, t0, t0 + 39000, &o));
    CHECK(hostmgr_node_is_down(l, t0, t0 + 40001, &o));
    json_decref(l);
    l = lease("2026-01-01T00:00:00.000000Z", 0); /* nonsense duration: the default too */
    CHECK(!hostmgr_node_is_down(l, t0, t0 + 39000, &o));
    json_decref(l);

    /* no lease, or one never renewed (no readable renewTime): time since the node appeared */
    CHECK(!hostmgr_node_is_down(NULL, t0, t0 + 80000, &o));
    CHECK(hostmgr_node_is_down(NULL, t0, t0 + 80001, &o));
    l = lease(NULL, 40);
    CHECK(!hostmgr_node_is_down(l, t0, t0 + 79000, &o));
    CHECK(hostmgr_node_is_down(l, t0, t0 + 81000, &o));
    json_decref(l);
    l = lease("yesterday", 40);
    CHECK(hostmgr_node_is_down(l, t0, t0 + 81000, &o));
    json_decref(l);
    o.no_lease_ms = 1000;
    CHECK(hostmgr_node_is_down(NULL, t0, t0 + 1001, &o));

    /* an absurd duration does not overflow */
    l = lease("2026-01-01T00:00:00.000000Z", -1);
    json_object_set_new(json_object_get(l, "spec"), "leaseDurationSeconds", json_integer(INT64_MAX / 2));
    CHECK(!hostmgr_node_is_down(l, t0, t0 + 86400000LL, &o));
    json_decref(l);
}

TEST(hostmgr_stop_null) {
    hostmgr_stop(NULL);
    CHECK(!hostmgr_node_down(NULL, "n1"));
    size_t down = 9;
    CHECK_I64(hostmgr_node_count(NULL, &down), 0);
    CHECK_I64(down, 0);
}
