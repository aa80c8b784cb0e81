/* Internals of the HTTP layer shared by its two backends; not for users.
 *
 * server.c serves TLS (HTTP/1.1 and HTTP/2 by ALPN) on libwebsockets; h1.c
 * serves plain HTTP/1.1 (and websocket upgrades) on libuv directly: the
 * loopback port every controller and kubelet uses. The public functions of
 * server.h dispatch on the backend a request, stream or deferral carries. */
#ifndef PELOTON_HTTP_INT_H
#define PELOTON_HTTP_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "server.h"
#include "strmap.h"

enum http_backend { HTTP_BACKEND_LWS = 1, HTTP_BACKEND_H1 = 2 };

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

/* Connections a port knows by their socket's fd alone (the TLS port: lws
 * shows it a connection's fd when accepted and when it ends), counted in
 * bounds. The table grows with the highest fd, not per connection. */
struct http_fd_slot {
    bool open;
    char peer[INET6_ADDRSTRLEN]; /* the client's address */
};
struct http_fd_conns {
    struct http_conn_bounds bounds;
    struct http_fd_slot *slots; /* indexed by fd */
    size_t nslots;
};
/* A new connection on fd from client address peer: 0 (counted), or
 * HTTP_REFUSED_ALL / HTTP_REFUSED_CLIENT (counted in refused), or -ENOMEM:
 * the caller drops it. A connection still counted at fd is released first:
 * its end went unseen, as the kernel hands the fd out again. */
int http_fd_conns_open(struct http_fd_conns *f, int fd, const char *peer);
/* The connection on fd ended: its place is freed (nothing when none is
 * counted there). */
void http_fd_conns_close(struct http_fd_conns *f, int fd);
void http_fd_conns_free(struct http_fd_conns *f);

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
size_t h1_stream_buffered(const struct http_stream *st);
struct http_deferred *h1_defer(const struct http_request *req);
void h1_deferred_reply(struct http_deferred *d, struct http_response *resp);
void h1_undefer(struct http_deferred *d);

/* Parsing, kept apart from the sockets for the fuzz target (h1_parse.c). */
struct h1_head {
    enum http_method method;
    const char *method_name;
    char *path;                 /* decoded, NUL-terminated, within the parse arena */
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
/* Where the head ends in buf[0..len): the offset just past the empty line, 0
 * while incomplete. */
size_t h1_head_end(const char *buf, size_t len);

#endif
