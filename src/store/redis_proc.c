/* Child redis-server management (see redis_proc.h). */
#include "redis_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REDIS_PROC_START_MS 5000
#define REDIS_PROC_STOP_MS 5000
#define REDIS_PROC_PORT_TRIES 8

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A port the kernel considers free on 127.0.0.1 right now. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof a;
    if (fd < 0) return -1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static int spawn(struct redis_proc *p) {
    char port[16], log[300];
    snprintf(port, sizeof port, "%d", p->port);
    snprintf(log, sizeof log, "%s/redis.log", p->dir);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(126);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        char *argv[] = {"redis-server", "--save", "", "--appendonly", "yes",
                        "--appendfsync", p->appendfsync, "--dir", p->dir, "--port", port,
                        "--bind", "127.0.0.1", "--unixsocket", p->unix_path, "--unixsocketperm", "700",
                        "--daemonize", "no", "--logfile", "", NULL};
        execvp("redis-server", argv);
        _exit(127);
    }
    p->pid = pid;
    return 0;
}

/* 1 when PING answers PONG, 0 when not yet, -1 when the child has exited. */
static int ping(struct redis_proc *p) {
    int status;
    if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
        p->pid = 0;
        return -1;
    }
    redisContext *c = redisConnectWithTimeout("127.0.0.1", p->port,
                                              (struct timeval){.tv_sec = 0, .tv_usec = 200000});
    int ok = 0;
    if (c && !c->err) {
        redisSetTimeout(c, (struct timeval){.tv_sec = 0, .tv_usec = 500000});
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

static int start_and_wait(struct redis_proc *p) {
    int rc = spawn(p);
    if (rc) return rc;
    long long deadline = now_ms() + REDIS_PROC_START_MS;
    while (now_ms() < deadline) {
        int r = ping(p);
        if (r == 1) return 0;
        if (r < 0) return -EADDRINUSE; /* exited: most likely the port was taken */
        sleep_ms(10);
    }
    redis_proc_kill9(p);
    return -ETIMEDOUT;
}

int redis_proc_start(struct redis_proc *p, const char *appendfsync) {
    memset(p, 0, sizeof *p);
    snprintf(p->appendfsync, sizeof p->appendfsync, "%s", appendfsync ? appendfsync : "always");
    const char *tmp = getenv("TMPDIR");
    snprintf(p->dir, sizeof p->dir, "%s/peloton-redis-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(p->dir)) {
        int e = errno;
        p->dir[0] = '\0';
        return -e;
    }
    if ((size_t)snprintf(p->unix_path, sizeof p->unix_path, "%s/redis.sock", p->dir) >= sizeof p->unix_path) {
        redis_proc_destroy(p); /* TMPDIR too long for a socket path */
        return -ENAMETOOLONG;
    }
    int rc = -EADDRINUSE;
    for (int i = 0; i < REDIS_PROC_PORT_TRIES && rc == -EADDRINUSE; i++) {
        p->port = free_port();
        if (p->port <= 0) {
            rc = -EADDRNOTAVAIL;
            break;
        }
        rc = start_and_wait(p);
    }
    if (rc) redis_proc_destroy(p);
    return rc;
}

int redis_proc_restart(struct redis_proc *p) {
    if (p->pid) return -EBUSY;
    if (!p->dir[0] || p->port <= 0) return -EINVAL;
    /* the old process may still hold the port for a moment: retry briefly */
    int rc = -EADDRINUSE;
    for (int i = 0; i < REDIS_PROC_PORT_TRIES && rc == -EADDRINUSE; i++) {
        rc = start_and_wait(p);
        if (rc == -EADDRINUSE) sleep_ms(100);
    }
    return rc;
}

int redis_proc_stop(struct redis_proc *p) {
    int status;
    if (!p->pid) return 0;
    kill(p->pid, SIGTERM);
    long long deadline = now_ms() + REDIS_PROC_STOP_MS;
    while (now_ms() < deadline) {
        pid_t w = waitpid(p->pid, &status, WNOHANG);
        if (w == p->pid || (w < 0 && errno == ECHILD)) {
            p->pid = 0;
            return 0;
        }
        sleep_ms(10);
    }
    return redis_proc_kill9(p);
}

int redis_proc_kill9(struct redis_proc *p) {
    int status;
    if (!p->pid) return 0;
    kill(p->pid, SIGKILL);
    while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {}
    p->pid = 0;
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

void redis_proc_destroy(struct redis_proc *p) {
    redis_proc_stop(p);
    if (p->dir[0]) nftw(p->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    p->dir[0] = '\0';
}
