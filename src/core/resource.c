#include "resource.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const char *const kind_names[RES_NKINDS] = {"cpu", "memory", "disk", "gpu"};

const char *res_kind_name(enum res_kind k) {
    return (unsigned)k < RES_NKINDS ? kind_names[k] : "?";
}

int res_kind_parse(const char *name) {
    for (int k = 0; k < RES_NKINDS; k++)
        if (strcmp(name, kind_names[k]) == 0) return k;
    return -1;
}

const char *res_kind_unit(enum res_kind k) {
    return (k == RES_CPU || k == RES_GPU) ? "m" : "bytes";
}

struct resvec resvec_scale(struct resvec a, int64_t n) {
    for (int k = 0; k < RES_NKINDS; k++) {
        int64_t r;
        if (a.v[k] == RES_UNLIMITED || __builtin_mul_overflow(a.v[k], n, &r))
            a.v[k] = RES_UNLIMITED;
        else
            a.v[k] = r;
    }
    return a;
}

int resvec_first_over(struct resvec a, struct resvec b) {
    for (int k = 0; k < RES_NKINDS; k++) if (a.v[k] > b.v[k]) return k;
    return -1;
}

#define MB (1024.0 * 1024.0)

static double native_per_unit(enum res_kind k) {
    return (k == RES_CPU || k == RES_GPU) ? 1.0 / 1000.0 : 1.0 / MB;
}

double res_to_native(enum res_kind k, int64_t v) {
    if (v == RES_UNLIMITED) return INFINITY;
    return (double)v * native_per_unit(k);
}

int res_from_native(enum res_kind k, double native, int64_t *out) {
    if (isnan(native) || native < 0) return -EINVAL;
    double units = (k == RES_CPU || k == RES_GPU) ? native * 1000.0 : native * MB;
    /* Tolerate binary noise such as 0.1 * 1000 = 100.00000000000001. */
    double r = nearbyint(units);
    double u = fabs(units - r) <= 1e-9 * (r > 1 ? r : 1) ? r : ceil(units);
    if (u >= 9.2e18) return -ERANGE;
    *out = (int64_t)u;
    return 0;
}
