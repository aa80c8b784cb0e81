/* The public face of the HTTP layer (server.h): a server is h1.c's, on the
 * plain port or the TLS port (HTTP/2 by ALPN in h2.c), and the calls on a
 * request's stream or deferral go to the backend that serves it. */
#include "server.h"
#include "tlscert.h"
#include "http_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct http_server {
    struct h1_server *h1;
};

int http_server_start(uv_loop_t *loop, const struct http_server_config *cfg, struct http_server **out, char *err,
                      size_t errlen) {
    *out = NULL;
    if (!cfg->handler) {
        snprintf(err, errlen, "http: no handler");
        return -EINVAL;
    }
    if (cfg->unix_path && cfg->tls_cert) {
        snprintf(err, errlen, "http: a Unix-domain socket is served with plain HTTP/1.1 only");
        return -EINVAL;
    }
    struct http_server_config c = *cfg;
    if (!c.bind_addr) c.bind_addr = "127.0.0.1";
    if (!c.max_body) c.max_body = HTTP_DEFAULT_MAX_BODY;
    if (!(c.tls_cert && c.tls_key)) c.tls_cert = c.tls_key = NULL;
    char warn[1024];
    if (c.tls_cert && tls_cert_check(c.tls_cert, c.tls_key, warn, sizeof warn))
        fprintf(stderr, "level=warn msg=\"tls: %s\"\n", warn);
    struct http_server *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    int rc = h1_server_start(loop, &c, &s->h1, err, errlen);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int http_server_port(const struct http_server *s) { return h1_server_port(s->h1); }

void http_server_stats(const struct http_server *s, struct http_server_stats *out) { h1_server_stats(s->h1, out); }

void http_server_stop(struct http_server *s) {
    if (s) h1_server_stop(s->h1);
}

void http_server_free(struct http_server *s) {
    if (!s) return;
    h1_server_free(s->h1);
    free(s);
}

/* ---- streams and deferrals: to the backend that serves the request ---- */

static bool on_h2(const void *tagged) { return ((const struct http_tag *)tagged)->backend == HTTP_BACKEND_H2; }

struct http_stream *http_stream_start(const struct http_request *req, int status, const char *content_type,
                                      size_t max_buffer, http_stream_close_fn on_close, void *ud) {
    if (req->backend == HTTP_BACKEND_H2) return h2_stream_start(req, status, content_type, max_buffer, on_close, ud);
    return h1_stream_start(req, status, content_type, max_buffer, on_close, ud);
}

int http_stream_write(struct http_stream *st, const char *data, size_t len) {
    return on_h2(st) ? h2_stream_write(st, data, len) : h1_stream_write(st, data, len);
}

void http_stream_end(struct http_stream *st) {
    if (on_h2(st)) h2_stream_end(st);
    else h1_stream_end(st);
}

void http_stream_abort(struct http_stream *st) {
    if (on_h2(st)) h2_stream_abort(st);
    else h1_stream_abort(st);
}

size_t http_stream_buffered(const struct http_stream *st) {
    return on_h2(st) ? h2_stream_buffered(st) : h1_stream_buffered(st);
}

struct http_deferred *http_defer(const struct http_request *req) {
    return req->backend == HTTP_BACKEND_H2 ? h2_defer(req) : h1_defer(req);
}

void http_undefer(struct http_deferred *d) {
    if (on_h2(d)) h2_undefer(d);
    else h1_undefer(d);
}

void http_deferred_reply(struct http_deferred *d, struct http_response *resp) {
    if (on_h2(d)) h2_deferred_reply(d, resp);
    else h1_deferred_reply(d, resp);
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
