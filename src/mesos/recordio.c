/* RecordIO framing (recordio.h). The decoder is a two-state machine: the
 * length header, read digit by digit, then the data. A record wholly inside
 * one feed is handed out from the caller's bytes; only a record split across
 * feeds is copied into the decoder's buffer. */
#include "recordio.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void recordio_decoder_init(struct recordio_decoder *d, size_t max_record) {
    memset(d, 0, sizeof *d);
    d->max_record = max_record ? max_record : RECORDIO_DEFAULT_MAX;
}

void recordio_decoder_free(struct recordio_decoder *d) {
    free(d->buf);
    d->buf = NULL;
    d->len = d->cap = 0;
}

static int fail(struct recordio_decoder *d, int code, const char *what, unsigned char c) {
    if (code == -EBADMSG && what == NULL)
        snprintf(d->err, sizeof d->err, "recordio: malformed record length: byte 0x%02x where a digit or newline belongs",
                 c);
    else
        snprintf(d->err, sizeof d->err, "recordio: %s", what);
    d->failed = code;
    return code;
}

/* Reads header bytes from p; returns how many it used, or a negative error.
 * Sets d->in_data once the newline is read. */
static long read_header(struct recordio_decoder *d, const char *p, size_t n) {
    size_t i = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') {
            if (d->ndigits == 0) return fail(d, -EBADMSG, "malformed record length: empty", 0);
            d->in_data = true;
            d->len = 0;
            return (long)(i + 1);
        }
        if (c < '0' || c > '9') return fail(d, -EBADMSG, NULL, c);
        if (++d->ndigits > RECORDIO_MAX_DIGITS) return fail(d, -EBADMSG, "malformed record length: too many digits", 0);
        size_t digit = (size_t)(c - '0');
        /* Past the bound already (checked before it can overflow): refuse now, not
         * at the newline, so no byte of a huge record is ever waited for. */
        if (digit > d->max_record || d->want > (d->max_record - digit) / 10) {
            char msg[96];
            snprintf(msg, sizeof msg, "record longer than the bound of %zu bytes", d->max_record);
            return fail(d, -EMSGSIZE, msg, 0);
        }
        d->want = d->want * 10 + digit;
    }
    return (long)i;
}

static int deliver(struct recordio_decoder *d, const char *data, size_t len, recordio_record_fn fn, void *ud) {
    d->in_data = false;
    d->ndigits = 0;
    d->want = 0;
    d->len = 0;
    d->records++;
    return fn ? fn(ud, data, len) : 0;
}

int recordio_decode(struct recordio_decoder *d, const char *data, size_t n, recordio_record_fn fn, void *ud) {
    if (d->failed) return d->failed;
    size_t off = 0;
    while (off < n) {
        if (!d->in_data) {
            long used = read_header(d, data + off, n - off);
            if (used < 0) return (int)used;
            off += (size_t)used;
            if (!d->in_data) break; /* header continues in the next feed */
            if (d->want == 0) {     /* an empty record is a record */
                int rc = deliver(d, data + off, 0, fn, ud);
                if (rc) return rc;
            }
            continue;
        }
        size_t need = d->want - d->len, avail = n - off;
        if (d->len == 0 && avail >= need) { /* whole record in this feed: no copy */
            const char *rec = data + off;
            off += need;
            int rc = deliver(d, rec, need, fn, ud);
            if (rc) return rc;
            continue;
        }
        if (d->cap < d->want) {
            char *nb = realloc(d->buf, d->want);
            if (!nb) return fail(d, -ENOMEM, "out of memory buffering a record", 0);
            d->buf = nb;
            d->cap = d->want;
        }
        size_t take = avail < need ? avail : need;
        memcpy(d->buf + d->len, data + off, take);
        d->len += take;
        off += take;
        if (d->len == d->want) {
            int rc = deliver(d, d->buf, d->want, fn, ud);
            if (rc) return rc;
        }
    }
    /* A buffer grown for one large record is not kept for the life of the stream. */
    if (!d->in_data && d->cap > (64u << 10)) recordio_decoder_free(d);
    return 0;
}

bool recordio_at_boundary(const struct recordio_decoder *d) {
    return !d->failed && !d->in_data && d->ndigits == 0;
}

int recordio_finish(struct recordio_decoder *d) {
    if (d->failed) return d->failed;
    if (recordio_at_boundary(d)) return 0;
    if (d->in_data)
        snprintf(d->err, sizeof d->err, "recordio: stream ended inside a record (%zu of %zu bytes)", d->len, d->want);
    else
        snprintf(d->err, sizeof d->err, "recordio: stream ended inside a record length");
    d->failed = -EPIPE;
    return -EPIPE;
}

int recordio_encode(char **out, size_t *olen, size_t *ocap, const char *data, size_t len) {
    char hdr[RECORDIO_MAX_DIGITS + 2];
    int h = snprintf(hdr, sizeof hdr, "%zu\n", len);
    size_t need = *olen + (size_t)h + len;
    if (need > *ocap) {
        size_t cap = *ocap ? *ocap : 256;
        while (cap < need) cap *= 2;
        char *nb = realloc(*out, cap);
        if (!nb) return -ENOMEM;
        *out = nb;
        *ocap = cap;
    }
    memcpy(*out + *olen, hdr, (size_t)h);
    if (len) memcpy(*out + *olen + h, data, len);
    *olen = need;
    return 0;
}
