/* Kubernetes timestamps (ktime.h). */
#include "ktime.h"

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
