/* End to end through the embedded default: pods per second from create to
 * Running, with pelotond (every role) and kubelet-sim at 1,000 and 5,000
 * nodes; and the Redis task-queue operations per second.
 *
 * Starts its own redis-server (redis_proc), bin/pelotond and bin/kubelet-sim
 * on loopback, creates pods through the API (kclient, many in flight) into a
 * pool, and counts them Running through a watch. Figures only; no timing
 * asserts. BENCH_E2E_PODS (default 5000) sets the pods per run. */
#include <errno.h>
#include <fcntl.h>
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
#include "kclient.h"
#include "redis_proc.h"

#define INFLIGHT 256

struct run {
    uv_loop_t *loop;
    struct kclient *kc;
    int total, created, create_errs, running, inflight, next;
    uint64_t t0, t_created, t_done;
    char *seen; /* per pod: counted Running */
    uv_timer_t deadline;
    bool timed_out;
};

static pid_t spawn(char *const argv[], const char *log) {
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return;
        usleep(50000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static bool file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

static void create_more(struct run *r);

static void on_created(void *ud, const struct kc_response *res) {
    struct run *r = ud;
    r->inflight--;
    if (res->status == 201) r->created++;
    else r->create_errs++;
    if (r->created + r->create_errs == r->total) r->t_created = bench_now_ns();
    create_more(r);
}

static void create_more(struct run *r) {
    while (r->inflight < INFLIGHT && r->next < r->total) {
        char name[64];
        snprintf(name, sizeof name, "p%d", r->next++);
        json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:s, s:[{s:s, s:s, s:{s:{s:s, s:s}}}]}}",
                                "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "labels",
                                "peloton.io/resource-pool", "bench", "spec", "schedulerName", "peloton",
                                "restartPolicy", "Never", "containers", "name", "c", "image", "x", "resources",
                                "requests", "cpu", "100m", "memory", "64Mi");
        r->inflight++;
        if (kclient_request(r->kc, "POST", "/api/v1/namespaces/default/pods", pod, NULL, on_created, r)) {
            r->inflight--;
            r->create_errs++;
        }
        json_decref(pod);
    }
}

static void on_pod(void *ud, json_t *obj) {
    struct run *r = ud;
    const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!phase || !name || strcmp(phase, "Running") || name[0] != 'p') return;
    int i = atoi(name + 1);
    if (i < 0 || i >= r->total || r->seen[i]) return;
    r->seen[i] = 1;
    if (++r->running == r->total) {
        r->t_done = bench_now_ns();
        uv_stop(r->loop);
    }
}

static void on_pod_update(void *ud, json_t *old, json_t *obj) { on_pod(ud, obj); }

static void on_deadline(uv_timer_t *t) {
    struct run *r = t->data;
    r->timed_out = true;
    uv_stop(r->loop);
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

static int one_run(int nodes, int pods) {
    struct redis_proc rp = {0};
    if (redis_proc_start(&rp, "everysec")) {
        fprintf(stderr, "bench_e2e: cannot start redis-server\n");
        return -1;
    }
    char dir[] = "/tmp/bench-e2e-XXXXXX";
    if (!mkdtemp(dir)) return -1;
    char redis_arg[64], port_file[64], port_arg[96], log1[96], log2[96], server[64], nodes_arg[32];
    snprintf(redis_arg, sizeof redis_arg, "--redis=127.0.0.1:%d", rp.port);
    snprintf(port_file, sizeof port_file, "%s/port", dir);
    snprintf(port_arg, sizeof port_arg, "--port-file=%s", port_file);
    snprintf(log1, sizeof log1, "%s/pelotond.log", dir);
    snprintf(log2, sizeof log2, "%s/kubelet-sim.log", dir);
    char *pargv[] = {"bin/pelotond", "--port=0", port_arg, redis_arg, "--crds=crds", "--roles=all", NULL};
    pid_t pd = spawn(pargv, log1);
    int port = 0;
    for (int i = 0; i < 200 && !port; i++) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1) port = 0;
            fclose(f);
        }
        if (!port) usleep(50000);
    }
    if (!port) {
        fprintf(stderr, "bench_e2e: pelotond did not start (%s)\n", log1);
        stop(pd);
        redis_proc_destroy(&rp);
        return -1;
    }
    snprintf(server, sizeof server, "--server=http://127.0.0.1:%d", port);
    snprintf(nodes_arg, sizeof nodes_arg, "--nodes=%d", nodes);
    char *kargv[] = {"bin/kubelet-sim", server, nodes_arg, "--cpu=64", "--memory=256Gi", "--pods=500", "--quiet",
                     NULL};
    uint64_t t_reg = bench_now_ns();
    pid_t ks = spawn(kargv, log2);
    for (int i = 0; i < 1200 && !file_has(log2, "nodes registered"); i++) usleep(50000);
    double reg_s = (double)(bench_now_ns() - t_reg) / 1e9;

    struct run r = {.loop = uv_default_loop(), .total = pods};
    r.seen = calloc((size_t)pods, 1);
    struct kc_config cfg;
    char err[256], url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    int rc = -1;
    if (!r.seen || kc_config_from_url(url, NULL, &cfg, err, sizeof err)) goto out;
    r.kc = kclient_new(r.loop, &cfg, err, sizeof err);
    if (!r.kc) goto out_cfg;
    json_t *pool = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s, s:i}]}}", "apiVersion",
                             "peloton.io/v1alpha1", "kind", "ResourcePool", "metadata", "name", "bench", "spec",
                             "resources", "kind", "cpu", "reservation", "0", "limit", "1000000", "share", 1);
    kclient_request_sync(r.kc, "POST", "/apis/peloton.io/v1alpha1/resourcepools", pool, NULL, NULL, err, sizeof err);
    json_decref(pool);
    sleep(2); /* the controllers see the pool and the nodes */
    static const struct kc_informer_handlers h = {on_pod, on_pod_update, NULL, NULL};
    struct kc_informer *w = kc_informer_new(r.kc, "/api/v1/namespaces/default/pods", NULL, &h, &r);
    if (!w || kc_informer_start(w)) goto out_cfg;
    uv_timer_init(r.loop, &r.deadline);
    r.deadline.data = &r;
    uv_timer_start(&r.deadline, on_deadline, 120000, 0);
    usleep(200000);
    r.t0 = bench_now_ns();
    create_more(&r);
    uv_run(r.loop, UV_RUN_DEFAULT);
    uint64_t end = r.t_done ? r.t_done : bench_now_ns();
    double secs = (double)(end - r.t0) / 1e9;
    char name[96];
    snprintf(name, sizeof name, "e2e kubelet-sim %d nodes: registration", nodes);
    bench_report(name, reg_s, "s", "");
    snprintf(name, sizeof name, "e2e %d nodes: create (API)", nodes);
    bench_report(name, r.t_created ? r.created / ((double)(r.t_created - r.t0) / 1e9) : 0, "pods/s", "");
    snprintf(name, sizeof name, "e2e %d nodes: create -> Running", nodes);
    bench_report(name, r.running / secs, "pods/s", "(target >= 5000)");
    if (r.timed_out || r.create_errs)
        printf("bench e2e %d nodes: %d of %d Running, %d create errors%s\n", nodes, r.running, pods, r.create_errs,
               r.timed_out ? " (timed out)" : "");
    if (getenv("BENCH_E2E_REDIS_STATS")) redis_stats(rp.port, r.running);
    kc_informer_free(w);
    uv_close((uv_handle_t *)&r.deadline, NULL);
    kclient_free(r.kc);
    uv_run(r.loop, UV_RUN_DEFAULT);
    rc = 0;
out_cfg:
    kc_config_free(&cfg);
out:
    free(r.seen);
    stop(ks);
    stop(pd);
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

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *e = getenv("BENCH_E2E_PODS");
    int pods = e ? atoi(e) : 5000;
    if (pods <= 0) pods = 5000;
    const char *nl = getenv("BENCH_E2E_NODES"); /* e.g. "100" for a quick look */
    queue_ops();
    if (nl) {
        one_run(atoi(nl), pods);
    } else {
        one_run(1000, pods);
        one_run(5000, pods);
    }
    return 0;
}
