/* Validation of custom resources against a CustomResourceDefinition
 * version's structural schema (apiextensions.k8s.io/v1
 * `schema.openAPIV3Schema`), as kube-apiserver does on create and update:
 * schema_prune drops unknown fields, schema_apply_defaults fills defaults,
 * schema_validate collects every violation as a Kubernetes StatusCause
 * ({reason, message, field}) worded as kube-apiserver words it.
 *
 * Ownership: schema_compile borrows its json_t (nothing is kept: enums and
 * defaults are deep-copied) and returns a new struct schema the caller frees
 * with schema_free (NULL-safe). A compiled schema is read-only (its patterns
 * are compiled once, by regex.h's engine, and kept inside it) and may be
 * shared between threads.
 * schema_validate borrows obj; its errors live in a struct schema_result the
 * caller owns and empties with schema_result_free. schema_apply_defaults and
 * schema_prune modify obj in place (defaults are deep copies).
 * Errors: 0 on success; -EINVAL a schema that is not structural enough to
 * use (err names the node and why), -E2BIG a limit below, -ENOMEM.
 * Limits: SCHEMA_MAX_DEPTH nested schema nodes, SCHEMA_MAX_NODES nodes in all,
 * SCHEMA_MAX_PATTERNS patterns of SCHEMA_MAX_PATTERN_LEN bytes, each compiled
 * to at most REGEX_MAX_INSTS instructions (regex.h: {n,m} counts up to
 * REGEX_MAX_REPEAT, as RE2) and SCHEMA_MAX_PATTERN_INSTS for all of them
 * (8 bytes an instruction); SCHEMA_MAX_ERRORS errors kept and
 * SCHEMA_MAX_STEPS steps per validation, where a step is one (schema node,
 * value) check or SCHEMA_REGEX_STATES_PER_STEP regex states visited (a
 * pattern search visits about the value's length x the states alive): some
 * 0.2 s of work at most, whatever the object and patterns. All walks follow
 * the compiled schema, so their depth is bounded by SCHEMA_MAX_DEPTH whatever
 * the object holds. No I/O, no global state.
 * See docs/crd-validation.md for what is supported and how it differs. */
#ifndef PELOTON_K8S_SCHEMA_H
#define PELOTON_K8S_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define SCHEMA_MAX_DEPTH 64
#define SCHEMA_MAX_NODES 10000
#define SCHEMA_MAX_PATTERNS 1000
#define SCHEMA_MAX_PATTERN_LEN 1024
#define SCHEMA_MAX_PATTERN_INSTS 100000 /* regex instructions, all patterns together (~800 KB) */
#define SCHEMA_MAX_ERRORS 100
#define SCHEMA_MAX_STEPS 10000000 /* (schema node, value) checks per validation, ~20 ns each */
#define SCHEMA_REGEX_STATES_PER_STEP 8 /* regex states visited (~2 ns each) that cost one step */
#define SCHEMA_MAX_VALUE_SHOWN 256 /* bytes of a bad value quoted in a message */

struct schema;

/* One StatusCause. reason is a static string (a Kubernetes field.ErrorType
 * cause: FieldValueRequired, FieldValueInvalid, FieldValueTypeInvalid,
 * FieldValueNotSupported, FieldValueTooLong, FieldValueTooMany, and
 * InternalError when SCHEMA_MAX_STEPS ran out); field is the path
 * (`spec.resources[0].kind`, "" for the root); message is the error body
 * without the field, e.g.
 * `Invalid value: 11: spec.replicas in body should be less than or equal to 10`. */
struct schema_error {
    const char *reason;
    char *field;
    char *message;
};

/* Filled by schema_validate; zero-initialise before first use. */
struct schema_result {
    size_t n;       /* errors kept, at most SCHEMA_MAX_ERRORS */
    bool truncated; /* more errors were found and dropped */
    struct schema_error *errors;
};

/* Compiles a structural schema (the value of openAPIV3Schema). The root must
 * be `type: object`. Refused (-EINVAL): an unknown or missing `type` (unless
 * x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields stands
 * for it), `properties`/`required`/`additionalProperties` on a non-object,
 * `items` on a non-array or an array without `items`, both `properties` and
 * `additionalProperties`, $ref/patternProperties/additionalItems/definitions/
 * dependencies/uniqueItems:true, keywords of the wrong JSON type, a pattern
 * regex_compile refuses (RE2's refusals: back-references, lookaround, ...;
 * -E2BIG past its limits or SCHEMA_MAX_PATTERN_INSTS), a default that does
 * not validate against its own node. */
int schema_compile(const json_t *openapi_v3_schema, struct schema **out, char *err, size_t errlen);

void schema_free(struct schema *s);

/* Validates obj (a custom resource) and appends every violation to res,
 * keeping the first SCHEMA_MAX_ERRORS. At the root, apiVersion and kind are
 * only checked to be strings and metadata to be an object.
 * Returns 0 when res->n == 0, -EINVAL when there are errors, -ENOMEM. */
int schema_validate(const struct schema *s, const json_t *obj, struct schema_result *res);

void schema_result_free(struct schema_result *res);

/* Appends one error (field and message copied; reason static), keeping at
 * most SCHEMA_MAX_ERRORS (then truncated is set). 0 or -ENOMEM. For other
 * validators that answer in the same shape (validate.h). */
int schema_result_add(struct schema_result *res, const char *reason, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Returns a new array of StatusCause objects {reason, message, field} for a
 * Status `details.causes` (caller json_decrefs), or NULL on ENOMEM. */
json_t *schema_result_causes(const struct schema_result *res);

/* Writes the aggregate message kube-apiserver puts after `... is invalid: `:
 * "field: message" for one error, "[f1: m1, f2: m2]" for several.
 * snprintf semantics: returns the full length, writes at most len-1. */
int schema_result_format(const struct schema_result *res, char *buf, size_t len);

/* Fills defaults in place, top-down, as kube-apiserver's structural
 * defaulting: a missing property with a `default` gets a deep copy of it (and
 * is then defaulted inside); a null in a non-nullable property is replaced by
 * its default or, without one, removed; null array items with a default item
 * schema are replaced. Returns 0 or -ENOMEM. */
int schema_apply_defaults(const struct schema *s, json_t *obj);

/* Removes, in place, every field the schema does not specify, except under
 * x-kubernetes-preserve-unknown-fields, and apiVersion, kind and metadata at
 * the root and in x-kubernetes-embedded-resource objects. Returns 0. */
int schema_prune(const struct schema *s, json_t *obj);

#endif
