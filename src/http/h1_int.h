/* HTTP/1.1 on libuv, shared by its three files (http_int.h has what the
 * rest of the layer sees):
 *   h1.c         a connection's bytes: reading (through TLS on the TLS
 *                port), output and its bounds, end-of-turn work, closing
 *   h1_serve.c   what a connection does with them: request heads, bodies,
 *                replies, websockets, streams and deferrals; HTTP/2 ones
 *                handed to h2.c
 *   h1_listen.c  listeners, admission (conn_bounds.c), timeouts, the server
 * Not for users. */
#ifndef PELOTON_HTTP_H1_INT_H
#define PELOTON_HTTP_H1_INT_H

#include <openssl/ssl.h>
#include <uv.h>

#include "http_int.h"

#define H1_READ 16384     /* room asked for per read; the buffer grows for a larger body */
#define H1_SWEEP_MS 1000 /* the longest gap between timeout checks */
#define H1_TLS_READ 65536 /* ciphertext read at a time */

enum h1_state {
    S_HEAD,    /* reading a request head */
    S_BODY,    /* reading its body */
    S_DISCARD, /* reading an oversized body to drop it */
    S_BUSY,    /* the handler answers later (deferred) */
    S_STREAM,  /* a chunked response is open */
    S_WS,      /* a websocket */
    S_H2,      /* HTTP/2 (h2.c) */
    S_CLOSING,
};

struct h1_conn;

struct http_stream {
    struct http_tag tag; /* HTTP_BACKEND_H1 */
    struct h1_conn *c;   /* NULL once the connection is gone or the stream ended */
    size_t max_buffer;
    size_t queued; /* payload bytes written and not yet all handed to the socket */
    bool ended;
    http_stream_close_fn on_close;
    void *ud;
    struct http_stream *rnext; /* the retired list */
};

struct http_deferred {
    struct http_tag tag;
    struct h1_conn *c; /* NULL once the connection is gone */
};

/* A callback due at the end of the turn (an HTTP/2 stream's on_close). */
struct h1_later {
    http_stream_close_fn fn;
    void *ud;
    struct h1_later *next;
};

struct h1_server {
    uv_loop_t *loop;
    SSL_CTX *tls;         /* the TLS port's context; NULL on the plain port */
    char *tlsbuf;         /* ciphertext as read, before OpenSSL takes it (H1_TLS_READ bytes) */
    struct h1_later *later;
    uv_tcp_t listener;
    uv_pipe_t ulistener; /* the Unix-domain socket, when cfg.unix_path is set */
    bool has_unix;
    uv_check_t flush;
    uv_timer_t sweep;
    struct http_server_config cfg;
    int port;
    bool stopping;
    struct h1_conn *conns;
    struct h1_conn *flushq; /* connections to flush at the end of the turn */
    struct http_stream *retired; /* streams over: their on_close comes at the end of the turn */
    size_t output;          /* every connection's out + wbuf bytes (their counted) */
    size_t output_peak, conn_output_peak;
    unsigned held;          /* connections held for their output */
    uint64_t held_total;    /* times a connection was held */
    struct http_conn_bounds conns_open; /* open connections, in all and per client address */
    bool release;           /* output drained: release_held at the end of the turn */
    int open;               /* handles whose close has not completed */
    bool free_asked;        /* h1_server_free came first: the last close frees */
};

struct h1_conn {
    union { /* a TCP connection or one on the Unix-domain socket: both streams */
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_stream_t stream;
        uv_handle_t handle;
    } io;
    struct h1_server *srv;
    enum h1_state state;
    char *in; /* bytes read and not yet used */
    size_t inlen, incap;
    struct h1_head head; /* the request being served: points into hbuf */
    char *hbuf;
    char *body;
    size_t body_len, body_expected;
    bool close_after;     /* close once the answer is out */
    bool reading;         /* uv_read_start is on */
    bool flush_queued;    /* on the server's list for the end of the turn */
    uint64_t since_ms;    /* when the current phase (idle, head) began */
    /* output: out[0..outlen) waits; wbuf is in uv_write's hands */
    char *out;
    size_t outlen, outcap;
    char *wbuf;
    size_t wlen;
    uv_write_t wreq;
    bool writing;
    struct http_stream *stream;
    struct http_deferred *deferred;
    bool serving;     /* serve() runs: an answer finished inside it leaves the next request to its loop */
    bool handed_off;  /* the handler opened a stream or deferred: its answer is theirs, even if already over */
    bool held;        /* not read nor served: too much output waits (out_over) */
    size_t counted;   /* outlen + wlen as last added to the server's output */
    uint64_t over_since; /* when its output passed max_conn_output, or last moved since; 0 while under */
    size_t stall_left;   /* its unsent bytes then: fewer later means the client reads */
    struct h1_conn *prev, *next;   /* all connections */
    struct h1_conn *fnext;         /* flush list */
    char peer[INET6_ADDRSTRLEN];   /* the client's address; "" on the Unix-domain socket */
    SSL *ssl;                      /* the TLS port: this connection's session, over memory BIOs */
    bool tls_up;                   /* its handshake is done */
    char *peer_cn, *peer_orgs;     /* its verified client certificate's subject (http_tls_peer), or NULL */
    struct h2_conn *h2;            /* S_H2: the HTTP/2 session */
};

/* ---- h1.c ---- */
/* Brings the server's output count up to date with c's unsent bytes (after
 * every change to out, wbuf or the HTTP/2 session's pending replies). */
void h1_out_sync(struct h1_conn *c);
/* Whether c must wait before its next request (its output over its bound,
 * or any while all connections' is over theirs). */
bool h1_out_over(const struct h1_conn *c);
/* Appends n bytes of plaintext to c's output: 0 or -ENOMEM. */
int h1_out_append(struct h1_conn *c, const char *p, size_t n);
/* Sends what waits (sealed under TLS; an HTTP/2 session frames first);
 * closes a connection whose answer was its last once it is out. */
void h1_flush(struct h1_conn *c);
/* c's output goes at the end of this turn. */
void h1_schedule_flush(struct h1_conn *c);
/* c waits for its output to drain: not served, and not read (HTTP/2 is
 * still read: the client's window updates must come in). */
void h1_hold(struct h1_conn *c);
/* The stream is over: detached now, its owner told at the end of the turn. */
void h1_stream_retire(struct h1_server *s, struct http_stream *st);
/* Streams over and later callbacks: their owners are told (end of turn, or stop). */
void h1_run_retired(struct h1_server *s);
void h1_resume_reading(struct h1_conn *c);
/* Closes c (once): its output leaves the count, its place the bounds, its
 * stream, deferral and HTTP/2 session end; freed by h1_conn_freed. */
void h1_close(struct h1_conn *c);
void h1_conn_freed(uv_handle_t *h);

/* ---- h1_serve.c ---- */
/* Serves what c->in holds (heads, bodies, pipelined requests; HTTP/2
 * frames). Re-entered calls return at once: the running one goes on. */
void h1_serve(struct h1_conn *c);

#endif
