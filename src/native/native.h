/* The native API server: Peloton's protobuf services over gRPC (HTTP/2
 * cleartext with prior knowledge, nghttp2) and over YARPC's HTTP/1.1
 * transport (POST /api/v1 or / with Rpc-* headers, proto or JSON bodies),
 * both on one port of a libuv loop the caller owns: the first bytes of a
 * connection tell which (the HTTP/2 preface or an HTTP/1.1 request line).
 * docs/native-api.md describes what is served and how it maps onto the
 * object model.
 *
 * Methods live in a registry shared by both transports, keyed by
 * "<package>.<Service>/<Method>" (gRPC path without its leading slash; YARPC's
 * "<package>.<Service>::<Method>" is looked up the same way). A handler gets
 * the decoded request and must complete the call exactly once, at once or
 * later on the loop thread: native_call_reply (unary), or native_call_send
 * any number of times then native_call_end (server streaming), or
 * native_call_fail. A call whose client went away or whose deadline passed
 * still has to be completed; its answer is then dropped (native_call_gone
 * says so, so long work can stop early).
 *
 * Errors use gRPC's codes (enum native_code). Over YARPC they become YARPC
 * error codes with their HTTP statuses (Rpc-Status: error, Rpc-Error-Code).
 *
 * Ownership: the registry keeps the method structs it is given (static
 * storage) and the ud pointers; native_server_start borrows the registry
 * for the server's life. The request message belongs to the call (freed
 * when the call completes); replies are borrowed. Loop thread only. */
#ifndef PELOTON_NATIVE_H
#define PELOTON_NATIVE_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "strmap.h"

enum native_code {
    NC_OK = 0,
    NC_CANCELLED = 1,
    NC_UNKNOWN = 2,
    NC_INVALID_ARGUMENT = 3,
    NC_DEADLINE_EXCEEDED = 4,
    NC_NOT_FOUND = 5,
    NC_ALREADY_EXISTS = 6,
    NC_PERMISSION_DENIED = 7,
    NC_RESOURCE_EXHAUSTED = 8,
    NC_FAILED_PRECONDITION = 9,
    NC_ABORTED = 10,
    NC_OUT_OF_RANGE = 11,
    NC_UNIMPLEMENTED = 12,
    NC_INTERNAL = 13,
    NC_UNAVAILABLE = 14,
    NC_DATA_LOSS = 15,
    NC_UNAUTHENTICATED = 16,
};

/* gRPC's name of a code ("NOT_FOUND"). */
const char *native_code_name(enum native_code c);
/* The YARPC name of a code ("not-found") and its HTTP status (404). */
const char *native_code_yarpc(enum native_code c);
int native_code_http(enum native_code c);

struct native_call;
typedef void (*native_handler_fn)(void *ud, struct native_call *call, const ProtobufCMessage *req);

struct native_method {
    const char *name; /* "CreateResourcePool" */
    const ProtobufCMessageDescriptor *in, *out;
    native_handler_fn fn;
    bool server_stream;
};

struct native_registry {
    struct strmap by_path; /* "<service>/<method>" -> struct native_entry */
};

void native_registry_init(struct native_registry *r);
void native_registry_free(struct native_registry *r);
/* Registers n methods of service (a full name such as
 * "peloton.api.respool.ResourceManager"); call again with another name for
 * an alias. 0 or -ENOMEM. */
int native_registry_add(struct native_registry *r, const char *service, const struct native_method *m, size_t n,
                        void *ud);
/* The method for "<service>/<method>" (or "<service>::<method>"), with its
 * ud in *ud; NULL when none. */
const struct native_method *native_registry_find(const struct native_registry *r, const char *key, void **ud);

/* ---- completing a call (loop thread) ---- */
void native_call_reply(struct native_call *c, const ProtobufCMessage *resp);
/* The same with resp packed already (len bytes at packed, borrowed), sent as
 * they are where the wire wants protobuf (a reply kept and sent many times
 * is packed once); resp serves YARPC's JSON and calls from inside. */
void native_call_reply_packed(struct native_call *c, const ProtobufCMessage *resp, const uint8_t *packed, size_t len);
void native_call_fail(struct native_call *c, enum native_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Server streaming. A producer registers fn (native_call_set_producer);
 * native_call_send then queues one message of the stream and returns 0
 * (send more), 1 (queued, but NATIVE_STREAM_HIGH bytes or more wait for the
 * client: send no more until fn runs with gone false), or -EPIPE (the client
 * is gone or the stream was ended: the message is dropped; end the call).
 * A producer that keeps sending past NATIVE_STREAM_MAX waiting bytes has its
 * stream ended with RESOURCE_EXHAUSTED (-EPIPE), so a client that does not
 * read never makes the server buffer without bound. fn runs on the loop,
 * never from inside a native_* call: with gone false once the waiting bytes
 * fell to NATIVE_STREAM_LOW after a 1, and once with gone true when the
 * client has gone (stream reset, connection closed, deadline passed, server
 * stopping; the server's stop calls it before it returns): the producer
 * stops and ends the call (its status is then dropped). */
#define NATIVE_STREAM_HIGH (256u << 10)
#define NATIVE_STREAM_LOW (64u << 10)
#define NATIVE_STREAM_MAX (4u << 20)
typedef void (*native_stream_fn)(void *ud, struct native_call *c, bool gone);
void native_call_set_producer(struct native_call *c, native_stream_fn fn, void *ud);
int native_call_send(struct native_call *c, const ProtobufCMessage *m);
void native_call_end(struct native_call *c, enum native_code code, const char *msg);
bool native_call_gone(const struct native_call *c);
/* "grpc" or "yarpc", and the caller's name (YARPC Rpc-Caller, gRPC user-agent). */
const char *native_call_transport(const struct native_call *c);
const char *native_call_caller(const struct native_call *c);
/* The caller's verified TLS client certificate: its subject's CN and its O
 * entries ('\n'-joined), or NULL (plain port, or no certificate). */
const char *native_call_peer_cn(const struct native_call *c);
const char *native_call_peer_orgs(const struct native_call *c);
/* The method's name ("ListPods"). */
const char *native_call_method(const struct native_call *c);
/* The server's native_config.app (NULL once the server is gone). */
void *native_call_app(const struct native_call *c);

/* ---- calls from inside the process ----
 * One service answering through another's handler (v1alpha
 * ResourcePoolService through v0 ResourceManager): the method key
 * ("<service>/<method>") of the registry outer's server serves, run with req
 * (a message the call takes: freed with protobuf_c_message_free_unpacked);
 * done runs exactly once, later or before this returns, with the status and,
 * for OK, the reply (borrowed for the callback). A call on a stopped server,
 * or of a method not served, fails with its status through done. */
typedef void (*native_internal_fn)(void *ud, enum native_code code, const char *msg, const ProtobufCMessage *resp);
void native_call_internal(struct native_call *outer, const char *key, ProtobufCMessage *req, native_internal_fn done,
                          void *ud);

/* ---- the server ---- */
#define NATIVE_DEFAULT_MAX_MESSAGE (4u << 20) /* bytes of one request message (gRPC's default) */
#define NATIVE_DEFAULT_MAX_STREAMS 256        /* concurrent HTTP/2 streams a connection may open */
#define NATIVE_DEFAULT_MAX_CONNS 4096
#define NATIVE_MAX_HEAD 16384                 /* bytes of an HTTP/1.1 request head or an HTTP/2 header list */
#define NATIVE_MAX_OUTPUT (8u << 20)          /* bytes a connection may have unsent before it is not read */

struct native_config {
    const char *bind_addr; /* default "127.0.0.1" */
    int port;              /* 0: a free port (native_server_port) */
    size_t max_message;    /* default NATIVE_DEFAULT_MAX_MESSAGE; a larger request gets RESOURCE_EXHAUSTED */
    unsigned max_streams;  /* default NATIVE_DEFAULT_MAX_STREAMS */
    unsigned max_conns;    /* default NATIVE_DEFAULT_MAX_CONNS; more are closed at accept */
    /* When set (borrowed: it must outlive the server), every call must carry
     * "authorization: Bearer <token>" (gRPC metadata, or YARPC's HTTP
     * header), the Kubernetes API's token; else UNAUTHENTICATED. */
    const char *token;
    /* When set, it decides every call once its method is known, and the
     * token above is not checked: authz is the Authorization value ("" when
     * absent), peer_cn and peer_orgs the caller's verified TLS client
     * certificate (native_call_peer_cn; NULL without one), procedure
     * "<service>/<method>" (gRPC) or "<service>::<method>" (YARPC). NC_OK,
     * or a code (NC_UNAUTHENTICATED, NC_PERMISSION_DENIED) with msg. On the
     * server's loop thread (docs/security.md). */
    int (*authorize)(void *ud, const char *authz, const char *peer_cn, const char *peer_orgs, const char *procedure,
                     char *msg, size_t msglen);
    void *authorize_ud;
    const struct native_registry *registry;
    void *app; /* the role's own context for its handlers (native_call_app), borrowed */
    /* Which transports the port takes: both (the default, told apart by the
     * first bytes), or YARPC's HTTP/1.1 only (an HTTP/2 connection is
     * closed at once). */
    enum native_serve { NATIVE_SERVE_BOTH = 0, NATIVE_SERVE_YARPC } serve;
    /* When set, the services this port serves out of the registry: route
     * returns NULL for a service served here, else where it is ("the
     * resource manager's port 5394"), and a call of it gets UNIMPLEMENTED
     * (YARPC: unimplemented) saying so. Calls from inside the process
     * (native_call_internal) are not routed. */
    const char *(*route)(void *ud, const char *service);
    void *route_ud;
    /* TLS (borrowed SSL_CTX, it must outlive the server): every connection
     * is TLS; ALPN "h2" is gRPC, "http/1.1" or none YARPC; a client
     * certificate the context verified names the caller (peer_cn below). */
    struct ssl_ctx_st *tls;
    /* When set (borrowed), the server's calls are counted and timed in it
     * (docs/metrics.md, "Native API"): families registered at start, on the
     * loop's thread, their one writer. */
    struct metrics *metrics;
};

struct native_stats {
    uint64_t calls, failed, connections;
    unsigned open_conns, open_calls;
};

struct native_server;
int native_server_start(uv_loop_t *loop, const struct native_config *cfg, struct native_server **out, char *err,
                        size_t errlen);
int native_server_port(const struct native_server *s);
/* Stops listening and closes every connection (calls in flight become
 * gone); run the loop until it has no more work, then native_server_free. */
void native_server_stop(struct native_server *s);
void native_server_free(struct native_server *s);
/* A server started but not to be used (a later step of its owner's start
 * failed, before the loop ran): stopped, and freed by the loop once its
 * handles are closed. */
void native_server_discard(struct native_server *s);
void native_server_stats(const struct native_server *s, struct native_stats *out);

#endif
