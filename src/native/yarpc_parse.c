/* YARPC's HTTP/1.1 request head (yarpc_parse.h). */
#include "yarpc_parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Copies value (n bytes) into out (cap bytes), or -EINVAL when it does not fit. */
static int take(char *out, size_t cap, const char *v, size_t n) {
    if (n >= cap) return -EINVAL;
    memcpy(out, v, n);
    out[n] = 0;
    return 0;
}

static bool is_tchar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c);
}

long yarpc_parse_head(const char *buf, size_t n, size_t max, struct yarpc_head *h) {
    memset(h, 0, sizeof *h);
    h->content_length = -1;
    /* the end of the head: the first blank line */
    size_t end = 0;
    size_t lim = n < max ? n : max;
    for (size_t i = 0; i + 1 < lim; i++) {
        if (buf[i] == '\n' && buf[i + 1] == '\n') { end = i + 2; break; }
        if (i + 3 < lim && buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
            end = i + 4;
            break;
        }
    }
    if (!end) return n >= max ? -EMSGSIZE : 0;
    const char *p = buf, *stop = buf + end;
    /* request line: METHOD SP target SP HTTP/1.x */
    const char *eol = memchr(p, '\n', (size_t)(stop - p));
    size_t ll = (size_t)(eol - p) - (eol > p && eol[-1] == '\r');
    const char *sp1 = memchr(p, ' ', ll);
    if (!sp1 || sp1 == p) return -EINVAL;
    const char *sp2 = memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - p));
    if (!sp2 || sp2 == sp1 + 1) return -EINVAL;
    for (const char *q = p; q < sp1; q++)
        if (*q < 'A' || *q > 'Z') return -EINVAL;
    for (const char *q = sp1 + 1; q < sp2; q++) /* the raw target: a NUL would cut the copy short */
        if ((unsigned char)*q <= ' ' || *q == 0x7f) return -EINVAL;
    if (take(h->method, sizeof h->method, p, (size_t)(sp1 - p)) ||
        take(h->path, sizeof h->path, sp1 + 1, (size_t)(sp2 - sp1 - 1)))
        return -EINVAL;
    size_t vl = ll - (size_t)(sp2 + 1 - p);
    if (vl == 8 && !memcmp(sp2 + 1, "HTTP/1.1", 8)) h->http10 = false;
    else if (vl == 8 && !memcmp(sp2 + 1, "HTTP/1.0", 8)) h->http10 = true;
    else return -EINVAL;
    p = eol + 1;
    while (p < stop) {
        eol = memchr(p, '\n', (size_t)(stop - p));
        ll = (size_t)(eol - p) - (eol > p && eol[-1] == '\r');
        if (!ll) break; /* the blank line */
        const char *colon = memchr(p, ':', ll);
        if (!colon || colon == p) return -EINVAL;
        for (const char *q = p; q < colon; q++)
            if (!is_tchar(*q)) return -EINVAL;
        size_t nl = (size_t)(colon - p);
        const char *v = colon + 1, *ve = p + ll;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        for (const char *q = v; q < ve; q++)
            if ((unsigned char)*q < ' ' && *q != '\t') return -EINVAL;
        size_t len = (size_t)(ve - v);
        int rc = 0;
#define IS(name) (nl == sizeof name - 1 && !strncasecmp(p, name, nl))
        if (IS("Rpc-Procedure")) rc = take(h->procedure, sizeof h->procedure, v, len);
        else if (IS("Rpc-Encoding")) rc = take(h->encoding, sizeof h->encoding, v, len);
        else if (IS("Rpc-Caller")) rc = take(h->caller, sizeof h->caller, v, len);
        else if (IS("Rpc-Service")) rc = take(h->service, sizeof h->service, v, len);
        else if (IS("Context-TTL-Ms")) rc = take(h->ttl, sizeof h->ttl, v, len);
        else if (IS("Content-Type")) rc = take(h->content_type, sizeof h->content_type, v, len);
        else if (IS("Authorization")) rc = take(h->authorization, sizeof h->authorization, v, len);
        else if (IS("Transfer-Encoding")) rc = -EINVAL; /* YARPC sends Content-Length */
        else if (IS("Expect")) h->expect_continue = len == 12 && !strncasecmp(v, "100-continue", 12);
        else if (IS("Connection")) {
            if (len == 5 && !strncasecmp(v, "close", 5)) h->close = true;
        } else if (IS("Content-Length")) {
            if (h->content_length >= 0 || !len || len > 15) return -EINVAL;
            long long cl = 0;
            for (size_t i = 0; i < len; i++) {
                if (v[i] < '0' || v[i] > '9') return -EINVAL;
                cl = cl * 10 + (v[i] - '0');
            }
            h->content_length = cl;
        }
#undef IS
        if (rc) return rc;
        p = eol + 1;
    }
    return (long)end;
}
