/* clirpc: one unary call to a Peloton service over YARPC's HTTP/1.1
 * transport with the proto encoding (docs/cli.md says why): `POST
 * <base>/api/v1` with Rpc-Procedure, Rpc-Service, Rpc-Caller, Rpc-Encoding:
 * proto and Context-TTL-Ms, plus `authorization: Bearer <token>` when there
 * is a token. The request is built as proto3 JSON and mapped to the message
 * by pbjson; the reply is decoded with pbmsg's bounds and handed back as
 * proto3 JSON, which both the tables and -j print.
 *
 * Ownership: a struct clirpc holds one libcurl handle (kept alive between
 * calls); clirpc_free releases it. *resp (new JSON) is the caller's. */
#ifndef PELOTON_CLI_CLIRPC_H
#define PELOTON_CLI_CLIRPC_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLIRPC_MAX_REPLY (64u << 20)

enum clirpc_rc {
    CLIRPC_OK = 0,
    CLIRPC_ERR_STATUS = 1,    /* the server answered with an error: code and message set */
    CLIRPC_ERR_INPUT = 2,     /* the request did not map to the message: message set */
    CLIRPC_ERR_TRANSPORT = 3, /* no answer: unreachable, timed out, not YARPC: message set */
};

struct clirpc {
    void *curl;
    const char *token;  /* borrowed; NULL: none */
    const char *cacert, *cert, *key; /* TLS (borrowed, NULL: libcurl's defaults, no client certificate) */
    long timeout_ms;
    char code[64];      /* YARPC error code: "not-found", "unauthenticated", … */
    char msg[1024];
};

struct clirpc_method {
    const char *procedure; /* "peloton.api.job.JobManager::Get" */
    const char *service;   /* Rpc-Service: "peloton-jobmgr" */
    const ProtobufCMessageDescriptor *req, *resp;
};

int clirpc_init(struct clirpc *r, const char *token, long timeout_ms);
/* The TLS options of r on the handle c (a libcurl easy handle). */
void clirpc_tls(const struct clirpc *r, void *c);
void clirpc_free(struct clirpc *r);

/* base: "host:port", "http://host:port" or a URL with a path (used as is).
 * On CLIRPC_OK *resp is the reply as proto3 JSON; otherwise r->code (for
 * CLIRPC_ERR_STATUS) and r->msg say what went wrong. */
int clirpc_call(struct clirpc *r, const char *base, const struct clirpc_method *m, const json_t *req,
                json_t **resp);

/* One server-streaming call over gRPC (clistream.c): HTTP/2 through
 * libcurl, cleartext with prior knowledge for "host:port" and http:// bases,
 * TLS with ALPN h2 for https:// ones (any path in base is dropped: gRPC's is
 * "/<service>/<method>"). The request is one framed message; each reply
 * message is decoded with pbmsg's bounds and handed to fn as proto3 JSON
 * (borrowed) as it arrives; fn returns 0 for more, 1 to stop (the stream is
 * cancelled; not an error). max_ms bounds the whole call (0: none; reaching
 * it is not an error either). The status comes from grpc-status and
 * grpc-message (trailers, or a Trailers-Only answer): CLIRPC_ERR_STATUS
 * with r->code as YARPC names it ("not-found") for a non-zero status. */
typedef int (*clirpc_stream_fn)(void *ud, json_t *msg);
int clirpc_stream(struct clirpc *r, const char *base, const struct clirpc_method *m, const json_t *req, long max_ms,
                  clirpc_stream_fn fn, void *ud);

/* req (proto3 JSON) as m's request on the wire (the caller frees it), or
 * NULL with r->msg saying why. */
uint8_t *clirpc_encode(struct clirpc *r, const struct clirpc_method *m, const json_t *req, size_t *len);
/* A header line "Name: value\r\n": true with its value (trimmed, cut to
 * outlen) in out when its name is name (without case). */
bool clirpc_header_value(const char *line, size_t n, const char *name, char *out, size_t outlen);

/* The URL a call to base goes to, into out. */
void clirpc_url(const char *base, char *out, size_t outlen);

#endif
