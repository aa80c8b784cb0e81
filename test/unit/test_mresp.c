/* mclient's HTTP/1.1 response reader (src/mesos/mresp.c): pipelined
 * answers in any split, the framings, and the bounds. */
#include <stdlib.h>

#include "mresp.h"
#include "test.h"

struct answers {
    int n, status[8], close[8];
    char loc[8][MRESP_LOCATION_MAX], body[8][64];
    int end;
};

/* Feeds s in pieces of step bytes (0: whole), then the end of the connection. */
static void read_all(const char *s, size_t step, struct answers *a) {
    struct mresp r;
    size_t n = strlen(s);
    memset(a, 0, sizeof *a);
    mresp_init(&r);
    for (size_t off = 0; off < n;) {
        size_t len = step && off + step < n ? step : n - off, used = 0;
        int rc = mresp_feed(&r, s + off, len, &used);
        off += used;
        if (rc == MRESP_ERROR) {
            a->end = -1;
            mresp_free(&r);
            return;
        }
        if (rc == MRESP_DONE && a->n < 8) {
            a->status[a->n] = r.status;
            a->close[a->n] = r.close;
            snprintf(a->loc[a->n], MRESP_LOCATION_MAX, "%s", r.location);
            snprintf(a->body[a->n], 64, "%s", r.body ? r.body : "");
            a->n++;
            mresp_next(&r);
        }
    }
    a->end = mresp_eof(&r);
    if (a->end == MRESP_DONE && a->n < 8) {
        a->status[a->n] = r.status;
        snprintf(a->body[a->n], 64, "%s", r.body ? r.body : "");
        a->n++;
    }
    mresp_free(&r);
}

static const char PIPELINED[] =
    "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 25\r\n\r\nFramework cannot be found"
    "HTTP/1.1 100 Continue\r\n\r\n"
    "HTTP/1.1 307 Temporary Redirect\r\nlocation: //127.0.0.1:5051/api/v1/scheduler\r\nContent-Length: 0\r\n\r\n"
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n"
    "HTTP/1.1 202 Accepted\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";

TEST(mresp_pipelined_answers_in_any_split) {
    for (size_t step = 0; step < 9; step++) {
        struct answers a;
        read_all(PIPELINED, step, &a);
        REQUIRE_I64(a.n, 5);
        CHECK_I64(a.status[0], 202);
        CHECK_I64(a.status[1], 400);
        CHECK_STR(a.body[1], "Framework cannot be found");
        CHECK_I64(a.status[2], 307); /* the 100 was skipped */
        CHECK_STR(a.loc[2], "//127.0.0.1:5051/api/v1/scheduler");
        CHECK_I64(a.status[3], 200);
        CHECK_STR(a.body[3], "abcde");
        CHECK_I64(a.status[4], 202);
        CHECK(a.close[4]);
        CHECK(!a.close[0]);
        CHECK_I64(a.end, MRESP_MORE); /* nothing cut */
    }
}

TEST(mresp_body_to_the_end_and_cut_answers) {
    struct answers a;
    read_all("HTTP/1.0 200 OK\r\n\r\nall of it", 3, &a);
    REQUIRE_I64(a.n, 1);
    CHECK_STR(a.body[0], "all of it");
    CHECK_I64(a.end, MRESP_DONE);
    read_all("HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\n\r\nab", 0, &a);
    CHECK_I64(a.n, 0);
    CHECK_I64(a.end, MRESP_ERROR);
    read_all("HTTP/1.1 202 Acc", 0, &a);
    CHECK_I64(a.end, MRESP_ERROR);
}

TEST(mresp_refuses_what_is_not_a_response) {
    static const char *const bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 202 Accepted\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "HTTP/1.1 202 Accepted\r\nContent-Length: 99999999999999999\r\n\r\n",
        "HTTP/1.1 202 Accepted\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
        "HTTP/1.1 202 Accepted\r\nno colon here\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct answers a;
        read_all(bad[i], 0, &a);
        CHECK_I64(a.n, 0);
        CHECK_I64(a.end, MRESP_ERROR);
    }
    /* a head past the bound */
    struct mresp r;
    mresp_init(&r);
    char *big = malloc(MRESP_HEAD_MAX + 64);
    REQUIRE(big);
    int n = snprintf(big, 64, "HTTP/1.1 202 Accepted\r\nX: ");
    memset(big + n, 'a', MRESP_HEAD_MAX);
    size_t used;
    CHECK_I64(mresp_feed(&r, big, (size_t)n + MRESP_HEAD_MAX, &used), MRESP_ERROR);
    CHECK_HAS(r.err, "too large");
    mresp_free(&r);
    free(big);
}

TEST(mresp_keeps_a_bounded_body) {
    struct mresp r;
    mresp_init(&r);
    size_t len = MRESP_BODY_MAX + 1000;
    char head[80];
    int hl = snprintf(head, sizeof head, "HTTP/1.1 400 Bad Request\r\nContent-Length: %zu\r\n\r\n", len);
    size_t used;
    CHECK_I64(mresp_feed(&r, head, (size_t)hl, &used), MRESP_MORE);
    char *body = malloc(len);
    REQUIRE(body);
    memset(body, 'b', len);
    CHECK_I64(mresp_feed(&r, body, len, &used), MRESP_DONE);
    CHECK_I64(used, len);
    CHECK_I64(r.body_len, MRESP_BODY_MAX);
    free(body);
    mresp_free(&r);
}
