/* Gang placement and placement rounds (see place.h for the contract).
 *
 * A gang's tasks are placed one by one with real (tentative) accounting: each
 * placed task's resources and counts are added to its host at once, so later
 * tasks of the gang see them and two tasks never overcommit a host. If a task
 * finds no host, every earlier task of the gang is undone in reverse order
 * and the fleet is exactly as before. Only then, on this slow path, is the
 * whole fleet scanned to count per-filter rejections for the failing task. */
#include <errno.h>
#include <stdarg.h>
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
    uint64_t stop_at; /* give up (best HOST_NONE, gave_up) once st.candidates passes this */
    bool gave_up;
};

/* The search ran past its budget (only the tasks tried after a gang's first
 * failure have one): it ends with no host. */
static int over_budget(struct pick *p) {
    p->best = HOST_NONE;
    p->gave_up = true;
    return 1;
}

static int visit_first(void *ctx, uint32_t idx) {
    struct pick *p = ctx;
    if (++p->e->st.candidates > p->stop_at) return over_budget(p);
    if (place_check(p->e, p->c, idx) != PR_NONE) return 0;
    p->best = idx;
    return 1;
}

/* SPREAD_JOB: the walk runs most free cpu first; keep the host with the
 * fewest tasks of the job, stop at one with none. */
static int visit_spread(void *ctx, uint32_t idx) {
    struct pick *p = ctx;
    if (++p->e->st.candidates > p->stop_at) return over_budget(p);
    if (place_check(p->e, p->c, idx) != PR_NONE) return 0;
    uint32_t n = host_count_get(&p->e->f->jobs, host_count_key(idx, p->job));
    if (p->best == HOST_NONE || n < p->best_count) {
        p->best = idx;
        p->best_count = n;
    }
    p->seen++;
    return n == 0 || (p->e->opt.spread_max_candidates && p->seen >= p->e->opt.spread_max_candidates);
}

/* The host for task c by strategy s, or HOST_NONE. stop_at bounds the
 * search (UINT64_MAX: none); *gave_up (may be NULL) says it ran out. */
static uint32_t choose(struct place_engine *e, const struct ctask *c, uint32_t job, enum place_strategy s,
                       uint64_t stop_at, bool *gave_up) {
    if (c->hint != HOST_NONE && place_check(e, c, c->hint) == PR_NONE) return c->hint;
    /* Pinned by a hostname selector: one host to look at, not the index. */
    if (c->pinned) return c->only != HOST_NONE && place_check(e, c, c->only) == PR_NONE ? c->only : HOST_NONE;
    struct pick p = {e, c, job, HOST_NONE, 0, 0, stop_at, false};
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
    if (gave_up) *gave_up = p.gave_up;
    return p.best;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Names the taints that rejected the most hosts: untol holds, per host
 * rejected by a taint, that taint's index in f->taints (n of them). Taints
 * are told apart by key and value, as kube-scheduler words them; the most
 * frequent first, ties by key then value id. */
static void name_taints(const struct host_fleet *f, struct place_failure *fail, uint32_t *untol, uint32_t n) {
    uint64_t *kv = malloc((size_t)(n ? n : 1) * sizeof *kv);
    if (!kv) return; /* the taints stay counted, unnamed */
    for (uint32_t i = 0; i < n; i++) kv[i] = (uint64_t)f->taints[untol[i]].key << 32 | f->taints[untol[i]].value;
    qsort(kv, n, sizeof *kv, cmp_u64);
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i;
        while (j < n && kv[j] == kv[i]) j++;
        struct place_taint_count c = {(uint32_t)(kv[i] >> 32), (uint32_t)kv[i], 0, j - i};
        uint32_t at = fail->ntaints < PLACE_FAIL_TAINTS ? fail->ntaints++ : PLACE_FAIL_TAINTS;
        while (at > 0 && fail->taints[at - 1].hosts < c.hosts) { /* insertion: count desc, stable */
            if (at < PLACE_FAIL_TAINTS) fail->taints[at] = fail->taints[at - 1];
            at--;
        }
        if (at < PLACE_FAIL_TAINTS) fail->taints[at] = c;
        i = j;
    }
    for (uint32_t i = 0; i < fail->ntaints; i++) /* the effect of one host with it, for the record */
        for (uint32_t h = 0; h < n; h++)
            if (f->taints[untol[h]].key == fail->taints[i].key && f->taints[untol[h]].value == fail->taints[i].value) {
                fail->taints[i].effect = f->taints[untol[h]].effect;
                break;
            }
    free(kv);
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
    uint32_t *untol = NULL, nuntol = 0, capuntol = 0;
    for (uint32_t i = 0; i < e->f->nhosts; i++) {
        enum place_reason r = place_check(e, c, i);
        if (r == PR_NONE) {
            if (found == HOST_NONE) found = i;
            continue;
        }
        fail->rejected[r]++;
        uint32_t t = r == PR_TAINT ? place_untolerated(e->f, i, c) : UINT32_MAX;
        if (t == UINT32_MAX) continue;
        if (nuntol == capuntol) {
            uint32_t ncap = capuntol ? capuntol * 2 : 64, *n = realloc(untol, ncap * sizeof *n);
            if (!n) continue; /* counted, not named */
            untol = n;
            capuntol = ncap;
        }
        untol[nuntol++] = t;
    }
    if (nuntol) name_taints(e->f, fail, untol, nuntol);
    free(untol);
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

/* The failure path of a gang whose task `failed` found no host (tasks
 * before it are applied on hosts[]): tries the tasks after it too, each
 * that fits applied like the others, so the failure says how much of the
 * gang fits and where; then undoes every applied task, last first. The
 * later searches share a budget of two fleet scans' worth of candidates
 * (tasks past it are counted untried): a failing search can look at every
 * host, and this is already the slow path. */
static void gang_rest(struct place_engine *e, const struct place_gang *g, const struct ctask *ct, uint32_t jid,
                      uint32_t *hosts, uint32_t failed, struct place_failure *fail) {
    fail->fit = failed;
    fail->unfit = 1;
    fail->untried = 0;
    hosts[failed] = HOST_NONE;
    uint64_t stop_at = e->st.candidates + 2 * (uint64_t)e->f->nhosts + 64;
    for (uint32_t j = failed + 1; j < g->ntasks; j++) {
        bool gave_up = false;
        uint32_t h = e->st.candidates > stop_at ? HOST_NONE : choose(e, &ct[j], jid, g->strategy, stop_at, &gave_up);
        hosts[j] = HOST_NONE;
        if (h != HOST_NONE && apply(e, h, &ct[j], jid, 1) == 0) {
            hosts[j] = h;
            fail->fit++;
        } else if (gave_up || h != HOST_NONE || e->st.candidates > stop_at) {
            fail->untried++;
        } else {
            fail->unfit++;
        }
    }
    fail->nfit_hosts = 0;
    fail->more_fit_hosts = false;
    for (uint32_t j = 0; j < g->ntasks; j++) {
        if (hosts[j] == HOST_NONE) continue;
        bool seen = false;
        for (uint32_t k = 0; k < fail->nfit_hosts && !seen; k++) seen = fail->fit_hosts[k] == hosts[j];
        if (seen) continue;
        if (fail->nfit_hosts < PLACE_FAIL_HOSTS) fail->fit_hosts[fail->nfit_hosts++] = hosts[j];
        else fail->more_fit_hosts = true;
    }
    for (uint32_t j = g->ntasks; j-- > 0;)
        if (hosts[j] != HOST_NONE) apply(e, hosts[j], &ct[j], jid, -1);
}

int place_gang(struct place_engine *e, const struct place_gang *g, uint32_t *hosts,
               struct place_failure *fail) {
    if (!g->ntasks || !g->tasks || (unsigned)g->strategy > PLACE_LEAST_LOADED) return -EINVAL;
    struct ctask *ct;
    uint32_t jid;
    int rc = compile_gang(e, g, &ct, &jid);
    if (rc) return rc;
    uint32_t i;
    struct place_failure tmp;
    if (!fail) fail = &tmp;
    for (i = 0; i < g->ntasks; i++) {
        uint32_t h = choose(e, &ct[i], jid, g->strategy, UINT64_MAX, NULL);
        if (h == HOST_NONE) {
            h = scan_failure(e, &ct[i], i, fail);
            if (h == HOST_NONE) { rc = -ENOSPC; break; }
            e->st.index_misses++;
        }
        rc = apply(e, h, &ct[i], jid, 1);
        if (rc) break;
        hosts[i] = h;
    }
    if (rc == -ENOSPC) {
        gang_rest(e, g, ct, jid, hosts, i, fail);
    } else if (rc) {
        while (i-- > 0) apply(e, hosts[i], &ct[i], jid, -1);
    }
    if (rc) {
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
    [PR_NOT_READY] = "not ready",
    [PR_DRAINING] = "draining",
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

/* ---- the failure in kube-scheduler's words ---- */

/* kube-scheduler's reason for each filter (its plugins' messages where it
 * has the filter; node selector and affinity share one, as there). */
static const char *const k8s_reasons[PR_NREASONS] = {
    [PR_UNSCHEDULABLE] = "node(s) were unschedulable",
    [PR_NOT_READY] = "node(s) were not ready",
    [PR_DRAINING] = "node(s) were draining",
    [PR_EXCLUSIVE] = "node(s) were exclusive to other work (peloton/exclusive)",
    [PR_GPU_RESERVED] = "node(s) had GPUs kept for GPU pods",
    [PR_NODE_SELECTOR] = "node(s) didn't match Pod's node affinity/selector",
    [PR_NODE_AFFINITY] = "node(s) didn't match Pod's node affinity/selector",
    [PR_TAINT] = "node(s) had untolerated taint",
    [PR_LABEL_CONSTRAINT] = "node(s) didn't match the Peloton label constraint",
    [PR_INSUFFICIENT_CPU] = "Insufficient cpu",
    [PR_INSUFFICIENT_MEMORY] = "Insufficient memory",
    [PR_INSUFFICIENT_DISK] = "Insufficient ephemeral-storage",
    [PR_INSUFFICIENT_GPU] = "Insufficient nvidia.com/gpu",
};

#define K8S_ITEMS (PR_NREASONS + PLACE_FAIL_TAINTS)
#define K8S_ITEM_LEN 200 /* a taint's key and value are cut to fit: the message stays one line */

/* An output cursor with snprintf semantics: w counts what would be written. */
struct out {
    char *buf;
    size_t len, w;
};

static void outf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(struct out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vsnprintf(o->w < o->len ? o->buf + o->w : NULL, o->w < o->len ? o->len - o->w : 0, fmt, ap);
    va_end(ap);
    if (rc > 0) o->w += (size_t)rc;
}

static int cmp_items(const void *a, const void *b) { return strcmp(a, b); }

/* "0/4 nodes are available: <items sorted as strings>." */
static void k8s_nodes(const struct host_fleet *fl, const struct place_failure *f, struct out *o) {
    char items[K8S_ITEMS][K8S_ITEM_LEN];
    int n = 0;
    uint32_t sel = f->rejected[PR_NODE_SELECTOR] + f->rejected[PR_NODE_AFFINITY], named = 0;
    for (int r = 0; r < PR_NREASONS; r++) {
        uint32_t c = r == PR_NODE_SELECTOR ? sel : r == PR_NODE_AFFINITY ? 0 : f->rejected[r];
        if (!c || r == PR_TAINT) continue;
        snprintf(items[n++], K8S_ITEM_LEN, "%u %s", c, k8s_reasons[r]);
    }
    for (uint32_t i = 0; i < f->ntaints && i < PLACE_FAIL_TAINTS; i++) {
        const struct place_taint_count *t = &f->taints[i];
        snprintf(items[n++], K8S_ITEM_LEN, "%u %s {%.80s: %.80s}", t->hosts, k8s_reasons[PR_TAINT],
                 fl ? host_str(fl, t->key) : "?", fl ? host_str(fl, t->value) : "?");
        named += t->hosts;
    }
    if (f->rejected[PR_TAINT] > named) /* taints past the named ones */
        snprintf(items[n++], K8S_ITEM_LEN, "%u %ss", f->rejected[PR_TAINT] - named, k8s_reasons[PR_TAINT]);
    qsort(items, (size_t)n, sizeof items[0], cmp_items);
    outf(o, "0/%u nodes are available", f->nhosts);
    for (int i = 0; i < n; i++) outf(o, "%s%s", i ? ", " : ": ", items[i]);
    outf(o, ".");
}

int place_failure_format_k8s(const struct host_fleet *fl, const struct place_failure *f, uint32_t ntasks, char *buf,
                             size_t len) {
    struct out o = {buf, len, 0};
    if (len) buf[0] = 0;
    if (ntasks > 1) {
        outf(&o, "gang of %u: ", ntasks);
        if (f->fit == 0 && !f->untried) {
            outf(&o, "no member fits");
        } else if (f->fit == 0) {
            outf(&o, "%u do%s not fit", f->unfit, f->unfit == 1 ? "es" : "");
        } else {
            outf(&o, "%u member%s fit%s (on ", f->fit, f->fit == 1 ? "" : "s", f->fit == 1 ? "s" : "");
            for (uint32_t i = 0; i < f->nfit_hosts && i < PLACE_FAIL_HOSTS; i++)
                outf(&o, "%s%s", i ? ", " : "", fl ? host_name(fl, f->fit_hosts[i]) : "?");
            outf(&o, "%s), %u do%s not", f->more_fit_hosts ? ", ..." : "", f->unfit, f->unfit == 1 ? "es" : "");
        }
        if (f->untried) outf(&o, ", %u not tried", f->untried);
        outf(&o, ": ");
    }
    k8s_nodes(fl, f, &o);
    return o.w > INT32_MAX ? -1 : (int)o.w;
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
