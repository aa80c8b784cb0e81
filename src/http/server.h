/* A small HTTP server driven by a libuv loop the caller owns (one event loop
 * per process, DESIGN.md). Used by the apiserver-shim and the
 * scheduler-extender. HTTP/1.1 (and websocket upgrades) is served on libuv
 * directly (h1*.c), plain or over TLS (OpenSSL, tls.c); HTTP/2, chosen by
 * ALPN on the TLS port, by nghttp2 (h2.c). The handler sees the request
 * target exactly as sent on every port (nothing collapsed or resolved).
 * The process must ignore SIGPIPE (libuv writes with write(2)).
 *
 * Each request is read whole (headers and a body of at most max_body bytes;
 * a larger Content-Length gets 413 before the body is read) and handed to the
 * handler on the loop thread. The handler fills a response: status, content
 * type and a body it allocates with malloc; the server frees the body after
 * sending. Keep-alive is kept unless the client asks otherwise. A handler
 * may instead open a stream (chunked transfer encoding on HTTP/1.1) and feed
 * it later from the loop thread: see http_stream_start.
 *
 * Ownership: http_server_start returns a server. To end it: http_server_stop
 * on the loop thread (closes the listener and connections), keep running the
 * loop until it has no more work (its libuv handles close
 * asynchronously), then http_server_free. Request strings are borrowed for the
 * duration of the handler call only. */
#ifndef PELOTON_HTTP_SERVER_H
#define PELOTON_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#define HTTP_DEFAULT_MAX_BODY (3u << 20) /* 3 MiB, kube-apiserver's request limit */
#define HTTP_MAX_HEADER 8192             /* one header value, bytes */
/* Query arguments a request may carry; more are refused with 414 (never
 * dropped: a selector or dryRun past the limit would be lost). Clients send a
 * handful; repeated labelSelector/fieldSelector stay far below. */
#define HTTP_MAX_ARGS 64
/* Bytes of a request's path (percent-decoded, without the query); a longer
 * one is refused with 414. A Kubernetes path is under 1 KiB (names of 253,
 * segments of 63). */
#define HTTP_MAX_PATH 4096
/* Network connections each port keeps open at once, in all and per client
 * address (a Unix-domain socket's peers count in the total only; an HTTP/2
 * connection counts once, whatever its streams). On the plain port one past
 * either is answered 503 with Retry-After and closed; on the TLS port it is
 * dropped before its handshake (TLS gives no way to answer sooner). Both
 * count it in http_server_stats.refused. Local clients share 127.0.0.1: the
 * per-client bound leaves room for bench_watch's 5,000 watchers beside the
 * controllers and kubelet-sim. */
#define HTTP_DEFAULT_MAX_CONNS 16384
#define HTTP_DEFAULT_MAX_CONNS_PER_CLIENT 8192
/* Replies waiting for a client that does not read them (see
 * http_server_config.max_conn_output and max_output): per connection, in
 * all, and how long a connection may stay over its bound before it is
 * closed. */
#define HTTP_DEFAULT_MAX_CONN_OUTPUT (4u << 20)
#define HTTP_DEFAULT_MAX_OUTPUT (256u << 20)
#define HTTP_DEFAULT_OUTPUT_STALL_MS 60000
/* A keep-alive connection idle this long is closed; a head, body or TLS
 * handshake must arrive within the head timeout. */
#define HTTP_DEFAULT_IDLE_TIMEOUT_MS 120000
#define HTTP_DEFAULT_HEAD_TIMEOUT_MS 30000

enum http_method { HTTP_GET = 0, HTTP_POST, HTTP_PUT, HTTP_PATCH, HTTP_DELETE, HTTP_HEAD, HTTP_OPTIONS, HTTP_OTHER };

struct http_request {
    enum http_method method;
    const char *method_name; /* "GET", … */
    const char *path;        /* percent-decoded, without the query */
    int nargs;               /* query arguments, decoded ("+" is a space), in order */
    const char *const *arg_keys;
    const char *const *arg_values; /* "" for a key given without "=" */
    const char *content_type, *accept, *authorization; /* "" when absent */
    const char *body;        /* NUL-terminated copy; body_len excludes the NUL */
    size_t body_len;
    void *conn;              /* the connection, for http_stream_start */
    bool secure;             /* arrived over TLS (HTTP/1.1 or HTTP/2) */
    /* The TLS port with a client CA (tls_client_ca): the subject of the
     * certificate the client proved, verified against that CA: its common
     * name and its organization values joined by '\n' ("" for none). NULL
     * when the client sent none (or on the plain port). */
    const char *client_cn, *client_orgs;
    const char *peer;        /* the client's address ("" on a Unix-domain socket), for logs */
    int backend;             /* internal: which server serves the connection */
};

struct http_response {
    int status;               /* default 200 */
    const char *content_type; /* static string; default "application/json" */
    char *body;               /* malloc'd by the handler, freed by the server; may be NULL */
    size_t body_len;
    unsigned retry_after;     /* seconds: sent as Retry-After when not 0 (a 429 or 503) */
};

typedef void (*http_handler_fn)(void *ud, const struct http_request *req, struct http_response *resp);

/* TLS 1.2's suites: ECDHE (forward secrecy) with AEAD ciphers only. */
#define HTTP_TLS12_CIPHERS                                                                                 \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"             \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

struct http_server_config {
    const char *bind_addr; /* default "127.0.0.1" */
    int port;              /* 0 picks a free port: read it with http_server_port */
    size_t max_body;       /* default HTTP_DEFAULT_MAX_BODY */
    http_handler_fn handler;
    void *ud;
    /* PEM paths: serve TLS (1.2 at least; HTTP_TLS12_CIPHERS on 1.2), HTTP/2
     * by ALPN; NULL = plain HTTP/1.1. A certificate that is expired or about
     * to, or a key others can read, is warned about at start (tlscert.h). */
    const char *tls_cert, *tls_key;
    /* PEM path of the certificate authorities whose client certificates the
     * TLS port accepts (asked for, not required: a client without one goes
     * on, with client_cn NULL; one with a certificate that does not verify
     * fails its handshake). NULL: no client certificates. */
    const char *tls_client_ca;
    /* Both ports: a keep-alive connection idle this long between requests
     * (HTTP/2: with no stream open) is closed (0:
     * HTTP_DEFAULT_IDLE_TIMEOUT_MS), and a request head or body, or a TLS
     * handshake, must arrive within head_timeout_ms of its start (0:
     * HTTP_DEFAULT_HEAD_TIMEOUT_MS; a slow client holds no connection
     * forever). Checked every tenth of the shorter, at most once a second.
     * Streams, websockets and deferred replies have no timeout. Idle
     * connections stay bounded by max_conns and max_conns_per_client. */
    unsigned idle_timeout_ms, head_timeout_ms;
    /* Plain HTTP/1.1 only: also serve on this Unix-domain socket path (its
     * file is made 0600 before it listens; a stale socket file is replaced,
     * one a live server answers on or any other file refuses; removed at
     * stop). NULL: none. The
     * string must outlive the server. Local clients (the controllers in
     * pelotond, kubelet-sim) skip the TCP/IP stack this way. */
    const char *unix_path;
    /* Both ports: a client that pipelines requests (HTTP/2: opens streams)
     * and never reads must not grow the server. While a connection has more than
     * max_conn_output bytes of replies unsent (0: HTTP_DEFAULT_MAX_CONN_OUTPUT),
     * or any at all while every connection's together pass max_output (0:
     * HTTP_DEFAULT_MAX_OUTPUT), it is not read and its next request waits
     * (order kept; an HTTP/2 connection is still read, for the client's
     * window updates, but no request of it is dispatched); reading resumes
     * when it drains. One held over its own
     * bound for output_stall_ms (0: HTTP_DEFAULT_OUTPUT_STALL_MS) is
     * closed. A reply is built whole, so a connection may pass its bound by
     * one reply. Streams keep their own bound (max_buffer). */
    size_t max_conn_output, max_output;
    unsigned output_stall_ms;
    /* Both ports: open network connections in all (0: HTTP_DEFAULT_MAX_CONNS)
     * and per client address (0: HTTP_DEFAULT_MAX_CONNS_PER_CLIENT). */
    unsigned max_conns, max_conns_per_client;
};

/* What the server holds for its clients (loop thread; for tests and
 * monitoring). */
struct http_server_stats {
    size_t output;           /* reply bytes not yet taken by the sockets, all connections */
    size_t output_peak;      /* the most output has been */
    size_t conn_output_peak; /* the most one connection has had unsent */
    unsigned held;           /* connections not read because of their output */
    uint64_t held_total;     /* times a connection began to be held, since the start */
    unsigned connections;    /* open network connections (an HTTP/2 one once) */
    uint64_t refused;        /* connections turned away by max_conns or max_conns_per_client */
};

struct http_server;

int http_server_start(uv_loop_t *loop, const struct http_server_config *cfg, struct http_server **out, char *err,
                      size_t errlen);
int http_server_port(const struct http_server *s);
/* Stops listening and closes connections (loop thread); then let the loop run dry. */
void http_server_stop(struct http_server *s);
/* Completes the teardown and frees the server, after the loop has run dry. */
void http_server_free(struct http_server *s);
void http_server_stats(const struct http_server *s, struct http_server_stats *out);

/* ---- streaming responses (watch) ----
 * Inside a handler, http_stream_start sends the status line and headers with
 * Transfer-Encoding: chunked, lifts the idle timeout, and returns a stream the
 * caller keeps (the handler then leaves resp untouched). Later, on the loop
 * thread, http_stream_write queues data (sent in order)
 * and http_stream_end finishes the response (the connection stays usable).
 * Writes made in one loop turn travel together (a watcher receives a turn's
 * events in one send), except on a websocket: one message per write.
 * At most max_buffer bytes may wait unsent: past that the stream is closed
 * (a slow consumer must re-list) and http_stream_write returns -ENOBUFS.
 * on_close(ud) is called exactly once when the stream is over for any reason
 * (ended and flushed, client gone, overflow, server stopped); the stream
 * pointer is invalid after it. */
struct http_stream;
typedef void (*http_stream_close_fn)(void *ud);

struct http_stream *http_stream_start(const struct http_request *req, int status, const char *content_type,
                                      size_t max_buffer, http_stream_close_fn on_close, void *ud);
int http_stream_write(struct http_stream *st, const char *data, size_t len);
void http_stream_end(struct http_stream *st);
/* Ends the response as failed, so that the client cannot take what it got
 * for the whole body: HTTP/1.1 closes the connection without the last
 * chunk, HTTP/2 resets the stream (INTERNAL_ERROR). on_close follows. */
void http_stream_abort(struct http_stream *st);
size_t http_stream_buffered(const struct http_stream *st);

/* ---- deferred replies ----
 * A handler whose answer needs I/O (an asynchronous store write) calls
 * http_defer, leaves resp untouched and returns; later, on the loop thread,
 * it answers with http_deferred_reply, which takes resp->body and frees the
 * handle. If the client went away meanwhile the reply is dropped, but the
 * handle must still be answered exactly once. NULL when the request cannot be
 * deferred (a websocket connection, or out of memory): answer at once then. */
struct http_deferred;
struct http_deferred *http_defer(const struct http_request *req);
void http_deferred_reply(struct http_deferred *d, struct http_response *resp);
/* Inside the same handler call only: takes the deferral back (the handler
 * then answers through resp as usual) and frees d. */
void http_undefer(struct http_deferred *d);

/* The first value of query argument key, or NULL when absent. */
const char *http_req_arg(const struct http_request *req, const char *key);
/* Kubernetes-lenient booleans: "true", "True", "1" and "" (given bare) are true. */
bool http_req_arg_bool(const struct http_request *req, const char *key);

#endif
