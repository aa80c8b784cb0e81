/* Kubernetes scheduling fields into the core's placement structs (see
 * k8sparse.c). Arrays come from a kp_mem, which owns them until
 * kp_free_all; strings are borrowed from the JSON. Errors: -EINVAL with one
 * line in err naming the field, -ENOMEM. */
#ifndef PELOTON_K8S_K8SPARSE_H
#define PELOTON_K8S_K8SPARSE_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "host.h"
#include "place.h"

#define KP_MAX_LIST 4096 /* labels, taints, tolerations, terms, values per object */
#define KP_WHERE 256     /* field path buffer */
#define KP_NOMEM(err, errlen) (snprintf(err, errlen, "out of memory"), -ENOMEM)

struct kp_mem {
    bool lenient; /* ignore unknown keys (Kubernetes objects) */
    void **p;
    size_t n, cap;
};

int kp_known_keys(const struct kp_mem *m, json_t *obj, const char *const *allowed, const char *where, char *err,
                  size_t errlen);
/* A field path ("gangs[3].tasks[0]") into a KP_WHERE buffer; long paths are cut. */
__attribute__((format(printf, 2, 3))) void kp_where(char *out, const char *fmt, ...);
void *kp_alloc(struct kp_mem *m, size_t count, size_t size);
void kp_free_all(struct kp_mem *m);
int kp_list(json_t *v, const char *where, bool object, char *err, size_t errlen);
int kp_label_value(json_t *v, const char *where, struct kp_mem *m, const char **out, char *err, size_t errlen);
int kp_kv_map(json_t *obj, const char *where, struct kp_mem *m, struct host_kv **out, uint32_t *n, char *err, size_t errlen);
int kp_effect(json_t *obj, const char *where, bool optional, int *out, char *err, size_t errlen);
int kp_taints(json_t *arr, const char *where, struct kp_mem *m, struct host_taint_spec **out, uint32_t *n, char *err, size_t errlen);
int kp_tolerations(json_t *arr, const char *where, struct kp_mem *m, struct place_toleration **out, uint32_t *n, char *err, size_t errlen);
int kp_expr(json_t *v, const char *w, struct kp_mem *m, struct place_expr *x, char *err, size_t errlen);
int kp_affinity(json_t *aff, const char *where, struct kp_mem *m, struct place_term **out, uint32_t *n, char *err, size_t errlen);

#endif
