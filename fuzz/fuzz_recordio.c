/* Fuzz target: the RecordIO decoder (src/mesos/recordio.c). The input is
 * fed whole, then again in splits chosen by its first byte; both runs must
 * agree on the records and on the error, and what decodes must encode back
 * to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "recordio.h"

struct sink {
    char *out;
    size_t len, cap;
};

static int append(void *ud, const char *data, size_t len) {
    struct sink *s = ud;
    if (recordio_encode(&s->out, &s->len, &s->cap, data, len)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t step = 1 + data[0] % 7, max = 1 + data[0] % 200;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;

    struct recordio_decoder a, b;
    struct sink sa = {0}, sb = {0};
    recordio_decoder_init(&a, max);
    recordio_decoder_init(&b, max);
    int ra = recordio_decode(&a, p, n, append, &sa);
    int rb = 0;
    for (size_t off = 0; off < n && rb == 0; off += step)
        rb = recordio_decode(&b, p + off, off + step <= n ? step : n - off, append, &sb);
    if (ra != rb || a.records != b.records || sa.len != sb.len || (sa.len && memcmp(sa.out, sb.out, sa.len)))
        abort();
    /* On success the re-encoded records are a prefix of the input (the
     * remainder a partial record); a canonical input encodes to itself. */
    if (ra == 0 && (sa.len > n || (sa.len && memcmp(sa.out, p, sa.len) && memchr(p, '0', n) == NULL))) abort();
    if (ra == 0 && recordio_finish(&a) == 0 && recordio_at_boundary(&b) != true) abort();
    recordio_decoder_free(&a);
    recordio_decoder_free(&b);
    free(sa.out);
    free(sb.out);
    return 0;
}
