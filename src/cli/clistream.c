/* clirpc_stream: a server-streaming gRPC call over libcurl's HTTP/2
 * (clirpc.h). The messages are deframed by the native server's deframer
 * (grpc_frame.h) as DATA arrives, so each event prints when it comes; the
 * status is read from the trailers libcurl hands to the header callback. */
#include <ctype.h>
#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clistream.h"
#include "grpc_frame.h"
#include "native.h"
#include "pbjson.h"
#include "pbmsg.h"

static void pct_decode(char *s) {
    char *w = s;
    for (const char *p = s; *p; p++) {
        if (p[0] == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
            char hex[3] = {p[1], p[2], 0};
            *w++ = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            *w++ = *p;
        }
    }
    *w = 0;
}

void clistream_reply_init(struct clistream_reply *st, struct clirpc *r, const struct clirpc_method *m,
                          clirpc_stream_fn fn, void *ud) {
    *st = (struct clistream_reply){.r = r, .m = m, .fn = fn, .ud = ud};
    grpc_deframer_init(&st->df, CLIRPC_MAX_REPLY, UINT32_MAX);
}

void clistream_reply_free(struct clistream_reply *st) { grpc_deframer_free(&st->df); }

void clistream_reply_header(struct clistream_reply *st, const char *line, size_t n) {
    if (clirpc_header_value(line, n, "grpc-message", st->message, sizeof st->message)) pct_decode(st->message);
    clirpc_header_value(line, n, "grpc-status", st->status, sizeof st->status);
}

static size_t on_header(char *p, size_t size, size_t n, void *arg) {
    clistream_reply_header(arg, p, size * n);
    return size * n;
}

/* One whole reply message: decoded and handed on. false to stop reading. */
static bool deliver(struct clistream_reply *st, const uint8_t *msg, size_t len) {
    char err[512];
    ProtobufCMessage *pm = pbmsg_unpack(st->m->resp, msg, len, err, sizeof err);
    json_t *j = pm ? pbjson_from_msg(pm, err, sizeof err) : NULL;
    if (pm) protobuf_c_message_free_unpacked(pm, NULL);
    if (!j) {
        snprintf(st->r->msg, sizeof st->r->msg, "undecodable reply: %.400s", err);
        st->bad = true;
        return false;
    }
    int more = st->fn(st->ud, j);
    json_decref(j);
    if (more) st->stopped = true;
    return !more;
}

bool clistream_reply_body(struct clistream_reply *st, const uint8_t *p, size_t len) {
    size_t off = 0;
    if (st->bad || st->stopped) return false;
    while (off < len) {
        long used = grpc_deframer_feed(&st->df, p + off, len - off);
        if (used < 0) {
            snprintf(st->r->msg, sizeof st->r->msg, "bad reply framing (%s)",
                     used == GRPC_FRAME_TOO_LARGE ? "a message over the bound" : "compressed or malformed");
            st->bad = true;
            return false;
        }
        off += (size_t)used;
        size_t mlen;
        uint8_t *msg = grpc_deframer_take(&st->df, &mlen);
        if (msg) {
            bool go = deliver(st, msg, mlen);
            free(msg);
            if (!go) return false;
        }
    }
    return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
    /* 0 makes libcurl abort the transfer: the stream is reset */
    return clistream_reply_body(arg, (const uint8_t *)p, size * n) ? size * n : 0;
}

int clistream_reply_status(struct clistream_reply *st) {
    if (!st->status[0]) return CLIRPC_ERR_TRANSPORT;
    char *end;
    long code = strtol(st->status, &end, 10);
    if (*end || end == st->status || code < 0 || code > 16) {
        snprintf(st->r->msg, sizeof st->r->msg, "grpc-status \"%.20s\" is not a status code", st->status);
        return CLIRPC_ERR_TRANSPORT;
    }
    if (code == 0 && grpc_deframer_partial(&st->df)) {
        snprintf(st->r->msg, sizeof st->r->msg, "the stream ended inside a message");
        return CLIRPC_ERR_TRANSPORT;
    }
    if (code == 0) return CLIRPC_OK;
    snprintf(st->r->code, sizeof st->r->code, "%s", native_code_yarpc((enum native_code)code));
    snprintf(st->r->msg, sizeof st->r->msg, "%s", st->message);
    return CLIRPC_ERR_STATUS;
}

/* The gRPC URL: base's scheme and authority, then "/<service>/<method>". */
static void grpc_url(const char *base, const char *procedure, char *out, size_t outlen) {
    const char *sep = strstr(base, "://");
    const char *auth = sep ? sep + 3 : base;
    size_t alen = strcspn(auth, "/");
    const char *colons = strstr(procedure, "::");
    int slen = colons ? (int)(colons - procedure) : (int)strlen(procedure);
    /* host:port alone: cleartext */
    snprintf(out, outlen, "%.*s%.*s/%.*s/%s", sep ? (int)(sep + 3 - base) : 7, sep ? base : "http://", (int)alen,
             auth, slen, procedure, colons ? colons + 2 : "");
}

int clirpc_stream(struct clirpc *r, const char *base, const struct clirpc_method *m, const json_t *req, long max_ms,
                  clirpc_stream_fn fn, void *ud) {
    char url[1024], line[1200];
    r->code[0] = r->msg[0] = 0;
    size_t wlen;
    uint8_t *wire = clirpc_encode(r, m, req, &wlen);
    if (!wire) return CLIRPC_ERR_INPUT;
    uint8_t *framed = malloc(wlen + GRPC_PREFIX_LEN);
    if (!framed) {
        free(wire);
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return CLIRPC_ERR_INPUT;
    }
    grpc_frame_prefix(framed, wlen);
    memcpy(framed + GRPC_PREFIX_LEN, wire, wlen);
    free(wire);

    grpc_url(base, m->procedure, url, sizeof url);
    bool tls = !strncasecmp(url, "https://", 8);
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/grpc+proto");
    h = curl_slist_append(h, "TE: trailers");
    h = curl_slist_append(h, "User-Agent: peloton-cli");
    h = curl_slist_append(h, "Expect:");
    if (r->token) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", r->token);
        h = curl_slist_append(h, line);
    }
    struct clistream_reply st;
    clistream_reply_init(&st, r, m, fn, ud);

    CURL *c = r->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, tls ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    clirpc_tls(r, c);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)framed);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(wlen + GRPC_PREFIX_LEN));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &st);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, r->timeout_ms);
    if (max_ms > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, max_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode cc = curl_easy_perform(c);
    long http = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
    int rc = CLIRPC_ERR_TRANSPORT;
    if (st.bad) {
        char why[512];
        snprintf(why, sizeof why, "%.500s", r->msg);
        snprintf(r->msg, sizeof r->msg, "%.400s: %s", url, why);
    } else if (st.stopped || (cc == CURLE_OPERATION_TIMEDOUT && max_ms > 0 && http == 200 && !st.status[0])) {
        rc = CLIRPC_OK; /* enough messages, or the time asked for: both ends of a watch */
    } else if (st.status[0]) {
        if ((rc = clistream_reply_status(&st)) == CLIRPC_ERR_TRANSPORT) {
            char why[512];
            snprintf(why, sizeof why, "%.500s", r->msg);
            snprintf(r->msg, sizeof r->msg, "%.400s: %s", url, why);
        }
    } else if (cc != CURLE_OK) {
        snprintf(r->msg, sizeof r->msg, "%.400s: %.200s%s", url, curl_easy_strerror(cc),
                 cc == CURLE_COULDNT_CONNECT ? " (is pelotond running there? see --jobmgr)" : "");
    } else {
        snprintf(r->msg, sizeof r->msg, "%.400s: HTTP %ld without a grpc-status (not a gRPC endpoint?)", url, http);
    }
    clistream_reply_free(&st);
    curl_slist_free_all(h);
    free(framed);
    return rc;
}
