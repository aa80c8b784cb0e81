/* The echo server and client helpers of the HTTP layer's integration tests
 * (http_fixture.h). */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <uv.h>

#include "http_fixture.h"
#include "tlscert.h"
#include "test.h"

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
        o = json_pack("{s:I, s:I, s:I, s:i, s:I, s:i, s:I}", "output", (json_int_t)st.output, "outputPeak",
                      (json_int_t)st.output_peak, "connOutputPeak", (json_int_t)st.conn_output_peak, "held",
                      (int)st.held, "heldTotal", (json_int_t)st.held_total, "connections", (int)st.connections,
                      "refused", (json_int_t)st.refused);
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
    uv_close((uv_handle_t *)&s->ask, NULL);
}

static void on_ask(uv_async_t *a) {
    struct srv *s = a->data;
    pthread_mutex_lock(&s->ask_mu);
    if (s->asked) {
        http_server_stats(s->http, &s->answer);
        s->asked = false;
        pthread_cond_signal(&s->ask_cv);
    }
    pthread_mutex_unlock(&s->ask_mu);
}

void srv_stats(struct srv *s, struct http_server_stats *out) {
    pthread_mutex_lock(&s->ask_mu);
    s->asked = true;
    uv_async_send(&s->ask);
    while (s->asked) pthread_cond_wait(&s->ask_cv, &s->ask_mu);
    *out = s->answer;
    pthread_mutex_unlock(&s->ask_mu);
}

static void *loop_thread(void *arg) {
    struct srv *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* The echo server on cfg (bind address, handler and ud filled in); err, when
 * given, takes a refusal's message instead of failing the test. */
int srv_start_cfg(struct srv *s, struct http_server_config cfg, char *err_out, size_t errlen) {
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
    uv_async_init(&s->loop, &s->ask, on_ask);
    s->ask.data = s;
    pthread_mutex_init(&s->ask_mu, NULL);
    pthread_cond_init(&s->ask_cv, NULL);
    pthread_create(&s->thread, NULL, loop_thread, s);
    return 0;
}

int srv_start_timeouts(struct srv *s, size_t max_body, unsigned idle_ms, unsigned head_ms) {
    struct http_server_config cfg = {.max_body = max_body, .idle_timeout_ms = idle_ms, .head_timeout_ms = head_ms};
    return srv_start_cfg(s, cfg, NULL, 0);
}

int srv_start(struct srv *s, size_t max_body) { return srv_start_timeouts(s, max_body, 0, 0); }

void srv_stop(struct srv *s) {
    uv_async_send(&s->stop);
    pthread_join(s->thread, NULL); /* the loop ran dry: every handle closed */
    http_server_free(s->http);
    for (int i = 0; i < 100 && uv_loop_close(&s->loop) == UV_EBUSY; i++) uv_run(&s->loop, UV_RUN_NOWAIT);
    pthread_mutex_destroy(&s->ask_mu);
    pthread_cond_destroy(&s->ask_cv);
}

size_t on_data(char *d, size_t sz, size_t nm, void *ud) {
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
long req(CURL *c, const char *method, const char *url, const char *body, long body_len,
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

int connect_timed(int fd, const struct sockaddr *a, socklen_t len) {
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, a, len)) {
        close(fd);
        return -1;
    }
    return fd;
}

int raw_connect(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return connect_timed(socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&a, sizeof a);
}

bool raw_send(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w, n -= (size_t)w;
    }
    return true;
}

bool raw_sends(int fd, const char *p) { return raw_send(fd, p, strlen(p)); }

/* Reads into b until it holds `want` occurrences of needle, the peer closes
 * (*closed) or 5 s pass. */
void raw_read(int fd, struct buf *b, const char *needle, int want, bool *closed) {
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
bool raw_closed(int fd) {
    char tmp[4096];
    for (int i = 0; i < 100; i++) {
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r == 0) return true;
        if (r < 0) return false;
    }
    return false;
}

double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The idle and head timeouts (300 and 400 ms here): an idle keep-alive
 * connection and a head or body that stalls are closed in time; a
 * connection with an open stream or a reply on its way is not. */

int tls_files_make(struct tls_files *t) {
    snprintf(t->dir, sizeof t->dir, "/tmp/test-http-tls-XXXXXX");
    if (!mkdtemp(t->dir)) return -errno;
    snprintf(t->crt, sizeof t->crt, "%s/s.crt", t->dir);
    snprintf(t->key, sizeof t->key, "%s/s.key", t->dir);
    char err[256];
    return tls_cert_ensure(t->crt, t->key, err, sizeof err);
}

void tls_files_remove(const struct tls_files *t) {
    unlink(t->crt);
    unlink(t->key);
    rmdir(t->dir);
}
