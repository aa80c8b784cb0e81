/* Node names to hosts (the name map) and what a NodeNames request leaves for
 * the next one (the memo): see ext_int.h. No I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ext_int.h"

/* (Re)builds the map for fleet f when the fleet was rebuilt since. Only
 * called on a refreshed model (x->dirty false). */
static bool nodemap_ready(struct ext_core *x, const struct host_fleet *f) {
    struct ext_nodemap *m = &x->memo.map;
    uint64_t gen = cluster_fleet_generation(x->cm);
    if (m->valid && m->fleet_gen == gen) return true;
    m->valid = false;
    size_t want = 16, bytes = 0;
    while (want < (size_t)f->nhosts + f->nhosts / 2) want *= 2;
    for (uint32_t i = 0; i < f->nhosts; i++) {
        size_t len = strlen(host_name(f, i));
        if (len > EXT_NODESLOT_INLINE) bytes += len;
    }
    if (bytes > UINT32_MAX) return false;
    if (want > m->slots_cap) {
        free(m->slots);
        m->slots_cap = 0;
        if (!(m->slots = malloc(want * sizeof *m->slots))) return false;
        m->slots_cap = want;
    }
    if (bytes + 1 > m->names_cap) {
        free(m->names);
        m->names_cap = 0;
        if (!(m->names = malloc(bytes + 1))) return false;
        m->names_cap = bytes + 1;
    }
    memset(m->slots, 0, want * sizeof *m->slots);
    m->nslots = want;
    size_t mask = want - 1, off = 0;
    for (uint32_t i = 0; i < f->nhosts; i++) {
        const char *name = host_name(f, i);
        size_t len = strlen(name);
        uint64_t h = extender_name_hash(name, len);
        size_t j = (size_t)h & mask;
        while (m->slots[j].len) j = (j + 1) & mask;
        struct ext_nodeslot *e = &m->slots[j];
        *e = (struct ext_nodeslot){(uint32_t)(h >> 32), i, (uint32_t)off, (uint16_t)len, {0}};
        if (len <= EXT_NODESLOT_INLINE) {
            memcpy(e->name, name, len);
        } else {
            memcpy(m->names + off, name, len);
            off += len;
        }
    }
    m->fleet_gen = gen;
    m->valid = true;
    return true;
}

/* Node names are short: the first eight bytes compared inline. */
static inline bool same_bytes(const char *a, const char *b, size_t len) {
    if (len >= 8) {
        uint64_t x, y;
        memcpy(&x, a + len - 8, 8);
        memcpy(&y, b + len - 8, 8);
        if (x != y) return false;
        if (len <= 16) {
            memcpy(&x, a, 8);
            memcpy(&y, b, 8);
            return x == y;
        }
    }
    return memcmp(a, b, len) == 0;
}

/* h: extender_name_hash of the name. */
static inline uint32_t nodemap_find(const struct ext_nodemap *m, const struct extender_name *nm, uint64_t h) {
    size_t mask = m->nslots - 1;
    for (size_t j = (size_t)h & mask; m->slots[j].len; j = (j + 1) & mask) {
        const struct ext_nodeslot *e = &m->slots[j];
        if (e->hash == (uint32_t)(h >> 32) && e->len == nm->len &&
            same_bytes(nm->len <= EXT_NODESLOT_INLINE ? e->name : m->names + e->off, nm->s, nm->len))
            return e->host;
    }
    return HOST_NONE;
}

void ext_lookup_hosts(struct ext_core *x, const struct extender_name *names, const uint64_t *hashes, size_t n,
                      uint32_t *hosts) {
    const struct host_fleet *f = cluster_fleet(x->cm);
    if (f && !x->dirty && nodemap_ready(x, f)) {
        const struct ext_nodemap *m = &x->memo.map;
        if (!hashes) {
            for (size_t i = 0; i < n; i++) hosts[i] = nodemap_find(m, &names[i], extender_name_hash(names[i].s, names[i].len));
            return;
        }
        /* the slots a few names ahead are fetched while this one is looked up */
        size_t mask = m->nslots - 1;
        for (size_t i = 0; i < n; i++) {
            if (i + 8 < n) __builtin_prefetch(&m->slots[(size_t)hashes[i + 8] & mask]);
            hosts[i] = nodemap_find(m, &names[i], hashes[i]);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) { /* out of memory for the map: the fleet's own lookup */
        uint32_t id = f ? host_str_find(f, names[i].s, names[i].len) : 0;
        uint32_t v = id ? host_count_get(&f->byname, id) : 0;
        hosts[i] = v ? v - 1 : HOST_NONE;
    }
}

static bool same_text(const struct extender_buf *b, const char *text, size_t len) {
    return b->len == len && memcmp(b->data, text, len) == 0;
}

/* Room for len bytes of text and n names in e; false (e invalid) without. */
static bool names_reserve(struct ext_memo_names *e, size_t len, size_t n) {
    e->valid = e->hint = false;
    if (len + 1 > e->text.cap) {
        char *d = realloc(e->text.data, len + 1);
        if (!d) return false;
        e->text.data = d;
        e->text.cap = len + 1;
    }
    if (n > e->cap) {
        uint32_t *h = realloc(e->hosts, n * sizeof *h);
        if (h) e->hosts = h;
        struct extender_name *nm = h ? realloc(e->names, n * sizeof *nm) : NULL;
        if (nm) e->names = nm;
        uint64_t *hs = nm ? realloc(e->hashes, n * sizeof *hs) : NULL;
        if (!hs) return false;
        e->hashes = hs;
        e->cap = n;
    }
    return true;
}

static void names_set(struct ext_memo_names *e, const char *text, size_t len, const uint32_t *hosts, size_t n) {
    if (!names_reserve(e, len, n)) return;
    memcpy(e->text.data, text, len);
    e->text.len = len;
    if (n) memcpy(e->hosts, hosts, n * sizeof *hosts);
    e->n = n;
    e->valid = true;
}

/* Both entries hold hosts of one fleet: another fleet empties them. */
static void names_fleet(struct ext_core *x) {
    uint64_t gen = cluster_fleet_generation(x->cm);
    if (x->memo.fleet_gen == gen) return;
    x->memo.req.valid = x->memo.pass.valid = false;
    x->memo.fleet_gen = gen;
}

void ext_memo_hosts(struct ext_core *x, const struct extender_scan *s, bool remember, uint32_t *hosts) {
    struct ext_memo *m = &x->memo;
    size_t n = s->nnodes;
    names_fleet(x);
    const struct ext_memo_names *hit = NULL;
    if (!x->dirty && s->names_text) {
        if (m->req.valid && same_text(&m->req.text, s->names_text, s->names_len)) hit = &m->req;
        else if (m->pass.valid && same_text(&m->pass.text, s->names_text, s->names_len)) hit = &m->pass;
    }
    if (hit && hit->n == n) { /* the same text is the same names: n is only a guard */
        if (n) memcpy(hosts, hit->hosts, n * sizeof *hosts);
        x->st.names_reused++;
    } else {
        hit = NULL;
        ext_lookup_hosts(x, s->names, s->hashes, n, hosts);
    }
    if (remember && hit != &m->req && s->names_text && !x->dirty)
        names_set(&m->req, s->names_text, s->names_len, hosts, n);
}

void ext_memo_pass(struct ext_core *x, const char *text, size_t len, const struct extender_scan *s,
                   const uint32_t *hosts, const uint32_t *at, size_t n) {
    struct ext_memo_names *e = &x->memo.pass;
    names_fleet(x);
    if (x->dirty) return;
    if (e->valid && same_text(&e->text, text, len)) return;
    /* a compact scan's passing names are the text's names as they are:
     * "[" then each quoted, comma after comma. s may have been read with
     * this very entry as its hint (s->names == e->names): the passing names
     * are a subsequence of it (at[k] >= k), so writing entry k after reading
     * entry at[k] never overwrites one still to be read. */
    bool hint = s->compact;
    if (!names_reserve(e, len, n)) return;
    memcpy(e->text.data, text, len);
    e->text.len = len;
    size_t off = 2;
    for (size_t k = 0; k < n; k++) {
        const struct extender_name *nm = &s->names[at[k]];
        e->hosts[k] = hosts[at[k]];
        if (!hint) continue;
        e->names[k] = (struct extender_name){e->text.data + off, nm->len};
        e->hashes[k] = s->hashes[at[k]];
        off += nm->len + 3;
    }
    e->n = n;
    e->hint = hint;
    e->valid = true;
}

bool ext_core_names_hint(struct ext_core *x, struct extender_names_hint *out) {
    const struct ext_memo_names *e = &x->memo.pass;
    if (!e->valid || !e->hint) return false;
    *out = (struct extender_names_hint){e->text.data, e->text.len, e->n, e->names, e->hashes};
    return true;
}

bool ext_memo_scores_keyed(struct ext_core *x, const struct extender_scan *s, const struct cm_pod *p,
                           enum place_strategy strategy) {
    const struct ext_memo *m = &x->memo;
    return s && s->pod_text && m->scored && !x->dirty && m->score_fleet_gen == cluster_fleet_generation(x->cm) &&
           m->pod_version == p->version && m->strategy == strategy && same_text(&m->pod, s->pod_text, s->pod_len);
}

void ext_memo_scores_put(struct ext_core *x, const struct extender_scan *s, const struct cm_pod *p,
                         enum place_strategy strategy, const uint32_t *hosts, const int64_t *scores, size_t n) {
    struct ext_memo *m = &x->memo;
    const struct host_fleet *f = cluster_fleet(x->cm);
    const uint64_t *gen = cluster_host_generations(x->cm);
    if (!s || !s->pod_text || !f || !gen || x->dirty) return;
    if (!ext_memo_scores_keyed(x, s, p, strategy)) {
        m->scored = false;
        if (f->nhosts > m->nhosts) {
            free(m->stamp);
            free(m->score);
            m->score = NULL;
            m->nhosts = 0;
            if (!(m->stamp = malloc(f->nhosts * sizeof *m->stamp)) || !(m->score = malloc(f->nhosts))) return;
            m->nhosts = f->nhosts;
        }
        if (s->pod_len + 1 > m->pod.cap) {
            char *d = realloc(m->pod.data, s->pod_len + 1);
            if (!d) return;
            m->pod.data = d;
            m->pod.cap = s->pod_len + 1;
        }
        memcpy(m->pod.data, s->pod_text, s->pod_len);
        m->pod.len = s->pod_len;
        memset(m->stamp, 0, m->nhosts * sizeof *m->stamp);
        m->score_fleet_gen = cluster_fleet_generation(x->cm);
        m->pod_version = p->version;
        m->strategy = strategy;
        m->scored = true;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t h = hosts[i];
        if (h == HOST_NONE) continue;
        m->stamp[h] = gen[h];
        m->score[h] = (uint8_t)scores[i];
    }
}

size_t ext_memo_scores_get(struct ext_core *x, bool keyed, const uint32_t *hosts, size_t n, int64_t *scores,
                           uint32_t *miss, uint32_t *at) {
    const struct ext_memo *m = &x->memo;
    const uint64_t *gen = keyed ? cluster_host_generations(x->cm) : NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t h = hosts[i];
        scores[i] = 0;
        if (h == HOST_NONE) continue;
        if (gen && m->stamp[h] == gen[h]) {
            scores[i] = m->score[h];
            x->st.scores_reused++;
            continue;
        }
        miss[k] = h;
        at[k++] = (uint32_t)i;
    }
    return k;
}

void ext_memo_free(struct ext_memo *m) {
    free(m->map.slots);
    free(m->map.names);
    extender_buf_free(&m->req.text);
    extender_buf_free(&m->pass.text);
    free(m->req.hosts);
    free(m->pass.hosts);
    free(m->req.names);
    free(m->pass.names);
    free(m->req.hashes);
    free(m->pass.hashes);
    extender_buf_free(&m->pod);
    free(m->stamp);
    free(m->score);
    memset(m, 0, sizeof *m);
}
