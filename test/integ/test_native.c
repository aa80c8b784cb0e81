/* The native server's gRPC transport with test handlers, driven by an HTTP/2
 * client built on nghttp2's client session over a plain socket: many
 * streams on one connection, server streaming past the flow-control windows,
 * a deadline that passes while the handler holds the call, a client that
 * resets its stream, and calls completed after their client left. */
#include <arpa/inet.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <uv.h>

#include "grpc_frame.h"
#include "native.h"
#include "pbmsg.h"
#include "peloton_c/test/alltypes.pb-c.h"
#include "test.h"

typedef PelotonC__Test__AllTypes AllTypes;
#define AT_DESC (&peloton_c__test__all_types__descriptor)

/* ---- the server, on its own thread ---- */

struct srv {
    uv_loop_t loop;
    uv_async_t stop, finish_held;
    uv_thread_t thread;
    struct native_registry reg;
    struct native_server *s;
    int port;
    struct native_call *held[8]; /* calls the Hang handler keeps */
    int nheld;
    int late_done;                /* held calls completed after their client left */
    int repeat_sent;              /* messages the last Repeat got accepted */
    int repeat_gone;              /* Repeat producers told their client left */
    struct native_stats stats;    /* the server's, when it stopped */
};

static void h_echo(void *ud, struct native_call *c, const ProtobufCMessage *req) {
    (void)ud;
    native_call_reply(c, req);
}

/* Repeat: a flow-controlled producer of i32 messages, each with u32 bytes
 * of text and its index in i32; it waits when the stream is full and stops
 * when its client goes. */
struct repeat {
    struct srv *s;
    char *text;
    int i, n;
};

static void repeat_free(struct repeat *r) {
    free(r->text);
    free(r);
}

static void repeat_more(void *ud, struct native_call *c, bool gone) {
    struct repeat *r = ud;
    if (gone) {
        r->s->repeat_gone++;
        native_call_end(c, NC_CANCELLED, "gone");
        repeat_free(r);
        return;
    }
    while (r->i < r->n) {
        AllTypes m = PELOTON_C__TEST__ALL_TYPES__INIT;
        m.i32 = r->i;
        m.text = r->text;
        int rc = native_call_send(c, &m.base);
        if (rc < 0) break;
        r->s->repeat_sent = ++r->i;
        if (rc == 1) return; /* full: called again once it drained (or the client left) */
    }
    native_call_end(c, NC_OK, NULL);
    repeat_free(r);
}

static void h_repeat(void *ud, struct native_call *c, const ProtobufCMessage *req) {
    struct srv *s = ud;
    const AllTypes *q = (const AllTypes *)req;
    struct repeat *r = calloc(1, sizeof *r);
    r->s = s;
    r->n = q->i32;
    r->text = malloc(q->u32 + 1);
    memset(r->text, 'x', q->u32);
    r->text[q->u32] = 0;
    s->repeat_sent = 0;
    native_call_set_producer(c, repeat_more, r);
    repeat_more(r, c, false);
}

/* Flood: sends i32 messages of u32 bytes without waiting (a producer that
 * ignores "full"): the server ends the stream, bounded. */
static void h_flood(void *ud, struct native_call *c, const ProtobufCMessage *req) {
    struct srv *s = ud;
    const AllTypes *q = (const AllTypes *)req;
    char *text = malloc(q->u32 + 1);
    memset(text, 'x', q->u32);
    text[q->u32] = 0;
    s->repeat_sent = 0;
    for (int i = 0; i < q->i32; i++) {
        AllTypes m = PELOTON_C__TEST__ALL_TYPES__INIT;
        m.i32 = i;
        m.text = text;
        if (native_call_send(c, &m.base) < 0) break;
        s->repeat_sent++;
    }
    free(text);
    native_call_end(c, NC_OK, NULL);
}

static void h_hang(void *ud, struct native_call *c, const ProtobufCMessage *req) {
    (void)req;
    struct srv *s = ud;
    if (s->nheld < 8) s->held[s->nheld++] = c;
    else native_call_fail(c, NC_RESOURCE_EXHAUSTED, "too many held");
}

static const struct native_method methods[] = {
    {"Echo", AT_DESC, AT_DESC, h_echo, false},
    {"Repeat", AT_DESC, AT_DESC, h_repeat, true},
    {"Hang", AT_DESC, AT_DESC, h_hang, false},
    {"Flood", AT_DESC, AT_DESC, h_flood, true},
};

/* Completes the held calls (their clients are gone by now): answered once, dropped. */
static void finish_held(uv_async_t *a) {
    struct srv *s = a->data;
    for (int i = 0; i < s->nheld; i++) {
        s->late_done += native_call_gone(s->held[i]);
        native_call_fail(s->held[i], NC_ABORTED, "late");
    }
    s->nheld = 0;
}

static void stop_srv(uv_async_t *a) {
    struct srv *s = a->data;
    finish_held(&s->finish_held);
    native_server_stop(s->s);
    native_server_stats(s->s, &s->stats);
    uv_close((uv_handle_t *)&s->stop, NULL);
    uv_close((uv_handle_t *)&s->finish_held, NULL);
}

static void srv_main(void *arg) {
    struct srv *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
}

static int srv_start(struct srv *s) {
    memset(s, 0, sizeof *s);
    uv_loop_init(&s->loop);
    native_registry_init(&s->reg);
    native_registry_add(&s->reg, "peloton_c.test.Svc", methods, 4, s);
    struct native_config cfg = {.port = 0, .registry = &s->reg, .max_message = 1 << 20};
    char err[256];
    if (native_server_start(&s->loop, &cfg, &s->s, err, sizeof err)) return -1;
    s->port = native_server_port(s->s);
    uv_async_init(&s->loop, &s->stop, stop_srv);
    uv_async_init(&s->loop, &s->finish_held, finish_held);
    s->stop.data = s->finish_held.data = s;
    return uv_thread_create(&s->thread, srv_main, s);
}

static void srv_end(struct srv *s) {
    uv_async_send(&s->stop);
    uv_thread_join(&s->thread);
    native_server_free(s->s);
    native_registry_free(&s->reg);
    uv_loop_close(&s->loop);
}

/* ---- the client: nghttp2's client session, blocking socket ---- */

struct cstream {
    int32_t id;
    uint8_t *req;
    size_t req_len, req_off;
    uint8_t *body;
    size_t len;
    int status; /* grpc-status, -1 until seen */
    char msg[256];
    bool closed;
    uint32_t rst;
    bool got_rst; /* an RST_STREAM frame came for it */
    bool hold;    /* its message is not sent yet (the request's headers are) */
};

struct client {
    int fd;
    nghttp2_session *h;
    struct cstream *st;
    int n;
    int rst_frames; /* RST_STREAM frames received */
};

static struct cstream *by_id(struct client *c, int32_t id) {
    for (int i = 0; i < c->n; i++)
        if (c->st[i].id == id) return &c->st[i];
    return NULL;
}

static int c_header(nghttp2_session *h, const nghttp2_frame *f, const uint8_t *name, size_t nl, const uint8_t *value,
                    size_t vl, uint8_t flags, void *ud) {
    (void)h;
    (void)flags;
    struct cstream *s = by_id(ud, f->hd.stream_id);
    if (!s) return 0;
    if (nl == 11 && !memcmp(name, "grpc-status", 11)) s->status = atoi((const char *)value);
    if (nl == 12 && !memcmp(name, "grpc-message", 12)) snprintf(s->msg, sizeof s->msg, "%.*s", (int)vl, value);
    return 0;
}

static int c_data(nghttp2_session *h, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud) {
    (void)h;
    (void)flags;
    struct cstream *s = by_id(ud, id);
    if (!s) return 0;
    s->body = realloc(s->body, s->len + len);
    memcpy(s->body + s->len, data, len);
    s->len += len;
    return 0;
}

static int c_close(nghttp2_session *h, int32_t id, uint32_t code, void *ud) {
    (void)h;
    struct cstream *s = by_id(ud, id);
    if (s) {
        s->closed = true;
        s->rst = code;
    }
    return 0;
}

static int c_frame(nghttp2_session *h, const nghttp2_frame *f, void *ud) {
    (void)h;
    if (f->hd.type == NGHTTP2_RST_STREAM) {
        ((struct client *)ud)->rst_frames++;
        struct cstream *s = by_id(ud, f->hd.stream_id);
        if (s) s->got_rst = true;
    }
    return 0;
}

static ssize_t c_read_req(nghttp2_session *h, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                          nghttp2_data_source *src, void *ud) {
    (void)h;
    (void)id;
    (void)ud;
    struct cstream *s = src->ptr;
    if (s->hold) return NGHTTP2_ERR_DEFERRED;
    size_t k = s->req_len - s->req_off < len ? s->req_len - s->req_off : len;
    memcpy(buf, s->req + s->req_off, k);
    s->req_off += k;
    if (s->req_off == s->req_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)k;
}

static int client_open(struct client *c, int port, int nstreams) {
    memset(c, 0, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a)) return -1;
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, c_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, c_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, c_frame);
    nghttp2_session_client_new(&c->h, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(c->h, NGHTTP2_FLAG_NONE, NULL, 0);
    c->st = calloc((size_t)nstreams, sizeof *c->st);
    return 0;
}

/* A call of method with msg; timeout NULL or a grpc-timeout value. */
static struct cstream *client_call(struct client *c, const char *method, const ProtobufCMessage *msg,
                                   const char *timeout) {
    struct cstream *s = &c->st[c->n++];
    s->status = -1;
    size_t n;
    uint8_t *p = pbmsg_pack(msg, &n);
    s->req = malloc(n + GRPC_PREFIX_LEN);
    grpc_frame_prefix(s->req, n);
    memcpy(s->req + GRPC_PREFIX_LEN, p, n);
    s->req_len = n + GRPC_PREFIX_LEN;
    free(p);
    char path[128];
    snprintf(path, sizeof path, "/peloton_c.test.Svc/%s", method);
#define NVC(a, b) {(uint8_t *)(a), (uint8_t *)(b), strlen(a), strlen(b), NGHTTP2_NV_FLAG_NONE}
    nghttp2_nv h[] = {NVC(":method", "POST"), NVC(":scheme", "http"), NVC(":authority", "localhost"),
                      NVC(":path", path), NVC("content-type", "application/grpc"), NVC("te", "trailers"),
                      NVC("grpc-timeout", timeout ? timeout : "")};
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = c_read_req};
    s->id = nghttp2_submit_request(c->h, NULL, h, timeout ? 7 : 6, &dp, NULL);
    return s;
}

/* Exchanges frames until done(c) or timeout_ms; 0 when done. */
static int client_run(struct client *c, bool (*done)(struct client *), int timeout_ms) {
    struct timeval t0, t;
    gettimeofday(&t0, NULL);
    for (;;) {
        const uint8_t *data;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(c->h, &data)) > 0)
            if (write(c->fd, data, (size_t)n) != n) return -1;
        if (done(c)) return 0;
        gettimeofday(&t, NULL);
        long el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_usec - t0.tv_usec) / 1000;
        if (el > timeout_ms) return -ETIMEDOUT;
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        if (poll(&pf, 1, 50) <= 0) continue;
        uint8_t buf[65536];
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r <= 0) return -EPIPE;
        if (nghttp2_session_mem_recv(c->h, buf, (size_t)r) < 0) return -EPROTO;
    }
}

static void client_close(struct client *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->st[i].req);
        free(c->st[i].body);
    }
    free(c->st);
    nghttp2_session_del(c->h);
    close(c->fd);
}

static bool all_closed(struct client *c) {
    for (int i = 0; i < c->n; i++)
        if (!c->st[i].closed) return false;
    return true;
}

/* The body's messages, in order: count, and whether each i32 is its index and text has tlen bytes. */
static int check_stream_body(const struct cstream *s, size_t tlen) {
    size_t off = 0;
    int k = 0;
    while (off + GRPC_PREFIX_LEN <= s->len) {
        size_t n = (size_t)s->body[off + 1] << 24 | (size_t)s->body[off + 2] << 16 | (size_t)s->body[off + 3] << 8 |
                   s->body[off + 4];
        if (off + GRPC_PREFIX_LEN + n > s->len) return -1;
        char err[128];
        AllTypes *m = (AllTypes *)pbmsg_unpack(AT_DESC, s->body + off + GRPC_PREFIX_LEN, n, err, sizeof err);
        bool ok = m && m->i32 == k && strlen(m->text) == tlen;
        if (m) protobuf_c_message_free_unpacked(&m->base, NULL);
        if (!ok) return -1;
        off += GRPC_PREFIX_LEN + n;
        k++;
    }
    return off == s->len ? k : -1;
}

TEST(native_many_streams_and_server_streaming) {
    struct srv s;
    REQUIRE(srv_start(&s) == 0);
    struct client c;
    REQUIRE(client_open(&c, s.port, 40) == 0);
    /* 20 echoes and 20 streams of 40 messages of 4 KiB (160 KiB each, 3.2 MiB
     * in all: well past the client's 64 KiB windows, so the server must wait
     * for WINDOW_UPDATEs) at once on one connection */
    for (int i = 0; i < 40; i++) {
        AllTypes m = PELOTON_C__TEST__ALL_TYPES__INIT;
        m.i32 = i % 2 ? 40 : i;
        m.u32 = 4096;
        m.text = "hello";
        client_call(&c, i % 2 ? "Repeat" : "Echo", &m.base, NULL);
    }
    CHECK_I64(client_run(&c, all_closed, 20000), 0);
    for (int i = 0; i < 40; i++) {
        struct cstream *st = &c.st[i];
        CHECK_I64(st->status, 0);
        if (i % 2) {
            CHECK_I64(check_stream_body(st, 4096), 40);
        } else {
            CHECK_I64(st->len, st->req_len); /* the echo is the request, framed the same */
            CHECK(st->len == st->req_len && !memcmp(st->body, st->req, st->len));
        }
    }
    client_close(&c);
    srv_end(&s);
}

static bool first_closed(struct client *c) { return c->st[0].closed; }
static bool second_closed(struct client *c) { return c->n > 1 && c->st[1].closed; }

TEST(native_deadline_and_reset_while_the_handler_holds_the_call) {
    struct srv s;
    REQUIRE(srv_start(&s) == 0);
    struct client c;
    REQUIRE(client_open(&c, s.port, 4) == 0);
    AllTypes m = PELOTON_C__TEST__ALL_TYPES__INIT;
    struct timeval t0, t1;
    gettimeofday(&t0, NULL);
    client_call(&c, "Hang", &m.base, "150m");
    CHECK_I64(client_run(&c, first_closed, 5000), 0);
    gettimeofday(&t1, NULL);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_usec - t0.tv_usec) / 1000;
    CHECK_I64(c.st[0].status, 4); /* DEADLINE_EXCEEDED */
    CHECK(ms >= 140 && ms < 3000);
    /* a held call whose client resets the stream */
    client_call(&c, "Hang", &m.base, NULL);
    CHECK_I64(client_run(&c, all_closed, 300) , -ETIMEDOUT); /* held: no answer */
    nghttp2_submit_rst_stream(c.h, NGHTTP2_FLAG_NONE, c.st[1].id, NGHTTP2_CANCEL);
    CHECK_I64(client_run(&c, second_closed, 2000), 0);
    /* the handler completes both now: nothing is sent, nothing breaks, and
     * the connection still serves */
    uv_async_send(&s.finish_held);
    client_call(&c, "Echo", &m.base, NULL);
    CHECK_I64(client_run(&c, all_closed, 5000), 0);
    CHECK_I64(c.st[2].status, 0);
    client_close(&c);
    srv_end(&s);
    CHECK_I64(s.late_done, 2); /* both were gone when completed */
}

static bool none(struct client *c) {
    (void)c;
    return false;
}

TEST(native_oversize_and_unknown_keep_the_connection) {
    struct srv s;
    REQUIRE(srv_start(&s) == 0);
    struct client c;
    REQUIRE(client_open(&c, s.port, 4) == 0);
    AllTypes m = PELOTON_C__TEST__ALL_TYPES__INIT;
    char *big = malloc((1 << 20) + 1); /* over the server's 1 MiB bound */
    memset(big, 'y', 1 << 20);
    big[1 << 20] = 0;
    m.text = big;
    client_call(&c, "Echo", &m.base, NULL);
    m.text = "";
    client_call(&c, "Nope", &m.base, NULL);
    client_call(&c, "Echo", &m.base, NULL);
    CHECK_I64(client_run(&c, all_closed, 10000), 0);
    CHECK_I64(c.st[0].status, 8); /* RESOURCE_EXHAUSTED */
    CHECK_HAS(c.st[0].msg, "larger than 1048576 bytes");
    /* told to stop sending the rest (NO_ERROR); the unknown method's stream
     * may be told too, when its answer went out before its DATA came in */
    CHECK(c.st[0].got_rst && !c.st[2].got_rst);
    CHECK(c.st[0].req_off < c.st[0].req_len);
    CHECK_I64(c.st[1].status, 12); /* UNIMPLEMENTED */
    CHECK_I64(c.st[2].status, 0);
    (void)none;
    free(big);
    client_close(&c);
    srv_end(&s);
}

/* A call refused at its headers is answered once its message has come
 * (END_STREAM), without a reset: libcurl 7.88 lost an answer that came
 * before it had sent the message, the stream being reset (docs/native-api.md).
 * One that keeps sending past a message's bound is answered and reset then. */
TEST(native_refusal_at_headers_waits_for_the_request) {
    struct srv s;
    REQUIRE(srv_start(&s) == 0);
    struct client c;
    REQUIRE(client_open(&c, s.port, 2) == 0);
    AllTypes m = PELOTON_C__TEST__ALL_TYPES__INIT;
    m.text = "hello";
    struct cstream *a = client_call(&c, "Nope", &m.base, NULL);
    a->hold = true;
    CHECK_I64(client_run(&c, all_closed, 400), -ETIMEDOUT);
    CHECK_I64(a->status, -1); /* not answered while its message is on its way */
    a->hold = false;
    nghttp2_session_resume_data(c.h, a->id);
    CHECK_I64(client_run(&c, all_closed, 10000), 0);
    CHECK_I64(a->status, 12); /* UNIMPLEMENTED */
    CHECK(!a->got_rst);
    char *big = malloc((2 << 20) + 1); /* twice the server's 1 MiB bound */
    memset(big, 'z', 2 << 20);
    big[2 << 20] = 0;
    m.text = big;
    struct cstream *b = client_call(&c, "Nope", &m.base, NULL);
    CHECK_I64(client_run(&c, all_closed, 10000), 0);
    CHECK_I64(b->status, 12);
    CHECK(b->got_rst && b->req_off < b->req_len); /* told to stop before all of it went */
    free(big);
    client_close(&c);
    srv_end(&s);
}

/* The client's stream window (SETTINGS_INITIAL_WINDOW_SIZE): 0 reads nothing. */
static void client_window(struct client *c, uint32_t w) {
    nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, w};
    nghttp2_submit_settings(c->h, NGHTTP2_FLAG_NONE, &iv, 1);
}

/* A call of a streaming method (Repeat, Flood) for n messages of size bytes. */
static void call_stream(struct client *c, const char *method, int n, uint32_t size) {
    AllTypes m = PELOTON_C__TEST__ALL_TYPES__INIT;
    m.i32 = n;
    m.u32 = size;
    m.text = "";
    client_call(c, method, &m.base, NULL);
}

/* Waits (bounded) until a Repeat producer heard its client left; the count. */
static int producers_told_gone(struct srv *s) {
    for (int i = 0; i < 100 && !__atomic_load_n(&s->repeat_gone, __ATOMIC_SEQ_CST); i++) usleep(20000);
    return __atomic_load_n(&s->repeat_gone, __ATOMIC_SEQ_CST);
}

/* Waits (bounded) until the server's last streaming handler has had at
 * least n messages accepted: the server runs on its own thread, and a loaded
 * machine may run it late. The count read after. */
static int sent_at_least(struct srv *s, int n) {
    for (int i = 0; i < 250 && __atomic_load_n(&s->repeat_sent, __ATOMIC_SEQ_CST) < n; i++) usleep(20000);
    usleep(50000); /* and a moment more: a count past n would show */
    return __atomic_load_n(&s->repeat_sent, __ATOMIC_SEQ_CST);
}

/* A client whose window stays shut: the producer is told to wait once
 * NATIVE_STREAM_HIGH bytes wait, the server holds no more than that, and the
 * connection closing stops the producer and frees the call. */
TEST(native_stream_to_a_client_that_does_not_read) {
    struct srv s;
    REQUIRE(srv_start(&s) == 0);
    struct client c;
    REQUIRE(client_open(&c, s.port, 2) == 0);
    client_window(&c, 0);
    call_stream(&c, "Repeat", 400, 65536); /* 400 messages of 64 KiB: 25 MiB */
    CHECK_I64(client_run(&c, all_closed, 1000), -ETIMEDOUT); /* nothing can reach it */
    /* paused at 256 KiB waiting: the 4th message reached it */
    CHECK_I64(sent_at_least(&s, 4), 4);
    CHECK_I64(s.repeat_gone, 0);
    client_close(&c); /* the connection closes: the producer hears it */
    CHECK_I64(producers_told_gone(&s), 1);
    srv_end(&s);
    CHECK_I64(s.stats.open_calls, 0);
}

/* The window opens later: the paused producer resumes and every message
 * arrives in order; then a reset mid-stream stops the next producer. */
TEST(native_stream_resumes_and_stops_on_reset) {
    struct srv s;
    REQUIRE(srv_start(&s) == 0);
    struct client c;
    REQUIRE(client_open(&c, s.port, 4) == 0);
    client_window(&c, 0);
    call_stream(&c, "Repeat", 100, 16384); /* 100 × 16 KiB: 1.6 MiB, six times the pause mark */
    CHECK_I64(client_run(&c, all_closed, 500), -ETIMEDOUT);
    int paused_at = sent_at_least(&s, 15);
    CHECK(paused_at >= 15 && paused_at <= 17); /* paused near 256 KiB */
    client_window(&c, 1 << 20); /* now it reads */
    CHECK_I64(client_run(&c, all_closed, 10000), 0);
    CHECK_I64(c.st[0].status, 0);
    CHECK_I64(check_stream_body(&c.st[0], 16384), 100);
    /* another, reset by the client after its first messages */
    client_window(&c, 0);
    call_stream(&c, "Repeat", 100000, 16384);
    CHECK_I64(client_run(&c, all_closed, 500), -ETIMEDOUT);
    nghttp2_submit_rst_stream(c.h, NGHTTP2_FLAG_NONE, c.st[1].id, NGHTTP2_CANCEL);
    CHECK_I64(client_run(&c, all_closed, 2000), 0);
    CHECK_I64(producers_told_gone(&s), 1);
    CHECK(s.repeat_sent < 20);
    /* a producer that ignores "full" is cut off at NATIVE_STREAM_MAX */
    call_stream(&c, "Flood", 1000, 65536);
    CHECK_I64(client_run(&c, all_closed, 500), -ETIMEDOUT); /* its status waits behind its data */
    int flooded = sent_at_least(&s, 60);
    CHECK(flooded >= 60 && flooded <= 70); /* 4 MiB / 64 KiB, then -EPIPE */
    /* the connection still serves */
    call_stream(&c, "Echo", 0, 0);
    client_window(&c, 1 << 20);
    CHECK_I64(client_run(&c, all_closed, 10000), 0);
    CHECK_I64(c.st[2].status, 8); /* RESOURCE_EXHAUSTED, after what was queued */
    CHECK_I64(c.st[3].status, 0);
    client_close(&c);
    srv_end(&s);
    CHECK_I64(s.stats.open_calls, 0);
}

/* The server stopping with a producer paused on a client that does not
 * read: the producer hears it before the stop returns, and frees. */
TEST(native_stop_tells_a_paused_producer) {
    struct srv s;
    REQUIRE(srv_start(&s) == 0);
    struct client c;
    REQUIRE(client_open(&c, s.port, 2) == 0);
    client_window(&c, 0);
    call_stream(&c, "Repeat", 1000, 65536);
    CHECK_I64(client_run(&c, all_closed, 300), -ETIMEDOUT);
    CHECK_I64(sent_at_least(&s, 4), 4);
    srv_end(&s); /* the client is still connected */
    CHECK_I64(s.repeat_gone, 1);
    CHECK_I64(s.stats.open_calls, 0);
    client_close(&c);
}
