/* Fuzz target: HTTP/1.1 request heads (src/http/h1_parse.c). Whatever the
 * bytes, the parser either refuses with an HTTP status or yields a head
 * whose fields hold: a path starting with '/' and free of NULs before its
 * end, at most HTTP_MAX_ARGS arguments, a sane Content-Length. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > H1_MAX_HEAD) size = H1_MAX_HEAD;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    size_t end = h1_head_end(buf, size);
    if (end > size) abort();
    if (end) {
        struct h1_head h;
        char err[160];
        int code = h1_parse_head(buf, end, &h, err, sizeof err);
        if (code && code != 400 && code != 431 && code != 505) abort();
        if (!code) {
            if (!h.path || h.path[0] != '/' || h.nargs < 0 || h.nargs > HTTP_MAX_ARGS || !h.method_name) abort();
            if (h.content_length < -1 || h.content_length > (1LL << 51)) abort();
            for (int i = 0; i < h.nargs; i++)
                if (!h.keys[i] || !h.vals[i]) abort();
            (void)strlen(h.path), (void)strlen(h.content_type), (void)strlen(h.authorization);
        }
    }
    free(buf);
    return 0;
}
