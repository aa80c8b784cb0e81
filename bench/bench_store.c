/* Object store against a private redis-server (AOF, appendfsync always unless
 * noted), over one synchronous hiredis connection on loopback:
 *   create sync: one create (one EVALSHA round trip) at a time, for <= 3 s
 *   create pipelined: store_create_many in batches of 500
 *   get sync, update sync (get, then store_update's read + compare-and-set), <= 2 s
 *   list of 10,000 objects: one script call (parsed, and raw bytes), and in
 *   pages of 500 (kubectl's limit)
 *   history read of 10,000 events: one call, and in reads of 1,000
 *   create sync with appendfsync everysec, for comparison */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "redis_proc.h"
#include "store.h"

#define N_SYNC 3000
#define N_BATCH 10000
#define BATCH 500

static void die(const char *what, struct store *s, int rc) {
    fprintf(stderr, "bench_store: %s: %d %s\n", what, rc, s ? store_errmsg(s) : "");
    exit(1);
}

/* A pod of about 1 KB. */
static json_t *make_pod(const char *name) {
    return json_pack(
        "{s:s,s:s,s:{s:s,s:{s:s,s:s},s:{s:s}},s:{s:[{s:s,s:s,s:[s,s,s],s:{s:{s:s,s:s},s:{s:s,s:s}},"
        "s:[{s:s,s:s}]}],s:s,s:s,s:i}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "labels", "app", "web",
        "peloton.io/job", "job-0123456789", "annotations", "peloton.io/pool",
        "/org/team/batch-pool-with-a-long-name", "spec", "containers", "name", "main", "image",
        "registry.example.com/team/service:1.2.3-abcdef0123456789", "command", "/bin/server",
        "--port=8080", "--config=/etc/service/config.yaml", "resources", "requests", "cpu", "500m",
        "memory", "1Gi", "limits", "cpu", "1", "memory", "2Gi", "env", "name", "ENVIRONMENT",
        "value", "production-us-east-1-cluster-7", "restartPolicy", "Always", "schedulerName",
        "peloton", "terminationGracePeriodSeconds", 30);
}

static double per_sec(size_t n, uint64_t ns) { return (double)n * 1e9 / (double)ns; }
static double ms(uint64_t ns) { return (double)ns / 1e6; }

/* Creates up to n pods one at a time, for at most 3 s (fsync latency varies
 * tenfold with the disk's load); returns how many it created. */
static size_t create_sync(struct store *s, const char *ns, size_t n, const char *figure) {
    char name[64];
    uint64_t t0 = bench_now_ns(), deadline = t0 + 3000000000ull;
    size_t i = 0;
    for (; i < n && bench_now_ns() < deadline; i++) {
        snprintf(name, sizeof name, "pod-%06zu", i);
        json_t *p = make_pod(name);
        int rc = store_create(s, "pods", ns, p, NULL);
        json_decref(p);
        if (rc) die("create", s, rc);
    }
    bench_report(figure, per_sec(i, bench_now_ns() - t0), "creates/s", "(sync ~11k round trips/s)");
    return i;
}

int main(void) {
    struct redis_proc rp;
    struct store *s = NULL;
    struct store_options o;
    char name[64];
    int rc = redis_proc_start(&rp, "always");
    if (rc) die("redis_proc_start", NULL, rc);
    store_options_init(&o);
    if ((rc = store_open("127.0.0.1", rp.port, &o, &s))) {
        redis_proc_destroy(&rp);
        die("store_open", NULL, rc);
    }

    size_t nsync = create_sync(s, "sync", N_SYNC, "store create sync (fsync always)");

    /* pipelined creates into another resource: 10,000 objects for list and history */
    json_t **objs = calloc(BATCH, sizeof *objs);
    int *rcs = calloc(BATCH, sizeof *rcs);
    uint64_t t0 = bench_now_ns();
    for (size_t b = 0; b < N_BATCH / BATCH; b++) {
        for (size_t i = 0; i < BATCH; i++) {
            snprintf(name, sizeof name, "cm-%06zu", b * BATCH + i);
            objs[i] = make_pod(name);
        }
        if ((rc = store_create_many(s, "configmaps", "batch", objs, BATCH, rcs, NULL)))
            die("create_many", s, rc);
        for (size_t i = 0; i < BATCH; i++) {
            if (rcs[i]) die("create_many item", s, rcs[i]);
            json_decref(objs[i]);
        }
    }
    bench_report("store create pipelined x500 (fsync always)", per_sec(N_BATCH, bench_now_ns() - t0),
                 "creates/s", "(batch API)");

    t0 = bench_now_ns();
    for (size_t i = 0; i < nsync; i++) {
        json_t *g = NULL;
        snprintf(name, sizeof name, "pod-%06zu", i);
        if ((rc = store_get(s, "pods", "sync", name, &g))) die("get", s, rc);
        json_decref(g);
    }
    bench_report("store get sync", per_sec(nsync, bench_now_ns() - t0), "gets/s", "");

    t0 = bench_now_ns();
    size_t nupd = 0;
    for (size_t i = 0; i < nsync && bench_now_ns() < t0 + 2000000000ull; i++, nupd++) {
        json_t *g = NULL, *u = NULL;
        snprintf(name, sizeof name, "pod-%06zu", i);
        if ((rc = store_get(s, "pods", "sync", name, &g))) die("get", s, rc);
        json_object_set_new(g, "status", json_pack("{s:s}", "phase", "Running"));
        if ((rc = store_update(s, "pods", "sync", g, &u, NULL))) die("update", s, rc);
        json_decref(g);
        json_decref(u);
    }
    bench_report("store get+update sync (fsync always)", per_sec(nupd, bench_now_ns() - t0),
                 "updates/s", "(get + read + CAS)");

    struct store_list l;
    uint64_t best = UINT64_MAX;
    for (int rep = 0; rep < 3; rep++) {
        t0 = bench_now_ns();
        if ((rc = store_list(s, "configmaps", "batch", 0, NULL, &l))) die("list", s, rc);
        uint64_t dt = bench_now_ns() - t0;
        if (json_array_size(l.items) != N_BATCH) die("list size", s, (int)json_array_size(l.items));
        store_list_free(&l);
        if (dt < best) best = dt;
    }
    bench_report("store list 10,000 objects (one call)", ms(best), "ms", "(best of 3)");
    best = UINT64_MAX;
    for (int rep = 0; rep < 3; rep++) {
        t0 = bench_now_ns();
        if ((rc = store_list_raw(s, "configmaps", "batch", 0, NULL, &l))) die("list raw", s, rc);
        uint64_t dt = bench_now_ns() - t0;
        if (l.n_raw != N_BATCH) die("list raw size", s, (int)l.n_raw);
        store_list_free(&l);
        if (dt < best) best = dt;
    }
    bench_report("store list 10,000 objects (raw, one call)", ms(best), "ms", "(best of 3)");

    t0 = bench_now_ns();
    char *tok = NULL;
    size_t seen = 0;
    for (int pages = 0; pages < 100; pages++) {
        if ((rc = store_list(s, "configmaps", "", 500, tok, &l))) die("list page", s, rc);
        free(tok);
        tok = l.continue_token ? strdup(l.continue_token) : NULL;
        seen += json_array_size(l.items);
        store_list_free(&l);
        if (!tok) break;
    }
    if (seen != N_BATCH) die("paged list size", s, (int)seen);
    bench_report("store list 10,000 objects (pages of 500)", ms(bench_now_ns() - t0), "ms", "");

    struct store_history h;
    best = UINT64_MAX;
    for (int rep = 0; rep < 3; rep++) {
        t0 = bench_now_ns();
        if ((rc = store_history_after(s, "configmaps", "", 0, 10000, &h))) die("history", s, rc);
        uint64_t dt = bench_now_ns() - t0;
        if (h.n != N_BATCH) die("history size", s, (int)h.n);
        store_history_free(&h);
        if (dt < best) best = dt;
    }
    bench_report("store history read 10,000 events (one call)", ms(best), "ms", "(best of 3)");

    t0 = bench_now_ns();
    uint64_t after = 0;
    seen = 0;
    for (int i = 0; i < 100; i++) {
        if ((rc = store_history_after(s, "configmaps", "batch", after, 1000, &h))) die("history", s, rc);
        seen += h.n;
        after = h.next_rv;
        int more = h.more;
        store_history_free(&h);
        if (!more) break;
    }
    if (seen != N_BATCH) die("paged history size", s, (int)seen);
    bench_report("store history read 10,000 events (x1,000)", ms(bench_now_ns() - t0), "ms", "");

    store_close(s);
    redis_proc_destroy(&rp);
    free(objs);
    free(rcs);

    /* the same sync creates with appendfsync everysec (<= 1 s of loss on a crash) */
    if ((rc = redis_proc_start(&rp, "everysec"))) die("redis_proc_start", NULL, rc);
    if ((rc = store_open("127.0.0.1", rp.port, &o, &s))) {
        redis_proc_destroy(&rp);
        die("store_open", NULL, rc);
    }
    create_sync(s, "sync", N_SYNC, "store create sync (fsync everysec)");
    store_close(s);
    redis_proc_destroy(&rp);
    return 0;
}
