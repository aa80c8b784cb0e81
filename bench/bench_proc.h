/* Child processes for the benchmarks that run the real daemons (bench_e2e,
 * bench_watch): start one with its output in a log, stop it, and start
 * pelotond on a free loopback port. Header-only, like bench.h. */
#ifndef PELOTON_BENCH_PROC_H
#define PELOTON_BENCH_PROC_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* fork + exec argv[0] with stdout and stderr in log; the child dies with us. */
static inline pid_t bench_spawn(char *const argv[], const char *log) {
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

/* SIGTERM, then SIGKILL after 5 s. */
static inline void bench_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return;
        usleep(50000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* CPU time (user + system) a process has used, every thread, in µs; 0 when
 * gone. tid > 0: that thread alone. */
static inline double bench_cpu_us(pid_t pid, pid_t tid) {
    char path[64], buf[1024];
    if (tid > 0) snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    else snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return 0;
    return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* Whether the first 8 KiB of the file at path contain needle. */
static inline bool bench_file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

/* Starts bin/pelotond with one extra flag (e.g. "--roles=all") against the
 * Redis at redis_addr, logging into dir/pelotond.log; waits up to 10 s for
 * its port. BENCH_PELOTOND_ARGS adds up to 8 more flags (space-separated),
 * for trying settings. Returns the port (and *pid), or 0 after stopping what
 * it started. */
static inline int bench_start_pelotond(const char *dir, const char *redis_addr, const char *flag, pid_t *pid) {
    char redis_arg[192], port_file[256], port_arg[288], log[256], extra[512] = "";
    snprintf(redis_arg, sizeof redis_arg, "--redis=%s", redis_addr);
    snprintf(port_file, sizeof port_file, "%s/port", dir);
    snprintf(port_arg, sizeof port_arg, "--port-file=%s", port_file);
    snprintf(log, sizeof log, "%s/pelotond.log", dir);
    /* the API open to requests without credentials, as the benchmarks' clients send none (docs/security.md) */
    char *argv[16] = {"bin/pelotond", "--port=0", port_arg, redis_arg, "--crds=crds", "--insecure-allow-anonymous",
                      (char *)flag};
    int argc = 7;
    const char *more = getenv("BENCH_PELOTOND_ARGS");
    if (more) snprintf(extra, sizeof extra, "%s", more);
    for (char *save = NULL, *t = strtok_r(extra, " ", &save); t && argc < 14; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    *pid = bench_spawn(argv, log);
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
        fprintf(stderr, "bench: pelotond did not start (%s)\n", log);
        bench_stop(*pid);
        *pid = 0;
    }
    return port;
}

#endif
