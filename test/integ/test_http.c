/* The HTTP layer against a real client (libcurl) over loopback: the server
 * runs on its own libuv loop in a thread; the test thread is the client. */
#include <curl/curl.h>
#include <openssl/ssl.h>
#include <errno.h>
#include <jansson.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/time.h>
#include <unistd.h>
#include <uv.h>

#include "server.h"
#include "tlscert.h"
#include "test.h"

struct srv {
    int stream_closes;
    struct http_stream *held; /* /hold's stream, left open */
    uv_loop_t loop;
    uv_async_t stop;
    struct http_server *http;
    pthread_t thread;
    int port;
    int requests;
};

static void stream_closed_cb(void *ud) {
    struct srv *s = ud;
    s->stream_closes++;
}

/* A deferred reply, answered from a timer on the server's loop. */
struct later {
    uv_timer_t t;
    struct http_deferred *d;
    bool empty; /* answer 204 without a body */
};
static void later_closed(uv_handle_t *h) { free(h->data); }
static void later_fire(uv_timer_t *t) {
    struct later *l = t->data;
    struct http_response r = {.status = l->empty ? 204 : 200, .content_type = "text/plain"};
    if (!l->empty) {
        r.body = strdup("deferred");
        r.body_len = strlen(r.body);
    }
    http_deferred_reply(l->d, &r);
    uv_close((uv_handle_t *)&l->t, later_closed);
}

/* Echoes the request as JSON; paths pick special behaviour. */
static void echo_handler(void *ud, const struct http_request *req, struct http_response *resp) {
    struct srv *s = ud;
    s->requests++;
    json_t *o = json_object(), *args = json_array();
    json_object_set_new(o, "method", json_string(req->method_name));
    json_object_set_new(o, "path", json_string(req->path));
    for (int i = 0; i < req->nargs; i++)
        json_array_append_new(args, json_pack("[ss]", req->arg_keys[i], req->arg_values[i]));
    json_object_set_new(o, "args", args);
    json_object_set_new(o, "watch", json_boolean(http_req_arg_bool(req, "watch")));
    json_object_set_new(o, "contentType", json_string(req->content_type));
    json_object_set_new(o, "accept", json_string(req->accept));
    json_object_set_new(o, "authorization", json_string(req->authorization));
    json_object_set_new(o, "bodyLen", json_integer((json_int_t)req->body_len));
    json_object_set_new(o, "body", json_stringn(req->body, req->body_len));
    if (!strcmp(req->path, "/stream")) { /* three chunks and the end, queued at once */
        json_decref(o);
        struct http_stream *st = http_stream_start(req, 200, "application/json", 0, stream_closed_cb, s);
        if (!st) { resp->status = 500; return; }
        for (int i = 0; i < 3; i++) {
            char line[64];
            int n = snprintf(line, sizeof line, "{\"n\":%d}\n", i);
            http_stream_write(st, line, (size_t)n);
        }
        http_stream_end(st);
        return;
    }
    if (!strcmp(req->path, "/overflow")) { /* a buffer of 16 bytes cannot take 40 */
        json_decref(o);
        struct http_stream *st = http_stream_start(req, 200, "application/json", 16, stream_closed_cb, s);
        if (!st) { resp->status = 500; return; }
        int rc1 = http_stream_write(st, "0123456789", 10);
        int rc2 = http_stream_write(st, "0123456789abcdefghijklmnopqrstuvwxyz0123", 40);
        if (rc1 != 0 || rc2 != -ENOBUFS) s->stream_closes += 100; /* makes the test fail */
        return;
    }
    if (!strcmp(req->path, "/hold")) { /* a stream that stays open, one line sent */
        json_decref(o);
        s->held = http_stream_start(req, 200, "application/json", 0, stream_closed_cb, s);
        if (!s->held) { resp->status = 500; return; }
        http_stream_write(s->held, "{\"held\":1}\n", 11);
        return;
    }
    if (!strcmp(req->path, "/defer") || !strcmp(req->path, "/defer-long") ||
        !strcmp(req->path, "/defer-empty")) { /* answered 20 (600) ms later */
        json_decref(o);
        struct later *l = calloc(1, sizeof *l);
        l->d = http_defer(req);
        if (!l->d) {
            free(l);
            resp->status = 500;
            return;
        }
        uv_timer_init(&s->loop, &l->t);
        l->t.data = l;
        l->empty = !strcmp(req->path, "/defer-empty");
        uv_timer_start(&l->t, later_fire, !strcmp(req->path, "/defer-long") ? 600 : 20, 0);
        return;
    }
    if (!strcmp(req->path, "/missing")) resp->status = 404;
    if (!strcmp(req->path, "/empty")) { /* no body; ?status=N picks the code (204) */
        const char *st = http_req_arg(req, "status");
        resp->status = st ? atoi(st) : 204;
        json_decref(o);
        return;
    }
    if (!strcmp(req->path, "/sized")) { /* ?n=BYTES&i=K: "i=K;" then padding to n bytes */
        const char *n = http_req_arg(req, "n"), *i = http_req_arg(req, "i");
        size_t len = n ? (size_t)atol(n) : 0;
        resp->body = malloc(len + 32);
        int k = snprintf(resp->body, 32, "i=%s;", i ? i : "");
        if ((size_t)k < len) memset(resp->body + k, 'x', len - (size_t)k);
        resp->body_len = len > (size_t)k ? len : (size_t)k;
        resp->content_type = "text/plain";
        json_decref(o);
        return;
    }
    if (!strcmp(req->path, "/stats")) { /* the server's own counts, read on its loop */
        struct http_server_stats st;
        http_server_stats(s->http, &st);
        json_decref(o);
        o = json_pack("{s:I, s:I, s:I, s:i, s:i}", "output", (json_int_t)st.output, "outputPeak",
                      (json_int_t)st.output_peak, "connOutputPeak", (json_int_t)st.conn_output_peak, "held",
                      (int)st.held, "connections", (int)st.connections);
    }
    if (!strcmp(req->path, "/big")) { /* a large response */
        size_t n = 5u << 20;
        resp->body = malloc(n);
        memset(resp->body, 'x', n);
        resp->body_len = n;
        resp->content_type = "text/plain";
        json_decref(o);
        return;
    }
    resp->body = json_dumps(o, JSON_COMPACT);
    resp->body_len = strlen(resp->body);
    json_decref(o);
}

static void on_stop(uv_async_t *a) {
    struct srv *s = a->data;
    http_server_stop(s->http);
    uv_close((uv_handle_t *)&s->stop, NULL);
}

static void *loop_thread(void *arg) {
    struct srv *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* The echo server on cfg (bind address, handler and ud filled in); err, when
 * given, takes a refusal's message instead of failing the test. */
static int srv_start_cfg(struct srv *s, struct http_server_config cfg, char *err_out, size_t errlen) {
    memset(s, 0, sizeof *s);
    uv_loop_init(&s->loop);
    cfg.bind_addr = "127.0.0.1";
    cfg.handler = echo_handler;
    cfg.ud = s;
    char err[256];
    if (http_server_start(&s->loop, &cfg, &s->http, err, sizeof err)) {
        if (err_out) snprintf(err_out, errlen, "%s", err);
        else test_fail(__FILE__, __LINE__, "start: %s", err);
        uv_loop_close(&s->loop);
        return -1;
    }
    s->port = http_server_port(s->http);
    uv_async_init(&s->loop, &s->stop, on_stop);
    s->stop.data = s;
    pthread_create(&s->thread, NULL, loop_thread, s);
    return 0;
}

static int srv_start_timeouts(struct srv *s, size_t max_body, unsigned idle_ms, unsigned head_ms) {
    struct http_server_config cfg = {.max_body = max_body, .idle_timeout_ms = idle_ms, .head_timeout_ms = head_ms};
    return srv_start_cfg(s, cfg, NULL, 0);
}

static int srv_start(struct srv *s, size_t max_body) { return srv_start_timeouts(s, max_body, 0, 0); }

static void srv_stop(struct srv *s) {
    uv_async_send(&s->stop);
    pthread_join(s->thread, NULL); /* the loop ran dry: lws closed its handles */
    http_server_free(s->http);
    for (int i = 0; i < 100 && uv_loop_close(&s->loop) == UV_EBUSY; i++) uv_run(&s->loop, UV_RUN_NOWAIT);
}

struct buf {
    char *p;
    size_t n;
};
static size_t on_data(char *d, size_t sz, size_t nm, void *ud) {
    struct buf *b = ud;
    char *np = realloc(b->p, b->n + sz * nm + 1);
    if (!np) return 0;
    b->p = np;
    memcpy(b->p + b->n, d, sz * nm);
    b->n += sz * nm;
    b->p[b->n] = 0;
    return sz * nm;
}

/* One request on a reusable handle; returns the status, body in *out. */
static long req(CURL *c, const char *method, const char *url, const char *body, long body_len,
                struct curl_slist *hdrs, struct buf *out) {
    free(out->p);
    out->p = NULL;
    out->n = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOBODY, strcmp(method, "HEAD") == 0 ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, body_len);
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(c, CURLOPT_HTTPGET, strcmp(method, "GET") == 0 ? 1L : 0L);
    }
    if (curl_easy_perform(c) != CURLE_OK) return -1;
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

TEST(http_get_args_headers_and_keepalive) {
    struct srv s;
    REQUIRE(srv_start(&s, 0) == 0);
    CURL *c = curl_easy_init();
    struct buf b = {0};
    char url[256];
    snprintf(url, sizeof url,
             "http://127.0.0.1:%d/api/v1/pods?labelSelector=app+in+%%28a%%2Cb%%29&watch=True&limit=500&bare", s.port);
    struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json;as=Table;v=v1;g=meta.k8s.io");
    h = curl_slist_append(h, "Authorization: Bearer tok123");
    CHECK_I64(req(c, "GET", url, NULL, 0, h, &b), 200);
    json_t *o = json_loads(b.p ? b.p : "", 0, NULL);
    REQUIRE(o);
    CHECK_STR(json_string_value(json_object_get(o, "method")), "GET");
    CHECK_STR(json_string_value(json_object_get(o, "path")), "/api/v1/pods");
    json_t *args = json_object_get(o, "args");
    CHECK_I64(json_array_size(args), 4);
    CHECK_STR(json_string_value(json_array_get(json_array_get(args, 0), 1)), "app in (a,b)");
    CHECK_STR(json_string_value(json_array_get(json_array_get(args, 3), 0)), "bare");
    CHECK(json_is_true(json_object_get(o, "watch")));
    CHECK_STR(json_string_value(json_object_get(o, "authorization")), "Bearer tok123");
    CHECK_HAS(json_string_value(json_object_get(o, "accept")), "as=Table");
    json_decref(o);
    /* keep-alive: 50 more requests on the same connection */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", s.port);
    long connects_total = 0;
    for (int i = 0; i < 50; i++) {
        CHECK_I64(req(c, "GET", url, NULL, 0, h, &b), 200);
        long nc = 0;
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &nc);
        connects_total += nc;
    }
    CHECK_I64(connects_total, 0);
    curl_slist_free_all(h);
    free(b.p);
    curl_easy_cleanup(c);
    srv_stop(&s);
    CHECK_I64(s.requests, 51);
}

TEST(http_methods_and_bodies) {
    struct srv s;
    REQUIRE(srv_start(&s, 1u << 20) == 0);
    CURL *c = curl_easy_init();
    struct buf b = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/apis/peloton.io/v1alpha1/resourcepools/a", s.port);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/merge-patch+json");
    const char *methods[] = {"POST", "PUT", "PATCH", "DELETE"};
    for (int i = 0; i < 4; i++) {
        CHECK_I64(req(c, methods[i], url, "{\"spec\":{\"x\":1}}", 16, h, &b), 200);
        json_t *o = json_loads(b.p ? b.p : "", 0, NULL);
        REQUIRE(o);
        CHECK_STR(json_string_value(json_object_get(o, "method")), methods[i]);
        CHECK_STR(json_string_value(json_object_get(o, "body")), "{\"spec\":{\"x\":1}}");
        CHECK_STR(json_string_value(json_object_get(o, "contentType")), "application/merge-patch+json");
        json_decref(o);
    }
    /* a body near the cap arrives whole, in several lws reads */
    size_t n = (1u << 20) - 10;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++) big[i] = (char)('a' + i % 26);
    CHECK_I64(req(c, "POST", url, big, (long)n, h, &b), 200);
    json_t *o = json_loads(b.p ? b.p : "", 0, NULL);
    REQUIRE(o);
    CHECK_I64(json_integer_value(json_object_get(o, "bodyLen")), (int64_t)n);
    CHECK(memcmp(json_string_value(json_object_get(o, "body")), big, n) == 0);
    json_decref(o);
    /* over the cap: 413 Status, the handler is never called */
    int before = s.requests;
    char *huge = realloc(big, (1u << 20) + 100);
    memset(huge, 'y', (1u << 20) + 100);
    CHECK_I64(req(c, "POST", url, huge, (1 << 20) + 100, h, &b), 413);
    CHECK_HAS(b.p, "\"reason\":\"RequestEntityTooLarge\"");
    CHECK_I64(s.requests, before);
    free(huge);
    /* the server keeps serving */
    CHECK_I64(req(c, "GET", url, NULL, 0, NULL, &b), 200);
    /* an empty body (Content-Length: 0) gets the whole reply */
    CHECK_I64(req(c, "POST", url, "", 0, h, &b), 200);
    json_t *e = json_loads(b.p ? b.p : "", 0, NULL);
    CHECK(e && json_integer_value(json_object_get(e, "bodyLen")) == 0);
    json_decref(e);
    curl_slist_free_all(h);
    free(b.p);
    curl_easy_cleanup(c);
    srv_stop(&s);
}

TEST(http_status_empty_and_large_responses) {
    struct srv s;
    REQUIRE(srv_start(&s, 0) == 0);
    CURL *c = curl_easy_init();
    struct buf b = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/missing", s.port);
    CHECK_I64(req(c, "GET", url, NULL, 0, NULL, &b), 404);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/empty", s.port);
    CHECK_I64(req(c, "GET", url, NULL, 0, NULL, &b), 204);
    CHECK_I64(b.n, 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/big", s.port);
    CHECK_I64(req(c, "GET", url, NULL, 0, NULL, &b), 200);
    CHECK_I64(b.n, 5u << 20);
    CHECK(b.p && b.p[0] == 'x' && b.p[b.n - 1] == 'x');
    CHECK_I64(req(c, "HEAD", url, NULL, 0, NULL, &b), 200);
    CHECK_I64(b.n, 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/after", s.port);
    CHECK_I64(req(c, "GET", url, NULL, 0, NULL, &b), 200);
    free(b.p);
    curl_easy_cleanup(c);
    srv_stop(&s);
}

TEST(http_chunked_request_body_refused) {
    struct srv s;
    REQUIRE(srv_start(&s, 0) == 0);
    CURL *c = curl_easy_init();
    struct buf b = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", s.port);
    struct curl_slist *h = curl_slist_append(NULL, "Transfer-Encoding: chunked");
    CHECK_I64(req(c, "POST", url, "{}", -1, h, &b), 411);
    CHECK_HAS(b.p, "send Content-Length");
    curl_slist_free_all(h);
    free(b.p);
    curl_easy_cleanup(c);
    srv_stop(&s);
}

TEST(http_stream_chunks_end_and_keepalive) {
    struct srv s;
    REQUIRE(srv_start(&s, 0) == 0);
    CURL *c = curl_easy_init();
    struct buf b = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/stream", s.port);
    CHECK_I64(req(c, "GET", url, NULL, 0, NULL, &b), 200);
    CHECK_STR(b.p, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/after", s.port);
    CHECK_I64(req(c, "GET", url, NULL, 0, NULL, &b), 200); /* same connection still usable */
    long nc = -1;
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &nc);
    CHECK_I64(nc, 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/overflow", s.port);
    CHECK(req(c, "GET", url, NULL, 0, NULL, &b) != 200 || b.n < 50); /* cut short, not delivered whole */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/after", s.port);
    CHECK_I64(req(c, "GET", url, NULL, 0, NULL, &b), 200); /* the server goes on */
    free(b.p);
    curl_easy_cleanup(c);
    srv_stop(&s);
    CHECK_I64(s.stream_closes, 2); /* once per stream, whatever ended it */
}

/* ---- the plain HTTP/1.1 backend byte for byte, over a raw socket ---- */

/* fd connected to a, with reads that give up after 5 s; -1 (fd closed) when it cannot connect. */
static int connect_timed(int fd, const struct sockaddr *a, socklen_t len) {
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, a, len)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int raw_connect(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return connect_timed(socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&a, sizeof a);
}

static bool raw_send(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w, n -= (size_t)w;
    }
    return true;
}

static bool raw_sends(int fd, const char *p) { return raw_send(fd, p, strlen(p)); }

/* Reads into b until it holds `want` occurrences of needle, the peer closes
 * (*closed) or 5 s pass. */
static void raw_read(int fd, struct buf *b, const char *needle, int want, bool *closed) {
    if (closed) *closed = false;
    for (int rounds = 0; rounds < 1000; rounds++) {
        int have = 0;
        for (const char *q = b->p; q && (q = strstr(q, needle)); q++) have++;
        if (needle && have >= want) return;
        char tmp[65536];
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0) {
            if (closed) *closed = r == 0;
            return;
        }
        on_data(tmp, 1, (size_t)r, b);
    }
}

/* Whether the server closed fd (a read sees the end within 5 s). */
static bool raw_closed(int fd) {
    char tmp[4096];
    for (int i = 0; i < 100; i++) {
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r == 0) return true;
        if (r < 0) return false;
    }
    return false;
}

TEST(http_h1_pipelined_replies_keep_order_across_a_deferral) {
    struct srv s;
    REQUIRE(srv_start(&s, 0) == 0);
    int fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    static const char three[] = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                                "GET /defer HTTP/1.1\r\nHost: x\r\n\r\n"
                                "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(raw_send(fd, three, sizeof three - 1));
    struct buf b = {0};
    raw_read(fd, &b, "HTTP/1.1 200", 3, NULL);
    REQUIRE(b.p);
    const char *a = strstr(b.p, "\"path\":\"/a\""), *d = strstr(b.p, "deferred"), *c = strstr(b.p, "\"path\":\"/b\"");
    CHECK(a && d && c && a < d && d < c); /* the deferred answer holds back the one behind it */
    /* the connection stays usable afterwards */
    free(b.p);
    b = (struct buf){0};
    CHECK(raw_send(fd, "GET /c HTTP/1.1\r\nHost: x\r\n\r\n", 28));
    raw_read(fd, &b, "\"path\":\"/c\"", 1, NULL);
    CHECK_HAS(b.p, "\"path\":\"/c\"");
    free(b.p);
    close(fd);
    srv_stop(&s);
    CHECK_I64(s.requests, 4);
}

static double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The idle and head timeouts (300 and 400 ms here): an idle keep-alive
 * connection and a head or body that stalls are closed in time; a
 * connection with an open stream or a reply on its way is not. */
TEST(http_h1_idle_and_head_timeouts) {
    struct srv s;
    REQUIRE(srv_start_timeouts(&s, 0, 300, 400) == 0);
    struct timespec t0;
    /* idle after an answer: closed after about 300 ms, not before */
    int fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    struct buf b = {0};
    CHECK(raw_sends(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
    raw_read(fd, &b, "\"path\":\"/a\"", 1, NULL);
    CHECK_HAS(b.p, "\"path\":\"/a\"");
    free(b.p);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(raw_closed(fd));
    double idle = ms_since(&t0);
    CHECK(idle >= 250 && idle < 2000);
    close(fd);
    /* a connection that never sends anything is idle too */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(raw_closed(fd));
    CHECK(ms_since(&t0) >= 250);
    close(fd);
    /* half a head, then nothing (a slow client): closed after about 400 ms */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(raw_sends(fd, "GET /slow HTTP/1.1\r\nHo"));
    CHECK(raw_closed(fd));
    double head = ms_since(&t0);
    CHECK(head >= 350 && head < 2000);
    close(fd);
    /* a body that stops halfway: the same */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(raw_sends(fd, "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"));
    CHECK(raw_closed(fd));
    CHECK(ms_since(&t0) >= 350);
    close(fd);
    /* a reply deferred for 600 ms (past both timeouts) still arrives, and
     * the connection serves the next request */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    b = (struct buf){0};
    CHECK(raw_sends(fd, "GET /defer-long HTTP/1.1\r\nHost: x\r\n\r\n"));
    bool closed = false;
    raw_read(fd, &b, "deferred", 1, &closed);
    CHECK(!closed);
    CHECK_HAS(b.p, "deferred");
    free(b.p);
    b = (struct buf){0};
    CHECK(raw_sends(fd, "GET /c HTTP/1.1\r\nHost: x\r\n\r\n"));
    raw_read(fd, &b, "\"path\":\"/c\"", 1, NULL);
    CHECK_HAS(b.p, "\"path\":\"/c\"");
    free(b.p);
    close(fd);
    /* an open stream is not idle: still open after 3 idle timeouts */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    b = (struct buf){0};
    CHECK(raw_sends(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
    raw_read(fd, &b, "held", 1, NULL);
    CHECK_HAS(b.p, "held");
    free(b.p);
    struct timeval tv = {.tv_sec = 0, .tv_usec = 900 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char tmp[256];
    ssize_t r = recv(fd, tmp, sizeof tmp, 0);
    CHECK(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)); /* nothing came, and no close */
    CHECK_I64(s.stream_closes, 0);
    close(fd);
    srv_stop(&s);
    CHECK_I64(s.stream_closes, 1); /* the held stream, when its client left or the server stopped */
}

static int unix_connect(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    return connect_timed(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&a, sizeof a);
}

/* The plain server on a Unix-domain socket as well as its TCP port: the
 * same requests and answers (keep-alive, a deferred reply, a body through
 * libcurl's unix-socket option), the file made 0600, a stale socket file
 * replaced, a live one or any other file refused with a message, the file
 * gone at stop. */
TEST(http_h1_unix_socket) {
    char dir[] = "/tmp/test-http-unix-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char path[128], plain[128], err[256] = "";
    snprintf(path, sizeof path, "%s/api.sock", dir);
    snprintf(plain, sizeof plain, "%s/not-a-socket", dir);
    FILE *f = fopen(plain, "w");
    REQUIRE(f != NULL);
    fclose(f);
    struct srv s;
    struct http_server_config cfg = {.unix_path = plain};
    CHECK(srv_start_cfg(&s, cfg, err, sizeof err) != 0);
    CHECK_HAS(err, "not a socket");
    struct stat st;
    CHECK(stat(plain, &st) == 0 && S_ISREG(st.st_mode)); /* left alone */
    /* a path another server listens on is not taken over */
    int live = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un la = {.sun_family = AF_UNIX};
    memcpy(la.sun_path, path, strlen(path) + 1);
    REQUIRE(bind(live, (struct sockaddr *)&la, sizeof la) == 0 && listen(live, 4) == 0);
    cfg = (struct http_server_config){.unix_path = path};
    CHECK(srv_start_cfg(&s, cfg, err, sizeof err) != 0);
    CHECK_HAS(err, "in use");
    close(live);
    unlink(path);
    cfg = (struct http_server_config){.unix_path = "/nonexistent-dir-for-test/api.sock"};
    CHECK(srv_start_cfg(&s, cfg, err, sizeof err) != 0);
    CHECK_HAS(err, "its directory does not exist");
    /* TLS and a Unix socket do not go together */
    cfg = (struct http_server_config){.unix_path = path, .tls_cert = "x.crt", .tls_key = "x.key"};
    CHECK(srv_start_cfg(&s, cfg, err, sizeof err) != 0);
    CHECK_HAS(err, "plain HTTP/1.1 only");

    /* a stale socket file from a process that died without removing it */
    int stale = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1); /* path is under 64 bytes */
    REQUIRE(bind(stale, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(stale);
    CHECK(unix_connect(path) < 0); /* nobody listens there */
    cfg = (struct http_server_config){.unix_path = path};
    REQUIRE(srv_start_cfg(&s, cfg, NULL, 0) == 0);
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK_I64(st.st_mode & 0777, 0600);

    int fd = unix_connect(path);
    REQUIRE(fd >= 0);
    struct buf b = {0};
    CHECK(raw_sends(fd, "GET /u1?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    raw_read(fd, &b, "\"path\":\"/u1\"", 1, NULL);
    CHECK_HAS(b.p, "HTTP/1.1 200");
    CHECK_HAS(b.p, "\"path\":\"/u1\"");
    free(b.p);
    b = (struct buf){0};
    CHECK(raw_sends(fd, "GET /defer HTTP/1.1\r\nHost: localhost\r\n\r\n")); /* answered later, same connection */
    bool closed = false;
    raw_read(fd, &b, "deferred", 1, &closed);
    CHECK(!closed);
    CHECK_HAS(b.p, "deferred");
    free(b.p);
    close(fd);

    /* a second server on the same TCP port is refused with a message, and
     * the first serves on */
    struct srv s2;
    cfg = (struct http_server_config){.port = s.port};
    CHECK(srv_start_cfg(&s2, cfg, err, sizeof err) != 0);
    char want[64];
    snprintf(want, sizeof want, "cannot listen on 127.0.0.1:%d", s.port);
    CHECK_HAS(err, want);

    /* the TCP port serves alongside */
    int tfd = raw_connect(s.port);
    REQUIRE(tfd >= 0);
    b = (struct buf){0};
    CHECK(raw_sends(tfd, "GET /t HTTP/1.1\r\nHost: x\r\n\r\n"));
    raw_read(tfd, &b, "\"path\":\"/t\"", 1, NULL);
    CHECK_HAS(b.p, "\"path\":\"/t\"");
    free(b.p);
    close(tfd);

    /* libcurl through the socket: a POST body comes back */
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, path);
    struct buf out = {0};
    const char *body = "{\"over\":\"unix\"}";
    CHECK_I64(req(c, "POST", "http://localhost/echo", body, (long)strlen(body), NULL, &out), 200);
    CHECK_HAS(out.p, "unix");
    free(out.p);
    curl_easy_cleanup(c);

    srv_stop(&s);
    CHECK(lstat(path, &st) != 0 && errno == ENOENT); /* removed at stop */
    unlink(plain);
    rmdir(dir);
}

/* A handler that opens a stream and ends it before returning has answered:
 * nothing more may follow on the connection (an extra empty reply would be
 * taken by the client as the answer to its next request). */
TEST(http_h1_stream_ended_inside_its_handler_is_the_only_answer) {
    struct srv s;
    REQUIRE(srv_start(&s, 0) == 0);
    int fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    static const char two[] = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(raw_send(fd, two, sizeof two - 1));
    struct buf b = {0};
    raw_read(fd, &b, "\"path\":\"/after\"", 1, NULL);
    REQUIRE(b.p);
    int statuses = 0;
    for (const char *q = b.p; (q = strstr(q, "HTTP/1.1 ")); q++) statuses++;
    CHECK_I64(statuses, 2); /* the stream's and /after's, nothing between */
    const char *end = strstr(b.p, "0\r\n\r\n"), *next = strstr(b.p, "\r\n0\r\n\r\nHTTP/1.1 200");
    CHECK(end != NULL);
    CHECK(next != NULL); /* /after's reply follows the stream's last chunk directly */
    CHECK_HAS(b.p, "{\"n\":2}");
    free(b.p);
    /* the same one request at a time, the way a keep-alive client sends them */
    for (int i = 0; i < 20; i++) {
        b = (struct buf){0};
        static const char st[] = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
        CHECK(raw_send(fd, st, sizeof st - 1));
        raw_read(fd, &b, "0\r\n\r\n", 1, NULL);
        free(b.p);
        b = (struct buf){0};
        static const char af[] = "GET /after HTTP/1.1\r\nHost: x\r\n\r\n";
        CHECK(raw_send(fd, af, sizeof af - 1));
        raw_read(fd, &b, "\"path\"", 1, NULL);
        if (!b.p || strncmp(b.p, "HTTP/1.1 200", 12) || !strstr(b.p, "\"path\":\"/after\"")) {
            test_fail(__FILE__, __LINE__, "round %d: /after answered by %.80s", i, b.p ? b.p : "(nothing)");
            free(b.p);
            break;
        }
        free(b.p);
    }
    close(fd);
    srv_stop(&s);
}

TEST(http_h1_bad_heads_get_status_and_close) {
    struct srv s;
    REQUIRE(srv_start(&s, 0) == 0);
    struct {
        const char *what;
        char *req;
        const char *status, *reason;
    } cases[4] = {
        {"malformed request line", strdup("BLAH\r\n\r\n"), "HTTP/1.1 400", "BadRequest"},
        {"Content-Length not a number", strdup("POST /x HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"), "HTTP/1.1 400",
         "BadRequest"},
        {"head over 16 KiB", NULL, "HTTP/1.1 431", "RequestHeaderFieldsTooLarge"},
        {"over 100 header lines", NULL, "HTTP/1.1 431", "RequestHeaderFieldsTooLarge"},
    };
    size_t n = 20000;
    cases[2].req = malloc(n + 64);
    int k = snprintf(cases[2].req, 64, "GET /x HTTP/1.1\r\nX-Big: ");
    memset(cases[2].req + k, 'a', n);
    strcpy(cases[2].req + k + n, "\r\n\r\n");
    cases[3].req = malloc(120 * 16 + 64);
    k = snprintf(cases[3].req, 64, "GET /x HTTP/1.1\r\n");
    for (int i = 0; i < 120; i++) k += sprintf(cases[3].req + k, "X-H%03d: v\r\n", i);
    strcpy(cases[3].req + k, "\r\n");
    for (int i = 0; i < 4; i++) {
        int fd = raw_connect(s.port);
        REQUIRE(fd >= 0);
        raw_send(fd, cases[i].req, strlen(cases[i].req));
        struct buf b = {0};
        bool closed = false;
        raw_read(fd, &b, "\r\n\r\n{", 1, &closed);
        raw_read(fd, &b, "}", 1, &closed);
        if (!b.p || strncmp(b.p, cases[i].status, strlen(cases[i].status)))
            test_fail(__FILE__, __LINE__, "%s: got %.60s", cases[i].what, b.p ? b.p : "(nothing)");
        CHECK_HAS(b.p, cases[i].reason);
        CHECK(closed || raw_closed(fd));
        free(b.p);
        free(cases[i].req);
        close(fd);
    }
    srv_stop(&s);
    CHECK_I64(s.requests, 0); /* the handler never saw them */
}

TEST(http_h1_expect_continue_and_oversized_body_keepalive) {
    struct srv s;
    REQUIRE(srv_start(&s, 1024) == 0);
    int fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    /* 100-continue: the interim answer comes before the body is sent */
    static const char head[] = "POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    CHECK(raw_send(fd, head, sizeof head - 1));
    struct buf b = {0};
    raw_read(fd, &b, "\r\n\r\n", 1, NULL);
    CHECK_STR(b.p, "HTTP/1.1 100 Continue\r\n\r\n");
    CHECK(raw_send(fd, "hello", 5));
    raw_read(fd, &b, "\"bodyLen\":5", 1, NULL);
    CHECK_HAS(b.p, "\"body\":\"hello\"");
    free(b.p);
    b = (struct buf){0};
    /* a body over max_body is read and dropped: 413, and the pipelined request behind it is served */
    char big[4096 + 256];
    int k = snprintf(big, 256, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n");
    memset(big + k, 'z', 4096);
    CHECK(raw_send(fd, big, (size_t)k + 4096));
    CHECK(raw_send(fd, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n", 32));
    raw_read(fd, &b, "\"path\":\"/after\"", 1, NULL);
    REQUIRE(b.p);
    CHECK(!strncmp(b.p, "HTTP/1.1 413", 12));
    CHECK_HAS(b.p, "RequestEntityTooLarge");
    CHECK_HAS(b.p, "\"path\":\"/after\"");
    free(b.p);
    close(fd);
    srv_stop(&s);
    CHECK_I64(s.requests, 2); /* /x with its body, /after; never the oversized one */
}

/* A server frame: opcode and payload; returns the bytes used, 0 when incomplete. */
static size_t ws_parse(const unsigned char *p, size_t n, int *op, const unsigned char **pl, size_t *len) {
    if (n < 2) return 0;
    *op = p[0] & 0x0f;
    size_t l = p[1] & 0x7f, hl = 2;
    if (p[1] & 0x80) return 0; /* a server never masks */
    if (l == 126) {
        if (n < 4) return 0;
        l = (size_t)p[2] << 8 | p[3], hl = 4;
    }
    if (n < hl + l) return 0;
    *pl = p + hl, *len = l;
    return hl + l;
}

TEST(http_h1_websocket_handshake_messages_and_close) {
    struct srv s;
    REQUIRE(srv_start(&s, 0) == 0);
    int fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    /* RFC 6455's own example key and accept value */
    static const char up[] = "GET /stream?watch=1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    CHECK(raw_send(fd, up, sizeof up - 1));
    struct buf b = {0};
    bool closed = false;
    raw_read(fd, &b, "\x88\x02", 1, &closed); /* up to the close frame the stream's end sends */
    REQUIRE(b.p);
    CHECK(!strncmp(b.p, "HTTP/1.1 101", 12));
    CHECK_HAS(b.p, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    const char *f = strstr(b.p, "\r\n\r\n");
    REQUIRE(f);
    const unsigned char *p = (const unsigned char *)f + 4, *end = (const unsigned char *)b.p + b.n;
    int texts = 0, closes = 0;
    char got[128] = "";
    while (p < end) {
        int op;
        const unsigned char *pl;
        size_t len, used = ws_parse(p, (size_t)(end - p), &op, &pl, &len);
        if (!used) break;
        if (op == 1) {
            texts++;
            strncat(got, (const char *)pl, len < 40 ? len : 40);
        }
        if (op == 8) closes++;
        p += used;
    }
    CHECK_I64(texts, 3); /* one message per stream write */
    CHECK_STR(got, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
    CHECK_I64(closes, 1);
    free(b.p);
    close(fd);

    /* an upgrade without a key is refused; a version other than 13 too */
    static const char bad[] = "GET /stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Version: 13\r\n\r\n";
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    CHECK(raw_send(fd, bad, sizeof bad - 1));
    b = (struct buf){0};
    raw_read(fd, &b, "}", 1, NULL);
    CHECK(b.p && !strncmp(b.p, "HTTP/1.1 400", 12));
    free(b.p);
    close(fd);
    srv_stop(&s);
    CHECK_I64(s.stream_closes, 1);
}

/* Over TLS with HTTP/2 (ALPN), every answer without a body ends its stream:
 * an empty 200 (GET /openapi/v2 as kubectl 1.20 asks it), 201, 204, errors
 * without a body, HEAD, and a deferred empty reply. Each must complete within
 * a second on one reused HTTP/2 connection; before the fix the stream
 * stayed open until the client gave up. */
TEST(http_h2_empty_bodies_end_their_streams) {
    char dir[] = "/tmp/test-http-h2-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char crt[128], key[128], err[256] = "";
    snprintf(crt, sizeof crt, "%s/s.crt", dir);
    snprintf(key, sizeof key, "%s/s.key", dir);
    REQUIRE(tls_cert_ensure(crt, key, err, sizeof err) == 0);
    struct srv s;
    REQUIRE(srv_start_cfg(&s, (struct http_server_config){.tls_cert = crt, .tls_key = key}, NULL, 0) == 0);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(c, CURLOPT_CAINFO, crt);
    struct buf b = {0};
    char url[256];
    static const struct {
        const char *method, *path;
        long code;
    } cases[] = {
        {"GET", "/empty?status=200", 200}, {"POST", "/empty?status=201", 201}, {"DELETE", "/empty?status=204", 204},
        {"GET", "/empty?status=404", 404}, {"PUT", "/empty?status=409", 409}, {"GET", "/empty?status=500", 500},
        {"HEAD", "/after", 200},           {"GET", "/defer-empty", 204},      {"GET", "/after", 200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(url, sizeof url, "https://127.0.0.1:%d%s", s.port, cases[i].path);
        uint64_t t0 = uv_hrtime();
        long code = req(c, cases[i].method, url, NULL, 0, NULL, &b);
        double ms = (double)(uv_hrtime() - t0) / 1e6;
        long ver = 0;
        curl_easy_getinfo(c, CURLINFO_HTTP_VERSION, &ver);
        if (code != cases[i].code || ms > 1000 || ver != CURL_HTTP_VERSION_2_0)
            test_fail(__FILE__, __LINE__, "%s %s: code %ld (want %ld) after %.0f ms, http version %ld", cases[i].method,
                      cases[i].path, code, cases[i].code, ms, ver);
        if (strcmp(cases[i].path, "/after") || strcmp(cases[i].method, "GET")) CHECK_I64(b.n, 0);
    }
    long conns = -1;
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &conns);
    CHECK_I64(conns, 0); /* the last request reused the one connection */
    free(b.p);
    curl_easy_cleanup(c);
    srv_stop(&s);
    unlink(crt);
    unlink(key);
    rmdir(dir);
}

/* ---- hostile heads, on both ports ---- */

/* A TLS connection to port offering HTTP/1.1 only by ALPN; NULL when it cannot. */
static SSL *tls_connect(SSL_CTX *ctx, int port, int *fd_out) {
    int fd = raw_connect(port);
    if (fd < 0) return NULL;
    SSL *ssl = SSL_new(ctx);
    SSL_set_alpn_protos(ssl, (const unsigned char *)"\x08http/1.1", 9);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) {
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    *fd_out = fd;
    return ssl;
}

/* Sends req (n bytes) on a new connection to the plain port, or over TLS
 * (HTTP/1.1) when tls, and reads the answer until the end of its JSON body,
 * the close or 5 s. */
static void exchange(int port, bool tls, const char *req, size_t n, struct buf *b) {
    *b = (struct buf){0};
    if (!tls) {
        int fd = raw_connect(port);
        if (fd < 0) return;
        raw_send(fd, req, n);
        raw_read(fd, b, "}", 1, NULL);
        close(fd);
        return;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    int fd = -1;
    SSL *ssl = tls_connect(ctx, port, &fd);
    if (ssl && SSL_write(ssl, req, (int)n) == (int)n) {
        for (int i = 0; i < 1000 && !(b->p && strstr(b->p, "}")); i++) {
            char tmp[16384];
            int r = SSL_read(ssl, tmp, sizeof tmp);
            if (r <= 0) break;
            on_data(tmp, 1, (size_t)r, b);
        }
    }
    if (ssl) SSL_free(ssl);
    if (fd >= 0) close(fd);
    SSL_CTX_free(ctx);
}

/* "GET /q?p0=1&...&p<n-1>=1<tail> HTTP/1.1" with headers; malloc'd. */
static char *many_args(int n, const char *tail, size_t *len) {
    size_t cap = (size_t)n * 16 + 256;
    char *r = malloc(cap);
    size_t k = (size_t)snprintf(r, cap, "GET /q?");
    for (int i = 0; i < n; i++) k += (size_t)snprintf(r + k, cap - k, "%sp%d=1", i ? "&" : "", i);
    k += (size_t)snprintf(r + k, cap - k, "%s HTTP/1.1\r\nHost: x\r\n\r\n", tail);
    *len = k;
    return r;
}

/* Too many query arguments, a path too long, a NUL or a control character
 * in a header value: refused with a Status on the plain port and over TLS,
 * the handler never called. Before: the 65th argument on was dropped (a
 * labelSelector behind 64 pads was lost, so a DELETE took every object),
 * and a header value was cut at a NUL ("Bearer TOKEN\0junk" read as the
 * token). Exactly HTTP_MAX_ARGS arguments and a path of HTTP_MAX_PATH bytes
 * still pass. */
TEST(http_hostile_heads_refused_on_both_ports) {
    char dir[] = "/tmp/test-http-hostile-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char crt[128], key[128], err[256] = "";
    snprintf(crt, sizeof crt, "%s/s.crt", dir);
    snprintf(key, sizeof key, "%s/s.key", dir);
    REQUIRE(tls_cert_ensure(crt, key, err, sizeof err) == 0);
    for (int tls = 0; tls < 2; tls++) {
        struct srv s;
        struct http_server_config cfg = {0};
        if (tls) cfg.tls_cert = crt, cfg.tls_key = key;
        REQUIRE(srv_start_cfg(&s, cfg, NULL, 0) == 0);
        struct buf b;
        size_t n;
        char *r = many_args(HTTP_MAX_ARGS, "&labelSelector=grp%3Da", &n);
        exchange(s.port, tls, r, n, &b);
        free(r);
        if (!b.p || strncmp(b.p, "HTTP/1.1 414", 12))
            test_fail(__FILE__, __LINE__, "tls=%d: 65 arguments answered %.60s", tls, b.p ? b.p : "(nothing)");
        CHECK_HAS(b.p, "\"kind\":\"Status\"");
        CHECK_HAS(b.p, "\"reason\":\"RequestURITooLong\"");
        CHECK_HAS(b.p, "\"code\":414");
        free(b.p);
        r = many_args(HTTP_MAX_ARGS, "", &n);
        exchange(s.port, tls, r, n, &b);
        free(r);
        CHECK(b.p && !strncmp(b.p, "HTTP/1.1 200", 12));
        CHECK_HAS(b.p, "[\"p63\",\"1\"]");
        free(b.p);
        /* the path: HTTP_MAX_PATH bytes pass, one more is refused */
        for (int extra = 0; extra < 2; extra++) {
            size_t plen = HTTP_MAX_PATH + (size_t)extra;
            char *req = malloc(plen + 64);
            memcpy(req, "GET ", 4);
            req[4] = '/';
            memset(req + 5, 'a', plen - 1);
            n = 4 + plen + (size_t)snprintf(req + 4 + plen, 60, " HTTP/1.1\r\nHost: x\r\n\r\n");
            exchange(s.port, tls, req, n, &b);
            free(req);
            const char *want = extra ? "HTTP/1.1 414" : "HTTP/1.1 200";
            if (!b.p || strncmp(b.p, want, 12))
                test_fail(__FILE__, __LINE__, "tls=%d: a path of %zu bytes answered %.60s", tls, plen,
                          b.p ? b.p : "(nothing)");
            if (extra) CHECK_HAS(b.p, "\"reason\":\"RequestURITooLong\"");
            free(b.p);
        }
        /* NUL, SOH and DEL inside header values */
        static const char nul[] = "GET /x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer TOKEN\0junk\r\n\r\n";
        static const char soh[] = "GET /x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer TOKEN\001junk\r\n\r\n";
        static const char del[] = "GET /x HTTP/1.1\r\nHost: x\r\nAccept: a\177b\r\n\r\n";
        const struct {
            const char *what, *req;
            size_t len;
        } bad[] = {{"NUL", nul, sizeof nul - 1}, {"SOH", soh, sizeof soh - 1}, {"DEL", del, sizeof del - 1}};
        for (size_t i = 0; i < 3; i++) {
            exchange(s.port, tls, bad[i].req, bad[i].len, &b);
            if (!b.p || strncmp(b.p, "HTTP/1.1 400", 12))
                test_fail(__FILE__, __LINE__, "tls=%d: %s in a header answered %.60s", tls, bad[i].what,
                          b.p ? b.p : "(nothing)");
            CHECK_HAS(b.p, "\"reason\":\"BadRequest\"");
            free(b.p);
        }
        srv_stop(&s);
        CHECK_I64(s.requests, 2); /* the 64 arguments and the longest path; nothing refused reached it */
    }
    unlink(crt);
    unlink(key);
    rmdir(dir);
}

/* ---- replies a client does not read ---- */

/* The server's counts, asked over a connection of their own (https when
 * the handle has a CA set). */
static bool get_stats(CURL *c, int port, struct http_server_stats *st, double *ms) {
    char url[128];
    char *ca = NULL;
    curl_easy_getinfo(c, CURLINFO_PRIVATE, &ca);
    snprintf(url, sizeof url, "%s://127.0.0.1:%d/stats", ca ? "https" : "http", port);
    struct buf b = {0};
    uint64_t t0 = uv_hrtime();
    long code = req(c, "GET", url, NULL, 0, NULL, &b);
    if (ms) *ms = (double)(uv_hrtime() - t0) / 1e6;
    json_t *o = code == 200 ? json_loads(b.p ? b.p : "", 0, NULL) : NULL;
    free(b.p);
    if (!o) return false;
    st->output = (size_t)json_integer_value(json_object_get(o, "output"));
    st->output_peak = (size_t)json_integer_value(json_object_get(o, "outputPeak"));
    st->conn_output_peak = (size_t)json_integer_value(json_object_get(o, "connOutputPeak"));
    st->held = (unsigned)json_integer_value(json_object_get(o, "held"));
    st->connections = (unsigned)json_integer_value(json_object_get(o, "connections"));
    json_decref(o);
    return true;
}

/* A connection that can take little: a small receive buffer, set before connecting. */
static int raw_connect_small(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 65536;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return connect_timed(fd, (struct sockaddr *)&a, sizeof a);
}

#define FLOOD 300             /* pipelined requests */
#define FLOOD_REPLY 65536     /* bytes in each reply's body: 19 MiB in all */
#define FLOOD_CONN_MAX (256u << 10)

/* FLOOD requests for FLOOD_REPLY-byte replies, one of them deferred, sent
 * at once on fd. */
static bool flood(int fd) {
    size_t cap = FLOOD * 64, n = 0;
    char *r = malloc(cap);
    for (int i = 0; i < FLOOD; i++)
        n += (size_t)snprintf(r + n, cap - n,
                              i == 10 ? "GET /defer HTTP/1.1\r\nHost: x\r\n\r\n"
                                      : "GET /sized?n=%d&i=%d HTTP/1.1\r\nHost: x\r\n\r\n",
                              FLOOD_REPLY, i);
    bool ok = raw_send(fd, r, n);
    free(r);
    return ok;
}

/* A client pipelines FLOOD requests and reads nothing: the server stops
 * taking its requests once FLOOD_CONN_MAX bytes of replies wait for it,
 * holds no more than that and one reply, and keeps answering others at
 * once. When the client reads, every reply arrives, in order, the deferred
 * one in its place. Before: all 19 MiB of replies were built and held. */
TEST(http_h1_unread_pipelined_replies_are_bounded) {
    struct srv s;
    REQUIRE(srv_start_cfg(&s, (struct http_server_config){.max_conn_output = FLOOD_CONN_MAX}, NULL, 0) == 0);
    CURL *c = curl_easy_init();
    int fd = raw_connect_small(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(flood(fd));
    struct http_server_stats st = {0};
    double ms = 0, worst = 0;
    for (int i = 0; i < 250 && !(get_stats(c, s.port, &st, &ms) && st.held == 1); i++) usleep(20000);
    CHECK_I64(st.held, 1);
    for (int i = 0; i < 20; i++) { /* another client is answered at once meanwhile */
        CHECK(get_stats(c, s.port, &st, &ms));
        if (ms > worst) worst = ms;
    }
    CHECK(worst < 500);
    size_t most = FLOOD_CONN_MAX + FLOOD_REPLY + 512; /* the bound and one reply past it */
    if (st.conn_output_peak > most || st.output > most || st.held != 1)
        test_fail(__FILE__, __LINE__, "held %u, output %zu, peak per connection %zu (at most %zu)", st.held,
                  st.output, st.conn_output_peak, most);
    /* the client reads now: everything, in order */
    size_t want = (size_t)(FLOOD - 1) * FLOOD_REPLY + 8, cap = want + FLOOD * 256; /* bodies, then heads */
    struct buf b = {.p = calloc(1, cap + 1)};
    for (int i = 0; i < 100000 && b.n < cap; i++) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, b.n >= want ? 200 : 5000) != 1) break; /* all in, or stuck */
        ssize_t r = recv(fd, b.p + b.n, cap - b.n, 0);
        if (r <= 0) break;
        b.n += (size_t)r;
    }
    const char *p = b.p;
    int next = 0;
    bool order = true;
    for (const char *q = p; (q = strstr(q, "\r\n\r\n")); q += 4) {
        int i = -1;
        if (!strncmp(q + 4, "deferred", 8)) i = 10;
        else sscanf(q + 4, "i=%d;", &i);
        if (i != next) order = false;
        next++;
    }
    CHECK(order);
    CHECK_I64(next, FLOOD);
    free(b.p);
    for (int i = 0; i < 250 && !(get_stats(c, s.port, &st, NULL) && st.held == 0 && st.output == 0); i++)
        usleep(20000);
    CHECK_I64(st.held, 0);
    CHECK_I64(st.output, 0);
    close(fd);
    curl_easy_cleanup(c);
    srv_stop(&s);
}

/* A client that never reads what it asked for is closed after
 * output_stall_ms held over its bound (300 ms here), and its output freed. */
TEST(http_h1_stalled_reader_is_closed) {
    struct srv s;
    REQUIRE(srv_start_cfg(&s, (struct http_server_config){.max_conn_output = FLOOD_CONN_MAX, .output_stall_ms = 300},
                          NULL, 0) == 0);
    CURL *c = curl_easy_init();
    int fd = raw_connect_small(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(flood(fd));
    struct http_server_stats st = {0};
    for (int i = 0; i < 250 && !(get_stats(c, s.port, &st, NULL) && st.held == 1); i++) usleep(20000);
    CHECK_I64(st.held, 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 250 && !(get_stats(c, s.port, &st, NULL) && st.connections == 1); i++) usleep(20000);
    double waited = ms_since(&t0);
    CHECK_I64(st.connections, 1); /* the stats client's own */
    CHECK_I64(st.held, 0);
    CHECK_I64(st.output, 0);
    CHECK(waited >= 150 && waited < 3000);
    close(fd);
    curl_easy_cleanup(c);
    srv_stop(&s);
}

struct paused {
    size_t got;
    bool stop; /* pause on data: the client reads nothing */
};
static size_t pause_data(char *d, size_t sz, size_t nm, void *ud) {
    struct paused *p = ud;
    if (p->stop) return CURL_WRITEFUNC_PAUSE;
    p->got += sz * nm;
    return sz * nm;
}

/* The same over TLS with HTTP/2: many streams on one connection ask for
 * large replies and read none. The connection's unsent replies stay within
 * its bound and one reply, the streams past it wait (not dispatched); when
 * the client reads, every stream completes whole. Before: every stream's
 * reply was built and held. */
TEST(http_h2_unread_streams_are_bounded) {
    char dir[] = "/tmp/test-http-h2flood-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char crt[128], key[128], err[256] = "";
    snprintf(crt, sizeof crt, "%s/s.crt", dir);
    snprintf(key, sizeof key, "%s/s.key", dir);
    REQUIRE(tls_cert_ensure(crt, key, err, sizeof err) == 0);
    struct srv s;
    REQUIRE(srv_start_cfg(&s, (struct http_server_config){.tls_cert = crt, .tls_key = key,
                                                          .max_conn_output = FLOOD_CONN_MAX},
                          NULL, 0) == 0);
    enum { N = 20 }; /* lws 4.1 drops a connection with more than 24 streams open */
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    CURL *e[N];
    struct paused p[N];
    char url[128];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/sized?n=%d&i=0", s.port, FLOOD_REPLY * 4);
    for (int i = 0; i < N; i++) {
        p[i] = (struct paused){.stop = true};
        e[i] = curl_easy_init();
        curl_easy_setopt(e[i], CURLOPT_URL, url);
        curl_easy_setopt(e[i], CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(e[i], CURLOPT_CAINFO, crt);
        curl_easy_setopt(e[i], CURLOPT_PIPEWAIT, 1L); /* all on one connection */
        curl_easy_setopt(e[i], CURLOPT_WRITEFUNCTION, pause_data);
        curl_easy_setopt(e[i], CURLOPT_WRITEDATA, &p[i]);
        curl_multi_add_handle(m, e[i]);
    }
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 1L);
    int running = N;
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_CAINFO, crt);
    curl_easy_setopt(c, CURLOPT_PRIVATE, crt);
    struct http_server_stats st = {0};
    /* the client takes nothing while the server answers what it will */
    for (int i = 0; i < 300; i++) {
        curl_multi_perform(m, &running);
        curl_multi_poll(m, NULL, 0, 10, NULL);
        if (i % 20 == 19 && get_stats(c, s.port, &st, NULL) && st.held > 0 && st.output > FLOOD_CONN_MAX) break;
    }
    CHECK(st.held > 0);
    size_t most = FLOOD_CONN_MAX + FLOOD_REPLY * 4 + 512;
    if (st.conn_output_peak > most)
        test_fail(__FILE__, __LINE__, "one connection held %zu bytes unsent (at most %zu)", st.conn_output_peak, most);
    /* now it reads: every stream completes */
    for (int i = 0; i < N; i++) {
        p[i].stop = false;
        curl_easy_pause(e[i], CURLPAUSE_CONT);
    }
    for (int i = 0; i < 3000 && running; i++) {
        curl_multi_perform(m, &running);
        curl_multi_poll(m, NULL, 0, 10, NULL);
    }
    CHECK_I64(running, 0);
    long conns = 0;
    for (int i = 0; i < N; i++) {
        long code = 0, nc = 0;
        curl_easy_getinfo(e[i], CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(e[i], CURLINFO_NUM_CONNECTS, &nc);
        conns += nc;
        if (code != 200 || p[i].got != (size_t)FLOOD_REPLY * 4)
            test_fail(__FILE__, __LINE__, "stream %d: %ld with %zu bytes", i, code, p[i].got);
        curl_multi_remove_handle(m, e[i]);
        curl_easy_cleanup(e[i]);
    }
    CHECK_I64(conns, 1);
    curl_multi_cleanup(m);
    curl_easy_cleanup(c);
    srv_stop(&s);
    unlink(crt);
    unlink(key);
    rmdir(dir);
}
