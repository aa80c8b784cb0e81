/* The API server's metrics (docs/metrics.md): request latency by verb,
 * resource and code, open watches and the events sent on them. All on the
 * API server's loop thread, the families' one writer. Without a registry
 * (shim_config.metrics NULL) nothing is kept and /metrics is 404. */
#ifndef PELOTON_SHIM_METRICS_H
#define PELOTON_SHIM_METRICS_H

#include <stdint.h>

#include "metrics.h"

/* What is known of the request being served, for its latency sample: set by
 * shim_handle and the routing, copied by a write that defers its reply. */
struct shim_obs {
    uint64_t t0;        /* metrics_now_ns at arrival; 0: not observed */
    const char *verb;   /* static: GET, LIST, WATCH, CREATE, UPDATE, PATCH, DELETE, DELETECOLLECTION, or the method */
    char resource[96];  /* plural[/subresource], "" for other paths */
};

struct shim_metrics {
    struct metrics *reg; /* borrowed */
    struct metrics_family *duration, *watches, *watch_events;
    struct metrics_series *slice_held;  /* bytes held by whole lists being served (shim_slices.c) */
    struct metrics_family *slice_refused; /* whole lists refused or ended for memory, by when */
};

struct shim;
struct http_response;
/* Registers the families in reg; NULL when reg is NULL or out of memory. */
struct shim_metrics *shim_metrics_new(struct metrics *reg);
void shim_metrics_free(struct shim_metrics *m);
/* One finished request: latency since o->t0, labelled with code. */
void shim_metrics_request(struct shim_metrics *m, const struct shim_obs *o, int code);
/* The /metrics answer (text 0.0.4, or 500 when out of memory). */
void shim_metrics_serve(struct shim_metrics *m, struct http_response *resp);

#endif
