/* Cron schedules as a CronJob's spec.schedule takes them: five fields
 * (minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC, day of
 * week 0-6 or SUN-SAT, 7 also Sunday), each `*` or `?`, a value, a range
 * `a-b`, a step `*\/n`, `a-b/n` or `a/n`, or a comma list of those; or one of
 * @yearly @annually @monthly @weekly @daily @midnight @hourly. When both the
 * day of month and the day of week are restricted, a day matching either
 * matches (as cron). All times are UTC seconds since the epoch.
 *
 * Pure functions; no allocation. */
#ifndef PELOTON_K8S_CRON_H
#define PELOTON_K8S_CRON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRON_MAX_LEN 256 /* a longer schedule is refused */

struct cron_sched {
    uint64_t minutes; /* bit m: minute m */
    uint32_t hours;   /* bit h */
    uint32_t mdays;   /* bit d, 1..31 */
    uint16_t months;  /* bit m, 1..12 */
    uint8_t wdays;    /* bit w, 0..6 (Sunday 0) */
    bool mday_any, wday_any;
};

/* 0, or -EINVAL with a message naming the field in err. */
int cron_parse(const char *s, struct cron_sched *out, char *err, size_t errlen);
/* The latest scheduled minute t with after < t <= now, or -1 when there is
 * none (a bounded search: a schedule that never fires, such as Feb 30,
 * gives -1). */
int64_t cron_last(const struct cron_sched *c, int64_t after, int64_t now);

#endif
