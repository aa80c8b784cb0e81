/* The API server's metrics: shim_metrics.h. */
#include "shim_metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "server.h"

/* Latency bounds, seconds: kube-apiserver's range (5 ms to 60 s) with finer
 * steps below 5 ms, where this server answers most requests. */
static const double request_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};

struct shim_metrics *shim_metrics_new(struct metrics *reg) {
    if (!reg) return NULL;
    struct shim_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    static const char *const req_labels[] = {"verb", "resource", "code"};
    static const char *const res_label[] = {"resource"};
    m->reg = reg;
    m->duration = metrics_histogram(reg, "peloton_apiserver_request_duration_seconds",
                                    "API requests from arrival to reply, by verb, resource[/subresource] and "
                                    "HTTP code (watches are not counted here).",
                                    3, req_labels, request_bounds,
                                    (int)(sizeof request_bounds / sizeof request_bounds[0]));
    m->watches = metrics_gauge(reg, "peloton_apiserver_watches", "Watches open now, by resource.", 1, res_label);
    m->watch_events = metrics_counter(reg, "peloton_apiserver_watch_events_sent_total",
                                      "Watch events (and bookmarks) sent, by resource.", 1, res_label);
    static const char *const when_label[] = {"when"};
    m->slice_held = metrics_series0(metrics_gauge(
        reg, "peloton_apiserver_list_memory_bytes",
        "Bytes held by whole lists and watches without a resourceVersion being served (their items, packed, "
        "until sent); bounded by --list-memory-mb.",
        0, NULL));
    m->slice_refused = metrics_counter(reg, "peloton_apiserver_list_memory_refusals_total",
                                       "Whole lists and watches without a resourceVersion refused for memory: "
                                       "when=start (429 TooManyRequests) or when=reading (ended).",
                                       1, when_label);
    return m;
}

void shim_metrics_free(struct shim_metrics *m) { free(m); }

void shim_metrics_request(struct shim_metrics *m, const struct shim_obs *o, int code) {
    if (!m || !o->t0) return;
    char c[8];
    snprintf(c, sizeof c, "%d", code ? code : 200);
    const char *v[3] = {o->verb, o->resource, c};
    metrics_observe(metrics_series(m->duration, v), (double)(metrics_now_ns() - o->t0) / 1e9);
}

void shim_metrics_serve(struct shim_metrics *m, struct http_response *resp) {
    char *out;
    size_t len;
    if (!m || metrics_render(m->reg, &out, &len)) {
        resp->status = m ? 500 : 404;
        resp->content_type = "text/plain; charset=utf-8";
        return;
    }
    resp->status = 200;
    resp->content_type = METRICS_CONTENT_TYPE;
    resp->body = out;
    resp->body_len = len;
}
