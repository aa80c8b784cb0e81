/* Fuzz target: jparse against jansson. For each flag set, jparse_try and
 * json_loadb must accept the same inputs, and what they build must serialize
 * to the same bytes (types, order, values); jdump must write what json_dumps
 * writes. jparse_filtered must accept the same inputs too, and build
 * jansson's value with the members its filter drops deleted. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"

/* The filter: a member goes when a hash of its path and key says so, so
 * that the path handed to it is checked as well as the skipping. */
static unsigned path_hash(const struct jparse_seg *path, int depth, const char *key, size_t len) {
    unsigned h = 2166136261u;
    for (int i = 0; i <= depth; i++) {
        const char *k = i < depth ? path[i].key : key;
        size_t n = i < depth ? path[i].len : len;
        if (!k) k = "[]", n = 2;
        for (size_t j = 0; j < n; j++) h = (h ^ (unsigned char)k[j]) * 16777619u;
        h = (h ^ '/') * 16777619u;
    }
    return h;
}

static bool keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    (void)ud;
    return path_hash(path, depth, key, len) % 3 != 0;
}

/* What jparse_filtered should build: v with the same members deleted. */
static void prune(json_t *v, struct jparse_seg *path, int depth) {
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (depth < JPARSE_PATH_MAX) path[depth] = (struct jparse_seg){NULL, 0};
            prune(json_array_get(v, i), path, depth + 1);
        }
    } else if (json_is_object(v)) {
        const char *k;
        size_t n;
        json_t *m, *tmp;
        json_object_keylen_foreach_safe(v, tmp, k, n, m) {
            if (depth <= JPARSE_PATH_MAX && !keep(NULL, path, depth, k, n)) {
                json_object_deln(v, k, n);
                continue;
            }
            if (depth < JPARSE_PATH_MAX) path[depth] = (struct jparse_seg){k, n};
            prune(m, path, depth + 1);
        }
    }
}

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
        if (!(flags[i] & JSON_REJECT_DUPLICATES)) {
            json_t *c = jparse_filtered((const char *)data, size, flags[i], keep, NULL);
            if (!a != !c) abort();
            if (a) {
                struct jparse_seg path[JPARSE_PATH_MAX];
                prune(a, path, 0);
                char *sa = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
                char *sc = json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);
                if (!sa || !sc || strcmp(sa, sc)) abort();
                free(sa);
                free(sc);
            }
            json_decref(c);
        }
        json_decref(a);
        json_decref(b);
    }
    return 0;
}
