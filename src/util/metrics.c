/* Counters, gauges and histograms written as Prometheus text: metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct metrics_family {
    char *name, *help;
    enum metrics_type type;
    int nlabels;
    char *labels[METRICS_MAX_LABELS];
    int nb;                             /* histogram: finite bounds */
    double bounds[METRICS_MAX_BUCKETS];
    /* lookup by label values: open addressing, the writer thread's alone */
    struct metrics_series **slots;
    size_t cap, n;
    struct metrics_series *first, *last; /* creation order, for the scrape (under the mutex) */
    struct metrics *owner;
    struct metrics_family *next;
};

struct metrics {
    pthread_mutex_t mu;
    struct metrics_family *first, *last;
    struct {
        metrics_collect_fn fn;
        void *ud;
    } coll[8];
    int ncoll;
    _Atomic uint64_t dropped; /* series refused by METRICS_MAX_SERIES or memory */
};

struct metrics *metrics_new(void) {
    struct metrics *m = calloc(1, sizeof *m);
    if (m && pthread_mutex_init(&m->mu, NULL)) {
        free(m);
        return NULL;
    }
    return m;
}

static void family_free(struct metrics_family *f) {
    for (struct metrics_series *s = f->first, *next; s; s = next) {
        next = s->next_in_order;
        free(s->key);
        free(s->le);
        free(s);
    }
    for (int i = 0; i < f->nlabels; i++) free(f->labels[i]);
    free(f->slots);
    free(f->name);
    free(f->help);
    free(f);
}

void metrics_free(struct metrics *m) {
    if (!m) return;
    for (struct metrics_family *f = m->first, *next; f; f = next) {
        next = f->next;
        family_free(f);
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static bool name_ok(const char *s, bool label) {
    if (!s || !*s || (label && s[0] == '_' && s[1] == '_')) return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
        if (!alpha && !(p > s && c >= '0' && c <= '9')) return false;
    }
    return true;
}

static struct metrics_family *family_new(struct metrics *m, enum metrics_type type, const char *name,
                                         const char *help, int nlabels, const char *const *labels,
                                         const double *bounds, int nb) {
    if (!m || !name_ok(name, false) || nlabels < 0 || nlabels > METRICS_MAX_LABELS ||
        (type == METRICS_HISTOGRAM && (nb < 1 || nb > METRICS_MAX_BUCKETS))) {
        errno = EINVAL;
        return NULL;
    }
    for (int i = 0; i < nlabels; i++)
        if (!name_ok(labels[i], true) || (type == METRICS_HISTOGRAM && !strcmp(labels[i], "le"))) {
            errno = EINVAL;
            return NULL;
        }
    for (int i = 0; type == METRICS_HISTOGRAM && i < nb; i++)
        if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1])) {
            errno = EINVAL;
            return NULL;
        }
    struct metrics_family *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->type = type;
    f->owner = m;
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    bool ok = f->name && f->help;
    for (int i = 0; i < nlabels; i++) ok = ok && (f->labels[f->nlabels++] = strdup(labels[i])) != NULL;
    if (type == METRICS_HISTOGRAM) {
        f->nb = nb;
        memcpy(f->bounds, bounds, (size_t)nb * sizeof *bounds);
    }
    if (!ok) {
        family_free(f);
        errno = ENOMEM;
        return NULL;
    }
    struct metrics_family *same = NULL; /* the family made before under this name, when it is this one */
    pthread_mutex_lock(&m->mu);
    for (struct metrics_family *g = m->first; g; g = g->next)
        if (!strcmp(g->name, name)) {
            ok = false;
            if (g->type == f->type && g->nlabels == f->nlabels && g->nb == f->nb &&
                !memcmp(g->bounds, f->bounds, (size_t)f->nb * sizeof *f->bounds)) {
                same = g;
                for (int i = 0; i < f->nlabels; i++)
                    if (strcmp(g->labels[i], f->labels[i])) same = NULL;
            }
        }
    if (ok) {
        if (m->last) m->last->next = f;
        else m->first = f;
        m->last = f;
    }
    pthread_mutex_unlock(&m->mu);
    if (!ok) {
        family_free(f);
        if (same) return same; /* a role started again in this process: its series go on */
        errno = EINVAL;
        return NULL;
    }
    return f;
}

struct metrics_family *metrics_counter(struct metrics *m, const char *name, const char *help, int nlabels,
                                       const char *const *labels) {
    return family_new(m, METRICS_COUNTER, name, help, nlabels, labels, NULL, 0);
}

struct metrics_family *metrics_gauge(struct metrics *m, const char *name, const char *help, int nlabels,
                                     const char *const *labels) {
    return family_new(m, METRICS_GAUGE, name, help, nlabels, labels, NULL, 0);
}

struct metrics_family *metrics_histogram(struct metrics *m, const char *name, const char *help, int nlabels,
                                         const char *const *labels, const double *bounds, int nb) {
    return family_new(m, METRICS_HISTOGRAM, name, help, nlabels, labels, bounds, nb);
}

/* The key of label values: each value (cut at METRICS_MAX_VALUE) and a NUL. */
static size_t key_make(const struct metrics_family *f, const char *const *values, char *buf, uint64_t *hash) {
    size_t n = 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < f->nlabels; i++) {
        const char *v = values && values[i] ? values[i] : "";
        size_t len = strnlen(v, METRICS_MAX_VALUE);
        memcpy(buf + n, v, len);
        buf[n + len] = 0;
        for (size_t j = 0; j <= len; j++) h = (h ^ (unsigned char)buf[n + j]) * 0x100000001b3ull;
        n += len + 1;
    }
    *hash = h;
    return n;
}

static int slots_grow(struct metrics_family *f) {
    size_t cap = f->cap ? 2 * f->cap : 8;
    struct metrics_series **s = calloc(cap, sizeof *s);
    if (!s) return -ENOMEM;
    for (size_t i = 0; i < f->cap; i++) {
        if (!f->slots[i]) continue;
        size_t j = f->slots[i]->hash & (cap - 1);
        while (s[j]) j = (j + 1) & (cap - 1);
        s[j] = f->slots[i];
    }
    free(f->slots);
    f->slots = s;
    f->cap = cap;
    return 0;
}

struct metrics_series *metrics_series(struct metrics_family *f, const char *const *values) {
    if (!f) return NULL;
    char key[METRICS_MAX_LABELS * (METRICS_MAX_VALUE + 1)];
    uint64_t h;
    size_t klen = key_make(f, values, key, &h);
    if (f->cap)
        for (size_t j = h & (f->cap - 1);; j = (j + 1) & (f->cap - 1)) {
            struct metrics_series *s = f->slots[j];
            if (!s) break;
            if (s->hash == h && s->klen == klen && !memcmp(s->key, key, klen)) return s;
        }
    struct metrics *m = f->owner;
    if (f->n >= METRICS_MAX_SERIES || ((f->n + 1) * 4 > f->cap * 3 && slots_grow(f))) {
        atomic_fetch_add(&m->dropped, 1);
        return NULL;
    }
    struct metrics_series *s = calloc(1, sizeof *s);
    if (!s || !(s->key = malloc(klen ? klen : 1)) ||
        (f->type == METRICS_HISTOGRAM && !(s->le = calloc((size_t)f->nb + 1, sizeof *s->le)))) {
        if (s) free(s->key);
        free(s);
        atomic_fetch_add(&m->dropped, 1);
        return NULL;
    }
    memcpy(s->key, key, klen);
    s->klen = klen;
    s->hash = h;
    s->fam = f;
    size_t j = h & (f->cap - 1);
    while (f->slots[j]) j = (j + 1) & (f->cap - 1);
    f->slots[j] = s;
    f->n++;
    pthread_mutex_lock(&m->mu); /* the scrape walks this list */
    if (f->last) f->last->next_in_order = s;
    else f->first = s;
    f->last = s;
    pthread_mutex_unlock(&m->mu);
    return s;
}

void metrics_series_drop(struct metrics_family *f, const char *const *values) {
    if (!f || !f->cap) return;
    char key[METRICS_MAX_LABELS * (METRICS_MAX_VALUE + 1)];
    uint64_t h;
    size_t klen = key_make(f, values, key, &h);
    size_t j = h & (f->cap - 1);
    struct metrics_series *s;
    for (;; j = (j + 1) & (f->cap - 1)) {
        if (!(s = f->slots[j])) return;
        if (s->hash == h && s->klen == klen && !memcmp(s->key, key, klen)) break;
    }
    /* backward-shift deletion keeps every other series reachable from its home slot */
    f->slots[j] = NULL;
    for (size_t k = (j + 1) & (f->cap - 1); f->slots[k]; k = (k + 1) & (f->cap - 1)) {
        size_t home = f->slots[k]->hash & (f->cap - 1);
        /* move slots[k] into the hole at j when its home is not in (j, k] (cyclically) */
        if ((k > j && (home <= j || home > k)) || (k < j && home <= j && home > k)) {
            f->slots[j] = f->slots[k];
            f->slots[k] = NULL;
            j = k;
        }
    }
    f->n--;
    struct metrics *m = f->owner;
    pthread_mutex_lock(&m->mu);
    struct metrics_series *prev = NULL;
    for (struct metrics_series *o = f->first; o; prev = o, o = o->next_in_order)
        if (o == s) {
            if (prev) prev->next_in_order = s->next_in_order;
            else f->first = s->next_in_order;
            if (f->last == s) f->last = prev;
            break;
        }
    pthread_mutex_unlock(&m->mu);
    free(s->key);
    free(s->le);
    free(s);
}

struct metrics_series *metrics_series0(struct metrics_family *f) { return metrics_series(f, NULL); }

struct metrics_series *metrics_series1(struct metrics_family *f, const char *value) {
    const char *v[1] = {value};
    return metrics_series(f, v);
}

static uint64_t dbits(double v) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static double bitsd(uint64_t b) {
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}

void metrics_set(struct metrics_series *s, double v) {
    if (s) atomic_store_explicit(&s->v, dbits(v), memory_order_relaxed);
}

void metrics_gauge_add(struct metrics_series *s, double d) {
    if (s) metrics_set(s, bitsd(atomic_load_explicit(&s->v, memory_order_relaxed)) + d);
}

void metrics_observe(struct metrics_series *s, double v) {
    if (!s || !s->le) return;
    const struct metrics_family *f = s->fam;
    int i = 0;
    while (i < f->nb && v > f->bounds[i]) i++; /* NaN lands in +Inf */
    atomic_store_explicit(&s->le[i], atomic_load_explicit(&s->le[i], memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&s->v, dbits(bitsd(atomic_load_explicit(&s->v, memory_order_relaxed)) + v),
                          memory_order_relaxed);
}

double metrics_value(const struct metrics_series *s) {
    if (!s) return 0;
    uint64_t v = atomic_load_explicit(&s->v, memory_order_relaxed);
    switch (s->fam->type) {
    case METRICS_COUNTER:
        return (double)v;
    case METRICS_GAUGE:
        return bitsd(v);
    case METRICS_HISTOGRAM: {
        uint64_t n = 0;
        for (int i = 0; i <= s->fam->nb; i++) n += atomic_load_explicit(&s->le[i], memory_order_relaxed);
        return (double)n;
    }
    }
    return 0;
}

int metrics_collector(struct metrics *m, metrics_collect_fn fn, void *ud) {
    pthread_mutex_lock(&m->mu);
    int rc = -ENOSPC;
    if (m->ncoll < 8) {
        m->coll[m->ncoll].fn = fn;
        m->coll[m->ncoll++].ud = ud;
        rc = 0;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* ---- the text ---- */

/* A float as Prometheus reads it (Go's ParseFloat): the shortest of %.15g
 * and %.17g that reads back the same; +Inf, -Inf, NaN. */
static void write_float(FILE *f, double v) {
    if (isnan(v)) {
        fputs("NaN", f);
        return;
    }
    if (isinf(v)) {
        fputs(v > 0 ? "+Inf" : "-Inf", f);
        return;
    }
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    fputs(buf, f);
}

/* HELP text escapes \ and newline; label values also ". */
static void write_escaped(FILE *f, const char *s, bool quote) {
    for (; *s; s++) {
        if (*s == '\\') fputs("\\\\", f);
        else if (*s == '\n') fputs("\\n", f);
        else if (quote && *s == '"') fputs("\\\"", f);
        else fputc(*s, f);
    }
}

void metrics_write_family(void *file, const char *name, const char *type, const char *help) {
    FILE *f = file;
    fprintf(f, "# HELP %s ", name);
    write_escaped(f, help, false);
    fprintf(f, "\n# TYPE %s %s\n", name, type);
}

void metrics_write_sample(void *file, const char *name, double v) {
    fprintf(file, "%s ", name);
    write_float(file, v);
    fputc('\n', file);
}

/* A series' lines are built in a buffer reused over the scrape and written
 * with one fwrite: stdio calls per field made a scrape of 16,000 gauges cost
 * 8 ms of the API server's loop. */
struct mbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void mb_put(struct mbuf *b, const char *s, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void mb_str(struct mbuf *b, const char *s) { mb_put(b, s, strlen(s)); }

static void mb_u64(struct mbuf *b, uint64_t v) {
    char d[24];
    int n = 0;
    do d[sizeof d - 1 - n++] = (char)('0' + v % 10);
    while ((v /= 10));
    mb_put(b, d + sizeof d - n, (size_t)n);
}

/* A float as write_float writes it; whole numbers (most gauges) without
 * printf. */
static void mb_float(struct mbuf *b, double v) {
    if (v == v && v >= -9007199254740992.0 && v <= 9007199254740992.0 && v == (double)(int64_t)v &&
        !(v == 0 && signbit(v))) {
        if (v < 0) {
            mb_put(b, "-", 1);
            mb_u64(b, (uint64_t)(-(int64_t)v));
        } else {
            mb_u64(b, (uint64_t)v);
        }
        return;
    }
    char buf[40];
    if (isnan(v)) strcpy(buf, "NaN");
    else if (isinf(v)) strcpy(buf, v > 0 ? "+Inf" : "-Inf");
    else {
        snprintf(buf, sizeof buf, "%.15g", v);
        if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    }
    mb_str(b, buf);
}

/* A label value with \, " and newline escaped. */
static void mb_escaped(struct mbuf *b, const char *s) {
    const char *run = s;
    for (; *s; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
        if (!esc) continue;
        mb_put(b, run, (size_t)(s - run));
        mb_put(b, esc, 2);
        run = s + 1;
    }
    mb_put(b, run, (size_t)(s - run));
}

/* {a="x",b="y"} with le="bound" last when given; nothing for no labels. */
static void mb_labels(struct mbuf *b, const struct metrics_family *fam, const char *key, const char *le) {
    if (!fam->nlabels && !le) return;
    mb_put(b, "{", 1);
    const char *v = key;
    for (int i = 0; i < fam->nlabels; i++) {
        if (i) mb_put(b, ",", 1);
        mb_str(b, fam->labels[i]);
        mb_put(b, "=\"", 2);
        mb_escaped(b, v);
        mb_put(b, "\"", 1);
        v += strlen(v) + 1;
    }
    if (le) {
        mb_str(b, fam->nlabels ? ",le=\"" : "le=\"");
        mb_str(b, le);
        mb_put(b, "\"", 1);
    }
    mb_put(b, "}", 1);
}

static void mb_series(struct mbuf *b, const struct metrics_family *fam, const struct metrics_series *s) {
    uint64_t v = atomic_load_explicit(&s->v, memory_order_relaxed);
    if (fam->type != METRICS_HISTOGRAM) {
        mb_str(b, fam->name);
        mb_labels(b, fam, s->key, NULL);
        mb_put(b, " ", 1);
        if (fam->type == METRICS_COUNTER) mb_u64(b, v);
        else mb_float(b, bitsd(v));
        mb_put(b, "\n", 1);
        return;
    }
    uint64_t cum = 0;
    for (int i = 0; i <= fam->nb; i++) {
        cum += atomic_load_explicit(&s->le[i], memory_order_relaxed);
        char le[40];
        if (i < fam->nb) {
            snprintf(le, sizeof le, "%.15g", fam->bounds[i]);
            if (strtod(le, NULL) != fam->bounds[i]) snprintf(le, sizeof le, "%.17g", fam->bounds[i]);
        } else {
            strcpy(le, "+Inf");
        }
        mb_str(b, fam->name);
        mb_put(b, "_bucket", 7);
        mb_labels(b, fam, s->key, le);
        mb_put(b, " ", 1);
        mb_u64(b, cum);
        mb_put(b, "\n", 1);
    }
    mb_str(b, fam->name);
    mb_put(b, "_sum", 4);
    mb_labels(b, fam, s->key, NULL);
    mb_put(b, " ", 1);
    mb_float(b, bitsd(v));
    mb_put(b, "\n", 1);
    mb_str(b, fam->name);
    mb_put(b, "_count", 6);
    mb_labels(b, fam, s->key, NULL);
    mb_put(b, " ", 1);
    mb_u64(b, cum);
    mb_put(b, "\n", 1);
}

int metrics_render(struct metrics *m, char **out, size_t *len) {
    static const char *const type_name[] = {"counter", "gauge", "histogram"};
    *out = NULL;
    *len = 0;
    FILE *f = open_memstream(out, len);
    if (!f) return -ENOMEM;
    struct mbuf b = {0};
    pthread_mutex_lock(&m->mu);
    for (const struct metrics_family *fam = m->first; fam; fam = fam->next) {
        metrics_write_family(f, fam->name, type_name[fam->type], fam->help);
        for (const struct metrics_series *s = fam->first; s; s = s->next_in_order) {
            b.len = 0;
            mb_series(&b, fam, s);
            if (b.len) fwrite(b.p, 1, b.len, f);
        }
    }
    metrics_write_family(f, "metrics_series_dropped_total", "counter",
                         "Series not made: a family at its bound of series, or out of memory.");
    metrics_write_sample(f, "metrics_series_dropped_total", (double)atomic_load(&m->dropped));
    for (int i = 0; i < m->ncoll; i++) m->coll[i].fn(m->coll[i].ud, f);
    pthread_mutex_unlock(&m->mu);
    free(b.p);
    if (fclose(f) || !*out || b.oom) {
        free(*out);
        *out = NULL;
        *len = 0;
        return -ENOMEM;
    }
    return 0;
}

/* ---- the process ---- */

void metrics_collect_process(void *ud, void *file) {
    (void)ud;
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    char buf[1024];
    FILE *p = fopen("/proc/self/stat", "r");
    size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
    if (p) fclose(p);
    buf[n] = 0;
    /* fields after the command's closing parenthesis (the command may hold spaces) */
    const char *rest = strrchr(buf, ')');
    unsigned long long utime = 0, stime = 0, start = 0;
    long rss = 0;
    if (rest && tick > 0 &&
        sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %*u %ld",
               &utime, &stime, &start, &rss) == 4) {
        metrics_write_family(file, "process_cpu_seconds_total", "counter", "User and system CPU time spent, seconds.");
        metrics_write_sample(file, "process_cpu_seconds_total", (double)(utime + stime) / (double)tick);
        metrics_write_family(file, "process_resident_memory_bytes", "gauge", "Resident memory size, bytes.");
        metrics_write_sample(file, "process_resident_memory_bytes", (double)rss * (double)page);
        /* the boot time from /proc/stat makes the start time absolute */
        FILE *st = fopen("/proc/stat", "r");
        unsigned long long btime = 0;
        char line[256];
        while (st && fgets(line, sizeof line, st))
            if (sscanf(line, "btime %llu", &btime) == 1) break;
        if (st) fclose(st);
        if (btime) {
            metrics_write_family(file, "process_start_time_seconds", "gauge",
                                 "Start time of the process since the Unix epoch, seconds.");
            metrics_write_sample(file, "process_start_time_seconds", (double)btime + (double)start / (double)tick);
        }
    }
}

uint64_t metrics_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
