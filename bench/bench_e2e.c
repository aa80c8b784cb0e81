/* End to end through the embedded default: pods per second from create to
 * Running, with pelotond (every role) and kubelet-sim at 1,000 and 5,000
 * nodes; and the Redis task-queue operations per second.
 *
 * Starts its own redis-server (redis_proc), bin/pelotond and bin/kubelet-sim
 * on loopback, creates pods through the API (raw HTTP/1.1, 64 in flight) into
 * a pool, and counts them Running through a watch of Running pods. Figures only; no timing
 * asserts. BENCH_E2E_PODS (default 5000) sets the pods per run. pelotond's
 * controllers and Redis are reached through Unix-domain sockets (one_run).
 * First, the cost of metrics and Events (observe_cost): BENCH_E2E_OBSERVE_PAIRS
 * pairs of runs (default 5; 0: none) at BENCH_E2E_OBSERVE_NODES nodes
 * (default 1000), pelotond's metrics and Events on and off (kubelet-sim's Events as
 * BENCH_E2E_EVENTS says, in both; BENCH_E2E_OBSERVE_OFF="--events=false" turns off
 * only those); BENCH_E2E_OBSERVE_ONLY=1 stops after them.
 * Then the cost of Redis WAIT (wait_cost): BENCH_E2E_WAIT_PAIRS pairs (default
 * 3; 0: none) at BENCH_E2E_OBSERVE_NODES nodes with a redis-server replica of
 * the run's primary in both, pelotond --redis-wait-replicas=1 against
 * without it; BENCH_E2E_WAIT_ONLY=1 runs only them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <strings.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "bench.h"
#include "bench_proc.h"
#include "kclient.h"
#include "redis_proc.h"

struct lconn;

/* BENCH_E2E_TIMELINE=1 prints creates answered and pods seen Running in
 * each 25 ms of a run (the first 20 s): where the burst's time goes. */
#define TL_MS 25
#define TL_SLOTS 800

struct run {
    uv_loop_t *loop;
    struct kclient *kc;
    int port;
    int total, created, create_errs, running, inflight, next;
    uint64_t t0, t_created, t_done;
    uint64_t t_first, t10, t90; /* the first pod Running; 10% and 90% of them */
    char *seen; /* per pod: counted Running */
    int tl_created[TL_SLOTS], tl_running[TL_SLOTS]; /* BENCH_E2E_TIMELINE: counts per TL_MS */
    uv_timer_t deadline;
    bool timed_out;
    uv_timer_t scrape; /* BENCH_E2E_SCRAPE_MS: GET /metrics this often during the run, as Prometheus would */
    int scrapes, scrape_errs;
    size_t scrape_bytes;
    struct lconn *conns;
};

/* The load: pods created over raw keep-alive HTTP/1.1 connections, one
 * request in flight on each (as libcurl does), bodies formatted with
 * snprintf. A lean client keeps the machine's two cores for the system under
 * test; the requests are what kubectl or client-go would send. */
#define LOADER_CONNS 64

struct lconn {
    struct run *r;
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t wr;
    char req[1024];
    char in[65536];
    size_t inlen;
    bool busy;
};

static void create_more(struct run *r);

static void lconn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    struct lconn *c = h->data;
    buf->base = c->in + c->inlen;
    buf->len = sizeof c->in - c->inlen - 1;
}

/* One whole response in c->in: its status, or 0 when more must come. */
static int lconn_response(struct lconn *c, size_t *used) {
    c->in[c->inlen] = 0;
    char *end = strstr(c->in, "\r\n\r\n");
    if (!end) return 0;
    int status = 0;
    if (sscanf(c->in, "HTTP/1.1 %d", &status) != 1) status = -1;
    size_t clen = 0;
    for (char *h = strstr(c->in, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n"))
        if (!strncasecmp(h + 2, "content-length:", 15)) clen = strtoul(h + 17, NULL, 10);
    size_t total = (size_t)(end + 4 - c->in) + clen;
    if (c->inlen < total) return 0;
    *used = total;
    return status;
}

static void lconn_send(struct lconn *c);

static void timeline_count(const struct run *r, int *slots) {
    uint64_t slot = (bench_now_ns() - r->t0) / (TL_MS * 1000000ull);
    if (slot < TL_SLOTS) slots[slot]++;
}

static void lconn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    struct lconn *c = s->data;
    struct run *r = c->r;
    if (n < 0) { /* the server went away: what was in flight failed */
        if (c->busy) r->inflight--, r->create_errs++, c->busy = false;
        uv_close((uv_handle_t *)&c->tcp, NULL);
        return;
    }
    c->inlen += (size_t)n;
    size_t used = 0;
    int status = lconn_response(c, &used);
    if (!status) return;
    memmove(c->in, c->in + used, c->inlen - used);
    c->inlen -= used;
    timeline_count(r, r->tl_created);
    c->busy = false;
    r->inflight--;
    if (status == 201) r->created++;
    else r->create_errs++;
    if (r->created + r->create_errs == r->total) r->t_created = bench_now_ns();
    lconn_send(c);
}

static void lconn_written(uv_write_t *w, int status) {}

/* Sends the next create on c, if any is left. */
static void lconn_send(struct lconn *c) {
    struct run *r = c->r;
    if (r->next >= r->total) return;
    char body[512];
    int bl = snprintf(body, sizeof body,
                      "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%d\",\"labels\":"
                      "{\"peloton.io/resource-pool\":\"bench\"}},\"spec\":{\"schedulerName\":\"peloton\","
                      "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"x\","
                      "\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"64Mi\"}}}]}}",
                      r->next++);
    int n = snprintf(c->req, sizeof c->req,
                     "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                     bl, body);
    uv_buf_t b = uv_buf_init(c->req, (unsigned)n);
    c->busy = true;
    r->inflight++;
    /* straight to the socket when it takes it all (a uv_write would arm and
     * disarm the socket's write interest: two epoll changes per create) */
    int sent = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (sent == n) return;
    if (sent > 0) b = uv_buf_init(c->req + sent, (unsigned)(n - sent));
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, lconn_written)) {
        c->busy = false;
        r->inflight--;
        r->create_errs++;
    }
}

static void lconn_connected(uv_connect_t *req, int status) {
    struct lconn *c = req->data;
    if (status) {
        fprintf(stderr, "bench_e2e: loader connect: %s\n", uv_strerror(status));
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, lconn_alloc, lconn_read);
    lconn_send(c);
}

static void create_more(struct run *r) {
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", r->port, &addr);
    for (int i = 0; i < LOADER_CONNS; i++) {
        struct lconn *c = &r->conns[i];
        c->r = r;
        uv_tcp_init(r->loop, &c->tcp);
        uv_tcp_nodelay(&c->tcp, 1);
        c->tcp.data = c;
        c->connect.data = c;
        uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&addr, lconn_connected);
    }
}

/* ---- counting Running pods from the watch's raw lines ----
 * The watch asks for Running pods only, so each ADDED or MODIFIED line is a
 * pod Running; all the benchmark needs of it is metadata.name, read by a
 * small scanner instead of decoding kilobytes of JSON per pod. */

/* Past a JSON string starting at p (on its opening quote); NULL if cut. */
static const char *skip_string(const char *p, const char *end) {
    for (p++; p < end; p++) {
        if (*p == '\\') p++;
        else if (*p == '"') return p + 1;
    }
    return NULL;
}

/* Past one JSON value starting at p. */
static const char *skip_value(const char *p, const char *end) {
    int depth = 0;
    while (p < end) {
        char ch = *p;
        if (ch == '"') {
            if (!(p = skip_string(p, end))) return NULL;
            if (!depth) return p;
            continue;
        }
        if (ch == '{' || ch == '[') depth++;
        else if (ch == '}' || ch == ']') {
            if (--depth < 0) return p; /* the end of the enclosing value */
            if (!depth) return p + 1;
        } else if (!depth && (ch == ',' || ch == '}' || ch == ']')) return p;
        else if (!depth && ch != ' ' && (p + 1 == end || strchr(",}] ", p[1]))) return p + 1;
        p++;
    }
    return NULL;
}

/* The value of "name" among the members of the object whose '{' is at p. */
static const char *member_name(const char *p, const char *end, size_t *len) {
    p++;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == ',')) p++;
        if (p >= end || *p != '"') return NULL;
        const char *k = p + 1, *ke = skip_string(p, end);
        if (!ke || ke >= end || *ke != ':') return NULL;
        const char *v = ke + 1;
        if (ke - k - 1 == 4 && !memcmp(k, "name", 4) && v < end && *v == '"') {
            const char *ve = skip_string(v, end);
            if (!ve) return NULL;
            *len = (size_t)(ve - v - 2);
            return v + 1;
        }
        if (!(p = skip_value(v, end))) return NULL;
    }
    return NULL;
}

static void on_line(void *ud, const char *line, size_t n) {
    struct run *r = ud;
    const char *end = line + n;
    if (n < 20 || (memcmp(line, "{\"type\":\"ADDED\"", 15) && memcmp(line, "{\"type\":\"MODIFIED\"", 18))) return;
    const char *md = memmem(line, n, "\"metadata\":{", 12);
    size_t len = 0;
    const char *name = md ? member_name(md + 11, end, &len) : NULL;
    if (!name || len < 2 || name[0] != 'p') return;
    int i = atoi(name + 1);
    if (i < 0 || i >= r->total || r->seen[i]) return;
    r->seen[i] = 1;
    ++r->running;
    timeline_count(r, r->tl_running);
    uint64_t now = bench_now_ns();
    if (r->running == 1) r->t_first = now;
    if (!r->t10 && r->running * 10 >= r->total) r->t10 = now;
    if (!r->t90 && r->running * 10 >= r->total * 9) r->t90 = now;
    if (r->running == r->total) {
        r->t_done = now;
        uv_stop(r->loop);
    }
}

static void on_watch_end(void *ud, long status, const char *error) {
    fprintf(stderr, "bench_e2e: the watch ended: %ld %s\n", status, error ? error : "");
}

static void on_scraped(void *ud, const struct kc_response *res) {
    struct run *r = ud;
    if (res->status == 200) {
        r->scrapes++;
        r->scrape_bytes = res->rawlen;
    } else if (res->status) {
        r->scrape_errs++;
    }
}

static void on_scrape(uv_timer_t *t) {
    struct run *r = t->data;
    kclient_request(r->kc, "GET", "/metrics", NULL, NULL, on_scraped, r);
}

static void on_deadline(uv_timer_t *t) {
    struct run *r = t->data;
    r->timed_out = true;
    uv_stop(r->loop);
}

static double cpu_us(pid_t pid) { return bench_cpu_us(pid, 0); }

/* A process's context switches so far (every thread's, voluntary or not):
 * a count, so unlike CPU time it does not move with the VM's speed. */
static double ctx_switches(pid_t pid) {
    char dir[64], path[384], line[128];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d) return 0;
    double n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/status", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        long long v;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
                sscanf(line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
                n += (double)v;
        fclose(f);
    }
    closedir(d);
    return n;
}

/* A process's peak resident memory so far (VmHWM), in MiB; 0 when unknown. */
static double peak_rss_mib(pid_t pid) {
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    fclose(f);
    return (double)kib / 1024.0;
}

/* BENCH_E2E_REDIS_STATS: what Redis did per pod Running (INFO commandstats). */
static void redis_stats(int port, int pods) {
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *rep = c && !c->err ? redisCommand(c, "INFO commandstats") : NULL;
    if (rep && rep->type == REDIS_REPLY_STRING && pods > 0) {
        printf("redis per pod Running (%d pods): command calls/pod usec/call usec/pod\n", pods);
        for (char *line = strtok(rep->str, "\r\n"); line; line = strtok(NULL, "\r\n")) {
            char name[64];
            long long calls = 0;
            double usec = 0, per = 0;
            if (sscanf(line, "cmdstat_%63[^:]:calls=%lld,usec=%lf,usec_per_call=%lf", name, &calls, &usec, &per) == 4)
                printf("  %-14s %8.2f %8.2f %8.2f\n", name, (double)calls / pods, per, usec / pods);
        }
    }
    if (rep) freeReplyObject(rep);
    if (c) redisFree(c);
}

/* The figures of a run, reported over several runs (median and spread). */
enum {
    F_REG, F_CREATE, F_RUNNING, F_FIRST, F_STEADY, F_PELOTOND, F_API, F_CTL, F_KSIM, F_REDIS, F_LOAD, F_ALL,
    F_RSS_PD, F_RSS_KSIM, F_RSS_REDIS, F_CTX, NFIGS
};
static const struct {
    const char *name, *unit, *target;
} figs[NFIGS] = {
    [F_REG] = {"kubelet-sim registration", "s", ""},
    [F_CREATE] = {"create (API)", "pods/s", ""},
    [F_RUNNING] = {"create -> Running", "pods/s", "(target >= 5000)"},
    [F_FIRST] = {"first pod Running after", "ms", ""},
    [F_STEADY] = {"Running rate, 10% to 90% of the pods", "pods/s", "(the burst without its fill and drain)"},
    [F_PELOTOND] = {"CPU per pod, pelotond", "us", ""},
    [F_API] = {"CPU per pod, pelotond API", "us", ""},
    [F_CTL] = {"CPU per pod, pelotond controllers", "us", ""},
    [F_KSIM] = {"CPU per pod, kubelet-sim", "us", ""},
    [F_REDIS] = {"CPU per pod, redis", "us", ""},
    [F_LOAD] = {"CPU per pod, load + watch", "us", ""},
    [F_ALL] = {"CPU per pod, all", "us", "(2 cores at 5000 pods/s: 400)"},
    [F_RSS_PD] = {"peak RSS, pelotond", "MiB", ""},
    [F_RSS_KSIM] = {"peak RSS, kubelet-sim", "MiB", ""},
    [F_RSS_REDIS] = {"peak RSS, redis", "MiB", ""},
    [F_CTX] = {"context switches per pod, all", "", ""},
};
struct run_figs {
    double v[NFIGS];
    double replica_us, waits; /* with a replica: its CPU per pod; the primary's WAIT calls per pod */
    bool complete;
};

/* What a run observes: kubelet-sim's Events (Pulled, Created, Started),
 * pelotond's metrics and its roles' Events (Scheduled, FailedScheduling...),
 * and /metrics scraped every scrape_ms (0: not). */
struct observe {
    bool ksim_events, pelotond_off;
    int scrape_ms;
    bool replica;      /* a redis-server replica of the run's primary (bench_start_replica) */
    const char *extra; /* more pelotond flags (e.g. --redis-wait-replicas=1), or NULL */
};

/* The primary's count of WAIT commands so far (INFO commandstats). */
static double wait_calls(int port) {
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r = c && !c->err ? redisCommand(c, "INFO commandstats") : NULL;
    const char *w = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_wait:calls=") : NULL;
    double n = w ? atof(w + 19) : 0;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return n;
}

static int one_run(int nodes, int pods, const struct observe *obs, struct run_figs *out) {
    struct redis_proc rp = {0};
    if (redis_proc_start(&rp, "everysec")) {
        fprintf(stderr, "bench_e2e: cannot start redis-server\n");
        return -1;
    }
    char dir[] = "/tmp/bench-e2e-XXXXXX";
    if (!mkdtemp(dir)) return -1;
    char log2[96], server[128], nodes_arg[32], unix_arg[96];
    snprintf(log2, sizeof log2, "%s/kubelet-sim.log", dir);
    /* pelotond's own controllers reach its API server through its
     * Unix-domain socket, and pelotond reaches Redis through Redis's (as
     * `make run` deploys them); kubelet-sim and the load, which stand for
     * Kubelets and clients on other hosts, come over TCP.
     * BENCH_E2E_TCP=1: everything over loopback TCP; BENCH_E2E_KSIM_UNIX=1:
     * kubelet-sim through the socket too (not what a cluster does). */
    bool tcp_only = getenv("BENCH_E2E_TCP") && !strcmp(getenv("BENCH_E2E_TCP"), "1");
    snprintf(unix_arg, sizeof unix_arg, tcp_only ? "--roles=all" : "--unix-socket=%s/api.sock", dir);
    char raddr[160];
    if (tcp_only) snprintf(raddr, sizeof raddr, "127.0.0.1:%d", rp.port);
    else snprintf(raddr, sizeof raddr, "unix://%s", rp.unix_path);
    pid_t pd = 0;
    /* without metrics and Events: pelotond's switches, beside BENCH_PELOTOND_ARGS */
    const char *more = getenv("BENCH_PELOTOND_ARGS");
    char *saved = more ? strdup(more) : NULL, args[512];
    if (obs->pelotond_off) { /* BENCH_E2E_OBSERVE_OFF: what "off" turns off (one of them, to split the cost) */
        const char *what = getenv("BENCH_E2E_OBSERVE_OFF");
        snprintf(args, sizeof args, "%s %s", saved ? saved : "", what ? what : "--metrics=false --events=false");
        setenv("BENCH_PELOTOND_ARGS", args, 1);
    } else if (obs->extra) {
        snprintf(args, sizeof args, "%s %s", saved ? saved : "", obs->extra);
        setenv("BENCH_PELOTOND_ARGS", args, 1);
    }
    pid_t rep = obs->replica ? bench_start_replica(dir, rp.port) : 0;
    int port = obs->replica && !rep ? 0 : bench_start_pelotond(dir, raddr, unix_arg, &pd);
    if (saved) setenv("BENCH_PELOTOND_ARGS", saved, 1);
    else unsetenv("BENCH_PELOTOND_ARGS");
    free(saved);
    if (!port) {
        bench_stop(rep);
        redis_proc_destroy(&rp);
        return -1;
    }
    if (!tcp_only && getenv("BENCH_E2E_KSIM_UNIX")) snprintf(server, sizeof server, "--server=unix://%s/api.sock", dir);
    else snprintf(server, sizeof server, "--server=http://127.0.0.1:%d", port);
    snprintf(nodes_arg, sizeof nodes_arg, "--nodes=%d", nodes);
    char *kargv[] = {"bin/kubelet-sim", server, nodes_arg, "--cpu=64", "--memory=256Gi", "--pods=500", "--quiet",
                     obs->ksim_events ? NULL : "--events=false", NULL};
    uint64_t t_reg = bench_now_ns();
    pid_t ks = bench_spawn(kargv, log2);
    for (int i = 0; i < 1200 && !bench_file_has(log2, "nodes registered"); i++) usleep(50000);
    double reg_s = (double)(bench_now_ns() - t_reg) / 1e9;

    struct run r = {.loop = uv_default_loop(), .total = pods, .port = port};
    r.seen = calloc((size_t)pods, 1);
    r.conns = calloc(LOADER_CONNS, sizeof *r.conns);
    struct kc_config cfg;
    char err[256], url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    int rc = -1;
    if (!r.seen || !r.conns || kc_config_from_url(url, NULL, &cfg, err, sizeof err)) goto out;
    r.kc = kclient_new(r.loop, &cfg, err, sizeof err);
    if (!r.kc) goto out_cfg;
    json_t *pool = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s, s:i}]}}", "apiVersion",
                             "peloton.io/v1alpha1", "kind", "ResourcePool", "metadata", "name", "bench", "spec",
                             "resources", "kind", "cpu", "reservation", "0", "limit", "1000000", "share", 1);
    kclient_request_sync(r.kc, "POST", "/apis/peloton.io/v1alpha1/resourcepools", pool, NULL, NULL, err, sizeof err);
    json_decref(pool);
    sleep(2); /* the controllers see the pool and the nodes */
    /* only Running pods: one event each for the benchmark to read */
    struct kc_watch *w = kclient_watch_raw(r.kc, "/api/v1/namespaces/default/pods",
                                           "fieldSelector=status.phase%3DRunning", NULL, on_line, on_watch_end, &r);
    if (!w) goto out_cfg;
    uv_timer_init(r.loop, &r.deadline);
    r.deadline.data = &r;
    uv_timer_start(&r.deadline, on_deadline, 120000, 0);
    usleep(200000);
    pid_t who[5] = {pd, ks, rp.pid, getpid(), rep}; /* rep: 0 without a replica (counts 0) */
    double cpu0[5], api0 = bench_cpu_us(pd, pd); /* pelotond's main thread serves the API */
    double ctx0 = 0, waits0 = rep ? wait_calls(rp.port) : 0;
    for (int i = 0; i < 5; i++) cpu0[i] = cpu_us(who[i]), ctx0 += ctx_switches(who[i]);
    uv_timer_init(r.loop, &r.scrape);
    r.scrape.data = &r;
    if (obs->scrape_ms > 0) uv_timer_start(&r.scrape, on_scrape, 0, (uint64_t)obs->scrape_ms);
    r.t0 = bench_now_ns();
    create_more(&r);
    uv_run(r.loop, UV_RUN_DEFAULT);
    double cpu[5], total = 0, api = bench_cpu_us(pd, pd) - api0;
    for (int i = 0; i < 5; i++) total += cpu[i] = cpu_us(who[i]) - cpu0[i];
    double ctx = -ctx0;
    for (int i = 0; i < 5; i++) ctx += ctx_switches(who[i]);
    double waits = rep ? wait_calls(rp.port) - waits0 : 0;
    uint64_t end = r.t_done ? r.t_done : bench_now_ns();
    double secs = (double)(end - r.t0) / 1e9;
    /* the run's figures; main prints them over the runs */
    out->v[F_REG] = reg_s;
    out->v[F_CREATE] = r.t_created ? r.created / ((double)(r.t_created - r.t0) / 1e9) : 0;
    out->v[F_RUNNING] = r.running / secs;
    out->v[F_FIRST] = r.t_first ? (double)(r.t_first - r.t0) / 1e6 : 0;
    out->v[F_STEADY] = r.t90 > r.t10 ? 0.8 * r.total / ((double)(r.t90 - r.t10) / 1e9) : 0;
    if (r.running > 0) {
        out->v[F_PELOTOND] = cpu[0] / r.running;
        out->v[F_API] = api / r.running;
        out->v[F_CTL] = (cpu[0] - api) / r.running;
        out->v[F_KSIM] = cpu[1] / r.running;
        out->v[F_REDIS] = cpu[2] / r.running;
        out->v[F_LOAD] = cpu[3] / r.running;
        out->v[F_ALL] = total / r.running;
        out->v[F_CTX] = ctx / r.running;
        out->replica_us = cpu[4] / r.running;
        out->waits = waits / r.running;
    }
    out->v[F_RSS_PD] = peak_rss_mib(pd);
    out->v[F_RSS_KSIM] = peak_rss_mib(ks);
    out->v[F_RSS_REDIS] = peak_rss_mib(rp.pid);
    out->complete = r.running == pods && !r.timed_out;
    if (r.timed_out || r.create_errs)
        printf("bench e2e %d nodes: %d of %d Running, %d create errors%s\n", nodes, r.running, pods, r.create_errs,
               r.timed_out ? " (timed out)" : "");
    if (obs->scrape_ms > 0)
        printf("bench e2e %d nodes: /metrics scraped %d times (%d errors), %zu bytes each\n", nodes, r.scrapes,
               r.scrape_errs, r.scrape_bytes);
    if (getenv("BENCH_E2E_REDIS_STATS")) redis_stats(rp.port, r.running);
    if (getenv("BENCH_E2E_TIMELINE")) {
        printf("timeline (%d nodes): ms, creates answered, pods Running, in each %d ms\n", nodes, TL_MS);
        for (int i = 0; i < TL_SLOTS && (uint64_t)i * TL_MS <= (end - r.t0) / 1000000; i++)
            printf("  %5d %5d %5d\n", i * TL_MS, r.tl_created[i], r.tl_running[i]);
    }
    kc_watch_stop(w);
    for (int i = 0; i < LOADER_CONNS; i++)
        if (r.conns[i].r && !uv_is_closing((uv_handle_t *)&r.conns[i].tcp)) uv_close((uv_handle_t *)&r.conns[i].tcp, NULL);
    uv_close((uv_handle_t *)&r.deadline, NULL);
    uv_close((uv_handle_t *)&r.scrape, NULL);
    kclient_free(r.kc);
    uv_run(r.loop, UV_RUN_DEFAULT);
    rc = 0;
out_cfg:
    kc_config_free(&cfg);
out:
    free(r.seen);
    free(r.conns);
    bench_stop(ks);
    bench_stop(pd);
    bench_stop(rep);
    redis_proc_destroy(&rp);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* best effort */
    }
    return rc;
}

/* The task queue's own operations: what resmgr and placement do per gang. */
static void queue_ops(void) {
    struct redis_proc rp = {0};
    if (redis_proc_start(&rp, "everysec")) return;
    redisContext *c = redisConnect("127.0.0.1", rp.port);
    if (!c || c->err) {
        redis_proc_destroy(&rp);
        return;
    }
    const int n = 200000, batch = 512;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < n; i += batch) {
        for (int j = i; j < i + batch && j < n; j++) {
            redisAppendCommand(c, "ZADD peloton:pending:bench %d g%d", j, j);
            redisAppendCommand(c, "RPUSH peloton:ready g%d", j);
        }
        for (int j = i; j < i + batch && j < n; j++)
            for (int k = 0; k < 2; k++) {
                void *rep;
                if (redisGetReply(c, &rep) == REDIS_OK) freeReplyObject(rep);
            }
    }
    uint64_t t1 = bench_now_ns();
    for (int i = 0; i < n; i += batch) {
        redisReply *rep = redisCommand(c, "LPOP peloton:ready %d", batch);
        freeReplyObject(rep);
    }
    uint64_t t2 = bench_now_ns();
    bench_report("redis queue: ZADD + RPUSH (pipelined)", 2.0 * n / ((double)(t1 - t0) / 1e9), "ops/s", "");
    bench_report("redis queue: LPOP 512 at a time", n / ((double)(t2 - t1) / 1e9), "gangs/s", "");
    redisFree(c);
    redis_proc_destroy(&rp);
}

/* The cost of pelotond's metrics and Events on the burst: pairs of runs,
 * one with them on (metrics scraped every second, as the e2e test's
 * Prometheus does; the roles' Events: Scheduled for every pod) and one with
 * them off (pelotond --metrics=false --events=false, not scraped),
 * alternating which goes first; kubelet-sim's own Events are the same in
 * both (ksim_events: a Kubelet fleet posts them whatever the scheduler
 * does). Prints each mode's median and range of create -> Running and of
 * CPU per pod, and the median of the pairs' differences, beside the spread
 * of the runs of one mode (the noise). */
static double loadavg(void);

static void observe_cost(int nodes, int pods, int pairs, bool ksim_events) {
    const struct observe on = {.ksim_events = ksim_events, .pelotond_off = false, .scrape_ms = 1000},
                         off = {.ksim_events = ksim_events, .pelotond_off = true, .scrape_ms = 0};
    static const int shown[] = {F_RUNNING, F_STEADY, F_PELOTOND, F_API, F_CTL, F_REDIS, F_ALL};
    enum { NSHOWN = sizeof shown / sizeof shown[0] };
    double v[2][NSHOWN][20], diff[20];
    int n = 0;
    for (int i = 0; i < pairs && n < 20; i++) {
        struct run_figs f[2];
        bool ok = true;
        for (int k = 0; k < 2; k++) { /* even pairs: on first; odd pairs: off first */
            int mode = (i % 2) ^ k; /* 0 on, 1 off */
            memset(&f[mode], 0, sizeof f[mode]);
            if (one_run(nodes, pods, mode ? &off : &on, &f[mode]) || !f[mode].complete) ok = false;
        }
        if (!ok) {
            printf("bench e2e observe %d nodes: pair %d incomplete\n", nodes, i + 1);
            continue;
        }
        for (int m = 0; m < 2; m++)
            for (int j = 0; j < NSHOWN; j++) v[m][j][n] = f[m].v[shown[j]];
        diff[n] = 100.0 * (f[0].v[F_RUNNING] - f[1].v[F_RUNNING]) / f[1].v[F_RUNNING];
        printf("bench e2e observe %d nodes: pair %d (load %.2f): on %.0f pods/s, off %.0f pods/s (%+.1f%%); pelotond "
               "CPU per pod on %.0f us (API %.0f, controllers %.0f), off %.0f us (%.0f, %.0f); redis-server on %.0f, "
               "off %.0f us; every process on %.0f, off %.0f us\n", nodes, i + 1, loadavg(), f[0].v[F_RUNNING],
               f[1].v[F_RUNNING], diff[n], f[0].v[F_PELOTOND], f[0].v[F_API], f[0].v[F_CTL], f[1].v[F_PELOTOND],
               f[1].v[F_API], f[1].v[F_CTL], f[0].v[F_REDIS], f[1].v[F_REDIS], f[0].v[F_ALL], f[1].v[F_ALL]);
        n++;
    }
    if (!n) return;
    static const char *const mode[2] = {"on ", "off"};
    for (int j = 0; j < NSHOWN; j++)
        for (int m = 0; m < 2; m++) {
            char name[160], target[128];
            double *x = v[m][j];
            bench_sort(x, n);
            snprintf(name, sizeof name, "e2e observe %d nodes, %s: %s", nodes, mode[m], figs[shown[j]].name);
            snprintf(target, sizeof target, "[%.4g-%.4g over %d runs, spread %.0f%% of the median]", x[0], x[n - 1],
                     n, x[n / 2] ? 100.0 * (x[n - 1] - x[0]) / x[n / 2] : 0);
            bench_report(name, x[n / 2], figs[shown[j]].unit, target);
        }
    bench_sort(diff, n);
    char target[128];
    snprintf(target, sizeof target,
             "[%+.1f%% to %+.1f%% over %d pairs; within the noise when inside the spreads above]", diff[0],
             diff[n - 1], n);
    bench_report("e2e observe: on vs off, create -> Running", diff[n / 2], "%", target);
}

/* The machine's load average now (the first field of /proc/loadavg). */
static double loadavg(void) {
    double l = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = 0;
        fclose(f);
    }
    return l;
}

/* The cost of Redis WAIT (pelotond --redis-wait-replicas=1: a write is
 * acknowledged once a replica has it) on the burst: pairs of runs, both with
 * a replica of the primary (so only the WAITs differ), alternating which goes
 * first. Prints each pair, each side's median and range, and the medians of
 * the pairs' differences; the load beside them. */
static void wait_cost(int nodes, int pods, int pairs, bool ksim_events) {
    const struct observe with = {.ksim_events = ksim_events, .replica = true, .extra = "--redis-wait-replicas=1"},
                         without = {.ksim_events = ksim_events, .replica = true};
    enum { W_RUNNING, W_PELOTOND, W_PRIMARY, W_REPLICA, W_ALL, NW };
    static const char *const names[NW] = {"create -> Running", "CPU per pod, pelotond", "CPU per pod, redis primary",
                                          "CPU per pod, redis replica", "CPU per pod, all"};
    static const char *const units[NW] = {"pods/s", "us", "us", "us", "us"};
    double v[2][NW][20], d[NW][20];
    int n = 0;
    double load0 = loadavg();
    for (int i = 0; i < pairs && n < 20; i++) {
        struct run_figs f[2];
        bool ok = true;
        for (int k = 0; k < 2; k++) { /* even pairs: WAIT first; odd pairs: without first */
            int mode = (i % 2) ^ k;   /* 0 WAIT, 1 without */
            memset(&f[mode], 0, sizeof f[mode]);
            if (one_run(nodes, pods, mode ? &without : &with, &f[mode]) || !f[mode].complete) ok = false;
        }
        if (!ok) {
            printf("bench e2e WAIT %d nodes: pair %d incomplete\n", nodes, i + 1);
            continue;
        }
        for (int m = 0; m < 2; m++) {
            const double *x = f[m].v;
            double w[NW] = {x[F_RUNNING], x[F_PELOTOND], x[F_REDIS], f[m].replica_us, x[F_ALL]};
            for (int j = 0; j < NW; j++) v[m][j][n] = w[j];
        }
        d[0][n] = 100.0 * (v[0][0][n] - v[1][0][n]) / v[1][0][n];
        for (int j = 1; j < NW; j++) d[j][n] = v[0][j][n] - v[1][j][n];
        printf("bench e2e WAIT %d nodes: pair %d (load %.1f): WAIT %.0f pods/s, without %.0f pods/s (%+.1f%%); CPU per "
               "pod pelotond %.0f / %.0f us, primary %.0f / %.0f, replica %.0f / %.0f; WAIT calls per pod %.3f / %.3f\n",
               nodes, i + 1, loadavg(), v[0][0][n], v[1][0][n], d[0][n], v[0][1][n], v[1][1][n], v[0][2][n],
               v[1][2][n], v[0][3][n], v[1][3][n], f[0].waits, f[1].waits);
        n++;
    }
    if (!n) return;
    static const char *const mode[2] = {"WAIT   ", "without"};
    for (int j = 0; j < NW; j++)
        for (int m = 0; m < 2; m++) {
            char name[160], target[128];
            double *x = v[m][j];
            bench_sort(x, n);
            snprintf(name, sizeof name, "e2e WAIT %d nodes, %s: %s", nodes, mode[m], names[j]);
            snprintf(target, sizeof target, "[%.4g-%.4g over %d runs]", x[0], x[n - 1], n);
            bench_report(name, x[n / 2], units[j], target);
        }
    for (int j = 0; j < NW; j++) {
        char name[160], target[160];
        bench_sort(d[j], n);
        snprintf(name, sizeof name, "e2e WAIT vs without, %s", names[j]);
        snprintf(target, sizeof target, "[%+.4g to %+.4g over %d pairs; load %.1f -> %.1f]", d[j][0], d[j][n - 1], n,
                 load0, loadavg());
        bench_report(name, d[j][n / 2], j ? "us" : "%", target);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *e = getenv("BENCH_E2E_PODS");
    int pods = e ? atoi(e) : 5000;
    if (pods <= 0) pods = 5000;
    const char *nl = getenv("BENCH_E2E_NODES"); /* e.g. "100" for a quick look */
    queue_ops();
    const char *rs = getenv("BENCH_E2E_RUNS");
    int runs = rs ? atoi(rs) : 3;
    if (runs < 1 || runs > 20) runs = 3;
    /* kubelet-sim's own Events (Pulled, Created, Started: three POSTs a pod)
     * are off unless BENCH_E2E_EVENTS=1, so the series stays comparable
     * with the rows before them; observe_cost below has them */
    const char *evs = getenv("BENCH_E2E_EVENTS"), *sms = getenv("BENCH_E2E_SCRAPE_MS");
    const struct observe dflt = {.ksim_events = evs && !strcmp(evs, "1"), .scrape_ms = sms ? atoi(sms) : 0};
    const char *ps = getenv("BENCH_E2E_OBSERVE_PAIRS"), *pn = getenv("BENCH_E2E_OBSERVE_NODES");
    int pairs = ps ? atoi(ps) : 5;
    const char *wps = getenv("BENCH_E2E_WAIT_PAIRS");
    int wpairs = wps ? atoi(wps) : 3;
    if (getenv("BENCH_E2E_WAIT_ONLY")) {
        if (wpairs > 0) wait_cost(pn ? atoi(pn) : 1000, pods, wpairs > 20 ? 20 : wpairs, dflt.ksim_events);
        return 0;
    }
    if (pairs > 0) observe_cost(pn ? atoi(pn) : 1000, pods, pairs > 20 ? 20 : pairs, dflt.ksim_events);
    if (getenv("BENCH_E2E_OBSERVE_ONLY")) return 0;
    if (wpairs > 0) wait_cost(pn ? atoi(pn) : 1000, pods, wpairs > 20 ? 20 : wpairs, dflt.ksim_events);
    int sizes[2] = {1000, 5000}, nsizes = 2;
    if (nl) sizes[0] = atoi(nl), nsizes = 1;
    for (int k = 0; k < nsizes; k++) {
        struct run_figs f[20];
        int ok = 0;
        for (int i = 0; i < runs; i++) {
            memset(&f[ok], 0, sizeof f[ok]);
            if (one_run(sizes[k], pods, &dflt, &f[ok]) == 0 && f[ok].complete) ok++;
            else printf("bench e2e %d nodes: run %d incomplete\n", sizes[k], i + 1);
        }
        for (int j = 0; j < NFIGS && ok; j++) { /* the median, and the spread over the runs */
            double v[20];
            for (int i = 0; i < ok; i++) v[i] = f[i].v[j];
            bench_sort(v, ok);
            char name[128], target[96];
            snprintf(name, sizeof name, "e2e %d nodes: %s", sizes[k], figs[j].name);
            snprintf(target, sizeof target, "[%.4g-%.4g over %d runs] %s", v[0], v[ok - 1], ok, figs[j].target);
            bench_report(name, v[ok / 2], figs[j].unit, target);
        }
    }
    return 0;
}
