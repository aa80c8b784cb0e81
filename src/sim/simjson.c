#include "simjson.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"

int sj_quantity(json_t *v, enum res_kind k, const char *where, int64_t *out, char *err, size_t errlen) {
    char qerr[200];
    if (json_is_string(v)) {
        if (quantity_parse_kind(k, json_string_value(v), out, qerr, sizeof qerr) != 0) {
            snprintf(err, errlen, "%s.%s: %s", where, res_kind_name(k), qerr);
            return -EINVAL;
        }
        return 0;
    }
    if (json_is_number(v)) {
        double d = json_number_value(v);
        /* numbers are cores for cpu/gpu, bytes for memory/disk */
        double units = (k == RES_CPU || k == RES_GPU) ? d * 1000.0 : d;
        if (!isfinite(d) || d < 0 || units >= 9.2e18) {
            snprintf(err, errlen, "%s.%s: %g is negative or out of range", where, res_kind_name(k), d);
            return -EINVAL;
        }
        double r = nearbyint(units);
        *out = (int64_t)(fabs(units - r) <= 1e-9 * (r > 1 ? r : 1) ? r : ceil(units));
        return 0;
    }
    snprintf(err, errlen, "%s.%s: expected a quantity string or a number", where, res_kind_name(k));
    return -EINVAL;
}

int sj_resvec(json_t *v, const struct resvec *dflt, const char *where, struct resvec *out,
              char *err, size_t errlen) {
    *out = *dflt;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) {
        snprintf(err, errlen, "%s: expected an object of cpu, memory, disk, gpu", where);
        return -EINVAL;
    }
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        int k = res_kind_parse(key);
        if (k < 0) {
            snprintf(err, errlen, "%s: unknown resource kind \"%s\" (cpu, memory, disk, gpu)", where, key);
            return -EINVAL;
        }
        int rc = sj_quantity(val, (enum res_kind)k, where, &out->v[k], err, errlen);
        if (rc) return rc;
    }
    return 0;
}

int sj_opt_int(json_t *obj, const char *key, int64_t lo, int64_t hi, const char *where,
               int64_t *out, char *err, size_t errlen) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : NAN;
    if (isnan(d) || d != floor(d) || d < (double)lo || d > (double)hi) {
        snprintf(err, errlen, "%s.%s: expected an integer in [%lld, %lld]", where, key,
                 (long long)lo, (long long)hi);
        return -EINVAL;
    }
    *out = json_is_integer(v) ? json_integer_value(v) : (int64_t)d;
    return 0;
}

int sj_opt_bool(json_t *obj, const char *key, const char *where, bool *out, char *err, size_t errlen) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) {
        snprintf(err, errlen, "%s.%s: expected true or false", where, key);
        return -EINVAL;
    }
    *out = json_is_true(v);
    return 0;
}

int sj_opt_double(json_t *obj, const char *key, double lo, double hi, const char *where,
                  double *out, char *err, size_t errlen) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi)) {
        snprintf(err, errlen, "%s.%s: expected a number in [%g, %g]", where, key, lo, hi);
        return -EINVAL;
    }
    *out = json_number_value(v);
    return 0;
}

int sj_str(json_t *obj, const char *key, bool required, const char *where, const char **out,
           char *err, size_t errlen) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (!required) return 0;
        snprintf(err, errlen, "%s.%s: required", where, key);
        return -EINVAL;
    }
    if (!json_is_string(v)) {
        snprintf(err, errlen, "%s.%s: expected a string", where, key);
        return -EINVAL;
    }
    *out = json_string_value(v);
    return 0;
}

int sj_known_keys(json_t *obj, const char *const *allowed, const char *where, char *err, size_t errlen) {
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++) if (strcmp(allowed[i], key) == 0) { ok = 1; break; }
        if (!ok) {
            snprintf(err, errlen, "%s: unknown field \"%s\"", where, key);
            return -EINVAL;
        }
    }
    return 0;
}

json_t *sj_resvec_out(struct resvec r) {
    json_t *o = json_object();
    for (int k = 0; k < RES_NKINDS; k++)
        json_object_set_new(o, res_kind_name((enum res_kind)k),
                            r.v[k] == RES_UNLIMITED ? json_null() : json_integer(r.v[k]));
    return o;
}
