/* gRPC over HTTP/2 (cleartext, prior knowledge) on nghttp2: one
 * nghttp2_session per connection, fed from libuv reads and drained into
 * libuv writes; a stream per call. nghttp2 does HTTP/2 itself (framing,
 * HPACK, flow control: it sends WINDOW_UPDATEs as we consume DATA, and sends
 * our DATA only within the peer's windows); this file does gRPC: the request
 * headers, the message deframing (grpc_frame.h), the response headers, the
 * length-prefixed replies and the grpc-status / grpc-message trailers.
 *
 * A request refused before its handler runs (unknown method, oversize or
 * malformed message, bad headers) gets a Trailers-Only response: one HEADERS
 * frame with :status 200, content-type and the status, ending the stream;
 * DATA the client keeps sending on it is dropped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native_int.h"
#include "pbmsg.h"

#define H2_WINDOW (1u << 20)        /* each stream's receive window */
#define H2_CONN_WINDOW (16u << 20)  /* the connection's */

struct h2_stream {
    struct h2_stream *prev, *next; /* the connection's open streams */
    int32_t id;
    struct native_conn *conn;
    struct grpc_deframer df;
    char method[8], path[256], ctype[64], timeout[16], encoding[32], ua[128], authz[1024];
    size_t hdr_bytes;
    bool hdr_bad;     /* a header value over its field: refused */
    bool answered;    /* response headers (or Trailers-Only) submitted */
    bool finished;    /* the status is decided: trailers follow the output */
    bool deferred;    /* the data source waits for output */
    bool trailers_sent;
    bool client_done; /* the client ended its side (END_STREAM) */
    bool early;       /* being decided at its headers (start_request) */
    bool held;        /* refused at its headers: the answer waits for the client's END_STREAM */
    size_t dropped;   /* bytes of DATA received for it since */
    uint8_t *req;     /* the request message */
    size_t req_len;
    bool has_req;
    const struct native_method *m;
    void *ud;
    struct native_call *call;
    uint8_t *out;     /* length-prefixed replies not yet taken by nghttp2 */
    size_t out_len, out_off;
    enum native_code status;
    char status_msg[512];
};

static void stream_free(struct h2_stream *s) {
    if (s->prev) s->prev->next = s->next;
    else s->conn->streams = s->next;
    if (s->next) s->next->prev = s->prev;
    grpc_deframer_free(&s->df);
    free(s->req);
    free(s->out);
    free(s);
}

/* grpc-message: percent-encoded outside printable ASCII (and '%'). */
static void pct_encode(const char *in, char *out, size_t cap) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < cap; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') out[o++] = (char)*p;
        else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = 0;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

static ssize_t data_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *source, void *ud);

static void submit_trailers(nghttp2_session *session, struct h2_stream *s) {
    char code[8], msg[1600];
    snprintf(code, sizeof code, "%d", (int)s->status);
    pct_encode(s->status_msg, msg, sizeof msg);
    nghttp2_nv tr[2] = {NV("grpc-status", code), NV("grpc-message", msg)};
    nghttp2_submit_trailer(session, s->id, tr, msg[0] ? 2 : 1);
    s->trailers_sent = true;
}

static ssize_t data_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *source, void *ud) {
    (void)id;
    (void)ud;
    struct h2_stream *s = source->ptr;
    size_t avail = s->out_len - s->out_off, k = avail < length ? avail : length;
    memcpy(buf, s->out + s->out_off, k);
    s->out_off += k;
    if (s->call && k) native_call_drained(s->call, s->out_len - s->out_off); /* its producer may send again */
    if (s->out_off == s->out_len) {
        s->out_off = s->out_len = 0;
        if (s->finished) {
            *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
            submit_trailers(session, s);
            return (ssize_t)k;
        }
        if (!k) {
            s->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
    }
    return (ssize_t)k;
}

/* Response headers with a data source (the replies, then trailers). */
static void start_response(struct h2_stream *s) {
    nghttp2_nv h[2] = {NV(":status", "200"), NV("content-type", "application/grpc")};
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = data_read};
    nghttp2_submit_response(s->conn->h2, s->id, h, 2, &dp);
    s->answered = true;
}

static void trailers_only(struct h2_stream *s) {
    char c[8], m[1600];
    snprintf(c, sizeof c, "%d", (int)s->status);
    pct_encode(s->status_msg, m, sizeof m);
    nghttp2_nv h[4] = {NV(":status", "200"), NV("content-type", "application/grpc"), NV("grpc-status", c),
                       NV("grpc-message", m)};
    nghttp2_submit_response(s->conn->h2, s->id, h, m[0] ? 4 : 3, NULL);
    s->answered = true;
    s->trailers_sent = true;
    s->held = false;
}

/* The status: as trailers after the output, or Trailers-Only when nothing
 * was sent. A call refused at its headers (unknown method, no token) is
 * answered once its request has come (END_STREAM), or once more than a
 * message's worth of it has: answered earlier, its stream would be reset to
 * stop the message on its way (on_frame_send), and some clients (libcurl
 * 7.88) lose the answer with the stream. */
static void stream_status(struct h2_stream *s, enum native_code code, const char *msg) {
    if (s->finished) return;
    s->finished = true;
    s->status = code;
    snprintf(s->status_msg, sizeof s->status_msg, "%s", msg ? msg : "");
    if (!s->answered && s->early && !s->client_done) {
        s->held = true;
    } else if (!s->answered) {
        trailers_only(s);
    } else if (s->deferred) {
        s->deferred = false;
        nghttp2_session_resume_data(s->conn->h2, s->id);
    }
    if (s->conn->srv && code != NC_OK && !s->call) s->conn->srv->stats.failed++;
}

/* A reply that is not gRPC at all (wrong method or content type). */
static void stream_http_error(struct h2_stream *s, const char *status) {
    nghttp2_nv h[2] = {NV(":status", status), NV("content-type", "text/plain")};
    nghttp2_submit_response(s->conn->h2, s->id, h, 2, NULL);
    s->answered = s->finished = s->trailers_sent = true;
}

void grpc_h2_call_reply(struct native_call *c, const uint8_t *msg, size_t len, bool last) {
    struct h2_stream *s = c->stream;
    if (!s || s->finished) return;
    if (s->out_off > s->out_len - s->out_off) { /* more taken than waiting: move the rest down (amortized) */
        memmove(s->out, s->out + s->out_off, s->out_len - s->out_off);
        s->out_len -= s->out_off;
        s->out_off = 0;
    }
    uint8_t *o = realloc(s->out, s->out_len + GRPC_PREFIX_LEN + len);
    if (!o) {
        stream_status(s, NC_INTERNAL, "out of memory");
    } else {
        s->out = o;
        grpc_frame_prefix(s->out + s->out_len, len);
        memcpy(s->out + s->out_len + GRPC_PREFIX_LEN, msg, len);
        s->out_len += GRPC_PREFIX_LEN + len;
        if (!s->answered) start_response(s);
        if (last) stream_status(s, NC_OK, "");
        else if (s->deferred) {
            s->deferred = false;
            nghttp2_session_resume_data(s->conn->h2, s->id);
        }
    }
    if (last || s->finished) {
        s->call = NULL;
        c->stream = NULL;
    }
    grpc_h2_conn_flush(s->conn);
}

size_t grpc_h2_call_buffered(const struct native_call *c) {
    return c->stream ? c->stream->out_len - c->stream->out_off : 0;
}

void grpc_h2_call_status(struct native_call *c, enum native_code code, const char *msg) {
    struct h2_stream *s = c->stream;
    if (!s) return;
    stream_status(s, code, msg);
    s->call = NULL;
    c->stream = NULL;
    grpc_h2_conn_flush(s->conn);
}

/* ---------------------------------------------------------------- requests */

/* Headers complete: the method must be served and the headers sane. */
static void start_request(struct h2_stream *s) {
    struct native_server *srv = s->conn->srv;
    if (!srv) return;
    s->early = true; /* a refusal below waits for the request (stream_status) */
    if (s->hdr_bad) {
        stream_status(s, NC_INTERNAL, "a request header is too long");
        return;
    }
    if (strcmp(s->method, "POST")) {
        stream_http_error(s, "405");
        return;
    }
    if (strncmp(s->ctype, "application/grpc", 16) || (s->ctype[16] && s->ctype[16] != '+' && s->ctype[16] != ';')) {
        stream_http_error(s, "415");
        return;
    }
    if (!native_auth_ok(srv, s->authz)) {
        stream_status(s, NC_UNAUTHENTICATED, "a bearer token is required (authorization metadata)");
        return;
    }
    if (s->encoding[0] && strcmp(s->encoding, "identity")) {
        stream_status(s, NC_UNIMPLEMENTED, "grpc-encoding is not supported (identity only)");
        return;
    }
    if (s->timeout[0] && grpc_timeout_ms(s->timeout) < 0) {
        stream_status(s, NC_INTERNAL, "malformed grpc-timeout");
        return;
    }
    char nmsg[400];
    snprintf(nmsg, sizeof nmsg, "method %s is not served", s->path);
    s->m = s->path[0] == '/' ? native_server_find(srv, s->path + 1, &s->ud, nmsg, sizeof nmsg) : NULL;
    if (!s->m) {
        stream_status(s, NC_UNIMPLEMENTED, nmsg);
        return;
    }
    if (srv->cfg.authorize) {
        char msg[512];
        int code = srv->cfg.authorize(srv->cfg.authorize_ud, s->authz, s->conn->peer_cn, s->conn->peer_orgs,
                                      s->path + 1, msg, sizeof msg);
        if (code != NC_OK) {
            native_observe(srv, s->path + 1, "grpc", (enum native_code)code, 0);
            stream_status(s, (enum native_code)code, msg);
            return;
        }
    }
    s->early = false;
    grpc_deframer_init(&s->df, srv->cfg.max_message, 1);
}

/* The client finished sending: run the handler with the one message. */
static void end_request(struct h2_stream *s) {
    if (s->finished || !s->m || !s->conn->srv) return;
    struct native_server *srv = s->conn->srv;
    if (grpc_deframer_partial(&s->df)) {
        native_observe(srv, s->path + 1, "grpc", NC_INTERNAL, 0);
        stream_status(s, NC_INTERNAL, "the request ended inside a message (a truncated or mis-sized frame)");
        return;
    }
    if (!s->has_req) {
        native_observe(srv, s->path + 1, "grpc", NC_INTERNAL, 0);
        stream_status(s, NC_INTERNAL, "no request message");
        return;
    }
    char err[256];
    ProtobufCMessage *req = pbmsg_unpack(s->m->in, s->req, s->req_len, err, sizeof err);
    if (!req) {
        native_observe(srv, s->path + 1, "grpc", NC_INVALID_ARGUMENT, 0);
        stream_status(s, NC_INVALID_ARGUMENT, err);
        return;
    }
    struct native_call *c =
        native_call_new(s->conn, s->m, s->timeout[0] ? grpc_timeout_ms(s->timeout) : -1, s->ua, s->path + 1);
    if (!c) {
        protobuf_c_message_free_unpacked(req, NULL);
        stream_status(s, NC_INTERNAL, "out of memory");
        return;
    }
    c->stream = s;
    s->call = c;
    native_call_dispatch(c, s->ud, req);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
    struct native_conn *conn = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    struct h2_stream *s = calloc(1, sizeof *s);
    if (!s) return NGHTTP2_ERR_CALLBACK_FAILURE;
    s->id = frame->hd.stream_id;
    s->conn = conn;
    s->next = conn->streams;
    if (conn->streams) conn->streams->prev = s;
    conn->streams = s;
    nghttp2_session_set_stream_user_data(session, s->id, s);
    return 0;
}

static void copy_hdr(struct h2_stream *s, char *dst, size_t cap, const uint8_t *v, size_t n) {
    if (n >= cap) {
        s->hdr_bad = true;
        return;
    }
    memcpy(dst, v, n);
    dst[n] = 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    (void)flags;
    (void)ud;
    struct h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* trailers from the client are ignored */
    s->hdr_bytes += namelen + valuelen + 32;
    if (s->hdr_bytes > NATIVE_MAX_HEAD) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
#define IS(lit) (namelen == sizeof lit - 1 && !memcmp(name, lit, namelen))
    if (IS(":method")) copy_hdr(s, s->method, sizeof s->method, value, valuelen);
    else if (IS(":path")) copy_hdr(s, s->path, sizeof s->path, value, valuelen);
    else if (IS("content-type")) copy_hdr(s, s->ctype, sizeof s->ctype, value, valuelen);
    else if (IS("grpc-timeout")) copy_hdr(s, s->timeout, sizeof s->timeout, value, valuelen);
    else if (IS("grpc-encoding")) copy_hdr(s, s->encoding, sizeof s->encoding, value, valuelen);
    else if (IS("user-agent")) snprintf(s->ua, sizeof s->ua, "%.*s", (int)valuelen, (const char *)value);
    else if (IS("authorization")) copy_hdr(s, s->authz, sizeof s->authz, value, valuelen);
#undef IS
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *ud) {
    (void)flags;
    (void)ud;
    struct h2_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (s && s->held && (s->dropped += len) > (s->conn->srv ? s->conn->srv->cfg.max_message + GRPC_PREFIX_LEN : 0))
        trailers_only(s); /* more than a message: answered now, and told to stop (on_frame_send) */
    if (!s || s->finished || !s->m) return 0; /* refused already: dropped */
    while (len) {
        long used = grpc_deframer_feed(&s->df, data, len);
        if (used < 0) {
            char msg[160];
            if (used == GRPC_FRAME_TOO_LARGE) {
                snprintf(msg, sizeof msg, "request message larger than %zu bytes", s->df.max_message);
                stream_status(s, NC_RESOURCE_EXHAUSTED, msg);
            } else if (used == GRPC_FRAME_COMPRESSED) {
                stream_status(s, NC_INTERNAL, "compressed flag set without a grpc-encoding (or not 0 or 1)");
            } else if (used == GRPC_FRAME_TOO_MANY) {
                stream_status(s, NC_INTERNAL, "more than one request message for a unary method");
            } else {
                stream_status(s, NC_RESOURCE_EXHAUSTED, "out of memory");
            }
            return 0;
        }
        data += used;
        len -= (size_t)used;
        size_t n;
        uint8_t *m = grpc_deframer_take(&s->df, &n);
        if (m) {
            s->req = m;
            s->req_len = n;
            s->has_req = true;
        }
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
    (void)ud;
    struct h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) start_request(s);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        s->client_done = true;
        if (s->held) trailers_only(s);
        end_request(s);
    }
    return 0;
}

/* Our side ended (the status went out) while the client is still sending (a
 * refused oversize request, say): RST_STREAM NO_ERROR tells it to stop, as
 * gRPC servers do, and frees the stream now instead of when it finishes. */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
    (void)ud;
    if (frame->hd.type != NGHTTP2_HEADERS || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    struct h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s && !s->client_done) nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *ud) {
    (void)error_code;
    (void)ud;
    struct h2_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (!s) return 0;
    nghttp2_session_set_stream_user_data(session, id, NULL);
    if (s->call) native_call_detach(s->call); /* reset by the client: the handler finishes unheard */
    stream_free(s);
    return 0;
}

int grpc_h2_conn_start(struct native_conn *conn) {
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb)) return -1;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    int rc = nghttp2_session_server_new(&conn->h2, cb, conn);
    nghttp2_session_callbacks_del(cb);
    if (rc) return -1;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, conn->srv->cfg.max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, NATIVE_MAX_HEAD},
    };
    if (nghttp2_submit_settings(conn->h2, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) ||
        nghttp2_session_set_local_window_size(conn->h2, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW))
        return -1;
    return 0;
}

int grpc_h2_conn_recv(struct native_conn *conn, const uint8_t *p, size_t n) {
    conn->in_recv = true;
    ssize_t rv = nghttp2_session_mem_recv(conn->h2, p, n);
    conn->in_recv = false;
    if (rv < 0) return -1;
    grpc_h2_conn_flush(conn);
    return 0;
}

void grpc_h2_conn_flush(struct native_conn *conn) {
    if (conn->in_recv || conn->closing || !conn->h2) return;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    /* what nghttp2 has to send, in one write, while the socket keeps up */
    while (conn->write_pending + len <= NATIVE_MAX_OUTPUT) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(conn->h2, &data);
        if (n < 0) {
            free(buf);
            native_conn_close(conn);
            return;
        }
        if (!n) break;
        if (len + (size_t)n > cap) {
            size_t nc = cap ? cap * 2 : 16384;
            while (nc < len + (size_t)n) nc *= 2;
            uint8_t *b = realloc(buf, nc);
            if (!b) {
                free(buf);
                native_conn_close(conn);
                return;
            }
            buf = b;
            cap = nc;
        }
        memcpy(buf + len, data, (size_t)n);
        len += (size_t)n;
    }
    if (len) native_conn_write(conn, buf, len);
    free(buf);
    if (!conn->closing && !nghttp2_session_want_read(conn->h2) && !nghttp2_session_want_write(conn->h2) &&
        !conn->write_pending)
        native_conn_close(conn); /* GOAWAY exchanged, nothing left */
}

void grpc_h2_conn_free(struct native_conn *conn) {
    if (!conn->h2) return;
    nghttp2_session_del(conn->h2); /* calls no callbacks: our streams go here */
    conn->h2 = NULL;
    while (conn->streams) {
        if (conn->streams->call) native_call_detach(conn->streams->call);
        stream_free(conn->streams);
    }
}
