#include "clirpc.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pbjson.h"
#include "pbmsg.h"

struct reply {
    unsigned char *body;
    size_t len, cap;
    bool too_big;
    char status[32];     /* Rpc-Status */
    char error_code[64]; /* Rpc-Error-Code */
};

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
    struct reply *rp = arg;
    size_t add = size * n;
    if (rp->len + add > CLIRPC_MAX_REPLY) {
        rp->too_big = true;
        return 0;
    }
    if (rp->len + add > rp->cap) {
        size_t cap = rp->cap ? rp->cap : 4096;
        while (cap < rp->len + add) cap *= 2;
        unsigned char *b = realloc(rp->body, cap);
        if (!b) return 0;
        rp->body = b;
        rp->cap = cap;
    }
    memcpy(rp->body + rp->len, p, add);
    rp->len += add;
    return add;
}

bool clirpc_header_value(const char *line, size_t n, const char *name, char *out, size_t outlen) {
    size_t k = strlen(name);
    if (n <= k + 1 || strncasecmp(line, name, k) || line[k] != ':') return false;
    const char *v = line + k + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && isspace((unsigned char)end[-1])) end--;
    size_t len = (size_t)(end - v) < outlen - 1 ? (size_t)(end - v) : outlen - 1;
    memcpy(out, v, len);
    out[len] = 0;
    return true;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg) {
    struct reply *rp = arg;
    clirpc_header_value(p, size * n, "Rpc-Status", rp->status, sizeof rp->status);
    clirpc_header_value(p, size * n, "Rpc-Error-Code", rp->error_code, sizeof rp->error_code);
    return size * n;
}

void clirpc_url(const char *base, char *out, size_t outlen) {
    const char *scheme = strstr(base, "://") ? "" : "http://";
    const char *rest = strstr(base, "://") ? strstr(base, "://") + 3 : base;
    const char *slash = strchr(rest, '/');
    bool has_path = slash && slash[1];
    size_t blen = strlen(base);
    while (!has_path && blen && base[blen - 1] == '/') blen--;
    snprintf(out, outlen, "%s%.*s%s", scheme, (int)blen, base, has_path ? "" : "/api/v1");
}

int clirpc_init(struct clirpc *r, const char *token, long timeout_ms) {
    memset(r, 0, sizeof *r);
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) return -1;
    r->curl = curl_easy_init();
    r->token = token;
    r->timeout_ms = timeout_ms;
    return r->curl ? 0 : -1;
}

void clirpc_tls(const struct clirpc *r, void *c) {
    if (r->cacert) curl_easy_setopt(c, CURLOPT_CAINFO, r->cacert);
    if (r->cert) curl_easy_setopt(c, CURLOPT_SSLCERT, r->cert);
    if (r->key) curl_easy_setopt(c, CURLOPT_SSLKEY, r->key);
}

void clirpc_free(struct clirpc *r) {
    if (r->curl) curl_easy_cleanup(r->curl);
    r->curl = NULL;
    curl_global_cleanup();
}

/* The body of an error reply as one line of at most outlen bytes. */
static void one_line(const unsigned char *p, size_t n, char *out, size_t outlen) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < outlen; i++) out[k++] = (p[i] == '\n' || p[i] == '\r') ? ' ' : (char)p[i];
    while (k && out[k - 1] == ' ') k--;
    out[k] = 0;
}

uint8_t *clirpc_encode(struct clirpc *r, const struct clirpc_method *m, const json_t *req, size_t *len) {
    char err[512];
    ProtobufCMessage *msg = pbjson_to_msg(m->req, req, err, sizeof err);
    if (!msg) {
        snprintf(r->msg, sizeof r->msg, "%s", err);
        return NULL;
    }
    uint8_t *wire = pbmsg_pack(msg, len);
    protobuf_c_message_free_unpacked(msg, NULL);
    if (!wire) snprintf(r->msg, sizeof r->msg, "out of memory");
    return wire;
}

int clirpc_call(struct clirpc *r, const char *base, const struct clirpc_method *m, const json_t *req,
                json_t **resp) {
    char url[1024], err[512];
    int rc = CLIRPC_ERR_TRANSPORT;
    struct reply rp = {0};
    struct curl_slist *h = NULL;
    uint8_t *wire = NULL;
    *resp = NULL;
    r->code[0] = r->msg[0] = 0;

    size_t wlen;
    if (!(wire = clirpc_encode(r, m, req, &wlen))) return CLIRPC_ERR_INPUT;

    clirpc_url(base, url, sizeof url);
    char line[1200];
    const char *fixed[] = {"Content-Type: application/x-protobuf", "Rpc-Encoding: proto", "Rpc-Caller: peloton-cli",
                           "Expect:"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) h = curl_slist_append(h, fixed[i]);
    snprintf(line, sizeof line, "Rpc-Procedure: %s", m->procedure);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof line, "Rpc-Service: %s", m->service);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof line, "Context-TTL-Ms: %ld", r->timeout_ms);
    h = curl_slist_append(h, line);
    if (r->token) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", r->token);
        h = curl_slist_append(h, line);
    }

    CURL *c = r->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    /* YARPC's transport is HTTP/1.1: over TLS libcurl would offer h2 by
     * ALPN, and an HTTP/2 request to a native port is gRPC */
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    clirpc_tls(r, c);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)wire);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)wlen);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &rp);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &rp);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode cc = curl_easy_perform(c);
    long http = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
    if (rp.too_big) {
        snprintf(r->msg, sizeof r->msg, "%.400s: reply larger than %u bytes", url, CLIRPC_MAX_REPLY);
        goto out;
    }
    if (cc != CURLE_OK) {
        snprintf(r->msg, sizeof r->msg, "%.400s: %.200s%s", url, curl_easy_strerror(cc),
                 cc == CURLE_COULDNT_CONNECT ? " (is pelotond running there? see --jobmgr)" : "");
        goto out;
    }
    if (!strcasecmp(rp.status, "error")) {
        snprintf(r->code, sizeof r->code, "%s", rp.error_code[0] ? rp.error_code : "unknown");
        one_line(rp.body, rp.len, r->msg, sizeof r->msg);
        rc = CLIRPC_ERR_STATUS;
        goto out;
    }
    if (strcasecmp(rp.status, "success") || http != 200) {
        char body[200];
        one_line(rp.body, rp.len, body, sizeof body);
        snprintf(r->msg, sizeof r->msg, "%.400s: HTTP %ld without a YARPC status (not a Peloton endpoint?)%s%s", url,
                 http, body[0] ? ": " : "", body);
        goto out;
    }
    ProtobufCMessage *back = pbmsg_unpack(m->resp, rp.body ? rp.body : (const uint8_t *)"", rp.len, err, sizeof err);
    if (!back) {
        snprintf(r->msg, sizeof r->msg, "%.400s: undecodable reply: %.400s", url, err);
        goto out;
    }
    *resp = pbjson_from_msg(back, err, sizeof err);
    protobuf_c_message_free_unpacked(back, NULL);
    if (!*resp) {
        snprintf(r->msg, sizeof r->msg, "%.400s: reply: %.400s", url, err);
        goto out;
    }
    rc = CLIRPC_OK;
out:
    curl_slist_free_all(h);
    free(wire);
    free(rp.body);
    return rc;
}
