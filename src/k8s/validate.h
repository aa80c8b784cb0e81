/* The checks kube-apiserver makes on every write of an object that this
 * server makes too, because what it stores must be what its scheduler and
 * clients can read (docs/kubectl.md, "Validation"):
 *
 *   every kind   metadata.labels: keys are qualified names, values label
 *                values; metadata.annotations: keys are qualified names,
 *                keys and values together at most VALIDATE_MAX_ANNOTATIONS
 *                bytes
 *
 * Errors are appended to res as kube-apiserver's field errors: field
 * `metadata.labels`, message `Invalid value: "a/b/c": a qualified name must
 * consist of ...` (schema_result_format makes the Status message of them).
 * obj is borrowed. Returns 0 when valid, -EINVAL (res holds the errors) or
 * -ENOMEM. */
#ifndef PELOTON_K8S_VALIDATE_H
#define PELOTON_K8S_VALIDATE_H

#include <jansson.h>

#include "schema.h"

#define VALIDATE_MAX_ANNOTATIONS (256 * 1024) /* kube's TotalAnnotationSizeLimitB */

int validate_object(const char *group, const char *kind, json_t *obj, struct schema_result *res);

#endif
