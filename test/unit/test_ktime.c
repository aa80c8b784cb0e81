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
