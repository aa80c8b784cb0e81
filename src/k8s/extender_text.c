/* The extender's fast path for NodeNames requests (extender.h), the replies:
 * encoders that write the reply text directly, byte for byte what
 * json_dumps(JSON_COMPACT) writes for the json_t encoders' replies in
 * extender.c (unit tests and the differential fuzz target compare them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "extender.h"
#include "extender_int.h"

/* Copies n bytes with fixed-size moves (names and runs are short). */
static inline void copy_short(char *d, const char *s, size_t n) {
    if (n >= 8) {
        for (size_t i = 0; i + 8 <= n; i += 8) memcpy(d + i, s + i, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else {
        for (size_t i = 0; i < n; i++) d[i] = s[i];
    }
}

void extender_buf_free(struct extender_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* Room for more bytes and the NUL after them. */
static int buf_grow(struct extender_buf *b, size_t more) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= more) {
        if (cap > SIZE_MAX / 2) return -ENOMEM;
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (!d) return -ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(struct extender_buf *b, size_t more) {
    return b->cap > b->len && b->cap - b->len > more ? 0 : buf_grow(b, more);
}

/* Writes s (len bytes) at d as a JSON string, escaped as jansson dumps one:
 * \" \\ \b \f \n \r \t, other bytes below 0x20 as \u00XX, the rest as is;
 * room for 6 * len + 2 bytes. Returns the end, or NULL when s is not valid
 * UTF-8 (*nul set when the first trouble was a NUL byte). */
static char *put_string(char *d, const char *s, size_t len, bool *nul) {
    static const char hex[] = "0123456789ABCDEF";
    if (len >= 8 && len <= 16) { /* most node names: 8 to 16 plain bytes */
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + len - 8, 8);
        if (!special8(a) && !special8(b)) {
            d[0] = '"';
            memcpy(d + 1, &a, 8);
            memcpy(d + 1 + len - 8, &b, 8);
            d[len + 1] = '"';
            return d + len + 2;
        }
    }
    const char *e = s + len;
    *d++ = '"';
    for (;;) {
        const char *q = plain_run(s, e);
        if (q - s > 64) memcpy(d, s, (size_t)(q - s));
        else copy_short(d, s, (size_t)(q - s));
        d += q - s;
        if ((s = q) == e) break;
        unsigned c = (unsigned char)*s;
        if (c >= 0x80) {
            size_t k = utf8_seq((const unsigned char *)s, (const unsigned char *)e);
            if (!k) return NULL;
            memcpy(d, s, k);
            d += k;
            s += k;
            continue;
        }
        if (c == 0 && nul) {
            *nul = true;
            return NULL;
        }
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '\b': *d++ = 'b'; break;
        case '\f': *d++ = 'f'; break;
        case '\n': *d++ = 'n'; break;
        case '\r': *d++ = 'r'; break;
        case '\t': *d++ = 't'; break;
        default:
            memcpy(d, "u00", 3);
            d[3] = hex[c >> 4];
            d[4] = hex[c & 15];
            d += 5;
            break;
        }
        s++;
    }
    *d++ = '"';
    return d;
}

#define PUT_LIT(d, lit) (memcpy((d), (lit), sizeof(lit) - 1), (d) += sizeof(lit) - 1)

/* The passing names of a compact scan (extender_scan.compact) as an array:
 * each run of passing names is one copy of the body's text for it. */
static int pass_runs(struct extender_buf *b, const struct extender_name *names, const struct extender_name_verdict *v,
                     size_t n) {
    bool first = true;
    b->data[b->len++] = '[';
    for (size_t i = 0; i < n;) {
        if (v[i].verdict != EXTENDER_PASS) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && v[j].verdict == EXTENDER_PASS) j++;
        const char *from = names[i].s - 1, *to = names[j - 1].s + names[j - 1].len + 1; /* the quotes */
        if (buf_reserve(b, (size_t)(to - from) + 2)) return -ENOMEM;
        if (!first) b->data[b->len++] = ',';
        first = false;
        memcpy(b->data + b->len, from, (size_t)(to - from));
        b->len += (size_t)(to - from);
        i = j;
    }
    b->data[b->len++] = ']';
    return 0;
}

/* One section of the filter result: the names with verdict `which`, as an
 * array (PASS) or as an object name -> reason (reasons checked already). A
 * run of one reason pointer is escaped once and copied after. */
static int filter_section(struct extender_buf *b, const struct extender_name *names,
                          const struct extender_name_verdict *v, size_t n, enum extender_verdict which, char *err,
                          size_t errlen) {
    const char *last = NULL;
    size_t last_off = 0, last_len = 0;
    bool first = true;
    if (buf_reserve(b, 1)) return -ENOMEM;
    b->data[b->len++] = which == EXTENDER_PASS ? '[' : '{';
    for (size_t i = 0; i < n; i++) {
        if (v[i].verdict != which) continue;
        const struct extender_name *nm = &names[i];
        if (nm->len > (SIZE_MAX - 16) / 6 || buf_reserve(b, 6 * nm->len + 4)) return -ENOMEM;
        char *d = b->data + b->len;
        if (!first) *d++ = ',';
        first = false;
        if (!(d = put_string(d, nm->s, nm->len, NULL)))
            return core_fail(err, errlen, -EINVAL, "filter result: node %zu: name is not valid UTF-8", i);
        b->len = (size_t)(d - b->data);
        if (which == EXTENDER_PASS) continue;
        const char *r = v[i].reason ? v[i].reason : "";
        size_t rlen = r == last ? 0 : strlen(r);
        if (buf_reserve(b, 1 + (r == last ? last_len : 6 * rlen + 2))) return -ENOMEM;
        b->data[b->len++] = ':';
        if (r == last) {
            memcpy(b->data + b->len, b->data + last_off, last_len);
            b->len += last_len;
            continue;
        }
        d = put_string(b->data + b->len, r, rlen, NULL); /* checked: valid */
        last = r;
        last_off = b->len;
        last_len = (size_t)(d - (b->data + b->len));
        b->len += last_len;
    }
    if (buf_reserve(b, 1)) return -ENOMEM;
    b->data[b->len++] = which == EXTENDER_PASS ? ']' : '}';
    return 0;
}

/* The filter result for names (compact: a compact scan's, see pass_runs);
 * pass (may be NULL) gets where the passing names' array stands. */
static int filter_result(const struct extender_name *names, const struct extender_name_verdict *v, size_t n,
                         bool compact, struct extender_buf *out, struct extender_span *pass, char *err,
                         size_t errlen) {
    out->len = 0;
    if (n && (!names || !v)) return core_fail(err, errlen, -EINVAL, "filter result: no verdicts");
    /* the checks in verdict order, as extender_filter_result makes them; a
     * size to start with; and which sections have names at all */
    size_t need = 128, count[3] = {0, 0, 0};
    const char *last = NULL;
    size_t last_len = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].verdict != EXTENDER_PASS && v[i].verdict != EXTENDER_FAIL &&
            v[i].verdict != EXTENDER_FAIL_UNRESOLVABLE)
            return core_fail(err, errlen, -EINVAL, "filter verdict %zu: unknown verdict %d", i, (int)v[i].verdict);
        count[v[i].verdict]++;
        need += names[i].len + 3;
        if (v[i].verdict == EXTENDER_PASS) continue;
        const char *r = v[i].reason ? v[i].reason : "";
        if (r != last) {
            last_len = strlen(r);
            if (last_len > EXTENDER_MAX_REASON)
                return core_fail(err, errlen, -E2BIG, "filter verdict %zu: reason longer than %d bytes", i,
                                 EXTENDER_MAX_REASON);
            const char *e = r + last_len;
            for (const char *q = r; (q = plain_run(q, e)) < e;) {
                size_t k = (unsigned char)*q < 0x80 ? 1 : utf8_seq((const unsigned char *)q, (const unsigned char *)e);
                if (!k) return core_fail(err, errlen, -EINVAL, "filter verdict %zu: reason is not valid UTF-8", i);
                q += k;
            }
            last = r;
        }
        need += last_len + 3;
    }
    int rc = buf_reserve(out, need);
    /* Go's field order: Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error */
    static const char head[] = "{\"Nodes\":null,\"NodeNames\":", failed[] = ",\"FailedNodes\":",
                      unres[] = ",\"FailedAndUnresolvableNodes\":", tail[] = ",\"Error\":\"\"}";
    static const char *const label[3] = {NULL, failed, unres};
    static const size_t label_len[3] = {0, sizeof failed - 1, sizeof unres - 1};
    if (!rc) {
        memcpy(out->data, head, sizeof head - 1);
        out->len = sizeof head - 1;
    }
    for (int w = EXTENDER_PASS; !rc && w <= EXTENDER_FAIL_UNRESOLVABLE; w++) {
        if (w != EXTENDER_PASS && (rc = buf_reserve(out, label_len[w] + 2))) break;
        if (w != EXTENDER_PASS) {
            memcpy(out->data + out->len, label[w], label_len[w]);
            out->len += label_len[w];
        }
        size_t at = out->len;
        if (!count[w]) { /* nothing to look for */
            memcpy(out->data + out->len, w == EXTENDER_PASS ? "[]" : "{}", 2);
            out->len += 2;
        } else if (w == EXTENDER_PASS && compact) {
            rc = pass_runs(out, names, v, n);
        } else {
            rc = filter_section(out, names, v, n, (enum extender_verdict)w, err, errlen);
        }
        if (w == EXTENDER_PASS && pass) *pass = (struct extender_span){at, out->len - at};
    }
    if (!rc && !(rc = buf_reserve(out, sizeof tail))) {
        memcpy(out->data + out->len, tail, sizeof tail); /* with the NUL */
        out->len += sizeof tail - 1;
    }
    if (rc) {
        out->len = 0;
        if (rc == -ENOMEM) core_fail(err, errlen, -ENOMEM, "filter result: out of memory");
    }
    return rc;
}

int extender_filter_result_buf(const struct extender_name *names, const struct extender_name_verdict *v, size_t n,
                               struct extender_buf *out, char *err, size_t errlen) {
    return filter_result(names, v, n, false, out, NULL, err, errlen);
}

int extender_filter_result_scan(const struct extender_scan *s, const struct extender_name_verdict *v,
                                struct extender_buf *out, struct extender_span *pass, char *err, size_t errlen) {
    return filter_result(s->names, v, s->nnodes, s->compact, out, pass, err, errlen);
}

/* A score, clamped, and the entry's closing brace. */
static inline char *put_score(char *d, int64_t v) {
    if (v < EXTENDER_MIN_PRIORITY) v = EXTENDER_MIN_PRIORITY;
    if (v > EXTENDER_MAX_PRIORITY) v = EXTENDER_MAX_PRIORITY;
    if (v >= 10) *d++ = (char)('0' + v / 10);
    *d++ = (char)('0' + v % 10);
    *d++ = '}';
    return d;
}

int extender_priority_list_buf(const struct extender_name *hosts, const int64_t *scores, size_t n,
                               struct extender_buf *out, char *err, size_t errlen) {
    out->len = 0;
    if (n && (!hosts || !scores)) return core_fail(err, errlen, -EINVAL, "priority list: no entries");
    if (n > EXTENDER_MAX_NODES)
        return core_fail(err, errlen, -E2BIG, "priority list: %zu hosts, more than %d", n, EXTENDER_MAX_NODES);
    size_t need = 3;
    for (size_t i = 0; i < n; i++) need += (hosts[i].s ? hosts[i].len : 0) + sizeof "{\"Host\":\"\",\"Score\":10},";
    if (buf_reserve(out, need)) return core_fail(err, errlen, -ENOMEM, "priority list: out of memory");
    char *d = out->data;
    *d++ = '[';
    for (size_t i = 0; i < n; i++) {
        /* each host checked as reply_node checks it, but for repeats: see the header */
        const struct extender_name *h = &hosts[i];
        char what[48];
        bool nul = false;
        size_t at = (size_t)(d - out->data);
        if (!h->s || h->len == 0 || h->len > EXTENDER_MAX_NAME) {
            snprintf(what, sizeof what, "priority %zu: Host", i);
            out->len = 0;
            return h->s ? check_name(h->s, h->len, what, false, err, errlen)
                        : core_fail(err, errlen, -EINVAL, "%s: no node name", what);
        }
        if (buf_reserve(out, at + 6 * h->len + 32 - out->len)) {
            out->len = 0;
            return core_fail(err, errlen, -ENOMEM, "priority list: out of memory");
        }
        d = out->data + at;
        if (i) *d++ = ',';
        PUT_LIT(d, "{\"Host\":");
        if (!(d = put_string(d, h->s, h->len, &nul))) {
            /* a NUL anywhere is reported before bad UTF-8, as check_name runs first there */
            snprintf(what, sizeof what, "priority %zu: Host", i);
            out->len = 0;
            int rc = check_name(h->s, h->len, what, false, err, errlen);
            return rc ? rc : core_fail(err, errlen, -EINVAL, "%s: node name is not valid UTF-8", what);
        }
        PUT_LIT(d, ",\"Score\":");
        d = put_score(d, scores[i]);
    }
    *d++ = ']';
    *d = '\0';
    out->len = (size_t)(d - out->data);
    return 0;
}

int extender_priority_list_scan(const struct extender_scan *s, const int64_t *scores, struct extender_buf *out,
                                char *err, size_t errlen) {
    size_t n = s->nnodes;
    const struct extender_name *hosts = s->names;
    out->len = 0;
    if (n && !scores) return core_fail(err, errlen, -EINVAL, "priority list: no entries");
    /* a compact scan's names go out as they came in; others are escaped */
    size_t need = 3;
    for (size_t i = 0; i < n; i++) need += (s->compact ? 1 : 6) * hosts[i].len + sizeof "{\"Host\":\"\",\"Score\":10},";
    if (buf_reserve(out, need)) return core_fail(err, errlen, -ENOMEM, "priority list: out of memory");
    char *d = out->data;
    *d++ = '[';
    for (size_t i = 0; i < n; i++) {
        const struct extender_name *h = &hosts[i];
        if (i) *d++ = ',';
        if (s->compact) {
            PUT_LIT(d, "{\"Host\":\"");
            copy_short(d, h->s, h->len);
            d += h->len;
            PUT_LIT(d, "\",\"Score\":");
        } else {
            PUT_LIT(d, "{\"Host\":");
            d = put_string(d, h->s, h->len, NULL); /* the scan took only valid names */
            PUT_LIT(d, ",\"Score\":");
        }
        d = put_score(d, scores[i]);
    }
    *d++ = ']';
    *d = '\0';
    out->len = (size_t)(d - out->data);
    return 0;
}
