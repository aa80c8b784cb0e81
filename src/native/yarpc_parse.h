/* An HTTP/1.1 request head as YARPC's HTTP transport sends it: the request
 * line and the headers YARPC uses, nothing else (the native server's YARPC
 * inbound; pure, fuzzed by fuzz/fuzz_grpcframe.c).
 *
 * yarpc_parse_head reads a head of at most max bytes from buf: the head's
 * length when complete (through the blank line), 0 when more bytes are
 * needed, or a negative errno: -EMSGSIZE (head over max), -EINVAL
 * (malformed: no request line, a bad header line, a bad or repeated
 * Content-Length, a Transfer-Encoding, which YARPC does not send, a value
 * longer than YARPC_MAX_VALUE). Pointers in the result point into buf
 * (NUL-terminated copies live in the struct). */
#ifndef PELOTON_NATIVE_YARPC_PARSE_H
#define PELOTON_NATIVE_YARPC_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#define YARPC_MAX_VALUE 256

struct yarpc_head {
    char method[16];
    char path[YARPC_MAX_VALUE];
    char procedure[YARPC_MAX_VALUE]; /* Rpc-Procedure */
    char encoding[32];               /* Rpc-Encoding */
    char caller[128];                /* Rpc-Caller */
    char service[128];               /* Rpc-Service */
    char ttl[32];                    /* Context-TTL-Ms */
    char content_type[128];
    char authorization[1024];
    long long content_length;        /* -1 when absent */
    bool http10, close;              /* HTTP/1.0; "Connection: close" */
    bool expect_continue;            /* "Expect: 100-continue" (curl sends it for bodies over 1 KiB) */
};

long yarpc_parse_head(const char *buf, size_t n, size_t max, struct yarpc_head *h);

#endif
