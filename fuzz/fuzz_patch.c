/* Fuzz target: the input splits at its first NUL into a target document and
 * a patch document (both JSON); the patch is applied as a JSON merge patch,
 * a JSON patch and a strategic merge patch. Checks that the inputs are left
 * untouched and that a merge patch is idempotent (RFC 7386).
 * Each type is also applied under small limits (SMALL below), so that
 * mutations reach them often and stay cheap (a JSON patch of copies doubles
 * its document at each one: under the default limits the ASan build would
 * spend most of the run building 1.5 MiB documents): a result must be within
 * the limits, and the size the patch accounted for must be the result's. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "patch.h"
#include "patch_int.h"

static const struct patch_limits SMALL = {64 * 1024, 16384, 64, 200000, 1000};

/* Applies patch under lim; aborts when a result breaks the limits or the account. */
static void limited(enum patch_type type, const json_t *target, const json_t *patch, const struct patch_limits *lim) {
    json_t *out = NULL;
    struct patch_size tracked;
    char err[512];
    if (patch_apply_tracked(type, target, patch, lim, &out, err, sizeof err, &tracked) != 0) {
        if (out) abort();
        return;
    }
    struct patch_size real = pb_value(out);
    if (real.bytes != tracked.bytes || real.nodes != tracked.nodes) abort();
    if (real.bytes > lim->max_bytes || real.nodes > lim->max_nodes || real.depth > lim->max_depth) abort();
    json_decref(out);
}

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
    if (patch_strategic(target, patch, &out, err, sizeof err) == 0) json_decref(out);
    static const struct patch_limits dflt = PATCH_LIMITS_DEFAULT;
    limited(PATCH_MERGE, target, patch, &dflt);
    limited(PATCH_STRATEGIC, target, patch, &dflt);
    for (int t = PATCH_MERGE; t <= PATCH_STRATEGIC; t++) limited((enum patch_type)t, target, patch, &SMALL);
    if (!json_equal(target, t0) || !json_equal(patch, p0)) abort();
    json_decref(t0);
    json_decref(p0);
    json_decref(target);
    json_decref(patch);
    return 0;
}
