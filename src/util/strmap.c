/* String-keyed hash map (strmap.h). */
#include "strmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char tomb_;
#define STRMAP_TOMB (&tomb_)

uint64_t strmap_hash(const char *s) { /* FNV-1a, then a final mix */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static size_t find(const struct strmap *m, const char *key, uint64_t h) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct strmap_slot *s = &m->s[i];
        if (!s->key) return SIZE_MAX;
        if (s->key != STRMAP_TOMB && s->hash == h && !strcmp(s->key, key)) return i;
    }
}

void *strmap_get(const struct strmap *m, const char *key) {
    if (!m->cap) return NULL;
    size_t i = find(m, key, strmap_hash(key));
    return i == SIZE_MAX ? NULL : m->s[i].val;
}

static int grow(struct strmap *m) {
    size_t nc = m->cap ? m->cap : 16;
    while (nc / 2 < m->n + 1) nc *= 2; /* live entries fill at most half */
    struct strmap_slot *ns = calloc(nc, sizeof *ns);
    if (!ns) return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        struct strmap_slot *s = &m->s[i];
        if (!s->key || s->key == STRMAP_TOMB) continue;
        size_t j = s->hash & (nc - 1);
        while (ns[j].key) j = (j + 1) & (nc - 1);
        ns[j] = *s;
    }
    free(m->s);
    m->s = ns;
    m->cap = nc;
    m->used = m->n;
    return 0;
}

int strmap_put(struct strmap *m, const char *key, void *val, void **old) {
    uint64_t h = strmap_hash(key);
    if (old) *old = NULL;
    if (m->cap) {
        size_t i = find(m, key, h);
        if (i != SIZE_MAX) {
            if (old) *old = m->s[i].val;
            m->s[i].val = val;
            return 0;
        }
    }
    if ((m->used + 1) * 4 > m->cap * 3 && grow(m)) return -ENOMEM;
    char *k = strdup(key);
    if (!k) return -ENOMEM;
    size_t mask = m->cap - 1, i = h & mask;
    while (m->s[i].key && m->s[i].key != STRMAP_TOMB) i = (i + 1) & mask;
    if (!m->s[i].key) m->used++;
    m->s[i] = (struct strmap_slot){k, val, h};
    m->n++;
    return 0;
}

void *strmap_del(struct strmap *m, const char *key) {
    if (!m->cap) return NULL;
    size_t i = find(m, key, strmap_hash(key));
    if (i == SIZE_MAX) return NULL;
    void *v = m->s[i].val;
    free(m->s[i].key);
    m->s[i].key = STRMAP_TOMB;
    m->s[i].val = NULL;
    m->n--;
    return v;
}

int strmap_next(const struct strmap *m, size_t *pos, const char **key, void **val) {
    for (; *pos < m->cap; (*pos)++) {
        struct strmap_slot *s = &m->s[*pos];
        if (s->key && s->key != STRMAP_TOMB) {
            if (key) *key = s->key;
            if (val) *val = s->val;
            (*pos)++;
            return 1;
        }
    }
    return 0;
}

void strmap_free(struct strmap *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->s[i].key && m->s[i].key != STRMAP_TOMB) free(m->s[i].key);
    free(m->s);
    memset(m, 0, sizeof *m);
}
