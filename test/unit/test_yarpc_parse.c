/* yarpc_parse.h: YARPC's request head, what it takes and what it refuses. */
#include <errno.h>
#include <string.h>

#include "test.h"
#include "yarpc_parse.h"

static long parse(const char *s, struct yarpc_head *h) { return yarpc_parse_head(s, strlen(s), 4096, h); }

TEST(yarpc_head_fields) {
    struct yarpc_head h;
    const char *req = "POST /api/v1 HTTP/1.1\r\nrpc-procedure: a.B::C\r\nRpc-Encoding:  json \r\nRpc-Caller: x\r\n"
                      "Rpc-Service: y\r\nContext-TTL-Ms: 100\r\nContent-Length: 2\r\nAuthorization: Bearer t\r\n"
                      "Expect: 100-continue\r\n\r\n{}";
    long n = parse(req, &h);
    CHECK_I64(n, (long)(strstr(req, "{}") - req));
    CHECK_STR(h.method, "POST");
    CHECK_STR(h.path, "/api/v1");
    CHECK_STR(h.procedure, "a.B::C"); /* header names in any case */
    CHECK_STR(h.encoding, "json");    /* values trimmed */
    CHECK_STR(h.ttl, "100");
    CHECK_STR(h.authorization, "Bearer t");
    CHECK_I64(h.content_length, 2);
    CHECK(h.expect_continue && !h.close && !h.http10);
    CHECK_I64(parse("POST / HTTP/1.0\nConnection: close\n\n", &h), 35);
    CHECK(h.http10 && h.close && h.content_length == -1);
    CHECK_I64(parse("POST / HTTP/1.1\r\nRpc-Caller: x", &h), 0); /* more to come */
}

TEST(yarpc_head_refusals) {
    struct yarpc_head h;
    static const char *bad[] = {
        "post / HTTP/1.1\r\n\r\n",                                   /* method not upper case */
        "POST  HTTP/1.1\r\n\r\n",                                    /* no target */
        "POST / HTTP/2.0\r\n\r\n",                                   /* version */
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "POST / HTTP/1.1\r\nX: a\x01b\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_I64(parse(bad[i], &h), -EINVAL);
    /* a NUL inside the target (a fuzzer's find: it cut the path short, then read as "") */
    static const char nul[] = "POST /a\0pi/v1 HTTP/1.1\r\n\r\n";
    CHECK_I64(yarpc_parse_head(nul, sizeof nul - 1, 4096, &h), -EINVAL);
    char big[600];
    memset(big, 'a', sizeof big);
    big[sizeof big - 1] = 0;
    char req[1000];
    snprintf(req, sizeof req, "POST / HTTP/1.1\r\nRpc-Procedure: %s\r\n\r\n", big); /* over YARPC_MAX_VALUE */
    CHECK_I64(parse(req, &h), -EINVAL);
    CHECK_I64(yarpc_parse_head(req, strlen(req), 64, &h), -EMSGSIZE); /* head over the bound */
}
