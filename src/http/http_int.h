/* Internals of the HTTP layer; not for users.
 *
 * h1.c owns every connection, on libuv: plain HTTP/1.1 (and websocket
 * upgrades), and the TLS port (tls.c: OpenSSL over memory BIOs), where a
 * connection that chose "h2" by ALPN is handed to h2.c (nghttp2) after its
 * handshake. Both protocols hand the handler the request target exactly as
 * sent (http_parse_target). The public functions of server.h (server.c)
 * dispatch on the backend a request, stream or deferral carries. */
#ifndef PELOTON_HTTP_INT_H
#define PELOTON_HTTP_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "server.h"
#include "strmap.h"

enum http_backend { HTTP_BACKEND_H1 = 1, HTTP_BACKEND_H2 = 2 };

/* The first member of both backends' streams and deferrals. */
struct http_tag {
    enum http_backend backend;
};

#define H1_MAX_HEAD 16384     /* request line and headers, bytes */
#define H1_MAX_HEADERS 100    /* header lines */
#define H1_DRAIN_MAX (64u << 20) /* an oversized body is read and dropped up to this, then 413 */

/* Open connections, bounded in all and per client address (max_conns and
 * max_conns_per_client of the config, defaults applied): each port keeps one
 * and counts its network connections in it (conn_bounds.c). */
struct http_conn_bounds {
    unsigned max, max_per_client;
    unsigned open;
    struct strmap per_client; /* client address -> its open connections (uintptr_t) */
    uint64_t refused;         /* connections turned away */
};
enum { HTTP_REFUSED_ALL = 1, HTTP_REFUSED_CLIENT = 2 };
/* Counts a new connection from client address peer ("": one with no address,
 * a Unix-domain socket's peer, counted in all only). 0, or HTTP_REFUSED_ALL /
 * HTTP_REFUSED_CLIENT for the bound it would pass, counted in refused (the
 * caller then drops it and never releases it). */
int http_conn_bounds_admit(struct http_conn_bounds *b, const char *peer);
/* An admitted connection from peer is closed. */
void http_conn_bounds_release(struct http_conn_bounds *b, const char *peer);
void http_conn_bounds_free(struct http_conn_bounds *b);

/* A Kubernetes Status (status Failure) for a refusal the HTTP layer answers
 * itself, msg escaped (status.c): malloc'd, *len its length; NULL when out
 * of memory. */
char *http_status_body(int code, const char *reason, const char *msg, size_t *len);

struct h1_server;
int h1_server_start(uv_loop_t *loop, const struct http_server_config *cfg, struct h1_server **out, char *err,
                    size_t errlen);
int h1_server_port(const struct h1_server *s);
void h1_server_stats(const struct h1_server *s, struct http_server_stats *out);
/* Stops listening and closes every connection (their streams and deferrals end). */
void h1_server_stop(struct h1_server *s);
/* After the loop ran dry. */
void h1_server_free(struct h1_server *s);

struct http_stream *h1_stream_start(const struct http_request *req, int status, const char *content_type,
                                    size_t max_buffer, http_stream_close_fn on_close, void *ud);
int h1_stream_write(struct http_stream *st, const char *data, size_t len);
void h1_stream_end(struct http_stream *st);
void h1_stream_abort(struct http_stream *st);
size_t h1_stream_buffered(const struct http_stream *st);
struct http_deferred *h1_defer(const struct http_request *req);
void h1_deferred_reply(struct http_deferred *d, struct http_response *resp);
void h1_undefer(struct http_deferred *d);

/* Parsing, kept apart from the sockets for the fuzz target (h1_parse.c). */
struct h1_head {
    enum http_method method;
    const char *method_name;
    const char *path;           /* decoded, NUL-terminated, within the parse arena */
    int nargs;
    const char *keys[HTTP_MAX_ARGS], *vals[HTTP_MAX_ARGS];
    const char *content_type, *accept, *authorization, *upgrade, *connection, *ws_key, *ws_version, *expect;
    long long content_length;   /* -1: none */
    bool chunked;               /* Transfer-Encoding given (not served) */
    bool http10;
    bool keep_alive;            /* as the version and Connection header say */
};
/* Parses a request head (request line and headers, ending with the empty
 * line) of len bytes at buf, which it changes in place (names, values and
 * the path are cut out of it). 0, or an HTTP status for the refusal (400,
 * 431, 505) with a message in err. */
int h1_parse_head(char *buf, size_t len, struct h1_head *h, char *err, size_t errlen);
/* The method named name (HTTP_OTHER for one this server does not serve);
 * *canon its name as a static string ("OTHER" then). */
enum http_method http_method_of(const char *name, const char **canon);
/* A request target (path, then an optional query) parsed in place, as sent:
 * the path percent-decoded, never normalised ("//", "." and ".." stay for
 * the handler to refuse); query arguments split at "&" and decoded ("+" is a
 * space), empty ones skipped. 0, or 400 (not a path, a control character or
 * space, a bad escape) or 414 (a path over HTTP_MAX_PATH decoded, more than
 * HTTP_MAX_ARGS arguments) with a message in err. keys and vals hold
 * HTTP_MAX_ARGS. */
int http_parse_target(char *target, const char **path, const char **keys, const char **vals, int *nargs, char *err,
                      size_t errlen);
/* Where the head ends in buf[0..len): the offset just past the empty line, 0
 * while incomplete. */
size_t h1_head_end(const char *buf, size_t len);


/* ---- TLS (tls.c) ----
 * The serving context: certificate and key from PEM files, TLS 1.2 at
 * least (HTTP_TLS12_CIPHERS on 1.2), ALPN "h2" preferred over "http/1.1"
 * (a client offering neither gets HTTP/1.1). NULL with a message in err.
 * The caller frees it with SSL_CTX_free. */
typedef struct ssl_ctx_st SSL_CTX;
SSL_CTX *http_tls_ctx_new(const char *cert, const char *key, const char *client_ca, char *err, size_t errlen);
/* The verified client certificate of a finished handshake: *cn and *orgs
 * malloc'd (orgs '\n'-joined), or both NULL without one. */
/* c's client address and verified certificate subject, for its requests. */
struct h1_conn;
void h1_conn_identity(const struct h1_conn *c, const char **cn, const char **orgs, const char **peer);
typedef struct ssl_st SSL;
void http_tls_peer(SSL *ssl, char **cn, char **orgs);

/* ---- HTTP/2 (h2.c) on a connection h1.c accepted ----
 * h1.c keeps the socket, TLS, the output count and the timeouts; h2.c keeps
 * the nghttp2 session and its requests. */
struct h1_conn;
struct h2_conn;
/* After a handshake that chose "h2": a session (the server's SETTINGS
 * queued). NULL when out of memory. */
struct h2_conn *h2_conn_new(struct h1_conn *c, const struct http_server_config *cfg);
/* Plaintext from the client; complete requests are dispatched while the
 * connection's output is under its bounds, the others wait. 0, or <0: the
 * connection must close. */
int h2_conn_input(struct h2_conn *h, const char *p, size_t n);
/* Dispatches the waiting requests the bounds allow, then frames what is
 * due into the connection's output (h1_conn_send) while less than
 * max_conn_output waits there. 0, or <0: close (the session is over). */
int h2_conn_pump(struct h2_conn *h);
/* Reply bytes submitted and not yet framed: part of the connection's output. */
size_t h2_conn_pending(const struct h2_conn *h);
/* No stream is open (an idle connection, for the idle timeout). */
bool h2_conn_idle(const struct h2_conn *h);
/* Requests wait for the output to drain. */
bool h2_conn_waiting(const struct h2_conn *h);
/* The connection is gone: streams end (their owners told at the end of the
 * turn), deferrals are detached, the session is freed. */
void h2_conn_free(struct h2_conn *h);
struct http_stream *h2_stream_start(const struct http_request *req, int status, const char *content_type,
                                    size_t max_buffer, http_stream_close_fn on_close, void *ud);
int h2_stream_write(struct http_stream *st, const char *data, size_t len);
void h2_stream_end(struct http_stream *st);
void h2_stream_abort(struct http_stream *st);
size_t h2_stream_buffered(const struct http_stream *st);
struct http_deferred *h2_defer(const struct http_request *req);
void h2_deferred_reply(struct http_deferred *d, struct http_response *resp);
void h2_undefer(struct http_deferred *d);

/* What h1.c offers h2.c about its connection. */
int h1_conn_send(struct h1_conn *c, const void *p, size_t n); /* appends to the output: 0 or -ENOMEM */
void h1_conn_kick(struct h1_conn *c);          /* pump and flush at the end of this turn */
void h1_conn_sync(struct h1_conn *c);          /* h2_conn_pending changed: recount the output */
bool h1_conn_over(const struct h1_conn *c);    /* over its output bounds: dispatch nothing more */
size_t h1_conn_unsent(const struct h1_conn *c); /* framed bytes not yet taken by the socket */
void h1_conn_active(struct h1_conn *c);        /* a stream opened or closed: the idle clock restarts */
/* fn(ud) at the end of the turn (a stream's on_close, never inside its owner's call). -ENOMEM. */
int h1_conn_later(struct h1_conn *c, http_stream_close_fn fn, void *ud);

#endif
