/* Fuzz target: the HTTP/1.1 response reader of mclient's calls
 * (src/mesos/mresp.c). The input is read as a connection's bytes, whole,
 * then again in splits chosen by its first byte; both runs must read the
 * same responses (status, Location, close, body) and end alike, and no
 * bound may be passed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mresp.h"

struct seen {
    unsigned n;
    unsigned long sum; /* of statuses, body lengths and bytes */
    int end;
};

static void take(struct mresp *r, struct seen *s) {
    if (r->body_len > MRESP_BODY_MAX || strlen(r->location) >= MRESP_LOCATION_MAX) abort();
    if (r->status < 200 || r->status > 599) abort();
    s->n++;
    s->sum = s->sum * 31 + (unsigned long)r->status + r->body_len * 7 + (r->close ? 3 : 0) + strlen(r->location);
    for (size_t i = 0; i < r->body_len; i++) s->sum = s->sum * 131 + (unsigned char)r->body[i];
    mresp_next(r);
}

static void run(const char *p, size_t n, size_t step, struct seen *s) {
    struct mresp r;
    mresp_init(&r);
    for (size_t off = 0; off < n;) {
        size_t len = step && off + step < n ? step : n - off;
        size_t used = 0;
        int rc = mresp_feed(&r, p + off, len, &used);
        if (used > len) abort();
        if (rc == MRESP_ERROR) {
            s->end = -1;
            mresp_free(&r);
            return;
        }
        off += used;
        if (rc == MRESP_DONE) take(&r, s);
        else if (used != len) abort();
    }
    int rc = mresp_eof(&r);
    if (rc == MRESP_DONE) take(&r, s);
    s->end = rc;
    mresp_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t step = 1 + data[0] % 13;
    struct seen a = {0}, b = {0};
    run((const char *)data + 1, size - 1, 0, &a);
    run((const char *)data + 1, size - 1, step, &b);
    if (a.n != b.n || a.sum != b.sum || a.end != b.end) abort();
    return 0;
}
