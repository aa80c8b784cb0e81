/* Kubernetes timestamps (RFC 3339 in UTC, as the API writes them:
 * "2026-11-27T10:04:39Z", with an optional fraction of a second). */
#ifndef PELOTON_UTIL_KTIME_H
#define PELOTON_UTIL_KTIME_H

#include <stdbool.h>
#include <stdint.h>

/* s as whole seconds since the epoch into *secs (the fraction dropped);
 * false for NULL or anything else than "YYYY-MM-DDTHH:MM:SS[.digits]Z"
 * (a missing final Z is taken as UTC too). */
bool ktime_parse(const char *s, int64_t *secs);

#endif
