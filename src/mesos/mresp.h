/* mresp: an incremental reader of HTTP/1.1 responses, for mclient's calls to
 * a Mesos master over kept-alive, pipelined connections. Pure (no I/O), so
 * that it is fuzzed (fuzz/fuzz_mresp.c).
 *
 * Bytes go in as they come (any split); each whole response is reported
 * once, and the bytes after it belong to the next one. What it keeps of a
 * response: the status, `Location` (a 307's), whether the server closes the
 * connection after it, and the first MRESP_BODY_MAX bytes of the body (the
 * master's error text). The body is framed by Content-Length, by chunks
 * (extensions and trailers skipped), or by the end of the connection; 1xx
 * answers are skipped, and 204 and 304 have none.
 *
 * Bounds: a head over MRESP_HEAD_MAX, a chunk size line over 64 bytes, a
 * Content-Length or chunk size that is not a number or over 2^40, two
 * different Content-Lengths, a status line that is not HTTP/1.x NNN: each
 * is an error with a sentence, after which the connection is unusable. */
#ifndef PELOTON_MESOS_MRESP_H
#define PELOTON_MESOS_MRESP_H

#include <stdbool.h>
#include <stddef.h>

#define MRESP_HEAD_MAX (16u << 10)
#define MRESP_BODY_MAX (64u << 10)
#define MRESP_LOCATION_MAX 256

enum mresp_phase { MRESP_HEAD, MRESP_LENGTH, MRESP_CHUNK_SIZE, MRESP_CHUNK_DATA, MRESP_CHUNK_CRLF, MRESP_TRAILER,
                   MRESP_EOF };

struct mresp {
    enum mresp_phase phase;
    int status;
    bool close;                           /* Connection: close, or HTTP/1.0 without keep-alive */
    char location[MRESP_LOCATION_MAX];    /* "" when none (or too long) */
    char *body;                           /* malloc'd, NUL-terminated; NULL when empty */
    size_t body_len;
    /* reading state */
    char *line;                           /* the head (or a chunk size or trailer line) so far */
    size_t line_len, line_cap;
    long long remaining;
    bool got_any;                         /* a byte of this response came */
    char err[160];
};

enum { MRESP_MORE = 0, MRESP_DONE = 1, MRESP_ERROR = -1 };

void mresp_init(struct mresp *r);
/* Frees what r holds; r may be reused after mresp_init. */
void mresp_free(struct mresp *r);
/* Reads from p (n bytes): *used of them are taken. MRESP_DONE: a response is
 * whole (read its fields, then mresp_next before feeding the rest);
 * MRESP_MORE: every byte taken, more needed; MRESP_ERROR: r->err says why. */
int mresp_feed(struct mresp *r, const char *p, size_t n, size_t *used);
/* The connection ended: MRESP_DONE when that ends a response read to the
 * end of the connection, MRESP_MORE when no byte of one had come, else
 * MRESP_ERROR (cut short). */
int mresp_eof(struct mresp *r);
/* Ready for the next response on the same connection (the body is freed
 * unless taken: set r->body to NULL after taking it). */
void mresp_next(struct mresp *r);

#endif
