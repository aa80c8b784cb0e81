/* An index of a list's elements by identity (patch_keyidx.h). */
#include "patch_keyidx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"

#define K1 0x9e3779b97f4a7c15ull
/* Type tags, so that values of different types seldom hash alike. */
#define TAG_STR 0x5354520000000001ull
#define TAG_NUM 0x4e554d0000000002ull
#define TAG_ARR 0x4152520000000003ull
#define TAG_OBJ 0x4f424a0000000004ull
#define TAG_KEY 0x4b45590000000005ull
#define TAG_DEEP 0x4445450000000006ull

static uint64_t fmix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* Hashes text up to its first NUL (what strcmp compares, and all of any
 * string the JSON reader makes: it refuses \u0000), eight bytes a step. */
static uint64_t hash_text(const char *p, uint64_t tag, size_t *bytes) {
    size_t n = strlen(p);
    *bytes += n;
    uint64_t h = tag ^ (n * K1);
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * K1;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return fmix(h ^ w);
}

/* A hash of v that equal values (patch_value_equal) share; *nodes and
 * *bytes count the values and string bytes it read. */
static uint64_t hash_value(const json_t *v, int depth, size_t *nodes, size_t *bytes) {
    ++*nodes;
    if (depth > PATCH_MAX_DEPTH) return TAG_DEEP; /* compares unequal to all but itself */
    switch (json_typeof(v)) {
    case JSON_STRING: return hash_text(json_string_value(v), TAG_STR, bytes);
    case JSON_INTEGER:
    case JSON_REAL: {
        double d = json_number_value(v); /* 1 == 1.0: integers compare with reals as doubles */
        if (d == 0) d = 0; /* -0.0 == 0 */
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        return fmix(u ^ TAG_NUM);
    }
    case JSON_ARRAY: {
        uint64_t h = TAG_ARR ^ (json_array_size(v) * K1);
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) h = fmix(h ^ hash_value(e, depth + 1, nodes, bytes));
        return h;
    }
    case JSON_OBJECT: { /* member order does not matter: a sum */
        uint64_t sum = 0;
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)v, k, m) {
            uint64_t hk = hash_text(k, TAG_KEY, bytes);
            sum += fmix(hk + hash_value(m, depth + 1, nodes, bytes) * K1);
        }
        return fmix(TAG_OBJ ^ (json_object_size(v) * K1) ^ sum);
    }
    default: return fmix((uint64_t)json_typeof(v) + 7); /* true, false, null */
    }
}

/* Hashes id and charges for it; *cmp gets what comparing it costs. */
static int hash_id(struct keyidx *x, const json_t *id, uint64_t *h, size_t *cmp) {
    size_t nodes = 0, bytes = 0;
    *h = hash_value(id, 0, &nodes, &bytes);
    size_t size = nodes - 1 + bytes / CMP_BYTES_PER_STEP;
    *cmp = PATCH_STEPS_CMP + size;
    return pb_charge(x->b, PATCH_STEPS_INDEX + size);
}

int keyidx_init(struct keyidx *x, const json_t *list, const char *key, size_t hint, struct patch_budget *b) {
    memset(x, 0, sizeof *x);
    x->list = list;
    x->key = key;
    x->b = b;
    x->cap = 16;
    while (x->cap < 2 * hint) x->cap *= 2;
    x->npos = hint ? hint : 1;
    x->tab = calloc(x->cap, sizeof *x->tab);
    x->pos = calloc(x->npos, sizeof *x->pos);
    if (!x->tab || !x->pos) {
        keyidx_free(x);
        return core_fail(b->err, b->errlen, -ENOMEM, "out of memory");
    }
    return 0;
}

void keyidx_free(struct keyidx *x) {
    free(x->tab);
    free(x->pos);
    x->tab = NULL;
    x->pos = NULL;
}

/* The slot of the bucket for hash h, or the free slot where it would go;
 * charges for the slots probed past the first. -E2BIG when the budget is
 * spent. */
static long slot_of(struct keyidx *x, uint64_t h) {
    size_t mask = x->cap - 1, i = h & mask, probes = 0;
    for (; x->tab[i].used && x->tab[i].hash != h; i = (i + 1) & mask) probes++;
    int rc = probes ? pb_charge(x->b, probes * PATCH_STEPS_PROBE) : 0;
    return rc ? rc : (long)i;
}

/* Doubles the table, leaving emptied buckets behind. */
static int grow_table(struct keyidx *x) {
    size_t cap = x->cap * 2, mask = cap - 1, nb = 0;
    struct keyidx_bucket *t = calloc(cap, sizeof *t);
    if (!t) return core_fail(x->b->err, x->b->errlen, -ENOMEM, "out of memory");
    for (size_t i = 0; i < x->cap; i++) {
        if (!x->tab[i].used || x->tab[i].head == KEYIDX_NONE) continue;
        size_t j = x->tab[i].hash & mask;
        while (t[j].used) j = (j + 1) & mask;
        t[j] = x->tab[i];
        nb++;
    }
    free(x->tab);
    x->tab = t;
    x->cap = cap;
    x->nb = nb;
    return pb_charge(x->b, nb * PATCH_STEPS_PROBE);
}

/* Takes pos out of its bucket's chain, if it is in one. */
static int unlink_pos(struct keyidx *x, size_t pos) {
    if (pos >= x->npos || !x->pos[pos].linked) return 0;
    struct keyidx_pos *p = &x->pos[pos];
    long i = slot_of(x, p->hash);
    if (i < 0) return (int)i;
    struct keyidx_bucket *bk = &x->tab[i];
    if (p->prev == KEYIDX_NONE) bk->head = p->next;
    else x->pos[p->prev].next = p->next;
    if (p->next == KEYIDX_NONE) bk->tail = p->prev;
    else x->pos[p->next].prev = p->prev;
    p->linked = false;
    return 0;
}

int keyidx_add(struct keyidx *x, size_t pos) {
    int rc = unlink_pos(x, pos);
    const json_t *id = keyidx_id(json_array_get(x->list, pos), x->key);
    if (rc || !id) return rc;
    if (pos >= x->npos) {
        size_t n = x->npos * 2 > pos ? x->npos * 2 : pos + 1;
        struct keyidx_pos *np = realloc(x->pos, n * sizeof *np);
        if (!np) return core_fail(x->b->err, x->b->errlen, -ENOMEM, "out of memory");
        memset(np + x->npos, 0, (n - x->npos) * sizeof *np);
        x->pos = np;
        x->npos = n;
    }
    uint64_t h;
    size_t cmp;
    if ((rc = hash_id(x, id, &h, &cmp))) return rc;
    if ((x->nb + 1) * 2 > x->cap && (rc = grow_table(x))) return rc;
    long i = slot_of(x, h);
    if (i < 0) return (int)i;
    struct keyidx_bucket *bk = &x->tab[i];
    if (!bk->used) {
        *bk = (struct keyidx_bucket){h, KEYIDX_NONE, KEYIDX_NONE, true};
        x->nb++;
    }
    /* in position order: usually pos comes last */
    size_t after = bk->tail, steps = 0;
    for (; after != KEYIDX_NONE && after > pos; after = x->pos[after].prev) steps++;
    if (steps && (rc = pb_charge(x->b, steps * PATCH_STEPS_PROBE))) return rc;
    struct keyidx_pos *p = &x->pos[pos];
    *p = (struct keyidx_pos){h, after == KEYIDX_NONE ? bk->head : x->pos[after].next, after, true};
    if (p->prev == KEYIDX_NONE) bk->head = pos;
    else x->pos[p->prev].next = pos;
    if (p->next == KEYIDX_NONE) bk->tail = pos;
    else x->pos[p->next].prev = pos;
    return 0;
}

int keyidx_add_all(struct keyidx *x, size_t n) {
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) rc = keyidx_add(x, i);
    return rc;
}

/* The first position in the bucket for h whose identity equals id (or, id
 * NULL, is a string of text `text`); each comparison costs cmp. */
static long find_hashed(struct keyidx *x, uint64_t h, size_t cmp, const json_t *id, const char *text) {
    long i = slot_of(x, h);
    if (i < 0) return i;
    if (!x->tab[i].used) return -1;
    for (size_t q = x->tab[i].head; q != KEYIDX_NONE; q = x->pos[q].next) {
        int rc = pb_charge(x->b, cmp);
        if (rc) return rc;
        const json_t *e = keyidx_id(json_array_get(x->list, q), x->key);
        if (id ? patch_value_equal(e, id) : json_is_string(e) && !strcmp(json_string_value(e), text)) return (long)q;
    }
    return -1;
}

long keyidx_find(struct keyidx *x, const json_t *id) {
    if (!id) return -1;
    uint64_t h;
    size_t cmp;
    int rc = hash_id(x, id, &h, &cmp);
    return rc ? rc : find_hashed(x, h, cmp, id, NULL);
}

long keyidx_find_text(struct keyidx *x, const char *s) {
    size_t bytes = 0;
    uint64_t h = hash_text(s, TAG_STR, &bytes);
    int rc = pb_charge(x->b, PATCH_STEPS_INDEX + bytes / CMP_BYTES_PER_STEP);
    return rc ? rc : find_hashed(x, h, PATCH_STEPS_CMP + bytes / CMP_BYTES_PER_STEP, NULL, s);
}
