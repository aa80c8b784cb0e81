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
 * patches); -E2BIG a limit below; -ENOMEM.
 * Limits: recursion follows the patch and stops at PATCH_MAX_DEPTH levels; a
 * JSON patch holds at most PATCH_MAX_OPS operations; a strategic list at most
 * PATCH_MAX_LIST elements. Untouched subtrees of the target are copied with
 * jansson's json_deep_copy, whose depth is bounded by jansson's parser.
 * The shim should parse patch bodies with JSON_REJECT_DUPLICATES (RFC 6902
 * A.13: a patch operation with a repeated member is invalid). */
#ifndef PELOTON_K8S_PATCH_H
#define PELOTON_K8S_PATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define PATCH_MAX_DEPTH 64
#define PATCH_MAX_OPS 10000
#define PATCH_MAX_LIST 10000

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
