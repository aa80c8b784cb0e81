/* Resource vectors over the four kinds the scheduler manages.
 *
 * Units are integers chosen so that nothing is lost to rounding:
 *   cpu    milli-cores      gpu    milli-gpus
 *   memory bytes            disk   bytes
 * A resvec is a plain value: copy it, no ownership. RES_UNLIMITED marks an
 * absent limit; arithmetic saturates at it rather than wrapping. */
#ifndef PELOTON_CORE_RESOURCE_H
#define PELOTON_CORE_RESOURCE_H

#include <stdbool.h>
#include <stdint.h>

enum res_kind { RES_CPU = 0, RES_MEMORY, RES_DISK, RES_GPU, RES_NKINDS };

#define RES_UNLIMITED INT64_MAX

struct resvec {
    int64_t v[RES_NKINDS];
};

/* "cpu", "memory", "disk", "gpu". */
const char *res_kind_name(enum res_kind k);
/* Returns the kind for a name (exact, lower case), or -1. */
int res_kind_parse(const char *name);
/* "m" for cpu and gpu (milli-units), "bytes" for memory and disk. */
const char *res_kind_unit(enum res_kind k);

static inline struct resvec resvec_zero(void) { return (struct resvec){{0}}; }
static inline struct resvec resvec_unlimited(void) {
    return (struct resvec){{RES_UNLIMITED, RES_UNLIMITED, RES_UNLIMITED, RES_UNLIMITED}};
}

/* Saturating add/sub: a side at RES_UNLIMITED stays unlimited. */
static inline int64_t res_add(int64_t a, int64_t b) {
    if (a == RES_UNLIMITED || b == RES_UNLIMITED) return RES_UNLIMITED;
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? RES_UNLIMITED : INT64_MIN;
    return r;
}
static inline int64_t res_sub(int64_t a, int64_t b) {
    if (a == RES_UNLIMITED) return RES_UNLIMITED;
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? RES_UNLIMITED : INT64_MIN;
    return r;
}
static inline int64_t res_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t res_max(int64_t a, int64_t b) { return a > b ? a : b; }

static inline struct resvec resvec_add(struct resvec a, struct resvec b) {
    for (int k = 0; k < RES_NKINDS; k++) a.v[k] = res_add(a.v[k], b.v[k]);
    return a;
}
static inline struct resvec resvec_sub(struct resvec a, struct resvec b) {
    for (int k = 0; k < RES_NKINDS; k++) a.v[k] = res_sub(a.v[k], b.v[k]);
    return a;
}
static inline struct resvec resvec_min(struct resvec a, struct resvec b) {
    for (int k = 0; k < RES_NKINDS; k++) a.v[k] = res_min(a.v[k], b.v[k]);
    return a;
}
static inline struct resvec resvec_max(struct resvec a, struct resvec b) {
    for (int k = 0; k < RES_NKINDS; k++) a.v[k] = res_max(a.v[k], b.v[k]);
    return a;
}
/* Negative components become 0. */
static inline struct resvec resvec_clamp0(struct resvec a) {
    for (int k = 0; k < RES_NKINDS; k++) if (a.v[k] < 0) a.v[k] = 0;
    return a;
}
/* a <= b in every kind (a fits within b). */
static inline bool resvec_le(struct resvec a, struct resvec b) {
    for (int k = 0; k < RES_NKINDS; k++) if (a.v[k] > b.v[k]) return false;
    return true;
}
static inline bool resvec_eq(struct resvec a, struct resvec b) {
    for (int k = 0; k < RES_NKINDS; k++) if (a.v[k] != b.v[k]) return false;
    return true;
}
static inline bool resvec_is_zero(struct resvec a) {
    for (int k = 0; k < RES_NKINDS; k++) if (a.v[k] != 0) return false;
    return true;
}
/* Any kind strictly positive. */
static inline bool resvec_any_pos(struct resvec a) {
    for (int k = 0; k < RES_NKINDS; k++) if (a.v[k] > 0) return true;
    return false;
}
/* a * n, saturating. */
struct resvec resvec_scale(struct resvec a, int64_t n);

/* First kind where a > b, or -1 when a fits within b. */
int resvec_first_over(struct resvec a, struct resvec b);

/* Native (Peloton API) units: cores and gpus as doubles, memory and disk in MB
 * (2^20 bytes, as Mesos and Peloton's memLimitMb use). to_native of
 * RES_UNLIMITED is +inf. from_native rounds up to the next base unit and fails
 * (-EINVAL) for negative, NaN or out-of-range values. */
double res_to_native(enum res_kind k, int64_t v);
int res_from_native(enum res_kind k, double native, int64_t *out);

#endif
