/* Kubernetes timestamps (src/util/ktime.h). */
#include <stdint.h>

#include "ktime.h"
#include "test.h"

TEST(ktime_parses_what_the_api_writes) {
    int64_t s = -1;
    CHECK(ktime_parse("1970-01-01T00:00:00Z", &s) && s == 0);
    CHECK(ktime_parse("2026-11-27T10:04:39Z", &s) && s == 1795773879);
    CHECK(ktime_parse("2026-11-27T10:04:39.123456Z", &s) && s == 1795773879); /* MicroTime: the fraction dropped */
    CHECK(ktime_parse("2026-11-27T10:04:39", &s) && s == 1795773879);         /* no Z: UTC too */
    CHECK(ktime_parse("2024-02-29T23:59:59Z", &s) && s == 1709251199);        /* a leap day */
}

TEST(ktime_refuses_the_rest) {
    int64_t s = 7;
    CHECK(!ktime_parse(NULL, &s));
    CHECK(!ktime_parse("", &s));
    CHECK(!ktime_parse("2026-11-27", &s));
    CHECK(!ktime_parse("2026-11-27T10:04:39.Z", &s));     /* a point without digits */
    CHECK(!ktime_parse("2026-11-27T10:04:39+01:00", &s)); /* not UTC as the API writes it */
    CHECK(!ktime_parse("2026-11-27T10:04:39Zjunk", &s));
    CHECK(!ktime_parse("yesterday", &s));
    CHECK(s == 7); /* untouched on refusal */
}

TEST(ktime_parses_go_durations) {
    int64_t ns = -1;
    CHECK(ktime_parse_duration("0", &ns) && ns == 0);
    CHECK(ktime_parse_duration("1h", &ns) && ns == 3600000000000LL); /* kube-apiserver's --event-ttl default */
    CHECK(ktime_parse_duration("1h0m0s", &ns) && ns == 3600000000000LL); /* as it prints it */
    CHECK(ktime_parse_duration("90m", &ns) && ns == 5400000000000LL);
    CHECK(ktime_parse_duration("1.5h", &ns) && ns == 5400000000000LL);
    CHECK(ktime_parse_duration("2s500ms", &ns) && ns == 2500000000LL);
    CHECK(ktime_parse_duration(".5s", &ns) && ns == 500000000LL);
    CHECK(ktime_parse_duration("1.s", &ns) && ns == 1000000000LL);
    CHECK(ktime_parse_duration("3us", &ns) && ns == 3000);
    CHECK(ktime_parse_duration("3\xc2\xb5s", &ns) && ns == 3000);
    CHECK(ktime_parse_duration("7ns", &ns) && ns == 7);
    CHECK(ktime_parse_duration("-2m", &ns) && ns == -120000000000LL);
    CHECK(ktime_parse_duration("+0", &ns) && ns == 0);
    CHECK(ktime_parse_duration("2562047h47m16.854775807s", &ns) && ns == INT64_MAX);
}

TEST(ktime_refuses_bad_durations) {
    int64_t ns = 7;
    CHECK(!ktime_parse_duration(NULL, &ns));
    CHECK(!ktime_parse_duration("", &ns));
    CHECK(!ktime_parse_duration("-", &ns));
    CHECK(!ktime_parse_duration("1", &ns));      /* a number without a unit (other than 0) */
    CHECK(!ktime_parse_duration("1d", &ns));     /* Go has no days */
    CHECK(!ktime_parse_duration("h", &ns));
    CHECK(!ktime_parse_duration(".s", &ns));
    CHECK(!ktime_parse_duration("1h 2m", &ns));
    CHECK(!ktime_parse_duration("1hx", &ns));
    CHECK(!ktime_parse_duration("2562048h", &ns)); /* past 2^63 ns */
    CHECK(!ktime_parse_duration("99999999999999999999999h", &ns));
    CHECK(ns == 7);
}
