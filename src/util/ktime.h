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

/* A duration as Go's time.ParseDuration reads it (the syntax of
 * kube-apiserver's duration flags, such as --event-ttl=1h0m0s): an optional
 * sign, then one or more numbers, each with an optional fraction and a unit
 * of ns, us, µs, ms, s, m or h; "0" alone needs no unit. Into *ns as
 * nanoseconds (a fraction below a nanosecond dropped); false, *ns untouched,
 * for NULL, anything else, or a value past +-2^63-1 ns (about 292 years). */
bool ktime_parse_duration(const char *s, int64_t *ns);

#endif
