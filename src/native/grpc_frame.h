/* gRPC's message framing on an HTTP/2 stream: each message is a 1-byte
 * compressed flag, a 4-byte big-endian length, then that many bytes. A
 * stream's DATA arrives in pieces of any size; the deframer collects whole
 * messages, refusing one longer than its bound before reading it (the bound
 * is checked on the length prefix, so an oversized message costs nothing to
 * refuse), a set compressed flag (we announce no compression), and more
 * messages than the method takes.
 *
 * Ownership: the deframer owns its buffer (grpc_deframer_free); a message
 * handed out by grpc_deframer_take belongs to the caller (free). Pure; no
 * I/O. */
#ifndef PELOTON_NATIVE_GRPC_FRAME_H
#define PELOTON_NATIVE_GRPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRPC_PREFIX_LEN 5

enum grpc_frame_err {
    GRPC_FRAME_OK = 0,
    GRPC_FRAME_TOO_LARGE = -1,  /* a length over max_message: RESOURCE_EXHAUSTED */
    GRPC_FRAME_COMPRESSED = -2, /* compressed flag set (or not 0/1): UNIMPLEMENTED / INTERNAL */
    GRPC_FRAME_TOO_MANY = -3,   /* more messages than max_messages */
    GRPC_FRAME_NOMEM = -4,
};

struct grpc_deframer {
    size_t max_message;  /* bytes of one message */
    unsigned max_messages;
    uint8_t prefix[GRPC_PREFIX_LEN];
    size_t have_prefix;  /* bytes of the current prefix read */
    uint8_t *msg;        /* the message being read */
    size_t len, have;    /* its length and bytes read */
    uint8_t *done;       /* a complete message waiting to be taken (one at a time) */
    size_t done_len;
    unsigned count;      /* messages completed */
    int error;           /* sticky once set */
};

void grpc_deframer_init(struct grpc_deframer *d, size_t max_message, unsigned max_messages);
void grpc_deframer_free(struct grpc_deframer *d);
/* Feeds n bytes; returns how many were consumed (fewer than n when a whole
 * message is waiting: take it, then feed the rest) or a grpc_frame_err. */
long grpc_deframer_feed(struct grpc_deframer *d, const uint8_t *p, size_t n);
/* The waiting message (caller frees), or NULL. */
uint8_t *grpc_deframer_take(struct grpc_deframer *d, size_t *len);
/* True when input stopped in the middle of a prefix or message (at END_STREAM:
 * a truncated message). */
bool grpc_deframer_partial(const struct grpc_deframer *d);

/* Writes the 5-byte prefix for a message of len bytes. */
void grpc_frame_prefix(uint8_t out[GRPC_PREFIX_LEN], size_t len);

/* grpc-timeout ("1S", "250m", "30000u": at most 8 digits and a unit of H M S
 * m u n) in milliseconds, rounded up, capped at 2^31; -1 when malformed. */
long long grpc_timeout_ms(const char *s);

#endif
