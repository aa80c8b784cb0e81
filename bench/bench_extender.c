/* The scheduler extender's latency and throughput (issue "scheduler-
 * extender": filter + prioritize p99 <= 1 ms at 5,000 nodes with
 * nodeCacheCapable). In process, one cycle = what the HTTP handler does for
 * kube-scheduler's two calls: NodeNames bodies through the fast path
 * (scan the body, filter resp. prioritize, write the reply text), Nodes
 * bodies through jansson (parse, decode, handler, encode, dump). Then the same over HTTP on loopback (the server
 * on its own loop thread, a libcurl client with keep-alive) for requests/s.
 * Prints figures; never fails on speed. */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ext_int.h" /* the metrics' per-request calls */
#include "extender_srv.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* The varying cycles: NVARY pods, each against the names in another order,
 * so that no cycle's filter meets the text or the pod of the one before. */
#define NVARY 16

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void set_new(struct ext_core *x, const char *kind, json_t *obj) {
    if (!obj || ext_core_set(x, kind, obj)) {
        fprintf(stderr, "bench_extender: cannot set a %s\n", kind);
        exit(1);
    }
    json_decref(obj);
}

static json_t *pod_obj(const char *name, const char *pool, int64_t milli, const char *node) {
    char cpu[32];
    snprintf(cpu, sizeof cpu, "%" PRId64 "m", milli);
    json_t *p = json_pack("{s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:{s:{s:s, s:s}}}]}, s:{s:s}}", "metadata",
                          "name", name, "namespace", "default", "uid", name, "labels", "peloton.io/resource-pool", pool,
                          "spec", "schedulerName", "default-scheduler", "containers", "name", "c", "resources",
                          "requests", "cpu", cpu, "memory", "1Gi", "status", "phase", node ? "Running" : "Pending");
    if (node) json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
    return p;
}

/* n nodes of 32 cores / 128 GiB in 10 zones. */
static json_t *make_nodes(uint32_t n) {
    json_t *items = json_array();
    char name[64], zone[16];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "node-%05u", i);
        snprintf(zone, sizeof zone, "z%u", i % 10);
        json_array_append_new(items, json_pack("{s:{s:s, s:{s:s, s:s}}, s:{}, s:{s:{s:s, s:s, s:s}, s:[{s:s, s:s}]}}",
                                               "metadata", "name", name, "labels", "topology.kubernetes.io/zone", zone,
                                               "kubernetes.io/hostname", name, "spec", "status", "allocatable", "cpu",
                                               "32", "memory", "128Gi", "pods", "110", "conditions", "type", "Ready",
                                               "status", "True"));
    }
    return items;
}

/* The nodes, two pools, 4 running pods per node (about 30% used) and the
 * pending pod the requests are about. */
static void feed(struct ext_core *x, json_t *items) {
    uint32_t n = (uint32_t)json_array_size(items);
    for (uint32_t i = 0; i < n; i++)
        if (ext_core_set(x, "Node", json_array_get(items, i))) exit(1);
    set_new(x, "ResourcePool", json_pack("{s:{s:s}, s:{s:[{s:s, s:s, s:s}]}}", "metadata", "name", "batch", "spec",
                                         "resources", "kind", "cpu", "reservation", "1000", "limit", "200000"));
    set_new(x, "ResourcePool", json_pack("{s:{s:s}, s:{s:[{s:s, s:s, s:s}]}}", "metadata", "name", "services",
                                         "spec", "resources", "kind", "cpu", "reservation", "1000", "limit", "200000"));
    for (uint32_t i = 0; i < 4 * n; i++) {
        char name[64], node[64];
        snprintf(name, sizeof name, "run-%06u", i);
        snprintf(node, sizeof node, "node-%05u", (uint32_t)(bench_rand(&rng) % n));
        set_new(x, "Pod", pod_obj(name, i % 2 ? "batch" : "services", 500 + (int64_t)(bench_rand(&rng) % 4000), node));
    }
    set_new(x, "Pod", pod_obj("pending", "batch", 2000, NULL));
    for (int i = 0; i < NVARY; i++) { /* the pods of the varying cycles */
        char name[32];
        snprintf(name, sizeof name, "pending-%d", i);
        set_new(x, "Pod", pod_obj(name, i % 2 ? "batch" : "services", 1000 + 250 * i, NULL));
    }
    if (ext_core_refresh(x)) exit(1);
}

static struct ext_core *build(uint32_t n, json_t **nodes_out) {
    struct ext_core *x = ext_core_new(NULL);
    *nodes_out = make_nodes(n);
    feed(x, *nodes_out);
    return x;
}

/* A request body for the pending pod (vary >= 0: pod pending-<vary>, and
 * the names rotated by vary / NVARY of the list, as kube-scheduler starts
 * each cycle's node list where the last one stopped). */
static char *body_for(json_t *items, bool node_cache, int vary) {
    char pname[32] = "pending";
    if (vary >= 0) snprintf(pname, sizeof pname, "pending-%d", vary);
    json_t *pod = vary >= 0 ? pod_obj(pname, vary % 2 ? "batch" : "services", 1000 + 250 * vary, NULL)
                            : pod_obj(pname, "batch", 2000, NULL),
           *body;
    if (node_cache) {
        json_t *names = json_array();
        size_t n = json_array_size(items), off = vary > 0 ? n * (size_t)vary / NVARY : 0;
        for (size_t i = 0; i < n; i++)
            json_array_append_new(names, json_string(json_string_value(json_object_get(
                                             json_object_get(json_array_get(items, (i + off) % n), "metadata"), "name"))));
        body = json_pack("{s:o, s:n, s:o}", "Pod", pod, "Nodes", "NodeNames", names);
    } else {
        body = json_pack("{s:o, s:{s:O}, s:n}", "Pod", pod, "Nodes", "items", items, "NodeNames");
    }
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return s;
}

/* The prioritize body kube-scheduler sends after the filter of body: the
 * same Pod, and the names that passed (in NodeNames mode; in Nodes mode the
 * body itself). Made once, before the timed loop (the model does not change
 * in it). */
static char *prio_body_for(struct ext_core *x, const char *body, bool node_cache) {
    if (!node_cache) return strdup(body);
    json_t *b = json_loads(body, 0, NULL), *out = NULL;
    struct extender_args *a = NULL;
    char err[256];
    if (!b || extender_decode_args(b, &a, err, sizeof err) || ext_filter(x, a, 0, &out)) exit(1);
    json_object_set(b, "NodeNames", json_object_get(out, "NodeNames"));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(out);
    extender_args_free(a);
    json_decref(b);
    return s;
}

/* What the HTTP handler keeps across requests: the fast path's scan and
 * reply buffers. */
struct cycle {
    struct ext_core *x;
    struct extender_scan scan;
    struct extender_buf reply;
};

/* One call through the jansson path (Nodes mode, or anything the scan leaves
 * to it); returns the reply's length. */
static size_t slow_call(struct ext_core *x, const char *body, size_t len, bool prioritize, uint64_t now) {
    json_error_t jerr;
    json_t *b = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr), *out = NULL;
    struct extender_args *a = NULL;
    char err[256];
    if (!b || extender_decode_args(b, &a, err, sizeof err)) exit(1);
    int rc = prioritize ? ext_prioritize(x, a, &out, err, sizeof err) : ext_filter(x, a, now, &out);
    if (rc) exit(1);
    char *s = json_dumps(out, JSON_COMPACT);
    size_t n = strlen(s);
    free(s);
    json_decref(out);
    extender_args_free(a);
    json_decref(b);
    return n;
}

/* One call as the HTTP handler makes it (ext_http.c serve_fast, else the
 * jansson path); the reply text is handed over and freed, as the HTTP layer
 * frees it. Returns the reply's length. */
static size_t one_call(struct cycle *c, const char *body, size_t len, bool prioritize, uint64_t now) {
    struct extender_names_hint hint;
    bool hinted = ext_core_names_hint(c->x, &hint);
    if (extender_scan_args_hinted(body, len, hinted ? &hint : NULL, &c->scan))
        return slow_call(c->x, body, len, prioritize, now);
    char err[256];
    int rc = prioritize ? ext_prioritize_scan(c->x, &c->scan, &c->reply, err, sizeof err)
                        : ext_filter_scan(c->x, &c->scan, now, &c->reply);
    if (rc) exit(1);
    size_t n = c->reply.len;
    extender_scan_reset(&c->scan);
    free(c->reply.data); /* handed to the HTTP layer, which frees it after sending */
    c->reply = (struct extender_buf){0};
    return n;
}

/* Where a cycle's time goes (means over iters), on the fast path: scan the
 * body (with the core's hint, as the HTTP handler does), then the handler
 * with its text encoder, for filter (body) and for the prioritize that
 * follows it (prio: the names that passed). Then, in a loop of its own (its
 * allocations would cool the caches for the other), the jansson path's
 * stages on the filter's body, for comparison. */
static void stages(struct cycle *c, const char *body, size_t len, const char *prio, size_t plen, uint32_t n,
                   int iters) {
    double t[9] = {0};
    for (int i = 0; i < iters; i++) {
        for (int v = 0; v < 2; v++) { /* as one_call */
            struct extender_names_hint hint;
            bool hinted = ext_core_names_hint(c->x, &hint);
            uint64_t a = bench_now_ns();
            if (extender_scan_args_hinted(v ? prio : body, v ? plen : len, hinted ? &hint : NULL, &c->scan)) exit(1);
            uint64_t b1 = bench_now_ns();
            char err[256];
            if (v ? ext_prioritize_scan(c->x, &c->scan, &c->reply, err, sizeof err) : ext_filter_scan(c->x, &c->scan, 0, &c->reply))
                exit(1);
            uint64_t d = bench_now_ns();
            extender_scan_reset(&c->scan);
            extender_buf_free(&c->reply); /* the HTTP layer's free */
            t[2 * v] += (double)(b1 - a);
            t[2 * v + 1] += (double)(d - b1);
        }
    }
    for (int i = 0; i < iters; i++) {
        for (int v = 0; v < 2; v++) {
            uint64_t a = bench_now_ns();
            json_error_t jerr;
            json_t *b = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr), *out = NULL;
            uint64_t b1 = bench_now_ns();
            struct extender_args *ar = NULL;
            char err[256];
            if (!b || extender_decode_args(b, &ar, err, sizeof err)) exit(1);
            uint64_t cc = bench_now_ns();
            if (v ? ext_prioritize(c->x, ar, &out, err, sizeof err) : ext_filter(c->x, ar, 0, &out)) exit(1);
            uint64_t d = bench_now_ns();
            char *txt = json_dumps(out, JSON_COMPACT);
            uint64_t e = bench_now_ns();
            free(txt);
            json_decref(out);
            extender_args_free(ar);
            json_decref(b);
            t[4] += (double)(b1 - a) / 2;
            t[5] += (double)(cc - b1) / 2;
            t[6 + v] += (double)(d - cc);
            t[8] += (double)(e - d) / 2;
        }
    }
    static const char *const what[] = {"filter: scan body", "filter: handler+text", "prioritize: scan body",
                                       "prioritize: handler+text", "jansson path: parse body",
                                       "jansson path: decode args", "jansson path: filter+encode",
                                       "jansson path: prioritize+encode", "jansson path: dump reply"};
    char name[96];
    for (int k = 0; k < 9; k++) {
        snprintf(name, sizeof name, "extender %u nodes: %s", n, what[k]);
        bench_report(name, t[k] / iters / 1e3, "us/call", NULL);
    }
}

/* vary: each cycle another pod and another order of the names (NVARY
 * bodies in turn); else every call sends the same body. */
static void in_process(uint32_t n, bool node_cache, int iters, bool vary) {
    json_t *items;
    struct cycle c = {0};
    c.x = build(n, &items);
    char *body[NVARY], *prio[NVARY];
    size_t len[NVARY], plen[NVARY];
    int nb = vary ? NVARY : 1;
    for (int k = 0; k < nb; k++) {
        body[k] = body_for(items, node_cache, vary ? k : -1);
        len[k] = strlen(body[k]);
        prio[k] = prio_body_for(c.x, body[k], node_cache);
        plen[k] = strlen(prio[k]);
    }
    uint64_t *lat = malloc((size_t)iters * sizeof *lat), *lf = malloc((size_t)iters * sizeof *lf);
    for (int i = 0; i < 20; i++) { /* warm */
        one_call(&c, body[i % nb], len[i % nb], false, 0);
        one_call(&c, prio[i % nb], plen[i % nb], true, 0);
    }
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < iters; i++) {
        int k = i % nb;
        uint64_t a = bench_now_ns();
        one_call(&c, body[k], len[k], false, 0);
        uint64_t b = bench_now_ns();
        one_call(&c, prio[k], plen[k], true, 0);
        lat[i] = bench_now_ns() - a;
        lf[i] = b - a;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    qsort(lat, (size_t)iters, sizeof *lat, cmp_u64);
    qsort(lf, (size_t)iters, sizeof *lf, cmp_u64);
    char name[96];
    const char *mode = node_cache ? (vary ? "NodeNames varying" : "NodeNames") : "Nodes";
    snprintf(name, sizeof name, "extender %u nodes %s filter+prio p50", n, mode);
    bench_report(name, (double)lat[iters / 2] / 1e3, "us", NULL);
    snprintf(name, sizeof name, "extender %u nodes %s filter+prio p99", n, mode);
    bench_report(name, (double)lat[iters * 99 / 100] / 1e3, "us", node_cache ? "<= 1000" : NULL);
    snprintf(name, sizeof name, "extender %u nodes %s filter p99", n, mode);
    bench_report(name, (double)lf[iters * 99 / 100] / 1e3, "us", NULL);
    snprintf(name, sizeof name, "extender %u nodes %s cycles/s (1 core)", n, mode);
    bench_report(name, iters / secs, "cycles/s", NULL);
    if (node_cache && !vary) stages(&c, body[0], len[0], prio[0], plen[0], n, iters / 4 ? iters / 4 : 1);
    free(lat);
    free(lf);
    for (int k = 0; k < nb; k++) {
        free(body[k]);
        free(prio[k]);
    }
    json_decref(items);
    extender_scan_free(&c.scan);
    extender_buf_free(&c.reply);
    ext_core_free(c.x);
}

/* ---- over HTTP ---- */

struct srv_thread {
    uv_loop_t loop;
    uv_async_t stop;
    struct extender_srv *srv;
};

static void on_stop(uv_async_t *h) {
    struct srv_thread *t = h->data;
    extender_srv_stop(t->srv);
    uv_close((uv_handle_t *)h, NULL);
}

static void *run_loop(void *arg) {
    struct srv_thread *t = arg;
    uv_run(&t->loop, UV_RUN_DEFAULT);
    return NULL;
}

static size_t sink(char *p, size_t s, size_t n, void *ud) {
    *(size_t *)ud += s * n;
    return s * n;
}

static void over_http(uint32_t n, int iters, bool vary) {
    json_t *items = make_nodes(n);
    struct srv_thread t;
    uv_loop_init(&t.loop);
    struct ext_srv_options o;
    ext_srv_options_default(&o);
    o.port = 0;
    char err[256];
    if (extender_srv_start(&t.loop, NULL, &o, &t.srv, err, sizeof err)) {
        fprintf(stderr, "bench_extender: %s\n", err);
        exit(1);
    }
    feed(extender_srv_core(t.srv), items); /* before the loop thread starts */
    char *body[NVARY][2];
    int nb = vary ? NVARY : 1;
    for (int k = 0; k < nb; k++) { /* the same: the core is the loop thread's once it runs */
        body[k][0] = body_for(items, true, vary ? k : -1);
        body[k][1] = prio_body_for(extender_srv_core(t.srv), body[k][0], true);
    }
    extender_srv_set_synced(t.srv);
    uv_async_init(&t.loop, &t.stop, on_stop);
    t.stop.data = &t;
    pthread_t th;
    pthread_create(&th, NULL, run_loop, &t);

    char url[2][128];
    snprintf(url[0], sizeof url[0], "http://127.0.0.1:%d/peloton/filter", extender_srv_port(t.srv));
    snprintf(url[1], sizeof url[1], "http://127.0.0.1:%d/peloton/prioritize", extender_srv_port(t.srv));
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    size_t got = 0;
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    uint64_t *lat = malloc((size_t)iters * sizeof *lat);
    int bad = 0;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < iters; i++) {
        uint64_t a = bench_now_ns();
        for (int v = 0; v < 2; v++) {
            long code = 0;
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body[i % nb][v]);
            curl_easy_setopt(c, CURLOPT_URL, url[v]);
            if (curl_easy_perform(c) != CURLE_OK ||
                (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code), code != 200))
                bad++;
        }
        lat[i] = bench_now_ns() - a;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    qsort(lat, (size_t)iters, sizeof *lat, cmp_u64);
    char name[96];
    const char *mode = vary ? "NodeNames varying" : "NodeNames";
    snprintf(name, sizeof name, "extender HTTP %u nodes %s cycle p50", n, mode);
    bench_report(name, (double)lat[iters / 2] / 1e3, "us", NULL);
    snprintf(name, sizeof name, "extender HTTP %u nodes %s cycle p99", n, mode);
    bench_report(name, (double)lat[iters * 99 / 100] / 1e3, "us", NULL);
    snprintf(name, sizeof name, "extender HTTP %u nodes %s req/s (1 client)", n, mode);
    bench_report(name, 2.0 * iters / secs, "req/s", NULL);
    if (bad) fprintf(stderr, "bench_extender: %d requests failed\n", bad);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    uv_async_send(&t.stop);
    pthread_join(th, NULL);
    uv_run(&t.loop, UV_RUN_DEFAULT);
    extender_srv_free(t.srv);
    uv_run(&t.loop, UV_RUN_DEFAULT);
    uv_loop_close(&t.loop);
    free(lat);
    for (int k = 0; k < nb; k++) {
        free(body[k][0]);
        free(body[k][1]);
    }
    json_decref(items);
}

/* What /metrics adds to each request on the loop thread: two clock reads
 * (uv_hrtime, as ext_http.c takes them), a latency histogram observation and,
 * for filter, the decision counter of the pod's pool (one hash lookup among
 * npools pools). */
static void metrics_cost(int npools) {
    struct ext_core *x = ext_core_new(NULL);
    if (!x) exit(1);
    char names[64][32];
    for (int i = 0; i < npools && i < 64; i++) snprintf(names[i], sizeof names[i], "team-%d", i);
    const int iters = 2000000;
    uint64_t sink = 0, t0 = bench_now_ns();
    for (int i = 0; i < iters; i++) {
        uint64_t a = uv_hrtime();
        ext_metrics_decision(x, names[i % npools], (enum ext_decision)(i % 3 == 0));
        uint64_t b = uv_hrtime();
        ext_metrics_latency(x, i & 3, b - a + 30000);
        sink += b;
    }
    double ns = (double)(bench_now_ns() - t0) / iters;
    char label[64];
    snprintf(label, sizeof label, "metrics per request (%d pools)", npools);
    bench_report(label, ns, "ns", sink ? NULL : "");
    ext_core_free(x);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (getenv("BENCH_QUICK")) { /* a smoke run (valgrind, sanitizers) */
        in_process(200, true, 20, false);
        in_process(200, true, 20, true);
        in_process(200, false, 5, false);
        over_http(200, 20, false);
        over_http(200, 20, true);
        curl_global_cleanup();
        return 0;
    }
    /* BENCH_EXTENDER_ONLY=names|nodes|http|metrics runs one part (profiling);
     * BENCH_EXTENDER_REPEAT=N runs N times the iterations. NodeNames runs
     * twice: every call the same body, then varying (another pod and order
     * of the names each cycle, so that only prioritize can reuse anything). */
    const char *only = getenv("BENCH_EXTENDER_ONLY"), *rep = getenv("BENCH_EXTENDER_REPEAT");
    if (!only || !strcmp(only, "metrics")) {
        metrics_cost(4);
        metrics_cost(64);
    }
    int r = rep && atoi(rep) > 0 ? atoi(rep) : 1;
    if (!only || !strcmp(only, "names")) {
        in_process(1000, true, 2000 * r, false);
        in_process(5000, true, 500 * r, false);
        in_process(1000, true, 2000 * r, true);
        in_process(5000, true, 500 * r, true);
    }
    if (!only || !strcmp(only, "nodes")) {
        in_process(1000, false, 200 * r, false);
        in_process(5000, false, 50 * r, false);
    }
    if (!only || !strcmp(only, "http")) {
        over_http(1000, 1000 * r, false);
        over_http(5000, 300 * r, false);
        over_http(1000, 1000 * r, true);
        over_http(5000, 300 * r, true);
    }
    curl_global_cleanup();
    return 0;
}
