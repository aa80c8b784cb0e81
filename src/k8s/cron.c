/* Cron schedules (cron.h): parsed into bit sets, searched backwards from
 * now by whole months, days and hours that cannot match, then minutes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cron.h"

struct field {
    const char *name;
    int lo, hi;
    const char *const *names; /* names for lo.. (NULL: numbers only) */
};

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
static const char *const day_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

static const struct field fields[5] = {
    {"minute", 0, 59, NULL},   {"hour", 0, 23, NULL},         {"day of month", 1, 31, NULL},
    {"month", 1, 12, month_names}, {"day of week", 0, 7, day_names},
};

/* A value of f at *p (a number or a name); advances *p. -1 when none. */
static int value(const struct field *f, const char **p) {
    const char *s = *p;
    if (*s >= '0' && *s <= '9') {
        int v = 0;
        while (*s >= '0' && *s <= '9' && v < 1000) v = v * 10 + (*s++ - '0');
        if (*s >= '0' && *s <= '9') return -1;
        *p = s;
        return v;
    }
    if (f->names)
        for (int i = 0; i <= f->hi - f->lo && i < (f == &fields[3] ? 12 : 7); i++)
            if (!strncasecmp(s, f->names[i], 3)) {
                *p = s + 3;
                return f->lo + i;
            }
    return -1;
}

/* One field's text (len bytes at s) into *bits. */
static int parse_field(const struct field *f, const char *s, size_t len, uint64_t *bits, bool *any, char *err,
                       size_t errlen) {
    char buf[CRON_MAX_LEN + 1];
    memcpy(buf, s, len);
    buf[len] = 0;
    *bits = 0;
    *any = !strcmp(buf, "*") || !strcmp(buf, "?");
    for (char *item = buf, *next; item; item = next) {
        next = strchr(item, ',');
        if (next) *next++ = 0;
        const char *p = item;
        int a, b, step = 1;
        if (*p == '*' || *p == '?') {
            a = f->lo, b = f->hi;
            p++;
        } else {
            if ((a = value(f, &p)) < 0) goto bad;
            b = a;
            if (*p == '-') {
                p++;
                if ((b = value(f, &p)) < 0) goto bad;
            } else if (*p == '/') {
                b = f->hi; /* a/n: from a to the end */
            }
        }
        if (*p == '/') {
            p++;
            if ((step = value(&fields[0], &p)) <= 0) goto bad;
        }
        if (*p || a < f->lo || b > f->hi || a > b) goto bad;
        for (int v = a; v <= b; v += step) *bits |= 1ull << (f == &fields[4] && v == 7 ? 0 : v);
        continue;
    bad:
        snprintf(err, errlen, "%s: \"%s\" is not valid (%d-%d)", f->name, item, f->lo, f->hi);
        return -EINVAL;
    }
    return 0;
}

int cron_parse(const char *s, struct cron_sched *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!s || strlen(s) > CRON_MAX_LEN) {
        snprintf(err, errlen, "the schedule is empty or longer than %d bytes", CRON_MAX_LEN);
        return -EINVAL;
    }
    static const struct {
        const char *name, *as;
    } macros[] = {{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
                  {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},     {"@midnight", "0 0 * * *"},
                  {"@hourly", "0 * * * *"}};
    if (s[0] == '@') {
        for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++)
            if (!strcmp(s, macros[i].name)) return cron_parse(macros[i].as, out, err, errlen);
        snprintf(err, errlen, "unknown descriptor \"%.40s\"", s);
        return -EINVAL;
    }
    const char *p = s;
    for (int i = 0; i < 5; i++) {
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strcspn(p, " \t");
        if (!n) {
            snprintf(err, errlen, "expected 5 fields (minute hour day-of-month month day-of-week), found %d", i);
            return -EINVAL;
        }
        uint64_t bits;
        bool any;
        int rc = parse_field(&fields[i], p, n, &bits, &any, err, errlen);
        if (rc) return rc;
        switch (i) {
        case 0: out->minutes = bits; break;
        case 1: out->hours = (uint32_t)bits; break;
        case 2: out->mdays = (uint32_t)bits, out->mday_any = any; break;
        case 3: out->months = (uint16_t)bits; break;
        default: out->wdays = (uint8_t)bits, out->wday_any = any; break;
        }
        p += n;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p) {
        snprintf(err, errlen, "expected 5 fields (minute hour day-of-month month day-of-week), found more");
        return -EINVAL;
    }
    return 0;
}

static bool day_matches(const struct cron_sched *c, const struct tm *tm) {
    bool md = c->mdays >> tm->tm_mday & 1, wd = c->wdays >> tm->tm_wday & 1;
    if (c->mday_any || c->wday_any) return md && wd;
    return md || wd;
}

int64_t cron_last(const struct cron_sched *c, int64_t after, int64_t now) {
    int64_t t = now - ((now % 60) + 60) % 60;
    for (int guard = 0; guard < 200000 && t > after; guard++) {
        time_t tt = (time_t)t;
        struct tm tm;
        if (!gmtime_r(&tt, &tm)) return -1;
        tm.tm_sec = 0;
        if (!(c->months >> (tm.tm_mon + 1) & 1)) {
            tm.tm_mday = 1, tm.tm_hour = 0, tm.tm_min = 0;
            t = (int64_t)timegm(&tm) - 60; /* the last minute of the month before */
        } else if (!day_matches(c, &tm)) {
            tm.tm_hour = 0, tm.tm_min = 0;
            t = (int64_t)timegm(&tm) - 60;
        } else if (!(c->hours >> tm.tm_hour & 1)) {
            tm.tm_min = 0;
            t = (int64_t)timegm(&tm) - 60;
        } else if (!(c->minutes >> tm.tm_min & 1)) {
            t -= 60;
        } else {
            return t;
        }
    }
    return -1;
}
