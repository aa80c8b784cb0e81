/* Fuzz target: the reply side of the CLI's gRPC client (clistream.h), the
 * part that reads what a server sends: the input's lines up to an empty one
 * are header and trailer lines, the rest is the body, fed in pieces whose
 * sizes come from the input, decoded as WatchService.Watch replies (a
 * message with nested, repeated and map fields). Each decoded message must
 * be a JSON object; the status must be one of clirpc's codes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clistream.h"
#include "peloton/api/v1alpha/watch/svc/watch_svc.pb-c.h"

static int on_msg(void *ud, json_t *msg) {
    unsigned *n = ud;
    if (!json_is_object(msg)) abort();
    return ++*n >= 64; /* a watch's --limit */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const struct clirpc_method m = {"peloton.api.v1alpha.watch.svc.WatchService::Watch", "peloton-jobmgr",
                                           &peloton__api__v1alpha__watch__svc__watch_request__descriptor,
                                           &peloton__api__v1alpha__watch__svc__watch_response__descriptor};
    struct clirpc r;
    memset(&r, 0, sizeof r);
    unsigned n = 0;
    struct clistream_reply st;
    clistream_reply_init(&st, &r, &m, on_msg, &n);
    size_t off = 0;
    while (off < size) { /* header lines */
        const uint8_t *nl = memchr(data + off, '\n', size - off);
        size_t len = nl ? (size_t)(nl - (data + off)) + 1 : size - off;
        if (len <= 2 && (data[off] == '\n' || data[off] == '\r')) {
            off += len;
            break;
        }
        clistream_reply_header(&st, (const char *)data + off, len);
        off += len;
    }
    size_t piece = 1;
    while (off < size) {
        size_t k = size - off < piece ? size - off : piece;
        if (!clistream_reply_body(&st, data + off, k)) break;
        off += k;
        piece = piece * 7 % 251 + 1;
    }
    int rc = clistream_reply_status(&st);
    if (rc != CLIRPC_OK && rc != CLIRPC_ERR_STATUS && rc != CLIRPC_ERR_TRANSPORT) abort();
    if (rc == CLIRPC_ERR_STATUS && !r.code[0]) abort();
    clistream_reply_free(&st);
    return 0;
}
