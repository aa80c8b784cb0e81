/* Internals of the native API server shared by its files: server.c (the
 * listener, connections, calls), h2.c (gRPC on nghttp2), yarpc.c (YARPC on
 * HTTP/1.1). Not for use outside src/native. */
#ifndef PELOTON_NATIVE_INT_H
#define PELOTON_NATIVE_INT_H

#include <nghttp2/nghttp2.h>

#include "grpc_frame.h"
#include "metrics.h"
#include "native.h"
#include "yarpc_parse.h"

struct native_entry {
    const struct native_method *m;
    void *ud;
};

enum conn_proto { PROTO_UNKNOWN = 0, PROTO_H2, PROTO_H1 };

struct h2_stream;
struct native_conn;

/* A call's procedure is kept up to this (every registered one is shorter). */
#define NATIVE_PROCEDURE_MAX 192

struct native_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    struct native_config cfg;
    struct native_conn *conns;  /* open connections (a list) */
    struct native_call *calls;  /* calls not yet completed (a list) */
    struct native_stats stats;
    bool stopping;
    int port;
    uv_timer_t kick;            /* runs the producers' notifications outside the transports */
    bool kick_armed;
    struct metrics_family *m_requests, *m_duration; /* cfg.metrics' families; NULL without */
};

struct native_conn {
    uv_tcp_t tcp;
    struct native_server *srv; /* NULL once the server is stopped */
    struct native_conn *prev, *next;
    enum conn_proto proto;
    uint8_t sniff[24];         /* the first bytes, until the protocol is known */
    size_t nsniff;
    size_t write_pending;      /* bytes handed to uv_write, not yet written */
    bool closing, reading;
    /* TLS (the server's cfg.tls): OpenSSL over memory BIOs, so libuv keeps the socket */
    struct ssl_st *ssl;
    bool tls_up;               /* the handshake is done */
    char *peer_cn, *peer_orgs; /* its verified client certificate's subject, or NULL */
    /* HTTP/2 */
    nghttp2_session *h2;
    bool in_recv;              /* inside nghttp2_session_mem_recv: flush afterwards */
    struct h2_stream *streams; /* open streams (nghttp2_session_del frees its own, not ours) */
    /* HTTP/1.1 (YARPC) */
    char *in;                  /* bytes received, not yet parsed */
    size_t nin, capin;
    struct native_call *h1_call; /* the request being served (one at a time) */
    bool h1_close;             /* close after the reply */
    bool h1_continued;         /* "100 Continue" sent for the request being read */
};

struct native_call {
    struct native_server *srv;   /* NULL once the server is gone */
    struct native_call *prev, *next;
    struct native_conn *conn;    /* NULL once the client is gone */
    struct h2_stream *stream;    /* gRPC: the stream; NULL once reset or closed */
    const struct native_method *m;
    ProtobufCMessage *req;
    uv_timer_t deadline;
    bool has_deadline, timed_out, done, streaming_started, json;
    char caller[128];
    char procedure[NATIVE_PROCEDURE_MAX]; /* "<service>/<method>" or "<service>::<method>", for the metrics */
    uint64_t t0;                          /* metrics_now_ns when it came */
    /* server streaming (native_call_set_producer) */
    native_stream_fn producer;
    void *producer_ud;
    bool full;          /* a send answered 1: the producer waits for writable */
    bool kick_writable; /* to tell the producer it may send again */
    bool kick_gone;     /* to tell the producer its client is gone */
    /* a call from inside the process (native_call_internal) */
    native_internal_fn internal;
    void *internal_ud;
};

/* server.c */
/* The method key ("<service>/<method>" or "<service>::<method>") names on
 * server s, with its ud; NULL with msg set when it is not served here (not
 * registered, or routed to another port: cfg.route). */
const struct native_method *native_server_find(const struct native_server *s, const char *key, void **ud, char *msg,
                                               size_t msglen);
/* Whether authz (an Authorization value, "" when absent) passes the server's token. */
bool native_auth_ok(const struct native_server *s, const char *authz);
struct native_call *native_call_new(struct native_conn *conn, const struct native_method *m, long long timeout_ms,
                                    const char *caller, const char *procedure);
/* One call of a method served here (procedure as the client named it) ended
 * with code over transport ("grpc", "yarpc"): counted, and timed since t0
 * when t0 is not 0 (a call refused before its method ran is not timed). */
void native_observe(struct native_server *s, const char *procedure, const char *transport, enum native_code code,
                    uint64_t t0);
void native_call_dispatch(struct native_call *c, void *ud, ProtobufCMessage *req);
/* The client side of c went away (stream reset, connection closed). */
void native_call_detach(struct native_call *c);
/* The transport took c's waiting output down to n bytes: a producer told
 * to wait (native_call_send returned 1) hears it may send again. */
void native_call_drained(struct native_call *c, size_t n);
void native_conn_write(struct native_conn *conn, const void *p, size_t n);
void native_conn_close(struct native_conn *conn);
void native_conn_pause(struct native_conn *conn, bool pause);

/* h2.c */
int grpc_h2_conn_start(struct native_conn *conn);
/* Feeds received bytes; -1 when the connection must close. */
int grpc_h2_conn_recv(struct native_conn *conn, const uint8_t *p, size_t n);
void grpc_h2_conn_flush(struct native_conn *conn);
void grpc_h2_conn_free(struct native_conn *conn);
void grpc_h2_call_reply(struct native_call *c, const uint8_t *msg, size_t len, bool last);
void grpc_h2_call_status(struct native_call *c, enum native_code code, const char *msg);
/* Reply bytes of c's stream not yet taken by nghttp2 (flow control holds them). */
size_t grpc_h2_call_buffered(const struct native_call *c);

/* yarpc.c */
int h1_conn_recv(struct native_conn *conn, const uint8_t *p, size_t n);
void h1_conn_free(struct native_conn *conn);
void h1_call_reply(struct native_call *c, const uint8_t *msg, size_t len);
void h1_call_status(struct native_call *c, enum native_code code, const char *msg);
/* Continues parsing what is buffered after a reply (pipelined requests). */
void h1_conn_resume(struct native_conn *conn);

#endif
