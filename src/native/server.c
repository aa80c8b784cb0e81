/* The native API server: registry, listener, connections and calls
 * (native.h). The transports are in h2.c (gRPC) and yarpc.c (YARPC). */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native_int.h"
#include "pbjson.h"
#include "pbmsg.h"
#include "tlsctx.h"

static const char H2_PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* ---------------------------------------------------------------- codes */

const char *native_code_name(enum native_code c) {
    static const char *names[] = {"OK",          "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
                                  "DEADLINE_EXCEEDED", "NOT_FOUND",    "ALREADY_EXISTS",    "PERMISSION_DENIED",
                                  "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",   "OUT_OF_RANGE",
                                  "UNIMPLEMENTED", "INTERNAL",         "UNAVAILABLE",       "DATA_LOSS",
                                  "UNAUTHENTICATED"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "UNKNOWN";
}

const char *native_code_yarpc(enum native_code c) {
    static const char *names[] = {"",          "cancelled",         "unknown",          "invalid-argument",
                                  "deadline-exceeded", "not-found", "already-exists",   "permission-denied",
                                  "resource-exhausted", "failed-precondition", "aborted", "out-of-range",
                                  "unimplemented", "internal",      "unavailable",      "data-loss",
                                  "unauthenticated"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "unknown";
}

/* As YARPC's HTTP transport maps them. */
int native_code_http(enum native_code c) {
    static const int st[] = {200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401};
    return (unsigned)c < sizeof st / sizeof st[0] ? st[c] : 500;
}

/* ---------------------------------------------------------------- registry */

void native_registry_init(struct native_registry *r) { memset(r, 0, sizeof *r); }

void native_registry_free(struct native_registry *r) {
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&r->by_path, &pos, &k, &v)) free(v);
    strmap_free(&r->by_path);
}

int native_registry_add(struct native_registry *r, const char *service, const struct native_method *m, size_t n,
                        void *ud) {
    for (size_t i = 0; i < n; i++) {
        char key[512];
        if ((size_t)snprintf(key, sizeof key, "%s/%s", service, m[i].name) >= sizeof key) return -EINVAL;
        struct native_entry *e = malloc(sizeof *e);
        void *old = NULL;
        if (!e) return -ENOMEM;
        *e = (struct native_entry){.m = &m[i], .ud = ud};
        if (strmap_put(&r->by_path, key, e, &old)) {
            free(e);
            return -ENOMEM;
        }
        free(old);
    }
    return 0;
}

const struct native_method *native_registry_find(const struct native_registry *r, const char *key, void **ud) {
    char k[512];
    const char *sep = strstr(key, "::");
    if (sep) { /* YARPC: "<service>::<method>" */
        if ((size_t)snprintf(k, sizeof k, "%.*s/%s", (int)(sep - key), key, sep + 2) >= sizeof k) return NULL;
        key = k;
    }
    struct native_entry *e = strmap_get(&r->by_path, key);
    if (!e) return NULL;
    if (ud) *ud = e->ud;
    return e->m;
}

const struct native_method *native_server_find(const struct native_server *s, const char *key, void **ud, char *msg,
                                               size_t msglen) {
    const struct native_method *m = native_registry_find(s->cfg.registry, key, ud);
    if (!m) {
        snprintf(msg, msglen, "%s is not served", key);
        return NULL;
    }
    if (!s->cfg.route) return m;
    size_t n = strcspn(key, "/:"); /* the service: before "/" or "::" */
    char service[512];
    snprintf(service, sizeof service, "%.*s", (int)n, key);
    const char *elsewhere = s->cfg.route(s->cfg.route_ud, service);
    if (!elsewhere) return m;
    snprintf(msg, msglen, "%s is not served on this port: %s", service, elsewhere);
    return NULL;
}

/* ---------------------------------------------------------------- calls */

static void deadline_fired(uv_timer_t *t);

struct native_call *native_call_new(struct native_conn *conn, const struct native_method *m, long long timeout_ms,
                                    const char *caller, const char *procedure) {
    struct native_call *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    struct native_server *s = conn->srv;
    c->srv = s;
    c->conn = conn;
    c->m = m;
    snprintf(c->caller, sizeof c->caller, "%s", caller ? caller : "");
    snprintf(c->procedure, sizeof c->procedure, "%s", procedure ? procedure : "");
    c->t0 = metrics_now_ns();
    c->next = s->calls;
    if (s->calls) s->calls->prev = c;
    s->calls = c;
    s->stats.calls++;
    s->stats.open_calls++;
    uv_timer_init(s->loop, &c->deadline);
    c->deadline.data = c;
    if (timeout_ms >= 0) {
        c->has_deadline = true;
        uv_timer_start(&c->deadline, deadline_fired, (uint64_t)timeout_ms, 0);
    }
    return c;
}

static void call_freed(uv_handle_t *h) {
    struct native_call *c = h->data;
    if (c->req) protobuf_c_message_free_unpacked(c->req, NULL);
    free(c);
}

/* ---------------------------------------------------------------- metrics */

/* Latency buckets, seconds: 0.1 ms to 60 s, as the API server's. */
static const double native_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                        0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10,   60};

static void metrics_start(struct native_server *s) {
    static const char *const counted[] = {"service", "method", "transport", "code"}, *const timed[] = {"service",
                                                                                                       "method"};
    if (!s->cfg.metrics) return;
    s->m_requests = metrics_counter(s->cfg.metrics, "peloton_native_requests_total",
                                    "Calls of the native API's methods, by service, method, transport and gRPC code.",
                                    4, counted);
    s->m_duration = metrics_histogram(s->cfg.metrics, "peloton_native_request_duration_seconds",
                                      "Time from a native call's request to its end (the last reply), by service and "
                                      "method.", 2, timed, native_buckets,
                                      (int)(sizeof native_buckets / sizeof native_buckets[0]));
}

void native_observe(struct native_server *s, const char *procedure, const char *transport, enum native_code code,
                    uint64_t t0) {
    if (!s || !s->m_requests) return;
    /* "<service>/<method>" (gRPC) or "<service>::<method>" (YARPC) */
    char service[NATIVE_PROCEDURE_MAX];
    const char *sep = strstr(procedure, "::"), *method;
    size_t n;
    if (sep) {
        n = (size_t)(sep - procedure);
        method = sep + 2;
    } else {
        sep = strrchr(procedure, '/');
        n = sep ? (size_t)(sep - procedure) : 0;
        method = sep ? sep + 1 : procedure;
    }
    snprintf(service, sizeof service, "%.*s", (int)n, procedure);
    const char *values[] = {service, method, transport, native_code_name(code)};
    metrics_inc(metrics_series(s->m_requests, values));
    if (t0) metrics_observe(metrics_series(s->m_duration, values), (double)(metrics_now_ns() - t0) / 1e9);
}

/* A call from a client (not native_call_internal) ends with code: what the
 * client was told, counted (a call whose deadline passed, or whose client
 * went, ends DEADLINE_EXCEEDED or CANCELLED for it whatever the handler says). */
static void call_observe(struct native_call *c, enum native_code code) {
    if (c->done || !c->srv) return;
    code = c->timed_out ? NC_DEADLINE_EXCEEDED : !c->conn ? NC_CANCELLED : code;
    native_observe(c->srv, c->procedure, native_call_transport(c), code, c->t0);
}

/* The call is over for the handler: unlinked and freed (after its timer closes). */
static void call_finish(struct native_call *c) {
    c->done = true;
    if (c->srv) {
        if (c->prev) c->prev->next = c->next;
        else c->srv->calls = c->next;
        if (c->next) c->next->prev = c->prev;
        c->srv->stats.open_calls--;
    }
    uv_close((uv_handle_t *)&c->deadline, call_freed);
}

/* Arms the server's zero-delay timer that runs the producers' notifications
 * (kick_fired): never from inside the transports, whose state a producer's
 * next send would change under them. */
static void kick_fired(uv_timer_t *t);

static void kick(struct native_server *s) {
    if (!s || s->stopping || s->kick_armed) return;
    s->kick_armed = true;
    uv_timer_start(&s->kick, kick_fired, 0, 0);
}

void native_call_detach(struct native_call *c) {
    c->conn = NULL;
    c->stream = NULL;
    if (c->producer && !c->done) {
        c->kick_gone = true;
        kick(c->srv);
    }
}

void native_call_drained(struct native_call *c, size_t n) {
    if (!c->full || c->done || n > NATIVE_STREAM_LOW) return;
    c->full = false;
    c->kick_writable = true;
    kick(c->srv);
}

/* Tells c's producer what was flagged for it; c may be completed by it. */
static void notify(struct native_call *c) {
    if (c->done || !c->producer) return;
    if (c->kick_gone) {
        c->kick_gone = c->kick_writable = false;
        c->producer(c->producer_ud, c, true);
    } else if (c->kick_writable) {
        c->kick_writable = false;
        c->producer(c->producer_ud, c, false);
    }
}

static void kick_fired(uv_timer_t *t) {
    struct native_server *s = t->data;
    s->kick_armed = false;
    /* a producer may complete its own call (unlinked, freed later: its next
     * pointer stays readable) and send on others (flagging them again: the
     * timer is re-armed for those) */
    struct native_call *next;
    for (struct native_call *c = s->calls; c; c = next) {
        next = c->next;
        if (c->kick_gone || c->kick_writable) notify(c);
    }
}

void native_call_set_producer(struct native_call *c, native_stream_fn fn, void *ud) {
    c->producer = fn;
    c->producer_ud = ud;
    if (!c->conn && !c->done) { /* gone before it registered */
        c->kick_gone = true;
        kick(c->srv);
    }
}

bool native_call_gone(const struct native_call *c) { return (!c->conn && !c->internal) || c->timed_out; }
const char *native_call_transport(const struct native_call *c) { return c->json || !c->stream ? "yarpc" : "grpc"; }
const char *native_call_caller(const struct native_call *c) { return c->caller; }
const char *native_call_method(const struct native_call *c) { return c->m->name; }
void *native_call_app(const struct native_call *c) { return c->srv ? c->srv->cfg.app : NULL; }
const char *native_call_peer_cn(const struct native_call *c) { return c->conn ? c->conn->peer_cn : NULL; }
const char *native_call_peer_orgs(const struct native_call *c) { return c->conn ? c->conn->peer_orgs : NULL; }

/* The status on the wire (when the client is still there). */
static void send_status(struct native_call *c, enum native_code code, const char *msg) {
    if (!c->conn) return;
    if (c->srv && code != NC_OK) c->srv->stats.failed++;
    if (c->conn->proto == PROTO_H2) grpc_h2_call_status(c, code, msg);
    else h1_call_status(c, code, msg);
}

static void deadline_fired(uv_timer_t *t) {
    struct native_call *c = t->data;
    if (c->done || c->timed_out) return;
    send_status(c, NC_DEADLINE_EXCEEDED, "deadline exceeded");
    c->timed_out = true;
    native_call_detach(c);
}

void native_call_dispatch(struct native_call *c, void *ud, ProtobufCMessage *req) {
    c->req = req;
    c->m->fn(ud, c, req);
}

/* Hands an internal call's outcome to its caller, once. */
static bool internal_done(struct native_call *c, enum native_code code, const char *msg, const ProtobufCMessage *resp) {
    if (!c->internal) return false;
    native_internal_fn fn = c->internal;
    c->internal = NULL;
    fn(c->internal_ud, code, msg, resp);
    call_finish(c);
    return true;
}

void native_call_reply(struct native_call *c, const ProtobufCMessage *resp) {
    if (c->done || internal_done(c, NC_OK, "", resp)) return;
    call_observe(c, NC_OK);
    if (c->conn && resp && c->conn->proto == PROTO_H1 && c->json) {
        char err[256];
        size_t n;
        char *txt = pbjson_dump(resp, &n, err, sizeof err);
        if (!txt) send_status(c, NC_INTERNAL, err);
        else h1_call_reply(c, (const uint8_t *)txt, n);
        free(txt);
    } else if (c->conn && resp) {
        size_t n;
        uint8_t *buf = pbmsg_pack(resp, &n);
        if (!buf) send_status(c, NC_INTERNAL, "out of memory");
        else if (c->conn->proto == PROTO_H2) grpc_h2_call_reply(c, buf, n, true);
        else h1_call_reply(c, buf, n);
        free(buf);
    }
    call_finish(c);
}

void native_call_reply_packed(struct native_call *c, const ProtobufCMessage *resp, const uint8_t *packed, size_t len) {
    if (c->done || c->internal || !c->conn || (c->conn->proto == PROTO_H1 && c->json)) {
        native_call_reply(c, resp);
        return;
    }
    call_observe(c, NC_OK);
    if (c->conn->proto == PROTO_H2) grpc_h2_call_reply(c, packed, len, true);
    else h1_call_reply(c, packed, len);
    call_finish(c);
}

void native_call_fail(struct native_call *c, enum native_code code, const char *fmt, ...) {
    if (c->done) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (internal_done(c, code, msg, NULL)) return;
    call_observe(c, code);
    send_status(c, code, msg);
    call_finish(c);
}

int native_call_send(struct native_call *c, const ProtobufCMessage *m) {
    if (c->done || !c->conn || !c->stream || c->conn->proto != PROTO_H2) return -EPIPE;
    size_t n;
    uint8_t *buf = pbmsg_pack(m, &n);
    if (!buf) return -ENOMEM;
    bool was_full = c->full;
    grpc_h2_call_reply(c, buf, n, false);
    free(buf);
    if (!c->conn || !c->stream) return -EPIPE;
    size_t waiting = grpc_h2_call_buffered(c);
    if (was_full && waiting > NATIVE_STREAM_MAX) { /* the producer did not wait: the stream ends, bounded */
        char msg[128];
        snprintf(msg, sizeof msg, "the client does not read: %zu bytes of replies wait for it", waiting);
        send_status(c, NC_RESOURCE_EXHAUSTED, msg);
        return -EPIPE;
    }
    if (waiting < NATIVE_STREAM_HIGH) return 0;
    c->full = true;
    return 1;
}

void native_call_end(struct native_call *c, enum native_code code, const char *msg) {
    if (c->done || internal_done(c, code, msg ? msg : "", NULL)) return;
    call_observe(c, code);
    send_status(c, code, msg ? msg : "");
    call_finish(c);
}

void native_call_internal(struct native_call *outer, const char *key, ProtobufCMessage *req, native_internal_fn done,
                          void *ud) {
    struct native_server *s = outer->srv;
    void *mud = NULL;
    const struct native_method *m = s && !s->stopping ? native_registry_find(s->cfg.registry, key, &mud) : NULL;
    struct native_call *c = m && m->in == req->descriptor && !m->server_stream ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        protobuf_c_message_free_unpacked(req, NULL);
        done(ud, !s || s->stopping ? NC_UNAVAILABLE : m ? NC_INTERNAL : NC_UNIMPLEMENTED, key, NULL);
        return;
    }
    /* as native_call_new, without a connection: the call is in the server's list */
    c->srv = s;
    c->m = m;
    c->internal = done;
    c->internal_ud = ud;
    snprintf(c->caller, sizeof c->caller, "%s", outer->caller);
    c->next = s->calls;
    if (s->calls) s->calls->prev = c;
    s->calls = c;
    s->stats.open_calls++;
    uv_timer_init(s->loop, &c->deadline);
    c->deadline.data = c;
    native_call_dispatch(c, mud, req);
}

bool native_auth_ok(const struct native_server *s, const char *authz) {
    const char *t = s->cfg.token;
    if (s->cfg.authorize || !t || !*t) return true; /* authorize decides, once the method is known */
    size_t n = strlen(t), m = strlen(authz);
    if (m != n + 7 || strncmp(authz, "Bearer ", 7)) return false;
    unsigned char diff = 0; /* every byte compared: the time tells nothing of the token */
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(authz[7 + i] ^ t[i]);
    return diff == 0;
}

/* ---------------------------------------------------------------- connections */

struct write_req {
    uv_write_t w;
    struct native_conn *conn;
    size_t len;
    char data[];
};

static void conn_closed(uv_handle_t *h) {
    struct native_conn *conn = h->data;
    free(conn->in);
    if (conn->ssl) SSL_free(conn->ssl);
    free(conn->peer_cn);
    free(conn->peer_orgs);
    free(conn);
}

void native_conn_close(struct native_conn *conn) {
    if (conn->closing) return;
    conn->closing = true;
    /* the calls in flight lose their client */
    if (conn->srv) {
        for (struct native_call *c = conn->srv->calls; c; c = c->next)
            if (c->conn == conn) native_call_detach(c);
        struct native_server *s = conn->srv;
        if (conn->prev) conn->prev->next = conn->next;
        else s->conns = conn->next;
        if (conn->next) conn->next->prev = conn->prev;
        s->stats.open_conns--;
    }
    if (conn->proto == PROTO_H2) grpc_h2_conn_free(conn);
    else h1_conn_free(conn);
    uv_close((uv_handle_t *)&conn->tcp, conn_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

void native_conn_pause(struct native_conn *conn, bool pause) {
    if (conn->closing) return;
    if (pause && conn->reading) {
        uv_read_stop((uv_stream_t *)&conn->tcp);
        conn->reading = false;
    } else if (!pause && !conn->reading && conn->write_pending <= NATIVE_MAX_OUTPUT) {
        uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
        conn->reading = true;
    }
}

static void on_written(uv_write_t *w, int status) {
    struct write_req *r = (struct write_req *)w;
    struct native_conn *conn = r->conn;
    conn->write_pending -= r->len;
    free(r);
    if (conn->closing) return;
    if (status) {
        native_conn_close(conn);
        return;
    }
    if (conn->proto == PROTO_H2) {
        grpc_h2_conn_flush(conn); /* what waited for the socket */
        if (!conn->closing && conn->write_pending <= NATIVE_MAX_OUTPUT) native_conn_pause(conn, false);
    } else if (!conn->h1_call && conn->write_pending == 0) {
        if (conn->h1_close) native_conn_close(conn);
        else h1_conn_resume(conn);
    }
}

static void conn_write_raw(struct native_conn *conn, const void *p, size_t n);

/* Sends what OpenSSL wrote into the connection's output BIO. */
static void tls_flush(struct native_conn *conn) {
    BIO *w = SSL_get_wbio(conn->ssl);
    char buf[16384];
    int k;
    while (!conn->closing && BIO_ctrl_pending(w) > 0 && (k = BIO_read(w, buf, sizeof buf)) > 0)
        conn_write_raw(conn, buf, (size_t)k);
}

void native_conn_write(struct native_conn *conn, const void *p, size_t n) {
    if (conn->closing || !n) return;
    if (!conn->ssl) {
        conn_write_raw(conn, p, n);
        return;
    }
    if (SSL_write(conn->ssl, p, (int)n) <= 0) { /* memory BIOs: only a broken session fails */
        ERR_clear_error();
        native_conn_close(conn);
        return;
    }
    tls_flush(conn);
}

static void conn_write_raw(struct native_conn *conn, const void *p, size_t n) {
    if (conn->closing || !n) return;
    struct write_req *r = malloc(sizeof *r + n);
    if (!r) {
        native_conn_close(conn);
        return;
    }
    r->conn = conn;
    r->len = n;
    memcpy(r->data, p, n);
    uv_buf_t b = uv_buf_init(r->data, (unsigned)n);
    conn->write_pending += n;
    if (uv_write(&r->w, (uv_stream_t *)&conn->tcp, &b, 1, on_written)) {
        conn->write_pending -= n;
        free(r);
        native_conn_close(conn);
        return;
    }
    if (conn->write_pending > NATIVE_MAX_OUTPUT) native_conn_pause(conn, true); /* a client that does not read */
}

/* The first bytes tell the protocol: HTTP/2's preface, else HTTP/1.1. */
static int sniff(struct native_conn *conn, const uint8_t *p, size_t n, size_t *used) {
    size_t k = sizeof H2_PREFACE - 1 - conn->nsniff;
    if (k > n) k = n;
    memcpy(conn->sniff + conn->nsniff, p, k);
    conn->nsniff += k;
    *used = k;
    enum native_serve serve = conn->srv ? conn->srv->cfg.serve : NATIVE_SERVE_BOTH;
    if (memcmp(conn->sniff, H2_PREFACE, conn->nsniff)) {
        conn->proto = PROTO_H1;
        return h1_conn_recv(conn, conn->sniff, conn->nsniff);
    }
    if (conn->nsniff < sizeof H2_PREFACE - 1) return 0;
    if (serve == NATIVE_SERVE_YARPC) return -1; /* a YARPC port: HTTP/1.1 only */
    conn->proto = PROTO_H2;
    if (grpc_h2_conn_start(conn)) return -1;
    return grpc_h2_conn_recv(conn, conn->sniff, conn->nsniff);
}

/* Plain bytes of the connection (after TLS, if any): 0, or -1 to close it. */
static int conn_feed(struct native_conn *conn, const uint8_t *p, size_t n) {
    size_t used = 0;
    int rc = 0;
    if (conn->proto == PROTO_UNKNOWN && n) {
        rc = sniff(conn, p, n, &used);
        p += used;
        n -= used;
    }
    if (!rc && n && !conn->closing) {
        if (conn->proto == PROTO_H2) rc = grpc_h2_conn_recv(conn, p, n);
        else if (conn->proto == PROTO_H1) rc = h1_conn_recv(conn, p, n);
    }
    return rc;
}

/* Ciphertext in: the handshake goes on, then what it decrypts is fed. */
static int tls_recv(struct native_conn *conn, const uint8_t *p, size_t n) {
    if (BIO_write(SSL_get_rbio(conn->ssl), p, (int)n) != (int)n) return -1;
    int rc = 0;
    if (!conn->tls_up) {
        int r = SSL_do_handshake(conn->ssl);
        if (r == 1) {
            conn->tls_up = true;
            http_tls_peer(conn->ssl, &conn->peer_cn, &conn->peer_orgs);
        } else if (SSL_get_error(conn->ssl, r) != SSL_ERROR_WANT_READ) {
            rc = -1;
        }
    }
    uint8_t buf[16384];
    while (!rc && conn->tls_up && !conn->closing) {
        int k = SSL_read(conn->ssl, buf, sizeof buf);
        if (k > 0) {
            rc = conn_feed(conn, buf, (size_t)k);
            continue;
        }
        int e = SSL_get_error(conn->ssl, k);
        if (e != SSL_ERROR_WANT_READ) rc = -1; /* close_notify, or a broken record */
        break;
    }
    ERR_clear_error();
    if (!conn->closing) tls_flush(conn); /* the handshake's answers */
    return rc;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    struct native_conn *conn = st->data;
    if (nread < 0) {
        free(buf->base);
        native_conn_close(conn);
        return;
    }
    int rc = 0;
    if (nread > 0)
        rc = conn->ssl ? tls_recv(conn, (const uint8_t *)buf->base, (size_t)nread)
                       : conn_feed(conn, (const uint8_t *)buf->base, (size_t)nread);
    free(buf->base);
    if (rc && !conn->closing) native_conn_close(conn);
}

static void on_connection(uv_stream_t *l, int status) {
    struct native_server *s = l->data;
    if (status) return;
    struct native_conn *conn = calloc(1, sizeof *conn);
    if (!conn) return;
    uv_tcp_init(s->loop, &conn->tcp);
    conn->tcp.data = conn;
    if (uv_accept(l, (uv_stream_t *)&conn->tcp)) {
        uv_close((uv_handle_t *)&conn->tcp, conn_closed);
        return;
    }
    if (s->stats.open_conns >= s->cfg.max_conns) { /* over the bound: closed at once */
        uv_close((uv_handle_t *)&conn->tcp, conn_closed);
        return;
    }
    if (s->cfg.tls) {
        BIO *r = BIO_new(BIO_s_mem()), *w = BIO_new(BIO_s_mem());
        conn->ssl = r && w ? SSL_new(s->cfg.tls) : NULL;
        if (!conn->ssl) {
            BIO_free(r);
            BIO_free(w);
            uv_close((uv_handle_t *)&conn->tcp, conn_closed);
            return;
        }
        SSL_set_bio(conn->ssl, r, w);
        SSL_set_accept_state(conn->ssl);
    }
    uv_tcp_nodelay(&conn->tcp, 1);
    conn->srv = s;
    conn->next = s->conns;
    if (s->conns) s->conns->prev = conn;
    s->conns = conn;
    s->stats.open_conns++;
    s->stats.connections++;
    conn->reading = true;
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
}

static void kick_closed(uv_handle_t *h) { free(h->data); }

/* A server that could not listen: its timer closes after its listener, then it is freed. */
static void listener_closed(uv_handle_t *h) {
    struct native_server *s = h->data;
    uv_close((uv_handle_t *)&s->kick, kick_closed);
}

int native_server_start(uv_loop_t *loop, const struct native_config *cfg, struct native_server **out, char *err,
                        size_t errlen) {
    struct native_server *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->loop = loop;
    s->cfg = *cfg;
    if (!s->cfg.bind_addr) s->cfg.bind_addr = "127.0.0.1";
    if (!s->cfg.max_message) s->cfg.max_message = NATIVE_DEFAULT_MAX_MESSAGE;
    if (!s->cfg.max_streams) s->cfg.max_streams = NATIVE_DEFAULT_MAX_STREAMS;
    if (!s->cfg.max_conns) s->cfg.max_conns = NATIVE_DEFAULT_MAX_CONNS;
    metrics_start(s);
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(s->cfg.bind_addr, cfg->port, (struct sockaddr_in *)&addr);
    if (rc) rc = uv_ip6_addr(s->cfg.bind_addr, cfg->port, (struct sockaddr_in6 *)&addr);
    if (!rc) rc = uv_tcp_init(loop, &s->listener);
    if (rc) {
        snprintf(err, errlen, "native: bad bind address %s: %s", s->cfg.bind_addr, uv_strerror(rc));
        free(s);
        return rc;
    }
    s->listener.data = s;
    uv_timer_init(loop, &s->kick);
    s->kick.data = s;
    if ((rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0)) ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection))) {
        snprintf(err, errlen, "native: cannot listen on %s:%d: %s", s->cfg.bind_addr, cfg->port, uv_strerror(rc));
        uv_close((uv_handle_t *)&s->listener, listener_closed);
        return rc;
    }
    struct sockaddr_storage got;
    int len = sizeof got;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&got, &len);
    s->port = ntohs(((struct sockaddr_in *)&got)->sin_port);
    *out = s;
    return 0;
}

int native_server_port(const struct native_server *s) { return s->port; }

static void server_stop(struct native_server *s, bool discard);
void native_server_stop(struct native_server *s) { server_stop(s, false); }

static void server_stop(struct native_server *s, bool discard) {
    if (s->stopping) return;
    s->stopping = true;
    uv_close((uv_handle_t *)&s->listener, NULL);
    while (s->conns) native_conn_close(s->conns);
    /* producers hear now, before the caller frees what they stream from */
    struct native_call *next;
    for (struct native_call *c = s->calls; c; c = next) {
        next = c->next;
        if (c->producer && !c->done) {
            c->kick_gone = true;
            notify(c);
        }
    }
    if (!discard) uv_close((uv_handle_t *)&s->kick, NULL);
    for (struct native_call *c = s->calls; c; c = c->next) {
        uv_timer_stop(&c->deadline);
        c->srv = NULL;
    }
    s->calls = NULL;
}

void native_server_free(struct native_server *s) { free(s); }

void native_server_discard(struct native_server *s) {
    server_stop(s, true);
    uv_close((uv_handle_t *)&s->kick, kick_closed); /* closes after the listener; its callback frees s */
}

void native_server_stats(const struct native_server *s, struct native_stats *out) { *out = s->stats; }
