/* HTTP/1.1 on libuv (http_int.h): the plain loopback port, and the TLS
 * port, where a connection is TLS over memory BIOs (tls.c's context: the
 * ciphertext read here is fed to OpenSSL, the plaintext it yields is served
 * as on the plain port, and replies are sealed just before they are sent)
 * and one that chose "h2" by ALPN is served by h2.c through the same
 * output, bounds and timeouts. Each connection
 * is read with one uv_read_start for its life and answered with
 * uv_try_write (uv_write only for what the socket does not take), so a
 * request costs its recv and its send and nothing else; watch streams
 * (chunked) and websockets are written once per loop turn, after the turn's
 * I/O (a uv_check handle). Requests on a connection are served one after the
 * other, pipelined ones included; while one is answered (a deferred reply, a
 * stream) what follows waits, and reading stops once that passes
 * H1_MAX_HEAD.
 *
 * What the connection does with each request, and why:
 *   head over H1_MAX_HEAD or H1_MAX_HEADERS lines   431, then close
 *   a malformed head                                400, then close
 *   Transfer-Encoding (chunked bodies)              411, then close
 *   Content-Length over H1_DRAIN_MAX                413, then close
 *   Content-Length over max_body                    the body is read and dropped, then 413 (kept alive)
 *   Upgrade: websocket (version 13, a key)          the handshake, then one text message per stream write
 * A connection idle for idle_timeout_ms between requests (an HTTP/2 one: with
 * no stream open), or head_timeout_ms into a head, a body or a TLS
 * handshake, is closed.
 *
 * Replies a client does not read are bounded (cfg.max_conn_output,
 * max_output): before the next request is taken, a connection over its
 * bound is held (not read, its requests waiting in order) until its output
 * drains; the end-of-turn check releases held connections. One held for
 * output_stall_ms is closed. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "http_int.h"
#include "unixpath.h"

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
    struct h2_conn *h2;            /* S_H2: the HTTP/2 session */
};

static void conn_close(struct h1_conn *c);
static void serve(struct h1_conn *c);
static void serve_loop(struct h1_conn *c);
static void resume_reading(struct h1_conn *c);
static void flush_out(struct h1_conn *c);
static void schedule_release(struct h1_server *s);

/* ---- output ---- */

/* Brings the server's output count up to date with c's unsent bytes (after
 * every change to out or wbuf), and notes when c passes its bound. */
static void out_sync(struct h1_conn *c) {
    struct h1_server *s = c->srv;
    size_t now = c->state == S_CLOSING ? 0 : c->outlen + c->wlen + (c->h2 ? h2_conn_pending(c->h2) : 0);
    s->output = s->output - c->counted + now;
    bool less = now < c->counted;
    c->counted = now;
    if (s->output > s->output_peak) s->output_peak = s->output;
    if (now > s->conn_output_peak) s->conn_output_peak = now;
    if (now <= s->cfg.max_conn_output) c->over_since = 0;
    else if (!c->over_since) c->over_since = uv_now(s->loop) | 1, c->stall_left = now;
    if (less && s->held) schedule_release(s); /* some held connection may go on */
}

/* Whether c must wait before its next request: over its own bound, or
 * holding any output while all connections together are over theirs. */
static bool out_over(const struct h1_conn *c) {
    const struct h1_server *s = c->srv;
    size_t mine = c->outlen + c->wlen + (c->h2 ? h2_conn_pending(c->h2) : 0);
    return mine > s->cfg.max_conn_output || (mine && s->output > s->cfg.max_output);
}

static int out_append(struct h1_conn *c, const char *p, size_t n) {
    if (c->outlen + n > c->outcap) {
        size_t nc = c->outcap ? c->outcap : 4096;
        while (nc < c->outlen + n) nc *= 2;
        char *b = realloc(c->out, nc);
        if (!b) return -ENOMEM;
        c->out = b;
        c->outcap = nc;
    }
    memcpy(c->out + c->outlen, p, n);
    c->outlen += n;
    out_sync(c);
    return 0;
}

static void on_written(uv_write_t *w, int status) {
    struct h1_conn *c = w->data;
    c->writing = false;
    if (c->stream && !c->outlen) c->stream->queued = 0;
    free(c->wbuf);
    c->wbuf = NULL;
    c->wlen = 0;
    out_sync(c);
    if (status < 0) {
        conn_close(c);
        return;
    }
    flush_out(c);
}

/* TLS bytes (handshake, alerts, tickets) wait to be sent. */
static bool tls_pending(const struct h1_conn *c) {
    return c->ssl && BIO_ctrl_pending(SSL_get_wbio(c->ssl)) > 0;
}

/* TLS: the plaintext in out is sealed into records; out then holds what
 * the socket is to take, handshake bytes included. 0, or -1: close. */
static int tls_seal(struct h1_conn *c) {
    if (c->outlen) {
        int n = SSL_write(c->ssl, c->out, (int)c->outlen); /* a memory BIO takes it all */
        if (n <= 0 || (size_t)n != c->outlen) {
            ERR_clear_error();
            return -1;
        }
        c->outlen = 0;
    }
    BIO *w = SSL_get_wbio(c->ssl);
    size_t n = BIO_ctrl_pending(w);
    if (n > c->outcap) {
        char *b = realloc(c->out, n);
        if (!b) return -1;
        c->out = b;
        c->outcap = n;
    }
    if (n && BIO_read(w, c->out, (int)n) != (int)n) return -1;
    c->outlen = n;
    out_sync(c);
    return 0;
}

/* Sends what waits: straight to the socket, the rest through uv_write. An
 * HTTP/2 connection frames what is due first. */
static void flush_out(struct h1_conn *c) {
    if (c->state == S_H2 && !c->close_after && h2_conn_pump(c->h2))
        c->close_after = true; /* the session is over: its last frames go, then the connection */
    if (c->state == S_CLOSING || c->writing || !(c->outlen || tls_pending(c))) {
        if (c->state != S_CLOSING && !c->writing && !c->outlen && c->close_after && c->state != S_STREAM &&
            c->state != S_WS && c->state != S_BUSY)
            conn_close(c); /* the answer is out: the connection was to end with it */
        return;
    }
    if (c->ssl && tls_seal(c)) {
        conn_close(c);
        return;
    }
    uv_buf_t b = uv_buf_init(c->out, (unsigned)c->outlen);
    int n = uv_try_write(&c->io.stream, &b, 1);
    if (n < 0 && n != UV_EAGAIN) {
        conn_close(c);
        return;
    }
    size_t sent = n > 0 ? (size_t)n : 0;
    if (sent == c->outlen) {
        c->outlen = 0;
        out_sync(c);
        if (c->stream) c->stream->queued = 0;
        flush_out(c); /* nothing waits: maybe close */
        return;
    }
    /* the socket is full: the rest goes through uv_write, which waits for it */
    c->wbuf = c->out;
    c->wlen = c->outlen;
    memmove(c->wbuf, c->wbuf + sent, c->wlen - sent);
    c->wlen -= sent;
    c->out = NULL;
    c->outlen = c->outcap = 0;
    out_sync(c);
    uv_buf_t rest = uv_buf_init(c->wbuf, (unsigned)c->wlen);
    c->writing = true;
    c->wreq.data = c;
    if (uv_write(&c->wreq, &c->io.stream, &rest, 1, on_written)) {
        c->writing = false;
        conn_close(c);
    }
}

/* Streams are flushed once per turn, after its I/O. */
/* Streams that ended or broke are told so here, never from inside the
 * caller's own stream call (an owner frees itself in on_close). */
static void run_retired(struct h1_server *s) {
    while (s->later) {
        struct h1_later *l = s->later;
        s->later = l->next;
        l->fn(l->ud);
        free(l);
    }
    while (s->retired) {
        struct http_stream *st = s->retired;
        s->retired = st->rnext;
        if (st->on_close) st->on_close(st->ud);
        free(st);
    }
}

/* Held connections whose output has drained go on: read again, and the
 * requests they kept are served in order. */
static void release_held(struct h1_server *s) {
    for (struct h1_conn *c = s->conns, *n; c && s->held; c = n) {
        n = c->next;
        if (!c->held || out_over(c)) continue;
        c->held = false;
        s->held--;
        c->since_ms = uv_now(s->loop);
        resume_reading(c);
        serve(c);
    }
}

static void on_flush(uv_check_t *h) {
    struct h1_server *s = h->data;
    struct h1_conn *c = s->flushq;
    s->flushq = NULL;
    uv_check_stop(h);
    while (c) {
        struct h1_conn *n = c->fnext;
        c->flush_queued = false;
        c->fnext = NULL;
        flush_out(c);
        c = n;
    }
    if (s->release) {
        s->release = false;
        release_held(s);
    }
    run_retired(s);
}

static void schedule_release(struct h1_server *s) {
    if (s->stopping) return;
    s->release = true;
    uv_check_start(&s->flush, on_flush);
}

/* c waits for its output to drain: not read, its next request not served. */
static void hold(struct h1_conn *c) {
    if (!c->held) c->held = true, c->srv->held++;
    if (c->reading && c->state != S_H2) { /* HTTP/2 must still read: the client's window updates */
        uv_read_stop(&c->io.stream);
        c->reading = false;
    }
}

/* The stream is over: detached now, its owner told at the end of the turn. */
static void stream_retire(struct h1_server *s, struct http_stream *st) {
    st->c = NULL;
    st->ended = true;
    st->rnext = s->retired;
    s->retired = st;
    if (!s->stopping) uv_check_start(&s->flush, on_flush);
}

static void schedule_flush(struct h1_conn *c) {
    if (c->flush_queued) return;
    c->flush_queued = true;
    struct h1_server *s = c->srv;
    c->fnext = s->flushq;
    s->flushq = c;
    uv_check_start(&s->flush, on_flush);
}

/* ---- responses ---- */

static const char *reason_phrase(int code) {
    switch (code) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Request Entity Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}

/* The status line and headers of a response with a body of len bytes
 * (len < 0: chunked), into out. */
static int put_head(struct h1_conn *c, int status, const char *ctype, long long len) {
    char h[512];
    int n = snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\ncontent-type: %s\r\n", status, reason_phrase(status),
                     ctype ? ctype : "application/json");
    if (len >= 0) n += snprintf(h + n, sizeof h - (size_t)n, "content-length: %lld\r\n", len);
    else n += snprintf(h + n, sizeof h - (size_t)n, "transfer-encoding: chunked\r\n");
    if (c->close_after) n += snprintf(h + n, sizeof h - (size_t)n, "connection: close\r\n");
    else if (c->head.http10) n += snprintf(h + n, sizeof h - (size_t)n, "connection: keep-alive\r\n");
    n += snprintf(h + n, sizeof h - (size_t)n, "\r\n");
    if (n <= 0 || (size_t)n >= sizeof h) return -EINVAL;
    return out_append(c, h, (size_t)n);
}

/* Sends a whole response (body taken) and goes on to the next request. */
static void respond(struct h1_conn *c, int status, const char *ctype, char *body, size_t len) {
    int rc = put_head(c, status, ctype, (long long)len);
    if (!rc && len && c->head.method != HTTP_HEAD) rc = out_append(c, body, len);
    free(body);
    if (rc) {
        conn_close(c);
        return;
    }
    c->state = S_HEAD;
    c->since_ms = uv_now(c->srv->loop);
    flush_out(c); /* a closing connection closes here, once it is out */
    if (c->state == S_HEAD && !c->close_after) serve(c); /* a pipelined request may wait in c->in */
}

static void respond_status(struct h1_conn *c, int code, const char *reason, const char *msg, bool close) {
    size_t n = 0;
    char *b = http_status_body(code, reason, msg, &n);
    if (close) c->close_after = true;
    respond(c, code, "application/json", b, b ? n : 0);
}

/* ---- websocket ---- */

static int ws_accept_key(const char *key, char out[64]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char cat[256];
    int n = snprintf(cat, sizeof cat, "%s%s", key, guid);
    if (n <= 0 || (size_t)n >= sizeof cat) return -1;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(cat, (size_t)n, md, &mdlen, EVP_sha1(), NULL) || mdlen != 20) return -1;
    return EVP_EncodeBlock((unsigned char *)out, md, 20) == 28 ? 0 : -1;
}

/* One text (or close) frame from the server: unmasked. */
static int ws_frame(struct h1_conn *c, int opcode, const char *p, size_t n) {
    unsigned char h[10];
    size_t hl = 2;
    h[0] = (unsigned char)(0x80 | opcode);
    if (n < 126) h[1] = (unsigned char)n;
    else if (n <= 0xffff) h[1] = 126, h[2] = (unsigned char)(n >> 8), h[3] = (unsigned char)n, hl = 4;
    else {
        h[1] = 127;
        for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
        hl = 10;
    }
    int rc = out_append(c, (const char *)h, hl);
    return rc ? rc : n ? out_append(c, p, n) : 0;
}

/* Frames from the client: a close is answered and ends the connection, a
 * ping gets its pong, the rest is read and dropped (a watch has nothing to
 * hear). */
static void ws_read(struct h1_conn *c) {
    for (;;) {
        const unsigned char *p = (const unsigned char *)c->in;
        if (c->inlen < 2) return;
        int opcode = p[0] & 0x0f;
        bool masked = p[1] & 0x80;
        uint64_t n = p[1] & 0x7f;
        size_t hl = 2;
        if (n == 126) {
            if (c->inlen < 4) return;
            n = (uint64_t)p[2] << 8 | p[3];
            hl = 4;
        } else if (n == 127) {
            if (c->inlen < 10) return;
            n = 0;
            for (int i = 0; i < 8; i++) n = n << 8 | p[2 + i];
            hl = 10;
        }
        if (!masked || n > H1_MAX_HEAD) { /* clients must mask; control and watch frames are small */
            conn_close(c);
            return;
        }
        if (c->inlen < hl + 4 + n) return;
        const unsigned char *mask = p + hl;
        unsigned char payload[128];
        size_t keep = n < sizeof payload ? (size_t)n : sizeof payload;
        for (size_t i = 0; i < keep; i++) payload[i] = p[hl + 4 + i] ^ mask[i & 3];
        size_t used = hl + 4 + (size_t)n;
        memmove(c->in, c->in + used, c->inlen - used);
        c->inlen -= used;
        if (opcode == 8) { /* close: echo, then end */
            ws_frame(c, 8, (const char *)payload, keep < 2 ? keep : 2);
            c->close_after = true;
            c->state = S_HEAD; /* so the flush closes it */
            if (c->stream) {
                stream_retire(c->srv, c->stream);
                c->stream = NULL;
            }
            flush_out(c);
            return;
        }
        if (opcode == 9) ws_frame(c, 10, (const char *)payload, keep), schedule_flush(c);
    }
}

/* ---- requests ---- */

static void dispatch(struct h1_conn *c, bool ws) {
    struct h1_server *s = c->srv;
    struct h1_head *h = &c->head;
    struct http_request req = {
        .method = ws ? HTTP_GET : h->method,
        .method_name = ws ? "GET" : h->method_name,
        .path = h->path,
        .nargs = h->nargs,
        .arg_keys = h->keys,
        .arg_values = h->vals,
        .content_type = ws ? "" : h->content_type,
        .accept = ws ? "" : h->accept,
        .authorization = h->authorization,
        .body = c->body ? c->body : "",
        .body_len = c->body_len,
        .conn = c,
        .secure = c->ssl != NULL,
        .backend = HTTP_BACKEND_H1,
    };
    struct http_response resp = {.status = 200, .content_type = "application/json"};
    if (!ws) c->state = S_BUSY; /* until the handler says otherwise; a websocket stays one */
    c->handed_off = false;
    s->cfg.handler(s->cfg.ud, &req, &resp);
    if (c->state == S_CLOSING || c->handed_off) { /* a stream or deferral answers (it may be over already) */
        free(resp.body);
        return;
    }
    if (ws) { /* not a stream: the answer as one message, then the end */
        ws_frame(c, 1, resp.body ? resp.body : "", resp.body ? resp.body_len : 0);
        free(resp.body);
        ws_frame(c, 8, "\x03\xe8", 2);
        c->close_after = true;
        c->state = S_HEAD;
        flush_out(c);
        return;
    }
    respond(c, resp.status, resp.content_type, resp.body, resp.body ? resp.body_len : 0);
}

static bool has_token(const char *list, const char *tok) {
    return list && strcasestr(list, tok) != NULL;
}

/* A websocket upgrade: the handshake, then the handler (a watch streams). */
static void upgrade(struct h1_conn *c) {
    struct h1_head *h = &c->head;
    char accept[64];
    if (!h->ws_key || !h->ws_version || strcmp(h->ws_version, "13") || ws_accept_key(h->ws_key, accept)) {
        respond_status(c, 400, "BadRequest", "bad websocket upgrade", true);
        return;
    }
    char resp[256];
    int n = snprintf(resp, sizeof resp,
                     "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                     "sec-websocket-accept: %s\r\n\r\n",
                     accept);
    if (out_append(c, resp, (size_t)n)) {
        conn_close(c);
        return;
    }
    c->state = S_WS;
    dispatch(c, true);
    if (c->state != S_CLOSING) flush_out(c);
}

/* Serves what c->in holds: heads, bodies, pipelined requests. An answer
 * completed while this runs (respond, a stream ended or a reply deferred
 * inside its handler) calls serve again: that call returns at once and this
 * loop takes the next request, so pipelined requests never nest. */
static void serve(struct h1_conn *c) {
    if (c->serving) return;
    c->serving = true;
    serve_loop(c);
    c->serving = false;
}

/* HTTP/2: the plaintext read goes to the session; then what is due is
 * framed and sent. Requests waiting for the output to drain count the
 * connection as held (it is still read: the client's window updates must
 * come in). */
static void serve_h2(struct h1_conn *c) {
    if (c->inlen && !c->close_after) {
        int rc = h2_conn_input(c->h2, c->in, c->inlen);
        c->inlen = 0;
        c->since_ms = uv_now(c->srv->loop);
        if (rc) {
            conn_close(c);
            return;
        }
    }
    c->inlen = 0;
    flush_out(c);
    if (c->state != S_H2) return;
    if (h2_conn_waiting(c->h2)) hold(c);
    else if (c->held) c->held = false, c->srv->held--;
}

static void serve_loop(struct h1_conn *c) {
    if (c->state == S_H2) {
        serve_h2(c);
        return;
    }
    for (int guard = 0; guard < 1024 && c->state != S_CLOSING; guard++) {
        if (c->state == S_WS) {
            ws_read(c);
            return;
        }
        if (c->state == S_BUSY || c->state == S_STREAM) return; /* the next request waits its turn */
        if (c->state == S_BODY || c->state == S_DISCARD) {
            size_t need = c->body_expected - c->body_len, take = c->inlen < need ? c->inlen : need;
            if (c->state == S_BODY) memcpy(c->body + c->body_len, c->in, take);
            c->body_len += take;
            memmove(c->in, c->in + take, c->inlen - take);
            c->inlen -= take;
            if (c->body_len < c->body_expected) return;
            if (c->state == S_DISCARD) {
                char msg[128];
                snprintf(msg, sizeof msg, "request entity too large: limit is %zu bytes", c->srv->cfg.max_body);
                respond_status(c, 413, "RequestEntityTooLarge", msg, false);
                continue;
            }
            c->body[c->body_len] = 0;
            dispatch(c, false);
            continue;
        }
        /* S_HEAD: the next request waits while too many replies do */
        if (out_over(c)) {
            hold(c);
            return;
        }
        size_t end = h1_head_end(c->in, c->inlen);
        if (!end) {
            if (c->inlen > H1_MAX_HEAD) respond_status(c, 431, "RequestHeaderFieldsTooLarge", "request head too large", true);
            return;
        }
        if (end > H1_MAX_HEAD) {
            respond_status(c, 431, "RequestHeaderFieldsTooLarge", "request head too large", true);
            return;
        }
        free(c->hbuf);
        free(c->body);
        c->body = NULL;
        c->body_len = c->body_expected = 0;
        c->hbuf = malloc(end + 1);
        if (!c->hbuf) {
            conn_close(c);
            return;
        }
        memcpy(c->hbuf, c->in, end);
        c->hbuf[end] = 0;
        memmove(c->in, c->in + end, c->inlen - end);
        c->inlen -= end;
        c->since_ms = uv_now(c->srv->loop);
        char err[160];
        int code = h1_parse_head(c->hbuf, end, &c->head, err, sizeof err);
        if (code) {
            respond_status(c, code,
                           code == 431   ? "RequestHeaderFieldsTooLarge"
                           : code == 414 ? "RequestURITooLong"
                                         : "BadRequest",
                           err, true);
            return;
        }
        struct h1_head *h = &c->head;
        c->close_after = !h->keep_alive;
        if (h->upgrade && !strcasecmp(h->upgrade, "websocket") && has_token(h->connection, "upgrade") &&
            h->method == HTTP_GET) {
            upgrade(c);
            return;
        }
        if (h->chunked) { /* no chunked request bodies: refused clearly */
            respond_status(c, 411, "BadRequest", "chunked request bodies are not supported; send Content-Length",
                           true);
            return;
        }
        if (h->content_length > (long long)H1_DRAIN_MAX) {
            char msg[128];
            snprintf(msg, sizeof msg, "request entity too large: limit is %zu bytes", c->srv->cfg.max_body);
            respond_status(c, 413, "RequestEntityTooLarge", msg, true);
            return;
        }
        if (h->expect && !strcasecmp(h->expect, "100-continue") && h->content_length > 0 &&
            (size_t)h->content_length > c->inlen) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            out_append(c, cont, sizeof cont - 1);
            flush_out(c);
        }
        if (h->content_length > 0 && (size_t)h->content_length > c->srv->cfg.max_body) {
            c->state = S_DISCARD;
            c->body_expected = (size_t)h->content_length;
            continue;
        }
        if (h->content_length > 0) {
            c->body_expected = (size_t)h->content_length;
            c->body = malloc(c->body_expected + 1);
            if (!c->body) {
                conn_close(c);
                return;
            }
            c->state = S_BODY;
            continue;
        }
        dispatch(c, false);
    }
}

/* ---- the connection ---- */

/* Room for H1_READ more bytes in in. */
static int in_room(struct h1_conn *c) {
    if (c->incap - c->inlen >= H1_READ) return 0;
    size_t nc = c->incap ? c->incap : H1_READ;
    while (nc - c->inlen < H1_READ) nc *= 2;
    char *b = realloc(c->in, nc + 1);
    if (!b) return -ENOMEM;
    c->in = b;
    c->incap = nc;
    return 0;
}

static void read_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    (void)hint;
    struct h1_conn *c = h->data;
    if (c->ssl) { /* ciphertext: OpenSSL takes it at once */
        buf->base = c->srv->tlsbuf;
        buf->len = H1_TLS_READ;
        return;
    }
    if (in_room(c)) {
        buf->base = NULL;
        buf->len = 0;
        return;
    }
    buf->base = c->in + c->inlen;
    buf->len = c->incap - c->inlen;
}

/* TLS: n bytes of ciphertext from the socket. The handshake goes on (a
 * connection that chose "h2" by ALPN becomes an HTTP/2 one when it is
 * done), then the plaintext is appended to in. 0, or -1: close (a failed
 * handshake, a bad record, the client's close_notify). */
static int tls_input(struct h1_conn *c, const char *p, size_t n) {
    if (BIO_write(SSL_get_rbio(c->ssl), p, (int)n) != (int)n) return -1;
    if (!c->tls_up) {
        int r = SSL_do_handshake(c->ssl);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            ERR_clear_error();
            return e == SSL_ERROR_WANT_READ ? 0 : -1;
        }
        c->tls_up = true;
        c->since_ms = uv_now(c->srv->loop);
        const unsigned char *proto = NULL;
        unsigned plen = 0;
        SSL_get0_alpn_selected(c->ssl, &proto, &plen);
        if (plen == 2 && !memcmp(proto, "h2", 2)) {
            c->h2 = h2_conn_new(c, &c->srv->cfg);
            if (!c->h2) return -1;
            c->state = S_H2;
        }
    }
    for (;;) {
        if (in_room(c)) return -1;
        int r = SSL_read(c->ssl, c->in + c->inlen, (int)(c->incap - c->inlen));
        if (r > 0) {
            c->inlen += (size_t)r;
            continue;
        }
        int e = SSL_get_error(c->ssl, r);
        ERR_clear_error();
        return e == SSL_ERROR_WANT_READ ? 0 : -1;
    }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    struct h1_conn *c = s->data;
    if (n < 0) { /* the peer closed or the socket broke */
        conn_close(c);
        return;
    }
    if (n == 0) return;
    if (c->ssl) {
        size_t before = c->inlen;
        int rc = tls_input(c, buf->base, (size_t)n);
        if (tls_pending(c)) flush_out(c); /* handshake bytes, or the alert before a close */
        if (rc) {
            conn_close(c);
            return;
        }
        if (c->state == S_CLOSING || (c->inlen == before && c->state != S_H2)) return;
    } else {
        c->inlen += (size_t)n;
    }
    if (c->state == S_HEAD && c->since_ms == 0) c->since_ms = uv_now(c->srv->loop);
    serve(c);
    /* while an answer is pending, what follows is not read past a bound */
    if (c->state != S_CLOSING && (c->state == S_BUSY || c->state == S_STREAM) && c->inlen > H1_MAX_HEAD &&
        c->reading) {
        uv_read_stop(&c->io.stream);
        c->reading = false;
    }
}

static void resume_reading(struct h1_conn *c) {
    if (c->state == S_CLOSING || c->reading || c->held) return;
    if (uv_read_start(&c->io.stream, read_alloc, on_read)) {
        conn_close(c);
        return;
    }
    c->reading = true;
}

static void conn_freed(uv_handle_t *h) {
    struct h1_conn *c = h->data;
    SSL_free(c->ssl);
    free(c->in);
    free(c->hbuf);
    free(c->body);
    free(c->out);
    free(c->wbuf);
    free(c);
}

static void conn_close(struct h1_conn *c) {
    if (c->state == S_CLOSING) return;
    c->state = S_CLOSING;
    struct h1_server *s = c->srv;
    out_sync(c); /* its output leaves the server's count */
    http_conn_bounds_release(&s->conns_open, c->peer);
    if (c->held) c->held = false, s->held--;
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    if (c->flush_queued) { /* off the flush list */
        struct h1_conn **p = &s->flushq;
        while (*p && *p != c) p = &(*p)->fnext;
        if (*p) *p = c->fnext;
        c->flush_queued = false;
    }
    if (c->deferred) c->deferred->c = NULL; /* its owner answers into the void */
    c->deferred = NULL;
    if (c->stream) stream_retire(s, c->stream);
    c->stream = NULL;
    if (c->h2) h2_conn_free(c->h2); /* its streams end, their owners told at the end of the turn */
    c->h2 = NULL;
    uv_close(&c->io.handle, conn_freed); /* cancels a pending write: its callback comes first */
}

/* A connection past the bounds: told why (best effort, its request unread)
 * and closed. */
static void refuse(struct h1_conn *c, const char *why) {
    char msg[512];
    int body = snprintf(msg, sizeof msg,
                        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                        "\"message\":\"%s\",\"reason\":\"ServiceUnavailable\",\"code\":503}",
                        why);
    char buf[768];
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                     "Connection: close\r\nContent-Length: %d\r\n\r\n%s",
                     body, msg);
    uv_buf_t b = uv_buf_init(buf, (unsigned)n);
    uv_try_write(&c->io.stream, &b, 1);
    uv_close(&c->io.handle, conn_freed);
}

static void on_connection(uv_stream_t *l, int status) {
    struct h1_server *s = l->data;
    if (status < 0 || s->stopping) return;
    struct h1_conn *c = calloc(1, sizeof *c);
    if (!c) return;
    c->srv = s;
    bool tcp = l->type == UV_TCP;
    if (tcp) uv_tcp_init(s->loop, &c->io.tcp);
    else uv_pipe_init(s->loop, &c->io.pipe, 0);
    c->io.handle.data = c;
    if (uv_accept(l, &c->io.stream)) {
        uv_close(&c->io.handle, conn_freed);
        return;
    }
    if (tcp) {
        uv_tcp_nodelay(&c->io.tcp, 1);
        struct sockaddr_storage pa;
        int plen = sizeof pa;
        if (!uv_tcp_getpeername(&c->io.tcp, (struct sockaddr *)&pa, &plen))
            uv_ip_name((struct sockaddr *)&pa, c->peer, sizeof c->peer);
    }
    int over = http_conn_bounds_admit(&s->conns_open, c->peer);
    if (over && s->tls) { /* nothing can be said before the handshake, and doing it would spend what the bound saves */
        uv_close(&c->io.handle, conn_freed);
        return;
    }
    if (over) {
        refuse(c, over == HTTP_REFUSED_ALL ? "too many connections to this server: try again later"
                                           : "too many connections from this client: try again later");
        return;
    }
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    c->state = S_HEAD;
    c->since_ms = uv_now(s->loop);
    if (s->tls) {
        BIO *r = BIO_new(BIO_s_mem()), *w = BIO_new(BIO_s_mem());
        c->ssl = r && w ? SSL_new(s->tls) : NULL;
        if (!c->ssl) {
            BIO_free(r);
            BIO_free(w);
            conn_close(c);
            return;
        }
        SSL_set_bio(c->ssl, r, w);
        SSL_set_accept_state(c->ssl);
    }
    resume_reading(c);
}

/* Idle keep-alive connections and slow heads are closed. */
static void on_sweep(uv_timer_t *t) {
    struct h1_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    for (struct h1_conn *c = s->conns, *n; c; c = n) {
        n = c->next;
        if (c->over_since && c->state != S_STREAM && c->state != S_WS) { /* streams have max_buffer */
            size_t left = c->outlen + uv_stream_get_write_queue_size(&c->io.stream);
            if (left < c->stall_left) c->stall_left = left, c->over_since = now | 1; /* the client reads */
            else if (now - c->over_since > s->cfg.output_stall_ms) {
                conn_close(c);
                continue;
            }
        }
        if (c->held) continue; /* waits for its client to read, not for its requests */
        bool handshake = c->ssl && !c->tls_up;
        bool idle = (c->state == S_HEAD && c->inlen == 0 && !handshake) ||
                    (c->state == S_H2 && h2_conn_idle(c->h2) && !c->close_after);
        bool reading = (c->state == S_HEAD && c->inlen) || c->state == S_BODY || c->state == S_DISCARD || handshake;
        uint64_t age = now - c->since_ms;
        if ((idle && age > s->cfg.idle_timeout_ms) || (reading && age > s->cfg.head_timeout_ms)) conn_close(c);
    }
}

/* ---- what h2.c uses of its connection (http_int.h) ---- */

int h1_conn_send(struct h1_conn *c, const void *p, size_t n) { return out_append(c, p, n); }
void h1_conn_kick(struct h1_conn *c) {
    if (c->state != S_CLOSING) schedule_flush(c);
}
void h1_conn_sync(struct h1_conn *c) { out_sync(c); }
bool h1_conn_over(const struct h1_conn *c) { return out_over(c); }
size_t h1_conn_unsent(const struct h1_conn *c) { return c->outlen + c->wlen; }
void h1_conn_active(struct h1_conn *c) { c->since_ms = uv_now(c->srv->loop); }

int h1_conn_later(struct h1_conn *c, http_stream_close_fn fn, void *ud) {
    struct h1_server *s = c->srv;
    struct h1_later *l = malloc(sizeof *l);
    if (!l) return -ENOMEM;
    *l = (struct h1_later){.fn = fn, .ud = ud, .next = s->later};
    s->later = l;
    if (!s->stopping) uv_check_start(&s->flush, on_flush);
    return 0;
}

/* ---- streams and deferrals ---- */

struct http_stream *h1_stream_start(const struct http_request *req, int status, const char *content_type,
                                    size_t max_buffer, http_stream_close_fn on_close, void *ud) {
    struct h1_conn *c = req->conn;
    if (!c || c->state == S_CLOSING || c->stream || c->deferred) return NULL;
    struct http_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->tag.backend = HTTP_BACKEND_H1;
    st->c = c;
    st->max_buffer = max_buffer ? max_buffer : (16u << 20);
    st->on_close = on_close;
    st->ud = ud;
    if (c->state != S_WS) {
        if (put_head(c, status, content_type, -1)) {
            free(st);
            return NULL;
        }
        c->state = S_STREAM;
    }
    c->stream = st;
    c->handed_off = true;
    flush_out(c); /* the head (or the handshake) goes at once: a client sees the answer begin */
    return st;
}

int h1_stream_write(struct http_stream *st, const char *data, size_t len) {
    struct h1_conn *c = st->c;
    if (!c || st->ended) return -EPIPE;
    if (len == 0) return 0;
    if (st->queued + len > st->max_buffer) { /* a slow consumer: closed, it will re-list */
        conn_close(c);
        return -ENOBUFS;
    }
    st->queued += len;
    int rc;
    if (c->state == S_WS) {
        rc = ws_frame(c, 1, data, len);
    } else {
        char hex[24];
        int hl = snprintf(hex, sizeof hex, "%zx\r\n", len);
        rc = out_append(c, hex, (size_t)hl);
        if (!rc) rc = out_append(c, data, len);
        if (!rc) rc = out_append(c, "\r\n", 2);
    }
    if (rc) return rc;
    schedule_flush(c);
    return 0;
}

void h1_stream_end(struct http_stream *st) {
    if (st->ended) return;
    struct h1_conn *c = st->c;
    if (!c) return;
    c->stream = NULL;
    stream_retire(c->srv, st);
    if (c->state == S_WS) {
        ws_frame(c, 8, "\x03\xe8", 2);
        c->close_after = true;
        c->state = S_HEAD;
    } else {
        out_append(c, "0\r\n\r\n", 5);
        c->state = S_HEAD;
        c->since_ms = uv_now(c->srv->loop);
    }
    flush_out(c);
    if (c->state == S_HEAD && !c->close_after) {
        resume_reading(c);
        serve(c);
    }
}

size_t h1_stream_buffered(const struct http_stream *st) { return st->c ? st->queued : 0; }

struct http_deferred *h1_defer(const struct http_request *req) {
    struct h1_conn *c = req->conn;
    if (!c || c->state != S_BUSY || c->stream || c->deferred) return NULL;
    struct http_deferred *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->tag.backend = HTTP_BACKEND_H1;
    d->c = c;
    c->deferred = d;
    c->handed_off = true;
    return d;
}

void h1_undefer(struct http_deferred *d) {
    if (d->c) d->c->deferred = NULL, d->c->handed_off = false;
    free(d);
}

void h1_deferred_reply(struct http_deferred *d, struct http_response *resp) {
    struct h1_conn *c = d->c;
    free(d);
    char *body = resp->body;
    resp->body = NULL;
    if (!c) { /* the client is gone */
        free(body);
        return;
    }
    c->deferred = NULL;
    respond(c, resp->status, resp->content_type ? resp->content_type : "application/json", body,
            body ? resp->body_len : 0);
    resume_reading(c);
}

/* ---- the server ---- */

/* The server's own memory, once no handle of it is open. */
static void server_mem_free(struct h1_server *s) {
    SSL_CTX_free(s->tls); /* open sessions hold their own reference */
    free(s->tlsbuf);
    free(s);
}

/* The listener, flush and sweep handles live in the server: it goes after their closes. */
static void handle_closed(uv_handle_t *h) {
    struct h1_server *s = h->data;
    if (--s->open == 0 && s->free_asked) server_mem_free(s);
}

/* Closes a listener that never served and lets the close complete, so that
 * the server holding it may be freed at once (start-up failures). */
static void close_now(uv_loop_t *loop, uv_handle_t *h) {
    uv_close(h, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* Whether a server accepts connections at the socket path (a refused
 * connect means a stale file; a full backlog still means a live server). */
static bool unix_in_use(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, path, strlen(path) + 1);
    bool live = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 || errno == EAGAIN || errno == EINPROGRESS;
    close(fd);
    return live;
}

/* The Unix-domain listener at path: a socket file left by an earlier run is
 * replaced (any other file is not), and only the owner may connect (0600:
 * the socket file's mode is its access control; a socket a live server
 * answers on is not taken over). The path is the caller's
 * and must outlive the server (kept in cfg). */
static int listen_unix(struct h1_server *s, const char *path, char *err, size_t errlen) {
    struct stat st;
    if (strlen(path) > UNIX_SOCKET_PATH_MAX) {
        snprintf(err, errlen, "http: the socket path %s is longer than %zu bytes", path, UNIX_SOCKET_PATH_MAX);
        return -ENAMETOOLONG;
    }
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "http: %s exists and is not a socket", path);
            return -EEXIST;
        }
        if (unix_in_use(path)) {
            snprintf(err, errlen, "http: %s is in use by another server", path);
            return -EADDRINUSE;
        }
        unlink(path); /* stale: left by a process that died */
    }
    uv_pipe_init(s->loop, &s->ulistener, 0);
    s->ulistener.data = s;
    int rc = uv_pipe_bind(&s->ulistener, path);
    /* 0600 before listen: until then a connect is refused, so no one else gets in */
    if (!rc && chmod(path, 0600)) rc = uv_translate_sys_error(errno);
    if (!rc) rc = uv_listen((uv_stream_t *)&s->ulistener, 511, on_connection);
    if (rc) {
        /* libuv reports a missing directory as EACCES: say which it is */
        const char *slash = strrchr(path, '/');
        char dir[UNIX_SOCKET_PATH_MAX + 1];
        snprintf(dir, sizeof dir, "%.*s", slash && slash != path ? (int)(slash - path) : 1, slash ? path : ".");
        struct stat ds;
        bool nodir = rc == UV_EACCES && stat(dir, &ds) != 0;
        snprintf(err, errlen, "http: cannot listen on %s: %s", path,
                 nodir ? "its directory does not exist" : uv_strerror(rc));
        close_now(s->loop, (uv_handle_t *)&s->ulistener);
        return rc == UV_EADDRINUSE ? -EADDRINUSE : -EINVAL;
    }
    s->has_unix = true;
    return 0;
}

int h1_server_start(uv_loop_t *loop, const struct http_server_config *cfg, struct h1_server **out, char *err,
                    size_t errlen) {
    struct h1_server *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->loop = loop;
    s->cfg = *cfg;
    if (!s->cfg.idle_timeout_ms) s->cfg.idle_timeout_ms = HTTP_DEFAULT_IDLE_TIMEOUT_MS;
    if (!s->cfg.head_timeout_ms) s->cfg.head_timeout_ms = HTTP_DEFAULT_HEAD_TIMEOUT_MS;
    if (!s->cfg.max_conn_output) s->cfg.max_conn_output = HTTP_DEFAULT_MAX_CONN_OUTPUT;
    if (!s->cfg.max_output) s->cfg.max_output = HTTP_DEFAULT_MAX_OUTPUT;
    if (!s->cfg.output_stall_ms) s->cfg.output_stall_ms = HTTP_DEFAULT_OUTPUT_STALL_MS;
    if (!s->cfg.max_conns) s->cfg.max_conns = HTTP_DEFAULT_MAX_CONNS;
    if (!s->cfg.max_conns_per_client) s->cfg.max_conns_per_client = HTTP_DEFAULT_MAX_CONNS_PER_CLIENT;
    s->conns_open.max = s->cfg.max_conns;
    s->conns_open.max_per_client = s->cfg.max_conns_per_client;
    if (cfg->tls_cert && cfg->tls_key) {
        s->tlsbuf = malloc(H1_TLS_READ);
        s->tls = s->tlsbuf ? http_tls_ctx_new(cfg->tls_cert, cfg->tls_key, err, errlen) : NULL;
        if (!s->tls) {
            int rc = s->tlsbuf ? -EINVAL : -ENOMEM;
            server_mem_free(s);
            return rc;
        }
    }
    unsigned shorter = s->cfg.idle_timeout_ms;
    if (s->cfg.head_timeout_ms < shorter) shorter = s->cfg.head_timeout_ms;
    if (s->cfg.output_stall_ms < shorter) shorter = s->cfg.output_stall_ms;
    unsigned sweep = shorter / 10 < H1_SWEEP_MS ? shorter / 10 : H1_SWEEP_MS;
    if (!sweep) sweep = 1;
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(cfg->bind_addr, cfg->port, (struct sockaddr_in *)&addr);
    if (rc) rc = uv_ip6_addr(cfg->bind_addr, cfg->port, (struct sockaddr_in6 *)&addr);
    if (rc) {
        snprintf(err, errlen, "http: bad address %s", cfg->bind_addr);
        server_mem_free(s);
        return -EINVAL;
    }
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    if ((rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0)) ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection))) {
        snprintf(err, errlen, "http: cannot listen on %s:%d: %s", cfg->bind_addr, cfg->port, uv_strerror(rc));
        close_now(loop, (uv_handle_t *)&s->listener);
        server_mem_free(s);
        return -EADDRINUSE;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
    s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    if (cfg->unix_path && (rc = listen_unix(s, cfg->unix_path, err, errlen))) {
        close_now(loop, (uv_handle_t *)&s->listener);
        server_mem_free(s);
        return rc;
    }
    uv_check_init(loop, &s->flush);
    s->flush.data = s;
    uv_timer_init(loop, &s->sweep);
    s->sweep.data = s;
    uv_timer_start(&s->sweep, on_sweep, sweep, sweep);
    uv_unref((uv_handle_t *)&s->sweep);
    s->open = 3 + s->has_unix;
    *out = s;
    return 0;
}

int h1_server_port(const struct h1_server *s) { return s->port; }

void h1_server_stats(const struct h1_server *s, struct http_server_stats *out) {
    *out = (struct http_server_stats){.output = s->output, .output_peak = s->output_peak,
                                      .conn_output_peak = s->conn_output_peak, .held = s->held,
                                      .connections = s->conns_open.open, .refused = s->conns_open.refused};
}

void h1_server_stop(struct h1_server *s) {
    if (!s || s->stopping) return;
    s->stopping = true;
    while (s->conns) conn_close(s->conns);
    http_conn_bounds_free(&s->conns_open);
    uv_check_stop(&s->flush);
    s->flushq = NULL;
    run_retired(s); /* the flush handle closes now: tell the owners here */
    uv_timer_stop(&s->sweep);
    s->listener.data = s->flush.data = s->sweep.data = s;
    uv_close((uv_handle_t *)&s->listener, handle_closed);
    if (s->has_unix) {
        s->ulistener.data = s;
        uv_close((uv_handle_t *)&s->ulistener, handle_closed);
        unlink(s->cfg.unix_path);
    }
    uv_close((uv_handle_t *)&s->flush, handle_closed);
    uv_close((uv_handle_t *)&s->sweep, handle_closed);
}

void h1_server_free(struct h1_server *s) {
    if (!s) return;
    if (!s->stopping) h1_server_stop(s);
    if (s->open == 0) server_mem_free(s); /* the loop ran the closes already */
    else s->free_asked = true;  /* the last close frees it */
}
