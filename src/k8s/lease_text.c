/* lease_text_renew (lease_text.h): a scan of the stored text for the spans
 * the renewal replaces, then one copy with them replaced. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"
#include "lease_text.h"

#define LT_MAX_DEPTH 64    /* nesting the scan follows inside the values it skips */
#define LT_MAX_MEMBERS 32  /* members of the top level, metadata or spec (ObjectMeta has 17 fields) */
#define LT_MAX_EDITS 8     /* generation, the resourceVersion's place, five spec fields */

struct span {
    size_t k0, k1; /* the key, without its quotes */
    size_t v0, v1; /* the value */
};

static size_t skip_ws(const char *s, size_t i, size_t n) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* i at a string's opening quote: the index after its closing one, 0 when
 * malformed; *esc set when it holds an escape. */
static size_t string_end(const char *s, size_t i, size_t n, bool *esc) {
    for (i++; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') return i + 1;
        if (c < 0x20) return 0;
        if (c == '\\') {
            *esc = true;
            i++;
        }
    }
    return 0;
}

/* The index after the value that starts at i, 0 when malformed. Values that
 * are skipped are copied as they are, so a loose check suffices for scalars. */
static size_t value_end(const char *s, size_t i, size_t n, int depth) {
    bool esc = false;
    if (i >= n || depth > LT_MAX_DEPTH) return 0;
    if (s[i] == '"') return string_end(s, i, n, &esc);
    if (s[i] == '{' || s[i] == '[') {
        char close = s[i] == '{' ? '}' : ']';
        i = skip_ws(s, i + 1, n);
        if (i < n && s[i] == close) return i + 1;
        for (;;) {
            if (close == '}') {
                if (i >= n || s[i] != '"' || !(i = string_end(s, i, n, &esc))) return 0;
                i = skip_ws(s, i, n);
                if (i >= n || s[i] != ':') return 0;
                i = skip_ws(s, i + 1, n);
            }
            if (!(i = value_end(s, i, n, depth + 1))) return 0;
            i = skip_ws(s, i, n);
            if (i < n && s[i] == ',') {
                i = skip_ws(s, i + 1, n);
                continue;
            }
            return i < n && s[i] == close ? i + 1 : 0;
        }
    }
    size_t start = i;
    while (i < n && ((s[i] && strchr("+-.eE", s[i])) || (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z'))) i++;
    return i > start ? i : 0;
}

/* The members of the object at i (its '{'): their spans in m (at most
 * LT_MAX_MEMBERS), *end after its '}'. The count, or -1 when the text is
 * malformed, too wide, or a key is escaped or repeated. */
static int members(const char *s, size_t i, size_t n, struct span *m, size_t *end) {
    int c = 0;
    if (i >= n || s[i] != '{') return -1;
    i = skip_ws(s, i + 1, n);
    if (i < n && s[i] == '}') {
        *end = i + 1;
        return 0;
    }
    for (;;) {
        bool esc = false;
        if (c == LT_MAX_MEMBERS || i >= n || s[i] != '"') return -1;
        size_t k0 = i + 1, k1 = string_end(s, i, n, &esc);
        if (!k1 || esc) return -1;
        k1--; /* at the closing quote */
        for (int j = 0; j < c; j++)
            if (m[j].k1 - m[j].k0 == k1 - k0 && !memcmp(s + m[j].k0, s + k0, k1 - k0)) return -1;
        i = skip_ws(s, k1 + 1, n);
        if (i >= n || s[i] != ':') return -1;
        i = skip_ws(s, i + 1, n);
        size_t v1 = value_end(s, i, n, 1);
        if (!v1) return -1;
        m[c++] = (struct span){k0, k1, i, v1};
        i = skip_ws(s, v1, n);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, i + 1, n);
            continue;
        }
        if (i >= n || s[i] != '}') return -1;
        *end = i + 1;
        return c;
    }
}

static const struct span *find(const char *s, const struct span *m, int c, const char *key) {
    size_t kl = strlen(key);
    for (int i = 0; i < c; i++)
        if (m[i].k1 - m[i].k0 == kl && !memcmp(s + m[i].k0, key, kl)) return &m[i];
    return NULL;
}

/* The value of sp is the JSON string whose content is want (no escapes). */
static bool value_is(const char *s, const struct span *sp, const char *want) {
    size_t wl = strlen(want);
    return sp && sp->v1 - sp->v0 == wl + 2 && s[sp->v0] == '"' && !memcmp(s + sp->v0 + 1, want, wl) &&
           s[sp->v1 - 1] == '"';
}

/* An empty object or list, or null: what shim_meta_omit_empty removes. */
static bool empty_value(const char *s, const struct span *sp) {
    if (s[sp->v0] == 'n') return true;
    if (s[sp->v0] != '{' && s[sp->v0] != '[') return false;
    return skip_ws(s, sp->v0 + 1, sp->v1) == sp->v1 - 1;
}

struct edit {
    size_t v0, v1; /* the span replaced */
    char *with;    /* its replacement (malloc'ed); NULL: the resourceVersion's place */
    size_t len;
};

static int edit_cmp(const void *a, const void *b) {
    const struct edit *x = a, *y = b;
    return x->v0 < y->v0 ? -1 : x->v0 > y->v0;
}

/* The patch's metadata: none, or only a resourceVersion. false: not a renewal. */
static bool patch_meta(const json_t *patch, const char **rv) {
    json_t *md = json_object_get(patch, "metadata");
    *rv = NULL;
    if (!md) return true;
    if (!json_is_object(md) || json_object_size(md) != 1) return false;
    *rv = json_string_value(json_object_get(md, "resourceVersion"));
    return *rv && (*rv)[0];
}

static bool spec_field(const char *key, const json_t *v) {
    static const char *const strs[] = {"holderIdentity", "renewTime", "acquireTime"};
    static const char *const ints[] = {"leaseDurationSeconds", "leaseTransitions"};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        if (!strcmp(key, strs[i])) return json_is_string(v);
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        if (!strcmp(key, ints[i])) return json_is_integer(v);
    return false;
}

/* The value as the store's encoder writes it (jdump: json_dumps' bytes). */
static char *dump_value(const json_t *v, size_t *len) {
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    if (json_is_string(v)) {
        if (jdump_append_string(&buf, len, &cap, json_string_value(v), json_string_length(v))) {
            free(buf);
            return NULL;
        }
        return buf;
    }
    char num[32];
    int n = snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    if (jdump_append(&buf, len, &cap, num, (size_t)n)) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void edits_free(struct edit *e, int n) {
    for (int i = 0; i < n; i++) free(e[i].with);
}

int lease_text_renew(const char *text, size_t len, const char *ns, const char *name, const json_t *patch,
                     struct lease_renewal *out) {
    struct span top[LT_MAX_MEMBERS], md[LT_MAX_MEMBERS], spec[LT_MAX_MEMBERS];
    memset(out, 0, sizeof *out);
    if (!text || !ns || !ns[0] || !name || !json_is_object(patch)) return -EAGAIN;
    /* the patch: spec's renewal fields, and perhaps the version it holds to */
    json_t *pspec = json_object_get(patch, "spec");
    const char *prv;
    if (!json_is_object(pspec) || !json_object_size(pspec) || !patch_meta(patch, &prv) ||
        json_object_size(patch) != 1 + (prv != NULL))
        return -EAGAIN;
    const char *k;
    json_t *v;
    json_object_foreach(pspec, k, v) if (!spec_field(k, v)) return -EAGAIN;
    /* the stored Lease */
    size_t end, mend, send;
    size_t i = skip_ws(text, 0, len);
    int nt = members(text, i, len, top, &end);
    if (nt < 0 || skip_ws(text, end, len) != len) return -EAGAIN;
    const struct span *smd = find(text, top, nt, "metadata"), *sspec = find(text, top, nt, "spec");
    if (!value_is(text, find(text, top, nt, "kind"), "Lease") ||
        !value_is(text, find(text, top, nt, "apiVersion"), "coordination.k8s.io/v1") || find(text, top, nt, "status") ||
        !smd || !sspec)
        return -EAGAIN;
    int nm = members(text, smd->v0, len, md, &mend), nsp = members(text, sspec->v0, len, spec, &send);
    if (nm < 1 || nsp < 0 || mend != smd->v1 || send != sspec->v1) return -EAGAIN;
    const struct span *gen = find(text, md, nm, "generation"), *rv = &md[nm - 1];
    if (!value_is(text, find(text, md, nm, "name"), name) || !value_is(text, find(text, md, nm, "namespace"), ns) ||
        find(text, md, nm, "deletionTimestamp") || find(text, md, nm, "labels") ||
        find(text, md, nm, "annotations") || !gen || rv->k1 - rv->k0 != 15 ||
        memcmp(text + rv->k0, "resourceVersion", 15) || text[rv->v0] != '"' || rv->v1 - rv->v0 < 3 ||
        rv->v1 - rv->v0 - 2 >= sizeof out->rv)
        return -EAGAIN;
    static const char *const omitted[] = {"finalizers", "ownerReferences", "managedFields"};
    for (size_t j = 0; j < sizeof omitted / sizeof *omitted; j++) {
        const struct span *o = find(text, md, nm, omitted[j]);
        if (o && empty_value(text, o)) return -EAGAIN;
    }
    /* generation: a plain integer, as the encoder writes one */
    size_t gl = gen->v1 - gen->v0;
    if (gl < 1 || gl > 18 || (text[gen->v0] == '0' && gl > 1)) return -EAGAIN;
    long long g = 0;
    for (size_t j = gen->v0; j < gen->v1; j++) {
        if (text[j] < '0' || text[j] > '9') return -EAGAIN;
        g = g * 10 + (text[j] - '0');
    }
    memcpy(out->rv, text + rv->v0 + 1, rv->v1 - rv->v0 - 2);
    out->rv[rv->v1 - rv->v0 - 2] = 0;
    for (const char *c = out->rv; *c; c++)
        if (*c < '0' || *c > '9') return -EAGAIN;
    if (prv && strcmp(prv, out->rv)) return -EAGAIN; /* a version not the stored one: the generic path answers */
    /* the edits: each patched field, the generation, the version's place */
    struct edit e[LT_MAX_EDITS];
    int ne = 0;
    bool changed = false;
    json_object_foreach(pspec, k, v) {
        const struct span *f = find(text, spec, nsp, k);
        if (!f || ne >= LT_MAX_EDITS - 2) { /* appending a field would change the order too: the generic path */
            edits_free(e, ne);
            return -EAGAIN;
        }
        size_t dl;
        char *d = dump_value(v, &dl);
        if (!d) {
            edits_free(e, ne);
            return json_is_string(v) ? -EAGAIN : -ENOMEM; /* a string jdump refuses is the generic path's error */
        }
        if (dl != f->v1 - f->v0 || memcmp(d, text + f->v0, dl)) changed = true;
        e[ne++] = (struct edit){f->v0, f->v1, d, dl};
    }
    if (!changed) { /* nothing changes: nothing is written, and the generic path answers so */
        edits_free(e, ne);
        return -EAGAIN;
    }
    char gbuf[24];
    int gn = snprintf(gbuf, sizeof gbuf, "%lld", (g < 1 ? 1 : g) + 1); /* the store bumps it: spec changed */
    char *gs = strdup(gbuf);
    if (!gs) {
        edits_free(e, ne);
        return -ENOMEM;
    }
    e[ne++] = (struct edit){gen->v0, gen->v1, gs, (size_t)gn};
    e[ne++] = (struct edit){rv->v0 + 1, rv->v1 - 1, NULL, 0};
    qsort(e, (size_t)ne, sizeof *e, edit_cmp);
    size_t n = len;
    for (int j = 0; j < ne; j++) n = n - (e[j].v1 - e[j].v0) + e[j].len;
    char *t = malloc(n + 1);
    if (!t) {
        edits_free(e, ne);
        return -ENOMEM;
    }
    size_t at = 0, from = 0;
    for (int j = 0; j < ne; j++) {
        memcpy(t + at, text + from, e[j].v0 - from);
        at += e[j].v0 - from;
        if (!e[j].with) out->rv_at = at;
        else memcpy(t + at, e[j].with, e[j].len);
        at += e[j].len;
        from = e[j].v1;
    }
    memcpy(t + at, text + from, len - from);
    at += len - from;
    t[at] = 0;
    edits_free(e, ne);
    out->text = t;
    out->len = at;
    out->patch_rv = prv;
    return 0;
}
