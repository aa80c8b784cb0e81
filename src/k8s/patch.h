/* The three PATCH bodies Kubernetes accepts, as pure functions on jansson
 * values: JSON merge patch (RFC 7386, application/merge-patch+json), JSON
 * patch (RFC 6902, application/json-patch+json) and strategic merge patch
 * (application/strategic-merge-patch+json, built-in kinds only).
 *
 * Ownership: target and patch are borrowed and never modified; on success
 * *out is a new value the caller frees with json_decref (it shares nothing
 * with the inputs). On failure *out is NULL and err holds the reason.
 * Errors: -EINVAL malformed patch document (400 BadRequest); -ENOENT a path
 * that does not exist, -ERANGE an array index out of range, -ECANCELED a
 * failed "test" operation (all three: 422, as Kubernetes answers failed
 * patches); -E2BIG a limit below (413 RequestEntityTooLarge); -ENOMEM.
 * Limits: recursion follows the patch and stops at PATCH_MAX_DEPTH levels; a
 * JSON patch holds at most PATCH_MAX_OPS operations; a strategic list at most
 * max_list elements (PATCH_MAX_LIST). While a patch applies, the document it
 * builds is held to struct patch_limits: its size estimate (patch_estimate),
 * its count of values and its nesting are those of a stored object
 * (objlimits.h), and the patch is refused at the step that passes one, before
 * anything larger is built (n JSON patch copies of a value into itself double
 * the document n times). Work beyond reading the inputs is bounded too:
 * values copied, list elements compared and array elements shifted cost
 * steps, at most max_work a patch, so no operation costs more than the document's size and
 * no patch more than PATCH_MAX_WORK steps (operations x document size).
 * The shim should parse patch bodies with JSON_REJECT_DUPLICATES (RFC 6902
 * A.13: a patch operation with a repeated member is invalid). */
#ifndef PELOTON_K8S_PATCH_H
#define PELOTON_K8S_PATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "objlimits.h"

#define PATCH_MAX_DEPTH 64
#define PATCH_MAX_OPS 10000
#define PATCH_MAX_LIST 10000
/* Steps of work a patch may spend (above; the weights are in patch_int.h):
 * one copy of the largest value a document within the limits can hold twice
 * (OBJ_MAX_NODES / 2 values). About 0.15 s of the server's loop. */
#define PATCH_MAX_WORK (PATCH_STEPS_COPY * (size_t)(OBJ_MAX_NODES / 2))
#define PATCH_STEPS_COPY 32 /* steps per value copied (a step is about 10 ns) */

struct patch_limits {
    size_t max_bytes; /* the patched document's size estimate */
    size_t max_nodes; /* its JSON values */
    int max_depth;    /* its nesting of arrays and objects */
    size_t max_work;  /* steps of work (above) */
    size_t max_list;  /* elements of a strategic list, in the target or the patch */
};
#define PATCH_LIMITS_DEFAULT {OBJ_MAX_BYTES, OBJ_MAX_NODES, OBJ_MAX_DEPTH, PATCH_MAX_WORK, PATCH_MAX_LIST}

enum patch_type { PATCH_MERGE, PATCH_MERGE_SHARING, PATCH_JSON, PATCH_STRATEGIC };

/* The patch of the given type (the functions below) under lim (NULL: the
 * defaults); patch_merge and the others are this with the defaults. */
int patch_apply(enum patch_type type, const json_t *target, const json_t *patch, const struct patch_limits *lim,
                json_t **out, char *err, size_t errlen);

/* The size estimate the limits apply to: about the bytes of v as compact
 * JSON (strings counted unescaped, every real as 16 characters: what the
 * value holds in memory rather than its exact text), its count of values,
 * its nesting depth (a scalar 0, [] 1, [[]] 2). Walks v once; stops
 * descending past OBJ_MAX_DEPTH + 1 levels. */
void patch_estimate(const json_t *v, size_t *bytes, size_t *nodes, int *depth);

/* RFC 7386: null deletes, objects merge recursively, anything else replaces.
 * target may be NULL (absent). */
int patch_merge(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen);
/* patch_merge whose result holds the patch's replacing values by reference
 * instead of copies: for a caller that changes neither the patch nor those
 * values while the result lives (the status subresource: the stored object's
 * status is only encoded). The same result, for less work. */
int patch_merge_sharing(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen);

/* RFC 6902 with RFC 6901 pointers: patch is an array of operations applied in
 * order; the first failure aborts the whole patch. */
int patch_json(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen);

/* Strategic merge patch: a JSON merge patch in which lists named in a static
 * merge-key table merge element by element and the directives $patch
 * (replace, delete), $retainKeys, $setElementOrder/<list> and
 * $deleteFromPrimitiveList/<list> apply. See docs/k8s-selectors-patches.md. */
int patch_strategic(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen);

enum patch_list_strategy {
    PATCH_LIST_REPLACE,      /* no patchStrategy: the patch's list replaces */
    PATCH_LIST_MERGE_KEY,    /* merged element by element, by merge key */
    PATCH_LIST_MERGE_SCALAR, /* a set of scalars: union */
};

/* How strategic merge treats list `field` inside an object that is the value
 * of field `parent` ("" at the top, the list's name for list elements).
 * *merge_key (may be NULL) gets the key for PATCH_LIST_MERGE_KEY. */
enum patch_list_strategy patch_list_strategy(const char *parent, const char *field, const char **merge_key);

/* JSON equality with numbers compared by value (1 == 1.0), objects by member
 * set, arrays in order. Values nested deeper than PATCH_MAX_DEPTH compare
 * unequal. */
bool patch_value_equal(const json_t *a, const json_t *b);

#endif
