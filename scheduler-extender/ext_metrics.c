/* The extender's metrics: counters and histograms kept on the loop thread,
 * written as Prometheus text (exposition format 0.0.4) when /metrics is
 * scraped. Every family has its HELP and TYPE lines before its samples;
 * histograms have cumulative _bucket samples with an `le` label ending in
 * "+Inf", then _sum and _count; label values are escaped (\\, \", \n). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ext_int.h"

/* Latency bounds (ns) and watch age bounds (ms), with their `le` text. */
static const uint64_t lat_ns[EXT_LAT_NB] = {50000,    100000,    250000,    500000,    1000000,   2500000,
                                            5000000,  10000000,  25000000,  50000000,  100000000, 250000000,
                                            500000000, 1000000000, 2500000000, 5000000000};
static const char *const lat_le[EXT_LAT_NB] = {"5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
                                               "0.005", "0.01",   "0.025",   "0.05",   "0.1",   "0.25",
                                               "0.5",   "1",      "2.5",     "5"};
static const uint64_t age_ms[EXT_AGE_NB] = {1000, 2000, 5000, 10000, 30000, 60000, 300000, 600000};
static const char *const age_le[EXT_AGE_NB] = {"1", "2", "5", "10", "30", "60", "300", "600"};

static const char *const verb_name[4] = {"filter", "prioritize", "preempt", "bind"};
static const char *const dec_name[EXT_NDEC] = {"admitted",        "entitlement", "reservation",  "limit",
                                               "slack_entitlement", "gang_incomplete", "gang_unfit",
                                               "pool_unknown",    "invalid_pod"};

static void observe(struct ext_hist *h, const uint64_t *bounds, int nb, uint64_t v) {
    int i = 0;
    while (i < nb && v > bounds[i]) i++;
    h->le[i]++;
    h->count++;
    h->sum += v;
}

void ext_metrics_latency(struct ext_core *x, int verb, uint64_t ns) {
    if (verb >= 0 && verb < 4) observe(&x->m.lat[verb], lat_ns, EXT_LAT_NB, ns);
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int dec_grow(struct ext_metrics *m) {
    size_t cap = m->dec_cap ? 2 * m->dec_cap : 16;
    struct ext_pool_dec *d = calloc(cap, sizeof *d);
    if (!d) return -ENOMEM;
    for (size_t i = 0; i < m->dec_cap; i++) {
        if (!m->dec[i].pool) continue;
        size_t j = m->dec[i].hash & (cap - 1);
        while (d[j].pool) j = (j + 1) & (cap - 1);
        d[j] = m->dec[i];
    }
    free(m->dec);
    m->dec = d;
    m->dec_cap = cap;
    return 0;
}

void ext_metrics_decision(struct ext_core *x, const char *pool, enum ext_decision d) {
    struct ext_metrics *m = &x->m;
    if (!pool) pool = "";
    uint64_t h = hash_str(pool);
    if (m->dec_cap) {
        for (size_t j = h & (m->dec_cap - 1);; j = (j + 1) & (m->dec_cap - 1)) {
            struct ext_pool_dec *e = &m->dec[j];
            if (!e->pool) break;
            if (e->hash == h && !strcmp(e->pool, pool)) {
                e->n[d]++;
                return;
            }
        }
    }
    /* a pool not seen yet */
    if (m->ndec >= EXT_METRICS_MAX_POOLS || ((m->ndec + 1) * 4 > m->dec_cap * 3 && dec_grow(m))) {
        m->dec_dropped++;
        return;
    }
    char *name = strdup(pool);
    if (!name) {
        m->dec_dropped++;
        return;
    }
    size_t j = h & (m->dec_cap - 1);
    while (m->dec[j].pool) j = (j + 1) & (m->dec_cap - 1);
    m->dec[j] = (struct ext_pool_dec){.pool = name, .hash = h};
    m->dec[j].n[d]++;
    m->ndec++;
}

enum ext_decision ext_decision_of(const char *why, bool resolvable) {
    if (!why) return EXT_DEC_INVALID;
    if (strstr(why, "held until the whole gang is created")) return EXT_DEC_GANG_INCOMPLETE;
    if (strstr(why, " reservation ")) return EXT_DEC_RESERVATION;
    if (strstr(why, " slack entitlement ")) return EXT_DEC_SLACK;
    if (strstr(why, " entitlement ")) return resolvable ? EXT_DEC_ENTITLEMENT : EXT_DEC_LIMIT;
    if (strstr(why, "resource pool ")) return EXT_DEC_POOL_UNKNOWN;
    if (!strncmp(why, "gang ", 5)) return EXT_DEC_GANG_UNFIT;
    return EXT_DEC_INVALID;
}

/* "2026-01-02T03:04:05Z" (or with fractional seconds / an offset) in ms since
 * the epoch; 0 when not such a time. */
static int64_t rfc3339_ms(const char *s) {
    if (!s) return 0;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int y, mo, d, h, mi, sec, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n != 19) return 0;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    int64_t ms = (int64_t)timegm(&tm) * 1000;
    const char *p = s + 19;
    if (*p == '.') {
        int64_t scale = 100;
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10) ms += (*p - '0') * scale;
    }
    if ((*p == '+' || *p == '-') && strlen(p) >= 6) { /* an offset: the time is local to it */
        int oh = (p[1] - '0') * 10 + (p[2] - '0'), om = (p[4] - '0') * 10 + (p[5] - '0');
        int64_t off = ((int64_t)oh * 60 + om) * 60000;
        ms += *p == '+' ? -off : off;
    }
    return ms;
}

void ext_metrics_watch_event(struct ext_core *x, int kind, const json_t *obj) {
    if (kind < 0 || kind >= EXT_WATCH_KINDS) return;
    x->m.watch_events[kind]++;
    const json_t *md = json_object_get(obj, "metadata");
    int64_t newest = rfc3339_ms(json_string_value(json_object_get(md, "creationTimestamp")));
    int64_t t = rfc3339_ms(json_string_value(json_object_get(md, "deletionTimestamp")));
    if (t > newest) newest = t;
    size_t i;
    const json_t *mf;
    json_array_foreach(json_object_get(md, "managedFields"), i, mf) {
        t = rfc3339_ms(json_string_value(json_object_get(mf, "time")));
        if (t > newest) newest = t;
    }
    if (!newest) return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t age = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - newest;
    observe(&x->m.watch_age[kind], age_ms, EXT_AGE_NB, age > 0 ? (uint64_t)age : 0);
}

void ext_metrics_free(struct ext_metrics *m) {
    for (size_t i = 0; i < m->dec_cap; i++) free(m->dec[i].pool);
    free(m->dec);
    memset(m, 0, sizeof *m);
}

/* ---- the text ---- */

static void family(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family of one sample without labels. */
static void single(FILE *f, const char *name, const char *type, const char *help, unsigned long long v) {
    family(f, name, type, help);
    fprintf(f, "%s %llu\n", name, v);
}

/* A label value with \, " and newline escaped. */
static void label_value(FILE *f, const char *v) {
    for (; *v; v++) {
        if (*v == '\\') fputs("\\\\", f);
        else if (*v == '"') fputs("\\\"", f);
        else if (*v == '\n') fputs("\\n", f);
        else fputc(*v, f);
    }
}

/* The samples of one histogram; label is `name="value"` text written as is
 * before le (its value already escaped), or NULL. div: unit per second. */
static void hist(FILE *f, const char *name, const char *label, const struct ext_hist *h, const char *const *le,
                 int nb, double div) {
    uint64_t cum = 0;
    const char *sep = label ? "," : "";
    for (int i = 0; i < nb; i++) {
        cum += h->le[i];
        fprintf(f, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, label ? label : "", sep, le[i], (unsigned long long)cum);
    }
    cum += h->le[nb];
    fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, label ? label : "", sep, (unsigned long long)cum);
    fprintf(f, "%s_sum%s%s%s %.9g\n", name, label ? "{" : "", label ? label : "", label ? "}" : "",
            (double)h->sum / div);
    fprintf(f, "%s_count%s%s%s %llu\n", name, label ? "{" : "", label ? label : "", label ? "}" : "",
            (unsigned long long)h->count);
}

int ext_metrics_render(struct ext_core *x, const bool *synced, const char *const *kinds, size_t n, char **out,
                       size_t *len) {
    *out = NULL;
    *len = 0;
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f) return -ENOMEM;
    struct ext_metrics *m = &x->m;
    char label[64];

    family(f, "peloton_extender_request_duration_seconds", "histogram",
           "Time from a request's arrival to its reply, by verb (bind: until the API server answered the Binding).");
    for (int v = 0; v < 4; v++) {
        snprintf(label, sizeof label, "verb=\"%s\"", verb_name[v]);
        hist(f, "peloton_extender_request_duration_seconds", label, &m->lat[v], lat_le, EXT_LAT_NB, 1e9);
    }

    family(f, "peloton_extender_filter_decisions_total", "counter",
           "Pods judged by filter, by pool (\"\" = unmanaged) and the pool's decision (admitted, or the rule that "
           "refused the pod).");
    for (size_t i = 0; i < m->dec_cap; i++) {
        const struct ext_pool_dec *e = &m->dec[i];
        if (!e->pool) continue;
        for (int d = 0; d < EXT_NDEC; d++) {
            if (!e->n[d]) continue;
            fputs("peloton_extender_filter_decisions_total{pool=\"", f);
            label_value(f, e->pool);
            fprintf(f, "\",reason=\"%s\"} %llu\n", dec_name[d], (unsigned long long)e->n[d]);
        }
    }
    single(f, "peloton_extender_filter_decisions_dropped_total", "counter",
           "Decisions not counted by pool: more than 4096 pools were seen.", m->dec_dropped);

    single(f, "peloton_extender_preempt_victims_total", "counter",
           "Victims named in preempt answers (a gang's members all count).", m->preempt_victims);
    single(f, "peloton_extender_preempt_nodes_total", "counter",
           "Nodes named (with victims) in preempt answers.", m->preempt_nodes);
    single(f, "peloton_extender_preempt_empty_total", "counter",
           "preempt answers naming no node (kube-scheduler does not preempt for the pod).", m->preempt_empty);

    family(f, "peloton_extender_binds_total", "counter",
           "bind calls by result: bound (the API server took the Binding), already (bound there before), failed.");
    fprintf(f, "peloton_extender_binds_total{result=\"bound\"} %llu\n", (unsigned long long)m->binds_bound);
    fprintf(f, "peloton_extender_binds_total{result=\"already\"} %llu\n", (unsigned long long)m->binds_already);
    fprintf(f, "peloton_extender_binds_total{result=\"failed\"} %llu\n", (unsigned long long)m->binds_failed);
    single(f, "peloton_extender_binds_in_flight", "gauge",
           "Pods whose Binding is with the API server (counted against their pools already).",
           json_object_size(x->inflight));

    size_t gangs = 0;
    for (const struct ext_gang *g = x->gangs; g; g = g->next) gangs++;
    single(f, "peloton_extender_gangs_held", "gauge",
           "Admitted gangs whose planned members are not all bound yet (their nodes' room is held).", gangs);
    single(f, "peloton_extender_gangs_admitted_total", "counter",
           "Gangs admitted as a whole.", x->st.gangs_admitted);
    single(f, "peloton_extender_nominated_pods", "gauge",
           "Unbound pods kube-scheduler nominated to a node (status.nominatedNodeName).",
           json_object_size(x->nominated));

    single(f, "peloton_extender_model_nodes", "gauge",
           "Nodes in the extender's model.", cluster_node_count(x->cm));
    single(f, "peloton_extender_model_pods", "gauge",
           "Pods in the extender's model.", cluster_pod_count(x->cm));
    single(f, "peloton_extender_pool_tree_valid", "gauge",
           "1 when the latest set of ResourcePools forms a valid tree, 0 when the last valid one stays in force.",
           cluster_pool_error(x->cm) ? 0 : 1);

    if (n) {
        family(f, "peloton_extender_cache_synced", "gauge", "1 once the informer of a kind has listed its objects.");
        for (size_t i = 0; i < n; i++)
            fprintf(f, "peloton_extender_cache_synced{kind=\"%s\"} %d\n", kinds[i], synced[i] ? 1 : 0);
        family(f, "peloton_extender_watch_events_total", "counter",
               "Watch events taken after the first sync, by kind.");
        for (size_t i = 0; i < n && i < EXT_WATCH_KINDS; i++)
            fprintf(f, "peloton_extender_watch_events_total{kind=\"%s\"} %llu\n", kinds[i],
                    (unsigned long long)m->watch_events[i]);
        family(f, "peloton_extender_watch_event_age_seconds", "histogram",
               "Lag behind the API server: a watch event's arrival less the newest time its object carries "
               "(creation, deletion, managedFields), by kind; one-second resolution.");
        for (size_t i = 0; i < n && i < EXT_WATCH_KINDS; i++) {
            snprintf(label, sizeof label, "kind=\"%s\"", kinds[i]);
            hist(f, "peloton_extender_watch_event_age_seconds", label, &m->watch_age[i], age_le, EXT_AGE_NB, 1e3);
        }
    }
    if (fclose(f) || !buf) {
        free(buf);
        return -ENOMEM;
    }
    *out = buf;
    *len = blen;
    return 0;
}
