/* The checks kube-apiserver makes on every write of a built-in object that
 * this server makes too, because what it stores must be what its scheduler
 * and clients can read (docs/kubectl.md, "Validation"):
 *
 *   every kind   metadata.labels: keys are qualified names, values label
 *                values; metadata.annotations: keys are qualified names,
 *                keys and values together at most VALIDATE_MAX_ANNOTATIONS
 *                bytes
 *   Pod          spec.containers not empty, each container (and init
 *                container) with a name and an image, names unique;
 *                resource requests, limits and overhead: standard or
 *                extended resource names, valid quantities, not negative;
 *                extended resources (nvidia.com/gpu) whole numbers with a
 *                request equal to the limit; a request no more than its
 *                limit; then whatever the scheduler's reading of a pod
 *                (pod_info_decode) would refuse, so no pod is stored that
 *                would sit Pending for ever
 *   Secret       stringData folded into data (each value base64-encoded,
 *                stringData winning, then dropped, as kube-apiserver's
 *                conversion does); data keys are config keys, values
 *                standard base64, at most VALIDATE_MAX_SECRET bytes decoded
 *
 * Pod and Secret are the core group's (group ""). Errors are appended to res
 * as kube-apiserver's field errors: field `spec.containers[0].resources.
 * requests[cpu]`, message `Invalid value: "abc": must be a valid quantity`
 * (schema_result_format makes the Status message of them).
 * obj is borrowed and changed only by the stringData fold.
 * Returns 0 when valid, -EINVAL (res holds the errors) or -ENOMEM. */
#ifndef PELOTON_K8S_VALIDATE_H
#define PELOTON_K8S_VALIDATE_H

#include <jansson.h>

#include "schema.h"

#define VALIDATE_MAX_ANNOTATIONS (256 * 1024) /* kube's TotalAnnotationSizeLimitB */
#define VALIDATE_MAX_SECRET (1024 * 1024)     /* kube's MaxSecretSize, decoded bytes */
#define VALIDATE_MAX_CONFIG_KEY 253           /* a Secret's (or ConfigMap's) data key */

int validate_object(const char *group, const char *kind, json_t *obj, struct schema_result *res);

#endif
