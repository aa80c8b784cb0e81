/* Gang placement and placement rounds (see place.h for the contract).
 *
 * A gang's tasks are placed one by one with real (tentative) accounting: each
 * placed task's resources and counts are added to its host at once, so later
 * tasks of the gang see them and two tasks never overcommit a host. If a task
 * finds no host, every earlier task of the gang is undone in reverse order
 * and the fleet is exactly as before. Only then, on this slow path, is the
 * whole fleet scanned to count per-filter rejections for the failing task. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "place_int.h"

/* ---- arena ---- */

#define ARENA_BLOCK 65536

struct place_arena_block {
    struct place_arena_block *next;
    size_t cap;
    _Alignas(16) unsigned char data[];
};

void *place_arena_alloc(struct place_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->used + n > a->head->cap) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        struct place_arena_block *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
        a->used = 0;
    }
    void *p = a->head->data + a->used;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void place_arena_reset(struct place_arena *a) {
    /* Keep the most recent block only if it is a standard one. */
    struct place_arena_block *keep = NULL, *b = a->head;
    while (b) {
        struct place_arena_block *next = b->next;
        if (!keep && b->cap == ARENA_BLOCK) {
            keep = b;
            keep->next = NULL;
        } else {
            free(b);
        }
        b = next;
    }
    a->head = keep;
    a->used = 0;
}

void place_arena_free(struct place_arena *a) {
    place_arena_reset(a);
    free(a->head);
    a->head = NULL;
}

size_t place_arena_bytes(const struct place_arena *a) {
    size_t n = 0;
    for (const struct place_arena_block *b = a->head; b; b = b->next) n += sizeof *b + b->cap;
    return n;
}

/* ---- engine ---- */

void place_options_default(struct place_options *o) {
    o->gpu_hosts_any_task = false;
    o->max_gangs = 0;
    o->spread_max_candidates = 0;
}

struct place_engine *place_engine_new(struct host_fleet *f, const struct place_options *o) {
    struct place_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->f = f;
    if (o) e->opt = *o;
    else place_options_default(&e->opt);
    e->kexcl = host_str_intern(f, HOST_LABEL_EXCLUSIVE, strlen(HOST_LABEL_EXCLUSIVE));
    if (!e->kexcl || pidx_build(&e->ix, f)) {
        pidx_free(&e->ix);
        free(e);
        return NULL;
    }
    return e;
}

void place_engine_free(struct place_engine *e) {
    if (!e) return;
    pidx_free(&e->ix);
    place_arena_free(&e->arena);
    free(e);
}

void place_engine_stats(const struct place_engine *e, struct place_stats *out) { *out = e->st; }

size_t place_engine_bytes(const struct place_engine *e) {
    return sizeof *e + (size_t)e->ix.count * sizeof *e->ix.n + place_arena_bytes(&e->arena);
}

int place_host_set_allocated(struct place_engine *e, uint32_t idx, struct resvec allocated) {
    if (idx >= e->f->nhosts) return -EINVAL;
    for (int k = 0; k < RES_NKINDS; k++)
        if (allocated.v[k] < 0) return -EINVAL;
    e->f->hosts[idx].allocated = allocated;
    pidx_update(&e->ix, e->f, idx);
    return 0;
}

/* Adds (sign 1) or removes (sign -1) a task on host idx. Removal undoes an
 * addition exactly; the count maps only allocate when adding. */
static int apply(struct place_engine *e, uint32_t idx, const struct ctask *c, uint32_t job, int sign) {
    struct host_fleet *f = e->f;
    struct host *h = &f->hosts[idx];
    if (sign > 0) {
        if (host_count_add(&f->jobs, host_count_key(idx, job), 1)) return -ENOMEM;
        for (uint32_t i = 0; i < c->npairs; i++) {
            if (host_count_add(&f->tlabels, host_count_key(idx, c->pairs[i]), 1)) {
                while (i-- > 0) host_count_add(&f->tlabels, host_count_key(idx, c->pairs[i]), -1);
                host_count_add(&f->jobs, host_count_key(idx, job), -1);
                return -ENOMEM;
            }
        }
        h->allocated = resvec_add(h->allocated, c->req);
    } else {
        host_count_add(&f->jobs, host_count_key(idx, job), -1);
        for (uint32_t i = 0; i < c->npairs; i++)
            host_count_add(&f->tlabels, host_count_key(idx, c->pairs[i]), -1);
        h->allocated = resvec_sub(h->allocated, c->req);
    }
    pidx_update(&e->ix, f, idx);
    return 0;
}

struct pick {
    struct place_engine *e;
    const struct ctask *c;
    uint32_t job;
    uint32_t best;
    uint32_t best_count;
    uint32_t seen; /* hosts that passed the filters */
};

static int visit_first(void *ctx, uint32_t idx) {
    struct pick *p = ctx;
    p->e->st.candidates++;
    if (place_check(p->e, p->c, idx) != PR_NONE) return 0;
    p->best = idx;
    return 1;
}

/* SPREAD_JOB: the walk runs most free cpu first; keep the host with the
 * fewest tasks of the job, stop at one with none. */
static int visit_spread(void *ctx, uint32_t idx) {
    struct pick *p = ctx;
    p->e->st.candidates++;
    if (place_check(p->e, p->c, idx) != PR_NONE) return 0;
    uint32_t n = host_count_get(&p->e->f->jobs, host_count_key(idx, p->job));
    if (p->best == HOST_NONE || n < p->best_count) {
        p->best = idx;
        p->best_count = n;
    }
    p->seen++;
    return n == 0 || (p->e->opt.spread_max_candidates && p->seen >= p->e->opt.spread_max_candidates);
}

static uint32_t choose(struct place_engine *e, const struct ctask *c, uint32_t job,
                       enum place_strategy s) {
    if (c->hint != HOST_NONE && place_check(e, c, c->hint) == PR_NONE) return c->hint;
    /* Pinned by a hostname selector: one host to look at, not the index. */
    if (c->pinned) return c->only != HOST_NONE && place_check(e, c, c->only) == PR_NONE ? c->only : HOST_NONE;
    struct pick p = {e, c, job, HOST_NONE, 0, 0};
    switch (s) {
    case PLACE_PACK:
        pidx_walk(&e->ix, e->f, c->req, c->need, true, visit_first, &p);
        break;
    case PLACE_LEAST_LOADED:
        pidx_walk(&e->ix, e->f, c->req, c->need, false, visit_first, &p);
        break;
    case PLACE_SPREAD_JOB:
        pidx_walk(&e->ix, e->f, c->req, c->need, false, visit_spread, &p);
        break;
    }
    return p.best;
}

/* The slow path: count, per filter, the hosts rejecting task c; returns a
 * host that passes (only if the index missed it), or HOST_NONE. */
static uint32_t scan_failure(struct place_engine *e, const struct ctask *c, uint32_t task,
                             struct place_failure *fail) {
    memset(fail, 0, sizeof *fail);
    fail->task = task;
    fail->nhosts = e->f->nhosts;
    uint32_t found = HOST_NONE;
    e->st.full_scans++;
    for (uint32_t i = 0; i < e->f->nhosts; i++) {
        enum place_reason r = place_check(e, c, i);
        if (r == PR_NONE) {
            if (found == HOST_NONE) found = i;
        } else {
            fail->rejected[r]++;
        }
    }
    return found;
}

/* Compiles every task of g into the engine's arena; *jid gets the id of the
 * gang's job (its id when it names none). */
static int compile_gang(struct place_engine *e, const struct place_gang *g, struct ctask **out, uint32_t *jid) {
    const char *job = g->job ? g->job : g->id ? g->id : "";
    *jid = host_str_intern(e->f, job, strlen(job));
    if (!*jid) return -ENOMEM;
    place_arena_reset(&e->arena);
    struct ctask *ct = place_arena_alloc(&e->arena, (size_t)g->ntasks * sizeof *ct);
    if (!ct) return -ENOMEM;
    for (uint32_t i = 0; i < g->ntasks; i++) {
        int rc = place_task_compile(e, &g->tasks[i], &ct[i]);
        if (rc) return rc;
    }
    *out = ct;
    return 0;
}

int place_gang(struct place_engine *e, const struct place_gang *g, uint32_t *hosts,
               struct place_failure *fail) {
    if (!g->ntasks || !g->tasks || (unsigned)g->strategy > PLACE_LEAST_LOADED) return -EINVAL;
    struct ctask *ct;
    uint32_t jid;
    int rc = compile_gang(e, g, &ct, &jid);
    if (rc) return rc;
    uint32_t i;
    for (i = 0; i < g->ntasks; i++) {
        uint32_t h = choose(e, &ct[i], jid, g->strategy);
        if (h == HOST_NONE) {
            struct place_failure tmp;
            h = scan_failure(e, &ct[i], i, fail ? fail : &tmp);
            if (h == HOST_NONE) { rc = -ENOSPC; break; }
            e->st.index_misses++;
        }
        rc = apply(e, h, &ct[i], jid, 1);
        if (rc) break;
        hosts[i] = h;
    }
    if (rc) {
        while (i-- > 0) apply(e, hosts[i], &ct[i], jid, -1);
        e->st.gangs_failed++;
        return rc;
    }
    e->st.gangs_placed++;
    e->st.tasks_placed += g->ntasks;
    return 0;
}

int place_round(struct place_engine *e, const struct place_gang *gangs, uint32_t ngangs,
                struct place_round *out) {
    memset(out, 0, sizeof *out);
    uint32_t n = ngangs;
    if (e->opt.max_gangs && e->opt.max_gangs < n) n = e->opt.max_gangs;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += gangs[i].ntasks;
    if (total > UINT32_MAX) return -ENOMEM;
    out->gangs = calloc(n ? n : 1, sizeof *out->gangs);
    out->hosts = malloc((size_t)(total ? total : 1) * sizeof *out->hosts);
    if (!out->gangs || !out->hosts) {
        place_round_free(out);
        return -ENOMEM;
    }
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct place_gang_result *r = &out->gangs[i];
        r->first = off;
        r->rc = place_gang(e, &gangs[i], out->hosts + off, &r->fail);
        if (r->rc == -ENOMEM) {
            place_round_free(out);
            return -ENOMEM;
        }
        off += gangs[i].ntasks;
    }
    out->ntried = n;
    return 0;
}

void place_round_free(struct place_round *r) {
    free(r->gangs);
    free(r->hosts);
    memset(r, 0, sizeof *r);
}

static const char *const reason_names[PR_NREASONS] = {
    [PR_UNSCHEDULABLE] = "unschedulable",
    [PR_EXCLUSIVE] = "exclusive host",
    [PR_GPU_RESERVED] = "gpu host reserved",
    [PR_NODE_SELECTOR] = "node selector",
    [PR_NODE_AFFINITY] = "node affinity",
    [PR_TAINT] = "taint",
    [PR_LABEL_CONSTRAINT] = "label constraint",
    [PR_INSUFFICIENT_CPU] = "insufficient cpu",
    [PR_INSUFFICIENT_MEMORY] = "insufficient memory",
    [PR_INSUFFICIENT_DISK] = "insufficient disk",
    [PR_INSUFFICIENT_GPU] = "insufficient gpu",
};

const char *place_reason_name(enum place_reason r) {
    return (unsigned)r < PR_NREASONS ? reason_names[r] : "none";
}

int place_failure_format(const struct place_failure *f, char *buf, size_t len) {
    int order[PR_NREASONS], n = 0;
    for (int r = 0; r < PR_NREASONS; r++) {
        if (!f->rejected[r]) continue;
        int j = n++;
        /* insertion sort: count desc, then name asc */
        while (j > 0) {
            int p = order[j - 1];
            bool before = f->rejected[r] > f->rejected[p] ||
                          (f->rejected[r] == f->rejected[p] && strcmp(reason_names[r], reason_names[p]) < 0);
            if (!before) break;
            order[j] = p;
            j--;
        }
        order[j] = r;
    }
    size_t w = 0;
    int rc = snprintf(buf, len, "0/%u hosts: ", f->nhosts);
    if (rc < 0) return rc;
    w = (size_t)rc;
    if (n == 0) {
        rc = snprintf(w < len ? buf + w : NULL, w < len ? len - w : 0, "no hosts");
        return rc < 0 ? rc : (int)(w + (size_t)rc);
    }
    for (int i = 0; i < n; i++) {
        rc = snprintf(w < len ? buf + w : NULL, w < len ? len - w : 0, "%s%u %s", i ? ", " : "",
                      f->rejected[order[i]], reason_names[order[i]]);
        if (rc < 0) return rc;
        w += (size_t)rc;
    }
    return (int)w;
}

/* ---- per-host verdicts and scores (the extender's filter and prioritize) ---- */

static int compile_one(struct place_engine *e, const struct place_task *t, const char *job, struct ctask **ct,
                       uint32_t *jid) {
    const struct place_gang g = {.job = job ? job : "", .tasks = t, .ntasks = 1};
    return compile_gang(e, &g, ct, jid);
}

/* Utilisation after placing req, in thousandths (0..1000), cpu and memory
 * averaged over the kinds the host has. Double arithmetic: exact enough for a
 * 0..10 score and several times cheaper than 128-bit integer division, which
 * showed at 5,000 hosts per extender call. */
static int64_t fullness_after(const struct host *h, struct resvec req) {
    double sum = 0;
    int kinds = 0;
    static const enum res_kind ks[] = {RES_CPU, RES_MEMORY};
    for (size_t i = 0; i < 2; i++) {
        int64_t cap = h->allocatable.v[ks[i]];
        if (cap <= 0) continue;
        int64_t used = h->allocated.v[ks[i]] + req.v[ks[i]];
        if (used > cap) used = cap;
        sum += (double)used / (double)cap;
        kinds++;
    }
    /* sum * 1000 / kinds, without a division: halving is exact in binary */
    return kinds == 2 ? (int64_t)(sum * 500.0) : kinds ? (int64_t)(sum * 1000.0) : 0;
}

/* The 0..10 score of task c (job jid) on host idx by strategy (place.h).
 * r: place_check's verdict on the host when known (it has the fit already
 * unless another filter came first), else PR_NREASONS + 1. */
static int64_t host_score(const struct place_engine *e, const struct ctask *c, uint32_t jid,
                          enum place_strategy strategy, uint32_t idx, unsigned r) {
    const struct host *h = &e->f->hosts[idx];
    bool fits = r == PR_NONE ? true
                : r >= PR_INSUFFICIENT_CPU && r <= PR_INSUFFICIENT_GPU ? false
                                                                        : place_fit_over(h, &c->req) < 0;
    if (!fits) return 0;
    int64_t full = fullness_after(h, c->req), s = 0; /* 0..1000 */
    switch (strategy) {
    case PLACE_PACK:
        s = (full + 50) / 100;
        break;
    case PLACE_LEAST_LOADED:
        s = (1000 - full + 50) / 100;
        break;
    case PLACE_SPREAD_JOB: {
        uint32_t same = host_count_get(&e->f->jobs, host_count_key(idx, jid));
        /* fewest tasks of the job first; emptiness breaks ties inside a step */
        s = 10 - (int64_t)same * 2 - (full >= 500 ? 1 : 0);
        break;
    }
    }
    return s < 0 ? 0 : s > 10 ? 10 : s;
}

/* The one loop behind place_check_hosts, place_score_hosts and
 * place_judge_hosts: reasons and scores (either may be NULL) for hosts,
 * each host's record read once and fetched a few hosts ahead (the hosts of a
 * request are in no useful order: every record is a cache miss otherwise).
 * HOST_NONE entries get PR_NONE and 0; other indices are checked already. */
static void judge_hosts(const struct place_engine *e, const struct ctask *c, uint32_t jid,
                        enum place_strategy strategy, const uint32_t *hosts, uint32_t n, uint8_t *reasons,
                        int64_t *scores) {
    const struct host *H = e->f->hosts;
    for (uint32_t i = 0; i < n; i++) {
        if (i + 8 < n && hosts[i + 8] != HOST_NONE) {
            const char *ahead = (const char *)&H[hosts[i + 8]];
            __builtin_prefetch(ahead);
            __builtin_prefetch(ahead + sizeof *H - 1);
        }
        uint32_t idx = hosts[i];
        if (idx == HOST_NONE) {
            if (reasons) reasons[i] = PR_NONE;
            if (scores) scores[i] = 0;
            continue;
        }
        unsigned r = reasons ? (unsigned)place_check(e, c, idx) : PR_NREASONS + 1;
        if (reasons) reasons[i] = (uint8_t)r;
        if (scores) scores[i] = host_score(e, c, jid, strategy, idx, r);
    }
}

/* Compiles t and runs judge_hosts; -EINVAL for a host index out of range
 * (HOST_NONE only where none_ok) or a bad strategy. */
static int per_host(struct place_engine *e, const struct place_task *t, const char *job, enum place_strategy strategy,
                    const uint32_t *hosts, uint32_t n, bool none_ok, uint8_t *reasons, int64_t *scores) {
    if ((unsigned)strategy > PLACE_LEAST_LOADED) return -EINVAL;
    struct ctask *ct;
    uint32_t jid;
    int rc = compile_one(e, t, job, &ct, &jid);
    if (rc) return rc;
    for (uint32_t i = 0; i < n; i++)
        if (hosts[i] >= e->f->nhosts && !(none_ok && hosts[i] == HOST_NONE)) return -EINVAL;
    judge_hosts(e, ct, jid, strategy, hosts, n, reasons, scores);
    return 0;
}

int place_check_hosts(struct place_engine *e, const struct place_task *t, const char *job, const uint32_t *hosts,
                      uint32_t n, uint8_t *reasons) {
    return per_host(e, t, job, PLACE_PACK, hosts, n, false, reasons, NULL);
}

int place_score_hosts(struct place_engine *e, const struct place_task *t, const char *job,
                      enum place_strategy strategy, const uint32_t *hosts, uint32_t n, int64_t *scores) {
    return per_host(e, t, job, strategy, hosts, n, false, NULL, scores);
}

int place_judge_hosts(struct place_engine *e, const struct place_task *t, const char *job,
                      enum place_strategy strategy, const uint32_t *hosts, uint32_t n, uint8_t *reasons,
                      int64_t *scores) {
    return per_host(e, t, job, strategy, hosts, n, true, reasons, scores);
}

int place_gang_undo(struct place_engine *e, const struct place_gang *g, const uint32_t *hosts) {
    if (!g->ntasks || !g->tasks) return -EINVAL;
    for (uint32_t i = 0; i < g->ntasks; i++)
        if (hosts[i] >= e->f->nhosts) return -EINVAL;
    struct ctask *ct;
    uint32_t jid;
    int rc = compile_gang(e, g, &ct, &jid);
    if (rc) return rc;
    for (uint32_t i = 0; i < g->ntasks; i++) apply(e, hosts[i], &ct[i], jid, -1);
    if (e->st.gangs_placed) e->st.gangs_placed--;
    e->st.tasks_placed -= e->st.tasks_placed >= g->ntasks ? g->ntasks : e->st.tasks_placed;
    return 0;
}
