/* HTTP/1.1 on libuv (http_int.h, h1_int.h): the plain loopback port, and the TLS
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
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#include "h1_int.h"

static void schedule_release(struct h1_server *s);

/* ---- output ---- */

/* Brings the server's output count up to date with c's unsent bytes (after
 * every change to out or wbuf), and notes when c passes its bound. */
void h1_out_sync(struct h1_conn *c) {
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
bool h1_out_over(const struct h1_conn *c) {
    const struct h1_server *s = c->srv;
    size_t mine = c->outlen + c->wlen + (c->h2 ? h2_conn_pending(c->h2) : 0);
    return mine > s->cfg.max_conn_output || (mine && s->output > s->cfg.max_output);
}

int h1_out_append(struct h1_conn *c, const char *p, size_t n) {
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
    h1_out_sync(c);
    return 0;
}

static void on_written(uv_write_t *w, int status) {
    struct h1_conn *c = w->data;
    c->writing = false;
    if (c->stream && !c->outlen) c->stream->queued = 0;
    free(c->wbuf);
    c->wbuf = NULL;
    c->wlen = 0;
    h1_out_sync(c);
    if (status < 0) {
        h1_close(c);
        return;
    }
    h1_flush(c);
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
    h1_out_sync(c);
    return 0;
}

/* Sends what waits: straight to the socket, the rest through uv_write. An
 * HTTP/2 connection frames what is due first. */
void h1_flush(struct h1_conn *c) {
    if (c->state == S_H2 && !c->close_after && h2_conn_pump(c->h2))
        c->close_after = true; /* the session is over: its last frames go, then the connection */
    if (c->state == S_CLOSING || c->writing || !(c->outlen || tls_pending(c))) {
        if (c->state != S_CLOSING && !c->writing && !c->outlen && c->close_after && c->state != S_STREAM &&
            c->state != S_WS && c->state != S_BUSY)
            h1_close(c); /* the answer is out: the connection was to end with it */
        return;
    }
    if (c->ssl && tls_seal(c)) {
        h1_close(c);
        return;
    }
    uv_buf_t b = uv_buf_init(c->out, (unsigned)c->outlen);
    int n = uv_try_write(&c->io.stream, &b, 1);
    if (n < 0 && n != UV_EAGAIN) {
        h1_close(c);
        return;
    }
    size_t sent = n > 0 ? (size_t)n : 0;
    if (sent == c->outlen) {
        c->outlen = 0;
        h1_out_sync(c);
        if (c->stream) c->stream->queued = 0;
        h1_flush(c); /* nothing waits: maybe close */
        return;
    }
    /* the socket is full: the rest goes through uv_write, which waits for it */
    c->wbuf = c->out;
    c->wlen = c->outlen;
    memmove(c->wbuf, c->wbuf + sent, c->wlen - sent);
    c->wlen -= sent;
    c->out = NULL;
    c->outlen = c->outcap = 0;
    h1_out_sync(c);
    uv_buf_t rest = uv_buf_init(c->wbuf, (unsigned)c->wlen);
    c->writing = true;
    c->wreq.data = c;
    if (uv_write(&c->wreq, &c->io.stream, &rest, 1, on_written)) {
        c->writing = false;
        h1_close(c);
    }
}

/* Streams are flushed once per turn, after its I/O. */
/* Streams that ended or broke are told so here, never from inside the
 * caller's own stream call (an owner frees itself in on_close). */
void h1_run_retired(struct h1_server *s) {
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
        if (!c->held || h1_out_over(c)) continue;
        c->held = false;
        s->held--;
        c->since_ms = uv_now(s->loop);
        h1_resume_reading(c);
        h1_serve(c);
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
        h1_flush(c);
        c = n;
    }
    if (s->release) {
        s->release = false;
        release_held(s);
    }
    h1_run_retired(s);
}

static void schedule_release(struct h1_server *s) {
    if (s->stopping) return;
    s->release = true;
    uv_check_start(&s->flush, on_flush);
}

/* c waits for its output to drain: not read, its next request not served. */
void h1_hold(struct h1_conn *c) {
    if (!c->held) c->held = true, c->srv->held++, c->srv->held_total++;
    if (c->reading && c->state != S_H2) { /* HTTP/2 must still read: the client's window updates */
        uv_read_stop(&c->io.stream);
        c->reading = false;
    }
}

/* The stream is over: detached now, its owner told at the end of the turn. */
void h1_stream_retire(struct h1_server *s, struct http_stream *st) {
    st->c = NULL;
    st->ended = true;
    st->rnext = s->retired;
    s->retired = st;
    if (!s->stopping) uv_check_start(&s->flush, on_flush);
}

void h1_schedule_flush(struct h1_conn *c) {
    if (c->flush_queued) return;
    c->flush_queued = true;
    struct h1_server *s = c->srv;
    c->fnext = s->flushq;
    s->flushq = c;
    uv_check_start(&s->flush, on_flush);
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
        http_tls_peer(c->ssl, &c->peer_cn, &c->peer_orgs);
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
        h1_close(c);
        return;
    }
    if (n == 0) return;
    if (c->ssl) {
        size_t before = c->inlen;
        int rc = tls_input(c, buf->base, (size_t)n);
        if (tls_pending(c)) h1_flush(c); /* handshake bytes, or the alert before a close */
        if (rc) {
            h1_close(c);
            return;
        }
        if (c->state == S_CLOSING || (c->inlen == before && c->state != S_H2)) return;
    } else {
        c->inlen += (size_t)n;
    }
    if (c->state == S_HEAD && c->since_ms == 0) c->since_ms = uv_now(c->srv->loop);
    h1_serve(c);
    /* while an answer is pending, what follows is not read past a bound */
    if (c->state != S_CLOSING && (c->state == S_BUSY || c->state == S_STREAM) && c->inlen > H1_MAX_HEAD &&
        c->reading) {
        uv_read_stop(&c->io.stream);
        c->reading = false;
    }
}

void h1_resume_reading(struct h1_conn *c) {
    if (c->state == S_CLOSING || c->reading || c->held) return;
    if (uv_read_start(&c->io.stream, read_alloc, on_read)) {
        h1_close(c);
        return;
    }
    c->reading = true;
}

void h1_conn_freed(uv_handle_t *h) {
    struct h1_conn *c = h->data;
    SSL_free(c->ssl);
    free(c->peer_cn);
    free(c->peer_orgs);
    free(c->in);
    free(c->hbuf);
    free(c->body);
    free(c->out);
    free(c->wbuf);
    free(c);
}

/* TLS: the close is announced (close_notify), best effort, so a client
 * reads a clean end rather than a truncation; not while a write is in
 * flight (its bytes would interleave). */
static void tls_close_notify(struct h1_conn *c) {
    if (!c->ssl || !c->tls_up || c->writing) return;
    SSL_shutdown(c->ssl);
    ERR_clear_error();
    BIO *w = SSL_get_wbio(c->ssl);
    char *p;
    long n = BIO_get_mem_data(w, &p);
    if (n > 0) {
        uv_buf_t b = uv_buf_init(p, (unsigned)n);
        uv_try_write(&c->io.stream, &b, 1);
    }
}

void h1_close(struct h1_conn *c) {
    if (c->state == S_CLOSING) return;
    c->state = S_CLOSING;
    struct h1_server *s = c->srv;
    h1_out_sync(c); /* its output leaves the server's count */
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
    if (c->stream) h1_stream_retire(s, c->stream);
    c->stream = NULL;
    if (c->h2) h2_conn_free(c->h2); /* its streams end, their owners told at the end of the turn */
    c->h2 = NULL;
    tls_close_notify(c);
    uv_close(&c->io.handle, h1_conn_freed); /* cancels a pending write: its callback comes first */
}

/* ---- what h2.c uses of its connection (http_int.h) ---- */

int h1_conn_send(struct h1_conn *c, const void *p, size_t n) { return h1_out_append(c, p, n); }
void h1_conn_kick(struct h1_conn *c) {
    if (c->state != S_CLOSING) h1_schedule_flush(c);
}
void h1_conn_sync(struct h1_conn *c) { h1_out_sync(c); }
bool h1_conn_over(const struct h1_conn *c) { return h1_out_over(c); }
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

void h1_conn_identity(const struct h1_conn *c, const char **cn, const char **orgs, const char **peer) {
    *cn = c->peer_cn;
    *orgs = c->peer_orgs;
    *peer = c->peer;
}
