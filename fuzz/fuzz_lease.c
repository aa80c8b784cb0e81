/* Fuzz target: lease_text_renew (src/k8s/lease_text.h). The input splits at
 * its first NUL into a stored Lease's text and a patch (JSON). The edit must
 * not crash on any text; when it makes a renewal, the version's place must
 * sit between two quotes, and when the stored text is JSON the result (with
 * a version put in) must be JSON equal to the generic path's result: the
 * shim's patch steps and the store's shaping (and byte for byte equal when
 * the stored text is the store's own encoding). */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"
#include "lease_text.h"
#include "patch.h"
#include "shim.h"
#include "store.h"
#include "store_int.h"

static const struct shim_resource *leases(void) {
    for (int i = 0; i < shim_nresources; i++)
        if (!strcmp(shim_resources[i].store_key, "leases.coordination.k8s.io")) return &shim_resources[i];
    abort();
}

/* What the generic path stores for patch over cur, with version "7"; NULL
 * when it refuses or writes nothing. */
static json_t *generic(const json_t *cur, const json_t *patch) {
    const struct shim_resource *r = leases();
    json_t *n = NULL, *shaped = NULL, *d = NULL;
    char err[512];
    if (patch_merge(cur, patch, &n, err, sizeof err)) return NULL;
    shim_meta_omit_empty(n);
    json_t *md = json_object_get(n, "metadata");
    const char *nname = json_string_value(json_object_get(md, "name"));
    if (!json_is_object(md) || !nname || strcmp(nname, "n1")) {
        json_decref(n);
        return NULL;
    }
    if (json_is_null(json_object_get(n, "status"))) json_object_del(n, "status");
    if (!json_string_value(json_object_get(json_object_get(patch, "metadata"), "resourceVersion")))
        json_object_del(md, "resourceVersion");
    shim_view_in(r, shim_with_type(r, n));
    int unchanged = 0, del = 0, cond = 0;
    if (shim_validate(r, n, "n1", err, sizeof err, &d)) {
        json_decref(d);
        json_decref(n);
        return NULL;
    }
    if (store_shape_modify(r->store_key, "kube-node-lease", "n1", cur, n, &shaped, &unchanged, &del, &cond, err,
                           sizeof err) ||
        unchanged || del) {
        json_decref(shaped);
        return NULL;
    }
    json_object_set_new(json_object_get(shaped, "metadata"), "resourceVersion", json_string("7"));
    return shaped;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    size_t tlen = (size_t)(nul - data);
    json_t *patch = jparse_loadb((const char *)nul + 1, size - tlen - 1, JSON_REJECT_DUPLICATES, NULL);
    if (!patch) return 0;
    struct lease_renewal lr;
    int rc = lease_text_renew((const char *)data, tlen, "kube-node-lease", "n1", patch, &lr);
    if (rc) {
        if (rc != -EAGAIN && rc != -ENOMEM) abort();
        json_decref(patch);
        return 0;
    }
    if (lr.rv_at < 1 || lr.rv_at >= lr.len || lr.text[lr.rv_at - 1] != '"' || lr.text[lr.rv_at] != '"') abort();
    json_t *cur = jparse_loadb((const char *)data, tlen, JSON_REJECT_DUPLICATES, NULL);
    if (cur) {
        char *with = malloc(lr.len + 2);
        memcpy(with, lr.text, lr.rv_at);
        with[lr.rv_at] = '7';
        memcpy(with + lr.rv_at + 1, lr.text + lr.rv_at, lr.len - lr.rv_at + 1);
        json_t *mine = jparse_loadb(with, lr.len + 1, 0, NULL), *g = generic(cur, patch);
        if (!mine || !g || !json_equal(mine, g)) abort();
        size_t clen = 0;
        char *canon = jdump(cur, JSON_COMPACT, &clen), *gtext = jdump(g, JSON_COMPACT, NULL);
        if (canon && clen == tlen && !memcmp(canon, data, tlen) && (!gtext || strcmp(gtext, with))) abort();
        free(canon);
        free(gtext);
        json_decref(mine);
        json_decref(g);
        json_decref(cur);
        free(with);
    }
    free(lr.text);
    json_decref(patch);
    return 0;
}
