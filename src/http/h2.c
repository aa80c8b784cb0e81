/* HTTP/2 on a TLS connection that chose "h2" by ALPN (http_int.h). nghttp2
 * keeps the protocol: framing, HPACK, flow control, stream states and its
 * own floods' bounds. This file turns each stream's request into a handler
 * call and the handler's answer, stream or deferral into a response; h1.c
 * keeps the socket, TLS, the output count, the bounds and the timeouts.
 *
 * The request target is the :path as the client sent it (parsed by
 * http_parse_target, as on HTTP/1.1): nothing is collapsed or resolved, so
 * "//", "." and ".." reach the handler, which refuses them.
 *
 * A request is dispatched once its stream's END_STREAM arrives, in arrival
 * order, and only while the connection's output (framed bytes unsent, and
 * replies submitted but not yet framed) is under its bounds; the others
 * wait (the connection counts as held) and are dispatched as the client
 * reads. Frames are pulled from nghttp2 only while less than
 * max_conn_output waits for the socket. What the handler may not see:
 *   a head over H1_MAX_HEAD bytes or H1_MAX_HEADERS fields        431
 *   a header value with a control character but HTAB (NUL, SOH)   400
 *   a :path that is not a path, a bad escape                      400
 *   a path over HTTP_MAX_PATH, over HTTP_MAX_ARGS arguments       414
 *   a body over max_body (read and dropped)                       413 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"

#define H2_MAX_STREAMS 100 /* streams a client may have open at once */

struct h2_conn;
struct h2_req;

/* A streaming response (watch): data waits here for DATA frames. */
struct http_stream {
    struct http_tag tag; /* HTTP_BACKEND_H2 */
    struct h2_req *r;    /* NULL once the stream is gone */
    char *buf;
    size_t off, len, cap; /* buf[off..len) waits */
    size_t max_buffer;
    bool ended;
    http_stream_close_fn on_close;
    void *ud;
};

struct http_deferred {
    struct http_tag tag; /* HTTP_BACKEND_H2 */
    struct h2_req *r;    /* NULL once the stream is gone */
};

/* One stream's request and its answer. */
struct h2_req {
    struct h2_conn *h;
    int32_t id;
    struct h2_req *prev, *next; /* the connection's open streams */
    struct h2_req *qnext;       /* the queue of complete requests */
    bool queued, answered;
    char *method, *target, *ctype, *accept, *auth; /* as sent; NULL when absent */
    size_t head_bytes;
    int nfields;
    int refuse; /* a status found while reading the head (431, 400): answered without the handler */
    const char *why;
    char *body;
    size_t body_len, body_cap;
    bool too_large; /* the body passed max_body: dropped, answered 413 */
    char *out;      /* the reply's body, out[off..len) not yet framed (counted in pending) */
    size_t out_off, out_len;
    struct http_stream *stream;
    struct http_deferred *deferred;
};

struct h2_conn {
    struct h1_conn *c;
    const struct http_server_config *cfg;
    nghttp2_session *ng;
    struct h2_req *reqs;
    struct h2_req *qhead, *qtail;
    size_t pending; /* reply bytes submitted and not yet framed */
    unsigned open;  /* streams open */
    bool dead;      /* being freed: callbacks do nothing */
};

static struct h2_req *req_of(struct h2_conn *h, int32_t id) {
    return h->dead ? NULL : nghttp2_session_get_stream_user_data(h->ng, id);
}

static void req_free(struct h2_req *r) {
    free(r->method);
    free(r->target);
    free(r->ctype);
    free(r->accept);
    free(r->auth);
    free(r->body);
    free(r->out);
    free(r);
}

static void stream_retired(void *p) {
    struct http_stream *st = p;
    if (st->on_close) st->on_close(st->ud);
    free(st->buf);
    free(st);
}

/* The stream is over: its owner hears it at the end of the turn; a deferral
 * is answered into the void. */
static void req_detach(struct h2_conn *h, struct h2_req *r) {
    if (r->stream) {
        r->stream->r = NULL;
        if (h1_conn_later(h->c, stream_retired, r->stream)) stream_retired(r->stream); /* out of memory: now */
        r->stream = NULL;
    }
    if (r->deferred) r->deferred->r = NULL;
    r->deferred = NULL;
}

/* ---- replies ---- */

/* DATA for a reply or a stream, as nghttp2 asks for it. */
static ssize_t read_data(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *ud) {
    (void)ng, (void)id, (void)ud;
    struct h2_req *r = src->ptr;
    struct http_stream *st = r->stream;
    if (st) {
        size_t n = st->len - st->off < length ? st->len - st->off : length;
        if (n) memcpy(buf, st->buf + st->off, n);
        st->off += n;
        if (st->off == st->len) st->off = st->len = 0;
        if (st->ended && st->len == 0) *flags |= NGHTTP2_DATA_FLAG_EOF;
        else if (!n) return NGHTTP2_ERR_DEFERRED; /* resumed by the next write or the end */
        return (ssize_t)n;
    }
    size_t n = r->out_len - r->out_off < length ? r->out_len - r->out_off : length;
    if (n) memcpy(buf, r->out + r->out_off, n);
    r->out_off += n;
    r->h->pending -= n;
    h1_conn_sync(r->h->c);
    if (r->out_off == r->out_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

/* Submits the response: headers, then body (taken) unless empty or HEAD. */
static int respond(struct h2_req *r, int status, const char *ctype, char *body, size_t len, bool head,
                   unsigned retry_after) {
    char st[8], cl[24], ra[16];
    snprintf(st, sizeof st, "%d", status);
    snprintf(cl, sizeof cl, "%zu", len);
    snprintf(ra, sizeof ra, "%u", retry_after);
    nghttp2_nv nv[] = {NV(":status", st), NV("content-type", ctype ? ctype : "application/json"),
                       NV("content-length", cl), NV("retry-after", ra)};
    r->answered = true;
    nghttp2_data_provider dp = {.source.ptr = r, .read_callback = read_data};
    bool data = len && !head;
    if (data) {
        r->out = body;
        r->out_len = len;
        r->h->pending += len;
        h1_conn_sync(r->h->c);
    } else {
        free(body);
    }
    return nghttp2_submit_response(r->h->ng, r->id, nv, retry_after ? 4 : 3, data ? &dp : NULL) ? -1 : 0;
}

static void refuse(struct h2_req *r, int code, const char *msg) {
    const char *reason = code == 431   ? "RequestHeaderFieldsTooLarge"
                         : code == 414 ? "RequestURITooLong"
                         : code == 413 ? "RequestEntityTooLarge"
                                       : "BadRequest";
    size_t n = 0;
    char *b = http_status_body(code, reason, msg, &n);
    respond(r, code, "application/json", b, b ? n : 0, false, 0);
}

/* ---- requests ---- */

static void dispatch(struct h2_conn *h, struct h2_req *r) {
    if (r->refuse) {
        refuse(r, r->refuse, r->why);
        return;
    }
    char msg[160];
    if (r->too_large) {
        snprintf(msg, sizeof msg, "request entity too large: limit is %zu bytes", h->cfg->max_body);
        refuse(r, 413, msg);
        return;
    }
    if (!r->method || !r->target) { /* nghttp2 resets such a stream first */
        refuse(r, 400, "missing :method or :path");
        return;
    }
    struct http_request req = {.content_type = r->ctype ? r->ctype : "",
                               .accept = r->accept ? r->accept : "",
                               .authorization = r->auth ? r->auth : "",
                               .body = r->body ? r->body : "",
                               .body_len = r->body_len,
                               .conn = r,
                               .secure = true,
                               .backend = HTTP_BACKEND_H2};
    const char *keys[HTTP_MAX_ARGS], *vals[HTTP_MAX_ARGS];
    h1_conn_identity(h->c, &req.client_cn, &req.client_orgs, &req.peer);
    req.method = http_method_of(r->method, &req.method_name);
    int code = http_parse_target(r->target, &req.path, keys, vals, &req.nargs, msg, sizeof msg);
    if (code) {
        refuse(r, code, msg);
        return;
    }
    req.arg_keys = keys;
    req.arg_values = vals;
    struct http_response resp = {.status = 200, .content_type = "application/json"};
    h->cfg->handler(h->cfg->ud, &req, &resp);
    if (r->answered || r->deferred) { /* a stream, or a later answer */
        free(resp.body);
        return;
    }
    respond(r, resp.status, resp.content_type, resp.body, resp.body ? resp.body_len : 0, req.method == HTTP_HEAD,
            resp.retry_after);
}

/* A refusal found while reading the head; the first one stands. */
static void head_refuse(struct h2_req *r, int code, const char *why) {
    if (!r->refuse) r->refuse = code, r->why = why;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud) {
    struct h2_conn *h = ud;
    if (h->dead || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    struct h2_req *r = calloc(1, sizeof *r);
    if (!r) return NGHTTP2_ERR_CALLBACK_FAILURE;
    r->h = h;
    r->id = f->hd.stream_id;
    r->next = h->reqs;
    if (h->reqs) h->reqs->prev = r;
    h->reqs = r;
    h->open++;
    h1_conn_active(h->c);
    nghttp2_session_set_stream_user_data(ng, r->id, r);
    return 0;
}

/* A header field of a request (trailers are ignored). */
static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    (void)ng, (void)flags;
    struct h2_conn *h = ud;
    struct h2_req *r = req_of(h, f->hd.stream_id);
    if (!r || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    r->head_bytes += namelen + valuelen + 4; /* as "name: value\r\n" */
    if (r->head_bytes > H1_MAX_HEAD || ++r->nfields > H1_MAX_HEADERS)
        head_refuse(r, 431, "request head too large");
    if (r->refuse) return 0;
    for (size_t i = 0; i < valuelen; i++)
        if ((value[i] < ' ' && value[i] != '\t') || value[i] == 0x7f) {
            head_refuse(r, 400, "invalid character in a header value");
            return 0;
        }
    static const struct {
        const char *name;
        size_t off;
    } kept[] = {{":method", offsetof(struct h2_req, method)},      {":path", offsetof(struct h2_req, target)},
                {"content-type", offsetof(struct h2_req, ctype)}, {"accept", offsetof(struct h2_req, accept)},
                {"authorization", offsetof(struct h2_req, auth)}};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        if (strlen(kept[i].name) != namelen || memcmp(kept[i].name, name, namelen)) continue;
        char **slot = (char **)((char *)r + kept[i].off);
        if (*slot) break; /* the first one stands, as on HTTP/1.1 */
        while (valuelen && (*value == ' ' || *value == '\t')) value++, valuelen--;
        while (valuelen && (value[valuelen - 1] == ' ' || value[valuelen - 1] == '\t')) valuelen--;
        *slot = malloc(valuelen + 1);
        if (!*slot) return NGHTTP2_ERR_CALLBACK_FAILURE;
        memcpy(*slot, value, valuelen);
        (*slot)[valuelen] = 0;
        break;
    }
    return 0;
}

/* A field nghttp2 found invalid (a NUL or control character in a value, an
 * upper-case name): the request is refused with a Status, not reset. */
static int on_invalid_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t namelen,
                             const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    (void)ng, (void)name, (void)namelen, (void)value, (void)valuelen, (void)flags;
    struct h2_req *r = req_of(ud, f->hd.stream_id);
    if (r) head_refuse(r, 400, "invalid character in a header value");
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud) {
    (void)ng, (void)flags;
    struct h2_conn *h = ud;
    struct h2_req *r = req_of(h, id);
    if (!r || r->refuse || r->too_large || r->queued) return 0;
    if (r->body_len + len > h->cfg->max_body) { /* dropped; nghttp2 still opens the window */
        r->too_large = true;
        free(r->body);
        r->body = NULL;
        r->body_len = r->body_cap = 0;
        return 0;
    }
    if (r->body_len + len + 1 > r->body_cap) {
        size_t nc = r->body_cap ? r->body_cap : 4096;
        while (nc < r->body_len + len + 1) nc *= 2;
        if (nc > h->cfg->max_body + 1) nc = h->cfg->max_body + 1;
        char *b = realloc(r->body, nc);
        if (!b) return NGHTTP2_ERR_CALLBACK_FAILURE;
        r->body = b;
        r->body_cap = nc;
    }
    memcpy(r->body + r->body_len, data, len);
    r->body_len += len;
    r->body[r->body_len] = 0;
    return 0;
}

/* A request is complete at its END_STREAM: queued for dispatch. */
static int on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *ud) {
    (void)ng;
    struct h2_conn *h = ud;
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    struct h2_req *r = req_of(h, f->hd.stream_id);
    if (!r || r->queued) return 0;
    r->queued = true;
    if (h->qtail) h->qtail->qnext = r;
    else h->qhead = r;
    h->qtail = r;
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud) {
    (void)ng, (void)code;
    struct h2_conn *h = ud;
    struct h2_req *r = req_of(h, id);
    if (!r) return 0;
    nghttp2_session_set_stream_user_data(h->ng, id, NULL);
    if (r->queued && !r->answered) { /* still waiting in the queue: out of it */
        struct h2_req **p = &h->qhead, *last = NULL;
        while (*p && *p != r) last = *p, p = &(*p)->qnext;
        if (*p) {
            *p = r->qnext;
            if (h->qtail == r) h->qtail = last;
        }
    }
    h->pending -= r->out_len - r->out_off;
    h1_conn_sync(h->c);
    req_detach(h, r);
    if (r->prev) r->prev->next = r->next;
    else h->reqs = r->next;
    if (r->next) r->next->prev = r->prev;
    h->open--;
    h1_conn_active(h->c);
    req_free(r);
    return 0;
}

static ssize_t no_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *ud) {
    (void)ng, (void)data, (void)len, (void)flags, (void)ud;
    return NGHTTP2_ERR_CALLBACK_FAILURE; /* frames leave through nghttp2_session_mem_send only */
}

/* ---- the connection ---- */

struct h2_conn *h2_conn_new(struct h1_conn *c, const struct http_server_config *cfg) {
    struct h2_conn *h = calloc(1, sizeof *h);
    nghttp2_session_callbacks *cb = NULL;
    if (!h || nghttp2_session_callbacks_new(&cb)) {
        free(h);
        return NULL;
    }
    h->c = c;
    h->cfg = cfg;
    nghttp2_session_callbacks_set_send_callback(cb, no_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_invalid_header_callback(cb, on_invalid_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    /* a value with leading or trailing blanks is trimmed, as on HTTP/1.1,
     * rather than refused ("Authorization: Bearer " is a wrong token, 401) */
    nghttp2_option *opt = NULL;
    int rc = nghttp2_option_new(&opt);
    if (!rc) {
        nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation(opt, 1);
        rc = nghttp2_session_server_new2(&h->ng, cb, h, opt);
        nghttp2_option_del(opt);
    }
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS},
                                   {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H1_MAX_HEAD}};
    if (rc || nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, 2)) {
        if (!rc) nghttp2_session_del(h->ng);
        free(h);
        return NULL;
    }
    return h;
}

int h2_conn_input(struct h2_conn *h, const char *p, size_t n) {
    ssize_t used = nghttp2_session_mem_recv(h->ng, (const uint8_t *)p, n);
    return used < 0 || (size_t)used != n ? -1 : 0;
}

int h2_conn_pump(struct h2_conn *h) {
    while (h->qhead && !h1_conn_over(h->c)) {
        struct h2_req *r = h->qhead;
        h->qhead = r->qnext;
        if (!h->qhead) h->qtail = NULL;
        r->qnext = NULL;
        dispatch(h, r);
    }
    while (h1_conn_unsent(h->c) < h->cfg->max_conn_output) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(h->ng, &data);
        if (n < 0) return -1;
        if (n == 0) break;
        if (h1_conn_send(h->c, data, (size_t)n)) return -1;
    }
    return nghttp2_session_want_read(h->ng) || nghttp2_session_want_write(h->ng) ? 0 : 1;
}

size_t h2_conn_pending(const struct h2_conn *h) { return h->pending; }
bool h2_conn_idle(const struct h2_conn *h) { return h->open == 0; }
bool h2_conn_waiting(const struct h2_conn *h) { return h->qhead != NULL; }

void h2_conn_free(struct h2_conn *h) {
    if (!h) return;
    h->dead = true;
    while (h->reqs) {
        struct h2_req *r = h->reqs;
        h->reqs = r->next;
        req_detach(h, r);
        req_free(r);
    }
    nghttp2_session_del(h->ng);
    free(h);
}

/* ---- streams and deferrals ---- */

struct http_stream *h2_stream_start(const struct http_request *req, int status, const char *content_type,
                                    size_t max_buffer, http_stream_close_fn on_close, void *ud) {
    struct h2_req *r = req->conn;
    if (!r || r->answered || r->deferred) return NULL;
    struct http_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->tag.backend = HTTP_BACKEND_H2;
    st->r = r;
    st->max_buffer = max_buffer ? max_buffer : (16u << 20);
    st->on_close = on_close;
    st->ud = ud;
    char s[8];
    snprintf(s, sizeof s, "%d", status);
    nghttp2_nv nv[] = {NV(":status", s), NV("content-type", content_type)};
    nghttp2_data_provider dp = {.source.ptr = r, .read_callback = read_data};
    r->stream = st;
    r->answered = true;
    if (nghttp2_submit_response(r->h->ng, r->id, nv, 2, &dp)) {
        r->stream = NULL;
        free(st);
        return NULL;
    }
    h1_conn_active(r->h->c);
    h1_conn_kick(r->h->c); /* the headers go at once: a client sees the answer begin */
    return st;
}

int h2_stream_write(struct http_stream *st, const char *data, size_t len) {
    struct h2_req *r = st->r;
    if (!r || st->ended) return -EPIPE;
    if (len == 0) return 0;
    if (st->len - st->off + len > st->max_buffer) { /* a slow consumer: its stream is reset, it will re-list */
        st->ended = true;
        nghttp2_submit_rst_stream(r->h->ng, NGHTTP2_FLAG_NONE, r->id, NGHTTP2_CANCEL);
        h1_conn_kick(r->h->c);
        return -ENOBUFS;
    }
    if (st->off) { /* what was framed is dropped before the buffer grows */
        memmove(st->buf, st->buf + st->off, st->len - st->off);
        st->len -= st->off;
        st->off = 0;
    }
    if (st->len + len > st->cap) {
        size_t nc = st->cap ? st->cap : 4096;
        while (nc < st->len + len) nc *= 2;
        char *b = realloc(st->buf, nc);
        if (!b) return -ENOMEM;
        st->buf = b;
        st->cap = nc;
    }
    memcpy(st->buf + st->len, data, len);
    st->len += len;
    nghttp2_session_resume_data(r->h->ng, r->id);
    h1_conn_kick(r->h->c); /* the turn's writes leave together */
    return 0;
}

void h2_stream_end(struct http_stream *st) {
    if (st->ended) return;
    st->ended = true;
    if (!st->r) return;
    nghttp2_session_resume_data(st->r->h->ng, st->r->id);
    h1_conn_kick(st->r->h->c);
}

void h2_stream_abort(struct http_stream *st) {
    if (st->ended) return;
    st->ended = true;
    if (!st->r) return;
    nghttp2_submit_rst_stream(st->r->h->ng, NGHTTP2_FLAG_NONE, st->r->id, NGHTTP2_INTERNAL_ERROR);
    h1_conn_kick(st->r->h->c);
}

size_t h2_stream_buffered(const struct http_stream *st) { return st->r ? st->len - st->off : 0; }

struct http_deferred *h2_defer(const struct http_request *req) {
    struct h2_req *r = req->conn;
    if (!r || r->answered || r->deferred) return NULL;
    struct http_deferred *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->tag.backend = HTTP_BACKEND_H2;
    d->r = r;
    r->deferred = d;
    return d;
}

void h2_undefer(struct http_deferred *d) {
    if (d->r) d->r->deferred = NULL;
    free(d);
}

void h2_deferred_reply(struct http_deferred *d, struct http_response *resp) {
    struct h2_req *r = d->r;
    free(d);
    char *body = resp->body;
    resp->body = NULL;
    if (!r) { /* the client is gone */
        free(body);
        return;
    }
    r->deferred = NULL;
    bool head = r->method && !strcmp(r->method, "HEAD");
    respond(r, resp->status, resp->content_type, body, body ? resp->body_len : 0, head, resp->retry_after);
    h1_conn_kick(r->h->c);
}
