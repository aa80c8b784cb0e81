/* The static token file (shim_auth.h): parsing, and finding a token's user. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_auth.h"

struct tok_entry {
    char *token; /* owns the entry's strings: token\0user\0uid\0group\0group… */
    size_t len;
    uint64_t hash;
    struct auth_user user;
};

struct auth_tokens {
    struct tok_entry *e;
    int n, cap;
    int *slots; /* open addressing by hash: index + 1, 0 empty */
    int nslots;
};

static uint64_t fnv(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

/* Equal strings of length n, in a time that does not depend on where they differ. */
static bool same_secret(const char *a, const char *b, size_t n) {
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

struct auth_tokens *auth_tokens_new(void) { return calloc(1, sizeof(struct auth_tokens)); }

void auth_tokens_free(struct auth_tokens *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->e[i].token);
    free(t->e);
    free(t->slots);
    free(t);
}

int auth_tokens_count(const struct auth_tokens *t) { return t ? t->n : 0; }

static int rehash(struct auth_tokens *t) {
    int ns = 16;
    while (ns < 4 * (t->n + 1)) ns *= 2; /* at most a quarter full after, half before the next */
    int *sl = calloc((size_t)ns, sizeof *sl);
    if (!sl) return -ENOMEM;
    for (int i = 0; i < t->n; i++) {
        int k = (int)(t->e[i].hash & (uint64_t)(ns - 1));
        while (sl[k]) k = (k + 1) & (ns - 1);
        sl[k] = i + 1;
    }
    free(t->slots);
    t->slots = sl;
    t->nslots = ns;
    return 0;
}

const struct auth_user *auth_tokens_find(const struct auth_tokens *t, const char *tok, size_t n) {
    if (!t || !t->nslots || !n) return NULL;
    uint64_t h = fnv(tok, n);
    for (int k = (int)(h & (uint64_t)(t->nslots - 1)); t->slots[k]; k = (k + 1) & (t->nslots - 1)) {
        const struct tok_entry *e = &t->e[t->slots[k] - 1];
        if (e->hash == h && e->len == n && same_secret(e->token, tok, n)) return &e->user;
    }
    return NULL;
}

/* Adds the entry whose strings are packed in buf (token, user, uid, groups;
 * taken). */
static int add_packed(struct auth_tokens *t, char *buf, int ngroups) {
    size_t len = strlen(buf);
    if (auth_tokens_find(t, buf, len)) {
        free(buf);
        return -EEXIST;
    }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        struct tok_entry *e = realloc(t->e, (size_t)cap * sizeof *e);
        if (!e) {
            free(buf);
            return -ENOMEM;
        }
        t->e = e;
        t->cap = cap;
    }
    struct tok_entry *e = &t->e[t->n];
    memset(e, 0, sizeof *e);
    e->token = buf;
    e->len = len;
    e->hash = fnv(buf, len);
    char *p = buf + len + 1;
    e->user.name = p;
    p += strlen(p) + 1;
    e->user.uid = p;
    p += strlen(p) + 1;
    for (int i = 0; i < ngroups; i++, p += strlen(p) + 1) e->user.groups[e->user.ngroups++] = p;
    e->user.groups[e->user.ngroups++] = "system:authenticated";
    t->n++;
    if (2 * t->n <= t->nslots) { /* room: just place it */
        int k = (int)(e->hash & (uint64_t)(t->nslots - 1));
        while (t->slots[k]) k = (k + 1) & (t->nslots - 1);
        t->slots[k] = t->n;
        return 0;
    }
    int rc = rehash(t);
    if (rc) t->n--, free(buf);
    return rc;
}

/* Packs strings (n of them) into one allocation. */
static char *pack(const char *const *s, int n) {
    size_t len = 0;
    for (int i = 0; i < n; i++) len += strlen(s[i]) + 1;
    char *b = malloc(len ? len : 1), *p = b;
    if (!b) return NULL;
    for (int i = 0; i < n; i++) p = stpcpy(p, s[i]) + 1;
    return b;
}

int auth_tokens_add(struct auth_tokens *t, const char *token, const char *user, const char *uid, const char *group) {
    if (!token || !token[0]) return -EINVAL;
    const char *s[] = {token, user, uid, group};
    char *b = pack(s, group ? 4 : 3);
    if (!b) return -ENOMEM;
    int rc = add_packed(t, b, group ? 1 : 0);
    return rc == -EEXIST ? -EINVAL : rc;
}

/* One CSV line's fields (encoding/csv's rules: a field may be quoted, "" in
 * quotes is a quote; leading blanks are trimmed, as kube-apiserver reads this
 * file), written NUL-separated into out; their count, or -1 with why. */
static int csv_fields(const char *p, const char *end, char *out, size_t outcap, char *fields[], int maxf,
                      const char **why) {
    int n = 0;
    size_t o = 0;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if (n == maxf) {
            *why = "too many fields";
            return -1;
        }
        fields[n++] = out + o;
        if (p < end && *p == '"') {
            p++;
            for (;;) {
                if (p == end) {
                    *why = "unterminated quote";
                    return -1;
                }
                if (*p == '"' && p + 1 < end && p[1] == '"') p++;
                else if (*p == '"') break;
                if (o + 1 >= outcap) return *why = "line too long", -1;
                out[o++] = *p++;
            }
            p++;
            if (p < end && *p != ',') {
                *why = "text after a closing quote";
                return -1;
            }
        } else {
            while (p < end && *p != ',') {
                if (*p == '"') return *why = "a quote inside an unquoted field", -1;
                if (o + 1 >= outcap) return *why = "line too long", -1;
                out[o++] = *p++;
            }
        }
        out[o++] = 0;
        if (p == end) return n;
        p++; /* the comma */
    }
}

static int parse_line(struct auth_tokens *t, const char *p, const char *end, int lineno, char *err, size_t errlen) {
    enum { MAXF = 8 };
    char buf[4 * AUTH_MAX_FIELD + 64];
    char *f[MAXF];
    const char *why = NULL;
    if ((size_t)(end - p) >= sizeof buf) {
        snprintf(err, errlen, "token file line %d: longer than %zu bytes", lineno, sizeof buf - 1);
        return -EINVAL;
    }
    int n = csv_fields(p, end, buf, sizeof buf, f, MAXF, &why);
    if (n >= 0 && n < 3) why = "want token,user,uid[,\"group1,group2\"]";
    else if (n >= 0 && (!f[0][0] || !f[1][0])) why = !f[0][0] ? "an empty token" : "an empty user name";
    else if (n >= 0 && (strlen(f[0]) > AUTH_MAX_FIELD || strlen(f[1]) > AUTH_MAX_FIELD || strlen(f[2]) > AUTH_MAX_FIELD))
        why = "a field longer than 1024 bytes";
    if (why) {
        snprintf(err, errlen, "token file line %d: %s", lineno, why);
        return -EINVAL;
    }
    const char *s[3 + AUTH_MAX_GROUPS];
    s[0] = f[0], s[1] = f[1], s[2] = f[2];
    int ng = 0;
    if (n >= 4) { /* the groups: comma-separated inside the fourth field; blanks around them dropped */
        for (char *g = f[3]; g && *g;) {
            char *c = strchr(g, ',');
            if (c) *c = 0;
            while (*g == ' ') g++;
            size_t gl = strlen(g);
            while (gl && g[gl - 1] == ' ') g[--gl] = 0;
            if (gl) {
                if (ng == AUTH_MAX_GROUPS) {
                    snprintf(err, errlen, "token file line %d: more than %d groups", lineno, AUTH_MAX_GROUPS);
                    return -EINVAL;
                }
                s[3 + ng++] = g;
            }
            g = c ? c + 1 : NULL;
        }
    }
    char *b = pack(s, 3 + ng);
    if (!b) return -ENOMEM;
    int rc = add_packed(t, b, ng);
    if (rc == -EEXIST) snprintf(err, errlen, "token file line %d: a token given twice", lineno);
    else if (rc) snprintf(err, errlen, "token file: out of memory");
    return rc == -EEXIST ? -EINVAL : rc;
}

int auth_tokens_parse(const char *text, size_t len, struct auth_tokens **out, char *err, size_t errlen) {
    *out = NULL;
    if (len > AUTH_MAX_FILE) {
        snprintf(err, errlen, "token file: larger than %u bytes", AUTH_MAX_FILE);
        return -EINVAL;
    }
    if (memchr(text, 0, len)) {
        snprintf(err, errlen, "token file: a NUL byte");
        return -EINVAL;
    }
    struct auth_tokens *t = auth_tokens_new();
    if (!t) return -ENOMEM;
    /* The format before this one: the file is one token (no comma), its
     * surrounding blanks and line end dropped. */
    const char *b = text, *e = text + len;
    while (b < e && (*b == ' ' || *b == '\t' || *b == '\r' || *b == '\n')) b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n')) e--;
    if (b < e && *b != '#' && !memchr(b, ',', (size_t)(e - b)) && !memchr(b, '\n', (size_t)(e - b))) {
        if ((size_t)(e - b) > AUTH_MAX_FIELD || memchr(b, ' ', (size_t)(e - b))) {
            snprintf(err, errlen, "token file: a single token must be one word of at most %d bytes", AUTH_MAX_FIELD);
            auth_tokens_free(t);
            return -EINVAL;
        }
        char tok[AUTH_MAX_FIELD + 1];
        memcpy(tok, b, (size_t)(e - b));
        tok[e - b] = 0;
        int rc = auth_tokens_add(t, tok, AUTH_SINGLE_USER, AUTH_SINGLE_USER, "system:masters");
        if (rc) {
            auth_tokens_free(t);
            return rc;
        }
        *out = t;
        return 0;
    }
    int lineno = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        const char *q = le;
        if (q > p && q[-1] == '\r') q--;
        const char *s = p;
        while (s < q && (*s == ' ' || *s == '\t')) s++;
        if (s < q && *s != '#') {
            if (t->n == AUTH_MAX_TOKENS) {
                snprintf(err, errlen, "token file: more than %d tokens", AUTH_MAX_TOKENS);
                auth_tokens_free(t);
                return -EINVAL;
            }
            int rc = parse_line(t, p, q, lineno, err, errlen);
            if (rc) {
                auth_tokens_free(t);
                return rc;
            }
        }
        p = nl ? nl + 1 : end;
    }
    if (!t->n) {
        snprintf(err, errlen, "token file: no token in it");
        auth_tokens_free(t);
        return -EINVAL;
    }
    *out = t;
    return 0;
}

int auth_tokens_load(const char *path, struct auth_tokens **out, char *err, size_t errlen) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "token file %s: %s", path, strerror(errno));
        return -errno;
    }
    char *buf = malloc(AUTH_MAX_FILE + 1);
    if (!buf) {
        fclose(f);
        return -ENOMEM;
    }
    size_t n = fread(buf, 1, AUTH_MAX_FILE + 1, f);
    fclose(f);
    int rc = auth_tokens_parse(buf, n, out, err, errlen);
    explicit_bzero(buf, n);
    free(buf);
    return rc;
}
