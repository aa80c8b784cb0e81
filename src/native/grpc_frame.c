/* gRPC length-prefixed message framing (grpc_frame.h). */
#include "grpc_frame.h"

#include <stdlib.h>
#include <string.h>

void grpc_deframer_init(struct grpc_deframer *d, size_t max_message, unsigned max_messages) {
    memset(d, 0, sizeof *d);
    d->max_message = max_message;
    d->max_messages = max_messages;
}

void grpc_deframer_free(struct grpc_deframer *d) {
    free(d->msg);
    free(d->done);
    d->msg = d->done = NULL;
}

/* The current message is complete: it waits to be taken. */
static void finish(struct grpc_deframer *d) {
    d->done = d->msg ? d->msg : malloc(1); /* an empty message is still a message */
    d->done_len = d->len;
    d->msg = NULL;
    d->have_prefix = 0;
    d->len = d->have = 0;
    d->count++;
    if (!d->done) d->error = GRPC_FRAME_NOMEM;
}

long grpc_deframer_feed(struct grpc_deframer *d, const uint8_t *p, size_t n) {
    size_t used = 0;
    if (d->error) return d->error;
    while (used < n && !d->done) {
        if (d->have_prefix < GRPC_PREFIX_LEN) {
            size_t k = GRPC_PREFIX_LEN - d->have_prefix;
            if (k > n - used) k = n - used;
            memcpy(d->prefix + d->have_prefix, p + used, k);
            d->have_prefix += k;
            used += k;
            if (d->have_prefix < GRPC_PREFIX_LEN) break;
            if (d->count >= d->max_messages) return d->error = GRPC_FRAME_TOO_MANY;
            if (d->prefix[0] != 0) return d->error = GRPC_FRAME_COMPRESSED;
            uint32_t len = (uint32_t)d->prefix[1] << 24 | (uint32_t)d->prefix[2] << 16 | (uint32_t)d->prefix[3] << 8 |
                           d->prefix[4];
            if (len > d->max_message) return d->error = GRPC_FRAME_TOO_LARGE;
            d->len = len;
            d->have = 0;
            if (!len) {
                finish(d);
                break;
            }
            /* grown as bytes arrive, so a peer announcing a large message
             * and sending nothing holds no memory for it */
            continue;
        }
        size_t k = d->len - d->have;
        if (k > n - used) k = n - used;
        uint8_t *m = realloc(d->msg, d->have + k);
        if (!m) return d->error = GRPC_FRAME_NOMEM;
        d->msg = m;
        memcpy(d->msg + d->have, p + used, k);
        d->have += k;
        used += k;
        if (d->have == d->len) finish(d);
    }
    if (d->error) return d->error;
    return (long)used;
}

uint8_t *grpc_deframer_take(struct grpc_deframer *d, size_t *len) {
    uint8_t *m = d->done;
    if (m) *len = d->done_len;
    d->done = NULL;
    d->done_len = 0;
    return m;
}

bool grpc_deframer_partial(const struct grpc_deframer *d) {
    return d->have_prefix > 0 && !d->done;
}

void grpc_frame_prefix(uint8_t out[GRPC_PREFIX_LEN], size_t len) {
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

long long grpc_timeout_ms(const char *s) {
    size_t n = strlen(s);
    if (n < 2 || n > 9) return -1;
    long long v = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    long long ms;
    switch (s[n - 1]) {
    case 'H': ms = v * 3600000; break;
    case 'M': ms = v * 60000; break;
    case 'S': ms = v * 1000; break;
    case 'm': ms = v; break;
    case 'u': ms = (v + 999) / 1000; break;
    case 'n': ms = (v + 999999) / 1000000; break;
    default: return -1;
    }
    return ms > (1LL << 31) ? (1LL << 31) : ms;
}
