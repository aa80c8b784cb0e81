/* Metrics: counters, gauges and histograms with labels, kept by the roles of
 * a process and written as Prometheus text (exposition format 0.0.4) when
 * /metrics is scraped (docs/metrics.md lists what pelotond exports).
 *
 * Threads. A registry is shared by every role of a process; each family has
 * one writer thread, the thread that registered it (a role's loop). Its
 * updates are plain increments on that thread: a value is an atomic with
 * relaxed loads and stores by its single writer (no lock, no locked
 * instruction), read by the scrape from any thread. Finding a series by its
 * label values (metrics_series) takes no lock either; making a new one does
 * (the registry's mutex, which the scrape holds while it writes). A series
 * made on the family's thread may be handed to one other thread, which then
 * is that series' one writer (pelotond makes the controllers' Redis series
 * on the main thread before their thread starts). A histogram's count is
 * the sum of its buckets as the scrape reads them, so the +Inf bucket and
 * _count always agree.
 *
 * Names follow Prometheus' conventions (base units in the name: _seconds,
 * _bytes; counters end in _total: the caller's to choose); metrics_counter
 * etc. check the characters of the name and label names ([a-zA-Z_:][a-zA-Z0-9_:]*, labels without ':' and not
 * starting "__"). Label values are escaped (\\, \", \n) when written.
 *
 * Bounds: a family holds at most METRICS_MAX_SERIES series; metrics_series
 * returns NULL past that (and counts it in metrics_series_dropped_total),
 * and every update function takes NULL and does nothing, so a caller never
 * checks. Ownership: the registry owns its families and series; free it
 * after every writer has stopped. */
#ifndef PELOTON_METRICS_H
#define PELOTON_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_MAX_LABELS 4
#define METRICS_MAX_BUCKETS 32
#define METRICS_MAX_SERIES 65536 /* 10,000 pools x 4 kinds fit in a pool gauge */
#define METRICS_MAX_VALUE 256 /* bytes of one label value; longer ones are cut */

enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM };

struct metrics;
struct metrics_family;

/* One labelled series. The writer thread updates it through the functions
 * below; the fields are the registry's. */
struct metrics_series {
    _Atomic uint64_t v;   /* counter: count; gauge: bits of a double; histogram: bits of the sum */
    _Atomic uint64_t *le; /* histogram: count per bucket (not cumulative), the last one +Inf */
    const struct metrics_family *fam;
    char *key;            /* label values, each followed by '\0' */
    size_t klen;
    uint64_t hash;
    struct metrics_series *next_in_order; /* written in creation order */
};

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* A family (name, help, labels: nlabels names, at most METRICS_MAX_LABELS).
 * Strings are copied. A name made before with the same type, labels and
 * bounds gives that family again (a role stopped and started again in one
 * process, as a lease's terms do, goes on with its series); NULL with
 * errno EINVAL for a bad name, a name made before otherwise, or bad
 * bounds, ENOMEM. Histogram bounds: nb (1 to
 * METRICS_MAX_BUCKETS) finite upper bounds in increasing order; +Inf is
 * added. Bounds in the unit the name says (seconds). */
struct metrics_family *metrics_counter(struct metrics *m, const char *name, const char *help, int nlabels,
                                       const char *const *labels);
struct metrics_family *metrics_gauge(struct metrics *m, const char *name, const char *help, int nlabels,
                                     const char *const *labels);
struct metrics_family *metrics_histogram(struct metrics *m, const char *name, const char *help, int nlabels,
                                         const char *const *labels, const double *bounds, int nb);

/* The series of fam with these label values (as many as its labels; NULL
 * values count as ""), made on first use. Writer thread only. NULL when fam
 * is NULL, full, or out of memory. */
struct metrics_series *metrics_series(struct metrics_family *fam, const char *const *values);
/* For families without labels, and one-label ones. */
struct metrics_series *metrics_series0(struct metrics_family *fam);
struct metrics_series *metrics_series1(struct metrics_family *fam, const char *value);

/* Removes the series of fam with these label values, if any (writer
 * thread): what it described is gone (a deleted pool). A pointer to it
 * held by the caller is invalid from then on. */
void metrics_series_drop(struct metrics_family *fam, const char *const *values);

/* Writer thread only. */
static inline void metrics_add(struct metrics_series *s, uint64_t n) {
    if (s) atomic_store_explicit(&s->v, atomic_load_explicit(&s->v, memory_order_relaxed) + n, memory_order_relaxed);
}
static inline void metrics_inc(struct metrics_series *s) { metrics_add(s, 1); }
void metrics_set(struct metrics_series *s, double v);
void metrics_gauge_add(struct metrics_series *s, double d);
void metrics_observe(struct metrics_series *s, double v);

/* What a series holds now (any thread): a counter's count, a gauge's value,
 * a histogram's observation count; for tests and benchmarks. 0 for NULL. */
double metrics_value(const struct metrics_series *s);

/* A function that writes samples of its own at scrape time (process CPU and
 * memory): called with the scrape's FILE and ud, on the scraping thread, with
 * the registry's mutex held. It writes whole families, HELP and TYPE first
 * (metrics_write_family helps). At most 8 per registry; -ENOSPC past that. */
typedef void (*metrics_collect_fn)(void *ud, void *file);
int metrics_collector(struct metrics *m, metrics_collect_fn fn, void *ud);
void metrics_write_family(void *file, const char *name, const char *type, const char *help);
void metrics_write_sample(void *file, const char *name, double v);

/* The exposition text of every family, then the collectors' (any thread):
 * *out is malloc'd (the caller frees it), *len its length. 0 or -ENOMEM. */
int metrics_render(struct metrics *m, char **out, size_t *len);
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Process CPU seconds (user and system) and resident memory from /proc/self:
 * a collector (ud unused) writing process_cpu_seconds_total,
 * process_resident_memory_bytes, process_start_time_seconds. */
void metrics_collect_process(void *ud, void *file);

/* CLOCK_MONOTONIC in ns: time an operation with two readings. */
uint64_t metrics_now_ns(void);

#endif
