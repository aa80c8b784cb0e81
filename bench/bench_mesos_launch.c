/* Launches through the framework client (src/mesos/mclient.c) against a
 * release mesos-master-sim: offers accepted with as many 1-cpu tasks as fit,
 * every update acknowledged, until N tasks are RUNNING and acknowledged.
 * This is the transport and the simulator alone, without pelotond: the
 * ceiling the Mesos driver's benchmark (issue 19: >= 5,000 launches/s) will
 * run under. Prints launches/s and the CPU each side used per launch. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bench.h"
#include "bench_proc.h"
#include "mclient.h"

struct run {
    uv_loop_t loop;
    struct mclient *c;
    int target, launched, running, errors;
    uint64_t t0, t_end;
};

static void on_accept_done(void *ud, int status, const char *body) {
    struct run *r = ud;
    (void)body;
    if (status != 202) r->errors++;
}

static void on_event(void *ud, const struct mesos_event *ev, const json_t *root) {
    struct run *r = ud;
    (void)root;
    if (ev->type == MESOS_EVENT_OFFERS) {
        if (!r->t0) r->t0 = bench_now_ns();
        size_t i;
        const json_t *o;
        json_array_foreach(ev->offers, i, o) {
            struct mesos_offer_decl d;
            char err[128];
            if (mesos_offer_parse(o, &d, err, sizeof err)) continue;
            int n = (int)d.res.cpus;
            if (n > r->target - r->launched) n = r->target - r->launched;
            if (n <= 0) {
                mclient_call(r->c, mesos_call_decline(NULL, &d.id, 1, 3600), NULL, NULL);
                continue;
            }
            json_t *infos = json_array();
            for (int k = 0; k < n; k++) {
                char tid[48];
                snprintf(tid, sizeof tid, "bench-%d", r->launched++);
                struct mesos_task_spec t = {.name = tid, .task_id = tid, .agent_id = d.agent_id,
                                            .res = {.cpus = 1, .mem = 256}, .command = "sleep 1000"};
                json_array_append_new(infos, mesos_task_info(&t));
            }
            mclient_call(r->c, mesos_call_accept(NULL, &d.id, 1, infos, 0), on_accept_done, r);
        }
    } else if (ev->type == MESOS_EVENT_UPDATE) {
        if (ev->status.uuid_b64)
            mclient_call(r->c, mesos_call_acknowledge(NULL, ev->status.agent_id, ev->status.task_id, ev->status.uuid_b64),
                         NULL, NULL);
        if (ev->status.state == MESOS_TASK_RUNNING && ++r->running == r->target) r->t_end = bench_now_ns();
        if (ev->status.state == MESOS_TASK_ERROR || ev->status.state == MESOS_TASK_DROPPED) r->errors++;
    }
}

static void on_wake(uv_timer_t *t) { (void)t; }

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len)) return -1;
    close(fd);
    return ntohs(a.sin_port);
}

static int one(int agents, int tasks) {
    int port = free_port();
    char pflag[32], aflag[32], log[64];
    snprintf(pflag, sizeof pflag, "--port=%d", port);
    snprintf(aflag, sizeof aflag, "--agents=%d", agents);
    snprintf(log, sizeof log, "/tmp/bench-msim-%d.log", port);
    char *argv[] = {"bin/mesos-master-sim", pflag, aflag, "--agent-cpus=8", "--agent-mem=65536",
                    "--allocation-interval-ms=100", "--staging-ms=0", "--starting-ms=0", "--quiet", NULL};
    pid_t pid = bench_spawn(argv, log);
    for (int i = 0; i < 200 && !bench_file_has(log, "listening"); i++) usleep(25000);
    struct run r = {.target = tasks};
    uv_loop_init(&r.loop);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const char *roles[] = {"*"}, *caps[] = {"PARTITION_AWARE", "TASK_KILLING_STATE"};
    struct mclient_config cfg = {.master = url, .fi = {.user = "bench", .name = "bench", .roles = roles, .nroles = 1,
                                                        .capabilities = caps, .ncapabilities = 2, .failover_timeout = 60},
                                 .on_event = on_event, .ud = &r};
    char err[200];
    if (mclient_start(&r.loop, &cfg, &r.c, err, sizeof err)) {
        fprintf(stderr, "bench_mesos_launch: %s\n", err);
        bench_stop(pid);
        return 1;
    }
    uv_timer_t wake;
    uv_timer_init(&r.loop, &wake);
    uv_timer_start(&wake, on_wake, 50, 50);
    double cpu_sim0 = bench_cpu_us(pid, 0), cpu_me0 = bench_cpu_us(getpid(), 0);
    uint64_t deadline = bench_now_ns() + 120ull * 1000000000ull;
    while (!r.t_end && bench_now_ns() < deadline) uv_run(&r.loop, UV_RUN_ONCE);
    double cpu_sim = bench_cpu_us(pid, 0) - cpu_sim0, cpu_me = bench_cpu_us(getpid(), 0) - cpu_me0;
    uv_close((uv_handle_t *)&wake, NULL);
    mclient_stop(r.c);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    mclient_free(r.c);
    uv_loop_close(&r.loop);
    bench_stop(pid);
    if (!r.t_end || r.errors) {
        fprintf(stderr, "bench_mesos_launch: %d of %d running, %d errors (log %s)\n", r.running, tasks, r.errors, log);
        return 1;
    }
    unlink(log);
    double s = (double)(r.t_end - r.t0) / 1e9;
    char name[80];
    snprintf(name, sizeof name, "mesos launches to RUNNING acked, %d agents", agents);
    bench_report(name, tasks / s, "tasks/s", "(driver target 5000/s)");
    snprintf(name, sizeof name, "  sim CPU per launch, %d agents", agents);
    bench_report(name, cpu_sim / tasks, "us", NULL);
    snprintf(name, sizeof name, "  client CPU per launch, %d agents", agents);
    bench_report(name, cpu_me / tasks, "us", NULL);
    return 0;
}

int main(void) {
    if (one(1000, 8000) || one(5000, 20000)) return 1;
    return 0;
}
