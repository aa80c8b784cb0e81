/* The extender's metrics: families of the shared registry (src/util/metrics.h),
 * written on the loop thread; the registry writes the text when /metrics is
 * scraped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ext_int.h"

static const char *const verb_name[4] = {"filter", "prioritize", "preempt", "bind"};
static const char *const dec_name[EXT_NDEC] = {"admitted",        "entitlement", "reservation",  "limit",
                                               "slack_entitlement", "gang_incomplete", "gang_unfit",
                                               "pool_unknown",    "invalid_pod"};

/* The series of a family without labels. */
static struct metrics_series *counter0(struct metrics *r, const char *name, const char *help) {
    return metrics_series0(metrics_counter(r, name, help, 0, NULL));
}
static struct metrics_series *gauge0(struct metrics *r, const char *name, const char *help) {
    return metrics_series0(metrics_gauge(r, name, help, 0, NULL));
}

int ext_metrics_init(struct ext_core *x, struct metrics *reg) {
    struct ext_metrics *m = &x->m;
    if (!reg) {
        if (!(reg = metrics_new())) return -ENOMEM;
        m->own = true;
    }
    m->reg = reg;
    /* 50 us .. 5 s */
    static const double lat_s[] = {5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                   0.025, 0.05,   0.1,     0.25,   0.5,   1,      2.5,    5};
    static const char *const verb[] = {"verb"}, *const result[] = {"result"}, *const pool_reason[] = {"pool", "reason"};
    struct metrics_family *f = metrics_histogram(
        reg, "peloton_extender_request_duration_seconds",
        "Time from a request's arrival to its reply, by verb (bind: until the API server answered the Binding).", 1,
        verb, lat_s, (int)(sizeof lat_s / sizeof *lat_s));
    for (int v = 0; v < 4; v++) m->lat[v] = metrics_series1(f, verb_name[v]);
    m->decisions = metrics_counter(reg, "peloton_extender_filter_decisions_total",
                                   "Pods judged by filter, by pool (\"\" = unmanaged) and the pool's decision "
                                   "(admitted, or the rule that refused the pod).",
                                   2, pool_reason);
    m->dec_dropped = counter0(reg, "peloton_extender_filter_decisions_dropped_total",
                              "Decisions not counted by pool: the family's bound of series was reached (or memory).");
    m->preempt_victims = counter0(reg, "peloton_extender_preempt_victims_total",
                                  "Victims named in preempt answers (a gang's members all count).");
    m->preempt_nodes = counter0(reg, "peloton_extender_preempt_nodes_total",
                                "Nodes named (with victims) in preempt answers.");
    m->preempt_empty = counter0(reg, "peloton_extender_preempt_empty_total",
                                "preempt answers naming no node (kube-scheduler does not preempt for the pod).");
    f = metrics_counter(reg, "peloton_extender_binds_total",
                        "bind calls by result: bound (the API server took the Binding), already (bound there "
                        "before), failed.",
                        1, result);
    m->binds_bound = metrics_series1(f, "bound"); /* made now: their zeros are written */
    m->binds_already = metrics_series1(f, "already");
    m->binds_failed = metrics_series1(f, "failed");
    m->inflight = gauge0(reg, "peloton_extender_binds_in_flight",
                         "Pods whose Binding is with the API server (counted against their pools already).");
    m->gangs_held = gauge0(reg, "peloton_extender_gangs_held",
                           "Admitted gangs whose planned members are not all bound yet (their nodes' room is held).");
    m->gangs_admitted = counter0(reg, "peloton_extender_gangs_admitted_total",
                                 "Gangs admitted as a whole.");
    m->nominated = gauge0(reg, "peloton_extender_nominated_pods",
                          "Unbound pods kube-scheduler nominated to a node (status.nominatedNodeName).");
    m->model_nodes = gauge0(reg, "peloton_extender_model_nodes", "Nodes in the extender's model.");
    m->model_pods = gauge0(reg, "peloton_extender_model_pods", "Pods in the extender's model.");
    m->tree_valid = gauge0(reg, "peloton_extender_pool_tree_valid",
                           "1 when the latest set of ResourcePools forms a valid tree, 0 when the last valid one "
                           "stays in force.");
    ext_metrics_gauges(x);
    return 0;
}

void ext_metrics_feeds(struct ext_core *x, const char *const *kinds, size_t n) {
    struct ext_metrics *m = &x->m;
    static const char *const kind[] = {"kind"};
    static const double age_s[] = {1, 2, 5, 10, 30, 60, 300, 600};
    struct metrics_family *synced = metrics_gauge(
        m->reg, "peloton_extender_cache_synced", "1 once the informer of a kind has listed its objects.", 1, kind);
    struct metrics_family *events = metrics_counter(m->reg, "peloton_extender_watch_events_total",
                                                    "Watch events taken after the first sync, by kind.", 1, kind);
    struct metrics_family *age = metrics_histogram(
        m->reg, "peloton_extender_watch_event_age_seconds",
        "Lag behind the API server: a watch event's arrival less the newest time its object carries (creation, "
        "deletion, managedFields), by kind; one-second resolution.",
        1, kind, age_s, (int)(sizeof age_s / sizeof *age_s));
    for (size_t i = 0; i < n && i < EXT_WATCH_KINDS; i++) m->synced[i] = metrics_series1(synced, kinds[i]);
    for (size_t i = 0; i < n && i < EXT_WATCH_KINDS; i++) m->watch_events[i] = metrics_series1(events, kinds[i]);
    for (size_t i = 0; i < n && i < EXT_WATCH_KINDS; i++) m->watch_age[i] = metrics_series1(age, kinds[i]);
    for (size_t i = 0; i < n && i < EXT_WATCH_KINDS; i++) metrics_set(m->synced[i], 0);
}

void ext_metrics_synced(struct ext_core *x, int kind) {
    if (kind >= 0 && kind < EXT_WATCH_KINDS) metrics_set(x->m.synced[kind], 1);
}

void ext_metrics_latency(struct ext_core *x, int verb, uint64_t ns) {
    if (verb >= 0 && verb < 4) metrics_observe(x->m.lat[verb], (double)ns / 1e9);
}

void ext_metrics_decision(struct ext_core *x, const char *pool, enum ext_decision d) {
    const char *v[2] = {pool ? pool : "", dec_name[d]};
    struct metrics_series *s = metrics_series(x->m.decisions, v);
    if (s) metrics_inc(s);
    else metrics_inc(x->m.dec_dropped);
}

void ext_metrics_gauges(struct ext_core *x) {
    struct ext_metrics *m = &x->m;
    size_t gangs = 0;
    for (const struct ext_gang *g = x->gangs; g; g = g->next) gangs++;
    metrics_set(m->inflight, (double)json_object_size(x->inflight));
    metrics_set(m->gangs_held, (double)gangs);
    metrics_set(m->nominated, (double)json_object_size(x->nominated));
    metrics_set(m->model_nodes, (double)cluster_node_count(x->cm));
    metrics_set(m->model_pods, (double)cluster_pod_count(x->cm));
    metrics_set(m->tree_valid, cluster_pool_error(x->cm) ? 0 : 1);
}

int ext_metrics_render(struct ext_core *x, char **out, size_t *len) {
    ext_metrics_gauges(x);
    return metrics_render(x->m.reg, out, len);
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
    metrics_inc(x->m.watch_events[kind]);
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
    metrics_observe(x->m.watch_age[kind], age > 0 ? (double)age / 1e3 : 0);
}

void ext_metrics_free(struct ext_metrics *m) {
    if (m->own) metrics_free(m->reg);
    memset(m, 0, sizeof *m);
}
