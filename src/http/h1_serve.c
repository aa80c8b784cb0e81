/* What an HTTP/1.1 connection does with its bytes (h1_int.h): request
 * heads (h1_parse.c), bodies, replies, websocket frames, streams and
 * deferrals; on an HTTP/2 connection, the plaintext goes to h2.c.
 *
 * What the connection does with each request, and why:
 *   head over H1_MAX_HEAD or H1_MAX_HEADERS lines   431, then close
 *   a malformed head                                400, then close
 *   Transfer-Encoding (chunked bodies)              411, then close
 *   Content-Length over H1_DRAIN_MAX                413, then close
 *   Content-Length over max_body                    the body is read and dropped, then 413 (kept alive)
 *   Upgrade: websocket (version 13, a key)          the handshake, then one text message per stream write */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "h1_int.h"

static void serve_loop(struct h1_conn *c);

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
static int put_head(struct h1_conn *c, int status, const char *ctype, long long len, unsigned retry_after) {
    char h[512];
    int n = snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\ncontent-type: %s\r\n", status, reason_phrase(status),
                     ctype ? ctype : "application/json");
    if (retry_after) n += snprintf(h + n, sizeof h - (size_t)n, "retry-after: %u\r\n", retry_after);
    if (len >= 0) n += snprintf(h + n, sizeof h - (size_t)n, "content-length: %lld\r\n", len);
    else n += snprintf(h + n, sizeof h - (size_t)n, "transfer-encoding: chunked\r\n");
    if (c->close_after) n += snprintf(h + n, sizeof h - (size_t)n, "connection: close\r\n");
    else if (c->head.http10) n += snprintf(h + n, sizeof h - (size_t)n, "connection: keep-alive\r\n");
    n += snprintf(h + n, sizeof h - (size_t)n, "\r\n");
    if (n <= 0 || (size_t)n >= sizeof h) return -EINVAL;
    return h1_out_append(c, h, (size_t)n);
}

/* Sends a whole response (body taken) and goes on to the next request. */
static void respond(struct h1_conn *c, int status, const char *ctype, char *body, size_t len, unsigned retry_after) {
    int rc = put_head(c, status, ctype, (long long)len, retry_after);
    if (!rc && len && c->head.method != HTTP_HEAD) rc = h1_out_append(c, body, len);
    free(body);
    if (rc) {
        h1_close(c);
        return;
    }
    c->state = S_HEAD;
    c->since_ms = uv_now(c->srv->loop);
    h1_flush(c); /* a closing connection closes here, once it is out */
    if (c->state == S_HEAD && !c->close_after) h1_serve(c); /* a pipelined request may wait in c->in */
}

static void respond_status(struct h1_conn *c, int code, const char *reason, const char *msg, bool close) {
    size_t n = 0;
    char *b = http_status_body(code, reason, msg, &n);
    if (close) c->close_after = true;
    respond(c, code, "application/json", b, b ? n : 0, 0);
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
    int rc = h1_out_append(c, (const char *)h, hl);
    return rc ? rc : n ? h1_out_append(c, p, n) : 0;
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
            h1_close(c);
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
                h1_stream_retire(c->srv, c->stream);
                c->stream = NULL;
            }
            h1_flush(c);
            return;
        }
        if (opcode == 9) ws_frame(c, 10, (const char *)payload, keep), h1_schedule_flush(c);
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
        .client_cn = c->peer_cn,
        .client_orgs = c->peer_orgs,
        .peer = c->peer,
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
        h1_flush(c);
        return;
    }
    respond(c, resp.status, resp.content_type, resp.body, resp.body ? resp.body_len : 0, resp.retry_after);
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
    if (h1_out_append(c, resp, (size_t)n)) {
        h1_close(c);
        return;
    }
    c->state = S_WS;
    dispatch(c, true);
    if (c->state != S_CLOSING) h1_flush(c);
}

/* Serves what c->in holds: heads, bodies, pipelined requests. An answer
 * completed while this runs (respond, a stream ended or a reply deferred
 * inside its handler) calls serve again: that call returns at once and this
 * loop takes the next request, so pipelined requests never nest. */
void h1_serve(struct h1_conn *c) {
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
            h1_close(c);
            return;
        }
    }
    c->inlen = 0;
    h1_flush(c);
    if (c->state != S_H2) return;
    if (h2_conn_waiting(c->h2)) h1_hold(c);
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
        if (h1_out_over(c)) {
            h1_hold(c);
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
            h1_close(c);
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
            h1_out_append(c, cont, sizeof cont - 1);
            h1_flush(c);
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
                h1_close(c);
                return;
            }
            c->state = S_BODY;
            continue;
        }
        dispatch(c, false);
    }
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
        if (put_head(c, status, content_type, -1, 0)) {
            free(st);
            return NULL;
        }
        c->state = S_STREAM;
    }
    c->stream = st;
    c->handed_off = true;
    h1_flush(c); /* the head (or the handshake) goes at once: a client sees the answer begin */
    return st;
}

int h1_stream_write(struct http_stream *st, const char *data, size_t len) {
    struct h1_conn *c = st->c;
    if (!c || st->ended) return -EPIPE;
    if (len == 0) return 0;
    if (st->queued + len > st->max_buffer) { /* a slow consumer: closed, it will re-list */
        h1_close(c);
        return -ENOBUFS;
    }
    st->queued += len;
    int rc;
    if (c->state == S_WS) {
        rc = ws_frame(c, 1, data, len);
    } else {
        char hex[24];
        int hl = snprintf(hex, sizeof hex, "%zx\r\n", len);
        rc = h1_out_append(c, hex, (size_t)hl);
        if (!rc) rc = h1_out_append(c, data, len);
        if (!rc) rc = h1_out_append(c, "\r\n", 2);
    }
    if (rc) return rc;
    h1_schedule_flush(c);
    return 0;
}

void h1_stream_end(struct http_stream *st) {
    if (st->ended) return;
    struct h1_conn *c = st->c;
    if (!c) return;
    c->stream = NULL;
    h1_stream_retire(c->srv, st);
    if (c->state == S_WS) {
        ws_frame(c, 8, "\x03\xe8", 2);
        c->close_after = true;
        c->state = S_HEAD;
    } else {
        h1_out_append(c, "0\r\n\r\n", 5);
        c->state = S_HEAD;
        c->since_ms = uv_now(c->srv->loop);
    }
    h1_flush(c);
    if (c->state == S_HEAD && !c->close_after) {
        h1_resume_reading(c);
        h1_serve(c);
    }
}

void h1_stream_abort(struct http_stream *st) {
    if (st->ended || !st->c) return;
    h1_close(st->c); /* no last chunk: the body is cut short */
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
            body ? resp->body_len : 0, resp->retry_after);
    h1_resume_reading(c);
}
