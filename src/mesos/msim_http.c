/* mhttp (msim_http.h): request parsing with bounds, replies, chunked streams. */
#include "msim_http.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HEAD_TIMEOUT_MS 30000 /* a started request must be whole within this */

struct mhttp_conn {
    uv_tcp_t tcp;
    struct mhttp_server *s;
    struct mhttp_conn *prev, *next;
    char *in;
    size_t inlen, incap;
    size_t backlog;        /* bytes handed to uv_write and not yet written */
    char *out;             /* what this loop turn wrote: handed to uv_write in one piece before the loop polls */
    size_t outlen, outcap;
    struct mhttp_conn *fnext; /* on the server's flush list (queued) */
    bool queued;
    uint64_t since;        /* loop time of the accept or of the last reply */
    bool streaming, closing, close_after, replied;
    mhttp_close_fn on_close;
    void *close_ud;
};

struct mhttp_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t sweep;
    uv_prepare_t flush;    /* writes the turn's output of the queued connections */
    struct mhttp_config cfg;
    struct mhttp_conn *conns;
    struct mhttp_conn *flushq;
    unsigned long long writes; /* uv_write calls: one per connection and loop turn with output */
    unsigned nconns;
    int port, open_handles;
    bool stopping;
};

struct wreq {
    uv_write_t w;
    struct mhttp_conn *c;
    size_t len;
    char *data;
};

static const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

static void server_handle_closed(struct mhttp_server *s) {
    if (--s->open_handles == 0 && s->stopping) free(s);
}

static void on_conn_closed(uv_handle_t *h) {
    struct mhttp_conn *c = h->data;
    struct mhttp_server *s = c->s;
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nconns--;
    if (c->queued)
        for (struct mhttp_conn **pp = &s->flushq; *pp; pp = &(*pp)->fnext)
            if (*pp == c) {
                *pp = c->fnext;
                break;
            }
    free(c->in);
    free(c->out);
    free(c);
    server_handle_closed(s);
}

/* Closes c at once; the stream's owner hears of it first. */
static void conn_close(struct mhttp_conn *c) {
    if (c->closing) return;
    c->closing = true;
    if (c->on_close) {
        mhttp_close_fn fn = c->on_close;
        c->on_close = NULL;
        fn(c->close_ud);
    }
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    struct mhttp_conn *c = req->data;
    (void)status;
    free(req);
    conn_close(c);
}

static void conn_flush(struct mhttp_conn *c);

/* Closes c once what was written has gone out. */
static void conn_finish(struct mhttp_conn *c) {
    if (c->closing) return;
    conn_flush(c);
    if (c->closing) return;
    uv_shutdown_t *req = malloc(sizeof *req);
    if (!req || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown)) {
        free(req);
        conn_close(c);
        return;
    }
    req->data = c;
    uv_read_stop((uv_stream_t *)&c->tcp);
}

static void on_written(uv_write_t *w, int status) {
    struct wreq *r = (struct wreq *)w;
    r->c->backlog -= r->len;
    if (status < 0) conn_close(r->c);
    free(r->data);
    free(r);
}

/* Hands what c's turn wrote to uv_write, in one piece (one write syscall
 * where the socket takes it all). */
static void conn_flush(struct mhttp_conn *c) {
    if (c->closing || !c->outlen) return;
    struct wreq *r = malloc(sizeof *r);
    if (!r) {
        conn_close(c);
        return;
    }
    r->data = c->out;
    r->len = c->outlen;
    r->c = c;
    c->out = NULL;
    c->outlen = c->outcap = 0;
    c->backlog += r->len;
    c->s->writes++;
    uv_buf_t buf = uv_buf_init(r->data, (unsigned)r->len);
    if (uv_write(&r->w, (uv_stream_t *)&c->tcp, &buf, 1, on_written)) {
        c->backlog -= r->len;
        free(r->data);
        free(r);
        conn_close(c);
    }
}

/* Before the loop polls: every connection's output of the turn goes out,
 * replies and stream chunks in the order they were written. */
static void on_flush(uv_prepare_t *h) {
    struct mhttp_server *s = h->data;
    struct mhttp_conn *c = s->flushq;
    s->flushq = NULL;
    uv_prepare_stop(h);
    while (c) {
        struct mhttp_conn *n = c->fnext;
        c->fnext = NULL;
        c->queued = false;
        conn_flush(c);
        c = n;
    }
}

/* Adds the concatenation of up to three pieces to c's output of this turn.
 * -ENOBUFS past the bound (c is then closed). */
static int conn_write(struct mhttp_conn *c, const char *a, size_t al, const char *b, size_t bl, const char *t, size_t tl) {
    if (c->closing) return -EPIPE;
    if (c->backlog + c->outlen > c->s->cfg.max_stream_backlog) {
        conn_close(c);
        return -ENOBUFS;
    }
    size_t need = c->outlen + al + bl + tl;
    if (need > c->outcap) {
        size_t cap = c->outcap ? c->outcap : 4096;
        while (cap < need) cap *= 2;
        char *o = realloc(c->out, cap);
        if (!o) {
            conn_close(c);
            return -ENOMEM;
        }
        c->out = o;
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, a, al);
    if (bl) memcpy(c->out + c->outlen + al, b, bl);
    if (tl) memcpy(c->out + c->outlen + al + bl, t, tl);
    c->outlen = need;
    if (!c->queued) {
        struct mhttp_server *s = c->s;
        c->queued = true;
        c->fnext = s->flushq;
        s->flushq = c;
        if (!s->stopping) uv_prepare_start(&s->flush, on_flush);
    }
    return 0;
}

void mhttp_reply(struct mhttp_conn *c, int status, const char *ctype, const char *extra, const char *body, size_t len) {
    char head[1024];
    c->replied = true;
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\n%s%s%s%sContent-Length: %zu\r\n%s\r\n", status,
                     reason(status), ctype ? "Content-Type: " : "", ctype ? ctype : "", ctype ? "\r\n" : "",
                     extra ? extra : "", len, c->close_after ? "Connection: close\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof head) n = snprintf(head, sizeof head, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"), len = 0;
    conn_write(c, head, (size_t)n, body, len, NULL, 0);
    c->since = uv_now(c->s->loop);
}

void mhttp_stream_start(struct mhttp_conn *c, const char *ctype, const char *extra, mhttp_close_fn on_close, void *ud) {
    char head[1024];
    c->replied = true;
    c->streaming = true;
    c->on_close = on_close;
    c->close_ud = ud;
    int n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n%sTransfer-Encoding: chunked\r\n\r\n",
                     ctype, extra ? extra : "");
    if (n < 0 || (size_t)n >= sizeof head) {
        conn_close(c);
        return;
    }
    conn_write(c, head, (size_t)n, NULL, 0, NULL, 0);
}

int mhttp_stream_chunk(struct mhttp_conn *c, const char *data, size_t len) {
    if (!c->streaming || c->closing) return -EPIPE;
    if (len == 0) return 0;
    char size[24];
    int n = snprintf(size, sizeof size, "%zx\r\n", len);
    return conn_write(c, size, (size_t)n, data, len, "\r\n", 2);
}

void mhttp_stream_end(struct mhttp_conn *c) {
    if (c->closing) return;
    conn_write(c, "0\r\n\r\n", 5, NULL, 0, NULL, 0);
    conn_finish(c);
}

void mhttp_conn_abort(struct mhttp_conn *c) { conn_close(c); }

void mhttp_stream_detach(struct mhttp_conn *c) { c->on_close = NULL; }

/* ---- request parsing ---- */
static bool token_eq(const char *a, const char *b) { return strcasecmp(a, b) == 0; }

int mhttp_parse_head(const char *in, size_t len, struct mhttp_head *h) {
    size_t scan = len < MHTTP_MAX_HEAD ? len : MHTTP_MAX_HEAD;
    const char *end = memmem(in, scan, "\r\n\r\n", 4);
    if (!end) return len >= MHTTP_MAX_HEAD ? -431 : 0;
    size_t head_len = (size_t)(end - in) + 4;
    if (memchr(in, 0, head_len)) return -400;
    memset(h, 0, offsetof(struct mhttp_head, buf));
    h->head_len = head_len;
    memcpy(h->buf, in, head_len - 2);
    h->buf[head_len - 2] = 0;
    char *save = NULL, *rsave = NULL;
    char *line = strtok_r(h->buf, "\r\n", &save);
    char *method = line ? strtok_r(line, " ", &rsave) : NULL;
    char *target = method ? strtok_r(NULL, " ", &rsave) : NULL;
    char *version = target ? strtok_r(NULL, " ", &rsave) : NULL;
    if (!version || strncmp(version, "HTTP/1.", 7) || strtok_r(NULL, " ", &rsave)) return -400;
    h->close = !strcmp(version, "HTTP/1.0");
    while ((line = strtok_r(NULL, "\r\n", &save))) {
        char *colon = strchr(line, ':');
        if (!colon) return -400;
        *colon = 0;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        for (char *e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
        if (token_eq(line, "Content-Length")) {
            char *ep;
            errno = 0;
            unsigned long long n = strtoull(v, &ep, 10);
            if (!*v || *v == '-' || *v == '+' || *ep || errno) return -400;
            h->clen = n;
        } else if (token_eq(line, "Transfer-Encoding")) {
            h->chunked = true;
        } else if (token_eq(line, "Content-Type")) {
            h->content_type = v;
        } else if (token_eq(line, "Accept")) {
            h->accept = v;
        } else if (token_eq(line, "Mesos-Stream-Id")) {
            h->stream_id = v;
        } else if (token_eq(line, "Connection")) {
            if (strcasestr(v, "close")) h->close = true;
        }
    }
    char *q = strchr(target, '?');
    if (q) *q = 0;
    h->method = method;
    h->path = target;
    return 1;
}

/* Answers a request the server will not serve, and closes the connection
 * once the answer is out (what follows the bad request cannot be framed). */
static void refuse(struct mhttp_conn *c, int status, const char *text) {
    c->close_after = true;
    mhttp_reply(c, status, "text/plain; charset=utf-8", NULL, text, strlen(text));
    conn_finish(c);
}

/* Serves the whole requests in c->in, in order. */
static void conn_process(struct mhttp_conn *c) {
    struct mhttp_server *s = c->s;
    static struct mhttp_head h; /* loop thread only; 16 KiB kept off the stack */
    while (!c->closing && !c->streaming && !c->close_after && c->inlen > 0) {
        int rc = mhttp_parse_head(c->in, c->inlen, &h);
        const char *why = rc == -431 ? "Request head too large"
                        : rc < 0     ? "Malformed HTTP request"
                        : rc && h.chunked ? "Chunked request bodies are not supported"
                        : rc && h.clen > s->cfg.max_body ? "Request body too large" : NULL;
        if (why) {
            refuse(c, rc == -431 ? 431 : rc < 0 ? 400 : h.chunked ? 411 : 413, why);
            return;
        }
        if (rc == 0) return;
        if (c->inlen - h.head_len < h.clen) return; /* the body is still coming */
        if (h.close) c->close_after = true;
        char *body = malloc((size_t)h.clen + 1);
        if (!body) {
            conn_close(c);
            return;
        }
        memcpy(body, c->in + h.head_len, (size_t)h.clen);
        body[h.clen] = 0;
        struct mhttp_req req = {.method = h.method, .path = h.path, .content_type = h.content_type,
                                .accept = h.accept, .stream_id = h.stream_id, .body = body,
                                .body_len = (size_t)h.clen, .conn = c, .listener = s->cfg.index};
        c->replied = false;
        s->cfg.handler(s->cfg.ud, &req);
        if (!c->replied && !c->closing) mhttp_reply(c, 500, "text/plain; charset=utf-8", NULL, "no reply", 8);
        free(body);
        if (c->closing) return;
        size_t used = h.head_len + (size_t)h.clen;
        memmove(c->in, c->in + used, c->inlen - used);
        c->inlen -= used;
    }
    if (c->close_after && !c->streaming && !c->closing) conn_finish(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    struct mhttp_conn *c = h->data;
    (void)hint;
    size_t bound = MHTTP_MAX_HEAD + c->s->cfg.max_body + 1;
    if (c->streaming) c->inlen = 0; /* a stream's client has nothing more to say: its bytes are dropped */
    if (c->incap - c->inlen < 4096 && c->incap < bound) {
        size_t cap = c->incap ? c->incap * 2 : 8192;
        if (cap > bound) cap = bound;
        char *n = realloc(c->in, cap);
        if (n) c->in = n, c->incap = cap;
    }
    *buf = uv_buf_init(c->in + c->inlen, (unsigned)(c->incap - c->inlen));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    struct mhttp_conn *c = st->data;
    (void)buf;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (c->closing) return;
    if (nread == 0) {
        if (c->inlen == c->incap) { /* full: a request larger than every bound */
            c->close_after = true;
            mhttp_reply(c, 413, "text/plain; charset=utf-8", NULL, "Request too large", 17);
            conn_finish(c);
        }
        return;
    }
    c->inlen += (size_t)nread;
    if (c->streaming) {
        c->inlen = 0;
        return;
    }
    conn_process(c);
}

static void on_connection(uv_stream_t *l, int status) {
    struct mhttp_server *s = l->data;
    if (status < 0) return;
    struct mhttp_conn *c = calloc(1, sizeof *c);
    if (!c) return;
    c->s = s;
    uv_tcp_init(s->loop, &c->tcp);
    c->tcp.data = c;
    s->open_handles++;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    c->since = uv_now(s->loop);
    if (uv_accept(l, (uv_stream_t *)&c->tcp)) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (s->nconns > s->cfg.max_conns) {
        c->close_after = true;
        mhttp_reply(c, 503, "text/plain; charset=utf-8", "Retry-After: 1\r\n", "Too many connections", 20);
        conn_finish(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_sweep(uv_timer_t *t) {
    struct mhttp_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    for (struct mhttp_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->streaming || c->closing) continue;
        uint64_t age = now - c->since;
        if ((c->inlen > 0 && age > HEAD_TIMEOUT_MS) || age > s->cfg.idle_ms) conn_close(c);
    }
}

static void on_server_handle_closed(uv_handle_t *h) { server_handle_closed(h->data); }

int mhttp_listen(uv_loop_t *loop, const struct mhttp_config *cfg, struct mhttp_server **out, char *err, size_t errlen) {
    struct mhttp_server *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->loop = loop;
    s->cfg = *cfg;
    if (!s->cfg.addr) s->cfg.addr = "127.0.0.1";
    if (!s->cfg.max_body) s->cfg.max_body = 8u << 20;
    if (!s->cfg.max_conns) s->cfg.max_conns = 4096;
    if (!s->cfg.idle_ms) s->cfg.idle_ms = 120000;
    if (!s->cfg.max_stream_backlog) s->cfg.max_stream_backlog = 64u << 20;
    struct sockaddr_storage sa;
    int rc = uv_ip4_addr(s->cfg.addr, cfg->port, (struct sockaddr_in *)&sa);
    if (rc) rc = uv_ip6_addr(s->cfg.addr, cfg->port, (struct sockaddr_in6 *)&sa);
    uv_tcp_init(loop, &s->listener);
    uv_timer_init(loop, &s->sweep);
    uv_prepare_init(loop, &s->flush);
    s->listener.data = s->sweep.data = s->flush.data = s;
    s->open_handles = 3;
    if (!rc) rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&sa, 0);
    if (!rc) rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
    if (rc) {
        snprintf(err, errlen, "listen on %s:%d: %s", s->cfg.addr, cfg->port, uv_strerror(rc));
        s->stopping = true;
        uv_close((uv_handle_t *)&s->listener, on_server_handle_closed);
        uv_close((uv_handle_t *)&s->sweep, on_server_handle_closed);
        uv_close((uv_handle_t *)&s->flush, on_server_handle_closed);
        return rc;
    }
    struct sockaddr_storage got;
    int len = sizeof got;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&got, &len);
    s->port = got.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&got)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&got)->sin_port);
    uv_timer_start(&s->sweep, on_sweep, 1000, 1000);
    uv_unref((uv_handle_t *)&s->sweep);
    *out = s;
    return 0;
}

int mhttp_port(const struct mhttp_server *s) { return s->port; }

unsigned long long mhttp_writes(const struct mhttp_server *s) { return s->writes; }

void mhttp_stop(struct mhttp_server *s) {
    if (s->stopping) return;
    s->stopping = true;
    for (struct mhttp_conn *c = s->conns; c; c = c->next) conn_close(c);
    uv_close((uv_handle_t *)&s->listener, on_server_handle_closed);
    uv_close((uv_handle_t *)&s->sweep, on_server_handle_closed);
    uv_close((uv_handle_t *)&s->flush, on_server_handle_closed);
}
