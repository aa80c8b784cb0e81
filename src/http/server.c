#include "server.h"
#include "tlscert.h"
#include "http_int.h"

#include <errno.h>
#include <libwebsockets.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define WRITE_CHUNK 65536
#define H2_WRITE_MAX 16384 /* HTTP/2's default largest frame: lws does not split a larger write */
#define DRAIN_MAX (64u << 20) /* an oversized body is read and dropped up to this, then 413 */
/* Stream writes share chunks of this size (a turn's watch events go out in
 * one send); it stays under what lws sends in one go (pt_serv_buf_size). */
#define STREAM_CHUNK 16384

struct http_stream;

struct http_server {
    struct h1_server *h1;    /* plain HTTP/1.1: h1.c serves it (the rest is unused) */
    struct lws_context *ctx; /* set to NULL by lws when destruction completes */
    struct http_server_config cfg;
    void *loops[1];
    int port;
    bool stopping;
    uv_check_t *flush;        /* after the turn's I/O: write the dirty streams (freed by its close) */
    struct http_stream *dirty; /* HTTP/1.1 streams with data to write, doubly linked */
    size_t output, output_peak, conn_output_peak; /* replies held unsent (c->out), as h1.c counts them */
    struct http_conn *waitq;  /* requests waiting for their connection's output to drain */
    unsigned nwaiting;
    struct http_fd_conns conns; /* network connections, by fd: an HTTP/2 one counts once */
};

struct chunk {
    struct chunk *next;
    size_t len;                /* bytes of data, after the framing room */
    size_t cap;                /* room for data */
    size_t off;                /* bytes already sent (HTTP/2 sends big chunks in pieces) */
    unsigned char buf[];       /* LWS_PRE + 16 bytes of room, then data, then room for "\r\n" */
};

struct http_stream {
    struct http_tag tag; /* HTTP_BACKEND_LWS */
    struct lws *wsi;
    struct http_server *srv;
    struct chunk *head, *tail;
    size_t buffered, max_buffer;
    bool ended, closing, final_sent;
    bool h2; /* HTTP/2 frames the data itself: no chunked encoding */
    bool ws; /* a websocket: one text message per write */
    bool dirty;
    struct http_stream *dprev, *dnext; /* the server's dirty list */
    http_stream_close_fn on_close;
    void *ud;
};

/* Per-connection state; reset at each request (keep-alive reuses it). */
struct http_conn {
    char *path;
    char *args_buf; /* every argument's key and value, NUL-separated */
    const char *keys[HTTP_MAX_ARGS], *vals[HTTP_MAX_ARGS];
    int nargs;
    enum http_method method;
    const char *method_name;
    char content_type[256], accept[1024], authorization[HTTP_MAX_HEADER];
    char *body;
    size_t body_len, body_expected;
    bool discard;    /* reading an oversized body only to answer 413 after it */
    bool ws;         /* an upgraded websocket connection */
    bool dispatched; /* the handler ran; lws may still report an empty body's completion */
    /* response */
    unsigned char *out; /* LWS_PRE headroom + body */
    size_t out_len, out_sent;
    bool close_after;
    bool hdr_pending;       /* a deferred HTTP/2 reply: headers go out on the next WRITEABLE */
    int pend_status;
    const char *pend_ctype;
    struct http_stream *stream;
    struct http_deferred *deferred; /* the handler answers later */
    struct lws *wsi;       /* the request's (stream's, on HTTP/2) */
    size_t counted;        /* c->out bytes unsent, as counted in the server and the network connection */
    bool waiting;          /* not dispatched yet: too many replies wait on its connection */
    struct http_conn *wprev, *wnext; /* the server's waitq */
};

struct http_deferred {
    struct http_tag tag; /* HTTP_BACKEND_LWS */
    struct lws *wsi;
    struct http_conn *c; /* NULL once the request's connection is gone */
};

static void flush_closed(uv_handle_t *h) { free(h); }

static void dirty_unlink(struct http_stream *st) {
    if (!st->dirty) return;
    if (st->dprev) st->dprev->dnext = st->dnext;
    else st->srv->dirty = st->dnext;
    if (st->dnext) st->dnext->dprev = st->dprev;
    st->dprev = st->dnext = NULL;
    st->dirty = false;
}

static void stream_free(struct http_stream *st) {
    dirty_unlink(st);
    while (st->head) {
        struct chunk *c = st->head;
        st->head = c->next;
        free(c);
    }
    free(st);
}

/* Ends a stream's life: tell its owner once, then free it. */
static void stream_closed(struct http_conn *c) {
    struct http_stream *st = c->stream;
    if (!st) return;
    c->stream = NULL;
    if (st->on_close) st->on_close(st->ud);
    stream_free(st);
}

static void out_left(struct lws *wsi, struct http_conn *c, size_t left);
static void wait_unlink(struct http_conn *c);

static void conn_reset(struct http_conn *c) {
    if (c->counted) out_left(c->wsi, c, 0);
    if (c->waiting) wait_unlink(c);
    stream_closed(c);
    if (c->deferred) c->deferred->c = NULL; /* its owner answers into the void */
    free(c->path);
    free(c->args_buf);
    free(c->body);
    free(c->out);
    memset(c, 0, sizeof *c);
}

static const char *const method_names[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "OTHER"};

static enum http_method map_method(int m) {
    switch (m) {
    case LWSHUMETH_GET: return HTTP_GET;
    case LWSHUMETH_POST: return HTTP_POST;
    case LWSHUMETH_PUT: return HTTP_PUT;
    case LWSHUMETH_PATCH: return HTTP_PATCH;
    case LWSHUMETH_DELETE: return HTTP_DELETE;
    case LWSHUMETH_HEAD: return HTTP_HEAD;
    case LWSHUMETH_OPTIONS: return HTTP_OPTIONS;
    default: return HTTP_OTHER;
    }
}

/* Header t into buf ("" when absent, or longer than len). -1 when its value
 * holds a NUL or another control character but HTAB: lws 4.1 keeps a NUL
 * inside a value and lws_hdr_copy stops at it, so "Bearer TOKEN\0junk" would
 * read as the token. */
static int copy_hdr(struct lws *wsi, enum lws_token_indexes t, char *buf, size_t len) {
    buf[0] = 0;
    int total = lws_hdr_total_length(wsi, t);
    if (total <= 0) return 0;
    if (lws_hdr_copy(wsi, buf, (int)len, t) < 0) {
        buf[0] = 0;
        return 0;
    }
    if (strlen(buf) != (size_t)total) return -1;
    for (const unsigned char *p = (const unsigned char *)buf; *p; p++)
        if ((*p < ' ' && *p != '\t') || *p == 0x7f) return -1;
    return 0;
}

/* Reads the decoded query fragments lws split at '&' (empty ones skipped, as
 * on the plain port). 0, -ENOMEM, or -E2BIG when there are more than
 * HTTP_MAX_ARGS: refused, never a silent drop. */
static int read_args(struct lws *wsi, struct http_conn *c) {
    int total = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS);
    if (total <= 0) return 0;
    c->args_buf = malloc((size_t)total + 2);
    if (!c->args_buf) return -ENOMEM;
    char *p = c->args_buf;
    for (int i = 0; i < 256; i++) { /* lws numbers a request's fragments with a byte */
        int n = lws_hdr_copy_fragment(wsi, p, total + 1, WSI_TOKEN_HTTP_URI_ARGS, i);
        if (n < 0) break;
        if (n == 0) continue;
        if (c->nargs == HTTP_MAX_ARGS) return -E2BIG;
        char *eq = strchr(p, '=');
        c->keys[c->nargs] = p;
        if (eq) {
            *eq = 0;
            c->vals[c->nargs] = eq + 1;
        } else {
            c->vals[c->nargs] = p + n; /* "" */
        }
        c->nargs++;
        p += n + 1;
    }
    return 0;
}

static int write_headers(struct lws *wsi, struct http_conn *c, int status, const char *ctype) {
    unsigned char buf[LWS_PRE + 1024], *start = buf + LWS_PRE, *p = start, *end = buf + sizeof buf - 1;
    /* the status line comes first: common headers write it */
    if (lws_add_http_common_headers(wsi, (unsigned int)status, ctype,
                                    c->method == HTTP_HEAD ? 0 : (lws_filepos_t)c->out_len, &p, end))
        return -1;
    if (c->close_after &&
        lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION, (const unsigned char *)"close", 5, &p, end))
        return -1;
    if (lws_finalize_http_header(wsi, &p, end)) return -1;
    /* On HTTP/2 a reply without a body ends its stream with the headers
     * frame (END_STREAM): nothing else would, and the client would wait for
     * data that never comes. HTTP/1.1 ends it by Content-Length: 0. */
    int wp = LWS_WRITE_HTTP_HEADERS;
    if ((c->out_len == 0 || c->method == HTTP_HEAD) && lws_get_network_wsi(wsi) != wsi) wp |= LWS_WRITE_H2_STREAM_END;
    size_t n = (size_t)(p - start);
    return lws_write(wsi, start, n, (enum lws_write_protocol)wp) == (int)n ? 0 : -1;
}

/* HTTP/1.1, a body of at most WRITE_CHUNK: status line, headers and body in
 * one send (lws only frames headers on h1; the transaction's end resets its
 * byte counts). Returns what respond returns. */
static int respond_h1_one_send(struct lws *wsi, struct http_conn *c, int status, const char *ctype, char *body,
                               size_t len) {
    unsigned char *buf = malloc(LWS_PRE + 1024 + len);
    if (!buf) {
        free(body);
        return -1;
    }
    unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + LWS_PRE + 1024 - 1;
    int bad = lws_add_http_common_headers(wsi, (unsigned int)status, ctype, (lws_filepos_t)len, &p, end) ||
              lws_finalize_http_header(wsi, &p, end);
    if (!bad) {
        if (len) memcpy(p, body, len);
        size_t n = (size_t)(p - start) + len;
        bad = lws_write(wsi, start, n, LWS_WRITE_HTTP_HEADERS) != (int)n;
    }
    free(body);
    free(buf);
    if (bad) return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* Sends a response whose body the server owns from now on (may be NULL). */
static int respond(struct lws *wsi, struct http_conn *c, int status, const char *ctype, char *body, size_t len) {
    if (lws_get_network_wsi(wsi) == wsi && !c->close_after && c->method != HTTP_HEAD && len <= WRITE_CHUNK)
        return respond_h1_one_send(wsi, c, status, ctype, body, len);
    c->out = malloc(LWS_PRE + len + 1);
    if (!c->out) { free(body); return -1; }
    if (len) memcpy(c->out + LWS_PRE, body, len);
    free(body);
    c->out_len = len;
    c->out_sent = 0;
    if (write_headers(wsi, c, status, ctype)) return -1;
    if (c->out_len == 0 || c->method == HTTP_HEAD) {
        if (c->close_after) return -1;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    if (c->close_after) {
        /* small error replies on a connection about to close: write now, since
         * lws may read the unparseable rest of the request and drop the
         * connection before a writeable callback comes */
        lws_write(wsi, c->out + LWS_PRE, c->out_len, LWS_WRITE_HTTP_FINAL);
        return -1;
    }
    out_left(wsi, c, c->out_len);
    lws_callback_on_writable(wsi);
    return 0;
}

static int respond_text(struct lws *wsi, struct http_conn *c, int status, const char *msg) {
    char *b = strdup(msg);
    return respond(wsi, c, status, "application/json", b, b ? strlen(b) : 0);
}

static int respond_too_large(struct lws *wsi, struct http_conn *c) {
    struct http_server *s = lws_context_user(lws_get_context(wsi));
    char msg[256];
    snprintf(msg, sizeof msg,
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
             "\"message\":\"request entity too large: limit is %zu bytes\",\"reason\":\"RequestEntityTooLarge\","
             "\"code\":413}",
             s->cfg.max_body);
    return respond_text(wsi, c, 413, msg);
}

/* Before closing on a request whose body lws cannot read, take in what the
 * client already sent: closing with unread bytes makes TCP reset the
 * connection, and the client would lose the error reply. Bounded. */
static void drain_socket(struct lws *wsi) {
    if (lws_is_ssl(wsi) || lws_get_network_wsi(wsi) != wsi) return; /* never raw reads under TLS or h2 */
    int fd = lws_get_socket_fd(wsi);
    char buf[4096];
    for (int i = 0; fd >= 0 && i < 256; i++)
        if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) break;
}

/* A request refused before its handler (its head is wrong): a Status. On
 * HTTP/1.1 the connection closes after it, as after 411, since its body was
 * never read; on HTTP/2 only the stream ends. */
static int refuse(struct lws *wsi, struct http_conn *c, int code, const char *reason, const char *msg) {
    size_t n = 0;
    char *b = http_status_body(code, reason, msg, &n);
    c->dispatched = true; /* a body lws reports after this is dropped */
    if (lws_get_network_wsi(wsi) == wsi) {
        c->close_after = true;
        drain_socket(wsi);
    }
    return respond(wsi, c, code, "application/json", b, b ? n : 0);
}

static int dispatch(struct lws *wsi, struct http_conn *c) {
    struct http_server *s = lws_context_user(lws_get_context(wsi));
    c->dispatched = true;
    struct http_request req = {
        .method = c->method,
        .method_name = c->method_name,
        .path = c->path,
        .nargs = c->nargs,
        .arg_keys = c->keys,
        .arg_values = c->vals,
        .content_type = c->content_type,
        .accept = c->accept,
        .authorization = c->authorization,
        .body = c->body ? c->body : "",
        .body_len = c->body_len,
        .conn = wsi,
        .secure = lws_is_ssl(lws_get_network_wsi(wsi)) != 0,
        .backend = HTTP_BACKEND_LWS,
    };
    struct http_response resp = {.status = 200, .content_type = "application/json"};
    s->cfg.handler(s->cfg.ud, &req, &resp);
    if (c->stream || c->deferred) { /* a stream (headers are out) or a later answer */
        free(resp.body);
        return 0;
    }
    return respond(wsi, c, resp.status, resp.content_type ? resp.content_type : "application/json", resp.body,
                   resp.body ? resp.body_len : 0);
}

struct http_deferred *http_defer(const struct http_request *req) {
    if (req->backend == HTTP_BACKEND_H1) return h1_defer(req);
    struct lws *wsi = req->conn;
    struct http_conn *c = wsi ? lws_wsi_user(wsi) : NULL;
    if (!c || c->ws || c->stream || c->deferred) return NULL;
    struct http_deferred *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->tag.backend = HTTP_BACKEND_LWS;
    d->wsi = wsi;
    d->c = c;
    c->deferred = d;
    return d;
}

void http_undefer(struct http_deferred *d) {
    if (((struct http_tag *)d)->backend == HTTP_BACKEND_H1) {
        h1_undefer(d);
        return;
    }
    if (d->c) d->c->deferred = NULL;
    free(d);
}

void http_deferred_reply(struct http_deferred *d, struct http_response *resp) {
    if (((struct http_tag *)d)->backend == HTTP_BACKEND_H1) {
        h1_deferred_reply(d, resp);
        return;
    }
    struct http_conn *c = d->c;
    struct lws *wsi = d->wsi;
    free(d);
    if (!c) { /* the client is gone */
        free(resp->body);
        resp->body = NULL;
        return;
    }
    c->deferred = NULL;
    const char *ctype = resp->content_type ? resp->content_type : "application/json";
    char *body = resp->body;
    size_t len = body ? resp->body_len : 0;
    resp->body = NULL;
    if (lws_get_network_wsi(wsi) != wsi) {
        /* HTTP/2: a stream writes only when lws says so, headers included */
        c->out = malloc(LWS_PRE + len + 1);
        if (c->out && len) memcpy(c->out + LWS_PRE, body, len);
        free(body);
        c->out_len = c->out ? len : 0;
        c->out_sent = 0;
        c->hdr_pending = true;
        c->pend_status = c->out ? resp->status : 500;
        c->pend_ctype = ctype;
        out_left(wsi, c, c->out_len);
        lws_callback_on_writable(wsi);
        return;
    }
    /* HTTP/1.1: outside lws' callbacks, so a failure closes the connection
     * by timeout instead of a return code */
    if (respond(wsi, c, resp->status, ctype, body, len)) lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
}

/* ---- replies a client does not read ----
 * A reply waiting in c->out counts against the server (cfg.max_output) and
 * its network connection (cfg.max_conn_output; an HTTP/2 connection carries
 * many): a request arriving on a connection over its bound waits, not
 * dispatched, until the replies drain, then runs from its own WRITEABLE
 * (HTTP/2 frames leave only from there). HTTP/1.1 needs no wait: lws reads
 * the next request only once the last reply is out. The network
 * connection's count lives in its wsi's opaque user data, as a number. */

static size_t conn_output(struct lws *wsi) {
    return (size_t)(uintptr_t)lws_get_opaque_user_data(lws_get_network_wsi(wsi));
}

static bool out_over(struct lws *wsi) {
    struct http_server *s = lws_context_user(lws_get_context(wsi));
    size_t mine = conn_output(wsi);
    return mine > s->cfg.max_conn_output || (mine && s->output > s->cfg.max_output);
}

static void wait_unlink(struct http_conn *c) {
    struct http_server *s = lws_context_user(lws_get_context(c->wsi));
    if (c->wprev) c->wprev->wnext = c->wnext;
    else s->waitq = c->wnext;
    if (c->wnext) c->wnext->wprev = c->wprev;
    c->wprev = c->wnext = NULL;
    c->waiting = false;
    s->nwaiting--;
}

static void out_left(struct lws *wsi, struct http_conn *c, size_t left) {
    struct http_server *s = lws_context_user(lws_get_context(wsi));
    struct lws *nwsi = lws_get_network_wsi(wsi);
    size_t mine = conn_output(wsi) - c->counted + left;
    bool less = left < c->counted;
    s->output = s->output - c->counted + left;
    c->counted = left;
    lws_set_opaque_user_data(nwsi, (void *)(uintptr_t)mine);
    if (s->output > s->output_peak) s->output_peak = s->output;
    if (mine > s->conn_output_peak) s->conn_output_peak = mine;
    if (less)
        for (struct http_conn *w = s->waitq; w; w = w->wnext)
            if (!out_over(w->wsi)) lws_callback_on_writable(w->wsi);
}

static int dispatch_or_wait(struct lws *wsi, struct http_conn *c) {
    if (!out_over(wsi)) return dispatch(wsi, c);
    struct http_server *s = lws_context_user(lws_get_context(wsi));
    c->waiting = true;
    c->wprev = NULL;
    c->wnext = s->waitq;
    if (s->waitq) s->waitq->wprev = c;
    s->waitq = c;
    s->nwaiting++;
    return 0;
}

static int on_request(struct lws *wsi, struct http_conn *c) {
    struct http_server *s = lws_context_user(lws_get_context(wsi));
    conn_reset(c);
    char *uri;
    int ulen;
    int m = lws_http_get_uri_and_method(wsi, &uri, &ulen);
    c->wsi = wsi;
    c->method = map_method(m);
    c->method_name = method_names[c->method];
    c->path = strndup(uri ? uri : "/", uri ? (size_t)ulen : 1);
    if (!c->path) return -1;
    char msg[128];
    if (ulen > HTTP_MAX_PATH) {
        snprintf(msg, sizeof msg, "the request path is longer than %d bytes", HTTP_MAX_PATH);
        return refuse(wsi, c, 414, "RequestURITooLong", msg);
    }
    int rc = read_args(wsi, c);
    if (rc == -E2BIG) {
        snprintf(msg, sizeof msg, "too many query parameters: at most %d are accepted", HTTP_MAX_ARGS);
        return refuse(wsi, c, 414, "RequestURITooLong", msg);
    }
    if (rc) return -1;
    char te[64], cl[32];
    if (copy_hdr(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, c->content_type, sizeof c->content_type) ||
        copy_hdr(wsi, WSI_TOKEN_HTTP_ACCEPT, c->accept, sizeof c->accept) ||
        copy_hdr(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, c->authorization, sizeof c->authorization) ||
        copy_hdr(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING, te, sizeof te) ||
        copy_hdr(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, cl, sizeof cl))
        return refuse(wsi, c, 400, "BadRequest", "invalid character in a header value");
    if (te[0]) { /* lws 4.1 cannot read chunked request bodies: refuse them clearly */
        c->close_after = true;
        drain_socket(wsi);
        return respond_text(wsi, c, 411,
                            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                            "\"message\":\"chunked request bodies are not supported; send Content-Length\","
                            "\"reason\":\"BadRequest\",\"code\":411}");
    }
    if (cl[0]) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno || *end || n > DRAIN_MAX) {
            c->close_after = true; /* the unread body must not be taken for the next request */
            drain_socket(wsi);
            return respond_too_large(wsi, c);
        }
        if (n > s->cfg.max_body) { /* read it, drop it, then answer on a usable connection */
            c->discard = true;
            c->body_expected = (size_t)n;
            return 0;
        }
        if (n > 0) {
            c->body_expected = (size_t)n;
            c->body = malloc((size_t)n + 1);
            if (!c->body) return -1;
            return 0; /* the body arrives in LWS_CALLBACK_HTTP_BODY */
        }
    }
    return dispatch_or_wait(wsi, c);
}

/* The head chunk went out whole: drop it, and ask for more if any is due. */
static int chunk_sent(struct lws *wsi, struct http_stream *st) {
    struct chunk *ch = st->head;
    st->head = ch->next;
    if (!st->head) st->tail = NULL;
    st->buffered -= ch->len;
    free(ch);
    if (st->head || st->ended) lws_callback_on_writable(wsi);
    return 0;
}

/* Frames a chunk for HTTP/1.1 chunked encoding in place, "<hex>\r\n<data>\r\n",
 * the hex just before the data (the chunk keeps room for it). Returns where
 * the framed bytes start; *n is their length. */
static unsigned char *frame_h1_chunk(struct chunk *ch, size_t *n) {
    unsigned char *data = ch->buf + LWS_PRE + 16;
    char hex[20];
    int hl = snprintf(hex, sizeof hex, "%zx\r\n", ch->len);
    memcpy(data - hl, hex, (size_t)hl);
    memcpy(data + ch->len, "\r\n", 2);
    *n = (size_t)hl + ch->len + 2;
    return data - hl;
}

/* One chunk (or one frame's worth of it) per writeable callback: lws allows
 * one write each. */
static int stream_writeable(struct lws *wsi, struct http_conn *c) {
    struct http_stream *st = c->stream;
    if (st->closing) return -1;
    struct chunk *ch = st->head;
    unsigned char *data = ch ? ch->buf + LWS_PRE + 16 : NULL;
    if (st->ws) { /* one text message per chunk; the end closes the socket */
        if (!ch) return st->ended ? -1 : 0;
        if (lws_write(wsi, data, ch->len, LWS_WRITE_TEXT) != (int)ch->len) return -1;
        return chunk_sent(wsi, st);
    }
    if (ch && st->h2) { /* h2 frames the data itself, at most one frame's worth per write */
        size_t n = ch->len - ch->off;
        if (n > H2_WRITE_MAX) n = H2_WRITE_MAX;
        /* what was sent already is lws' headroom now */
        if (lws_write(wsi, data + ch->off, n, LWS_WRITE_HTTP) != (int)n) return -1;
        ch->off += n;
        if (ch->off < ch->len) {
            lws_callback_on_writable(wsi);
            return 0;
        }
        return chunk_sent(wsi, st);
    }
    if (ch) {
        size_t n;
        unsigned char *start = frame_h1_chunk(ch, &n);
        if (lws_write(wsi, start, n, LWS_WRITE_HTTP) != (int)n) return -1;
        return chunk_sent(wsi, st);
    }
    if (st->ended && !st->final_sent) {
        unsigned char buf[LWS_PRE + 8];
        memcpy(buf + LWS_PRE, "0\r\n\r\n", 5);
        size_t n = st->h2 ? 0 : 5; /* h2: an empty final frame ends the stream */
        st->final_sent = true;
        if (lws_write(wsi, buf + LWS_PRE, n, LWS_WRITE_HTTP_FINAL) != (int)n) return -1;
        stream_closed(c);
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    return 0;
}

/* HTTP/1.1 streams are written from here, after the turn's I/O, straight
 * to the socket (lws keeps what it does not take and asks for WRITEABLE
 * itself): waiting for WRITEABLE would add and remove the socket's write
 * interest, and libuv turns each change into two epoll calls. */
static void flush_dirty(uv_check_t *h) {
    struct http_server *srv = h->data;
    uv_check_stop(h);
    while (srv->dirty) {
        struct http_stream *st = srv->dirty;
        dirty_unlink(st);
        if (st->closing || st->ended) continue; /* WRITEABLE was asked for: it finishes there */
        while (st->head) {
            struct chunk *ch = st->head;
            size_t n;
            unsigned char *start = frame_h1_chunk(ch, &n);
            if (lws_write(st->wsi, start, n, LWS_WRITE_HTTP) != (int)n) { /* broken: close on WRITEABLE */
                st->closing = true;
                lws_callback_on_writable(st->wsi);
                break;
            }
            st->head = ch->next;
            if (!st->head) st->tail = NULL;
            st->buffered -= ch->len;
            free(ch);
        }
    }
}

static void mark_dirty(struct http_stream *st) {
    if (st->dirty) return;
    st->dirty = true;
    st->dprev = NULL;
    st->dnext = st->srv->dirty;
    if (st->dnext) st->dnext->dprev = st;
    st->srv->dirty = st;
    uv_check_start(st->srv->flush, flush_dirty);
}

struct http_stream *http_stream_start(const struct http_request *req, int status, const char *content_type,
                                      size_t max_buffer, http_stream_close_fn on_close, void *ud) {
    if (req->backend == HTTP_BACKEND_H1) return h1_stream_start(req, status, content_type, max_buffer, on_close, ud);
    struct lws *wsi = req->conn;
    struct http_conn *c = lws_wsi_user(wsi);
    if (!c || c->stream) return NULL;
    struct http_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    unsigned char buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start, *end = buf + sizeof buf - 1;
    st->h2 = lws_get_network_wsi(wsi) != wsi; /* a stream inside an h2 connection */
    st->ws = c->ws; /* the upgrade was the response: no headers to send */
    if (!st->ws && (lws_add_http_header_status(wsi, (unsigned int)status, &p, end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, (const unsigned char *)content_type,
                                     (int)strlen(content_type), &p, end) ||
        (!st->h2 && lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING,
                                                 (const unsigned char *)"chunked", 7, &p, end)) ||
        lws_finalize_write_http_header(wsi, start, &p, end))) {
        free(st);
        return NULL;
    }
    lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0); /* a watch may idle for long */
    st->tag.backend = HTTP_BACKEND_LWS;
    st->wsi = wsi;
    st->srv = lws_context_user(lws_get_context(wsi));
    st->max_buffer = max_buffer ? max_buffer : (16u << 20);
    st->on_close = on_close;
    st->ud = ud;
    c->stream = st;
    return st;
}

int http_stream_write(struct http_stream *st, const char *data, size_t len) {
    if (st->tag.backend == HTTP_BACKEND_H1) return h1_stream_write(st, data, len);
    if (st->closing || st->ended) return -EPIPE;
    if (len == 0) return 0;
    if (st->buffered + len > st->max_buffer) { /* slow consumer: close, it will re-list */
        st->closing = true;
        lws_callback_on_writable(st->wsi);
        return -ENOBUFS;
    }
    struct chunk *t = st->tail;
    if (t && !st->ws && t->cap - t->len >= len) { /* joins what waits to be sent */
        memcpy(t->buf + LWS_PRE + 16 + t->len, data, len);
        t->len += len;
        st->buffered += len;
        return 0; /* its flush was arranged when the chunk was queued */
    }
    size_t cap = st->ws || len >= STREAM_CHUNK ? len : STREAM_CHUNK;
    struct chunk *ch = malloc(sizeof *ch + LWS_PRE + 16 + cap + 2);
    if (!ch) return -ENOMEM;
    ch->next = NULL;
    ch->len = len;
    ch->cap = cap;
    ch->off = 0;
    memcpy(ch->buf + LWS_PRE + 16, data, len);
    if (t) t->next = ch;
    else st->head = ch;
    st->tail = ch;
    st->buffered += len;
    if (!st->h2 && !st->ws && st->srv->flush) mark_dirty(st);
    else lws_callback_on_writable(st->wsi);
    return 0;
}

void http_stream_end(struct http_stream *st) {
    if (st->tag.backend == HTTP_BACKEND_H1) {
        h1_stream_end(st);
        return;
    }
    if (st->ended) return;
    st->ended = true;
    lws_callback_on_writable(st->wsi);
}

size_t http_stream_buffered(const struct http_stream *st) {
    return st->tag.backend == HTTP_BACKEND_H1 ? h1_stream_buffered(st) : st->buffered;
}

/* A websocket upgrade (watch over websocket, as browsers use it): the
 * request is the upgrade's GET; a handler that streams gets one text message
 * per event. Anything else is answered with one message, then closed. */
static int on_ws_established(struct lws *wsi, struct http_conn *c) {
    conn_reset(c);
    c->ws = true;
    c->method = HTTP_GET;
    c->method_name = "GET";
    int ulen = lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI);
    c->path = malloc((size_t)(ulen > 0 ? ulen : 0) + 1);
    if (!c->path || lws_hdr_copy(wsi, c->path, ulen + 1, WSI_TOKEN_GET_URI) < 0) return -1;
    struct http_server *s = lws_context_user(lws_get_context(wsi));
    struct http_request req = {.method = HTTP_GET, .method_name = "GET", .path = c->path, .content_type = "",
                               .accept = "", .authorization = c->authorization, .body = "", .conn = wsi,
                               .secure = lws_is_ssl(lws_get_network_wsi(wsi)) != 0, .backend = HTTP_BACKEND_LWS};
    struct http_response resp = {.status = 200, .content_type = "application/json"};
    c->dispatched = true;
    /* refused as a plain request would be: the Status is the one message */
    int rc = ulen > HTTP_MAX_PATH ? -ENAMETOOLONG : read_args(wsi, c);
    if (!rc && copy_hdr(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, c->authorization, sizeof c->authorization)) rc = -EINVAL;
    if (rc == -ENOMEM) return -1;
    if (rc) {
        char msg[128];
        int code = rc == -EINVAL ? 400 : 414;
        if (rc == -EINVAL) snprintf(msg, sizeof msg, "invalid character in a header value");
        else if (rc == -E2BIG) snprintf(msg, sizeof msg, "too many query parameters: at most %d are accepted", HTTP_MAX_ARGS);
        else snprintf(msg, sizeof msg, "the request path is longer than %d bytes", HTTP_MAX_PATH);
        resp.status = code;
        resp.body = http_status_body(code, code == 400 ? "BadRequest" : "RequestURITooLong", msg, &resp.body_len);
    } else {
        req.nargs = c->nargs, req.arg_keys = c->keys, req.arg_values = c->vals;
        s->cfg.handler(s->cfg.ud, &req, &resp);
    }
    if (c->stream) {
        free(resp.body);
        return 0;
    }
    /* not a stream (an error, or a plain object): one message, then close */
    struct http_stream *st = http_stream_start(&req, resp.status, "application/json", 0, NULL, NULL);
    if (!st) {
        free(resp.body);
        return -1;
    }
    if (resp.body) http_stream_write(st, resp.body, resp.body_len);
    free(resp.body);
    http_stream_end(st);
    return 0;
}

/* ---- open connections (cfg.max_conns, max_conns_per_client) ----
 * lws 4.1 shows a new network connection to the application only in
 * LWS_CALLBACK_FILTER_NETWORK_CONNECTION, with the accepted socket's fd
 * (the wsi there is the listener's), before any byte of TLS; returning
 * non-zero makes lws close the socket at once. Its end is the
 * LWS_CALLBACK_WSI_DESTROY of its network wsi, which still holds the fd
 * then (lws closes it after), whether the connection ended in its
 * handshake, as HTTP/1.1 or as HTTP/2. CLOSED_HTTP is no substitute: lws
 * skips it for some that end before or in their handshake. So they are
 * counted by fd (http_fd_conns). One lws drops after the filter but before
 * it has a wsi (out of memory, its fd table full) is never destroyed: its
 * place is freed when the kernel hands out its fd again. */

/* A new network connection on fd: counted, or -1 to have lws drop it (past
 * a bound, counted in refused: before its handshake it cannot be told 503). */
static int tls_conn_admit(struct http_server *s, int fd) {
    char peer[INET6_ADDRSTRLEN] = "";
    struct sockaddr_storage pa;
    socklen_t plen = sizeof pa;
    if (!getpeername(fd, (struct sockaddr *)&pa, &plen) && (pa.ss_family == AF_INET || pa.ss_family == AF_INET6))
        uv_ip_name((struct sockaddr *)&pa, peer, sizeof peer);
    return http_fd_conns_open(&s->conns, fd, peer) ? -1 : 0;
}

/* A wsi's end: a counted network connection's frees its place. An HTTP/2
 * stream's wsi has no fd (and its parent is gone by then, so it looks like
 * a network wsi of its own); the listener's fd was never counted. */
static void tls_conn_destroyed(struct lws *wsi) {
    int fd = lws_get_socket_fd(wsi);
    struct http_server *s = lws_context_user(lws_get_context(wsi));
    if (s && fd >= 0 && lws_get_network_wsi(wsi) == wsi) http_fd_conns_close(&s->conns, fd);
}

static int callback_http(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    struct http_conn *c = user;
    switch (reason) {
    case LWS_CALLBACK_FILTER_NETWORK_CONNECTION: /* wsi is the listener's; in, the new socket */
        return tls_conn_admit(lws_context_user(lws_get_context(wsi)), (int)(intptr_t)in);
    case LWS_CALLBACK_WSI_DESTROY:
        tls_conn_destroyed(wsi);
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    case LWS_CALLBACK_ESTABLISHED:
        return on_ws_established(wsi, c);
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return c->stream ? stream_writeable(wsi, c) : 0;
    case LWS_CALLBACK_RECEIVE:
        return 0; /* a watch has nothing to hear from the client */
    case LWS_CALLBACK_CLOSED:
        conn_reset(c);
        return 0;
    case LWS_CALLBACK_HTTP:
        return on_request(wsi, c);
    case LWS_CALLBACK_HTTP_BODY:
        /* "Content-Length: 0": lws reports an empty body after the request was answered */
        if (c->discard || c->dispatched) return 0;
        if (!c->body || c->body_len + len > c->body_expected) return -1;
        memcpy(c->body + c->body_len, in, len);
        c->body_len += len;
        return 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        if (c->dispatched) return 0; /* "Content-Length: 0": answered already */
        if (c->discard) return respond_too_large(wsi, c);
        if (!c->body) return -1;
        c->body[c->body_len] = 0;
        return dispatch_or_wait(wsi, c);
    case LWS_CALLBACK_HTTP_WRITEABLE: {
        if (c->waiting) { /* its turn, once its connection's replies have drained */
            if (out_over(wsi)) return 0; /* asked again when they shrink */
            wait_unlink(c);
            return dispatch(wsi, c);
        }
        if (c->stream) return stream_writeable(wsi, c);
        if (c->hdr_pending) { /* a deferred HTTP/2 reply: its headers first */
            c->hdr_pending = false;
            if (write_headers(wsi, c, c->pend_status, c->pend_ctype)) return -1;
            if (c->out_len == 0 || c->method == HTTP_HEAD) return lws_http_transaction_completed(wsi) ? -1 : 0;
            lws_callback_on_writable(wsi);
            return 0;
        }
        if (!c->out || c->out_sent >= c->out_len) return 0;
        size_t n = c->out_len - c->out_sent;
        size_t most = lws_get_network_wsi(wsi) != wsi ? H2_WRITE_MAX : WRITE_CHUNK;
        if (n > most) n = most;
        bool last = c->out_sent + n == c->out_len;
        /* lws needs LWS_PRE bytes of headroom before what it writes: shift the
         * window over the already-sent bytes, which are no longer needed */
        unsigned char *p = c->out + LWS_PRE + c->out_sent;
        if (lws_write(wsi, p, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) != (int)n) return -1;
        c->out_sent += n;
        out_left(wsi, c, c->out_len - c->out_sent);
        if (!last) {
            lws_callback_on_writable(wsi);
            return 0;
        }
        if (c->close_after) return -1;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL: /* lws frees the user area between keep-alive requests */
    case LWS_CALLBACK_CLOSED_HTTP:
        if (c) conn_reset(c);
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

static const struct lws_protocols protocols[] = {
    {"http", callback_http, sizeof(struct http_conn), 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

int http_server_start(uv_loop_t *loop, const struct http_server_config *cfg, struct http_server **out, char *err,
                      size_t errlen) {
    *out = NULL;
    if (!cfg->handler) {
        snprintf(err, errlen, "http: no handler");
        return -EINVAL;
    }
    struct http_server *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    if (cfg->unix_path && cfg->tls_cert) {
        snprintf(err, errlen, "http: a Unix-domain socket is served with plain HTTP/1.1 only");
        free(s);
        return -EINVAL;
    }
    s->cfg = *cfg;
    if (!s->cfg.bind_addr) s->cfg.bind_addr = "127.0.0.1";
    if (!s->cfg.max_body) s->cfg.max_body = HTTP_DEFAULT_MAX_BODY;
    if (!s->cfg.max_conn_output) s->cfg.max_conn_output = HTTP_DEFAULT_MAX_CONN_OUTPUT;
    if (!s->cfg.max_output) s->cfg.max_output = HTTP_DEFAULT_MAX_OUTPUT;
    if (!s->cfg.max_conns) s->cfg.max_conns = HTTP_DEFAULT_MAX_CONNS;
    if (!s->cfg.max_conns_per_client) s->cfg.max_conns_per_client = HTTP_DEFAULT_MAX_CONNS_PER_CLIENT;
    s->conns.bounds.max = s->cfg.max_conns;
    s->conns.bounds.max_per_client = s->cfg.max_conns_per_client;
    if (!(cfg->tls_cert && cfg->tls_key)) { /* plain HTTP/1.1: served on libuv directly */
        int rc = h1_server_start(loop, &s->cfg, &s->h1, err, errlen);
        if (rc) {
            free(s);
            return rc;
        }
        s->port = h1_server_port(s->h1);
        *out = s;
        return 0;
    }
    s->loops[0] = loop;
    s->flush = malloc(sizeof *s->flush);
    if (!s->flush) {
        free(s);
        return -ENOMEM;
    }
    uv_check_init(loop, s->flush);
    s->flush->data = s;

    lws_set_log_level(LLL_ERR, NULL);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = cfg->port;
    info.iface = s->cfg.bind_addr;
    info.protocols = protocols;
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_DISABLE_IPV6;
    info.foreign_loops = s->loops;
    info.user = s;
    info.max_http_header_data = 16384;
    /* lws 4.1 stages each HTTP/2 frame in this buffer: it must hold a whole
     * frame (H2_WRITE_MAX) or h2 writes come back short */
    info.pt_serv_buf_size = H2_WRITE_MAX + LWS_PRE + 4096;
    info.timeout_secs = 30;
    info.pcontext = &s->ctx;
    if (cfg->tls_cert && cfg->tls_key) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.ssl_cert_filepath = cfg->tls_cert;
        info.ssl_private_key_filepath = cfg->tls_key;
        info.alpn = "h2,http/1.1";
        /* TLS 1.2 at least; on 1.2 only forward-secret AEAD suites (1.3's are all AEAD) */
        info.ssl_options_set = SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 | SSL_OP_CIPHER_SERVER_PREFERENCE;
        info.ssl_cipher_list = HTTP_TLS12_CIPHERS;
        char warn[1024];
        if (tls_cert_check(cfg->tls_cert, cfg->tls_key, warn, sizeof warn))
            fprintf(stderr, "level=warn msg=\"tls: %s\"\n", warn);
    }
    s->ctx = lws_create_context(&info);
    if (!s->ctx) {
        snprintf(err, errlen, "http: cannot listen on %s:%d", s->cfg.bind_addr, cfg->port);
        uv_close((uv_handle_t *)s->flush, flush_closed);
        free(s);
        return -EADDRINUSE;
    }
    struct lws_vhost *vh = lws_get_vhost_by_name(s->ctx, "default");
    s->port = vh ? lws_get_vhost_listen_port(vh) : cfg->port;
    *out = s;
    return 0;
}

int http_server_port(const struct http_server *s) { return s->port; }

void http_server_stats(const struct http_server *s, struct http_server_stats *out) {
    if (s->h1) h1_server_stats(s->h1, out);
    else
        *out = (struct http_server_stats){.output = s->output, .output_peak = s->output_peak,
                                          .conn_output_peak = s->conn_output_peak, .held = s->nwaiting,
                                          .connections = s->conns.bounds.open, .refused = s->conns.bounds.refused};
}

void http_server_stop(struct http_server *s) {
    if (s && s->h1) {
        h1_server_stop(s->h1);
        return;
    }
    if (s && s->ctx && !s->stopping) {
        s->stopping = true;
        lws_context_destroy(s->ctx); /* closes the streams: they leave the dirty list */
    }
    if (s && s->flush) {
        uv_check_stop(s->flush);
        uv_close((uv_handle_t *)s->flush, flush_closed);
        s->flush = NULL;
    }
}

void http_server_free(struct http_server *s) {
    if (!s) return;
    if (s->h1) {
        h1_server_free(s->h1);
        free(s);
        return;
    }
    if (s->flush) { /* never stopped: close it now (the caller runs the loop once more) */
        uv_check_stop(s->flush);
        uv_close((uv_handle_t *)s->flush, flush_closed);
        s->flush = NULL;
    }
    /* with a foreign loop lws finishes in a second call, once the loop has
     * closed its handles; lws clears s->ctx when it is all done */
    if (s->ctx) {
        if (!s->stopping) lws_context_destroy(s->ctx);
        if (s->ctx) lws_context_destroy(s->ctx);
    }
    http_fd_conns_free(&s->conns); /* after lws destroyed every wsi */
    free(s);
}

const char *http_req_arg(const struct http_request *req, const char *key) {
    for (int i = 0; i < req->nargs; i++)
        if (strcmp(req->arg_keys[i], key) == 0) return req->arg_values[i];
    return NULL;
}

bool http_req_arg_bool(const struct http_request *req, const char *key) {
    const char *v = http_req_arg(req, key);
    return v && (!v[0] || !strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1"));
}
