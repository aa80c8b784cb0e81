/* The Kubernetes API client: libcurl multi on the libuv loop (uv_poll_t per
 * socket, one uv_timer_t per multi), async and blocking requests. See
 * kclient.h for the contract and kclient_int.h for the internal layout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kclient_int.h"
#include "jparse.h"

/* One poll handle per socket number, made when curl first reports it and
 * ended by curl's close-socket callback, not per transfer: libuv checks a
 * descriptor with an epoll add and delete when a handle is made. Events are
 * changed only when they differ. A socket curl lets go of (CURL_POLL_REMOVE:
 * between transfers, or a transfer removed) leaves the poll set at once:
 * curl may close it without the callback (a connect abandoned when its
 * transfer is removed, libcurl 7.88), and libuv aborts on its next epoll_ctl
 * for a socket closed behind its back. Its handle is kept for the number,
 * and serves whichever socket curl opens under it next. */
struct kc_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    struct kc_multi *m;
    int polling; /* the uv events registered now */
    int wanted;  /* what curl asked for; 0: not in a transfer */
    struct kc_sock *prev, *next;
};

struct kc_multi {
    struct kclient *c;
    CURLM *multi;
    uv_timer_t *timer;     /* separately allocated: freed by its close callback */
    struct kc_sock *socks; /* live poll handles */
    struct kc_sock **byfd; /* socket -> its handle */
    size_t nfd;
};

struct kc_req {
    struct kc_xfer x;
    struct kclient *c;
    CURL *easy;
    struct curl_slist *hdrs;
    char *body;            /* the request body (json_dumps) */
    char *buf;             /* the response body */
    size_t len, cap;
    bool too_big;
    kc_done_fn done;
    void *ud;
    bool waiting;          /* in the client's queue, not yet handed to curl */
    bool has_body;
    char *spec;            /* waiting: method, path and content type ("" for none), each NUL-ended; its handle
                            * is made when it starts, so a burst queued here holds no curl handles */
    struct kc_req *prev, *next;
    struct kc_req *qnext;  /* the queue */
    char errbuf[CURL_ERROR_SIZE];
};

/* ---- small helpers ---- */

static void set_err(char *err, size_t errlen, const char *fmt, const char *a) {
    if (err && errlen) snprintf(err, errlen, fmt, a ? a : "");
}

int kc_escape(const char *s, char *out, size_t len) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                     *p == '-' || *p == '.' || *p == '_' || *p == '~';
        char enc[3] = {(char)*p, 0, 0};
        size_t k = 1;
        if (!plain) {
            enc[0] = '%';
            enc[1] = hex[*p >> 4];
            enc[2] = hex[*p & 15];
            k = 3;
        }
        for (size_t i = 0; i < k; i++, n++)
            if (out && n + 1 < len) out[n] = enc[i];
    }
    if (out && len) out[n < len ? n : len - 1] = 0;
    return n > (size_t)0x7fffffff ? -EOVERFLOW : (int)n;
}

static const char *reason_for(long status) {
    switch (status) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "Unknown";
    }
}

void kc__status_error(long status, json_t *body, const char **msg, const char **reason) {
    static char generic[] = "request failed";
    const char *m = NULL, *r = NULL;
    if (json_is_object(body)) {
        m = json_string_value(json_object_get(body, "message"));
        r = json_string_value(json_object_get(body, "reason"));
    }
    if (!r || !*r) r = reason_for(status);
    if (!m || !*m) m = status >= 400 ? r : generic;
    *msg = m;
    *reason = r;
}

/* ---- the loop integration ---- */

static void multi_drive(struct kc_multi *m, curl_socket_t fd, int flags);

static void sock_closed(uv_handle_t *h) { free(h->data); }

static void sock_release(struct kc_multi *m, struct kc_sock *ks) {
    if (ks->prev) ks->prev->next = ks->next;
    else m->socks = ks->next;
    if (ks->next) ks->next->prev = ks->prev;
    if ((size_t)ks->fd < m->nfd && m->byfd[ks->fd] == ks) m->byfd[ks->fd] = NULL;
    uv_poll_stop(&ks->poll);
    uv_close((uv_handle_t *)&ks->poll, sock_closed);
}

static void sock_want(struct kc_sock *ks, int ev);

static void on_poll(uv_poll_t *h, int status, int events) {
    struct kc_sock *ks = h->data;
    if (!ks->wanted) { /* an event read before curl let go of it: curl finds out at reuse */
        sock_want(ks, 0);
        return;
    }
    int flags = 0;
    if (status < 0) flags = CURL_CSELECT_ERR;
    else {
        if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    }
    multi_drive(ks->m, ks->fd, flags);
}

/* Registers ev with the loop, only when it differs from what is registered. */
static void sock_want(struct kc_sock *ks, int ev) {
    if (ev == ks->polling) return;
    if (ev) uv_poll_start(&ks->poll, ev, on_poll);
    else uv_poll_stop(&ks->poll);
    ks->polling = ev;
}

static struct kc_sock *sock_for(struct kc_multi *m, curl_socket_t fd) {
    if (fd < 0) return NULL;
    if ((size_t)fd >= m->nfd) {
        size_t n = m->nfd ? m->nfd : 64;
        while (n <= (size_t)fd) n *= 2;
        struct kc_sock **t = realloc(m->byfd, n * sizeof *t);
        if (!t) return NULL;
        memset(t + m->nfd, 0, (n - m->nfd) * sizeof *t);
        m->byfd = t;
        m->nfd = n;
    }
    struct kc_sock *ks = m->byfd[fd];
    if (ks) return ks;
    ks = calloc(1, sizeof *ks);
    if (!ks) return NULL;
    if (uv_poll_init_socket(m->c->loop, &ks->poll, fd)) {
        free(ks);
        return NULL;
    }
    ks->poll.data = ks;
    ks->fd = fd;
    ks->m = m;
    ks->next = m->socks;
    if (m->socks) m->socks->prev = ks;
    m->socks = ks;
    m->byfd[fd] = ks;
    return ks;
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
    struct kc_multi *m = userp;
    if (what == CURL_POLL_REMOVE) {
        struct kc_sock *ks = (size_t)fd < m->nfd ? m->byfd[fd] : NULL;
        if (ks) {
            ks->wanted = 0;
            sock_want(ks, 0);
        }
        return 0;
    }
    struct kc_sock *ks = sock_for(m, fd);
    if (!ks) return -1;
    int ev = 0;
    if (what & CURL_POLL_IN) ev |= UV_READABLE;
    if (what & CURL_POLL_OUT) ev |= UV_WRITABLE;
    ks->wanted = ev;
    sock_want(ks, ev);
    return 0;
}

/* curl closes a socket: its handle goes first (the number may come back at once). */
static int on_close_socket(void *clientp, curl_socket_t fd) {
    struct kc_multi *m = clientp;
    struct kc_sock *ks = fd >= 0 && (size_t)fd < m->nfd ? m->byfd[fd] : NULL;
    if (ks) sock_release(m, ks);
    return close(fd);
}

static void on_timer(uv_timer_t *t) {
    struct kc_multi *m = t->data;
    multi_drive(m, CURL_SOCKET_TIMEOUT, 0);
}

static int on_timer_set(CURLM *multi, long timeout_ms, void *userp) {
    struct kc_multi *m = userp;
    if (timeout_ms < 0) uv_timer_stop(m->timer);
    else uv_timer_start(m->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

/* Finished transfers: all their messages are read before any handle is
 * removed, since curl_multi_remove_handle scans the unread messages (reading
 * one and removing its handle each in turn is quadratic in a busy turn). */
static void process_done(struct kc_multi *m) {
    enum { BATCH = 256 };
    struct {
        CURL *e;
        CURLcode rc;
    } done[BATCH];
    for (;;) {
        CURLMsg *msg;
        int left, n = 0;
        while (n < BATCH && (msg = curl_multi_info_read(m->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            done[n].e = msg->easy_handle;
            done[n++].rc = msg->data.result;
        }
        if (!n) return;
        for (int i = 0; i < n; i++) {
            struct kc_xfer *x = NULL;
            curl_easy_getinfo(done[i].e, CURLINFO_PRIVATE, (char **)&x);
            if (m->c->free_pending) continue; /* destroy() removes and cancels what is left */
            curl_multi_remove_handle(m->multi, done[i].e);
            if (x && x->on_done) x->on_done(x, done[i].rc);
        }
        if (m->c->free_pending) return;
    }
}

static void multi_drive(struct kc_multi *m, curl_socket_t fd, int flags) {
    struct kclient *c = m->c;
    int running = 0;
    kc__enter(c);
    curl_multi_socket_action(m->multi, fd, flags, &running);
    kc__watch_flush_all(c);
    process_done(m);
    kc__leave(c);
}

static void timer_closed(uv_handle_t *h) { free(h); }

static struct kc_multi *multi_new(struct kclient *c, long max_conns) {
    struct kc_multi *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->c = c;
    m->timer = malloc(sizeof *m->timer);
    m->multi = curl_multi_init();
    if (!m->timer || !m->multi) {
        if (m->multi) curl_multi_cleanup(m->multi);
        free(m->timer);
        free(m);
        return NULL;
    }
    uv_timer_init(c->loop, m->timer);
    m->timer->data = m;
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, on_timer_set);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
    curl_multi_setopt(m->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* pelotond's HTTP/2 allows 100 streams open at once (it dropped
     * connections past ~16 under libwebsockets 4.1), kube-apiserver 100+ */
    curl_multi_setopt(m->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)KC_MAX_H2_STREAMS);
    if (max_conns > 0) {
        curl_multi_setopt(m->multi, CURLMOPT_MAX_HOST_CONNECTIONS, max_conns);
        curl_multi_setopt(m->multi, CURLMOPT_MAXCONNECTS, max_conns);
    }
    return m;
}

static void multi_free(struct kc_multi *m) {
    if (!m) return;
    curl_multi_cleanup(m->multi); /* closes its connections: on_close_socket */
    while (m->socks) sock_release(m, m->socks);
    uv_timer_stop(m->timer);
    uv_close((uv_handle_t *)m->timer, timer_closed);
    free(m->byfd);
    free(m);
}

int kc__multi_add(struct kc_multi *m, CURL *e) {
    /* a connection keeps the callback of the transfer that opened it */
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, m);
    return curl_multi_add_handle(m->multi, e) == CURLM_OK ? 0 : -ENOMEM;
}

void kc__multi_remove(struct kc_multi *m, CURL *e) { curl_multi_remove_handle(m->multi, e); }

/* ---- the client ---- */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int config_copy(struct kc_config *d, const struct kc_config *s) {
    memset(d, 0, sizeof *d);
    d->server = dup_or_null(s->server);
    d->token = dup_or_null(s->token);
    d->ca_file = dup_or_null(s->ca_file);
    d->ca_data = dup_or_null(s->ca_data);
    d->cert_file = dup_or_null(s->cert_file);
    d->cert_data = dup_or_null(s->cert_data);
    d->key_file = dup_or_null(s->key_file);
    d->key_data = dup_or_null(s->key_data);
    d->namespace = strdup(s->namespace && *s->namespace ? s->namespace : "default");
    d->unix_socket = dup_or_null(s->unix_socket);
    d->insecure = s->insecure;
    d->curl_requests = s->curl_requests;
    d->timeout_ms = s->timeout_ms > 0 ? s->timeout_ms : 30000;
    if (!d->server || !d->namespace || (s->token && !d->token) || (s->ca_file && !d->ca_file) ||
        (s->ca_data && !d->ca_data) || (s->cert_file && !d->cert_file) || (s->cert_data && !d->cert_data) ||
        (s->key_file && !d->key_file) || (s->key_data && !d->key_data) || (s->unix_socket && !d->unix_socket))
        return -ENOMEM;
    size_t n = strlen(d->server);
    while (n && d->server[n - 1] == '/') d->server[--n] = 0;
    return 0;
}

struct kclient *kclient_new(uv_loop_t *loop, const struct kc_config *cfg, char *err, size_t errlen) {
    if (!loop || !cfg || !cfg->server || !*cfg->server) {
        set_err(err, errlen, "kclient: %sno server configured", NULL);
        return NULL;
    }
    if (strncmp(cfg->server, "http://", 7) != 0 && strncmp(cfg->server, "https://", 8) != 0) {
        set_err(err, errlen, "kclient: server \"%s\" is not an http:// or https:// URL", cfg->server);
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        set_err(err, errlen, "kclient: %scurl_global_init failed", NULL);
        return NULL;
    }
    struct kclient *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    c->loop = loop;
    if (config_copy(&c->cfg, cfg)) goto oom;
    c->reqm = multi_new(c, KC_MAX_CONNS);
    c->watchm = multi_new(c, 0);
    if (!c->reqm || !c->watchm) goto oom;
    /* PELOTON_KCLIENT_CURL=1 is the switch back to libcurl for every request */
    const char *force = getenv("PELOTON_KCLIENT_CURL");
    if (!c->cfg.curl_requests && !(force && !strcmp(force, "1"))) c->h1 = kh1_new(c, c->cfg.server);
    return c;
oom:
    set_err(err, errlen, "kclient: %sout of memory", NULL);
    if (c) {
        multi_free(c->reqm);
        multi_free(c->watchm);
        kc_config_free(&c->cfg);
        free(c);
    }
    curl_global_cleanup();
    return NULL;
}

const struct kc_config *kclient_config(const struct kclient *c) { return &c->cfg; }
size_t kclient_inflight(const struct kclient *c) { return c->inflight; }

/* A finished request's handle: kept for the next request when there is room. */
static void easy_release(struct kclient *c, CURL *e) {
    if (!e) return;
    if (!c->freeing && c->nidle < KC_EASY_IDLE) {
        curl_easy_reset(e); /* keeps its memory; the next setup sets every option again */
        c->idle[c->nidle++] = e;
    } else {
        curl_easy_cleanup(e);
    }
}

static void req_free(struct kc_req *r) {
    easy_release(r->c, r->easy);
    curl_slist_free_all(r->hdrs);
    free(r->body);
    free(r->buf);
    free(r->spec);
    free(r);
}

static size_t req_write(char *p, size_t sz, size_t n, void *ud);

/* The request's curl handle, set up to send it. */
static int req_easy(struct kclient *c, struct kc_req *r, const char *method, const char *path,
                    const char *content_type) {
    r->easy = kc__easy_new(c, method, path, content_type, r->has_body, false, &r->hdrs, r->errbuf);
    if (!r->easy) return -ENOMEM;
    if (r->has_body) {
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(r->body ? strlen(r->body) : 0));
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body ? r->body : "");
    }
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, req_write);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, (char *)&r->x);
    return 0;
}

/* Sends r: through kh1, or on a curl handle. Non-zero when it cannot start. */
static int req_start(struct kclient *c, struct kc_req *r, const char *method, const char *path,
                     const char *content_type) {
    if (c->h1) return kh1_start(c->h1, r, method, path, content_type, r->body, r->has_body);
    return req_easy(c, r, method, path, content_type) || kc__multi_add(c->reqm, r->easy);
}

/* A waiting request started from its saved method, path and content type. */
static int req_start_saved(struct kclient *c, struct kc_req *r) {
    const char *method = r->spec, *path = method + strlen(method) + 1, *ct = path + strlen(path) + 1;
    int rc = req_start(c, r, method, path, *ct ? ct : NULL);
    free(r->spec);
    r->spec = NULL;
    return rc;
}

static void req_unlink(struct kc_req *r) {
    struct kclient *c = r->c;
    if (r->prev) r->prev->next = r->next;
    else c->reqs = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->inflight--;
}

/* Requests go to curl only while it has a connection for them: more would
 * wait in curl's pending list, which curl scans on every handle it removes
 * (quadratic with a few hundred bindings in flight). The rest wait here, in
 * order. */
static void req_promote(struct kclient *c) {
    while (c->waitq && c->active < KC_MAX_CONNS && !c->freeing && !c->free_pending) {
        struct kc_req *r = c->waitq;
        c->waitq = r->qnext;
        if (!c->waitq) c->waitq_tail = NULL;
        r->qnext = NULL;
        r->waiting = false;
        if (req_start_saved(c, r)) { /* out of memory: it fails now */
            req_unlink(r);
            if (r->done) {
                struct kc_response resp = {.status = 0, .raw = "", .error = "cannot start the request"};
                r->done(r->ud, &resp);
            }
            req_free(r);
            continue;
        }
        c->active++;
    }
}

static void destroy(struct kclient *c) {
    c->freeing = true;
    kc__informer_destroy_all(c);
    kc__watch_destroy_all(c);
    kh1_free(c->h1); /* its connections go; their requests are cancelled below */
    c->h1 = NULL;
    while (c->reqs) {
        struct kc_req *r = c->reqs;
        if (!r->waiting && r->easy) kc__multi_remove(c->reqm, r->easy);
        req_unlink(r);
        if (r->done) {
            struct kc_response resp = {.status = 0, .raw = "", .error = "cancelled"};
            r->done(r->ud, &resp);
        }
        req_free(r);
    }
    kc__watch_reap(c);
    multi_free(c->reqm);
    multi_free(c->watchm);
    if (c->sync) curl_easy_cleanup(c->sync);
    while (c->nidle) curl_easy_cleanup(c->idle[--c->nidle]);
    for (int i = 0; i < c->nhdrs; i++) {
        free(c->hdrs[i].ctype);
        curl_slist_free_all(c->hdrs[i].list);
    }
    kc_config_free(&c->cfg);
    free(c);
    curl_global_cleanup();
}

void kc__enter(struct kclient *c) { c->depth++; }

void kc__leave(struct kclient *c) {
    if (--c->depth > 0) return;
    kc__watch_reap(c);
    if (c->free_pending) destroy(c);
}

void kclient_free(struct kclient *c) {
    if (!c || c->freeing) return;
    if (c->depth > 0) { /* from inside one of our callbacks: finish when it unwinds */
        c->free_pending = true;
        return;
    }
    destroy(c);
}

/* ---- easy handles ---- */

static size_t discard_cb(char *p, size_t sz, size_t n, void *ud) { return sz * n; }

int kc__easy_setup(struct kclient *c, CURL *e, const char *method, const char *path, const char *content_type,
                   bool has_body, bool watch, struct curl_slist **hdrs, char *errbuf) {
    const struct kc_config *cfg = &c->cfg;
    size_t ulen = strlen(cfg->server) + strlen(path) + 1;
    char *url = malloc(ulen);
    if (!url) return -ENOMEM;
    snprintf(url, ulen, "%s%s", cfg->server, path);
    CURLcode rc = curl_easy_setopt(e, CURLOPT_URL, url);
    free(url);
    if (rc != CURLE_OK) return -EINVAL;
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "peloton-c-kclient/1");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard_cb);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    if (cfg->unix_socket) curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, cfg->unix_socket);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* wait for a connection to learn whether it multiplexes only where it can
     * (h2 by ALPN over TLS), and never for a watch: a transfer told to wait
     * can sit forever behind a never-ending watch on an HTTP/1.1 connection */
    if (!watch && !strncmp(cfg->server, "https:", 6)) curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    if (watch) {
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 0L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
    } else {
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000L);
    }
    if (cfg->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (cfg->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, cfg->ca_file);
    if (cfg->ca_data) {
        struct curl_blob b = {.data = cfg->ca_data, .len = strlen(cfg->ca_data), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
    }
    if (cfg->cert_file) curl_easy_setopt(e, CURLOPT_SSLCERT, cfg->cert_file);
    if (cfg->cert_data) {
        struct curl_blob b = {.data = cfg->cert_data, .len = strlen(cfg->cert_data), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
    }
    if (cfg->cert_file || cfg->cert_data) curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    if (cfg->key_file) curl_easy_setopt(e, CURLOPT_SSLKEY, cfg->key_file);
    if (cfg->key_data) {
        struct curl_blob b = {.data = cfg->key_data, .len = strlen(cfg->key_data), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b);
    }
    if (cfg->key_file || cfg->key_data) curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");

    if (!strcmp(method, "GET")) curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    else curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);

    /* the same few lists serve every request: kept in the client */
    const char *ct = has_body ? (content_type ? content_type : "application/json") : NULL;
    for (int i = 0; i < c->nhdrs; i++)
        if (ct ? (c->hdrs[i].ctype && !strcmp(c->hdrs[i].ctype, ct)) : !c->hdrs[i].ctype) {
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs[i].list);
            *hdrs = NULL;
            return 0;
        }
    struct curl_slist *h = NULL, *t;
    char line[256];
    if (!(t = curl_slist_append(h, "Accept: application/json"))) goto oom;
    h = t;
    if (!(t = curl_slist_append(h, "Expect:"))) goto oom; /* no 100-continue round trip */
    h = t;
    if (has_body) {
        snprintf(line, sizeof line, "Content-Type: %s", content_type ? content_type : "application/json");
        if (!(t = curl_slist_append(h, line))) goto oom;
        h = t;
    }
    if (cfg->token && *cfg->token) {
        size_t n = strlen(cfg->token) + 32;
        char *auth = malloc(n);
        if (!auth) goto oom;
        snprintf(auth, n, "Authorization: Bearer %s", cfg->token);
        t = curl_slist_append(h, auth);
        free(auth);
        if (!t) goto oom;
        h = t;
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    char *ctcopy = ct ? strdup(ct) : NULL;
    if (c->nhdrs < KC_HDR_LISTS && (!ct || ctcopy)) { /* kept for the next requests of this type */
        c->hdrs[c->nhdrs].ctype = ctcopy;
        c->hdrs[c->nhdrs++].list = h;
        *hdrs = NULL;
    } else {
        free(ctcopy);
        *hdrs = h; /* a rare content type: the caller frees it */
    }
    return 0;
oom:
    curl_slist_free_all(h);
    return -ENOMEM;
}

CURL *kc__easy_new(struct kclient *c, const char *method, const char *path, const char *content_type,
                   bool has_body, bool watch, struct curl_slist **hdrs, char *errbuf) {
    CURL *e = c->nidle ? c->idle[--c->nidle] : curl_easy_init();
    if (!e) return NULL;
    if (kc__easy_setup(c, e, method, path, content_type, has_body, watch, hdrs, errbuf)) {
        curl_easy_cleanup(e);
        return NULL;
    }
    return e;
}

/* ---- async requests ---- */

static size_t sink_append(char **buf, size_t *len, size_t *cap, bool *too_big, const char *p, size_t n) {
    if (*len + n > KC_BODY_MAX) {
        *too_big = true;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 4096;
        while (nc < *len + n + 1) nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb) return 0;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
    return n;
}

static size_t req_write(char *p, size_t sz, size_t n, void *ud) {
    struct kc_req *r = ud;
    return sink_append(&r->buf, &r->len, &r->cap, &r->too_big, p, sz * n);
}

/* An answer with its HTTP status, or a transport failure (error set;
 * status 0), as the callback sees it, whichever way it came. */
static void answer_fill(struct kc_response *resp, long status, const char *error, const char *buf, size_t len) {
    resp->status = error ? 0 : status;
    resp->raw = buf ? buf : "";
    resp->rawlen = buf ? len : 0;
    resp->body = NULL;
    resp->error = resp->reason = NULL;
    if (error) {
        resp->error = error;
        return;
    }
    if (status < 200 || status > 299) { /* the Status says why */
        if (len) resp->body = jparse_loadb(buf, len, 0, NULL);
        kc__status_error(status, resp->body, &resp->error, &resp->reason);
    }
}

static void fill_response(struct kc_response *resp, CURL *e, CURLcode rc, bool too_big, const char *errbuf,
                          const char *buf, size_t len) {
    long status = 0;
    if (rc == CURLE_OK) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    const char *error = NULL;
    if (rc != CURLE_OK)
        error = too_big ? "response body exceeds KC_BODY_MAX" : errbuf && *errbuf ? errbuf : curl_easy_strerror(rc);
    answer_fill(resp, status, error, buf, len);
}

json_t *kc_response_body(const struct kc_response *r) {
    if (!r->body && r->rawlen) ((struct kc_response *)r)->body = jparse_loadb(r->raw, r->rawlen, 0, NULL);
    return r->body;
}

static void req_done(struct kc_xfer *x, CURLcode rc) {
    struct kc_req *r = (struct kc_req *)x;
    struct kclient *c = r->c;
    c->active--;
    req_unlink(r);
    if (r->done) {
        struct kc_response resp;
        fill_response(&resp, r->easy, rc, r->too_big, r->errbuf, r->buf, r->len);
        r->done(r->ud, &resp);
        json_decref(resp.body);
    }
    req_free(r);
    req_promote(c);
}

void kc__h1_done(struct kc_req *r, long status, char *body, size_t len, const char *error) {
    struct kclient *c = r->c;
    c->active--;
    req_unlink(r);
    if (r->done) {
        struct kc_response resp;
        answer_fill(&resp, status, status > 0 ? NULL : error && *error ? error : "request failed", body, len);
        r->done(r->ud, &resp);
        json_decref(resp.body);
    }
    free(body);
    req_free(r);
    req_promote(c);
}

static struct kc_req *request(struct kclient *c, const char *method, const char *path, const json_t *body,
                              const char *text, size_t tlen, const char *content_type, kc_done_fn done, void *ud,
                              int *rcp);

struct kc_req *kc__request(struct kclient *c, const char *method, const char *path, const json_t *body,
                           const char *content_type, kc_done_fn done, void *ud, int *rcp) {
    return request(c, method, path, body, NULL, 0, content_type, done, ud, rcp);
}

int kclient_request_text(struct kclient *c, const char *method, const char *path, const char *body, size_t len,
                         const char *content_type, kc_done_fn done, void *ud) {
    int rc;
    if (body && memchr(body, 0, len)) return -EINVAL; /* JSON text has no NUL byte */
    request(c, method, path, NULL, body, len, content_type, done, ud, &rc);
    return rc;
}

static struct kc_req *request(struct kclient *c, const char *method, const char *path, const json_t *body,
                              const char *text, size_t tlen, const char *content_type, kc_done_fn done, void *ud,
                              int *rcp) {
    int rc = -EINVAL;
    struct kc_req *r = NULL;
    if (!c) goto fail;
    if (c->freeing || c->free_pending) {
        rc = -ECANCELED;
        goto fail;
    }
    if (!method || !path || path[0] != '/') goto fail;
    rc = -ENOMEM;
    r = calloc(1, sizeof *r);
    if (!r) goto fail;
    r->x.kind = KC_XFER_REQ;
    r->x.on_done = req_done;
    r->c = c;
    r->done = done;
    r->ud = ud;
    if (body && !(r->body = jdump(body, JSON_COMPACT | JSON_ENCODE_ANY, NULL))) goto fail;
    if (text) {
        if (!(r->body = malloc(tlen + 1))) goto fail;
        memcpy(r->body, text, tlen);
        r->body[tlen] = 0;
    }
    r->has_body = ((body || text) && strcmp(method, "GET") != 0) || !strcmp(method, "POST") ||
                  !strcmp(method, "PUT") || !strcmp(method, "PATCH");
    if (c->active < KC_MAX_CONNS && !c->waitq) {
        if (req_start(c, r, method, path, content_type)) goto fail;
        c->active++;
    } else { /* curl has as many as it has connections for: wait here */
        size_t ml = strlen(method) + 1, pl = strlen(path) + 1, cl = content_type ? strlen(content_type) + 1 : 1;
        if (!(r->spec = malloc(ml + pl + cl))) goto fail;
        memcpy(r->spec, method, ml);
        memcpy(r->spec + ml, path, pl);
        memcpy(r->spec + ml + pl, content_type ? content_type : "", cl);
        r->waiting = true;
        if (c->waitq_tail) c->waitq_tail->qnext = r;
        else c->waitq = r;
        c->waitq_tail = r;
    }
    r->next = c->reqs;
    if (c->reqs) c->reqs->prev = r;
    c->reqs = r;
    c->inflight++;
    if (rcp) *rcp = 0;
    return r;
fail:
    if (r) req_free(r);
    if (rcp) *rcp = rc;
    return NULL;
}

void kc__request_abandon(struct kc_req *r) {
    if (r) r->done = NULL;
}

int kclient_request(struct kclient *c, const char *method, const char *path, const json_t *body,
                    const char *content_type, kc_done_fn done, void *ud) {
    int rc;
    kc__request(c, method, path, body, content_type, done, ud, &rc);
    return rc;
}

/* ---- blocking requests ---- */

static int curl_errno(CURLcode rc) {
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST: return -EHOSTUNREACH;
    case CURLE_OUT_OF_MEMORY: return -ENOMEM;
    case CURLE_URL_MALFORMAT: return -EINVAL;
    default: return -EIO;
    }
}

struct sync_sink {
    char *buf;
    size_t len, cap;
    bool too_big;
};

static size_t sync_write(char *p, size_t sz, size_t n, void *ud) {
    struct sync_sink *s = ud;
    return sink_append(&s->buf, &s->len, &s->cap, &s->too_big, p, sz * n);
}

long kclient_request_sync(struct kclient *c, const char *method, const char *path, const json_t *body,
                          const char *content_type, json_t **body_out, char *err, size_t errlen) {
    if (body_out) *body_out = NULL;
    if (err && errlen) err[0] = 0;
    if (!c || c->freeing || !method || !path || path[0] != '/') {
        set_err(err, errlen, "kclient: %sbad request", NULL);
        return -EINVAL;
    }
    if (!c->sync && !(c->sync = curl_easy_init())) return -ENOMEM;
    curl_easy_reset(c->sync); /* keeps the connection cache: keep-alive across calls */
    char errbuf[CURL_ERROR_SIZE] = "";
    char *payload = NULL;
    if (body && !(payload = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY))) return -ENOMEM;
    bool has_body = (body && strcmp(method, "GET") != 0) || !strcmp(method, "POST") || !strcmp(method, "PUT") ||
                    !strcmp(method, "PATCH");
    struct curl_slist *hdrs = NULL;
    if (kc__easy_setup(c, c->sync, method, path, content_type, has_body, false, &hdrs, errbuf)) {
        free(payload);
        set_err(err, errlen, "kclient: %scannot set up the request", NULL);
        return -ENOMEM;
    }
    struct sync_sink s = {0};
    if (has_body) {
        curl_easy_setopt(c->sync, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(payload ? strlen(payload) : 0));
        curl_easy_setopt(c->sync, CURLOPT_POSTFIELDS, payload ? payload : "");
    }
    curl_easy_setopt(c->sync, CURLOPT_WRITEFUNCTION, sync_write);
    curl_easy_setopt(c->sync, CURLOPT_WRITEDATA, &s);
    CURLcode rc = curl_easy_perform(c->sync);
    struct kc_response resp;
    fill_response(&resp, c->sync, rc, s.too_big, errbuf, s.buf, s.len);
    long ret = resp.status;
    if (rc != CURLE_OK) {
        ret = s.too_big ? -EFBIG : curl_errno(rc);
        set_err(err, errlen, "%s", resp.error);
    } else if (resp.error) {
        if (err && errlen) snprintf(err, errlen, "%s: %s", resp.reason, resp.error);
    }
    if (body_out) *body_out = kc_response_body(&resp);
    else json_decref(resp.body);
    curl_easy_setopt(c->sync, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c->sync, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(hdrs);
    free(payload);
    free(s.buf);
    return ret;
}
