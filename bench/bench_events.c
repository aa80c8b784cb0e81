/* The API server's cost of a pod's Scheduled Event, alone: pelotond
 * --roles=apiserver on its own redis-server, no controllers, no kubelets, so
 * its CPU is the API server's. Each round creates BENCH_EVENTS_PODS pods
 * (default 5,000; not measured), then binds them all (64 requests in flight,
 * kclient, as the placement engine does) in one of three ways, and reads
 * pelotond's and redis-server's CPU from /proc around the binds (and 300 ms
 * after them, for the writes that follow the answers; every thread's
 * schedstat, to the nanosecond):
 *
 *   bind     the Binding alone (pelotond --events=false);
 *   posted   the Binding, then the Event POSTed on its answer (as the
 *            placement engine did before: one more request and create a pod);
 *   made     the Binding with ?scheduledEvent=peloton-placement: the API
 *            server makes the Event itself and stores it in the binding's
 *            script call (docs/store.md, "Attached creates").
 *
 * BENCH_EVENTS_ROUNDS rounds (default 3), the order of the three turning
 * each round; prints each round and the medians, and the commands Redis ran
 * per binding (INFO commandstats: the scripts and every call inside them;
 * exact, unlike the CPU figures on a shared machine; BENCH_EVENTS_REDIS_STATS=1
 * prints each command's calls and time per binding too). The client's own CPU is not
 * counted: what posting an Event costs the placement engine is in bench_e2e's
 * pairs. Figures only; no timing asserts. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "bench.h"
#include "bench_proc.h"
#include "kclient.h"
#include "redis_proc.h"

enum mode { M_BIND, M_POSTED, M_MADE, NMODES };
static const char *const mode_name[NMODES] = {"bind", "posted", "made"};

#define INFLIGHT 64

struct run {
    uv_loop_t *loop;
    struct kclient *kc;
    enum mode mode;
    const char *prefix;
    int total, next, inflight, done, errs, named; /* named: bind answers that name an Event */
};

static void start_more(struct run *r);

static void on_event_posted(void *ud, const struct kc_response *res) {
    struct run *r = ud;
    if (res->status != 201) r->errs++;
    r->inflight--;
    r->done++;
    start_more(r);
}

static void on_bound(void *ud, const struct kc_response *res) {
    struct run *r = ud;
    if (res->status != 201) r->errs++;
    if (res->raw && strstr(res->raw, "\"kind\":\"events\"")) r->named++;
    r->inflight--;
    r->done++;
    start_more(r);
}

/* The i-th pod's name into out. */
static void pod_name(const struct run *r, int i, char *out, size_t len) { snprintf(out, len, "%s-%d", r->prefix, i); }

struct post_ctx {
    struct run *r;
    char name[64];
};

static void on_bound_then_post(void *ud, const struct kc_response *res) {
    struct post_ctx *x = ud;
    struct run *r = x->r;
    if (res->status != 201) {
        r->errs++;
        r->inflight--;
        r->done++;
        free(x);
        start_more(r);
        return;
    }
    char body[1024], ts[32];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(body, sizeof body,
                     "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"%s.%lx%09lx\",\"namespace\":"
                     "\"default\"},\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"%s\","
                     "\"namespace\":\"default\",\"uid\":\"\"},\"reason\":\"Scheduled\",\"message\":\"Successfully "
                     "assigned default/%s to n1\",\"type\":\"Normal\",\"source\":{\"component\":\"peloton-placement\"},"
                     "\"firstTimestamp\":\"%s\",\"lastTimestamp\":\"%s\",\"count\":1}",
                     x->name, (unsigned long)now.tv_sec, (unsigned long)now.tv_nsec, x->name, x->name, ts, ts);
    free(x);
    if (kclient_request_text(r->kc, "POST", "/api/v1/namespaces/default/events", body, (size_t)n, NULL,
                             on_event_posted, r)) {
        r->errs++;
        r->inflight--;
        r->done++;
        start_more(r);
    }
}

static void start_more(struct run *r) {
    while (r->inflight < INFLIGHT && r->next < r->total) {
        char name[64], path[256], body[256];
        pod_name(r, r->next++, name, sizeof name);
        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s/binding%s", name,
                 r->mode == M_MADE ? "?scheduledEvent=peloton-placement" : "");
        int n = snprintf(body, sizeof body,
                         "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"%s\"},"
                         "\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\"}}", name);
        struct post_ctx *x = NULL;
        if (r->mode == M_POSTED && (x = calloc(1, sizeof *x))) {
            x->r = r;
            snprintf(x->name, sizeof x->name, "%s", name);
        }
        r->inflight++;
        int rc = x ? kclient_request_text(r->kc, "POST", path, body, (size_t)n, NULL, on_bound_then_post, x)
                   : kclient_request_text(r->kc, "POST", path, body, (size_t)n, NULL, on_bound, r);
        if (rc) {
            free(x);
            r->inflight--;
            r->errs++;
            r->done++;
        }
    }
}

static void on_created(void *ud, const struct kc_response *res) {
    struct run *r = ud;
    if (res->status != 201) r->errs++;
    r->inflight--;
    r->done++;
    while (r->inflight < INFLIGHT && r->next < r->total) {
        char name[64], body[384];
        pod_name(r, r->next++, name, sizeof name);
        int n = snprintf(body, sizeof body,
                         "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},\"spec\":{"
                         "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}", name);
        r->inflight++;
        if (kclient_request_text(r->kc, "POST", "/api/v1/namespaces/default/pods", body, (size_t)n, NULL, on_created,
                                 r)) {
            r->inflight--;
            r->errs++;
            r->done++;
        }
    }
}

/* Runs the loop until the run's requests are all answered (at most 120 s). */
static bool wait_done(struct run *r) {
    uint64_t t0 = bench_now_ns();
    while (r->done < r->total && bench_now_ns() - t0 < 120000000000ull) uv_run(r->loop, UV_RUN_ONCE);
    return r->done == r->total;
}

static void settle(void) { usleep(300000); }

/* The first figure of /proc/loadavg (the machine is shared: print it beside the figures). */
static const char *loadavg(char *buf, size_t len) {
    FILE *f = fopen("/proc/loadavg", "r");
    snprintf(buf, len, "?");
    if (f) {
        if (fscanf(f, "%15s", buf) != 1) snprintf(buf, len, "?");
        fclose(f);
    }
    return buf;
}

/* Commands Redis has run (INFO commandstats, scripts' calls included; the
 * INFO calls themselves left out), or -1. */
static long long redis_calls(const char *sock) {
    redisContext *c = redisConnectUnix(sock);
    redisReply *rep = c && !c->err ? redisCommand(c, "INFO commandstats") : NULL;
    long long total = -1;
    if (rep && rep->type == REDIS_REPLY_STRING) {
        total = 0;
        for (char *line = strtok(rep->str, "\r\n"); line; line = strtok(NULL, "\r\n")) {
            char name[64];
            long long calls = 0;
            if (sscanf(line, "cmdstat_%63[^:]:calls=%lld", name, &calls) == 2 && strcmp(name, "info")) total += calls;
        }
    }
    if (rep) freeReplyObject(rep);
    if (c) redisFree(c);
    return total;
}

/* BENCH_EVENTS_REDIS_STATS: each command's calls and time per binding since
 * the last CONFIG RESETSTAT (which it then sends, for the next mode). */
static void redis_stats(const char *sock, const char *mode, int pods) {
    redisContext *c = redisConnectUnix(sock);
    redisReply *rep = c && !c->err ? redisCommand(c, "INFO commandstats") : NULL;
    if (rep && rep->type == REDIS_REPLY_STRING && mode) {
        printf("bench events: %s: redis command calls/binding usec/call usec/binding\n", mode);
        for (char *line = strtok(rep->str, "\r\n"); line; line = strtok(NULL, "\r\n")) {
            char name[64];
            long long calls = 0;
            double usec = 0, per = 0;
            if (sscanf(line, "cmdstat_%63[^:]:calls=%lld,usec=%lf,usec_per_call=%lf", name, &calls, &usec, &per) == 4 &&
                strcmp(name, "info") && strcmp(name, "config"))
                printf("  %-14s %8.2f %8.2f %8.2f\n", name, (double)calls / pods, per, usec / pods);
        }
    }
    if (rep) freeReplyObject(rep);
    if (c && !c->err) freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));
    if (c) redisFree(c);
}

/* One round of one mode: pelotond's and redis's CPU per binding, µs, and
 * Redis's commands per binding. */
static int one(uv_loop_t *loop, struct kclient *kc, pid_t pd, pid_t rd, const char *sock, enum mode mode, int round,
               int pods, double *api_us, double *redis_us, double *cmds) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s-%d", mode_name[mode], round);
    struct run r = {.loop = loop, .kc = kc, .mode = mode, .prefix = prefix, .total = pods};
    r.inflight = 1; /* on_created starts the first INFLIGHT with a fake answer */
    on_created(&r, &(struct kc_response){.status = 201});
    r.done = 0;
    if (!wait_done(&r) || r.errs) {
        printf("bench events: %s round %d: pods not created (%d errors)\n", mode_name[mode], round, r.errs);
        return -1;
    }
    settle();
    r = (struct run){.loop = loop, .kc = kc, .mode = mode, .prefix = prefix, .total = pods};
    bool stats = getenv("BENCH_EVENTS_REDIS_STATS") != NULL;
    if (stats) redis_stats(sock, NULL, pods);
    long long c0 = redis_calls(sock);
    double a0 = bench_cpu_sched_us(pd), q0 = bench_cpu_sched_us(rd);
    start_more(&r);
    bool ok = wait_done(&r);
    settle(); /* the Events made after the answers are stored by now */
    *api_us = (bench_cpu_sched_us(pd) - a0) / pods;
    *redis_us = (bench_cpu_sched_us(rd) - q0) / pods;
    *cmds = (double)(redis_calls(sock) - c0) / pods;
    if (stats) redis_stats(sock, mode_name[mode], pods);
    if (!ok || r.errs || (mode == M_MADE && r.named != pods) || (mode != M_MADE && r.named)) {
        printf("bench events: %s round %d: %d errors, %d answers naming an Event\n", mode_name[mode], round, r.errs,
               r.named);
        return -1;
    }
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *e = getenv("BENCH_EVENTS_PODS"), *er = getenv("BENCH_EVENTS_ROUNDS");
    int pods = e && atoi(e) > 0 ? atoi(e) : 5000, rounds = er && atoi(er) > 0 ? atoi(er) : 3;
    if (rounds > 20) rounds = 20;
    struct redis_proc rp = {0};
    if (redis_proc_start(&rp, "everysec")) {
        fprintf(stderr, "bench_events: cannot start redis-server\n");
        return 1;
    }
    char dir[] = "/tmp/bench-events-XXXXXX", raddr[160], url[64], err[256];
    snprintf(raddr, sizeof raddr, "unix://%s", rp.unix_path);
    pid_t pd = 0;
    int port = mkdtemp(dir) ? bench_start_pelotond(dir, raddr, "--roles=apiserver", &pd) : 0;
    int rc = 1;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct kc_config cfg;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    struct kclient *kc = port && !kc_config_from_url(url, NULL, &cfg, err, sizeof err)
                             ? kclient_new(&loop, &cfg, err, sizeof err)
                             : NULL;
    if (port) kc_config_free(&cfg);
    if (kc) {
        double api[NMODES][20], red[NMODES][20];
        int n = 0;
        for (int round = 0; round < rounds; round++) {
            double a[NMODES], q[NMODES], c[NMODES];
            bool ok = true;
            for (int k = 0; k < NMODES && ok; k++) {
                enum mode m = (enum mode)((round + k) % NMODES);
                ok = !one(&loop, kc, pd, rp.pid, rp.unix_path, m, round, pods, &a[m], &q[m], &c[m]);
            }
            if (!ok) continue;
            char la[16];
            printf("bench events: round %d (load %s): pelotond CPU per binding: bind %.1f us, posted %.1f us, made "
                   "%.1f us; redis: %.1f, %.1f, %.1f us; redis commands: %.2f, %.2f, %.2f\n", round + 1,
                   loadavg(la, sizeof la), a[M_BIND], a[M_POSTED], a[M_MADE], q[M_BIND], q[M_POSTED], q[M_MADE],
                   c[M_BIND], c[M_POSTED], c[M_MADE]);
            for (int m = 0; m < NMODES; m++) api[m][n] = a[m], red[m][n] = q[m];
            n++;
        }
        for (int m = 0; m < NMODES && n; m++) {
            char name[128], target[96];
            bench_sort(api[m], n);
            bench_sort(red[m], n);
            snprintf(name, sizeof name, "events: pelotond API CPU per binding, %s", mode_name[m]);
            snprintf(target, sizeof target, "[%.1f-%.1f over %d rounds]", api[m][0], api[m][n - 1], n);
            bench_report(name, api[m][n / 2], "us", target);
            snprintf(name, sizeof name, "events: redis-server CPU per binding, %s", mode_name[m]);
            snprintf(target, sizeof target, "[%.1f-%.1f over %d rounds]", red[m][0], red[m][n - 1], n);
            bench_report(name, red[m][n / 2], "us", target);
        }
        rc = n ? 0 : 1;
        kclient_free(kc);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    uv_loop_close(&loop);
    bench_stop(pd);
    redis_proc_destroy(&rp);
    return rc;
}
