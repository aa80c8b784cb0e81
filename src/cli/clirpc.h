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
#include <stddef.h>

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
void clirpc_free(struct clirpc *r);

/* base: "host:port", "http://host:port" or a URL with a path (used as is).
 * On CLIRPC_OK *resp is the reply as proto3 JSON; otherwise r->code (for
 * CLIRPC_ERR_STATUS) and r->msg say what went wrong. */
int clirpc_call(struct clirpc *r, const char *base, const struct clirpc_method *m, const json_t *req,
                json_t **resp);

/* The URL a call to base goes to, into out. */
void clirpc_url(const char *base, char *out, size_t outlen);

#endif
