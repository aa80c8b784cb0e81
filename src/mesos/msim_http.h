/* mhttp: the small HTTP/1.1 server of mesos-master-sim, on a libuv loop the
 * caller owns. It exists beside src/http because a Mesos master's replies
 * need headers that server does not let a handler read or set (the
 * Mesos-Stream-Id request and response header, Location on a 307).
 *
 * One request at a time per connection (pipelined ones wait in the input
 * buffer), keep-alive unless the client says close, request bodies by
 * Content-Length only. Bounds: a request head of MHTTP_MAX_HEAD bytes, a
 * body of max_body bytes (413 past it), max_conns connections (503 past
 * it), an idle keep-alive connection closed after idle_ms, a stream's unsent
 * output at most max_stream_backlog bytes (the stream is cut past it).
 * What a connection is sent in one loop turn (replies to pipelined
 * requests, stream chunks) is gathered and handed to uv_write once, before
 * the loop polls again.
 *
 * The handler is called on the loop thread and must answer before it
 * returns, with mhttp_reply or mhttp_stream_start. Request strings are
 * borrowed for the call. A stream belongs to the server: the owner writes
 * chunks until it ends it or on_close tells it the connection is gone. */
#ifndef PELOTON_MESOS_MSIM_HTTP_H
#define PELOTON_MESOS_MSIM_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#define MHTTP_MAX_HEAD 16384

struct mhttp_server;
struct mhttp_conn;

struct mhttp_req {
    const char *method, *path;     /* path without the query */
    const char *content_type;      /* NULL when absent */
    const char *accept;            /* NULL when absent */
    const char *stream_id;         /* Mesos-Stream-Id, NULL when absent */
    const char *body;              /* NUL-terminated */
    size_t body_len;
    struct mhttp_conn *conn;
    int listener;                  /* the index given to mhttp_listen */
};

typedef void (*mhttp_handler_fn)(void *ud, const struct mhttp_req *req);
typedef void (*mhttp_close_fn)(void *ud);

struct mhttp_config {
    const char *addr; /* default 127.0.0.1 */
    int port;         /* 0: a free one */
    int index;        /* handed back in mhttp_req.listener */
    size_t max_body;  /* default 8 MiB */
    unsigned max_conns, idle_ms;   /* defaults 4096, 120000 */
    size_t max_stream_backlog;     /* default 64 MiB */
    mhttp_handler_fn handler;
    void *ud;
};

int mhttp_listen(uv_loop_t *loop, const struct mhttp_config *cfg, struct mhttp_server **out, char *err, size_t errlen);
int mhttp_port(const struct mhttp_server *s);
/* uv_write calls so far: a connection's replies and stream chunks of one loop
 * turn go out in one (the write syscalls, where the socket takes them). */
unsigned long long mhttp_writes(const struct mhttp_server *s);
/* Closes the listener and every connection (streams get on_close); frees the
 * server once the loop has closed its handles. */
void mhttp_stop(struct mhttp_server *s);

/* A whole reply. extra_headers: "Name: value\r\n" lines, or NULL. */
void mhttp_reply(struct mhttp_conn *c, int status, const char *content_type, const char *extra_headers,
                 const char *body, size_t len);
/* Starts a 200 chunked reply; the connection then carries the stream only.
 * on_close(ud) is called once when the stream ends for any reason. */
void mhttp_stream_start(struct mhttp_conn *c, const char *content_type, const char *extra_headers,
                        mhttp_close_fn on_close, void *ud);
/* One chunk of len > 0 bytes. -EPIPE when the stream is closing, -ENOBUFS
 * when the client does not read (the stream is then cut). */
int mhttp_stream_chunk(struct mhttp_conn *c, const char *data, size_t len);
/* Ends the chunked body and closes the connection (on_close follows). */
void mhttp_stream_end(struct mhttp_conn *c);
/* Forgets the stream's on_close (its owner is done with it): nothing is
 * called when it later closes. */
void mhttp_stream_detach(struct mhttp_conn *c);
/* Drops the connection at once, as a crashed master would. */
void mhttp_conn_abort(struct mhttp_conn *c);

/* The request head parser, pure (for the fuzz target). */
struct mhttp_head {
    const char *method, *path;    /* path without the query */
    const char *content_type, *accept, *stream_id; /* NULL when absent */
    unsigned long long clen;      /* Content-Length, 0 when absent */
    bool chunked;                 /* Transfer-Encoding given (refused by the server) */
    bool close;                   /* HTTP/1.0 or Connection: close */
    size_t head_len;              /* bytes of the head, its blank line included */
    char buf[MHTTP_MAX_HEAD + 1]; /* the head's copy that the strings point into (last: not cleared) */
};
/* Parses the request head at the start of in (len bytes). 1: a whole head,
 * h filled; 0: more bytes are needed; -400: malformed (a bad request line,
 * a header without a colon, a NUL, a bad Content-Length); -431: no end of
 * the head within MHTTP_MAX_HEAD bytes. */
int mhttp_parse_head(const char *in, size_t len, struct mhttp_head *h);

#endif
