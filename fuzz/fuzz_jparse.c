/* Fuzz target: jparse against jansson. For each flag set, jparse_try and
 * json_loadb must accept the same inputs, and what they build must serialize
 * to the same bytes (types, order, values); jdump must write what json_dumps
 * writes. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const size_t flags[] = {0, JSON_REJECT_DUPLICATES, JSON_DECODE_ANY, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        json_t *a = json_loadb((const char *)data, size, flags[i], NULL);
        json_t *b = jparse_try((const char *)data, size, flags[i]);
        if (!a != !b) abort(); /* one accepted what the other refused */
        if (a) {
            char *sa = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY), *sb = json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!sa || !sb || strcmp(sa, sb) || !json_equal(a, b)) abort();
            /* jdump writes what json_dumps writes, with and without JSON_ENCODE_ANY */
            size_t n = 0;
            char *sc = jdump(a, JSON_COMPACT | JSON_ENCODE_ANY, &n);
            if (!sc || strcmp(sa, sc) || n != strlen(sa)) abort();
            char *sd = json_dumps(a, JSON_COMPACT), *se = jdump(a, JSON_COMPACT, NULL);
            if (!sd != !se || (sd && strcmp(sd, se))) abort();
            free(sa);
            free(sb);
            free(sc);
            free(sd);
            free(se);
        }
        json_decref(a);
        json_decref(b);
    }
    return 0;
}
