/* Shared by the CRD translators (crd_pool.c, crd_job.c). */
#ifndef PELOTON_K8S_CRD_COMMON_H
#define PELOTON_K8S_CRD_COMMON_H

#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "errmsg.h"

/* Refuses a member of obj not in the NULL-terminated allowed list, with
 * `resource "name": where.key: unknown field`. */
static inline int crd_known_keys(const json_t *obj, const char *const *allowed, const char *resource,
                                 const char *name, const char *where, char *err, size_t errlen) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], key) != 0) i++;
        if (!allowed[i]) return core_fail_about(err, errlen, -EINVAL, resource, name, "%s.%.64s: unknown field", where, key);
    }
    return 0;
}

#endif
