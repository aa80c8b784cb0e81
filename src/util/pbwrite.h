/* pbwrite: a protobuf wire-format writer into one growing buffer, for
 * messages we build by hand (the OpenAPI v2 document kubectl 1.20 reads)
 * without generated code.
 *
 * Fields are written in call order: a scalar with pbw_varint, pbw_int64,
 * pbw_bool, pbw_double; a string or bytes with pbw_string, pbw_bytes; an
 * embedded message between pbw_begin(field) and pbw_end. Every value is
 * written, defaults too: leaving out a proto3 default is the caller's choice.
 *
 * Errors are sticky: the first failure (-ENOMEM; -E2BIG past the writer's
 * byte limit or PBW_MAX_DEPTH open messages; -EINVAL for a pbw_end without
 * its pbw_begin, a field number of 0 or past 2^29-1) makes every later call a
 * no-op, and pbw_error and pbw_take report it.
 *
 * Ownership: the writer owns its buffer until pbw_take hands it to the
 * caller (free it with free); pbw_free releases whatever the writer holds. */
#ifndef PELOTON_UTIL_PBWRITE_H
#define PELOTON_UTIL_PBWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PBW_MAX_DEPTH 256             /* open embedded messages at once */
#define PBW_DEFAULT_MAX (64u << 20)   /* bytes, when pbw_init is given 0 */

struct pbw {
    unsigned char *buf;
    size_t len, cap, max;
    size_t open[PBW_MAX_DEPTH]; /* where each open message's body starts */
    int depth;
    int err;
};

/* max: the most bytes the message may take (0: PBW_DEFAULT_MAX). */
void pbw_init(struct pbw *w, size_t max);
void pbw_free(struct pbw *w);

void pbw_varint(struct pbw *w, uint32_t field, uint64_t v); /* uint32, uint64, enum */
void pbw_int64(struct pbw *w, uint32_t field, int64_t v);   /* int32, int64: negatives take 10 bytes */
void pbw_bool(struct pbw *w, uint32_t field, bool v);
void pbw_double(struct pbw *w, uint32_t field, double v);
void pbw_bytes(struct pbw *w, uint32_t field, const void *p, size_t n);
void pbw_string(struct pbw *w, uint32_t field, const char *s); /* NUL-terminated; NULL writes "" */

/* An embedded message: its fields follow, up to the matching pbw_end. */
void pbw_begin(struct pbw *w, uint32_t field);
void pbw_end(struct pbw *w);

int pbw_error(const struct pbw *w);
/* The finished message (*len bytes, malloc'd; the caller frees it) and the
 * writer emptied; NULL when an error happened or a message is still open
 * (*len is then 0). A message of no bytes is returned as a 1-byte buffer. */
unsigned char *pbw_take(struct pbw *w, size_t *len);

/* Bytes the varint encoding of v takes (1 to 10). */
size_t pbw_varint_size(uint64_t v);

#endif
