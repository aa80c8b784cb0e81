/* The audit log (shim_auth.h): one audit.k8s.io/v1 Event per request, as a
 * JSON line, at level Metadata (who, what, the answer's code; never a body,
 * a header or a token). Lines gather in a buffer written when it fills, at
 * most AUDIT_FLUSH_MS after its first line, and at close; the file is
 * rotated before a write would take it past max_bytes: PATH becomes PATH.1,
 * PATH.1 PATH.2, … and the one past max_backups is removed. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "shim_auth.h"

#define AUDIT_BUF (64 * 1024)
#define AUDIT_FLUSH_MS 200
#define AUDIT_MAX_LINE (16 * 1024) /* a record is cut (its URI first) to stay under this */

struct shim_audit {
    char *path;
    int fd;
    size_t size, max_bytes;
    int max_backups;
    char *buf;
    size_t len;
    uint64_t seq, salt[2];
    uv_timer_t *timer; /* NULL without a loop: every line is written at once */
    uint64_t lines, rotations;
};

struct audit_rec {
    uint64_t t0_ns;
    struct timespec t0;
    size_t len;
    const char *decision; /* static */
    char line[]; /* the record up to its responseStatus */
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int open_file(struct shim_audit *a) {
    a->fd = open(a->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (a->fd < 0) return -errno;
    struct stat st;
    a->size = fstat(a->fd, &st) ? 0 : (size_t)st.st_size;
    return 0;
}

static void rotate(struct shim_audit *a) {
    size_t pl = strlen(a->path) + 16;
    char from[pl], to[pl];
    snprintf(to, pl, "%s.%d", a->path, a->max_backups);
    unlink(to);
    for (int i = a->max_backups - 1; i >= 1; i--) {
        snprintf(from, pl, "%s.%d", a->path, i);
        snprintf(to, pl, "%s.%d", a->path, i + 1);
        rename(from, to);
    }
    snprintf(to, pl, "%s.1", a->path);
    close(a->fd);
    rename(a->path, to);
    a->rotations++;
    if (open_file(a)) fprintf(stderr, "level=error msg=\"audit: cannot reopen %s: %s\"\n", a->path, strerror(errno));
}

void shim_audit_flush(struct shim_audit *a) {
    if (!a || !a->len) return;
    for (size_t off = 0; off < a->len && a->fd >= 0;) {
        ssize_t w = write(a->fd, a->buf + off, a->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            fprintf(stderr, "level=error msg=\"audit: write to %s failed: %s\" lost_bytes=%zu\n", a->path,
                    w < 0 ? strerror(errno) : "short", a->len - off);
            break;
        }
        off += (size_t)w;
        a->size += (size_t)w;
    }
    a->len = 0;
    if (a->timer) uv_timer_stop(a->timer);
}

static void on_timer(uv_timer_t *t) { shim_audit_flush(t->data); }

struct shim_audit *shim_audit_open(const struct audit_config *cfg, uv_loop_t *loop, char *err, size_t errlen) {
    if (!cfg || !cfg->path || !cfg->path[0]) return NULL;
    struct shim_audit *a = calloc(1, sizeof *a);
    if (!a || !(a->path = strdup(cfg->path)) || !(a->buf = malloc(AUDIT_BUF))) {
        snprintf(err, errlen, "audit: out of memory");
        shim_audit_close(a);
        return NULL;
    }
    a->max_bytes = cfg->max_bytes ? cfg->max_bytes : 100u << 20;
    if (a->max_bytes < 4096) a->max_bytes = 4096;
    a->max_backups = cfg->max_backups > 0 ? cfg->max_backups : 5;
    if (a->max_backups > 1000) a->max_backups = 1000;
    int rc = open_file(a);
    if (rc) {
        snprintf(err, errlen, "audit log %s: %s", cfg->path, strerror(-rc));
        a->fd = -1;
        shim_audit_close(a);
        return NULL;
    }
    if (getrandom(a->salt, sizeof a->salt, 0) != sizeof a->salt) a->salt[0] = now_ns(), a->salt[1] = (uint64_t)getpid();
    if (loop && (a->timer = malloc(sizeof *a->timer))) {
        uv_timer_init(loop, a->timer);
        a->timer->data = a;
        uv_unref((uv_handle_t *)a->timer);
    }
    return a;
}

static void timer_closed(uv_handle_t *h) { free(h); }

void shim_audit_close(struct shim_audit *a) {
    if (!a) return;
    shim_audit_flush(a);
    if (a->timer) {
        a->timer->data = NULL;
        uv_close((uv_handle_t *)a->timer, timer_closed);
    }
    if (a->fd >= 0 && a->path) close(a->fd);
    free(a->path);
    free(a->buf);
    free(a);
}

/* ---- building a line ---- */

struct sb {
    char *p;
    size_t len, cap;
};

static void put(struct sb *b, const char *s, size_t n) {
    if (b->len + n >= b->cap) n = b->len < b->cap - 1 ? b->cap - 1 - b->len : 0;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void puts_(struct sb *b, const char *s) { put(b, s, strlen(s)); }

/* s as a JSON string's content: quotes, backslashes and control bytes
 * escaped; bytes >= 0x80 passed (names are UTF-8; a stray byte is the
 * reader's to replace). At most max bytes of s. */
static void esc(struct sb *b, const char *s, size_t max) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; s[i] && i < max; i++) {
        size_t run = 0; /* bytes that need no escape, copied at once */
        while (i + run < max && (unsigned char)s[i + run] >= 0x20 && s[i + run] != '"' && s[i + run] != '\\' &&
               s[i + run] != 0x7f)
            run++;
        if (run) {
            put(b, s + i, run);
            i += run - 1;
            continue;
        }
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(b, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(b, e, 6);
        } else {
            put(b, (const char *)&c, 1);
        }
    }
}

static void str(struct sb *b, const char *key, const char *v) {
    puts_(b, "\"");
    puts_(b, key);
    puts_(b, "\":\"");
    esc(b, v, 1024);
    puts_(b, "\"");
}

static void stamp(struct sb *b, const struct timespec *ts) {
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    char t[96];
    snprintf(t, sizeof t, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ts->tv_nsec / 1000) % 1000000);
    puts_(b, t);
}

struct audit_rec *shim_audit_begin(struct shim_audit *a, const struct http_request *req, const struct auth_user *u,
                                   const struct authz_attrs *at, const char *decision) {
    if (!a) return NULL;
    enum { CAP = AUDIT_MAX_LINE - 512 };
    char line[CAP]; /* built here, kept in an allocation of its size */
    struct sb b = {line, 0, CAP};
    uint64_t t0_ns = now_ns();
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    uint64_t x = a->salt[0] ^ (++a->seq * 0x9e3779b97f4a7c15ull), y = a->salt[1] + a->seq;
    char id[48];
    snprintf(id, sizeof id, "%08x-%04x-4%03x-%04x-%012llx", (unsigned)(x >> 32), (unsigned)(x >> 16) & 0xffff,
             (unsigned)x & 0xfff, (unsigned)((y >> 48) & 0x3fff) | 0x8000, (unsigned long long)(y & 0xffffffffffffull));
    puts_(&b, "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":\"Metadata\",");
    str(&b, "auditID", id);
    puts_(&b, ",\"stage\":\"ResponseComplete\",\"requestURI\":\"");
    esc(&b, req->path, 4096);
    for (int i = 0; i < req->nargs; i++) { /* decoded, as the handler saw them */
        puts_(&b, i ? "&" : "?");
        esc(&b, req->arg_keys[i], 256);
        if (req->arg_values[i][0]) {
            puts_(&b, "=");
            esc(&b, req->arg_values[i], 1024);
        }
    }
    puts_(&b, "\",");
    str(&b, "verb", at->verb);
    puts_(&b, ",\"user\":{");
    str(&b, "username", u->name);
    if (u->uid && u->uid[0]) {
        puts_(&b, ",");
        str(&b, "uid", u->uid);
    }
    puts_(&b, ",\"groups\":[");
    for (int i = 0; i < u->ngroups; i++) {
        puts_(&b, i ? ",\"" : "\"");
        esc(&b, u->groups[i], 1024);
        puts_(&b, "\"");
    }
    puts_(&b, "]}");
    if (req->peer && req->peer[0]) {
        puts_(&b, ",\"sourceIPs\":[\"");
        esc(&b, req->peer, 64);
        puts_(&b, "\"]");
    }
    if (at->resource) {
        puts_(&b, ",\"objectRef\":{");
        str(&b, "resource", at->plural);
        if (at->ns[0]) puts_(&b, ","), str(&b, "namespace", at->ns);
        if (at->name[0]) puts_(&b, ","), str(&b, "name", at->name);
        puts_(&b, ",");
        str(&b, "apiGroup", at->group);
        puts_(&b, ",");
        str(&b, "apiVersion", at->version);
        if (at->sub[0]) puts_(&b, ","), str(&b, "subresource", at->sub);
        puts_(&b, "}");
    }
    struct audit_rec *r = malloc(sizeof *r + b.len);
    if (!r) return NULL;
    r->t0_ns = t0_ns;
    r->t0 = t0;
    r->decision = decision;
    memcpy(r->line, line, b.len);
    r->len = b.len;
    return r;
}

void shim_audit_end(struct shim_audit *a, struct audit_rec *r, int code) {
    if (!a || !r) {
        free(r);
        return;
    }
    char tail[512];
    struct sb b = {tail, 0, sizeof tail};
    uint64_t us = (now_ns() - r->t0_ns) / 1000;
    struct timespec end = r->t0;
    end.tv_nsec += (long)(us % 1000000) * 1000;
    end.tv_sec += (time_t)(us / 1000000) + end.tv_nsec / 1000000000;
    end.tv_nsec %= 1000000000;
    char num[96];
    snprintf(num, sizeof num, ",\"responseStatus\":{\"metadata\":{},\"code\":%d},\"requestReceivedTimestamp\":\"", code);
    puts_(&b, num);
    stamp(&b, &r->t0);
    puts_(&b, "\",\"stageTimestamp\":\"");
    stamp(&b, &end);
    puts_(&b, "\",\"annotations\":{");
    if (r->decision) {
        snprintf(num, sizeof num, "\"authorization.k8s.io/decision\":\"%s\",", r->decision);
        puts_(&b, num);
    }
    snprintf(num, sizeof num, "\"apiserver.latency.k8s.io/total\":\"%llu.%03llums\"}}\n",
             (unsigned long long)(us / 1000), (unsigned long long)(us % 1000));
    puts_(&b, num);
    size_t n = r->len + b.len;
    if (a->len + n > AUDIT_BUF || a->size + a->len + n > a->max_bytes) shim_audit_flush(a);
    if (a->size + n > a->max_bytes && a->size > 0) rotate(a);
    if (a->len == 0 && a->timer) uv_timer_start(a->timer, on_timer, AUDIT_FLUSH_MS, 0);
    memcpy(a->buf + a->len, r->line, r->len);
    memcpy(a->buf + a->len + r->len, tail, b.len);
    a->len += n;
    a->lines++;
    free(r);
    if (!a->timer) shim_audit_flush(a);
}
