/* The HTTP/1.1 server (h1_int.h): its TCP and Unix-domain listeners, each
 * new connection admitted by the bounds (conn_bounds.c) or refused, the
 * sweep that closes idle, slow and stalled connections, start and stop. */
#include <errno.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "h1_int.h"
#include "unixpath.h"

/* A connection past the bounds: told why (best effort, its request unread)
 * and closed. */
static void refuse(struct h1_conn *c, const char *why) {
    char msg[512];
    int body = snprintf(msg, sizeof msg,
                        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                        "\"message\":\"%s\",\"reason\":\"ServiceUnavailable\",\"code\":503}",
                        why);
    char buf[768];
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                     "Connection: close\r\nContent-Length: %d\r\n\r\n%s",
                     body, msg);
    uv_buf_t b = uv_buf_init(buf, (unsigned)n);
    uv_try_write(&c->io.stream, &b, 1);
    uv_close(&c->io.handle, h1_conn_freed);
}

static void on_connection(uv_stream_t *l, int status) {
    struct h1_server *s = l->data;
    if (status < 0 || s->stopping) return;
    struct h1_conn *c = calloc(1, sizeof *c);
    if (!c) return;
    c->srv = s;
    bool tcp = l->type == UV_TCP;
    if (tcp) uv_tcp_init(s->loop, &c->io.tcp);
    else uv_pipe_init(s->loop, &c->io.pipe, 0);
    c->io.handle.data = c;
    if (uv_accept(l, &c->io.stream)) {
        uv_close(&c->io.handle, h1_conn_freed);
        return;
    }
    if (tcp) {
        uv_tcp_nodelay(&c->io.tcp, 1);
        struct sockaddr_storage pa;
        int plen = sizeof pa;
        if (!uv_tcp_getpeername(&c->io.tcp, (struct sockaddr *)&pa, &plen))
            uv_ip_name((struct sockaddr *)&pa, c->peer, sizeof c->peer);
    }
    int over = http_conn_bounds_admit(&s->conns_open, c->peer);
    if (over && s->tls) { /* nothing can be said before the handshake, and doing it would spend what the bound saves */
        uv_close(&c->io.handle, h1_conn_freed);
        return;
    }
    if (over) {
        refuse(c, over == HTTP_REFUSED_ALL ? "too many connections to this server: try again later"
                                           : "too many connections from this client: try again later");
        return;
    }
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    c->state = S_HEAD;
    c->since_ms = uv_now(s->loop);
    if (s->tls) {
        BIO *r = BIO_new(BIO_s_mem()), *w = BIO_new(BIO_s_mem());
        c->ssl = r && w ? SSL_new(s->tls) : NULL;
        if (!c->ssl) {
            BIO_free(r);
            BIO_free(w);
            h1_close(c);
            return;
        }
        SSL_set_bio(c->ssl, r, w);
        SSL_set_accept_state(c->ssl);
    }
    h1_resume_reading(c);
}

/* Idle keep-alive connections and slow heads are closed. */
static void on_sweep(uv_timer_t *t) {
    struct h1_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    for (struct h1_conn *c = s->conns, *n; c; c = n) {
        n = c->next;
        if (c->over_since && c->state != S_STREAM && c->state != S_WS) { /* streams have max_buffer */
            size_t left = c->outlen + uv_stream_get_write_queue_size(&c->io.stream);
            if (left < c->stall_left) c->stall_left = left, c->over_since = now | 1; /* the client reads */
            else if (now - c->over_since > s->cfg.output_stall_ms) {
                h1_close(c);
                continue;
            }
        }
        if (c->held) continue; /* waits for its client to read, not for its requests */
        bool handshake = c->ssl && !c->tls_up;
        bool idle = (c->state == S_HEAD && c->inlen == 0 && !handshake) ||
                    (c->state == S_H2 && h2_conn_idle(c->h2) && !c->close_after);
        bool reading = (c->state == S_HEAD && c->inlen) || c->state == S_BODY || c->state == S_DISCARD || handshake;
        uint64_t age = now - c->since_ms;
        if ((idle && age > s->cfg.idle_timeout_ms) || (reading && age > s->cfg.head_timeout_ms)) h1_close(c);
    }
}

/* ---- the server ---- */

/* The server's own memory, once no handle of it is open. */
static void server_mem_free(struct h1_server *s) {
    SSL_CTX_free(s->tls); /* open sessions hold their own reference */
    free(s->tlsbuf);
    free(s);
}

/* The listener, flush and sweep handles live in the server: it goes after their closes. */
static void handle_closed(uv_handle_t *h) {
    struct h1_server *s = h->data;
    if (--s->open == 0 && s->free_asked) server_mem_free(s);
}

/* Closes a listener that never served and lets the close complete, so that
 * the server holding it may be freed at once (start-up failures). */
static void close_now(uv_loop_t *loop, uv_handle_t *h) {
    uv_close(h, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* Whether a server accepts connections at the socket path (a refused
 * connect means a stale file; a full backlog still means a live server). */
static bool unix_in_use(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, path, strlen(path) + 1);
    bool live = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 || errno == EAGAIN || errno == EINPROGRESS;
    close(fd);
    return live;
}

/* The Unix-domain listener at path: a socket file left by an earlier run is
 * replaced (any other file is not), and only the owner may connect (0600:
 * the socket file's mode is its access control; a socket a live server
 * answers on is not taken over). The path is the caller's
 * and must outlive the server (kept in cfg). */
static int listen_unix(struct h1_server *s, const char *path, char *err, size_t errlen) {
    struct stat st;
    if (strlen(path) > UNIX_SOCKET_PATH_MAX) {
        snprintf(err, errlen, "http: the socket path %s is longer than %zu bytes", path, UNIX_SOCKET_PATH_MAX);
        return -ENAMETOOLONG;
    }
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "http: %s exists and is not a socket", path);
            return -EEXIST;
        }
        if (unix_in_use(path)) {
            snprintf(err, errlen, "http: %s is in use by another server", path);
            return -EADDRINUSE;
        }
        unlink(path); /* stale: left by a process that died */
    }
    uv_pipe_init(s->loop, &s->ulistener, 0);
    s->ulistener.data = s;
    int rc = uv_pipe_bind(&s->ulistener, path);
    /* 0600 before listen: until then a connect is refused, so no one else gets in */
    if (!rc && chmod(path, 0600)) rc = uv_translate_sys_error(errno);
    if (!rc) rc = uv_listen((uv_stream_t *)&s->ulistener, 511, on_connection);
    if (rc) {
        /* libuv reports a missing directory as EACCES: say which it is */
        const char *slash = strrchr(path, '/');
        char dir[UNIX_SOCKET_PATH_MAX + 1];
        snprintf(dir, sizeof dir, "%.*s", slash && slash != path ? (int)(slash - path) : 1, slash ? path : ".");
        struct stat ds;
        bool nodir = rc == UV_EACCES && stat(dir, &ds) != 0;
        snprintf(err, errlen, "http: cannot listen on %s: %s", path,
                 nodir ? "its directory does not exist" : uv_strerror(rc));
        close_now(s->loop, (uv_handle_t *)&s->ulistener);
        return rc == UV_EADDRINUSE ? -EADDRINUSE : -EINVAL;
    }
    s->has_unix = true;
    return 0;
}

int h1_server_start(uv_loop_t *loop, const struct http_server_config *cfg, struct h1_server **out, char *err,
                    size_t errlen) {
    struct h1_server *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->loop = loop;
    s->cfg = *cfg;
    if (!s->cfg.idle_timeout_ms) s->cfg.idle_timeout_ms = HTTP_DEFAULT_IDLE_TIMEOUT_MS;
    if (!s->cfg.head_timeout_ms) s->cfg.head_timeout_ms = HTTP_DEFAULT_HEAD_TIMEOUT_MS;
    if (!s->cfg.max_conn_output) s->cfg.max_conn_output = HTTP_DEFAULT_MAX_CONN_OUTPUT;
    if (!s->cfg.max_output) s->cfg.max_output = HTTP_DEFAULT_MAX_OUTPUT;
    if (!s->cfg.output_stall_ms) s->cfg.output_stall_ms = HTTP_DEFAULT_OUTPUT_STALL_MS;
    if (!s->cfg.max_conns) s->cfg.max_conns = HTTP_DEFAULT_MAX_CONNS;
    if (!s->cfg.max_conns_per_client) s->cfg.max_conns_per_client = HTTP_DEFAULT_MAX_CONNS_PER_CLIENT;
    s->conns_open.max = s->cfg.max_conns;
    s->conns_open.max_per_client = s->cfg.max_conns_per_client;
    if (cfg->tls_cert && cfg->tls_key) {
        s->tlsbuf = malloc(H1_TLS_READ);
        s->tls = s->tlsbuf ? http_tls_ctx_new(cfg->tls_cert, cfg->tls_key, cfg->tls_client_ca, err, errlen) : NULL;
        if (!s->tls) {
            int rc = s->tlsbuf ? -EINVAL : -ENOMEM;
            server_mem_free(s);
            return rc;
        }
    }
    unsigned shorter = s->cfg.idle_timeout_ms;
    if (s->cfg.head_timeout_ms < shorter) shorter = s->cfg.head_timeout_ms;
    if (s->cfg.output_stall_ms < shorter) shorter = s->cfg.output_stall_ms;
    unsigned sweep = shorter / 10 < H1_SWEEP_MS ? shorter / 10 : H1_SWEEP_MS;
    if (!sweep) sweep = 1;
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(cfg->bind_addr, cfg->port, (struct sockaddr_in *)&addr);
    if (rc) rc = uv_ip6_addr(cfg->bind_addr, cfg->port, (struct sockaddr_in6 *)&addr);
    if (rc) {
        snprintf(err, errlen, "http: bad address %s", cfg->bind_addr);
        server_mem_free(s);
        return -EINVAL;
    }
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    if ((rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0)) ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection))) {
        snprintf(err, errlen, "http: cannot listen on %s:%d: %s", cfg->bind_addr, cfg->port, uv_strerror(rc));
        close_now(loop, (uv_handle_t *)&s->listener);
        server_mem_free(s);
        return -EADDRINUSE;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
    s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    if (cfg->unix_path && (rc = listen_unix(s, cfg->unix_path, err, errlen))) {
        close_now(loop, (uv_handle_t *)&s->listener);
        server_mem_free(s);
        return rc;
    }
    uv_check_init(loop, &s->flush);
    s->flush.data = s;
    uv_timer_init(loop, &s->sweep);
    s->sweep.data = s;
    uv_timer_start(&s->sweep, on_sweep, sweep, sweep);
    uv_unref((uv_handle_t *)&s->sweep);
    s->open = 3 + s->has_unix;
    *out = s;
    return 0;
}

int h1_server_port(const struct h1_server *s) { return s->port; }

void h1_server_stats(const struct h1_server *s, struct http_server_stats *out) {
    *out = (struct http_server_stats){.output = s->output, .output_peak = s->output_peak,
                                      .conn_output_peak = s->conn_output_peak, .held = s->held,
                                      .held_total = s->held_total,
                                      .connections = s->conns_open.open, .refused = s->conns_open.refused};
}

void h1_server_stop(struct h1_server *s) {
    if (!s || s->stopping) return;
    s->stopping = true;
    while (s->conns) h1_close(s->conns);
    http_conn_bounds_free(&s->conns_open);
    uv_check_stop(&s->flush);
    s->flushq = NULL;
    h1_run_retired(s); /* the flush handle closes now: tell the owners here */
    uv_timer_stop(&s->sweep);
    s->listener.data = s->flush.data = s->sweep.data = s;
    uv_close((uv_handle_t *)&s->listener, handle_closed);
    if (s->has_unix) {
        s->ulistener.data = s;
        uv_close((uv_handle_t *)&s->ulistener, handle_closed);
        unlink(s->cfg.unix_path);
    }
    uv_close((uv_handle_t *)&s->flush, handle_closed);
    uv_close((uv_handle_t *)&s->sweep, handle_closed);
}

void h1_server_free(struct h1_server *s) {
    if (!s) return;
    if (!s->stopping) h1_server_stop(s);
    if (s->open == 0) server_mem_free(s); /* the loop ran the closes already */
    else s->free_asked = true;  /* the last close frees it */
}
