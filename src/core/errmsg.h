/* The core's one error-message formatter.
 *
 * core_fail formats a one-line message into err (which may be NULL or have
 * errlen 0: then nothing is written) and returns code, so that a check reads
 * `return core_fail(err, errlen, -EINVAL, "pool %s: ...", ...);`. */
#ifndef PELOTON_CORE_ERRMSG_H
#define PELOTON_CORE_ERRMSG_H

#include <stddef.h>

int core_fail(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The same, prefixed with the object the message is about, as Kubernetes
 * names one: `resource "name": message` (name cut at 253 characters). */
int core_fail_about(char *err, size_t errlen, int code, const char *resource, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#endif
