/* mesos-master-sim's request head parser (src/mesos/msim_http.c). */
#include "msim_http.h"
#include "test.h"

static int parse(const char *text, struct mhttp_head *h) { return mhttp_parse_head(text, strlen(text), h); }

TEST(mhttp_parse_head_fields) {
    static struct mhttp_head h;
    const char *req = "POST /api/v1/scheduler?x=1 HTTP/1.1\r\nHost: a\r\ncontent-type:  application/json \r\n"
                      "Accept: */*\r\nMesos-Stream-Id: abc\r\nContent-Length: 12\r\n\r\n{\"type\":\"X\"}";
    REQUIRE_I64(parse(req, &h), 1);
    CHECK_STR(h.method, "POST");
    CHECK_STR(h.path, "/api/v1/scheduler");
    CHECK_STR(h.content_type, "application/json");
    CHECK_STR(h.accept, "*/*");
    CHECK_STR(h.stream_id, "abc");
    CHECK_I64(h.clen, 12);
    CHECK(!h.close && !h.chunked);
    CHECK_I64(h.head_len, strlen(req) - 12);
    /* a second parse into the same struct keeps nothing of the first (the bug
     * the e2e tests caught: a stale Mesos-Stream-Id on a SUBSCRIBE) */
    REQUIRE_I64(parse("POST / HTTP/1.0\r\n\r\n", &h), 1);
    CHECK(h.stream_id == NULL && h.content_type == NULL && h.accept == NULL);
    CHECK_I64(h.clen, 0);
    CHECK(h.close);
}

TEST(mhttp_parse_head_refusals) {
    static struct mhttp_head h;
    CHECK_I64(parse("POST / HTTP/1.1\r\nHost: a\r\n", &h), 0); /* not whole yet */
    CHECK_I64(parse("HELLO\r\n\r\n", &h), -400);
    CHECK_I64(parse("POST / HTTP/2\r\n\r\n", &h), -400);
    CHECK_I64(parse("POST / HTTP/1.1 extra\r\n\r\n", &h), -400);
    CHECK_I64(parse("POST / HTTP/1.1\r\nno colon\r\n\r\n", &h), -400);
    CHECK_I64(parse("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &h), -400);
    CHECK_I64(parse("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", &h), -400);
    CHECK_I64(parse("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", &h), -400);
    CHECK_I64(parse("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", &h), -400);
    CHECK_I64(mhttp_parse_head("POST /\0 HTTP/1.1\r\n\r\n", 21, &h), -400);
    REQUIRE_I64(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: Close\r\n\r\n", &h), 1);
    CHECK(h.chunked && h.close);
    static char big[MHTTP_MAX_HEAD + 10];
    memset(big, 'a', sizeof big - 1);
    CHECK_I64(parse(big, &h), -431);
    big[100] = 0;
    CHECK_I64(parse(big, &h), 0);
}
