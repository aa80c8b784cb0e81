/* Fuzz target: the native server's framing parsers. The first byte picks
 * one: the gRPC deframer (fed in pieces whose sizes come from the input,
 * against a 1 KiB message bound and at most 2 messages: every message taken
 * must be as long as its prefix said and within the bound), the grpc-timeout
 * parser, or the YARPC HTTP/1.1 head parser (a head it accepts ends at a
 * blank line inside the input and within the bound). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_frame.h"
#include "yarpc_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    uint8_t mode = data[0] % 3;
    data++;
    size--;
    if (mode == 0) {
        struct grpc_deframer d;
        grpc_deframer_init(&d, 1024, 2);
        size_t off = 0, piece = 1;
        while (off < size) {
            size_t n = size - off < piece ? size - off : piece;
            long used = grpc_deframer_feed(&d, data + off, n);
            if (used < 0) break;
            if ((size_t)used > n) abort();
            off += (size_t)used;
            size_t len;
            uint8_t *m = grpc_deframer_take(&d, &len);
            if (m && len > 1024) abort();
            free(m);
            if (!used && !m) abort(); /* no progress without a message to take */
            piece = piece * 3 % 97 + 1;
        }
        grpc_deframer_free(&d);
    } else if (mode == 1) {
        char s[32];
        size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
        memcpy(s, data, n);
        s[n] = 0;
        long long ms = grpc_timeout_ms(s);
        if (ms < -1 || ms > (1LL << 31)) abort();
    } else {
        struct yarpc_head h;
        long n = yarpc_parse_head((const char *)data, size, 4096, &h);
        if (n > 0 && ((size_t)n > size || n > 4096 || data[n - 1] != '\n')) abort();
        if (n > 0 && (h.content_length < -1 || !h.method[0] || !h.path[0])) abort();
    }
    return 0;
}
