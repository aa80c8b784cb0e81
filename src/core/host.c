#include "host.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PAIR_SEP '\x1f' /* unit separator: cannot clash with printable label text */

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Grows *p (element size sz) to hold at least need elements. */
static int grow(void **p, uint32_t *cap, uint32_t need, size_t sz) {
    if (need <= *cap) return 0;
    uint64_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    if (nc > UINT32_MAX) return -ENOMEM;
    void *q = realloc(*p, (size_t)nc * sz);
    if (!q) return -ENOMEM;
    *p = q;
    *cap = (uint32_t)nc;
    return 0;
}

/* ---- count maps ---- */

static uint32_t *cm_slot(const struct host_countmap *m, uint64_t key, bool *found) {
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)hash_u64(key) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == key) { *found = true; return &m->vals[i]; }
        if (m->keys[i] == UINT64_MAX) { *found = false; return &m->vals[i]; }
    }
}

static int cm_rehash(struct host_countmap *m, uint32_t ncap) {
    uint64_t *keys = malloc((size_t)ncap * sizeof *keys);
    uint32_t *vals = malloc((size_t)ncap * sizeof *vals);
    if (!keys || !vals) { free(keys); free(vals); return -ENOMEM; }
    memset(keys, 0xff, (size_t)ncap * sizeof *keys);
    struct host_countmap nm = {keys, vals, m->n, ncap};
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == UINT64_MAX) continue;
        bool found;
        uint32_t *v = cm_slot(&nm, m->keys[i], &found);
        nm.keys[v - nm.vals] = m->keys[i];
        *v = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    *m = nm;
    return 0;
}

uint32_t host_count_get(const struct host_countmap *m, uint64_t key) {
    if (!m->cap) return 0;
    bool found;
    uint32_t *v = cm_slot(m, key, &found);
    return found ? *v : 0;
}

int host_count_add(struct host_countmap *m, uint64_t key, int32_t delta) {
    if (delta <= 0 && m->cap == 0) return 0;
    if (delta > 0 && (m->cap == 0 || (m->n + 1) * 2 > m->cap)) {
        int rc = cm_rehash(m, m->cap ? m->cap * 2 : 64);
        if (rc) return rc;
    }
    bool found;
    uint32_t *v = cm_slot(m, key, &found);
    if (!found) {
        if (delta <= 0) return 0;
        m->keys[v - m->vals] = key;
        *v = 0;
        m->n++;
    }
    /* Entries that drop to 0 stay (no tombstones needed); undo is common. */
    int64_t r = (int64_t)*v + delta;
    *v = r < 0 ? 0 : r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
    return 0;
}

static void cm_free(struct host_countmap *m) {
    free(m->keys);
    free(m->vals);
    *m = (struct host_countmap){0};
}

static size_t cm_bytes(const struct host_countmap *m) {
    return (size_t)m->cap * (sizeof *m->keys + sizeof *m->vals);
}

/* ---- string table ---- */

static uint32_t st_lookup(const struct host_strtab *t, const char *s, size_t len, uint64_t h,
                          uint32_t *slot) {
    uint32_t mask = t->nslots - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        uint32_t id = t->slots[i];
        if (id == 0) { *slot = i; return 0; }
        const char *c = t->buf + t->off[id - 1];
        if (strncmp(c, s, len) == 0 && c[len] == '\0') { *slot = i; return id; }
    }
}

static int st_rehash(struct host_strtab *t, uint32_t nslots) {
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return -ENOMEM;
    uint32_t mask = nslots - 1;
    for (uint32_t id = 1; id <= t->n; id++) {
        const char *c = t->buf + t->off[id - 1];
        uint32_t i = (uint32_t)hash_bytes(c, strlen(c)) & mask;
        while (slots[i]) i = (i + 1) & mask;
        slots[i] = id;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

uint32_t host_str_find(const struct host_fleet *f, const char *s, size_t len) {
    const struct host_strtab *t = &f->strs;
    if (!t->nslots || len > HOST_STR_MAX) return 0;
    uint32_t slot;
    return st_lookup(t, s, len, hash_bytes(s, len), &slot);
}

uint32_t host_str_intern(struct host_fleet *f, const char *s, size_t len) {
    struct host_strtab *t = &f->strs;
    if (len > HOST_STR_MAX || memchr(s, '\0', len)) return 0;
    if (!t->nslots && st_rehash(t, 1024)) return 0;
    uint64_t h = hash_bytes(s, len);
    uint32_t slot;
    uint32_t id = st_lookup(t, s, len, h, &slot);
    if (id) return id;
    if (t->n == UINT32_MAX - 1) return 0;
    if ((uint64_t)(t->n + 1) * 2 > t->nslots) {
        if (st_rehash(t, t->nslots * 2)) return 0;
        st_lookup(t, s, len, h, &slot);
    }
    if (grow((void **)&t->off, &t->ncap, t->n + 1, sizeof *t->off)) return 0;
    if (t->len + len + 1 > t->cap) {
        size_t nc = t->cap ? t->cap : 4096;
        while (nc < t->len + len + 1) nc *= 2;
        if (nc > UINT32_MAX) return 0;
        char *b = realloc(t->buf, nc);
        if (!b) return 0;
        t->buf = b;
        t->cap = nc;
    }
    memcpy(t->buf + t->len, s, len);
    t->buf[t->len + len] = '\0';
    t->off[t->n] = (uint32_t)t->len;
    t->len += len + 1;
    t->n++;
    t->slots[slot] = t->n;
    return t->n;
}

const char *host_str(const struct host_fleet *f, uint32_t id) {
    if (id == 0 || id > f->strs.n) return "";
    return f->strs.buf + f->strs.off[id - 1];
}

static int pair_text(const char *key, const char *value, char *buf, size_t cap, size_t *len) {
    size_t kl = strlen(key), vl = strlen(value ? value : "");
    if (kl + vl + 1 > cap) return -EINVAL;
    memcpy(buf, key, kl);
    buf[kl] = PAIR_SEP;
    memcpy(buf + kl + 1, value ? value : "", vl);
    *len = kl + 1 + vl;
    return 0;
}

uint32_t host_pair_intern(struct host_fleet *f, const char *key, const char *value) {
    char buf[HOST_STR_MAX];
    size_t len;
    if (pair_text(key, value, buf, sizeof buf, &len)) return 0;
    return host_str_intern(f, buf, len);
}

uint32_t host_pair_find(const struct host_fleet *f, const char *key, const char *value) {
    char buf[HOST_STR_MAX];
    size_t len;
    if (pair_text(key, value, buf, sizeof buf, &len)) return 0;
    return host_str_find(f, buf, len);
}

/* ---- fleet ---- */

struct host_fleet *host_fleet_new(void) {
    return calloc(1, sizeof(struct host_fleet));
}

void host_fleet_free(struct host_fleet *f) {
    if (!f) return;
    free(f->strs.buf);
    free(f->strs.off);
    free(f->strs.slots);
    free(f->hosts);
    free(f->labels);
    free(f->taints);
    cm_free(&f->byname);
    cm_free(&f->jobs);
    cm_free(&f->tlabels);
    free(f);
}

static uint32_t intern_cstr(struct host_fleet *f, const char *s) {
    return host_str_intern(f, s ? s : "", s ? strlen(s) : 0);
}

uint32_t host_fleet_find(const struct host_fleet *f, const char *name) {
    uint32_t id = host_str_find(f, name, strlen(name));
    if (!id) return HOST_NONE;
    uint32_t v = host_count_get(&f->byname, id);
    return v ? v - 1 : HOST_NONE;
}

int host_fleet_add(struct host_fleet *f, const struct host_spec *s, uint32_t *idx) {
    if (!s->name || !s->name[0] || strlen(s->name) > HOST_STR_MAX) return -EINVAL;
    if (s->nlabels >= HOST_MAX_LABELS || s->ntaints > HOST_MAX_TAINTS) return -EINVAL;
    if (f->nhosts == UINT32_MAX - 1) return -ENOMEM;
    for (int k = 0; k < RES_NKINDS; k++)
        if (s->allocatable.v[k] < 0 || s->allocated.v[k] < 0) return -EINVAL;
    for (uint32_t i = 0; i < s->nlabels; i++) {
        if (!s->labels[i].key || strlen(s->labels[i].key) > HOST_STR_MAX ||
            (s->labels[i].value && strlen(s->labels[i].value) > HOST_STR_MAX))
            return -EINVAL;
    }
    for (uint32_t i = 0; i < s->ntaints; i++) {
        if (!s->taints[i].key || strlen(s->taints[i].key) > HOST_STR_MAX ||
            (s->taints[i].value && strlen(s->taints[i].value) > HOST_STR_MAX) ||
            (unsigned)s->taints[i].effect > TAINT_NO_EXECUTE)
            return -EINVAL;
    }
    if (host_fleet_find(f, s->name) != HOST_NONE) return -EEXIST;
    if (grow((void **)&f->hosts, &f->cap, f->nhosts + 1, sizeof *f->hosts) ||
        grow((void **)&f->labels, &f->caplabels, f->nlabels + s->nlabels + 1, sizeof *f->labels) ||
        grow((void **)&f->taints, &f->captaints, f->ntaints + s->ntaints, sizeof *f->taints))
        return -ENOMEM;

    struct host h = {0};
    h.allocatable = s->allocatable;
    h.allocated = s->allocated;
    h.backend = (uint8_t)s->backend;
    h.name = intern_cstr(f, s->name);
    uint32_t khost = intern_cstr(f, HOST_LABEL_HOSTNAME);
    uint32_t kexcl = intern_cstr(f, HOST_LABEL_EXCLUSIVE);
    if (!h.name || !khost || !kexcl) return -ENOMEM;
    h.label0 = f->nlabels;
    h.taint0 = f->ntaints;
    /* Interned strings stay interned on a later failure: harmless. */
    struct host_label *L = f->labels + f->nlabels;
    uint32_t nl = 0;
    L[nl++] = (struct host_label){khost, h.name};
    for (uint32_t i = 0; i < s->nlabels; i++) {
        uint32_t k = intern_cstr(f, s->labels[i].key), v = intern_cstr(f, s->labels[i].value);
        if (!k || !v) return -ENOMEM;
        if (k == khost) continue; /* hostname is always the host's name */
        if (k == kexcl && !h.exclusive) {
            h.exclusive = v;
            h.flags |= HOST_EXCLUSIVE;
        }
        L[nl++] = (struct host_label){k, v};
    }
    /* f->taints stays NULL until some host has a taint: never offset it blindly. */
    for (uint32_t i = 0; i < s->ntaints; i++) {
        uint32_t k = intern_cstr(f, s->taints[i].key), v = intern_cstr(f, s->taints[i].value);
        if (!k || !v) return -ENOMEM;
        f->taints[f->ntaints + i] = (struct host_taint){k, v, (uint32_t)s->taints[i].effect};
        if (s->taints[i].effect != TAINT_PREFER_NO_SCHEDULE) h.flags |= HOST_BLOCK_TAINT;
    }
    h.nlabels = (uint16_t)nl;
    h.ntaints = (uint16_t)s->ntaints;
    if (s->unschedulable) h.flags |= HOST_UNSCHEDULABLE;
    if (s->draining) h.flags |= HOST_DRAINING;
    if (s->not_ready) h.flags |= HOST_NOT_READY;
    if (s->allocatable.v[RES_GPU] > 0) h.flags |= HOST_GPU;
    if (host_count_add(&f->byname, h.name, (int32_t)(f->nhosts + 1))) return -ENOMEM;
    f->nlabels += nl;
    f->ntaints += s->ntaints;
    f->hosts[f->nhosts] = h;
    if (idx) *idx = f->nhosts;
    f->nhosts++;
    return 0;
}

int host_fleet_add_task(struct host_fleet *f, uint32_t idx, const char *job,
                        const struct host_kv *labels, uint32_t nlabels) {
    if (idx >= f->nhosts) return -EINVAL;
    if (job) {
        uint32_t j = intern_cstr(f, job);
        if (!j || host_count_add(&f->jobs, host_count_key(idx, j), 1)) return -ENOMEM;
    }
    for (uint32_t i = 0; i < nlabels; i++) {
        uint32_t p = host_pair_intern(f, labels[i].key, labels[i].value);
        if (!p || host_count_add(&f->tlabels, host_count_key(idx, p), 1)) return -ENOMEM;
    }
    return 0;
}

uint32_t host_label_value(const struct host_fleet *f, uint32_t idx, uint32_t key) {
    const struct host *h = &f->hosts[idx];
    const struct host_label *L = f->labels + h->label0;
    for (uint32_t i = 0; i < h->nlabels; i++)
        if (L[i].key == key) return L[i].value;
    return 0;
}

uint32_t host_label_count(const struct host_fleet *f, uint32_t idx, uint32_t key, uint32_t value) {
    const struct host *h = &f->hosts[idx];
    const struct host_label *L = f->labels + h->label0;
    uint32_t c = 0;
    for (uint32_t i = 0; i < h->nlabels; i++)
        if (L[i].key == key && L[i].value == value) c++;
    return c;
}

size_t host_fleet_bytes(const struct host_fleet *f) {
    return sizeof *f + f->strs.cap + (size_t)f->strs.ncap * sizeof *f->strs.off +
           (size_t)f->strs.nslots * sizeof *f->strs.slots + (size_t)f->cap * sizeof *f->hosts +
           (size_t)f->caplabels * sizeof *f->labels + (size_t)f->captaints * sizeof *f->taints +
           cm_bytes(&f->byname) + cm_bytes(&f->jobs) + cm_bytes(&f->tlabels);
}
