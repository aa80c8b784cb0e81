/* Fuzz target: mesos-master-sim's request head parser
 * (mhttp_parse_head). On acceptance the head lies within the input, the
 * strings are within the parser's copy, and parsing the head alone gives the
 * same answer (the body does not change it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "msim_http.h"

static bool inside(const struct mhttp_head *h, const char *s) {
    return !s || (s >= h->buf && s + strlen(s) < h->buf + sizeof h->buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct mhttp_head a, b;
    int rc = mhttp_parse_head((const char *)data, size, &a);
    if (rc != 1 && rc != 0 && rc != -400 && rc != -431) abort();
    if (rc != 1) return 0;
    if (a.head_len > size || a.head_len > MHTTP_MAX_HEAD || !a.method || !a.path) abort();
    if (!inside(&a, a.method) || !inside(&a, a.path) || !inside(&a, a.content_type) || !inside(&a, a.accept) ||
        !inside(&a, a.stream_id))
        abort();
    if (mhttp_parse_head((const char *)data, a.head_len, &b) != 1 || b.clen != a.clen || strcmp(a.path, b.path))
        abort();
    return 0;
}
