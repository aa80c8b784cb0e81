/* What the controller roles share (ctl.h). */
#include "metrics.h"
#include "ctl.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/sds.h>

#include "podspec.h"
#include "store.h"

/* One line per error; the same error again within CTL_ERR_QUIET_MS is
 * counted, not logged (every command fails alike while Redis is away, and a
 * failover took ~45 lines in two seconds). The count is logged with that
 * error's next line, or before a different error's. */
#define CTL_ERR_QUIET_MS 5000
static void log_error(struct ctl_db *db, const char *msg) {
    uint64_t now = uv_hrtime() / 1000000;
    bool same = !strncmp(db->last_err, msg, sizeof db->last_err - 1);
    if (same && now - db->last_err_ms < CTL_ERR_QUIET_MS) {
        db->repeated++;
        return;
    }
    if (db->repeated && !same)
        fprintf(stderr, "level=error msg=\"redis: %s\" repeated=%u\n", db->last_err, db->repeated);
    if (db->repeated && same) fprintf(stderr, "level=error msg=\"redis: %s\" repeated=%u\n", msg, db->repeated);
    else fprintf(stderr, "level=error msg=\"redis: %s\"\n", msg);
    snprintf(db->last_err, sizeof db->last_err, "%s", msg);
    db->last_err_ms = now;
    db->repeated = 0;
}

/* ARGV[2..]: commands, each its argument count then its arguments; the
 * reply is the last one's. Refused: the commands are counted, not run. */
const char ctl_fence_script[] =
    "local held = redis.call('GET', KEYS[1]) "
    "local i, n, r = 2, 0, nil "
    "if held ~= ARGV[1] then "
    "  while i <= #ARGV do n = n + 1 i = i + tonumber(ARGV[i]) + 1 end "
    "  return redis.error_reply('" CTL_FENCE_REFUSED " ' .. KEYS[1] .. ' ' .. ARGV[1] .. ' ' .. (held or 'none') .. "
    "' ' .. n) end "
    "while i <= #ARGV do local k = tonumber(ARGV[i]) r = redis.call(unpack(ARGV, i + 1, i + k)) i = i + k + 1 end "
    "return r";

/* The hook of a refused fenced write; true when it was one. */
static bool fence_refused(struct ctl_db *db, const char *msg) {
    size_t n = sizeof CTL_FENCE_REFUSED - 1;
    if (strncmp(msg, CTL_FENCE_REFUSED, n) || msg[n] != ' ') return false;
    const char *key = msg + n + 1;
    size_t kl = strcspn(key, " ");
    for (int i = 0; i < CTL_FENCE_HOOKS; i++)
        if (db->hooks[i].fn && strlen(db->hooks[i].key) == kl && !strncmp(db->hooks[i].key, key, kl)) {
            db->hooks[i].fn(db->hooks[i].ud, msg);
            return true;
        }
    fprintf(stderr, "level=warn msg=\"redis: write refused, stale epoch\" refusal=\"%s\"\n", msg);
    return true;
}

int ctl_db_hook(struct ctl_db *db, const char *epoch_key, void (*fn)(void *ud, const char *refusal), void *ud) {
    for (int i = 0; i < CTL_FENCE_HOOKS; i++)
        if (!db->hooks[i].fn) {
            snprintf(db->hooks[i].key, sizeof db->hooks[i].key, "%s", epoch_key);
            db->hooks[i].fn = fn;
            db->hooks[i].ud = ud;
            return 0;
        }
    return -1;
}

void ctl_db_unhook(struct ctl_db *db, const char *epoch_key, void *ud) {
    for (int i = 0; i < CTL_FENCE_HOOKS; i++)
        if (db->hooks[i].fn && db->hooks[i].ud == ud && !strcmp(db->hooks[i].key, epoch_key))
            memset(&db->hooks[i], 0, sizeof db->hooks[i]);
}

/* Loads the scripts run by EVALSHA on the connection's server (at each
 * connection: a new primary after a failover may not have them). */
static void load_script(struct ctl_db *db, int i) {
    redisReply *rep = redisCommand(db->c, "SCRIPT LOAD %s", db->scripts[i]);
    if (rep && rep->type == REDIS_REPLY_STRING && rep->len < sizeof db->shas[i])
        snprintf(db->shas[i], sizeof db->shas[i], "%s", rep->str);
    else
        fprintf(stderr, "level=error msg=\"redis: cannot load a script\" error=\"%s\"\n",
                rep && rep->type == REDIS_REPLY_ERROR ? rep->str : db->c->errstr);
    freeReplyObject(rep);
}

static void load_scripts(struct ctl_db *db) {
    for (int i = 0; i < db->nscripts; i++) load_script(db, i);
    snprintf(db->fence_sha, sizeof db->fence_sha, "%s", db->shas[0]);
    db->reload = false;
}

int ctl_db_script(struct ctl_db *db, const char *text) {
    for (int i = 0; i < db->nscripts; i++)
        if (db->scripts[i] == text) return i;
    if (db->nscripts == CTL_SCRIPTS) return -1;
    db->scripts[db->nscripts] = text;
    ctl_redis_settle(db);
    if (!db->reading) load_script(db, db->nscripts);
    return db->nscripts++;
}

const char *ctl_db_sha(const struct ctl_db *db, int script) {
    return script >= 0 && script < db->nscripts ? db->shas[script] : "";
}

static void log_reply_error(struct ctl_db *db, redisReply *rep) {
    redisContext *c = db->c;
    if (!rep) log_error(db, c->errstr[0] ? c->errstr : "no reply");
    else if (rep->type == REDIS_REPLY_ERROR && fence_refused(db, rep->str)) {
        return;
    } else if (rep->type == REDIS_REPLY_ERROR) {
        if (!strncmp(rep->str, "NOSCRIPT", 8)) db->reload = true;
        log_error(db, rep->str);
        /* a primary demoted by a failover: its writes go elsewhere now */
        if (!strncmp(rep->str, "READONLY", 8)) db->replica = true;
    }
}

/* A new connection when the one held is broken or reaches a replica (at most
 * every CTL_RECONNECT_MS; through Sentinel when configured, store.h): what
 * was deferred on the old one is settled or lost first, never mixed in. Not
 * while a pipeline of reads awaits its replies. */
#define CTL_RECONNECT_MS 500
static void heal(struct ctl_db *db) {
    if (db->reload && !db->c->err && !db->replica && !db->reading && !db->deferred) load_scripts(db);
    if ((!db->c->err && !db->replica) || db->reading) return;
    uint64_t now = uv_hrtime() / 1000000;
    if (db->tried_ms && now - db->tried_ms < CTL_RECONNECT_MS) return;
    db->tried_ms = now;
    ctl_redis_settle(db);
    redisContext *r = store_redis_connect(db->host, db->port, 2000);
    if (!r) return;
    if (r->err) {
        if (!db->c->err) { /* the replica still answers reads; keep it until a primary does */
            redisFree(r);
            return;
        }
        redisFree(db->c);
        db->c = r; /* commands fail fast on it until the next attempt */
        return;
    }
    redisSetTimeout(r, (struct timeval){5, 0});
    redisFree(db->c);
    db->c = r;
    db->replica = false;
    db->deferred = 0;
    db->gen++;
    load_scripts(db);
    fprintf(stderr, "level=info msg=\"redis: reconnected\"\n");
}

static void fence_flush(struct ctl_db *db);

static void on_flush(uv_check_t *h) {
    struct ctl_db *db = h->data;
    uv_check_stop(h);
    ctl_redis_settle(db);
}

static void flush_closed(uv_handle_t *h) { free(h); }

struct ctl_db *ctl_db_open(uv_loop_t *loop, const char *addr, char *err, size_t errlen) {
    char host[256];
    int port;
    if (store_parse_addr(addr, host, sizeof host, &port)) {
        snprintf(err, errlen, "redis address \"%s\": expected host:port or unix:///path", addr);
        return NULL;
    }
    redisContext *r = store_redis_connect(host, port, 2000);
    if (!r || r->err) {
        snprintf(err, errlen, "redis %s: %s", addr, r ? r->errstr : "out of memory");
        if (r) redisFree(r);
        return NULL;
    }
    redisSetTimeout(r, (struct timeval){5, 0});
    struct ctl_db *db = calloc(1, sizeof *db);
    if (db) {
        snprintf(db->host, sizeof db->host, "%s", host);
        db->port = port;
    }
    uv_check_t *flush = malloc(sizeof *flush);
    if (!db || !flush) {
        snprintf(err, errlen, "out of memory");
        free(db);
        free(flush);
        redisFree(r);
        return NULL;
    }
    db->c = r;
    db->flush = flush;
    db->scripts[db->nscripts++] = ctl_fence_script;
    load_scripts(db);
    uv_check_init(loop, flush);
    flush->data = db;
    return db;
}

void ctl_db_close(struct ctl_db *db) {
    if (!db) return;
    ctl_redis_settle(db);
    uv_check_stop(db->flush);
    uv_close((uv_handle_t *)db->flush, flush_closed);
    redisFree(db->c);
    free(db->batch.buf);
    free(db);
}

void ctl_redis_settle(struct ctl_db *db) {
    fence_flush(db);
    while (db->deferred) {
        void *rep = NULL;
        db->deferred--;
        if (redisGetReply(db->c, &rep) != REDIS_OK) { /* the connection is gone: nothing more will come */
            log_reply_error(db, NULL);
            db->deferred = 0;
            break;
        }
        metrics_inc(db->m_replies);
        if (((redisReply *)rep)->type == REDIS_REPLY_ERROR) {
            metrics_inc(db->m_errors);
            log_reply_error(db, rep);
        }
        freeReplyObject(rep);
    }
}

redisReply *ctl_redis(struct ctl_db *db, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = ctl_vredis(db, fmt, ap);
    va_end(ap);
    return rep;
}

/* A synchronous command's reply, counted; NULL (logged, freed) for none or an error. */
static redisReply *checked(struct ctl_db *db, redisReply *rep) {
    metrics_inc(db->m_replies);
    if (!rep || rep->type == REDIS_REPLY_ERROR) {
        metrics_inc(db->m_errors);
        log_reply_error(db, rep);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

redisReply *ctl_redis_argv(struct ctl_db *db, int argc, const char **argv, const size_t *argl) {
    ctl_redis_settle(db);
    heal(db);
    return checked(db, redisCommandArgv(db->c, argc, argv, argl));
}

redisReply *ctl_vredis(struct ctl_db *db, const char *fmt, va_list ap) {
    ctl_redis_settle(db);
    heal(db);
    return checked(db, redisvCommand(db->c, fmt, ap));
}

/* ---- commands in Redis' wire format ---- */

#define RESP_ARGS 64
#define RESP_BYTES 4096

struct resp_args {
    char buf[RESP_BYTES];
    size_t len;
    size_t start[RESP_ARGS + 1];
    int n;
};

static int arg_put(struct resp_args *a, const char *p, size_t n) {
    if (a->len + n > sizeof a->buf) return -1;
    memcpy(a->buf + a->len, p, n);
    a->len += n;
    return 0;
}

/* "<mark><n>\r\n" at out (at most 24 bytes); its length. */
static size_t put_count(char *out, char mark, size_t n) {
    char digits[24];
    size_t k = 0;
    do digits[k++] = (char)('0' + n % 10);
    while ((n /= 10) && k < sizeof digits);
    size_t len = 0;
    out[len++] = mark;
    while (k) out[len++] = digits[--k];
    out[len++] = '\r';
    out[len++] = '\n';
    return len;
}

int ctl_resp_vformat(char *out, size_t cap, const char *fmt, va_list ap) {
    struct resp_args a;
    a.len = 0;
    a.n = 0;
    bool touched = false;
    for (const char *c = fmt; *c; c++) {
        if (*c == ' ') {
            if (touched) {
                if (a.n == RESP_ARGS) return -1;
                a.start[++a.n] = a.len;
                touched = false;
            }
            continue;
        }
        touched = true;
        if (*c != '%' || !c[1]) {
            if (arg_put(&a, c, 1)) return -1;
            continue;
        }
        const char *spec = c + 1;
        char num[64];
        int k = -1;
        if (*spec == '%') {
            k = snprintf(num, sizeof num, "%%");
        } else if (*spec == 's') {
            const char *v = va_arg(ap, const char *);
            if (!v || arg_put(&a, v, strlen(v))) return -1;
        } else if (!strncmp(spec, "lld", 3)) {
            k = snprintf(num, sizeof num, "%lld", va_arg(ap, long long)), spec += 2;
        } else if (!strncmp(spec, "llu", 3)) {
            k = snprintf(num, sizeof num, "%llu", va_arg(ap, unsigned long long)), spec += 2;
        } else if (!strncmp(spec, "ld", 2)) {
            k = snprintf(num, sizeof num, "%ld", va_arg(ap, long)), spec += 1;
        } else if (!strncmp(spec, "lu", 2)) {
            k = snprintf(num, sizeof num, "%lu", va_arg(ap, unsigned long)), spec += 1;
        } else if (*spec == 'd' || *spec == 'i') {
            k = snprintf(num, sizeof num, "%d", va_arg(ap, int));
        } else if (*spec == 'u') {
            k = snprintf(num, sizeof num, "%u", va_arg(ap, unsigned));
        } else if (!strncmp(spec, ".0f", 3)) {
            k = snprintf(num, sizeof num, "%.0f", va_arg(ap, double)), spec += 2;
        } else {
            return -1; /* a conversion this does not know: hiredis formats it */
        }
        if (k >= 0 && ((size_t)k >= sizeof num || arg_put(&a, num, (size_t)k))) return -1;
        c = spec;
    }
    if (touched) {
        if (a.n == RESP_ARGS) return -1;
        a.start[++a.n] = a.len;
    }
    a.start[0] = 0;
    size_t len = 0;
    if (cap < 16) return -1;
    len = put_count(out, '*', (size_t)a.n);
    for (int i = 0; i < a.n; i++) {
        size_t n = a.start[i + 1] - a.start[i];
        if (len + 24 + n + 2 > cap) return -1;
        len += put_count(out + len, '$', n);
        memcpy(out + len, a.buf + a.start[i], n);
        len += n;
        memcpy(out + len, "\r\n", 2);
        len += 2;
    }
    return (int)len;
}

/* Deferred commands leave once this much waits: an admission round over a
 * backlog of thousands of gangs would otherwise grow hiredis' output buffer
 * to megabytes, a megabyte of growth at a time, copying it at each step. */
#define CTL_DEFER_SEND_BYTES (64u << 10)

/* hiredis starts an empty output buffer after each complete write, which
 * then grows by doubling, a copy at each step, to the send threshold; one
 * allocation of about the threshold replaces the steps. */
static void reserve_obuf(redisContext *c, size_t add) {
    size_t len = sdslen(c->obuf);
    if (sdsavail(c->obuf) >= add || len + add > CTL_DEFER_SEND_BYTES) return;
    size_t half = CTL_DEFER_SEND_BYTES / 2 + 1024; /* hiredis doubles what it is asked for */
    sds s = sdsMakeRoomFor(c->obuf, len < half ? half - len : add);
    if (s) c->obuf = s; /* on failure the old buffer stays and the append grows it */
}

/* Appends a command to db's output: formatted here when it can be (hiredis'
 * own formatting was a tenth of the controllers' CPU), else by hiredis.
 * `batch`: one of many deferred commands, for which the buffer is sized at
 * once. */
static int append_command(struct ctl_db *db, bool batch, const char *fmt, va_list ap) {
    char out[RESP_BYTES + 16 * RESP_ARGS];
    va_list mine;
    va_copy(mine, ap);
    int n = ctl_resp_vformat(out, sizeof out, fmt, mine);
    va_end(mine);
    if (n > 0) {
        if (batch) reserve_obuf(db->c, (size_t)n);
        return redisAppendFormattedCommand(db->c, out, (size_t)n);
    }
    return redisvAppendCommand(db->c, fmt, ap);
}

/* ---- fenced writes: a turn's writes of one term go as one script call ---- */

/* Room for n more bytes in b; -1 when out of memory. */
static int batch_reserve(struct ctl_fence_batch *b, size_t n) {
    if (b->len + n <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    char *nb = realloc(b->buf, cap);
    if (!nb) return -1;
    b->buf = nb;
    b->cap = cap;
    return 0;
}

/* The batch as one EVALSHA appended to the connection's output; its reply
 * is read as a deferred one's. */
static void fence_flush(struct ctl_db *db) {
    struct ctl_fence_batch *b = &db->batch;
    if (!b->cmds) return;
    char head[512], num[24];
    int nl = snprintf(num, sizeof num, "%lld", b->epoch);
    int hl = snprintf(head, sizeof head, "*%u\r\n$7\r\nEVALSHA\r\n$%zu\r\n%s\r\n$1\r\n1\r\n$%zu\r\n%s\r\n$%d\r\n%s\r\n",
                      5 + b->args, strlen(db->fence_sha), db->fence_sha, strlen(b->key), b->key, nl, num);
    /* one command: the head and the batch are bytes in a row on the output */
    if (hl <= 0 || (size_t)hl >= sizeof head || redisAppendFormattedCommand(db->c, head, (size_t)hl) != REDIS_OK ||
        redisAppendFormattedCommand(db->c, b->buf, b->len) != REDIS_OK)
        log_reply_error(db, NULL);
    else if (db->deferred++ == 0)
        uv_check_start(db->flush, on_flush);
    b->len = b->cmds = b->args = 0;
}

/* Adds a command (fmt, ap) to the batch of (key, epoch); -1 when it cannot be formatted. */
static int fence_add(struct ctl_db *db, const char *key, long long epoch, const char *fmt, va_list ap) {
    struct ctl_fence_batch *b = &db->batch;
    if (b->cmds && (b->epoch != epoch || strcmp(b->key, key))) fence_flush(db);
    char out[RESP_BYTES + 16 * RESP_ARGS], *cmd = out, *big = NULL;
    va_list mine;
    va_copy(mine, ap);
    int n = ctl_resp_vformat(out, sizeof out, fmt, mine);
    va_end(mine);
    if (n <= 0 && (n = redisvFormatCommand(&big, fmt, ap)) <= 0) return -1;
    if (big) cmd = big;
    /* "*<argc>\r\n" then the arguments: argc becomes a bulk string of its own */
    char *end;
    long argc = strtol(cmd + 1, &end, 10);
    size_t skip = (size_t)(end - cmd) + 2, body = (size_t)n - skip;
    int rc = batch_reserve(b, 48 + body);
    if (!rc) {
        b->len += (size_t)snprintf(b->buf + b->len, 48, "$%d\r\n%ld\r\n", snprintf(NULL, 0, "%ld", argc), argc);
        memcpy(b->buf + b->len, cmd + skip, body);
        b->len += body;
        if (!b->cmds) {
            snprintf(b->key, sizeof b->key, "%s", key);
            b->epoch = epoch;
        }
        b->cmds++;
        b->args += 1 + (unsigned)argc;
    }
    if (big) redisFreeCommand(big);
    return rc;
}

int ctl_redis_vfenced(struct ctl_db *db, const char *epoch_key, long long epoch, const char *fmt, va_list ap) {
    heal(db);
    if (fence_add(db, epoch_key, epoch, fmt, ap)) {
        log_reply_error(db, NULL);
        return -1;
    }
    if (db->batch.len >= CTL_DEFER_SEND_BYTES) fence_flush(db);
    else uv_check_start(db->flush, on_flush); /* the turn's end sends it */
    return 0;
}

redisReply *ctl_redis_vfenced_now(struct ctl_db *db, const char *epoch_key, long long epoch, const char *fmt,
                                  va_list ap) {
    ctl_redis_settle(db);
    heal(db);
    if (fence_add(db, epoch_key, epoch, fmt, ap)) {
        log_reply_error(db, NULL);
        return NULL;
    }
    unsigned before = db->deferred;
    fence_flush(db);
    if (db->deferred == before) return NULL; /* not sent (logged) */
    db->deferred--; /* its reply is read here */
    void *rep = NULL;
    if (redisGetReply(db->c, &rep) != REDIS_OK) rep = NULL;
    return checked(db, rep);
}

void ctl_redis_defer(struct ctl_db *db, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ctl_redis_vdefer(db, fmt, ap);
    va_end(ap);
}

void ctl_redis_vdefer(struct ctl_db *db, const char *fmt, va_list ap) {
    fence_flush(db); /* in the order they were made */
    heal(db);
    int rc = append_command(db, true, fmt, ap);
    if (rc != REDIS_OK) {
        log_reply_error(db, NULL);
        return;
    }
    if (db->deferred++ == 0) uv_check_start(db->flush, on_flush);
    if (sdslen(db->c->obuf) >= CTL_DEFER_SEND_BYTES) {
        /* sent now, answers read at the settle (Redis keeps them meanwhile) */
        int done = 0;
        while (!done)
            if (redisBufferWrite(db->c, &done) != REDIS_OK) {
                log_reply_error(db, NULL);
                break;
            }
    }
}

void ctl_redis_append(struct ctl_db *db, const char *fmt, ...) {
    ctl_redis_settle(db);
    heal(db);
    va_list ap;
    va_start(ap, fmt);
    if (append_command(db, false, fmt, ap) != REDIS_OK) log_reply_error(db, NULL);
    else db->reading++;
    va_end(ap);
}

redisReply *ctl_redis_reply(struct ctl_db *db) {
    void *rep = NULL;
    metrics_inc(db->m_replies);
    if (db->reading) db->reading--;
    if (redisGetReply(db->c, &rep) != REDIS_OK) {
        metrics_inc(db->m_errors);
        log_reply_error(db, NULL);
        return NULL;
    }
    if (((redisReply *)rep)->type == REDIS_REPLY_ERROR) metrics_inc(db->m_errors);
    return rep;
}

const struct kc_informer_opts ctl_pods_slim = {.keys_only = true, .transform = pod_slim, .keep = pod_slim_keep};

void ctl_pod_event(struct kclient *kc, const char *component, const char *ns, const char *pod, const char *uid,
                   const char *type, const char *reason, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctl_event_post(kc, component, "v1", "Pod", ns, pod, uid, type, reason, msg);
}

void ctl_object_event(struct kclient *kc, const char *component, const char *api_version, const char *kind,
                      const char *ns, const char *name, const char *uid, const char *type, const char *reason,
                      const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctl_event_post(kc, component, api_version, kind, ns, name, uid, type, reason, msg);
}
