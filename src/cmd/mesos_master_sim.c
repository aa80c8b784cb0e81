/* mesos-master-sim: a simulated Mesos 1.x master (the v1 scheduler API and
 * part of the operator API) with a fleet of simulated agents, for the Mesos
 * driver's tests and `make run`. Flags and behaviour: docs/mesos-master-sim.md.
 *
 * Prints "mesos-master-sim: listening port=P [standby_port=S] agents=N" once
 * it serves, runs until SIGINT or SIGTERM, then stops (exit 0). Exit 1 when
 * it cannot listen, 2 on usage errors. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msim.h"

struct app {
    uv_loop_t *loop;
    struct msim *m;
    uv_signal_t sigint, sigterm;
};

static void on_closed(uv_handle_t *h) { (void)h; }

static void on_signal(uv_signal_t *h, int signum) {
    struct app *a = h->data;
    (void)signum;
    msim_stop(a->m);
    uv_close((uv_handle_t *)&a->sigint, on_closed);
    uv_close((uv_handle_t *)&a->sigterm, on_closed);
}

static void usage(FILE *f) {
    fputs("usage: mesos-master-sim [--port=5050] [--standby-port=P] [--addr=127.0.0.1] [--agents=3]\n"
          "  [--agent-cpus=4] [--agent-mem=8192] [--agent-disk=100000] [--agent-gpus=0]\n"
          "  [--agent-attributes=k=v,...] [--zones=N] [--hostname-prefix=agent-]\n"
          "  [--heartbeat-seconds=15] [--allocation-interval-ms=1000] [--staging-ms=20] [--starting-ms=20]\n"
          "  [--kill-ms=20] [--task-run-seconds=-1] [--update-retry-ms=10000] [--update-retry-max-ms=600000]\n"
          "  [--max-tasks=1000000] [--max-frameworks=64] [--chunk-bytes=0] [--conn-idle-ms=120000]\n"
          "  [--master-id=ID] [--quiet]\n",
          f);
}

/* A number flag in [lo, hi]; exits 2 otherwise. */
static double num(const char *name, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || d < lo || d > hi) {
        fprintf(stderr, "mesos-master-sim: --%s=%s: expecting a number in [%g, %g]\n", name, v, lo, hi);
        exit(2);
    }
    return d;
}

int main(int argc, char **argv) {
    struct msim_config cfg;
    msim_config_defaults(&cfg);
    static const struct option opts[] = {
        {"port", 1, 0, 'p'}, {"standby-port", 1, 0, 'S'}, {"addr", 1, 0, 'a'}, {"agents", 1, 0, 'n'},
        {"agent-cpus", 1, 0, 'c'}, {"agent-mem", 1, 0, 'm'}, {"agent-disk", 1, 0, 'd'}, {"agent-gpus", 1, 0, 'g'},
        {"agent-attributes", 1, 0, 'A'}, {"zones", 1, 0, 'z'}, {"hostname-prefix", 1, 0, 'H'},
        {"heartbeat-seconds", 1, 0, 'b'}, {"allocation-interval-ms", 1, 0, 'i'}, {"staging-ms", 1, 0, 's'},
        {"starting-ms", 1, 0, 't'}, {"kill-ms", 1, 0, 'k'}, {"task-run-seconds", 1, 0, 'r'},
        {"update-retry-ms", 1, 0, 'u'}, {"update-retry-max-ms", 1, 0, 'U'}, {"max-tasks", 1, 0, 'T'},
        {"max-frameworks", 1, 0, 'F'}, {"chunk-bytes", 1, 0, 'C'}, {"conn-idle-ms", 1, 0, 'I'}, {"master-id", 1, 0, 'M'},
        {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': cfg.port = (int)num("port", optarg, 0, 65535); break;
        case 'S': cfg.standby_port = (int)num("standby-port", optarg, 0, 65535); break;
        case 'a': cfg.addr = optarg; break;
        case 'n': cfg.agents = (int)num("agents", optarg, 0, 100000); break;
        case 'c': cfg.agent_res.cpus = num("agent-cpus", optarg, 0, 1e6); break;
        case 'm': cfg.agent_res.mem = num("agent-mem", optarg, 0, 1e12); break;
        case 'd': cfg.agent_res.disk = num("agent-disk", optarg, 0, 1e12); break;
        case 'g': cfg.agent_res.gpus = num("agent-gpus", optarg, 0, 1024); break;
        case 'A':
            if (strlen(optarg) > 400) {
                fprintf(stderr, "mesos-master-sim: --agent-attributes: at most 400 bytes\n");
                return 2;
            }
            cfg.attributes = optarg;
            break;
        case 'z': cfg.zones = (int)num("zones", optarg, 0, 1000); break;
        case 'H': cfg.hostname_prefix = optarg; break;
        case 'b': cfg.heartbeat_s = num("heartbeat-seconds", optarg, 0.05, 86400); break;
        case 'i': cfg.allocation_ms = (unsigned)num("allocation-interval-ms", optarg, 10, 3600000); break;
        case 's': cfg.staging_ms = (unsigned)num("staging-ms", optarg, 0, 3600000); break;
        case 't': cfg.starting_ms = (unsigned)num("starting-ms", optarg, 0, 3600000); break;
        case 'k': cfg.kill_ms = (unsigned)num("kill-ms", optarg, 0, 3600000); break;
        case 'r': cfg.task_run_s = num("task-run-seconds", optarg, -1, 1e9); break;
        case 'u': cfg.update_retry_ms = (unsigned)num("update-retry-ms", optarg, 10, 3600000); break;
        case 'U': cfg.update_retry_max_ms = (unsigned)num("update-retry-max-ms", optarg, 10, 86400000); break;
        case 'T': cfg.max_tasks = (int)num("max-tasks", optarg, 1, 10000000); break;
        case 'F': cfg.max_frameworks = (int)num("max-frameworks", optarg, 1, 256); break;
        case 'C': cfg.chunk_bytes = (size_t)num("chunk-bytes", optarg, 0, 1 << 20); break;
        case 'I': cfg.conn_idle_ms = (unsigned)num("conn-idle-ms", optarg, 1, 3600000); break;
        case 'M':
            if (strlen(optarg) > 36 || strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(optarg)) {
                fprintf(stderr, "mesos-master-sim: --master-id: at most 36 of [a-z0-9-]\n");
                return 2;
            }
            cfg.master_id = optarg;
            break;
        case 'q': cfg.quiet = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (cfg.update_retry_max_ms < cfg.update_retry_ms) cfg.update_retry_max_ms = cfg.update_retry_ms;
    signal(SIGPIPE, SIG_IGN);
    struct app a = {.loop = uv_default_loop()};
    char err[256] = "";
    if (msim_start(a.loop, &cfg, &a.m, err, sizeof err)) {
        fprintf(stderr, "mesos-master-sim: level=error msg=\"%s\"\n", err);
        return 1;
    }
    uv_signal_init(a.loop, &a.sigint);
    uv_signal_init(a.loop, &a.sigterm);
    a.sigint.data = a.sigterm.data = &a;
    uv_signal_start(&a.sigint, on_signal, SIGINT);
    uv_signal_start(&a.sigterm, on_signal, SIGTERM);
    if (msim_port(a.m, 1) > 0)
        printf("mesos-master-sim: listening port=%d standby_port=%d agents=%d\n", msim_port(a.m, 0), msim_port(a.m, 1),
               cfg.agents);
    else
        printf("mesos-master-sim: listening port=%d agents=%d\n", msim_port(a.m, 0), cfg.agents);
    fflush(stdout);
    uv_run(a.loop, UV_RUN_DEFAULT);
    msim_free(a.m);
    uv_loop_close(a.loop);
    return 0;
}
