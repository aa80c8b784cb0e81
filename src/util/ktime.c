/* Kubernetes timestamps (ktime.h). */
#include "ktime.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

bool ktime_parse(const char *s, int64_t *secs) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p) return false;
    if (*p == '.') {
        const char *d = ++p;
        while (*p >= '0' && *p <= '9') p++;
        if (p == d) return false;
    }
    if (*p == 'Z') p++;
    if (*p) return false;
    *secs = (int64_t)timegm(&tm);
    return true;
}

/* The unit at p (longest first: "ms" before "m"), its length in *len. */
static uint64_t duration_unit(const char *p, size_t *len) {
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {{"ns", 1},
                 {"us", 1000},
                 {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
                 {"\xce\xbcs", 1000}, /* U+03BC Greek mu */
                 {"ms", 1000000},
                 {"s", 1000000000ull},
                 {"m", 60ull * 1000000000ull},
                 {"h", 3600ull * 1000000000ull}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].name);
        if (!strncmp(p, units[i].name, n)) {
            *len = n;
            return units[i].ns;
        }
    }
    return 0;
}

bool ktime_parse_duration(const char *s, int64_t *ns) {
    if (!s) return false;
    const char *p = s;
    bool neg = *p == '-';
    if (*p == '-' || *p == '+') p++;
    if (!strcmp(p, "0")) {
        *ns = 0;
        return true;
    }
    if (!*p) return false;
    uint64_t total = 0;
    const uint64_t max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    while (*p) {
        uint64_t whole = 0, frac = 0, scale = 1;
        bool digits = false;
        for (; *p >= '0' && *p <= '9'; p++, digits = true) {
            if (whole > (UINT64_MAX - 9) / 10) return false;
            whole = whole * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.') {
            for (p++; *p >= '0' && *p <= '9'; p++, digits = true) {
                if (scale <= UINT64_MAX / 100) { /* further digits cannot matter past a nanosecond of an hour */
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    scale *= 10;
                }
            }
        }
        if (!digits) return false;
        size_t ulen = 0;
        uint64_t unit = duration_unit(p, &ulen);
        if (!unit) return false;
        p += ulen;
        if (whole > max / unit) return false;
        uint64_t v = whole * unit;
        /* the fraction's nanoseconds: frac / scale of a unit, without overflow (unit <= 3.6e12, frac < scale) */
        long double f = (long double)frac / (long double)scale * (long double)unit;
        v += (uint64_t)f;
        if (v > max || total > max - v) return false;
        total += v;
    }
    *ns = neg ? (int64_t)(0 - total) : (int64_t)total;
    return true;
}
