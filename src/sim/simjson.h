/* Helpers for reading simulator input documents (jansson values, borrowed).
 * Every function returns 0, or a negative errno-style code with a message in
 * err that names the offending field (callers pass a "where" prefix such as
 * "pools[3].reservation"). */
#ifndef PELOTON_SIMJSON_H
#define PELOTON_SIMJSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resource.h"

/* A quantity: a Kubernetes quantity string, or a JSON number in the kind's
 * natural unit (cores for cpu and gpu, bytes for memory and disk). */
int sj_quantity(json_t *v, enum res_kind k, const char *where, int64_t *out, char *err, size_t errlen);

/* An object {"cpu": q, "memory": q, "disk": q, "gpu": q}; missing kinds take
 * dflt's value; unknown keys are an error. v NULL or null leaves *out = *dflt. */
int sj_resvec(json_t *v, const struct resvec *dflt, const char *where, struct resvec *out,
              char *err, size_t errlen);

/* Optional typed fields of an object: absent or null keeps *out unchanged. */
int sj_opt_int(json_t *obj, const char *key, int64_t lo, int64_t hi, const char *where,
               int64_t *out, char *err, size_t errlen);
int sj_opt_bool(json_t *obj, const char *key, const char *where, bool *out, char *err, size_t errlen);
int sj_opt_double(json_t *obj, const char *key, double lo, double hi, const char *where,
                  double *out, char *err, size_t errlen);
/* A required or optional string; *out points into obj (borrowed). */
int sj_str(json_t *obj, const char *key, bool required, const char *where, const char **out,
           char *err, size_t errlen);
/* Fails when obj has a key not in the NULL-terminated allowed list (catches typos). */
int sj_known_keys(json_t *obj, const char *const *allowed, const char *where, char *err, size_t errlen);

/* A resvec as {"cpu": n, "memory": n, "disk": n, "gpu": n} in base units;
 * RES_UNLIMITED becomes null. */
json_t *sj_resvec_out(struct resvec r);

#endif
