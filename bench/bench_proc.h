/* Child processes for the benchmarks that run the real daemons (bench_e2e,
 * bench_watch): start one with its output in a log, stop it, start
 * pelotond on a free loopback port, and a Redis replica of a primary.
 * Header-only, like bench.h. */
#ifndef PELOTON_BENCH_PROC_H
#define PELOTON_BENCH_PROC_H

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

/* CPU time of every thread of pid, µs, as the scheduler counts it
 * (/proc/PID/task/TID/schedstat: nanoseconds on a CPU), to the nanosecond
 * rather than the 10 ms tick of stat; 0 when it cannot be read. */
static inline double bench_cpu_sched_us(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    unsigned long long total = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char p2[300];
        snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
        FILE *f = fopen(p2, "r");
        unsigned long long ns = 0;
        if (f && fscanf(f, "%llu", &ns) == 1) total += ns;
        if (f) fclose(f);
    }
    closedir(d);
    return (double)total / 1000.0;
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

/* A redis-server replicating the primary at primary_port: loopback, no
 * persistence, its own directory dir/replica. Waits (at most 10 s) until
 * INFO replication says master_link_status:up; its pid, or 0 after stopping
 * what it started. */
static inline pid_t bench_start_replica(const char *dir, int primary_port) {
    char rdir[160], log[192], port[16], primary[16];
    snprintf(rdir, sizeof rdir, "%s/replica", dir);
    snprintf(log, sizeof log, "%s/replica.log", dir);
    if (mkdir(rdir, 0700)) return 0;
    int p = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0); /* a free loopback port */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &len))
        p = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    if (!p) return 0;
    snprintf(port, sizeof port, "%d", p);
    snprintf(primary, sizeof primary, "%d", primary_port);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (lfd >= 0) dup2(lfd, 1), dup2(lfd, 2);
        char *argv[] = {"redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", rdir, "--save", "",
                        "--appendonly", "no", "--replicaof", "127.0.0.1", primary, "--daemonize", "no",
                        "--logfile", "", NULL};
        execvp(argv[0], argv);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) { /* 200 x 50 ms */
        redisContext *c = redisConnectWithTimeout("127.0.0.1", p, (struct timeval){.tv_sec = 0, .tv_usec = 200000});
        redisReply *r = c && !c->err ? redisCommand(c, "INFO replication") : NULL;
        bool up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (up) return pid;
        if (waitpid(pid, NULL, WNOHANG) == pid) break;
        usleep(50000);
    }
    fprintf(stderr, "bench: the replica did not come up (%s)\n", log);
    bench_stop(pid);
    return 0;
}

#endif
