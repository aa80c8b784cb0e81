/* Fuzz target: the input splits at its first NUL into a CRD structural
 * schema (openAPIV3Schema, JSON) and a custom resource (JSON). A schema that
 * compiles is used to prune, default and validate the object. Checks that
 * the inputs are left untouched where they should be, that validation is
 * deterministic and bounded, that errors come in the documented shape, and
 * that prune and defaults are idempotent.
 * The object is also validated as the built-ins are (validate.h) as a Pod, a
 * Secret and a ConfigMap: errors in the same shape, the object untouched but
 * for a Secret's stringData fold, and a folded Secret that was valid stays
 * valid and unchanged when validated again. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"
#include "validate.h"

static void check_result(const struct schema_result *r, int rc) {
    if ((rc == 0) != (r->n == 0) || r->n > SCHEMA_MAX_ERRORS || (r->truncated && r->n != SCHEMA_MAX_ERRORS)) abort();
    for (size_t i = 0; i < r->n; i++)
        if (!r->errors[i].reason || !r->errors[i].field || !r->errors[i].message || !*r->errors[i].message) abort();
}

static bool same(const struct schema_result *a, const struct schema_result *b) {
    if (a->n != b->n || a->truncated != b->truncated) return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->errors[i].field, b->errors[i].field) || strcmp(a->errors[i].message, b->errors[i].message) ||
            a->errors[i].reason != b->errors[i].reason)
            return false;
    return true;
}

static void builtin(const char *kind, const json_t *obj) {
    json_t *o = json_deep_copy(obj);
    struct schema_result r = {0};
    int rc = validate_object("", kind, o, &r);
    if (rc != -ENOMEM) check_result(&r, rc);
    if (strcmp(kind, "Secret") && !json_equal(o, obj)) abort();
    schema_result_free(&r);
    if (rc == 0 && !strcmp(kind, "Secret")) {
        json_t *again = json_deep_copy(o);
        if (json_object_get(o, "stringData") || validate_object("", kind, again, &r) != 0 || !json_equal(o, again))
            abort();
        schema_result_free(&r);
        json_decref(again);
    }
    json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    size_t slen = (size_t)(nul - data);
    json_t *sch = json_loadb((const char *)data, slen, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    json_t *obj = json_loadb((const char *)nul + 1, size - slen - 1, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!sch || !obj) {
        json_decref(sch);
        json_decref(obj);
        return 0;
    }
    json_t *s0 = json_deep_copy(sch), *o0 = json_deep_copy(obj);
    if (json_is_object(obj)) {
        builtin("Pod", obj);
        builtin("Secret", obj);
        builtin("ConfigMap", obj);
    }
    struct schema *s = NULL;
    char err[512];
    int rc = schema_compile(sch, &s, err, sizeof err);
    if (!json_equal(sch, s0)) abort();
    if (rc == 0) {
        struct schema_result a = {0}, b = {0}, c = {0}, d = {0};
        int ra = schema_validate(s, obj, &a), rb = schema_validate(s, obj, &b);
        if (!json_equal(obj, o0) || ra != rb || !same(&a, &b)) abort(); /* borrowed, deterministic */
        check_result(&a, ra);
        char msg[256];
        int fl = schema_result_format(&a, msg, sizeof msg);
        if (fl < 0 || (a.n && fl == 0)) abort();
        json_t *causes = schema_result_causes(&a);
        if (!causes || json_array_size(causes) != a.n) abort();
        json_decref(causes);
        if (schema_prune(s, obj) != 0 || schema_apply_defaults(s, obj) != 0) abort();
        int rcc = schema_validate(s, obj, &c);
        check_result(&c, rcc);
        json_t *snap = json_deep_copy(obj);
        if (schema_prune(s, obj) != 0 || schema_apply_defaults(s, obj) != 0) abort();
        if (!json_equal(obj, snap)) abort(); /* idempotent */
        int rd = schema_validate(s, obj, &d);
        if (rd != rcc || !same(&c, &d)) abort();
        json_decref(snap);
        schema_result_free(&a);
        schema_result_free(&b);
        schema_result_free(&c);
        schema_result_free(&d);
        schema_free(s);
    } else if (s || !err[0]) {
        abort(); /* a refusal always explains itself and returns nothing */
    }
    json_decref(s0);
    json_decref(o0);
    json_decref(sch);
    json_decref(obj);
    return 0;
}
