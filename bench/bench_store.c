/* Object store against a private redis-server (AOF, appendfsync always unless
 * noted), over one synchronous hiredis connection on loopback:
 *   create sync: one create (one EVALSHA round trip) at a time, for <= 3 s
 *   create pipelined: store_create_many in batches of 500
 *   get sync, update sync (get, then store_update's read + compare-and-set), <= 2 s
 *   list of 10,000 objects: one script call (parsed, and raw bytes), and in
 *   pages of 500 (kubectl's limit)
 *   history read of 10,000 events: one call, and in reads of 1,000
 *   create sync with appendfsync everysec, for comparison
 *   Redis's own CPU per object created in batches of 100 (what the API
 *   server's writes cost the Redis process), for pods of about 170, 630 and
 *   1,650 bytes, with the AOF (everysec) and without: the fixed and the
 *   per-byte parts of a write
 *   Redis's own CPU per lease renewal (store_modify: a read and one
 *   compare-and-set script per write) and its time in the script
 *   (commandstats), history kept by time (the default) and by count alone
 *   (the rule before), twice each in turn (no AOF), and the bytes of Redis
 *   memory each history entry takes (what history kept for T seconds costs:
 *   bytes x writes/s x T) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_proc.h"
#include "hiredis.h"
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

/* A pod of about 250 bytes (the shape of bench_e2e's). */
static json_t *make_small_pod(const char *name) {
    return json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s,s:{s:{s:s,s:s}}}]}}", "apiVersion", "v1", "kind", "Pod",
                     "metadata", "name", name, "spec", "containers", "name", "c", "image", "x", "resources",
                     "requests", "cpu", "100m", "memory", "64Mi");
}

/* make_pod with a 1,000-byte annotation (the size of a Running pod's status). */
static json_t *make_large_pod(const char *name) {
    char note[1001];
    memset(note, 'n', 1000);
    note[1000] = 0;
    json_t *p = make_pod(name);
    json_object_set_new(json_object_get(json_object_get(p, "metadata"), "annotations"), "example.com/note",
                        json_string(note));
    return p;
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

/* Redis's CPU per create, batches of 100 (store_create_many's script): the
 * best of 3 rounds of 20,000, for each pod shape (CPU time is counted in
 * 10 ms ticks: 0.5 us per create). */
static void redis_cpu_per_create(struct store *s, const struct redis_proc *rp, bool aof) {
    static const struct {
        const char *label;
        json_t *(*make)(const char *);
    } shapes[] = {{"small pod", make_small_pod}, {"pod", make_pod}, {"large pod", make_large_pod}};
    enum { N = 20000, B = 100 };
    json_t *objs[B];
    int rcs[B];
    char name[64], ns[32], figure[128], note[64];
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        json_t *one = shapes[k].make("pod-000000");
        char *text = json_dumps(one, JSON_COMPACT);
        size_t bytes = text ? strlen(text) : 0;
        free(text);
        json_decref(one);
        double best = 0;
        for (int round = 0; round < 3; round++) {
            snprintf(ns, sizeof ns, "cpu-%s-%zu-%d", aof ? "aof" : "noaof", k, round);
            double cpu0 = bench_cpu_us(rp->pid, 0);
            for (int b = 0; b < N / B; b++) {
                for (int i = 0; i < B; i++) {
                    snprintf(name, sizeof name, "pod-%06d", b * B + i);
                    objs[i] = shapes[k].make(name);
                }
                int rc = store_create_many(s, "pods", ns, objs, B, rcs, NULL);
                for (int i = 0; i < B; i++) json_decref(objs[i]);
                if (rc) die("create_many", s, rc);
            }
            double us = (bench_cpu_us(rp->pid, 0) - cpu0) / N;
            if (round == 0 || us < best) best = us;
        }
        snprintf(figure, sizeof figure, "redis CPU per create, %s, %s", shapes[k].label, aof ? "AOF" : "no AOF");
        snprintf(note, sizeof note, "(%zu-byte object; best of 3 x %d)", bytes, N);
        bench_report(figure, best, "us", note);
    }
}

/* A lease of about 300 bytes, renewed at renewTime n. */
static json_t *make_lease(const char *name, long n) {
    char t[64];
    snprintf(t, sizeof t, "2026-01-01T00:%02ld:%02ld.%06ldZ", n / 60 % 60, n % 60, n % 1000000);
    return json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:i,s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                     "metadata", "name", name, "spec", "holderIdentity", name, "leaseDurationSeconds", 40,
                     "renewTime", t);
}

static int renew(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    (void)err, (void)errlen;
    json_t *o = json_deep_copy(cur);
    if (!o) return -ENOMEM;
    json_t *fresh = make_lease("x", *(long *)ud);
    json_object_set(json_object_get(o, "spec"), "renewTime", json_object_get(json_object_get(fresh, "spec"), "renewTime"));
    json_decref(fresh);
    *next = o;
    return 0;
}

/* Redis's own time per call of cmd (INFO commandstats, since the last
 * CONFIG RESETSTAT), in us; -1 when it cannot tell. */
static double redis_usec_per_call(redisContext *c, const char *cmd) {
    redisReply *r = redisCommand(c, "INFO commandstats");
    double us = -1;
    char key[64];
    snprintf(key, sizeof key, "cmdstat_%s:", cmd);
    const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
    if (p && (p = strstr(p, key)) && (p = strstr(p, "usec_per_call="))) us = atof(p + strlen("usec_per_call="));
    if (r) freeReplyObject(r);
    return us;
}

/* Redis's CPU per renewal of 100 leases round robin (best of 3 x 5,000)
 * with history_seconds secs and history_max max, Redis's own time in the
 * compare-and-set script (commandstats), and the stream's memory per entry. */
static void redis_cpu_per_renewal(const struct redis_proc *rp, long secs, long max, const char *label) {
    enum { NL = 100, N = 5000 };
    struct store_options o;
    struct store *s = NULL;
    store_options_init(&o);
    o.history_seconds = secs;
    o.history_max = max;
    int rc = store_open("127.0.0.1", rp->port, &o, &s);
    if (rc) die("store_open", NULL, rc);
    char res[64], name[32], figure[128];
    static int calls;
    snprintf(res, sizeof res, "leases-%d.coordination.k8s.io", calls++);
    for (int i = 0; i < NL; i++) {
        snprintf(name, sizeof name, "node-%03d", i);
        json_t *l = make_lease(name, 0);
        if ((rc = store_create(s, res, "kube-node-lease", l, NULL))) die("create lease", s, rc);
        json_decref(l);
    }
    double best = 0;
    long n = 0;
    redisContext *c = redisConnect("127.0.0.1", rp->port);
    if (!c || c->err) die("redisConnect", NULL, -EIO);
    freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));
    for (int round = 0; round < 3; round++) {
        double cpu0 = bench_cpu_us(rp->pid, 0);
        for (int i = 0; i < N; i++, n++) {
            snprintf(name, sizeof name, "node-%03d", i % NL);
            if ((rc = store_modify(s, res, "kube-node-lease", name, renew, &n, NULL, NULL))) die("renew", s, rc);
        }
        double us = (bench_cpu_us(rp->pid, 0) - cpu0) / N;
        if (round == 0 || us < best) best = us;
    }
    snprintf(figure, sizeof figure, "redis CPU per lease renewal, %s", label);
    bench_report(figure, best, "us", "(read + CAS script; best of 3 x 5,000)");
    snprintf(figure, sizeof figure, "redis time in the CAS script, %s", label);
    bench_report(figure, redis_usec_per_call(c, "evalsha"), "us", "(commandstats usec_per_call, 15,000 calls)");
    char key[128];
    snprintf(key, sizeof key, "pc:ev:%s", res);
    redisReply *mem = c && !c->err ? redisCommand(c, "MEMORY USAGE %s SAMPLES 0", key) : NULL;
    redisReply *len = c && !c->err ? redisCommand(c, "XLEN %s", key) : NULL;
    if (mem && len && mem->type == REDIS_REPLY_INTEGER && len->type == REDIS_REPLY_INTEGER && len->integer > 0) {
        snprintf(figure, sizeof figure, "redis memory per history entry, lease, %s", label);
        bench_report(figure, (double)mem->integer / (double)len->integer, "bytes", "(MEMORY USAGE / XLEN)");
    }
    if (mem) freeReplyObject(mem);
    if (len) freeReplyObject(len);
    redisFree(c);
    store_close(s);
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
    redis_cpu_per_create(s, &rp, true);
    redisContext *rc_admin = redisConnect("127.0.0.1", rp.port);
    redisReply *rep = rc_admin && !rc_admin->err ? redisCommand(rc_admin, "CONFIG SET appendonly no") : NULL;
    bool aof_off = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep) freeReplyObject(rep);
    if (rc_admin) redisFree(rc_admin);
    if (aof_off) redis_cpu_per_create(s, &rp, false);
    if (aof_off) {
        redis_cpu_per_renewal(&rp, STORE_DEFAULT_HISTORY_SECONDS, STORE_DEFAULT_HISTORY, "history by time (300 s)");
        redis_cpu_per_renewal(&rp, 0, 10000, "history by count (10,000: the rule before)");
        redis_cpu_per_renewal(&rp, STORE_DEFAULT_HISTORY_SECONDS, STORE_DEFAULT_HISTORY, "history by time (300 s)");
        redis_cpu_per_renewal(&rp, 0, 10000, "history by count (10,000: the rule before)");
    }
    store_close(s);
    redis_proc_destroy(&rp);
    return 0;
}
