/* The store over a synchronous hiredis connection: connect, load scripts,
 * send the commands built by store_codec.c, decode with the same file, and
 * run the read-modify-write loops of update and delete (read the object,
 * shape the new one in C, compare-and-set it by resourceVersion on the
 * server; retry a bounded number of times only when the caller gave no
 * resourceVersion precondition). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "metrics.h"
#include "store_int.h"
#include "unixpath.h"

#define STORE_CAS_ATTEMPTS 16
#define STORE_HISTORY_MAX_SCAN 100000

struct store {
    redisContext *c;
    struct metrics_series *m_replies, *m_errors; /* store_set_metrics */
    char host[256];
    int port;
    int connect_timeout_ms, command_timeout_ms;
    int wait_replicas, wait_timeout_ms; /* store_options */
    int replicas;                       /* online at the primary when last counted */
    uint64_t replicas_ms;               /* when; 0: count on the next write (a new connection) */
    struct store_cfg cfg;
    struct store_rng rng;
    store_write_hook_fn hook;
    void *hook_ud;
    char err[STORE_ERRMSG_MAX];
};

void store_set_write_hook(struct store *s, store_write_hook_fn fn, void *ud) {
    s->hook = fn;
    s->hook_ud = ud;
}

/* Reports a stored write to the hook, with its bytes. */
static void report(struct store *s, const char *res, const char *ns, enum store_event_type type, uint64_t rv,
                   const json_t *obj, const struct store_blob *b) {
    if (!s->hook) return;
    size_t len = 0;
    char *json = store_blob_final(b, rv, &len);
    s->hook(s->hook_ud, res, ns, type, rv, obj, json, len);
    free(json);
}

void store_options_init(struct store_options *o) {
    memset(o, 0, sizeof *o);
    o->prefix = "pc:";
    o->history_max = STORE_DEFAULT_HISTORY;
    o->history_exact = 0;
    o->history_seconds = STORE_DEFAULT_HISTORY_SECONDS;
    o->max_object_bytes = STORE_MAX_OBJECT_BYTES;
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 10000;
}

const char *store_errmsg(const struct store *s) { return s ? s->err : "no store"; }

const char *store_reason(int rc) {
    switch (rc) {
    case 0: return "";
    case -EEXIST: return "AlreadyExists";
    case -ENOENT: return "NotFound";
    case STORE_ECONFLICT: return "Conflict";
    case STORE_NO_NAMESPACE: return "NotFound";
    case STORE_NS_TERMINATING: return "Forbidden";
    case STORE_EFENCED: return "Conflict";
    case -ESTALE: return "Expired";
    case -EINVAL: return "Invalid";
    case -E2BIG: return "RequestEntityTooLarge";
    default: return "InternalError";
    }
}

int store_http_code(int rc) {
    switch (rc) {
    case 0: return 200;
    case -EEXIST: return 409;
    case -ENOENT: return 404;
    case STORE_ECONFLICT: return 409;
    case STORE_NO_NAMESPACE: return 404;
    case STORE_NS_TERMINATING: return 403;
    case STORE_EFENCED: return 409;
    case -ESTALE: return 410;
    case -EINVAL: return 422;
    case -E2BIG: return 413;
    default: return 500;
    }
}

const char *store_event_type_name(enum store_event_type t) {
    switch (t) {
    case STORE_ADDED: return "ADDED";
    case STORE_MODIFIED: return "MODIFIED";
    case STORE_DELETED: return "DELETED";
    }
    return "UNKNOWN";
}

static struct timeval ms_tv(int ms) {
    return (struct timeval){.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
}

static int fail(struct store *s, int rc, const char *msg) {
    snprintf(s->err, sizeof s->err, "%s", msg);
    return rc;
}

static int load_scripts(struct store *s) {
    for (int i = 0; i < STORE_NSCRIPTS; i++) {
        redisReply *r = redisCommand(s->c, "SCRIPT LOAD %s", store_scripts[i]);
        if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
            store_reply_error(r ? r : NULL, s->err, sizeof s->err);
            if (r) freeReplyObject(r);
            return -EIO;
        }
        if (memcmp(s->cfg.sha[i], r->str, 40) != 0) { /* the async path names scripts by the same hash */
            snprintf(s->err, sizeof s->err, "redis: script %d loaded as %.40s, expected %s", i, r->str, s->cfg.sha[i]);
            freeReplyObject(r);
            return -EIO;
        }
        freeReplyObject(r);
    }
    return 0;
}

static uint64_t now_ms(void) {
    struct timeval t;
    gettimeofday(&t, NULL);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_usec / 1000;
}

/* The writes sent on this connection reached every replica online at the
 * primary, and at least wait_replicas (or no wait is asked): 0, else -EIO
 * with s->err. The Sentinels may promote any replica, so one that has not
 * got a write must not be left out of its acknowledgement. */
static int replicated(struct store *s) {
    if (!s->wait_replicas) return 0;
    uint64_t now = now_ms();
    if (s->c && (!s->replicas_ms || now - s->replicas_ms >= STORE_REPLICAS_REFRESH_MS)) {
        redisReply *i = redisCommand(s->c, "INFO replication");
        int n = store_replicas_online(i);
        if (i) freeReplyObject(i);
        if (n >= 0) {
            s->replicas = n;
            s->replicas_ms = now ? now : 1;
        }
    }
    int need = s->replicas > s->wait_replicas ? s->replicas : s->wait_replicas;
    redisReply *r = s->c ? redisCommand(s->c, "WAIT %d %d", need, s->wait_timeout_ms) : NULL;
    long long got = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    if (got >= need) return 0;
    snprintf(s->err, sizeof s->err,
             "redis: the write reached %lld of %d replica(s) within %d ms; it is not acknowledged (its outcome is "
             "unknown)", got < 0 ? 0 : got, need, s->wait_timeout_ms);
    return -EIO;
}

/* (Re)connects when there is no healthy connection. */
static int ensure_conn(struct store *s) {
    if (s->c && !s->c->err) return 0;
    if (s->c) redisFree(s->c);
    s->c = store_redis_connect(s->host, s->port, s->connect_timeout_ms);
    if (!s->c || s->c->err) {
        snprintf(s->err, sizeof s->err, "redis: cannot connect to %s (port %d): %s", s->host, s->port,
                 s->c ? s->c->errstr : "out of memory");
        return -EIO;
    }
    s->replicas_ms = 0; /* perhaps another primary: count its replicas again */
    if (redisSetTimeout(s->c, ms_tv(s->command_timeout_ms)) != REDIS_OK) {
        snprintf(s->err, sizeof s->err, "redis: cannot set timeout: %s", s->c->errstr);
        return -EIO;
    }
    return load_scripts(s);
}

static int is_noscript(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8);
}

/* Sends c and returns its reply (caller frees), or NULL with s->err set.
 * A write is never resent after a transport failure (its outcome is unknown). */
static redisReply *run(struct store *s, struct store_cmd *c, int *rc) {
    *rc = 0;
    if (c->oom) {
        *rc = fail(s, -ENOMEM, "out of memory building a command");
        return NULL;
    }
    if ((*rc = ensure_conn(s))) return NULL;
    redisReply *r = redisCommandArgv(s->c, c->argc, c->argv, c->argvlen);
    if (r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "READONLY", 8)) {
        /* a primary demoted by a failover refused it (nothing was written):
         * once more on a new connection, to the primary of now */
        freeReplyObject(r);
        redisFree(s->c);
        s->c = NULL;
        if ((*rc = ensure_conn(s))) return NULL;
        r = redisCommandArgv(s->c, c->argc, c->argv, c->argvlen);
    }
    if (is_noscript(r)) { /* scripts flushed (SCRIPT FLUSH, restart): EVAL caches it again */
        freeReplyObject(r);
        store_cmd_as_eval(c);
        r = redisCommandArgv(s->c, c->argc, c->argv, c->argvlen);
    }
    metrics_inc(s->m_replies);
    if (!r || r->type == REDIS_REPLY_ERROR) metrics_inc(s->m_errors);
    if (!r) {
        snprintf(s->err, sizeof s->err, "redis: %s", s->c->errstr[0] ? s->c->errstr : "no reply");
        *rc = -EIO;
    }
    return r;
}

int store_raw(struct store *s, struct store_raw *out) {
    s->err[0] = '\0';
    *out = (struct store_raw){.prefix = s->cfg.prefix, .err = s->err, .errlen = sizeof s->err};
    int rc = ensure_conn(s);
    out->c = rc ? NULL : s->c;
    return rc;
}

void store_set_metrics(struct store *s, struct metrics_series *replies, struct metrics_series *errors) {
    s->m_replies = replies;
    s->m_errors = errors;
}

int store_open(const char *host, int port, const struct store_options *opt, struct store **out) {
    struct store_options def;
    *out = NULL;
    if (!opt) {
        store_options_init(&def);
        opt = &def;
    }
    if (!store_addr_ok(host, sizeof((struct store *)0)->host, port)) return -EINVAL;
    struct store *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    if (store_cfg_init(&s->cfg, opt)) {
        free(s);
        return -EINVAL;
    }
    snprintf(s->host, sizeof s->host, "%s", host);
    s->port = port;
    s->connect_timeout_ms = opt->connect_timeout_ms > 0 ? opt->connect_timeout_ms : 2000;
    s->command_timeout_ms = opt->command_timeout_ms > 0 ? opt->command_timeout_ms : 10000;
    s->wait_replicas = opt->wait_replicas > 0 ? opt->wait_replicas : 0;
    s->wait_timeout_ms = opt->wait_timeout_ms > 0 ? opt->wait_timeout_ms : 1000;
    int rc = ensure_conn(s);
    if (rc) {
        store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void store_close(struct store *s) {
    if (!s) return;
    if (s->c) redisFree(s->c);
    store_cfg_free(&s->cfg);
    free(s);
}

/* One compare-and-set (or create when expected_rv is NULL) of obj, the
 * compare-and-set made only while fence (NULL: none) holds; on success
 * obj's resourceVersion is the new one. */
static int write_obj(struct store *s, const char *res, const char *ns, const char *name,
                     json_t *obj, const char *expected_rv, int del, const struct store_fence *fence) {
    struct store_blob b;
    struct store_cmd c;
    int rc = store_blob_encode(&s->cfg, &s->rng, obj, &b, s->err, sizeof s->err);
    if (rc) return rc;
    if (expected_rv) store_build_cas(&c, &s->cfg, res, ns, name, expected_rv, del, &b, fence);
    else store_build_create(&c, &s->cfg, res, ns, name, &b);
    redisReply *r = run(s, &c, &rc);
    if (r) {
        uint64_t rv = 0;
        rc = store_decode_write(r, res, name, &rv, s->err, sizeof s->err);
        if (rc == STORE_EFENCED) store_fence_message(fence, s->err, sizeof s->err);
        if (!rc) rc = replicated(s);
        if (!rc) {
            store_set_rv(obj, rv);
            report(s, res, ns, !expected_rv ? STORE_ADDED : del ? STORE_DELETED : STORE_MODIFIED, rv, obj, &b);
        }
        freeReplyObject(r);
    }
    store_cmd_free(&c);
    store_blob_free(&b);
    return rc;
}

int store_create(struct store *s, const char *resource, const char *ns, const json_t *obj,
                 json_t **out) {
    json_t *c;
    const char *name;
    if (out) *out = NULL;
    s->err[0] = '\0';
    int rc = store_prepare_create(&s->rng, resource, ns, obj, &c, &name, s->err, sizeof s->err);
    if (rc) return rc;
    rc = write_obj(s, resource, ns, name, c, NULL, 0, NULL);
    if (rc || !out) json_decref(c);
    else *out = c;
    return rc;
}

/* Objects per script call in store_create_many: bounds the script's run time
 * (the server does nothing else meanwhile) and the command size. */
#define STORE_BATCH_MAX 256

int store_create_many(struct store *s, const char *resource, const char *ns,
                      json_t *const *objs, size_t n, int *rcs, json_t **outs) {
    s->err[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        rcs[i] = -EIO;
        if (outs) outs[i] = NULL;
    }
    if (n == 0) return 0;
    size_t nchunks = (n + STORE_BATCH_MAX - 1) / STORE_BATCH_MAX;
    json_t **prep = calloc(n, sizeof *prep);
    struct store_blob *blobs = calloc(n, sizeof *blobs);
    const struct store_blob **bp = calloc(n, sizeof *bp);
    const char **names = calloc(n, sizeof *names);
    size_t *idx = calloc(n, sizeof *idx);          /* chunk position -> object index */
    uint64_t *rvs = calloc(STORE_BATCH_MAX, sizeof *rvs);
    int *crc = calloc(STORE_BATCH_MAX, sizeof *crc);
    struct store_cmd *cmds = calloc(nchunks, sizeof *cmds);
    size_t *chunk_start = calloc(nchunks + 1, sizeof *chunk_start);
    char err[STORE_ERRMSG_MAX];
    int rc = 0;
    size_t nvalid = 0, nsent = 0;
    if (!prep || !blobs || !bp || !names || !idx || !rvs || !crc || !cmds || !chunk_start) {
        rc = fail(s, -ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = ensure_conn(s))) goto out;
    for (size_t i = 0; i < n; i++) {
        rcs[i] = store_prepare_create(&s->rng, resource, ns, objs[i], &prep[i], &names[nvalid], err,
                                      sizeof err);
        if (!rcs[i]) rcs[i] = store_blob_encode(&s->cfg, &s->rng, prep[i], &blobs[i], err, sizeof err);
        if (rcs[i]) {
            snprintf(s->err, sizeof s->err, "%s", err);
            continue;
        }
        bp[nvalid] = &blobs[i];
        idx[nvalid++] = i;
    }
    nchunks = (nvalid + STORE_BATCH_MAX - 1) / STORE_BATCH_MAX;
    for (size_t k = 0; k < nchunks; k++) {
        size_t from = k * STORE_BATCH_MAX, cnt = nvalid - from < STORE_BATCH_MAX ? nvalid - from
                                                                               : STORE_BATCH_MAX;
        chunk_start[k] = from;
        store_build_create_batch(&cmds[k], &s->cfg, resource, ns, names + from, bp + from, cnt);
        if (cmds[k].oom) {
            rc = fail(s, -ENOMEM, "out of memory building a command");
            goto out;
        }
    }
    chunk_start[nchunks] = nvalid;
    for (size_t k = 0; k < nchunks; k++) {
        if (redisAppendCommandArgv(s->c, cmds[k].argc, cmds[k].argv, cmds[k].argvlen) != REDIS_OK) {
            rc = fail(s, -ENOMEM, "out of memory queueing a command");
            goto out;
        }
        nsent++;
    }
    for (size_t k = 0; k < nchunks; k++) {
        size_t from = chunk_start[k], cnt = chunk_start[k + 1] - from;
        redisReply *r = NULL;
        if (redisGetReply(s->c, (void **)&r) != REDIS_OK || !r) {
            snprintf(s->err, sizeof s->err, "redis: %s", s->c->errstr);
            rc = -EIO;
            goto out;
        }
        nsent--;
        if (is_noscript(r)) { /* the pipeline stays in order: resend this chunk after it */
            freeReplyObject(r);
            continue;
        }
        int drc = store_decode_create_batch(r, cnt, crc, rvs, s->err, sizeof s->err);
        freeReplyObject(r);
        for (size_t j = 0; j < cnt; j++) {
            size_t i = idx[from + j];
            rcs[i] = drc ? drc : crc[j];
            if (!rcs[i]) {
                store_set_rv(prep[i], rvs[j]);
            } else if (rcs[i] == -EEXIST)
                snprintf(s->err, sizeof s->err, "%s \"%s\" already exists", resource, names[from + j]);
        }
        cmds[k].argc = -cmds[k].argc; /* mark as answered */
    }
    for (size_t k = 0; k < nchunks; k++) { /* NOSCRIPT chunks: EVAL, one by one */
        size_t from = chunk_start[k], cnt = chunk_start[k + 1] - from;
        if (cmds[k].argc < 0) continue;
        store_cmd_as_eval(&cmds[k]);
        int rrc, drc;
        redisReply *r = run(s, &cmds[k], &rrc);
        drc = r ? store_decode_create_batch(r, cnt, crc, rvs, s->err, sizeof s->err) : rrc;
        if (r) freeReplyObject(r);
        for (size_t j = 0; j < cnt; j++) {
            size_t i = idx[from + j];
            rcs[i] = drc ? drc : crc[j];
            if (!rcs[i]) store_set_rv(prep[i], rvs[j]);
        }
    }
    /* reported once acknowledged: replicated when that is asked */
    int wrc = replicated(s);
    for (size_t k = 0; k < nvalid; k++) {
        size_t i = idx[k];
        if (rcs[i]) continue;
        if (wrc) rcs[i] = wrc;
        else {
            int ok = 0;
            report(s, resource, ns, STORE_ADDED, store_parse_rv(store_meta_str(prep[i], "resourceVersion"), &ok),
                   prep[i], &blobs[i]);
        }
    }
    for (size_t i = 0; i < n && outs; i++) {
        if (rcs[i]) continue;
        outs[i] = prep[i];
        prep[i] = NULL;
    }
out:
    if (nsent && s->c) { /* replies we will never read: the connection is unusable */
        redisFree(s->c);
        s->c = NULL;
    }
    for (size_t k = 0; cmds && k < nchunks; k++) {
        if (cmds[k].argc < 0) cmds[k].argc = -cmds[k].argc;
        store_cmd_free(&cmds[k]);
    }
    for (size_t i = 0; prep && blobs && i < n; i++) {
        json_decref(prep[i]);
        store_blob_free(&blobs[i]);
    }
    free(prep);
    free(blobs);
    free(bp);
    free(names);
    free(idx);
    free(rvs);
    free(crc);
    free(cmds);
    free(chunk_start);
    return rc;
}

static int get_obj(struct store *s, const char *res, const char *ns, const char *name,
                   json_t **out) {
    struct store_cmd c;
    int rc;
    store_build_get(&c, &s->cfg, res, ns, name);
    redisReply *r = run(s, &c, &rc);
    if (r) {
        rc = store_decode_get(&s->cfg, r, out, s->err, sizeof s->err);
        if (rc == -ENOENT) snprintf(s->err, sizeof s->err, "%s \"%s\" not found", res, name);
        freeReplyObject(r);
    }
    store_cmd_free(&c);
    return rc;
}

int store_get(struct store *s, const char *resource, const char *ns, const char *name,
              json_t **out) {
    *out = NULL;
    s->err[0] = '\0';
    int rc = store_validate_key(resource, ns, name, s->err, sizeof s->err);
    return rc ? rc : get_obj(s, resource, ns, name, out);
}

int store_get_many(struct store *s, const char *resource, const char *const *members, size_t n, json_t **out) {
    s->err[0] = '\0';
    for (size_t i = 0; i < n; i++) out[i] = NULL;
    if (!n) return 0;
    if (n > STORE_GET_MANY_MAX) return fail(s, -EINVAL, "too many objects for one read");
    struct store_cmd c;
    int rc;
    store_build_get_many(&c, &s->cfg, resource, members, n);
    redisReply *r = run(s, &c, &rc);
    if (r && (r->type != REDIS_REPLY_ARRAY || r->elements != n)) rc = store_reply_error(r, s->err, sizeof s->err);
    for (size_t i = 0; r && !rc && i < n; i++) {
        if (r->element[i]->type == REDIS_REPLY_NIL) continue;
        rc = store_decode_get(&s->cfg, r->element[i], &out[i], s->err, sizeof s->err);
    }
    if (rc)
        for (size_t i = 0; i < n; i++) {
            json_decref(out[i]);
            out[i] = NULL;
        }
    freeReplyObject(r);
    store_cmd_free(&c);
    return rc;
}

/* Builds the object to write from the stored one: *next NULL means nothing
 * to write (the stored object is the answer); *del asks the script to remove it. */
typedef int (*prepare_fn)(const void *ctx, const char *resource, const char *ns, const json_t *cur, json_t **next,
                          int *del, char *err, size_t errlen);

/* Read, check preconditions, prepare, then compare-and-set on the read
 * resourceVersion; a lost race is retried unless the caller named a
 * resourceVersion (then it is a Conflict). */
static int cas_write(struct store *s, const char *resource, const char *ns, const char *name, const char *uid,
                     const char *rv, prepare_fn prepare, const void *ctx, json_t **out, int *deleted) {
    int rc = 0;
    for (int attempt = 0; attempt < STORE_CAS_ATTEMPTS; attempt++) {
        json_t *cur = NULL, *next = NULL;
        int del = 0;
        if ((rc = get_obj(s, resource, ns, name, &cur))) return rc;
        rc = store_check_preconditions(resource, cur, uid, rv, s->err, sizeof s->err);
        if (!rc) rc = prepare(ctx, resource, ns, cur, &next, &del, s->err, sizeof s->err);
        if (!rc && !next) {
            if (out) *out = cur;
            else json_decref(cur);
            return 0;
        }
        if (!rc) rc = write_obj(s, resource, ns, name, next, store_meta_str(cur, "resourceVersion"), del, NULL);
        json_decref(cur);
        if (!rc) {
            if (deleted) *deleted = del;
            if (out) *out = next;
            else json_decref(next);
            return 0;
        }
        json_decref(next);
        if (rc != STORE_ECONFLICT || (rv && rv[0])) return rc;
    }
    return rc;
}

static int prepare_update(const void *obj, const char *resource, const char *ns, const json_t *cur, json_t **next,
                          int *del, char *err, size_t errlen) {
    int unchanged = 0;
    int rc = store_prepare_update(resource, ns, cur, obj, next, &unchanged, del, err, errlen);
    if (!rc && unchanged) { /* an update that changes nothing writes nothing */
        json_decref(*next);
        *next = NULL;
    }
    return rc;
}

static int prepare_delete(const void *opts, const char *resource, const char *ns, const json_t *cur, json_t **next,
                          int *del, char *err, size_t errlen) {
    (void)ns;
    /* *next NULL: already marked for deletion, nothing to write */
    return store_prepare_delete(resource, cur, opts, next, del, err, errlen);
}

int store_update(struct store *s, const char *resource, const char *ns, const json_t *obj,
                 json_t **out, int *deleted) {
    const char *name = store_meta_str(obj, "name");
    const char *urv = store_meta_str(obj, "resourceVersion"), *uuid = store_meta_str(obj, "uid");
    int rc, ok;
    if (out) *out = NULL;
    if (deleted) *deleted = 0;
    s->err[0] = '\0';
    if (!json_is_object(obj)) return fail(s, -EINVAL, "the object must be a JSON object");
    if (!name) return fail(s, -EINVAL, "metadata.name: Required value: name is required");
    if ((rc = store_validate_key(resource, ns, name, s->err, sizeof s->err))) return rc;
    if (urv && urv[0] && (store_parse_rv(urv, &ok), !ok))
        return fail(s, -EINVAL, "metadata.resourceVersion: Invalid value: must be a decimal "
                                "resourceVersion");
    return cas_write(s, resource, ns, name, uuid, urv, prepare_update, obj, out, deleted);
}

int store_modify(struct store *s, const char *resource, const char *ns, const char *name, store_modify_fn fn,
                 void *fn_ud, json_t **out, int *deleted) {
    return store_modify_fenced(s, resource, ns, name, fn, fn_ud, NULL, out, deleted);
}

int store_modify_fenced(struct store *s, const char *resource, const char *ns, const char *name, store_modify_fn fn,
                        void *fn_ud, const struct store_fence *fence, json_t **out, int *deleted) {
    int rc;
    if (out) *out = NULL;
    if (deleted) *deleted = 0;
    s->err[0] = '\0';
    if ((rc = store_validate_key(resource, ns, name, s->err, sizeof s->err))) return rc;
    if ((rc = store_fence_check(fence, s->err, sizeof s->err))) return rc;
    for (int attempt = 0; attempt < STORE_CAS_ATTEMPTS; attempt++) {
        json_t *cur = NULL, *next = NULL, *shaped = NULL;
        int unchanged = 0, del = 0, conditional = 0;
        if ((rc = get_obj(s, resource, ns, name, &cur))) return rc;
        rc = fn(fn_ud, cur, &next, s->err, sizeof s->err);
        if (!rc && !next) rc = fail(s, -EINVAL, "no object to write");
        if (!rc)
            rc = store_shape_modify(resource, ns, name, cur, next, &shaped, &unchanged, &del, &conditional, s->err,
                                    sizeof s->err);
        else json_decref(next);
        if (!rc && unchanged) {
            json_decref(shaped);
            if (out) *out = cur;
            else json_decref(cur);
            return 0;
        }
        if (!rc) rc = write_obj(s, resource, ns, name, shaped, store_meta_str(cur, "resourceVersion"), del, fence);
        json_decref(cur);
        if (!rc) {
            if (deleted) *deleted = del;
            if (out) *out = shaped;
            else json_decref(shaped);
            return 0;
        }
        json_decref(shaped);
        if (rc != STORE_ECONFLICT || conditional) return rc;
    }
    return rc;
}

int store_delete(struct store *s, const char *resource, const char *ns, const char *name,
                 const struct store_delete_opts *opts, json_t **out, int *deleted) {
    int rc;
    if (out) *out = NULL;
    if (deleted) *deleted = 0;
    s->err[0] = '\0';
    if ((rc = store_validate_key(resource, ns, name, s->err, sizeof s->err))) return rc;
    return cas_write(s, resource, ns, name, opts ? opts->uid : NULL, opts ? opts->resource_version : NULL,
                     prepare_delete, opts, out, deleted);
}

int store_ns_set_terminating(struct store *s, const char *ns) {
    s->err[0] = '\0';
    int rc = store_validate_key("namespaces", "", ns, s->err, sizeof s->err);
    if (rc || (rc = ensure_conn(s))) return rc;
    /* only while the namespace is there: a mark must never outlive it */
    redisReply *r = redisCommand(s->c,
                                 "EVAL %s 1 %sobj:namespaces %s",
                                 "if redis.call('HEXISTS', KEYS[1], 'o:/' .. ARGV[1]) == 1 then "
                                 "redis.call('HSET', KEYS[1], 't:/' .. ARGV[1], '1') end return 0",
                                 s->cfg.prefix, ns);
    if (!r || r->type == REDIS_REPLY_ERROR) rc = store_reply_error(r, s->err, sizeof s->err);
    if (r) freeReplyObject(r);
    return rc ? rc : replicated(s);
}

/* Validates a resource and an optional namespace (list and history scopes). */
static int check_scope(struct store *s, const char *resource, const char *ns) {
    return store_validate_key(resource, ns, "x", s->err, sizeof s->err);
}

static int list(struct store *s, const char *resource, const char *ns, size_t limit, size_t max_bytes,
                const char *continue_token, int raw, struct store_list *out) {
    uint64_t token_rv = 0, floor = 0;
    char *start = NULL, *last = NULL;
    struct store_cmd c;
    int rc;
    memset(out, 0, sizeof *out);
    s->err[0] = '\0';
    if ((rc = check_scope(s, resource, ns))) return rc;
    if (continue_token && continue_token[0] &&
        (rc = store_continue_decode(continue_token, resource, ns, &token_rv, &start, s->err,
                                    sizeof s->err)))
        return rc;
    store_build_list(&c, &s->cfg, resource, ns, start, limit, max_bytes, token_rv);
    redisReply *r = run(s, &c, &rc);
    if (r) {
        rc = store_decode_list(&s->cfg, r, raw, out, &last, &floor, s->err, sizeof s->err);
        freeReplyObject(r);
    }
    store_cmd_free(&c);
    free(start);
    if (rc) return rc;
    if (token_rv) out->resource_version = token_rv;
    if (last) {
        out->continue_token = store_continue_encode(resource, ns, out->resource_version, last);
        free(last);
        if (!out->continue_token) {
            store_list_free(out);
            return fail(s, -ENOMEM, "out of memory");
        }
    }
    return 0;
}

int store_list(struct store *s, const char *resource, const char *ns, size_t limit,
               const char *continue_token, struct store_list *out) {
    return list(s, resource, ns, limit, 0, continue_token, 0, out);
}

int store_list_bounded(struct store *s, const char *resource, const char *ns, size_t limit, size_t max_bytes,
                       const char *continue_token, struct store_list *out) {
    return list(s, resource, ns, limit, max_bytes, continue_token, 0, out);
}

int store_list_raw(struct store *s, const char *resource, const char *ns, size_t limit,
                   const char *continue_token, struct store_list *out) {
    return list(s, resource, ns, limit, 0, continue_token, 1, out);
}

void store_list_free(struct store_list *l) {
    json_decref(l->items);
    for (size_t i = 0; i < l->n_raw; i++) free(l->raw[i]);
    free(l->raw);
    free(l->raw_len);
    free(l->continue_token);
    memset(l, 0, sizeof *l);
}

int store_history_after(struct store *s, const char *resource, const char *ns,
                        uint64_t after_rv, size_t max, struct store_history *out) {
    struct store_cmd c;
    uint64_t floor = 0;
    int rc;
    memset(out, 0, sizeof *out);
    s->err[0] = '\0';
    if ((rc = check_scope(s, resource, ns))) return rc;
    if (max < 1 || max > STORE_HISTORY_MAX_SCAN)
        return fail(s, -EINVAL, "history: max must be between 1 and 100000");
    if (after_rv > (1ull << 53)) /* Lua numbers are doubles: exact to 2^53 */
        return fail(s, -EINVAL, "resourceVersion is too large");
    store_build_history(&c, &s->cfg, resource, ns, after_rv, max);
    redisReply *r = run(s, &c, &rc);
    if (r) {
        rc = store_decode_history(&s->cfg, r, max, out, &floor, s->err, sizeof s->err);
        if (rc == -ESTALE)
            snprintf(s->err, sizeof s->err, "too old resource version: %llu (%llu)",
                     (unsigned long long)after_rv, (unsigned long long)floor);
        freeReplyObject(r);
    }
    store_cmd_free(&c);
    return rc;
}

void store_history_free(struct store_history *h) {
    for (size_t i = 0; i < h->n; i++) {
        free(h->events[i].ns);
        free(h->events[i].name);
        json_decref(h->events[i].object);
    }
    free(h->events);
    memset(h, 0, sizeof *h);
}

int store_current_rv(struct store *s, uint64_t *rv) {
    struct store_cmd c;
    int rc;
    *rv = 0;
    s->err[0] = '\0';
    store_build_current_rv(&c, &s->cfg);
    redisReply *r = run(s, &c, &rc);
    if (r) {
        rc = store_decode_rv(r, rv, s->err, sizeof s->err);
        freeReplyObject(r);
    }
    store_cmd_free(&c);
    return rc;
}

redisContext *store_redis_connect(const char *host, int port, int timeout_ms) {
    if (store_sentinel_on()) {
        char h[256], err[sizeof ((redisContext *)0)->errstr];
        int p = 0;
        if (store_sentinel_primary(h, sizeof h, &p, err, sizeof err)) {
            /* a context in error, as a failed connect gives, saying why */
            redisContext *c = redisConnectUnix("/nonexistent/peloton-sentinel");
            if (c) memcpy(c->errstr, err, sizeof c->errstr);
            return c;
        }
        return redisConnectWithTimeout(h, p, ms_tv(timeout_ms));
    }
    return host[0] == '/' ? redisConnectUnixWithTimeout(host, ms_tv(timeout_ms))
                          : redisConnectWithTimeout(host, port, ms_tv(timeout_ms));
}

int store_parse_addr(const char *addr, char *host, size_t hostlen, int *port) {
    const char *path = unix_url_rest(addr);
    if (!path && addr[0] == '/') path = addr;
    if (path) {
        if (path[0] != '/' || strlen(path) >= hostlen || strlen(path) > UNIX_SOCKET_PATH_MAX) return -EINVAL;
        strcpy(host, path);
        *port = 0;
        return 0;
    }
    const char *colon = strrchr(addr, ':');
    char *end = NULL;
    long p = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == addr || (size_t)(colon - addr) >= hostlen || !end || *end || end == colon + 1 || p <= 0 ||
        p > 65535)
        return -EINVAL;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    *port = (int)p;
    return 0;
}
