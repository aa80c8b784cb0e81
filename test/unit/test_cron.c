#include <errno.h>
#include <time.h>

#include "cron.h"
#include "test.h"

static int64_t at(int y, int mo, int d, int h, int mi) {
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi};
    return (int64_t)timegm(&tm);
}

static int64_t last(const char *s, int64_t after, int64_t now) {
    struct cron_sched c;
    char err[160];
    if (cron_parse(s, &c, err, sizeof err)) return -2;
    return cron_last(&c, after, now);
}

TEST(cron_forms) {
    int64_t now = at(2026, 11, 27, 10, 37) + 15;
    CHECK_I64(last("* * * * *", 0, now), at(2026, 11, 27, 10, 37));
    CHECK_I64(last("*/15 * * * *", 0, now), at(2026, 11, 27, 10, 30));
    CHECK_I64(last("5 3 * * *", 0, now), at(2026, 11, 27, 3, 5));
    CHECK_I64(last("0 12 * * *", 0, now), at(2026, 11, 26, 12, 0));
    CHECK_I64(last("0 0 1 * *", 0, now), at(2026, 11, 1, 0, 0));
    CHECK_I64(last("@yearly", 0, now), at(2026, 1, 1, 0, 0));
    CHECK_I64(last("@hourly", 0, now), at(2026, 11, 27, 10, 0));
    CHECK_I64(last("0 9 * * MON-FRI", 0, now), at(2026, 11, 27, 9, 0)); /* a Friday */
    CHECK_I64(last("0 9 * * sun", 0, now), at(2026, 11, 22, 9, 0));
    CHECK_I64(last("0 9 * * 7", 0, now), at(2026, 11, 22, 9, 0));
    CHECK_I64(last("0 0 * JUN,JUL *", 0, now), at(2026, 7, 31, 0, 0));
    CHECK_I64(last("10-20/5 * * * *", 0, now), at(2026, 11, 27, 10, 20));
    CHECK_I64(last("50/5 * * * *", 0, now), at(2026, 11, 27, 9, 55));
    /* day of month and day of week both restricted: either */
    CHECK_I64(last("0 0 13 * FRI", 0, now), at(2026, 11, 27, 0, 0));
}

TEST(cron_bounds) {
    int64_t now = at(2026, 11, 27, 10, 37);
    CHECK_I64(last("* * * * *", now, now), -1); /* nothing after `after` */
    CHECK_I64(last("0 0 30 2 *", 0, now), -1);  /* never */
    CHECK_I64(last("0 0 * * *", at(2026, 11, 27, 0, 0), now), -1);
}

TEST(cron_refuses) {
    static const char *const bad[] = {"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *",
                                      "* * * 13 *", "* * * * 8", "*/0 * * * *", "5-1 * * * *", "a * * * *",
                                      "@every 5m", "1,,2 * * * *", "-1 * * * *", "99999999999 * * * *"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cron_sched c;
        char err[160] = "";
        CHECK_I64(cron_parse(bad[i], &c, err, sizeof err), -EINVAL);
        CHECK(err[0] != 0);
    }
}
