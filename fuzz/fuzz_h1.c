/* Fuzz target: HTTP/1.1 request heads (src/http/h1_parse.c). Whatever the
 * bytes, the parser either refuses with an HTTP status or yields a head
 * whose fields hold: a path starting with '/', free of NULs before its end
 * and at most HTTP_MAX_PATH bytes, at most HTTP_MAX_ARGS arguments, header
 * values without control characters (HTAB aside), a sane Content-Length.
 * The same bytes are also a request target as HTTP/2's :path hands it over
 * (http_parse_target, up to the first NUL): refused, or a path that holds. */
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
    char *target = strdup(buf);
    if (target) {
        const char *path = NULL, *keys[HTTP_MAX_ARGS], *vals[HTTP_MAX_ARGS];
        int nargs = -1;
        char err[160];
        int code = http_parse_target(target, &path, keys, vals, &nargs, err, sizeof err);
        if (code && code != 400 && code != 414) abort();
        if (!code && (!path || path[0] != '/' || strlen(path) > HTTP_MAX_PATH || nargs < 0 || nargs > HTTP_MAX_ARGS))
            abort();
        free(target);
    }
    size_t end = h1_head_end(buf, size);
    if (end > size) abort();
    if (end) {
        struct h1_head h;
        char err[160];
        int code = h1_parse_head(buf, end, &h, err, sizeof err);
        if (code && code != 400 && code != 414 && code != 431 && code != 505) abort();
        if (!code) {
            if (!h.path || h.path[0] != '/' || h.nargs < 0 || h.nargs > HTTP_MAX_ARGS || !h.method_name) abort();
            if (h.content_length < -1 || h.content_length > (1LL << 51)) abort();
            for (int i = 0; i < h.nargs; i++)
                if (!h.keys[i] || !h.vals[i]) abort();
            if (strlen(h.path) > HTTP_MAX_PATH) abort();
            const char *vals[] = {h.content_type, h.accept, h.authorization};
            for (int i = 0; i < 3; i++)
                for (const unsigned char *p = (const unsigned char *)vals[i]; *p; p++)
                    if ((*p < ' ' && *p != '\t') || *p == 0x7f) abort();
        }
    }
    free(buf);
    return 0;
}
