/* The reply half of clirpc_stream (clistream.c), apart from libcurl so that
 * tests and fuzz/fuzz_clistream.c can drive it: header and trailer lines
 * (grpc-status, grpc-message percent-decoded), body bytes deframed and each
 * whole message decoded with pbmsg's bounds and handed to fn as proto3
 * JSON, and the status once the reply has ended.
 *
 * Ownership: the reply borrows r, m and ud; clistream_reply_free releases
 * its buffers. */
#ifndef PELOTON_CLI_CLISTREAM_H
#define PELOTON_CLI_CLISTREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "clirpc.h"
#include "grpc_frame.h"

struct clistream_reply {
    struct clirpc *r; /* r->code and r->msg say what went wrong */
    const struct clirpc_method *m;
    struct grpc_deframer df;
    clirpc_stream_fn fn;
    void *ud;
    bool stopped;      /* fn asked to stop */
    bool bad;          /* a reply could not be read: r->msg says why */
    char status[16];   /* grpc-status, "" until seen */
    char message[512]; /* grpc-message, percent-decoded */
};

void clistream_reply_init(struct clistream_reply *st, struct clirpc *r, const struct clirpc_method *m,
                          clirpc_stream_fn fn, void *ud);
void clistream_reply_free(struct clistream_reply *st);
/* One header or trailer line, "name: value" with or without its CRLF. */
void clistream_reply_header(struct clistream_reply *st, const char *line, size_t n);
/* Body bytes; false once reading stops (fn stopped it, or a bad reply). */
bool clistream_reply_body(struct clistream_reply *st, const uint8_t *p, size_t n);
/* After the reply ended: CLIRPC_OK (status 0 after whole messages),
 * CLIRPC_ERR_STATUS (r->code, r->msg), or CLIRPC_ERR_TRANSPORT (no status,
 * a bad one, or a message cut short: r->msg). */
int clistream_reply_status(struct clistream_reply *st);

#endif
