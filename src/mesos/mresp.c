/* mresp (mresp.h): HTTP/1.1 responses read incrementally, with bounds. */
#include "mresp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LINE_MAX_CHUNK 256         /* a chunk size line, extensions included */
#define NUM_MAX (1LL << 40)        /* a Content-Length or chunk size past this is refused */

void mresp_init(struct mresp *r) { memset(r, 0, sizeof *r); }

void mresp_free(struct mresp *r) {
    free(r->body);
    free(r->line);
    r->body = r->line = NULL;
}

void mresp_next(struct mresp *r) {
    char *line = r->line;
    size_t cap = r->line_cap;
    free(r->body);
    memset(r, 0, sizeof *r);
    r->line = line; /* kept for the next head */
    r->line_cap = cap;
}

static int fail(struct mresp *r, const char *why) {
    snprintf(r->err, sizeof r->err, "%s", why);
    return MRESP_ERROR;
}

static int line_put(struct mresp *r, char ch, size_t bound) {
    if (r->line_len + 1 >= bound) return -1;
    if (r->line_len + 1 >= r->line_cap) {
        size_t cap = r->line_cap ? r->line_cap * 2 : 512;
        if (cap > bound) cap = bound;
        char *l = realloc(r->line, cap);
        if (!l) return -1;
        r->line = l;
        r->line_cap = cap;
    }
    r->line[r->line_len++] = ch;
    r->line[r->line_len] = 0;
    return 0;
}

static void body_put(struct mresp *r, const char *p, size_t n) {
    if (r->body_len >= MRESP_BODY_MAX) return;
    if (n > MRESP_BODY_MAX - r->body_len) n = MRESP_BODY_MAX - r->body_len;
    char *b = realloc(r->body, r->body_len + n + 1);
    if (!b) return; /* the text is lost, the framing is not */
    memcpy(b + r->body_len, p, n);
    r->body_len += n;
    b[r->body_len] = 0;
    r->body = b;
}

/* A decimal (base 10) or hex (base 16) number of at least one digit and at
 * most NUM_MAX, over [p, end); -1 when it is not one. */
static long long number(const char *p, const char *end, int base) {
    long long v = 0;
    if (p == end) return -1;
    for (; p < end; p++) {
        int d;
        if (*p >= '0' && *p <= '9') d = *p - '0';
        else if (base == 16 && *p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
        else if (base == 16 && *p >= 'A' && *p <= 'F') d = *p - 'A' + 10;
        else return -1;
        v = v * base + d;
        if (v > NUM_MAX) return -1;
    }
    return v;
}

static bool name_is(const char *p, size_t n, const char *name) {
    return strlen(name) == n && !strncasecmp(p, name, n);
}

/* Whether the comma-separated list [v, end) has the token tok. */
static bool has_token(const char *v, const char *end, const char *tok) {
    size_t tl = strlen(tok);
    while (v < end) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ',')) v++;
        const char *e = v;
        while (e < end && *e != ',') e++;
        const char *t = e;
        while (t > v && (t[-1] == ' ' || t[-1] == '\t')) t--;
        if ((size_t)(t - v) == tl && !strncasecmp(v, tok, tl)) return true;
        v = e;
    }
    return false;
}

/* The head in r->line (ending in an empty line): status, framing, Location. */
static int parse_head(struct mresp *r) {
    const char *p = r->line, *end = r->line + r->line_len;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol || eol - p < 12 || strncmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
        p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
        (eol - p > 12 && p[12] != ' ' && p[12] != '\r'))
        return fail(r, "malformed status line");
    r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    bool http10 = p[7] == '0', keep_alive = false, chunked = false;
    long long clen = -1;
    for (p = eol + 1; p < end; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) break;
        const char *le = eol;
        if (le > p && le[-1] == '\r') le--;
        if (le == p) break; /* the empty line */
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p) return fail(r, "malformed header line");
        const char *v = colon + 1, *ve = le;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        size_t nl = (size_t)(colon - p);
        if (name_is(p, nl, "Content-Length")) {
            long long n = number(v, ve, 10);
            if (n < 0) return fail(r, "bad Content-Length");
            if (clen >= 0 && n != clen) return fail(r, "two different Content-Lengths");
            clen = n;
        } else if (name_is(p, nl, "Transfer-Encoding")) {
            if (has_token(v, ve, "chunked")) chunked = true;
            else return fail(r, "a transfer coding other than chunked");
        } else if (name_is(p, nl, "Connection")) {
            if (has_token(v, ve, "close")) r->close = true;
            if (has_token(v, ve, "keep-alive")) keep_alive = true;
        } else if (name_is(p, nl, "Location") && (size_t)(ve - v) < sizeof r->location) {
            memcpy(r->location, v, (size_t)(ve - v));
            r->location[ve - v] = 0;
        }
    }
    if (http10 && !keep_alive) r->close = true;
    if (chunked) {
        r->phase = MRESP_CHUNK_SIZE;
    } else if (clen >= 0) {
        r->phase = MRESP_LENGTH;
        r->remaining = clen;
    } else {
        r->phase = MRESP_EOF;
        r->close = true;
    }
    return MRESP_MORE;
}

/* The chunk size line in r->line. */
static int parse_chunk_size(struct mresp *r) {
    const char *p = r->line, *end = p + r->line_len;
    while (end > p && (end[-1] == '\n' || end[-1] == '\r')) end--;
    const char *e = p;
    while (e < end && *e != ';' && *e != ' ' && *e != '\t') e++;
    long long n = number(p, e, 16);
    if (n < 0) return fail(r, "bad chunk size");
    r->remaining = n;
    r->phase = n ? MRESP_CHUNK_DATA : MRESP_TRAILER;
    return MRESP_MORE;
}

int mresp_feed(struct mresp *r, const char *p, size_t n, size_t *used) {
    size_t i = 0;
    int rc = MRESP_MORE;
    if (n) r->got_any = true;
    while (i < n) {
        switch (r->phase) {
        case MRESP_HEAD: {
            if (line_put(r, p[i++], MRESP_HEAD_MAX)) {
                rc = fail(r, "response head too large");
                goto out;
            }
            size_t l = r->line_len;
            bool end = (l >= 4 && !memcmp(r->line + l - 4, "\r\n\r\n", 4)) ||
                       (l >= 2 && !memcmp(r->line + l - 2, "\n\n", 2));
            if (!end) break;
            if ((rc = parse_head(r)) < 0) goto out;
            r->line_len = 0;
            if (r->status < 200) { /* 100 Continue and the like: the real answer follows */
                r->phase = MRESP_HEAD;
                r->close = false;
                r->location[0] = 0;
                break;
            }
            if (r->status == 204 || r->status == 304 || (r->phase == MRESP_LENGTH && r->remaining == 0)) {
                rc = MRESP_DONE;
                goto out;
            }
            break;
        }
        case MRESP_LENGTH:
        case MRESP_CHUNK_DATA: {
            size_t take = n - i;
            if ((long long)take > r->remaining) take = (size_t)r->remaining;
            body_put(r, p + i, take);
            i += take;
            r->remaining -= (long long)take;
            if (r->remaining) break;
            if (r->phase == MRESP_LENGTH) {
                rc = MRESP_DONE;
                goto out;
            }
            r->phase = MRESP_CHUNK_CRLF;
            break;
        }
        case MRESP_CHUNK_SIZE:
        case MRESP_CHUNK_CRLF:
        case MRESP_TRAILER: {
            char ch = p[i++];
            if (line_put(r, ch, r->phase == MRESP_TRAILER ? MRESP_HEAD_MAX : LINE_MAX_CHUNK)) {
                rc = fail(r, r->phase == MRESP_TRAILER ? "trailer too large" : "chunk size line too long");
                goto out;
            }
            if (ch != '\n') break;
            if (r->phase == MRESP_CHUNK_SIZE) {
                rc = parse_chunk_size(r);
                r->line_len = 0;
                if (rc < 0) goto out;
            } else if (r->phase == MRESP_CHUNK_CRLF) {
                bool ok = r->line_len == 1 || (r->line_len == 2 && r->line[0] == '\r');
                r->line_len = 0;
                if (!ok) {
                    rc = fail(r, "chunk data not followed by CRLF");
                    goto out;
                }
                r->phase = MRESP_CHUNK_SIZE;
            } else { /* a trailer line; the empty one ends the response */
                size_t l = r->line_len;
                bool empty = l == 1 || (l >= 2 && r->line[l - 2] == '\n') ||
                             (l == 2 && r->line[0] == '\r') || (l >= 3 && !memcmp(r->line + l - 3, "\n\r\n", 3));
                if (empty) {
                    r->line_len = 0;
                    rc = MRESP_DONE;
                    goto out;
                }
            }
            break;
        }
        case MRESP_EOF:
            body_put(r, p + i, n - i);
            i = n;
            break;
        }
    }
out:
    *used = i;
    return rc;
}

int mresp_eof(struct mresp *r) {
    if (r->phase == MRESP_EOF) return MRESP_DONE;
    if (r->phase == MRESP_HEAD && !r->got_any) return MRESP_MORE;
    return fail(r, "the connection ended inside a response");
}
