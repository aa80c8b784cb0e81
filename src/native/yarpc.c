/* YARPC's HTTP/1.1 inbound, as Peloton's daemons served it: POST /api/v1
 * (or /) with Rpc-Procedure "<package>.<Service>::<Method>", Rpc-Encoding
 * proto or json, Rpc-Caller, Rpc-Service and an optional Context-TTL-Ms;
 * the reply carries Rpc-Status: success and the encoded response, or
 * Rpc-Status: error, Rpc-Error-Code (YARPC's code names) with the HTTP
 * status YARPC gives that code, and the message as a text body.
 *
 * One request at a time per connection: pipelined requests wait in the
 * input buffer (bounded) until the one before is answered. A request that
 * cannot be framed (a malformed head, a body over the bound) is answered and
 * the connection closed, since where the next request starts is unknown. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "native_int.h"
#include "pbjson.h"
#include "pbmsg.h"

static const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Internal Server Error";
    }
}

static void write_response(struct native_conn *conn, int status, const char *extra, const char *ctype,
                           const void *body, size_t len) {
    char head[512];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\n%sContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
                     status, reason(status), extra, ctype, len, conn->h1_close ? "Connection: close\r\n" : "");
    char *buf = malloc((size_t)n + len);
    if (!buf) {
        native_conn_close(conn);
        return;
    }
    memcpy(buf, head, (size_t)n);
    if (len) memcpy(buf + n, body, len);
    native_conn_write(conn, buf, (size_t)n + len);
    free(buf);
}

/* An error in YARPC's shape. */
static void write_error(struct native_conn *conn, enum native_code code, const char *msg) {
    char extra[128];
    snprintf(extra, sizeof extra, "Rpc-Status: error\r\nRpc-Error-Code: %s\r\n", native_code_yarpc(code));
    write_response(conn, native_code_http(code), extra, "text/plain; charset=utf-8", msg, strlen(msg));
    if (conn->srv) conn->srv->stats.failed++;
}

static void fail_and_close(struct native_conn *conn, enum native_code code, const char *msg) {
    conn->h1_close = true;
    write_error(conn, code, msg);
    conn->nin = 0;
    if (!conn->write_pending) native_conn_close(conn);
    else native_conn_pause(conn, true); /* closed once the reply is written */
}

/* Drops the first n buffered bytes (a request that was taken). */
static void consume(struct native_conn *conn, size_t n) {
    memmove(conn->in, conn->in + n, conn->nin - n);
    conn->nin -= n;
}

/* Serves the buffered requests until one waits for its handler or more bytes. */
static void process(struct native_conn *conn) {
    struct native_server *srv = conn->srv;
    while (srv && !conn->closing && !conn->h1_call && !conn->h1_close && conn->nin) {
        struct yarpc_head h;
        long hl = yarpc_parse_head(conn->in, conn->nin, NATIVE_MAX_HEAD, &h);
        if (hl < 0) {
            fail_and_close(conn, NC_INVALID_ARGUMENT,
                           hl == -EMSGSIZE ? "request head too large" : "malformed HTTP/1.1 request");
            return;
        }
        if (hl == 0) return;
        long long cl = h.content_length < 0 ? 0 : h.content_length;
        if ((unsigned long long)cl > srv->cfg.max_message) {
            char msg[128];
            snprintf(msg, sizeof msg, "request body larger than %zu bytes", srv->cfg.max_message);
            fail_and_close(conn, NC_RESOURCE_EXHAUSTED, msg);
            return;
        }
        if (conn->nin < (size_t)hl + (size_t)cl) { /* the body is still coming */
            if (h.expect_continue && !conn->h1_continued) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                conn->h1_continued = true;
                native_conn_write(conn, cont, sizeof cont - 1);
            }
            return;
        }
        conn->h1_continued = false;
        const char *body = conn->in + hl;
        size_t total = (size_t)hl + (size_t)cl;
        if (h.http10 || h.close) conn->h1_close = true;
        /* from here on the request is framed: errors answer it and the connection goes on */
        enum native_code code = NC_OK;
        char msg[512] = "";
        const struct native_method *m = NULL;
        void *ud = NULL;
        long long ttl = -1;
        if (!native_auth_ok(srv, h.authorization)) {
            code = NC_UNAUTHENTICATED;
            snprintf(msg, sizeof msg, "a bearer token is required (Authorization header)");
        } else if (strcmp(h.method, "POST")) {
            code = NC_UNIMPLEMENTED;
            snprintf(msg, sizeof msg, "method %s: YARPC takes POST", h.method);
        } else if (strcmp(h.path, "/api/v1") && strcmp(h.path, "/")) {
            code = NC_NOT_FOUND;
            snprintf(msg, sizeof msg, "path %s: YARPC is served at /api/v1 and /", h.path);
        } else if (!h.procedure[0] || !h.caller[0] || !h.service[0] || !h.encoding[0]) {
            code = NC_INVALID_ARGUMENT;
            snprintf(msg, sizeof msg, "missing %s header", !h.procedure[0] ? "Rpc-Procedure"
                                                           : !h.caller[0]  ? "Rpc-Caller"
                                                           : !h.service[0] ? "Rpc-Service"
                                                                           : "Rpc-Encoding");
        } else if (strcasecmp(h.encoding, "proto") && strcasecmp(h.encoding, "json")) {
            code = NC_INVALID_ARGUMENT;
            snprintf(msg, sizeof msg, "Rpc-Encoding \"%s\": proto or json", h.encoding);
        } else if (h.ttl[0] && (strspn(h.ttl, "0123456789") != strlen(h.ttl) || strlen(h.ttl) > 10 ||
                                (ttl = atoll(h.ttl)) <= 0 || ttl > (1LL << 31))) {
            code = NC_INVALID_ARGUMENT;
            snprintf(msg, sizeof msg, "Context-TTL-Ms \"%s\": a whole number of milliseconds", h.ttl);
        } else if (!(m = native_server_find(srv, h.procedure, &ud, msg, sizeof msg))) {
            code = NC_UNIMPLEMENTED;
        } else if (srv->cfg.authorize &&
                   (code = (enum native_code)srv->cfg.authorize(srv->cfg.authorize_ud, h.authorization, conn->peer_cn,
                                                                conn->peer_orgs, h.procedure,
                                                                msg, sizeof msg)) != NC_OK) {
            /* refused: code and msg set */
        } else if (m->server_stream) {
            code = NC_UNIMPLEMENTED;
            snprintf(msg, sizeof msg, "procedure %s streams: use gRPC", h.procedure);
        }
        if (code != NC_OK) {
            if (m) native_observe(srv, h.procedure, "yarpc", code, 0); /* a method served here, refused */
            write_error(conn, code, msg);
            consume(conn, total);
            continue;
        }
        bool json = !strcasecmp(h.encoding, "json");
        ProtobufCMessage *req = json ? pbjson_parse(m->in, body, (size_t)cl, msg, sizeof msg)
                                     : pbmsg_unpack(m->in, (const uint8_t *)body, (size_t)cl, msg, sizeof msg);
        consume(conn, total);
        if (!req) {
            native_observe(srv, h.procedure, "yarpc", NC_INVALID_ARGUMENT, 0);
            write_error(conn, NC_INVALID_ARGUMENT, msg);
            continue;
        }
        struct native_call *c = native_call_new(conn, m, h.ttl[0] ? ttl : -1, h.caller, h.procedure);
        if (!c) {
            protobuf_c_message_free_unpacked(req, NULL);
            fail_and_close(conn, NC_INTERNAL, "out of memory");
            return;
        }
        c->json = json;
        conn->h1_call = c;
        native_call_dispatch(c, ud, req);
    }
}

int h1_conn_recv(struct native_conn *conn, const uint8_t *p, size_t n) {
    if (conn->h1_close) return 0; /* answered for good: the rest is dropped */
    size_t bound = NATIVE_MAX_HEAD + (conn->srv ? conn->srv->cfg.max_message : 0) + 1;
    if (conn->nin + n > conn->capin) {
        size_t cap = conn->capin ? conn->capin : 16384;
        while (cap < conn->nin + n) cap *= 2;
        char *b = realloc(conn->in, cap);
        if (!b) return -1;
        conn->in = b;
        conn->capin = cap;
    }
    memcpy(conn->in + conn->nin, p, n);
    conn->nin += n;
    if (conn->nin > bound) native_conn_pause(conn, true); /* pipelined past one request's bound: wait */
    if (!conn->h1_call) process(conn);
    return 0;
}

void h1_conn_resume(struct native_conn *conn) {
    process(conn);
    if (!conn->closing && !conn->h1_call && !conn->h1_close) native_conn_pause(conn, false);
}

void h1_conn_free(struct native_conn *conn) {
    if (conn->h1_call) native_call_detach(conn->h1_call);
    conn->h1_call = NULL;
}

/* The reply's body is the packed message (proto), or JSON written by the caller (json). */
void h1_call_reply(struct native_call *c, const uint8_t *msg, size_t len) {
    struct native_conn *conn = c->conn;
    write_response(conn, 200, "Rpc-Status: success\r\n", c->json ? "application/json" : "application/x-protobuf", msg,
                   len);
    conn->h1_call = NULL;
    native_call_detach(c);
    h1_conn_resume(conn);
}

void h1_call_status(struct native_call *c, enum native_code code, const char *msg) {
    struct native_conn *conn = c->conn;
    if (code == NC_OK) write_response(conn, 200, "Rpc-Status: success\r\n", "application/x-protobuf", "", 0);
    else write_error(conn, code, msg);
    conn->h1_call = NULL;
    native_call_detach(c);
    h1_conn_resume(conn);
}
