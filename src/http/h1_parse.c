/* HTTP/1.1 request heads, parsed in place (http_int.h): the request line,
 * percent-decoded path and query arguments ("+" is a space in arguments),
 * and the headers this server reads. Bounded by the caller's buffer
 * (H1_MAX_HEAD), H1_MAX_HEADERS lines, HTTP_MAX_PATH path bytes and
 * HTTP_MAX_ARGS arguments; a refusal is an HTTP status with a one-line
 * reason. Line ends may be CRLF or a bare LF. A NUL anywhere in the head, or
 * a control character (other than HTAB) in the target or a header value, is
 * refused: cut at a NUL, "Bearer TOKEN\0junk" would read as the token. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_int.h"

static const struct {
    const char *name;
    enum http_method m;
} methods[] = {{"GET", HTTP_GET},       {"POST", HTTP_POST}, {"PUT", HTTP_PUT},         {"PATCH", HTTP_PATCH},
               {"DELETE", HTTP_DELETE}, {"HEAD", HTTP_HEAD}, {"OPTIONS", HTTP_OPTIONS}};

enum http_method http_method_of(const char *name, const char **canon) {
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(name, methods[i].name)) {
            *canon = methods[i].name;
            return methods[i].m;
        }
    *canon = "OTHER";
    return HTTP_OTHER;
}

size_t h1_head_end(const char *buf, size_t len) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] != '\n') continue;
        if (buf[i + 1] == '\n') return i + 2;
        if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n') return i + 3;
    }
    return 0;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s in place (plus_space: "+" is " "); -1 on a bad escape or a NUL. */
static int unescape(char *s, bool plus_space) {
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '%') {
            int hi = hexval((unsigned char)p[1]), lo = hi < 0 ? -1 : hexval((unsigned char)p[2]);
            if (hi < 0 || lo < 0 || (hi | lo) == 0) return -1;
            *o++ = (char)(hi << 4 | lo);
            p += 2;
        } else {
            *o++ = plus_space && *p == '+' ? ' ' : *p;
        }
    }
    *o = 0;
    return 0;
}

static bool is_tchar(int c) {
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The next line of [p, end) cut at its end (CR and LF replaced by NULs); *next past it. */
static char *line(char *p, char *end, char **next) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return NULL;
    *nl = 0;
    if (nl > p && nl[-1] == '\r') nl[-1] = 0;
    *next = nl + 1;
    return p;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
    return s;
}

static int fail(char *err, size_t errlen, int code, const char *msg) {
    snprintf(err, errlen, "%s", msg);
    return code;
}

/* The request target of either protocol (an HTTP/1.1 request line's, an
 * HTTP/2 request's :path as sent): taken as it is, never normalised, so
 * "//", "." and ".." reach the handler, which refuses them. */
int http_parse_target(char *target, const char **path, const char **keys, const char **vals, int *nargs, char *err,
                      size_t errlen) {
    *nargs = 0;
    if (target[0] != '/') return fail(err, errlen, 400, "the request target must be a path");
    for (const char *p = target; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) return fail(err, errlen, 400, "invalid character in the request target");
    char *q = strchr(target, '?');
    if (q) *q++ = 0;
    if (unescape(target, false)) return fail(err, errlen, 400, "invalid percent-encoding in the path");
    if (strlen(target) > HTTP_MAX_PATH) {
        snprintf(err, errlen, "the request path is longer than %d bytes", HTTP_MAX_PATH);
        return 414;
    }
    *path = target;
    while (q && *q) { /* key[=value]&... */
        char *amp = strchr(q, '&');
        if (amp) *amp = 0;
        if (*q) {
            if (*nargs == HTTP_MAX_ARGS) {
                snprintf(err, errlen, "too many query parameters: at most %d are accepted", HTTP_MAX_ARGS);
                return 414;
            }
            char *eq = strchr(q, '=');
            char *v = eq ? eq + 1 : q + strlen(q);
            if (eq) *eq = 0;
            if (unescape(q, true) || unescape(v, true)) return fail(err, errlen, 400, "invalid percent-encoding in the query");
            keys[*nargs] = q;
            vals[(*nargs)++] = v;
        }
        q = amp ? amp + 1 : NULL;
    }
    return 0;
}

int h1_parse_head(char *buf, size_t len, struct h1_head *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    h->content_length = -1;
    h->content_type = h->accept = h->authorization = "";
    if (memchr(buf, 0, len)) return fail(err, errlen, 400, "NUL byte in the request head");
    char *end = buf + len, *next;
    char *rl = line(buf, end, &next);
    if (!rl) return fail(err, errlen, 400, "malformed request line");
    /* METHOD SP target SP HTTP/1.x */
    char *sp1 = strchr(rl, ' ');
    if (!sp1) return fail(err, errlen, 400, "malformed request line");
    *sp1 = 0;
    char *target = sp1 + 1, *sp2 = strchr(target, ' ');
    if (!sp2) return fail(err, errlen, 400, "malformed request line");
    *sp2 = 0;
    const char *ver = sp2 + 1;
    if (!rl[0]) return fail(err, errlen, 400, "malformed request line");
    for (const char *p = rl; *p; p++)
        if (!is_tchar((unsigned char)*p)) return fail(err, errlen, 400, "malformed method");
    if (!strcmp(ver, "HTTP/1.1")) h->keep_alive = true;
    else if (!strcmp(ver, "HTTP/1.0")) h->http10 = true;
    else return fail(err, errlen, 505, "HTTP version not supported");
    h->method = http_method_of(rl, &h->method_name);
    int tc = http_parse_target(target, &h->path, h->keys, h->vals, &h->nargs, err, errlen);
    if (tc) return tc;
    int lines = 0;
    while (next < end) {
        char *l = line(next, end, &next);
        if (!l) return fail(err, errlen, 400, "malformed header");
        if (!l[0]) break; /* the empty line */
        if (++lines > H1_MAX_HEADERS) return fail(err, errlen, 431, "too many header fields");
        char *colon = strchr(l, ':');
        if (!colon || colon == l) return fail(err, errlen, 400, "malformed header");
        *colon = 0;
        for (const char *p = l; *p; p++)
            if (!is_tchar((unsigned char)*p)) return fail(err, errlen, 400, "malformed header name");
        char *v = trim(colon + 1);
        for (const char *p = v; *p; p++)
            if (((unsigned char)*p < ' ' && *p != '\t') || *p == 0x7f)
                return fail(err, errlen, 400, "invalid character in a header value");
        if (!strcasecmp(l, "content-length")) {
            if (!*v) return fail(err, errlen, 400, "invalid Content-Length");
            long long n = 0;
            for (const char *p = v; *p; p++) {
                if (*p < '0' || *p > '9' || n > (1LL << 46)) return fail(err, errlen, 400, "invalid Content-Length"); /* n * 10 stays below 2^50 */
                n = n * 10 + (*p - '0');
            }
            if (h->content_length >= 0 && h->content_length != n)
                return fail(err, errlen, 400, "conflicting Content-Length headers");
            h->content_length = n;
        } else if (!strcasecmp(l, "transfer-encoding")) {
            h->chunked = true;
        } else if (!strcasecmp(l, "content-type")) {
            h->content_type = v;
        } else if (!strcasecmp(l, "accept")) {
            h->accept = v;
        } else if (!strcasecmp(l, "authorization")) {
            h->authorization = v;
        } else if (!strcasecmp(l, "connection")) {
            h->connection = v;
        } else if (!strcasecmp(l, "upgrade")) {
            h->upgrade = v;
        } else if (!strcasecmp(l, "sec-websocket-key")) {
            h->ws_key = v;
        } else if (!strcasecmp(l, "sec-websocket-version")) {
            h->ws_version = v;
        } else if (!strcasecmp(l, "expect")) {
            h->expect = v;
        }
    }
    if (h->connection) { /* a list of tokens: close / keep-alive / upgrade */
        if (strcasestr(h->connection, "close")) h->keep_alive = false;
        else if (strcasestr(h->connection, "keep-alive")) h->keep_alive = true;
    }
    return 0;
}
