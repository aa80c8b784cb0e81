/* Fuzz target: the input splits at its first NUL into a target document and
 * a patch document (both JSON); the patch is applied as a JSON merge patch,
 * a JSON patch and a strategic merge patch. Checks that the inputs are left
 * untouched and that a merge patch is idempotent (RFC 7386). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    size_t tlen = (size_t)(nul - data);
    json_t *target = json_loadb((const char *)data, tlen, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    json_t *patch = json_loadb((const char *)nul + 1, size - tlen - 1, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!target || !patch) {
        json_decref(target);
        json_decref(patch);
        return 0;
    }
    json_t *t0 = json_deep_copy(target), *p0 = json_deep_copy(patch);
    char err[512];
    json_t *out, *again;
    if (patch_merge(target, patch, &out, err, sizeof err) == 0) {
        if (patch_merge(out, patch, &again, err, sizeof err) != 0 || !json_equal(out, again)) abort();
        json_decref(again);
        /* the sharing variant: the same result */
        if (patch_merge_sharing(target, patch, &again, err, sizeof err) != 0 || !json_equal(out, again)) abort();
        json_decref(again);
        json_decref(out);
    } else if (patch_merge_sharing(target, patch, &again, err, sizeof err) == 0) {
        abort(); /* and the same refusals */
    }
    if (patch_json(target, patch, &out, err, sizeof err) == 0) json_decref(out);
    if (patch_strategic(target, patch, &out, err, sizeof err) == 0) json_decref(out);
    if (!json_equal(target, t0) || !json_equal(patch, p0)) abort();
    json_decref(t0);
    json_decref(p0);
    json_decref(target);
    json_decref(patch);
    return 0;
}
