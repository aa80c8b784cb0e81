/* RecordIO, the framing of Mesos' streaming responses (the scheduler API's
 * SUBSCRIBE stream, the operator API's SUBSCRIBE): each record is its length
 * in decimal ASCII, a newline, then that many bytes, with nothing after the
 * data. Chunk boundaries of the HTTP body are not record boundaries.
 *
 * Decoding is incremental: feed the bytes as they arrive, in any split, and
 * the callback gets each whole record once, in order. A record longer than
 * the decoder's bound is refused before any of it is buffered (a master that
 * sends one is broken or hostile), and so is a length that is not plain
 * decimal digits followed by a newline. After an error the decoder stays
 * failed: the stream cannot be resynchronised, the caller drops it.
 *
 * Ownership: the caller owns the decoder struct; recordio_decoder_free
 * releases the buffer it grows (at most its bound plus a header). A record
 * handed to the callback is borrowed for the call only. No global state. */
#ifndef PELOTON_MESOS_RECORDIO_H
#define PELOTON_MESOS_RECORDIO_H

#include <stdbool.h>
#include <stddef.h>

/* The bound a client uses unless it says otherwise: an OFFERS event for a
 * few thousand agents stays well under it. */
#define RECORDIO_DEFAULT_MAX (16u << 20)
/* Digits a length may have: 20 holds any 64-bit value; a longer one is
 * refused as malformed whatever the bound. */
#define RECORDIO_MAX_DIGITS 20

struct recordio_decoder {
    size_t max_record; /* bytes; a longer record fails the stream */
    /* header: the digits read so far (ndigits), the length they spell */
    size_t ndigits, want;
    bool in_data;      /* header done: reading want bytes of data */
    char *buf;         /* data of a record split across feeds */
    size_t len, cap;
    int failed;        /* 0, or the error recordio_decode returned */
    char err[160];     /* what was wrong, for logs and error replies */
    unsigned long long records; /* records delivered so far */
};

/* Called for each whole record; a nonzero return stops the decoding and is
 * returned by recordio_decode (the decoder is not marked failed by it, and
 * the rest of that feed is dropped). The callback must not free the decoder. */
typedef int (*recordio_record_fn)(void *ud, const char *data, size_t len);

/* max_record 0 means RECORDIO_DEFAULT_MAX. Never fails (allocates lazily). */
void recordio_decoder_init(struct recordio_decoder *d, size_t max_record);
void recordio_decoder_free(struct recordio_decoder *d);

/* Feeds n bytes. Returns 0 when they were consumed, -EBADMSG for a
 * malformed length, -EMSGSIZE for a record past the bound, -ENOMEM, or the
 * callback's nonzero value. On -EBADMSG/-EMSGSIZE/-ENOMEM the decoder is
 * failed (every later call returns the same) and d->err says why. */
int recordio_decode(struct recordio_decoder *d, const char *data, size_t n, recordio_record_fn fn, void *ud);

/* Whether the decoder sits between records: the stream may end here. A
 * stream that ends elsewhere was truncated (recordio_truncated says so). */
bool recordio_at_boundary(const struct recordio_decoder *d);
/* Writes into d->err why the stream is truncated and returns -EPIPE, or 0
 * when it is at a boundary. For the caller to call when the body ends. */
int recordio_finish(struct recordio_decoder *d);

/* Appends one record (len bytes of data) to the growing buffer *out (*olen
 * used, *ocap allocated; realloc'd as needed). 0, or -ENOMEM with the buffer
 * unchanged. */
int recordio_encode(char **out, size_t *olen, size_t *ocap, const char *data, size_t len);

#endif
