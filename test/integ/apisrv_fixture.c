/* Integration-test fixture (see apisrv_fixture.h). */
#include "apisrv_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define APISRV_BIN "build/asan/pelotond"
#define APISRV_START_MS 20000 /* for the port file */
#define APISRV_STOP_MS 5000   /* after SIGTERM, then SIGKILL */
#define APISRV_EXEC_TRIES 20  /* exit 127: the binary is being relinked */
#define APISRV_MAX_ARGS 24

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *bin_path(void) {
    const char *b = getenv("PELOTOND");
    return b && b[0] ? b : APISRV_BIN;
}

/* extra with "@" replaced by the directory. */
static void expand(const struct apisrv *s, const char *extra, char *out, size_t cap) {
    size_t n = 0;
    for (const char *c = extra ? extra : ""; *c && n + sizeof s->dir < cap; c++) {
        if (*c == '@') n += (size_t)snprintf(out + n, cap - n, "%s", s->dir);
        else out[n++] = *c;
    }
    out[n] = 0;
}

/* The first lines of the log, on stderr. */
static void show_log(const struct apisrv *s) {
    fprintf(stderr, "pelotond did not start (log kept: %s):\n", s->log);
    FILE *f = fopen(s->log, "r");
    char line[512];
    for (int k = 0; f && k < 20 && fgets(line, sizeof line, f); k++) fprintf(stderr, "  | %s", line);
    if (f) fclose(f);
}

/* The child: output to the log, then exec; never returns. */
static void exec_pelotond(const struct apisrv *s, int port, const char *extra) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    char portarg[32], pfarg[128], redis[64], extras[512];
    snprintf(portarg, sizeof portarg, "--port=%d", port);
    snprintf(pfarg, sizeof pfarg, "--port-file=%s/port", s->dir);
    snprintf(redis, sizeof redis, "--redis=127.0.0.1:%d", s->rf.proc.port);
    const char *bin = bin_path();
    char *argv[APISRV_MAX_ARGS] = {(char *)bin, "--roles=apiserver", portarg, pfarg, redis, "--crds=",
                                   "--watch-poll-ms=5"};
    int argc = 7;
    /* open to requests without credentials unless the test gives some (docs/security.md) */
    if (!extra || (!strstr(extra, "--token-file") && !strstr(extra, "--client-ca-file"))) argv[argc++] = "--insecure-allow-anonymous";
    snprintf(extras, sizeof extras, "%s", extra);
    for (char *sv, *t = strtok_r(extras, " ", &sv); t && argc < APISRV_MAX_ARGS - 1; t = strtok_r(NULL, " ", &sv))
        argv[argc++] = t;
    argv[argc] = NULL;
    execv(bin, argv);
    fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
    _exit(127);
}

/* One fork+exec and the wait for the port file. 0, -EAGAIN (exit 127),
 * -ECHILD (other early exit) or -ETIMEDOUT (killed). */
static int spawn_once(struct apisrv *s, int port, const char *extra, bool want_tls) {
    char portfile[128];
    snprintf(portfile, sizeof portfile, "%s/port", s->dir);
    unlink(portfile);
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) exec_pelotond(s, port, extra);
    s->pid = pid;
    double end = mono_ms() + APISRV_START_MS;
    while (mono_ms() < end) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            return WIFEXITED(st) && WEXITSTATUS(st) == 127 ? -EAGAIN : -ECHILD;
        }
        FILE *f = fopen(portfile, "r");
        if (f) {
            int p = 0, tp = 0;
            int n = fscanf(f, "%d %d", &p, &tp);
            fclose(f);
            if (n >= 1 && p > 0 && (n == 2 || !want_tls)) { /* "PLAIN [TLS]" */
                s->port = p;
                s->tls_port = n == 2 ? tp : 0;
                snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", p);
                return 0;
            }
        }
        usleep(20000);
    }
    fprintf(stderr, "pelotond: no port file after %d ms\n", APISRV_START_MS);
    apisrv_kill(s, SIGKILL);
    return -ETIMEDOUT;
}

int apisrv_spawn(struct apisrv *s, int port, const char *extra) {
    if (s->pid > 0) return -EBUSY;
    char ex[512];
    expand(s, extra, ex, sizeof ex);
    bool want_tls = strstr(ex, "--tls-port") != NULL;
    int rc = spawn_once(s, port, ex, want_tls);
    for (int i = 1; rc == -EAGAIN && i < APISRV_EXEC_TRIES; i++) {
        usleep(500000);
        rc = spawn_once(s, port, ex, want_tls);
    }
    if (rc) {
        s->keep_log = true;
        show_log(s);
    }
    return rc == -EAGAIN ? -ECHILD : rc;
}

void apisrv_kill(struct apisrv *s, int sig) {
    if (s->pid <= 0) return;
    kill(s->pid, sig);
    double end = mono_ms() + APISRV_STOP_MS;
    int st;
    while (mono_ms() < end) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
        usleep(10000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    s->pid = 0;
}

/* Removes path and everything under it, but not keep (a full path, or NULL). */
static void remove_tree(const char *path, const char *keep) {
    if (keep && strcmp(path, keep) == 0) return;
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[512];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", path, de->d_name) < sizeof p) remove_tree(p, keep);
    }
    closedir(d);
    rmdir(path); /* fails, harmlessly, around a kept log */
}

void apisrv_stop(struct apisrv *s) {
    apisrv_kill(s, SIGTERM);
    redis_fixture_stop(&s->rf);
    if (!s->dir[0]) return;
    bool keep = s->keep_log || getenv("APISRV_KEEP_LOGS") || getenv("KEEP_LOGS");
    remove_tree(s->dir, keep ? s->log : NULL);
    s->dir[0] = 0;
}

int apisrv_start(struct apisrv *s, const char *extra) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/apisrv-test-XXXXXX");
    if (!mkdtemp(s->dir)) {
        s->dir[0] = 0;
        return -errno;
    }
    snprintf(s->log, sizeof s->log, "%s/pelotond.log", s->dir);
    char p[128];
    snprintf(p, sizeof p, "%s/token", s->dir);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("test-token\n", f);
        fclose(f);
    }
    int rc = redis_fixture_start(&s->rf, NULL);
    if (!rc) rc = apisrv_spawn(s, 0, extra);
    if (rc) apisrv_stop(s);
    return rc;
}
