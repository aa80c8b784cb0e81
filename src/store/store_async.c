/* The store's hot write path on the caller's libuv loop: one hiredis async
 * connection, pipelined. The commands, scripts and object shaping are the
 * synchronous store's (store_codec.c, store_object.c); what is here is the
 * connection and each operation's small state machine:
 *
 *   create:  [write] -> done
 *   modify:  [get] -> fn -> shape -> [attach] -> [write] -> done, or on a
 *            lost race (Conflict without a caller resourceVersion) [get] again
 *
 * An attached create (store_async_modify_attach) rides in its write's batch,
 * as the entry right after it, and is answered with it.
 *
 * Scripts are called by the SHA-1 computed in store_cfg_init; a NOSCRIPT
 * reply (Redis restarted without its script cache) resends that command as
 * EVAL, which caches it again. Replies come back in the order the commands
 * were sent, so a turn's writes are answered in a turn's reads.
 *
 * The connection's loop glue is ours, not hiredis' libuv adapter: that one
 * re-registers the socket for every command (libuv turns each uv_poll_start
 * into an epoll delete and add). Here the socket is registered for reading
 * once, and the commands of a loop turn are written in one write() after the
 * turn's I/O (a uv_check handle); the socket is polled for writing only while
 * a write is blocked or the connection is being made.
 *
 * A busy turn does not keep Redis waiting for its end: once EARLY_WRITES
 * writes are queued they go as a batch, and once EARLY_CMDS commands wait in
 * hiredis' buffer they are written, so Redis works on the first of a turn's
 * writes while this thread reads and prepares the rest. */
#include <errno.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "store_int.h"

#define ASYNC_CAS_ATTEMPTS 16
#define WATCHDOG_MS 500
#define EARLY_WRITES 32 /* a turn's queued writes sent as a batch before the turn ends */
#define EARLY_CMDS 32   /* commands in hiredis' buffer written before the turn ends */

struct store_async {
    uv_loop_t *loop;
    struct metrics_series *m_replies, *m_errors; /* store_async_set_metrics */
    char host[256];
    int port;
    int command_timeout_ms;
    int wait_replicas, wait_timeout_ms; /* store_options */
    /* the replicas online at the primary (INFO replication), counted on each
     * new connection and then once a second: a write waits for them all */
    int replicas;
    unsigned conn_gen, counted_gen; /* connections made; the one the count is from */
    uint64_t counted_ms;
    bool counting;                  /* an INFO is in flight */
    struct store_cfg cfg;
    struct store_rng rng;
    redisAsyncContext *ac; /* NULL while disconnected */
    size_t inflight;       /* commands sent and not answered */
    size_t unsent;         /* commands given to hiredis since its buffer was last written */
    size_t ops;            /* operations started and not finished */
    uint64_t progress_ms;  /* last reply, or when the pipe went from idle to busy */
    uv_timer_t *watchdog;  /* freed by its close callback */
    bool closing;
    store_write_hook_fn hook;
    void *hook_ud;
    /* writes of this turn, sent as one batch per resource from the idle handle */
    struct op *wq_head, *wq_tail;
    size_t wq_n;
    uv_idle_t *batcher; /* freed by its close callback */
};

void store_async_set_write_hook(struct store_async *a, store_write_hook_fn fn, void *ud) {
    a->hook = fn;
    a->hook_ud = ud;
}

enum op_stage { ST_GET, ST_WRITE };

struct op {
    struct store_async *a;
    enum op_stage stage;
    bool modify, ns_check, evaled, conditional;
    bool delete_op;        /* store_async_delete: expected holds its precondition */
    int attempts, del;
    char *res, *ns, *name; /* in keys */
    json_t *obj;           /* what is written (its resourceVersion a placeholder until answered) */
    json_t *cur;           /* modify: what was read */
    struct store_blob blob;
    struct store_cmd cmd;  /* the command in flight, kept for a NOSCRIPT resend */
    store_modify_fn fn;
    void *fn_ud;
    store_done_fn done;
    void *ud;
    char expected[24];     /* the compare-and-set's resourceVersion, "" for a create */
    bool fenced;           /* store_async_modify_fenced: the write is made only while fence holds */
    struct store_fence fence; /* ... pointing into fkey and fval */
    char fkey[STORE_FENCE_KEY_MAX + 1], fval[STORE_FENCE_VALUE_MAX + 1];
    struct op *qnext;      /* the write queue */
    /* store_async_modify_attach: the create made with the write, this try */
    store_attach_fn attach;
    struct store_blob ablob; /* its bytes; json NULL: none */
    char *akeys;             /* its resource, namespace and name, one allocation */
    const char *ares, *ans, *aname;
    int arc;                 /* its outcome once answered; or why none was attached */
    uint64_t arv;
    char aerr[256];
    char err[STORE_ERRMSG_MAX];
    char keys[];
};

/* A batch of writes sent as one script call (and, when replicas are waited
 * for, a WAIT after it: the batch is answered when both have replied). */
struct batch {
    struct store_async *a;
    struct store_cmd cmd; /* kept for a NOSCRIPT resend */
    bool evaled;
    int pending;          /* replies still to come for it */
    int fail;             /* 0, or -EIO once a reply failed (failmsg) */
    const char *failmsg;
    bool decoded;         /* rcs/rvs hold the script's answer */
    long long replicas;   /* what the last WAIT answered (-1: nothing) */
    int need;             /* what it asked for */
    bool counted;         /* the replicas were counted on its connection when it was sent */
    unsigned gen;         /* its connection (store_async.conn_gen) */
    int *rcs;             /* per write, once decoded (wait mode) */
    uint64_t *rvs;
    size_t n;
    struct op *ops[];
};

/* Drops this try's attached create. */
static void attach_clear(struct op *o) {
    store_blob_free(&o->ablob);
    free(o->akeys);
    o->akeys = NULL;
    o->ares = o->ans = o->aname = NULL;
    o->arc = 0;
    o->arv = 0;
    o->aerr[0] = '\0';
}

static void op_free(struct op *o) {
    o->a->ops--;
    attach_clear(o);
    store_cmd_free(&o->cmd);
    store_blob_free(&o->blob);
    json_decref(o->obj);
    json_decref(o->cur);
    free(o);
}

/* Ends an operation: done runs once, then the operation is freed. */
static void finish(struct op *o, int rc, const struct store_result *ok) {
    struct store_result r = {.rc = rc, .err = rc ? o->err : "", .attached_err = ""};
    if (!rc && ok) {
        r = *ok;
        r.rc = 0;
        r.err = "";
        if (!r.attached_err) r.attached_err = "";
    }
    o->done(o->ud, &r);
    op_free(o);
}

/* ---- the connection on the loop ---- */

struct conn_ev {
    redisAsyncContext *ac;
    uv_poll_t poll;
    uv_check_t flush;
    int polling;     /* uv events registered now */
    bool reading;    /* hiredis wants to read */
    bool writing;    /* hiredis has output waiting */
    bool blocked;    /* ... which the socket did not take, or the connect is not done */
    bool connected;
    int closing;     /* handles whose close has not completed */
};

static void ev_on_poll(uv_poll_t *h, int status, int events);

/* Registers what the state asks for, only when it changed. */
static void ev_update(struct conn_ev *e) {
    int want = (e->reading ? UV_READABLE : 0) | (e->writing && e->blocked ? UV_WRITABLE : 0);
    if (want == e->polling) return;
    if (want) uv_poll_start(&e->poll, want, ev_on_poll);
    else uv_poll_stop(&e->poll);
    e->polling = want;
}

static void ev_flush_now(struct conn_ev *e);

/* After the turn's I/O: write what the turn queued, in one go. */
static void ev_on_flush(uv_check_t *h) { ev_flush_now(h->data); }

static void ev_flush_now(struct conn_ev *e) {
    uv_check_stop(&e->flush);
    struct store_async *a = e->ac->data;
    if (a) a->unsent = 0;
    if (!e->writing || e->blocked) return;
    redisAsyncHandleWrite(e->ac); /* delWrite when all of it went */
    if (e->closing) return; /* the write failed: hiredis disconnected, e's handles are closing */
    if (e->writing) { /* the socket is full: wait until it takes more */
        e->blocked = true;
        ev_update(e);
    }
}

static void ev_on_poll(uv_poll_t *h, int status, int events) {
    struct conn_ev *e = h->data;
    if (status < 0) { /* a socket error: libuv has stopped the handle already */
        e->polling = 0;
        if (!e->connected) { /* a failed connect: hiredis finds out on the write event */
            e->connected = true;
            e->blocked = false;
            redisAsyncHandleWrite(e->ac);
            return;
        }
        redisAsyncHandleRead(e->ac); /* the read fails: hiredis disconnects, failing what is in flight */
        if (!e->closing) ev_update(e); /* still alive: watch it again */
        return;
    }
    if (events & UV_WRITABLE) {
        if (!e->connected) e->connected = true; /* hiredis completes the connect on this write event */
        e->blocked = false;
        redisAsyncHandleWrite(e->ac); /* may close the context: e goes with the close callbacks */
        return;
    }
    if (events & UV_READABLE) redisAsyncHandleRead(e->ac);
}

static void ev_add_read(void *p) {
    struct conn_ev *e = p;
    e->reading = true;
    ev_update(e);
}

static void ev_del_read(void *p) {
    struct conn_ev *e = p;
    e->reading = false;
    ev_update(e);
}

static void ev_add_write(void *p) {
    struct conn_ev *e = p;
    e->writing = true;
    if (!e->connected) { /* the first write event completes the connect */
        e->blocked = true;
        ev_update(e);
        return;
    }
    if (!e->blocked) uv_check_start(&e->flush, ev_on_flush);
}

static void ev_del_write(void *p) {
    struct conn_ev *e = p;
    e->writing = false;
    e->blocked = false;
    uv_check_stop(&e->flush);
    ev_update(e);
}

static void ev_closed(uv_handle_t *h) {
    struct conn_ev *e = h->data;
    if (--e->closing == 0) free(e);
}

static void ev_cleanup(void *p) {
    struct conn_ev *e = p;
    e->ac->ev.data = NULL;
    uv_check_stop(&e->flush);
    e->closing = 2;
    uv_close((uv_handle_t *)&e->poll, ev_closed);
    uv_close((uv_handle_t *)&e->flush, ev_closed);
}

static int ev_attach(redisAsyncContext *ac, uv_loop_t *loop) {
    struct conn_ev *e = calloc(1, sizeof *e);
    if (!e) return -ENOMEM;
    e->ac = ac;
    if (uv_poll_init_socket(loop, &e->poll, ac->c.fd)) {
        free(e);
        return -EIO;
    }
    uv_check_init(loop, &e->flush);
    e->poll.data = e->flush.data = e;
    ac->ev.data = e;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    return 0;
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    struct store_async *a = ac->data;
    if (a && a->ac == ac) a->ac = NULL; /* hiredis frees the context itself */
}

static void on_connect(const redisAsyncContext *ac, int status) {
    struct store_async *a = ac->data;
    if (status != REDIS_OK && a && a->ac == ac) a->ac = NULL; /* failed: hiredis frees it */
}

static void on_info(redisAsyncContext *ac, void *reply, void *priv) {
    struct store_async *a = priv;
    if (!a || a->ac != ac) return; /* closing, or an old connection's */
    a->counting = false;
    int n = store_replicas_online(reply);
    if (n < 0) return; /* no answer, or not a primary: its writes fail READONLY */
    a->replicas = n;
    a->counted_gen = a->conn_gen;
    a->counted_ms = uv_now(a->loop);
}

/* Asks the primary for its online replicas (on_info), when replicas are waited for. */
static void count_replicas(struct store_async *a) {
    if (!a->wait_replicas || !a->ac || a->counting) return;
    if (redisAsyncCommand(a->ac, on_info, a, "INFO replication") == REDIS_OK) a->counting = true;
}

/* A connection, made when none is healthy: commands queue in hiredis while it connects. */
static int ensure_conn(struct store_async *a, char *err, size_t errlen) {
    if (a->ac) return 0;
    char host[256];
    int port = a->port;
    snprintf(host, sizeof host, "%s", a->host);
    if (store_sentinel_on() && store_sentinel_primary(host, sizeof host, &port, err, errlen)) return -EIO;
    redisAsyncContext *ac = host[0] == '/' ? redisAsyncConnectUnix(host) : redisAsyncConnect(host, port);
    if (!ac || ac->err) {
        snprintf(err, errlen, "redis: cannot connect to %s (port %d): %s", host, port,
                 ac ? ac->errstr : "out of memory");
        if (ac) redisAsyncFree(ac);
        return -EIO;
    }
    ac->data = a;
    if (ev_attach(ac, a->loop)) {
        snprintf(err, errlen, "redis: cannot attach the connection to the loop");
        redisAsyncFree(ac);
        return -EIO;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    a->ac = ac;
    a->conn_gen++;
    a->counting = false;
    a->replicas = 0; /* perhaps another primary's: wait_replicas until counted (batch_settle) */
    count_replicas(a); /* first on the connection: answered before any write's WAIT */
    return 0;
}

/* Writes what hiredis holds, as far as the socket takes it, before the turn
 * ends. A failure is left for the turn's flush, which fails what is in
 * flight from the loop (not under the operation being sent). */
static void early_write(struct store_async *a) {
    a->unsent = 0;
    if (!a->ac) return;
    struct conn_ev *e = a->ac->ev.data;
    redisContext *c = &a->ac->c;
    if (!e || e->blocked || !(c->flags & REDIS_CONNECTED) || c->err) return;
    int done = 0;
    redisBufferWrite(c, &done);
}

static void note_sent(struct store_async *a) {
    if (a->inflight++ == 0) a->progress_ms = uv_now(a->loop);
    if (++a->unsent >= EARLY_CMDS) early_write(a);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv);

/* Sends the operation's command; 0, or -EIO with o->err. */
static int send_cmd(struct op *o) {
    struct store_async *a = o->a;
    if (o->cmd.oom) {
        snprintf(o->err, sizeof o->err, "out of memory building a command");
        return -ENOMEM;
    }
    if (a->closing) {
        snprintf(o->err, sizeof o->err, "redis: the store is closing");
        return -EIO;
    }
    int rc = ensure_conn(a, o->err, sizeof o->err);
    if (rc) return rc;
    if (redisAsyncCommandArgv(a->ac, on_reply, o, o->cmd.argc, o->cmd.argv, o->cmd.argvlen) != REDIS_OK) {
        snprintf(o->err, sizeof o->err, "redis: %s", a->ac->errstr[0] ? a->ac->errstr : "cannot queue a command");
        return -EIO;
    }
    note_sent(a);
    return 0;
}

static int send_get(struct op *o) {
    store_cmd_free(&o->cmd);
    store_build_get(&o->cmd, &o->a->cfg, o->res, o->ns, o->name);
    o->stage = ST_GET;
    o->evaled = false;
    return send_cmd(o);
}

static void on_batch(uv_idle_t *h);
static void send_queued(struct store_async *a);
static void queue_write(struct op *o, const char *expected_rv);

/* Encodes o->obj and queues its create or compare-and-set for this turn's batch. */
static int send_write(struct op *o, const char *expected_rv) {
    struct store_async *a = o->a;
    if (a->closing) {
        snprintf(o->err, sizeof o->err, "redis: the store is closing");
        return -EIO;
    }
    int rc = store_blob_encode(&a->cfg, &a->rng, o->obj, &o->blob, o->err, sizeof o->err);
    if (rc) return rc;
    queue_write(o, expected_rv);
    return 0;
}

/* Queues o (its blob ready) for this turn's batch; EARLY_WRITES already
 * queued go first, as a batch of their own. */
static void queue_write(struct op *o, const char *expected_rv) {
    struct store_async *a = o->a;
    snprintf(o->expected, sizeof o->expected, "%s", expected_rv ? expected_rv : "");
    if (a->wq_n >= EARLY_WRITES) { /* before o joins: a failure there finishes others, never o */
        send_queued(a);
        early_write(a);
    }
    o->stage = ST_WRITE;
    o->qnext = NULL;
    if (a->wq_tail) a->wq_tail->qnext = o;
    else a->wq_head = o;
    a->wq_tail = o;
    if (a->wq_n++ == 0) uv_idle_start(a->batcher, on_batch);
}

/* The create to make with o's write this try, from its attach function:
 * its bytes and key in o, or none (o->arc says why, when it was refused). */
static void attach_prepare(struct op *o) {
    struct store_text_obj t = {0};
    attach_clear(o);
    if (o->attach(o->fn_ud, o->obj, &t) || !t.text) {
        free(t.text);
        return;
    }
    int rc = !t.resource || !t.ns || !t.name ? -EINVAL : 0;
    if (rc) snprintf(o->aerr, sizeof o->aerr, "an attached create needs a resource, a namespace and a name");
    else rc = store_validate_key(t.resource, t.ns, t.name, o->aerr, sizeof o->aerr);
    size_t lr = rc ? 0 : strlen(t.resource) + 1, ln = rc ? 0 : strlen(t.ns) + 1, lm = rc ? 0 : strlen(t.name) + 1;
    if (!rc && !(o->akeys = malloc(lr + ln + lm))) {
        snprintf(o->aerr, sizeof o->aerr, "out of memory");
        rc = -ENOMEM;
    }
    if (rc) {
        free(t.text);
        o->arc = rc;
        return;
    }
    o->ares = memcpy(o->akeys, t.resource, lr);
    o->ans = memcpy(o->akeys + lr, t.ns, ln);
    o->aname = memcpy(o->akeys + lr + ln, t.name, lm);
    rc = store_blob_from_text(&o->a->cfg, &o->a->rng, &t, &o->ablob, o->aerr, sizeof o->aerr);
    if (rc) {
        free(o->akeys);
        o->akeys = NULL;
        o->ares = o->ans = o->aname = NULL;
        o->arc = rc;
    }
}

/* modify: the object was read; ask the caller for the next one and write it. */
static void modify_step(struct op *o, json_t *cur) {
    json_t *next = NULL, *shaped = NULL;
    int unchanged = 0, conditional = 0;
    if (o->delete_op) { /* store_async_delete: store_delete's shaping, the version its precondition */
        int rc = store_check_preconditions(o->res, cur, NULL, o->expected, o->err, sizeof o->err);
        if (!rc) rc = store_prepare_delete(o->res, cur, NULL, &shaped, &o->del, o->err, sizeof o->err);
        o->conditional = true;
        o->cur = cur;
        if (!rc && !shaped) { /* marked for deletion already: nothing to write */
            struct store_result r = {.obj = cur};
            finish(o, 0, &r);
            return;
        }
        if (!rc) {
            o->obj = shaped;
            rc = send_write(o, store_meta_str(cur, "resourceVersion"));
        }
        if (rc) finish(o, rc, NULL);
        return;
    }
    int rc = o->fn(o->fn_ud, cur, &next, o->err, sizeof o->err);
    if (!rc && !next) {
        snprintf(o->err, sizeof o->err, "no object to write");
        rc = -EINVAL;
    }
    if (!rc)
        rc = store_shape_modify(o->res, o->ns, o->name, cur, next, &shaped, &unchanged, &o->del, &conditional, o->err,
                                sizeof o->err);
    else json_decref(next);
    o->conditional = conditional;
    o->cur = cur;
    if (rc) {
        finish(o, rc, NULL);
        return;
    }
    if (unchanged) { /* nothing to write: the stored object is the answer */
        json_decref(shaped);
        struct store_result r = {.obj = cur};
        finish(o, 0, &r);
        return;
    }
    o->obj = shaped;
    if (o->attach) attach_prepare(o);
    rc = send_write(o, store_meta_str(cur, "resourceVersion"));
    if (rc) finish(o, rc, NULL);
}

static void written(struct op *o, uint64_t rv) {
    if (o->obj) store_set_rv(o->obj, rv); /* none for a write of text (store_async_put_text) */
    size_t len = 0;
    char *json = store_blob_final(&o->blob, rv, &len); /* NULL: answer with the object alone */
    struct store_result r = {.obj = o->obj, .json = json, .json_len = json ? len : 0, .rv = rv,
                             .type = !o->modify ? STORE_ADDED : o->del ? STORE_DELETED : STORE_MODIFIED,
                             .attached_rc = o->arc, .attached_err = o->aerr};
    if (o->a->hook) o->a->hook(o->a->hook_ud, o->res, o->ns, r.type, rv, o->obj, r.json, r.json_len);
    if (o->ablob.json && !o->arc) { /* the attached create, the version after the write's */
        r.attached_rv = o->arv;
        if (o->a->hook) {
            size_t alen = 0;
            char *ajson = store_blob_final(&o->ablob, o->arv, &alen);
            if (ajson) o->a->hook(o->a->hook_ud, o->ares, o->ans, STORE_ADDED, o->arv, NULL, ajson, alen);
            /* NULL (out of memory): the hub finds it in the history, as another server's write */
            free(ajson);
        }
    }
    finish(o, 0, &r);
    free(json);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    struct op *o = priv;
    struct store_async *a = o->a;
    redisReply *r = reply;
    a->inflight--;
    a->progress_ms = uv_now(a->loop);
    metrics_inc(a->m_replies);
    if (!r || r->type == REDIS_REPLY_ERROR) metrics_inc(a->m_errors);
    if (!r) {
        snprintf(o->err, sizeof o->err, "redis: %s", a->closing ? "the store is closing" : "connection lost");
        finish(o, -EIO, NULL);
        return;
    }
    /* a single command is a read (writes go in batches) */
    json_t *cur = NULL;
    int rc = store_decode_get(&o->a->cfg, r, &cur, o->err, sizeof o->err);
    if (rc == -ENOENT) snprintf(o->err, sizeof o->err, "%s \"%s\" not found", o->res, o->name);
    if (rc) {
        finish(o, rc, NULL);
        return;
    }
    modify_step(o, cur);
}

static void write_done(struct op *o, int rc, uint64_t rv);
/* A write's outcome: stored, a lost race to run again, or a failure. */
static void write_done(struct op *o, int rc, uint64_t rv) {
    if (rc == STORE_EFENCED) store_fence_message(&o->fence, o->err, sizeof o->err);
    if (rc == STORE_NO_NAMESPACE) snprintf(o->err, sizeof o->err, "namespaces \"%s\" not found", o->ns);
    if (rc == STORE_NS_TERMINATING)
        snprintf(o->err, sizeof o->err, "%s \"%s\" is forbidden: unable to create new content in namespace %s "
                 "because it is being terminated", o->res, o->name, o->ns);
    if (rc == STORE_ECONFLICT && o->modify && !o->conditional && ++o->attempts < ASYNC_CAS_ATTEMPTS) {
        /* someone wrote in between: read the newer object and run fn on it */
        json_decref(o->obj);
        json_decref(o->cur);
        o->obj = o->cur = NULL;
        store_blob_free(&o->blob);
        attach_clear(o); /* made again from the newer object */
        rc = send_get(o);
        if (rc) finish(o, rc, NULL);
        return;
    }
    if (rc) {
        finish(o, rc, NULL);
        return;
    }
    written(o, rv);
}

/* ---- batches ---- */

static void batch_free(struct batch *b) {
    store_cmd_free(&b->cmd);
    free(b->rcs);
    free(b->rvs);
    free(b);
}

static void batch_fail(struct batch *b, int rc, const char *msg) {
    for (size_t i = 0; i < b->n; i++) {
        snprintf(b->ops[i]->err, sizeof b->ops[i]->err, "%s", msg);
        finish(b->ops[i], rc, NULL);
    }
    batch_free(b);
}

static void on_batch_wait(redisAsyncContext *ac, void *reply, void *priv);

/* Both replies are in (wait mode): the writes are answered, each as the
 * script said if the replicas have them, else as not acknowledged. */
static void batch_settle(struct batch *b) {
    struct store_async *a = b->a;
    if (b->fail || !b->decoded) {
        batch_fail(b, -EIO, b->failmsg ? b->failmsg : "redis: connection lost");
        return;
    }
    /* sent before this connection's replicas were counted: the count (its
     * INFO was sent first, so it is in) may ask for more than the WAIT did;
     * once more, for them all (on this connection: it covers these writes) */
    bool same = a->ac && b->gen == a->conn_gen && a->counted_gen == a->conn_gen;
    int need = !b->counted && same && a->replicas > b->need ? a->replicas : b->need;
    if (b->replicas < need && !b->counted && same &&
        redisAsyncCommand(a->ac, on_batch_wait, b, "WAIT %d %d", need, a->wait_timeout_ms) == REDIS_OK) {
        b->counted = true;
        b->need = need;
        b->pending++;
        note_sent(a);
        return;
    }
    bool acked = b->replicas >= need;
    for (size_t i = 0; i < b->n; i++) {
        struct op *o = b->ops[i];
        if (!b->rcs[i] && !acked) {
            snprintf(o->err, sizeof o->err,
                     "redis: the write reached %lld of %d replica(s) within %d ms; it is not acknowledged (its "
                     "outcome is unknown)", b->replicas < 0 ? 0 : b->replicas, need, a->wait_timeout_ms);
            finish(o, -EIO, NULL);
        } else {
            write_done(o, b->rcs[i], b->rvs[i]);
        }
    }
    batch_free(b);
}

static void on_batch_wait(redisAsyncContext *ac, void *reply, void *priv) {
    struct batch *b = priv;
    struct store_async *a = b->a;
    redisReply *r = reply;
    (void)ac;
    a->inflight--;
    a->progress_ms = uv_now(a->loop);
    metrics_inc(a->m_replies);
    if (!r || r->type != REDIS_REPLY_INTEGER) metrics_inc(a->m_errors);
    b->replicas = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (!r && !b->fail) {
        b->fail = -EIO;
        b->failmsg = a->closing ? "redis: the store is closing" : "redis: connection lost";
    }
    if (--b->pending == 0) batch_settle(b);
}

static void on_batch_reply(redisAsyncContext *ac, void *reply, void *priv);

/* o's outcome in a batch's reply, from entry *k on (its attached create's
 * in the next entry: into o); *k moves past them. */
static int decode_entry(const redisReply *r, size_t *k, struct op *o, uint64_t *rv) {
    int rc = store_decode_write_batch(r, (*k)++, o->res, o->name, rv, o->err, sizeof o->err);
    if (o->ablob.json)
        o->arc = store_decode_write_batch(r, (*k)++, o->ares, o->aname, &o->arv, o->aerr, sizeof o->aerr);
    return rc;
}

void store_async_set_metrics(struct store_async *a, struct metrics_series *replies, struct metrics_series *errors) {
    a->m_replies = replies;
    a->m_errors = errors;
}

static int batch_send(struct batch *b) {
    struct store_async *a = b->a;
    char err[STORE_ERRMSG_MAX];
    if (b->cmd.oom) return -ENOMEM;
    if (a->closing || ensure_conn(a, err, sizeof err)) return -EIO;
    if (redisAsyncCommandArgv(a->ac, on_batch_reply, b, b->cmd.argc, b->cmd.argv, b->cmd.argvlen) != REDIS_OK)
        return -EIO;
    b->pending++;
    note_sent(a);
    if (a->wait_replicas) {
        b->need = a->replicas > a->wait_replicas ? a->replicas : a->wait_replicas;
        b->counted = a->counted_gen == a->conn_gen;
        b->gen = a->conn_gen;
        if (redisAsyncCommand(a->ac, on_batch_wait, b, "WAIT %d %d", b->need, a->wait_timeout_ms) !=
            REDIS_OK) { /* the script's reply comes; no acknowledgement can follow it */
            b->fail = -EIO;
            b->failmsg = "redis: cannot queue WAIT";
            return 0;
        }
        b->pending++;
        note_sent(a);
    }
    return 0;
}

static void on_batch_reply(redisAsyncContext *ac, void *reply, void *priv) {
    struct batch *b = priv;
    struct store_async *a = b->a;
    redisReply *r = reply;
    a->inflight--;
    a->progress_ms = uv_now(a->loop);
    metrics_inc(a->m_replies);
    if (!r || r->type == REDIS_REPLY_ERROR) metrics_inc(a->m_errors);
    b->pending--;
    if (!r) {
        const char *msg = a->closing ? "redis: the store is closing" : "redis: connection lost";
        if (!b->pending) batch_fail(b, -EIO, msg);
        else { /* its WAIT's reply (NULL too) settles it */
            b->fail = -EIO;
            b->failmsg = msg;
        }
        return;
    }
    if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "READONLY", 8) && a->ac == ac) {
        fprintf(stderr, "level=warn msg=\"redis: writes refused by a replica (a failover); reconnecting\"\n");
        redisAsyncDisconnect(ac); /* the next command connects to the primary of now */
    }
    if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8) && !b->evaled) {
        store_cmd_as_eval(&b->cmd); /* EVAL caches the script again */
        b->evaled = true;
        if (batch_send(b)) {
            if (!b->pending) batch_fail(b, -EIO, "redis: cannot resend a batch");
            else {
                b->fail = -EIO;
                b->failmsg = "redis: cannot resend a batch";
            }
        }
        return;
    }
    if (a->wait_replicas) { /* answered once the WAIT after it has replied */
        if (!b->rcs) b->rcs = calloc(b->n ? b->n : 1, sizeof *b->rcs);
        if (!b->rvs) b->rvs = calloc(b->n ? b->n : 1, sizeof *b->rvs);
        if (!b->rcs || !b->rvs) {
            b->fail = -EIO;
            b->failmsg = "out of memory";
        } else {
            for (size_t i = 0, k = 0; i < b->n; i++)
                b->rcs[i] = decode_entry(r, &k, b->ops[i], &b->rvs[i]);
            b->decoded = true;
        }
        if (!b->pending) batch_settle(b);
        return;
    }
    for (size_t i = 0, k = 0; i < b->n; i++) {
        struct op *o = b->ops[i];
        uint64_t rv = 0;
        int rc = decode_entry(r, &k, o, &rv);
        write_done(o, rc, rv);
    }
    batch_free(b);
}

#define BATCH_MAX 256 /* writes per script call: bounds how long Redis runs one */

/* The queued writes: one script call per resource (BATCH_MAX at most),
 * with the creates attached to them (all to one resource: another one
 * ends the batch). */
static void send_queued(struct store_async *a) {
    while (a->wq_head) {
        /* the next resource's writes, in the order they were made */
        const char *res = a->wq_head->res, *ares = NULL;
        struct batch *b = malloc(sizeof *b + BATCH_MAX * sizeof b->ops[0]);
        struct store_batch_write *w = malloc(2 * BATCH_MAX * sizeof *w);
        if (b) memset(b, 0, sizeof *b);
        struct op **pp = &a->wq_head;
        size_t n = 0, nw = 0;
        while (*pp && n < BATCH_MAX) {
            struct op *o = *pp;
            if (strcmp(o->res, res)) { /* another resource's: its own batch */
                pp = &o->qnext;
                continue;
            }
            if (o->ablob.json && ares && strcmp(o->ares, ares)) break; /* the next batch's, in order */
            *pp = o->qnext; /* out of the queue */
            a->wq_n--;
            if (b && w) {
                b->ops[n] = o;
                w[nw++] = (struct store_batch_write){.op = !o->modify ? 'c' : o->del ? 'd' : 'p', .ns = o->ns,
                                                     .name = o->name, .expected_rv = o->expected, .blob = &o->blob,
                                                     .ns_check = o->ns_check, .fence = o->fenced ? &o->fence : NULL};
                if (o->ablob.json) {
                    ares = o->ares;
                    w[nw++] = (struct store_batch_write){.op = 'a', .ns = o->ans, .name = o->aname, .expected_rv = "",
                                                         .blob = &o->ablob, .ns_check = o->ans[0] != 0};
                }
                n++;
            } else {
                snprintf(o->err, sizeof o->err, "out of memory");
                finish(o, -ENOMEM, NULL);
            }
        }
        a->wq_tail = NULL;
        for (struct op *o = a->wq_head; o; o = o->qnext) a->wq_tail = o;
        if (!b || !w || !n) {
            free(b);
            free(w);
            continue;
        }
        b->a = a;
        b->n = n;
        store_build_write_batch(&b->cmd, &a->cfg, res, ares, w, nw);
        free(w);
        if (batch_send(b)) batch_fail(b, -EIO, "redis: cannot send a batch");
    }
}

/* The turn's writes, sent at its end. */
static void on_batch(uv_idle_t *h) {
    struct store_async *a = h->data;
    uv_idle_stop(h);
    send_queued(a);
    if (a->ac && a->ac->ev.data) ev_flush_now(a->ac->ev.data); /* out now: the loop may block next */
}

static void on_watchdog(uv_timer_t *t) {
    struct store_async *a = t->data;
    if (a->ac && uv_now(a->loop) - a->counted_ms >= STORE_REPLICAS_REFRESH_MS) count_replicas(a);
    if (a->ac && a->inflight && uv_now(a->loop) - a->progress_ms > (uint64_t)a->command_timeout_ms) {
        fprintf(stderr, "level=error msg=\"redis: no reply for %d ms; reconnecting\" inflight=%zu\n",
                a->command_timeout_ms, a->inflight);
        redisAsyncDisconnect(a->ac); /* fails what is in flight with -EIO */
    }
}

static void watchdog_closed(uv_handle_t *h) { free(h); }

int store_async_open(uv_loop_t *loop, const char *host, int port, const struct store_options *opt,
                     struct store_async **out) {
    struct store_options def;
    *out = NULL;
    if (!opt) {
        store_options_init(&def);
        opt = &def;
    }
    if (!loop || !store_addr_ok(host, sizeof((struct store_async *)0)->host, port)) return -EINVAL;
    struct store_async *a = calloc(1, sizeof *a);
    if (!a) return -ENOMEM;
    if (store_cfg_init(&a->cfg, opt)) {
        free(a);
        return -EINVAL;
    }
    a->loop = loop;
    snprintf(a->host, sizeof a->host, "%s", host);
    a->port = port;
    a->command_timeout_ms = opt->command_timeout_ms > 0 ? opt->command_timeout_ms : 10000;
    a->wait_replicas = opt->wait_replicas > 0 ? opt->wait_replicas : 0;
    a->wait_timeout_ms = opt->wait_timeout_ms > 0 ? opt->wait_timeout_ms : 1000;
    a->watchdog = malloc(sizeof *a->watchdog);
    if (!a->watchdog) {
        store_cfg_free(&a->cfg);
        free(a);
        return -ENOMEM;
    }
    uv_timer_init(loop, a->watchdog);
    a->watchdog->data = a;
    uv_timer_start(a->watchdog, on_watchdog, WATCHDOG_MS, WATCHDOG_MS);
    uv_unref((uv_handle_t *)a->watchdog); /* the loop may end while it runs */
    a->batcher = malloc(sizeof *a->batcher);
    if (!a->batcher) {
        uv_close((uv_handle_t *)a->watchdog, watchdog_closed);
        store_cfg_free(&a->cfg);
        free(a);
        return -ENOMEM;
    }
    uv_idle_init(loop, a->batcher);
    a->batcher->data = a;
    char err[STORE_ERRMSG_MAX];
    if (ensure_conn(a, err, sizeof err)) {
        fprintf(stderr, "level=warn msg=\"%s\"\n", err); /* the next write tries again */
    }
    *out = a;
    return 0;
}

void store_async_close(struct store_async *a) {
    if (!a) return;
    a->closing = true;
    while (a->wq_head) { /* queued, never sent */
        struct op *o = a->wq_head;
        a->wq_head = o->qnext;
        snprintf(o->err, sizeof o->err, "redis: the store is closing");
        finish(o, -EIO, NULL);
    }
    a->wq_tail = NULL;
    a->wq_n = 0;
    uv_idle_stop(a->batcher);
    uv_close((uv_handle_t *)a->batcher, watchdog_closed);
    if (a->ac) {
        a->ac->data = NULL;
        redisAsyncFree(a->ac); /* in-flight callbacks run now, with no reply */
        a->ac = NULL;
    }
    uv_timer_stop(a->watchdog);
    uv_close((uv_handle_t *)a->watchdog, watchdog_closed);
    store_cfg_free(&a->cfg);
    free(a);
}

size_t store_async_inflight(const struct store_async *a) { return a ? a->ops : 0; }

/* A new operation with copies of the key parts; NULL with err on bad input. */
static struct op *op_new(struct store_async *a, const char *res, const char *ns, const char *name, store_done_fn done,
                         void *ud, char *err, size_t errlen) {
    if (!a || !done) {
        snprintf(err, errlen, "no store");
        return NULL;
    }
    if (store_validate_key(res, ns, name, err, errlen)) return NULL;
    size_t lr = strlen(res) + 1, ln = strlen(ns) + 1, lm = strlen(name) + 1;
    struct op *o = calloc(1, sizeof *o + lr + ln + lm);
    if (!o) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    o->a = a;
    a->ops++;
    o->res = memcpy(o->keys, res, lr);
    o->ns = memcpy(o->keys + lr, ns, ln);
    o->name = memcpy(o->keys + lr + ln, name, lm);
    o->done = done;
    o->ud = ud;
    return o;
}

int store_async_create(struct store_async *a, const char *resource, const char *ns, json_t *obj,
                       bool ns_must_exist, store_done_fn done, void *ud, char *err, size_t errlen) {
    json_t *prepared = NULL;
    const char *name = NULL;
    if (!a) {
        json_decref(obj);
        snprintf(err, errlen, "no store");
        return -EINVAL;
    }
    int rc = store_prepare_create_owned(&a->rng, resource, ns, obj, &prepared, &name, err, errlen);
    if (rc) return rc;
    struct op *o = op_new(a, resource, ns, name, done, ud, err, errlen);
    if (!o) {
        json_decref(prepared);
        return -EINVAL;
    }
    o->obj = prepared;
    o->ns_check = ns_must_exist && ns[0];
    rc = send_write(o, NULL);
    if (rc) {
        snprintf(err, errlen, "%s", o->err);
        op_free(o);
    }
    return rc;
}

int store_async_modify(struct store_async *a, const char *resource, const char *ns, const char *name,
                       store_modify_fn fn, void *fn_ud, store_done_fn done, void *ud, char *err, size_t errlen) {
    return store_async_modify_attach(a, resource, ns, name, fn, NULL, fn_ud, done, ud, err, errlen);
}

int store_async_modify_attach(struct store_async *a, const char *resource, const char *ns, const char *name,
                              store_modify_fn fn, store_attach_fn attach, void *fn_ud, store_done_fn done, void *ud,
                              char *err, size_t errlen) {
    return store_async_modify_fenced(a, resource, ns, name, fn, attach, NULL, fn_ud, done, ud, err, errlen);
}

int store_async_modify_fenced(struct store_async *a, const char *resource, const char *ns, const char *name,
                              store_modify_fn fn, store_attach_fn attach, const struct store_fence *fence,
                              void *fn_ud, store_done_fn done, void *ud, char *err, size_t errlen) {
    if (!fn) {
        snprintf(err, errlen, "no modify function");
        return -EINVAL;
    }
    if (store_fence_check(fence, err, errlen)) return -EINVAL;
    struct op *o = op_new(a, resource, ns, name, done, ud, err, errlen);
    if (!o) return -EINVAL;
    if (fence) {
        o->fenced = true;
        o->fence = (struct store_fence){.key = strcpy(o->fkey, fence->key), .value = strcpy(o->fval, fence->value)};
    }
    o->modify = true;
    o->fn = fn;
    o->attach = attach;
    o->fn_ud = fn_ud;
    int rc = send_get(o);
    if (rc) {
        snprintf(err, errlen, "%s", o->err);
        op_free(o);
    }
    return rc;
}

int store_async_delete(struct store_async *a, const char *resource, const char *ns, const char *name,
                       const char *expected_rv, store_done_fn done, void *ud, char *err, size_t errlen) {
    if (!expected_rv || !expected_rv[0] || strlen(expected_rv) >= sizeof ((struct op *)0)->expected) {
        snprintf(err, errlen, "a delete needs the resourceVersion it expects");
        return -EINVAL;
    }
    struct op *o = op_new(a, resource, ns, name, done, ud, err, errlen);
    if (!o) return -EINVAL;
    o->modify = true;
    o->delete_op = true;
    snprintf(o->expected, sizeof o->expected, "%s", expected_rv);
    int rc = send_get(o);
    if (rc) {
        snprintf(err, errlen, "%s", o->err);
        op_free(o);
    }
    return rc;
}

int store_async_put_text(struct store_async *a, const char *resource, const char *ns, const char *name,
                         const char *expected_rv, char *text, size_t len, size_t rv_at, store_done_fn done, void *ud,
                         char *err, size_t errlen) {
    int rc = -EINVAL;
    if (!text || rv_at > len || !expected_rv || !expected_rv[0] || strlen(expected_rv) >= sizeof ((struct op *)0)->expected)
        snprintf(err, errlen, "a write of text needs its text, the resourceVersion's place and the expected version");
    else if (a && len + 20 > a->cfg.max_object_bytes)
        snprintf(err, errlen, "Request entity too large: the object is %zu bytes, limit is %zu", len + 20,
                 a->cfg.max_object_bytes), rc = -E2BIG;
    else rc = 0;
    struct op *o = rc ? NULL : op_new(a, resource, ns, name, done, ud, err, errlen);
    if (!o) {
        free(text);
        return rc ? rc : -EINVAL;
    }
    if (a->closing) {
        snprintf(err, errlen, "redis: the store is closing");
        free(text);
        op_free(o);
        return -EIO;
    }
    o->modify = true;
    o->conditional = true; /* a lost race is the caller's to settle: no read to run again */
    o->blob = (struct store_blob){.json = text, .head_len = rv_at, .tail = text + rv_at, .tail_len = len - rv_at};
    store_pack_blob(a->cfg.pack, &o->blob); /* as every write: a Lease is mostly too small to pack */
    queue_write(o, expected_rv);
    return 0;
}
