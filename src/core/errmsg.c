#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

int core_fail(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int core_fail_about(char *err, size_t errlen, int code, const char *resource, const char *name, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return core_fail(err, errlen, code, "%s \"%.253s\": %s", resource, name ? name : "", msg);
}
