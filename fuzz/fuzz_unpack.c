/* Fuzz target: stored objects as the store reads them back from Redis
 * (store_unpack: packed or plain bytes; Redis is shared, so they are not
 * trusted to be what this build wrote), and a pack/unpack roundtrip of the
 * input cut in two around a resourceVersion; the same for text packed in
 * memory (store_pack_text). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct store_pack *p = store_pack_new();
    if (!p) return 0;
    char *out = NULL;
    size_t outlen = 0;
    if (store_unpack(p, (const char *)data, size, 1 << 20, &out, &outlen) == 0 && out && outlen > (1 << 20)) abort();
    free(out);
    /* roundtrip: head = the first half, tail = the rest (no byte below 0x09: JSON text has none) */
    char *json = malloc(size + 1);
    size_t n = 0;
    for (size_t i = 0; i < size; i++)
        if (data[i] >= 0x09) json[n++] = (char)data[i];
    json[n] = 0;
    if (n >= 2 && json[0] != 0x01) {
        struct store_blob b = {.json = json, .head_len = n / 2, .tail = json + n / 2, .tail_len = n - n / 2};
        store_pack_blob(p, &b);
        if (b.pk) {
            size_t len = b.pk_head_len + 3 + b.pk_tail_len;
            char *stored = malloc(len);
            memcpy(stored, b.pk, b.pk_head_len);
            memcpy(stored + b.pk_head_len, "123", 3);
            memcpy(stored + b.pk_head_len + 3, b.pk_tail, b.pk_tail_len);
            size_t h = n / 2;
            if (store_unpack(p, stored, len, 1 << 20, &out, &outlen) || !out || outlen != n + 3 ||
                memcmp(out, json, h) || memcmp(out + h, "123", 3) || memcmp(out + h + 3, json + h, n - h))
                abort();
            free(out);
            free(stored);
        }
        free(b.pk);
    }
    /* text packed in memory: the input as a frame of any claimed length, and a roundtrip */
    char dst[4096];
    (void)store_unpack_text(p, (const char *)data, size, dst, size % sizeof dst);
    char *z = NULL;
    size_t zn = 0;
    if (store_pack_text(p, json, n, &z, &zn) == 0) {
        char *back = malloc(n + 1);
        if (store_unpack_text(p, z, zn, back, n) || memcmp(back, json, n)) abort();
        free(back);
        free(z);
    }
    free(json);
    store_pack_free(p);
    return 0;
}
