/* mclient (mclient.h): the subscription over libcurl multi on the loop, and
 * calls over the client's own kept-alive, pipelined HTTP/1.1 connections
 * (libcurl for an https:// master). libcurl's callbacks only record (bytes
 * into the RecordIO decoder, decoded records into a queue, headers into the
 * transfer); everything that reaches the user happens in process(), after
 * curl_multi_socket_action has returned, so that user callbacks may add
 * calls or stop the client. A pooled call's answer reaches the user from
 * the connection's read callback, the connection's state settled first. */
#include "mclient.h"

#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jparse.h"
#include "mresp.h"
#include "recordio.h"

#define WATCHDOG_MS 250
#define MAX_QUEUED 65536 /* records decoded from one read, waiting for process() */
/* Calls handed to libcurl at once; the rest wait in mclient's own line
 * (libcurl walks its pending handles on every action: a long line there
 * costs quadratic time). */
#define MAX_INFLIGHT 64
/* Calls over the client's own connections (an http:// master): at most
 * POOL_CONNS kept alive, at most PIPELINE_MAX calls sent and unanswered on
 * one (a master answers a connection's requests in order, as libprocess
 * does; Mesos' own scheduler library pipelines its calls on one
 * connection). A new connection opens only when every open one has
 * PIPELINE_MAX calls out. */
#define POOL_CONNS 4
#define PIPELINE_MAX 64
#define POOL_INFLIGHT (POOL_CONNS * PIPELINE_MAX)
#define CONN_IDLE_MS 50000 /* an idle connection is closed after this (before a server's idle limit) */
#define CONN_READ 65536    /* bytes read at once (one buffer, shared: reads are handled at once) */

struct msock {
    uv_poll_t poll;
    curl_socket_t fd;
    struct mclient *c;
    struct msock *prev, *next;
};

struct xfer {
    struct mclient *c;
    CURL *easy;
    struct curl_slist *hdrs;
    char *body;
    char *reply;
    size_t rlen;
    char location[MCLIENT_URL_MAX];
    char stream_id[130];
    size_t len;
    bool stream, started;
    bool retried;             /* pooled: sent again once after its kept-alive connection closed unanswered */
    uint64_t sent_ms;         /* pooled: when handed to a connection */
    struct xfer *cnext;       /* pooled: the next call on the same connection, in the order sent */
    mclient_done_fn done;
    void *ud;
    struct xfer *prev, *next; /* every call, waiting or sent */
    struct xfer *wnext;       /* the calls waiting to be sent, in order */
};

struct mclient {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t curl_timer, watchdog, retry;
    int open_handles;
    struct mclient_config cfg;
    json_t *subscribe;              /* the SUBSCRIBE call, its framework id updated */
    char leader[MCLIENT_URL_MAX];
    char framework_id[MESOS_ID_MAX + 1];
    char stream_id[130];
    struct xfer *stream, *calls;
    struct xfer *waitq, *waitq_tail; /* calls past MAX_INFLIGHT, sent as others finish */
    unsigned inflight;
    CURL *idle[MAX_INFLIGHT];       /* finished call handles, reset and reused */
    int nidle;
    struct msock *socks;
    /* the pool of call connections (an http:// leader) */
    struct mconn *conns;
    uv_prepare_t flusher;           /* writes what calls of a loop turn queued, before the loop polls */
    uv_timer_t conn_timer;          /* call and connect timeouts, idle connections */
    char addr_for[MCLIENT_URL_MAX]; /* the leader addr was resolved for ("": none yet) */
    struct sockaddr_storage addr;
    char host_hdr[MCLIENT_URL_MAX], path[MCLIENT_URL_MAX + 32];
    char *rbuf;
    struct recordio_decoder dec;
    json_t **q;                     /* decoded records not yet processed */
    size_t qn, qcap;
    char fail[200];                 /* why the stream is being dropped, set by a callback */
    bool subscribed, final, stopping, redirected;
    double heartbeat_s;
    uint64_t last_event, stream_started;
    unsigned backoff_ms;
    int redirects;
    struct mclient_stats stats;
};

static void process(struct mclient *c);
static void schedule_subscribe(struct mclient *c, unsigned delay_ms);
static void on_watchdog(uv_timer_t *t);
static void call_answered(struct mclient *c, struct xfer *x, int status, const char *location, char *reply);
static void pump(struct mclient *c);

/* ---- libcurl on the loop ---- */
static void drive(struct mclient *c, curl_socket_t fd, int flags) {
    int running;
    curl_multi_socket_action(c->multi, fd, flags, &running);
    process(c);
}

static void on_poll(uv_poll_t *h, int status, int events) {
    struct msock *s = h->data;
    int flags = status < 0 ? CURL_CSELECT_ERR
                           : ((events & UV_READABLE) ? CURL_CSELECT_IN : 0) | ((events & UV_WRITABLE) ? CURL_CSELECT_OUT : 0);
    drive(s->c, s->fd, flags);
}

static void on_handle_closed(uv_handle_t *h) {
    struct mclient *c = h->data;
    c->open_handles--;
}

static void on_sock_closed(uv_handle_t *h) { free(h->data); }

static void sock_close(struct mclient *c, struct msock *s) {
    if (s->prev) s->prev->next = s->next;
    else c->socks = s->next;
    if (s->next) s->next->prev = s->prev;
    uv_poll_stop(&s->poll);
    uv_close((uv_handle_t *)&s->poll, on_sock_closed);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
    struct mclient *c = userp;
    struct msock *s = socketp;
    (void)e;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            curl_multi_assign(c->multi, fd, NULL);
            sock_close(c, s);
        }
        return 0;
    }
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || uv_poll_init_socket(c->loop, &s->poll, fd)) {
            free(s);
            return -1;
        }
        s->poll.data = s;
        s->fd = fd;
        s->c = c;
        s->next = c->socks;
        if (c->socks) c->socks->prev = s;
        c->socks = s;
        curl_multi_assign(c->multi, fd, s);
    }
    int ev = ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
    uv_poll_start(&s->poll, ev, on_poll);
    return 0;
}

static void on_curl_timer(uv_timer_t *t) { drive(t->data, CURL_SOCKET_TIMEOUT, 0); }

static int on_timer(CURLM *multi, long ms, void *userp) {
    struct mclient *c = userp;
    (void)multi;
    if (ms < 0) uv_timer_stop(&c->curl_timer);
    else uv_timer_start(&c->curl_timer, on_curl_timer, (uint64_t)ms, 0);
    return 0;
}

/* ---- transfers ---- */
static void xfer_free(struct mclient *c, struct xfer *x) {
    if (x->easy) {
        if (c->multi) curl_multi_remove_handle(c->multi, x->easy);
        if (!x->stream && c->nidle < MAX_INFLIGHT && !c->stopping) {
            curl_easy_reset(x->easy);
            c->idle[c->nidle++] = x->easy;
        } else {
            curl_easy_cleanup(x->easy);
        }
    }
    curl_slist_free_all(x->hdrs);
    free(x->body);
    free(x->reply);
    free(x);
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud) {
    struct xfer *x = ud;
    size_t len = size * n;
    if (len > 5 && !strncmp(buf, "HTTP/", 5)) { /* a new response (after a 100 Continue): start over */
        x->location[0] = x->stream_id[0] = 0;
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon) return len;
    size_t klen = (size_t)(colon - buf);
    const char *v = colon + 1, *end = buf + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
    size_t vlen = (size_t)(end - v);
    if (klen == 8 && !strncasecmp(buf, "Location", 8) && vlen < sizeof x->location) {
        memcpy(x->location, v, vlen);
        x->location[vlen] = 0;
    } else if (klen == 15 && !strncasecmp(buf, "Mesos-Stream-Id", 15) && vlen < sizeof x->stream_id) {
        memcpy(x->stream_id, v, vlen);
        x->stream_id[vlen] = 0;
    }
    return len;
}

static void keep_reply(struct xfer *x, const char *data, size_t len) {
    if (x->rlen >= MCLIENT_REPLY_MAX) return;
    if (len > MCLIENT_REPLY_MAX - x->rlen) len = MCLIENT_REPLY_MAX - x->rlen;
    char *r = realloc(x->reply, x->rlen + len + 1);
    if (!r) return;
    memcpy(r + x->rlen, data, len);
    x->rlen += len;
    r[x->rlen] = 0;
    x->reply = r;
}

static size_t on_call_data(char *data, size_t size, size_t n, void *ud) {
    keep_reply(ud, data, size * n);
    return size * n;
}

static int on_record(void *ud, const char *data, size_t len) {
    struct mclient *c = ud;
    json_error_t jerr;
    json_t *ev = jparse_loadb(data, len, 0, &jerr);
    if (!ev) {
        snprintf(c->fail, sizeof c->fail, "a record is not JSON: %s", jerr.text);
        return -1;
    }
    if (c->qn == c->qcap) {
        size_t cap = c->qcap ? c->qcap * 2 : 64;
        json_t **q = cap <= MAX_QUEUED ? realloc(c->q, cap * sizeof *q) : NULL;
        if (!q) {
            json_decref(ev);
            snprintf(c->fail, sizeof c->fail, "too many records at once");
            return -1;
        }
        c->q = q;
        c->qcap = cap;
    }
    c->q[c->qn++] = ev;
    return 0;
}

static size_t on_stream_data(char *data, size_t size, size_t n, void *ud) {
    struct xfer *x = ud;
    struct mclient *c = x->c;
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) {
        keep_reply(x, data, size * n);
        return size * n;
    }
    if (!c->stream_id[0]) {
        if (!x->stream_id[0]) {
            snprintf(c->fail, sizeof c->fail, "SUBSCRIBE answered without Mesos-Stream-Id");
            return 0;
        }
        memcpy(c->stream_id, x->stream_id, sizeof c->stream_id);
    }
    int rc = recordio_decode(&c->dec, data, size * n, on_record, c);
    if (rc) {
        if (!c->fail[0]) snprintf(c->fail, sizeof c->fail, "%s", c->dec.err);
        return 0; /* CURLE_WRITE_ERROR: the transfer ends */
    }
    return size * n;
}

/* A transfer of body (len bytes, taken), not started yet; NULL when out of memory (body freed). */
static struct xfer *xfer_new(struct mclient *c, bool stream, char *body, size_t len) {
    struct xfer *x = body ? calloc(1, sizeof *x) : NULL;
    if (!x) {
        free(body);
        return NULL;
    }
    x->c = c;
    x->stream = stream;
    x->body = body;
    x->len = len;
    return x;
}

/* Hands x to libcurl, for the leader and the stream id of now. 0, or -1. */
static int xfer_start(struct mclient *c, struct xfer *x) {
    x->easy = !x->stream && c->nidle ? c->idle[--c->nidle] : curl_easy_init();
    if (!x->easy) return -1;
    char url[MCLIENT_URL_MAX + 32];
    snprintf(url, sizeof url, "%s/api/v1/scheduler", c->leader);
    x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
    x->hdrs = curl_slist_append(x->hdrs, "Accept: application/json");
    x->hdrs = curl_slist_append(x->hdrs, "Expect:");
    if (!x->stream) {
        char h[160];
        snprintf(h, sizeof h, "Mesos-Stream-Id: %s", c->stream_id);
        x->hdrs = curl_slist_append(x->hdrs, h);
    }
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)x->len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, x->stream ? on_stream_data : on_call_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->cfg.connect_timeout_ms);
    if (x->stream) curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    else curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->cfg.call_timeout_ms);
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        x->easy = NULL;
        return -1;
    }
    x->started = true;
    if (!x->stream) c->inflight++;
    return 0;
}

static void call_finish(struct mclient *c, struct xfer *x, int status, char *reply);

/* ---- calls over the client's own connections ---- */

struct mconn {
    uv_tcp_t tcp;
    uv_connect_t creq;
    struct mclient *c;            /* NULL once closing (libuv may still run its callbacks) */
    struct mconn *next;
    char base[MCLIENT_URL_MAX];   /* the master it talks to */
    struct xfer *head, *tail;     /* calls sent or queued on it, answered in this order */
    unsigned n;
    char *out;                    /* requests queued for the next flush */
    size_t outlen, outcap;
    bool connected, writing, close_after;
    bool retry_ok;                /* its unanswered calls may be sent again: it went from idle to busy
                                   * after an answer and no byte came since, or an answer closed it */
    unsigned served;              /* answers read on it */
    uint64_t opened_ms, idle_ms;
    struct mresp resp;
};

struct mwrite {
    uv_write_t w;
    struct mconn *k;
    char *buf;
};

/* Whether calls go over the pool: an http:// leader (libcurl carries https). */
static bool pooled(const struct mclient *c) { return !strncmp(c->leader, "http://", 7); }

static void on_conn_closed(uv_handle_t *h) {
    struct mconn *k = h->data;
    mresp_free(&k->resp);
    free(k->out);
    free(k);
}

/* Takes k out of the pool and closes it; the calls on it are the caller's
 * (detached from k first). */
static void conn_close(struct mclient *c, struct mconn *k) {
    for (struct mconn **pp = &c->conns; *pp; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    k->c = NULL;
    k->head = k->tail = NULL;
    k->n = 0;
    uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
}

/* k failed (why): its calls are sent again when the master cannot have
 * read them (a kept-alive connection it closed before any byte of an
 * answer, as libcurl retries; calls behind an answer that closed the
 * connection), once each; the others are answered -EIO. k is closed. */
static void conn_fail(struct mclient *c, struct mconn *k, const char *why) {
    struct xfer *x = k->head;
    bool again = k->retry_ok;
    unsigned failed = 0;
    conn_close(c, k);
    struct xfer *redo = NULL, *redo_last = NULL;
    while (x && !c->stopping) {
        struct xfer *next = x->cnext;
        x->cnext = NULL;
        x->started = false;
        c->inflight--;
        if (again && !x->retried) {
            x->retried = true;
            x->wnext = NULL;
            if (redo_last) redo_last->wnext = x;
            else redo = x;
            redo_last = x;
        } else {
            if (!failed++)
                fprintf(stderr, "level=warn msg=\"mesos: calls failed\" master=%s error=\"%s\"\n", k->base, why);
            call_answered(c, x, -EIO, NULL, NULL); /* may stop the client: then it answered the rest */
        }
        x = next;
    }
    if (redo && !c->stopping) { /* back at the head of the line, in their order */
        redo_last->wnext = c->waitq;
        if (!c->waitq) c->waitq_tail = redo_last;
        c->waitq = redo;
    }
    pump(c);
}

static void on_flush(uv_prepare_t *p);

static void conn_want_flush(struct mclient *c) {
    if (!uv_is_active((uv_handle_t *)&c->flusher)) uv_prepare_start(&c->flusher, on_flush);
}

static void on_conn_written(uv_write_t *w, int status) {
    struct mwrite *mw = (struct mwrite *)w;
    struct mconn *k = mw->k;
    free(mw->buf);
    free(mw);
    struct mclient *c = k->c;
    if (!c) return;
    k->writing = false;
    if (status < 0) conn_fail(c, k, uv_strerror(status));
    else if (k->outlen) conn_want_flush(c);
}

/* Writes what is queued on k (one write at a time: what comes meanwhile waits for the next). */
static void conn_flush(struct mclient *c, struct mconn *k) {
    if (!k->connected || k->writing || !k->outlen) return;
    struct mwrite *mw = malloc(sizeof *mw);
    if (!mw) {
        conn_fail(c, k, "out of memory");
        return;
    }
    mw->k = k;
    mw->buf = k->out;
    uv_buf_t b = uv_buf_init(k->out, (unsigned)k->outlen);
    k->out = NULL;
    k->outlen = k->outcap = 0;
    int rc = uv_write(&mw->w, (uv_stream_t *)&k->tcp, &b, 1, on_conn_written);
    if (rc) {
        free(mw->buf);
        free(mw);
        conn_fail(c, k, uv_strerror(rc));
        return;
    }
    k->writing = true;
}

static void on_flush(uv_prepare_t *p) {
    struct mclient *c = p->data;
    uv_prepare_stop(p);
    for (struct mconn *k = c->conns, *next; k && !c->stopping; k = next) {
        next = k->next; /* conn_flush may close k (or others: a closed one has no c) */
        if (k->c) conn_flush(c, k);
    }
}

static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    struct mconn *k = h->data;
    (void)hint;
    if (!k->c || !k->c->rbuf) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init(k->c->rbuf, CONN_READ);
}

/* The call at k's head is answered by k->resp. */
static void conn_answer(struct mclient *c, struct mconn *k) {
    struct xfer *x = k->head;
    k->head = x->cnext;
    if (!k->head) k->tail = NULL;
    k->n--;
    k->served++;
    if (!k->n) k->idle_ms = uv_now(c->loop);
    x->cnext = NULL;
    char *body = k->resp.body;
    k->resp.body = NULL;
    char loc[MRESP_LOCATION_MAX];
    snprintf(loc, sizeof loc, "%s", k->resp.location);
    int status = k->resp.status;
    bool closing = k->resp.close;
    mresp_next(&k->resp);
    if (closing) k->close_after = true;
    call_answered(c, x, status, loc[0] ? loc : NULL, body);
}

static void on_conn_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    struct mconn *k = st->data;
    struct mclient *c = k->c;
    if (!c || nread == 0) return;
    if (nread < 0) {
        int rc = mresp_eof(&k->resp);
        if (rc == MRESP_DONE && k->head) {
            k->retry_ok = false;
            conn_answer(c, k);
            if (!k->c) return;
        }
        conn_fail(c, k, nread == UV_EOF ? (rc == MRESP_ERROR ? k->resp.err : "the master closed the connection")
                                        : uv_strerror((int)nread));
        return;
    }
    k->retry_ok = false;
    const char *p = buf->base;
    size_t left = (size_t)nread;
    while (left) {
        if (!k->head) {
            conn_fail(c, k, "bytes from the master with no call waiting");
            return;
        }
        size_t used = 0;
        int rc = mresp_feed(&k->resp, p, left, &used);
        p += used;
        left -= used;
        if (rc == MRESP_ERROR) {
            char why[200];
            snprintf(why, sizeof why, "bad response: %s", k->resp.err);
            conn_fail(c, k, why);
            return;
        }
        if (rc != MRESP_DONE) continue;
        conn_answer(c, k);
        if (!k->c || c->stopping) return; /* the caller stopped the client, or k closed */
        if (k->close_after) { /* what was sent behind that answer was not read */
            k->retry_ok = true;
            conn_fail(c, k, "the master closed the connection");
            return;
        }
    }
}

static void on_conn_connected(uv_connect_t *cr, int status) {
    struct mconn *k = cr->data;
    struct mclient *c = k->c;
    if (!c) return;
    if (status < 0) {
        char why[160];
        snprintf(why, sizeof why, "connect to %.100s: %s", k->base, uv_strerror(status));
        conn_fail(c, k, why);
        return;
    }
    k->connected = true;
    uv_tcp_nodelay(&k->tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&k->tcp, conn_alloc, on_conn_read);
    if (rc) {
        conn_fail(c, k, uv_strerror(rc));
        return;
    }
    conn_flush(c, k);
}

/* The leader's address, host header and path; 0, or -1 when the URL names
 * no host that resolves (resolved once per leader). */
static int leader_addr(struct mclient *c) {
    if (!strcmp(c->addr_for, c->leader)) return 0;
    const char *h = c->leader + 7; /* after "http://" */
    size_t hlen = strcspn(h, "/?#");
    snprintf(c->host_hdr, sizeof c->host_hdr, "%.*s", (int)hlen, h);
    snprintf(c->path, sizeof c->path, "%s/api/v1/scheduler", h + hlen);
    char host[MCLIENT_URL_MAX], port[8] = "80";
    const char *colon;
    if (c->host_hdr[0] == '[') { /* [v6]:port */
        const char *rb = strchr(c->host_hdr, ']');
        if (!rb) return -1;
        snprintf(host, sizeof host, "%.*s", (int)(rb - c->host_hdr - 1), c->host_hdr + 1);
        colon = rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = strrchr(c->host_hdr, ':');
        snprintf(host, sizeof host, "%.*s", (int)(colon ? (size_t)(colon - c->host_hdr) : strlen(c->host_hdr)),
                 c->host_hdr);
    }
    if (colon) snprintf(port, sizeof port, "%.7s", colon + 1);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    uv_getaddrinfo_t req;
    /* a master named by address resolves without a lookup; a name, once per
     * leader, on the loop (the subscription's libcurl resolved it a moment ago) */
    if (uv_getaddrinfo(c->loop, &req, NULL, host, port, &hints) || !req.addrinfo) return -1;
    memcpy(&c->addr, req.addrinfo->ai_addr, req.addrinfo->ai_addrlen);
    uv_freeaddrinfo(req.addrinfo);
    snprintf(c->addr_for, sizeof c->addr_for, "%s", c->leader);
    return 0;
}

static void on_conn_timer(uv_timer_t *t);

static struct mconn *conn_open(struct mclient *c) {
    struct mconn *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->c = c;
    snprintf(k->base, sizeof k->base, "%s", c->leader);
    uv_tcp_init(c->loop, &k->tcp);
    k->tcp.data = k->creq.data = k;
    mresp_init(&k->resp);
    k->opened_ms = uv_now(c->loop);
    k->next = c->conns;
    c->conns = k;
    int rc = uv_tcp_connect(&k->creq, &k->tcp, (const struct sockaddr *)&c->addr, on_conn_connected);
    if (rc) {
        conn_close(c, k);
        return NULL;
    }
    if (!uv_is_active((uv_handle_t *)&c->conn_timer)) uv_timer_start(&c->conn_timer, on_conn_timer, 250, 250);
    return k;
}

/* The connection for the next call: the leader's with the fewest calls out,
 * a new one while every open one has PIPELINE_MAX out (at most POOL_CONNS);
 * NULL when none can take it now. Connections to an old leader close once
 * idle. */
static struct mconn *conn_pick(struct mclient *c) {
    struct mconn *best = NULL;
    unsigned open = 0;
    for (struct mconn *k = c->conns, *next; k; k = next) {
        next = k->next;
        if (strcmp(k->base, c->leader) || k->close_after) {
            if (!k->n) conn_close(c, k);
            continue;
        }
        open++;
        if (!best || k->n < best->n) best = k;
    }
    if (best && best->n < PIPELINE_MAX) return best;
    return open < POOL_CONNS ? conn_open(c) : NULL;
}

static int out_put(struct mconn *k, const char *s, size_t n) {
    if (k->outlen + n > k->outcap) {
        size_t cap = k->outcap ? k->outcap : 4096;
        while (cap < k->outlen + n) cap *= 2;
        char *o = realloc(k->out, cap);
        if (!o) return -1;
        k->out = o;
        k->outcap = cap;
    }
    memcpy(k->out + k->outlen, s, n);
    k->outlen += n;
    return 0;
}

/* Queues x on a connection of the pool: 0; 1 when every connection is full
 * (x waits); -EIO when the leader does not resolve or out of memory. */
static int conn_send(struct mclient *c, struct xfer *x) {
    if (leader_addr(c)) return -EIO;
    struct mconn *k = conn_pick(c);
    if (!k) return 1;
    char head[MCLIENT_URL_MAX * 2 + 400];
    int hl = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                      "Accept: application/json\r\nMesos-Stream-Id: %s\r\nContent-Length: %zu\r\n\r\n",
                      c->path, c->host_hdr, c->stream_id, x->len);
    size_t mark = k->outlen;
    if (hl <= 0 || (size_t)hl >= sizeof head || out_put(k, head, (size_t)hl) || out_put(k, x->body, x->len)) {
        k->outlen = mark;
        return -EIO;
    }
    if (!k->n && k->served) k->retry_ok = true;
    x->cnext = NULL;
    if (k->tail) k->tail->cnext = x;
    else k->head = x;
    k->tail = x;
    k->n++;
    x->started = true;
    x->sent_ms = uv_now(c->loop);
    c->inflight++;
    conn_want_flush(c);
    return 0;
}

/* Timeouts: a call unanswered for call_timeout_ms, a connect not done in
 * connect_timeout_ms; idle connections past CONN_IDLE_MS close. */
static void on_conn_timer(uv_timer_t *t) {
    struct mclient *c = t->data;
    uint64_t now = uv_now(c->loop);
    for (struct mconn *k = c->conns, *next; k; k = next) {
        next = k->next; /* answering may close others: a closed one has no c */
        if (!k->c) continue;
        if (!k->connected && now - k->opened_ms > c->cfg.connect_timeout_ms) {
            k->retry_ok = false;
            conn_fail(c, k, "connect timed out");
        } else if (k->head && now - k->head->sent_ms > c->cfg.call_timeout_ms) {
            k->retry_ok = false;
            conn_fail(c, k, "call timed out");
        } else if (!k->n && now - k->idle_ms > CONN_IDLE_MS) {
            conn_close(c, k);
        }
        if (c->stopping) return;
    }
    if (!c->conns) uv_timer_stop(t);
}

/* Sends waiting calls while there is room. */
static void pump(struct mclient *c) {
    while (c->waitq && !c->stopping) {
        bool pool = pooled(c);
        if (c->inflight >= (pool ? POOL_INFLIGHT : MAX_INFLIGHT)) break;
        struct xfer *x = c->waitq;
        int rc = pool ? conn_send(c, x) : xfer_start(c, x) ? -ENOMEM : 0;
        if (rc > 0) break; /* every connection full: it waits for an answer */
        c->waitq = x->wnext;
        if (!c->waitq) c->waitq_tail = NULL;
        x->wnext = NULL;
        if (rc < 0) call_finish(c, x, rc, NULL);
    }
}

/* ---- the subscription ---- */
int mclient_redirect_base(const char *base, const char *loc, char *out, size_t outlen) {
    const char *host;
    size_t scheme_len;
    if (!strncmp(loc, "//", 2)) {
        const char *sep = strstr(base, "://");
        if (!sep) return -1;
        scheme_len = (size_t)(sep - base) + 1; /* "http:" */
        host = loc + 2;
    } else if (!strncmp(loc, "http://", 7) || !strncmp(loc, "https://", 8)) {
        scheme_len = loc[4] == 's' ? 6 : 5;
        host = loc + scheme_len + 2;
        base = loc;
    } else if (loc[0] == '/') {
        if (strlen(base) >= outlen) return -1;
        snprintf(out, outlen, "%s", base);
        return 0;
    } else {
        return -1;
    }
    size_t hlen = strcspn(host, "/?#");
    if (hlen == 0 || scheme_len + 2 + hlen >= outlen) return -1;
    snprintf(out, outlen, "%.*s//%.*s", (int)scheme_len, base, (int)hlen, host);
    return 0;
}

static void subscribe_now(struct mclient *c) {
    if (c->stopping || c->final || c->stream) return;
    if (c->framework_id[0]) {
        json_t *fi = json_object_get(json_object_get(c->subscribe, "subscribe"), "framework_info");
        json_object_set_new(fi, "id", mesos_id(c->framework_id));
        json_object_set_new(c->subscribe, "framework_id", mesos_id(c->framework_id));
    }
    size_t len = 0;
    char *body = jdump(c->subscribe, JSON_COMPACT, &len);
    recordio_decoder_free(&c->dec);
    recordio_decoder_init(&c->dec, c->cfg.max_record);
    c->stream_id[0] = 0;
    c->fail[0] = 0;
    c->stats.subscribes++;
    c->stream = xfer_new(c, true, body, len);
    if (c->stream && xfer_start(c, c->stream)) {
        xfer_free(c, c->stream);
        c->stream = NULL;
    }
    if (!c->stream) {
        schedule_subscribe(c, c->backoff_ms);
        return;
    }
    c->stream_started = uv_now(c->loop);
    uv_timer_start(&c->watchdog, on_watchdog, WATCHDOG_MS, WATCHDOG_MS);
}

static void on_retry(uv_timer_t *t) {
    struct mclient *c = t->data;
    subscribe_now(c);
    process(c);
}

static void schedule_subscribe(struct mclient *c, unsigned delay_ms) {
    if (c->stopping || c->final) return;
    uv_timer_start(&c->retry, on_retry, delay_ms, 0);
}

/* The stream is over (why); resubscribe unless final or stopping. */
static void stream_lost(struct mclient *c, const char *why) {
    if (c->stream) {
        xfer_free(c, c->stream);
        c->stream = NULL;
    }
    bool was = c->subscribed;
    c->subscribed = false;
    c->stream_id[0] = 0;
    for (size_t i = 0; i < c->qn; i++) json_decref(c->q[i]);
    c->qn = 0;
    uv_timer_stop(&c->watchdog);
    if (c->cfg.on_lost && (was || c->final)) c->cfg.on_lost(c->cfg.ud, why, c->final || c->stopping);
    if (c->final || c->stopping) return;
    if (c->redirected && c->redirects <= MCLIENT_MAX_REDIRECTS) {
        c->redirected = false;
        schedule_subscribe(c, 0);
        return;
    }
    c->redirected = false;
    c->redirects = 0;
    schedule_subscribe(c, c->backoff_ms);
    c->backoff_ms = c->backoff_ms * 2 > c->cfg.backoff_max_ms ? c->cfg.backoff_max_ms : c->backoff_ms * 2;
}

static void on_watchdog(uv_timer_t *t) {
    struct mclient *c = t->data;
    if (!c->stream) return;
    if (!c->subscribed) {
        if (uv_now(c->loop) - c->stream_started > c->cfg.subscribe_timeout_ms) {
            char why[80];
            snprintf(why, sizeof why, "no SUBSCRIBED within %u ms", c->cfg.subscribe_timeout_ms);
            c->stats.heartbeat_timeouts++;
            stream_lost(c, why);
        }
        return;
    }
    uint64_t limit = (uint64_t)((c->cfg.missed_heartbeats + 1) * c->heartbeat_s * 1000.0);
    if (uv_now(c->loop) - c->last_event > limit) {
        char why[120];
        snprintf(why, sizeof why, "no event for %llu ms (heartbeats every %g s)", (unsigned long long)limit,
                 c->heartbeat_s);
        c->stats.heartbeat_timeouts++;
        stream_lost(c, why);
    }
}

/* Handles one decoded event; false when the stream was dropped because of it. */
static bool handle_event(struct mclient *c, json_t *root) {
    struct mesos_event ev;
    char err[200];
    c->last_event = uv_now(c->loop);
    if (mesos_event_parse(root, &ev, err, sizeof err)) {
        c->stats.stream_errors++;
        stream_lost(c, err);
        return false;
    }
    c->stats.events++;
    switch (ev.type) {
    case MESOS_EVENT_SUBSCRIBED:
        snprintf(c->framework_id, sizeof c->framework_id, "%s", ev.framework_id);
        c->heartbeat_s = ev.heartbeat_seconds;
        c->subscribed = true;
        c->stats.subscribed++;
        c->backoff_ms = c->cfg.backoff_min_ms;
        c->redirects = 0;
        if (c->cfg.on_subscribed) c->cfg.on_subscribed(c->cfg.ud, c->framework_id);
        break;
    case MESOS_EVENT_HEARTBEAT:
        break;
    case MESOS_EVENT_ERROR:
        if (c->cfg.on_event) c->cfg.on_event(c->cfg.ud, &ev, root);
        if (!c->stopping) {
            c->final = true;
            char why[300];
            snprintf(why, sizeof why, "ERROR from the master: %.200s", ev.message);
            stream_lost(c, why);
        }
        return false;
    default:
        if (c->cfg.on_event) c->cfg.on_event(c->cfg.ud, &ev, root);
        break;
    }
    return !c->stopping;
}

/* A finished stream transfer: why it ended, and what next. */
static void stream_done(struct mclient *c, CURLcode rc) {
    struct xfer *x = c->stream;
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    char why[400];
    if (code == 307) {
        char base[MCLIENT_URL_MAX];
        c->stats.redirects++;
        if (mclient_redirect_base(c->leader, x->location, base, sizeof base)) {
            snprintf(why, sizeof why, "307 with an unusable Location '%.200s'", x->location);
        } else {
            snprintf(why, sizeof why, "redirected from %.120s to %.120s", c->leader, base);
            snprintf(c->leader, sizeof c->leader, "%s", base);
            c->redirected = true;
            c->redirects++;
        }
    } else if (c->fail[0]) {
        c->stats.stream_errors++;
        snprintf(why, sizeof why, "%s", c->fail);
    } else if (rc != CURLE_OK) {
        if (recordio_at_boundary(&c->dec))
            snprintf(why, sizeof why, "stream: %s", curl_easy_strerror(rc));
        else /* the connection broke inside a record: a transport fault, not the master's */
            snprintf(why, sizeof why, "stream: %s (inside a record: %zu of %zu bytes)", curl_easy_strerror(rc),
                     c->dec.len, c->dec.want);
    } else if (code != 200) {
        snprintf(why, sizeof why, "SUBSCRIBE answered %ld: %.200s", code, x->reply ? x->reply : "");
    } else if (recordio_finish(&c->dec)) {
        c->stats.stream_errors++;
        snprintf(why, sizeof why, "%s", c->dec.err);
    } else {
        snprintf(why, sizeof why, "the master ended the stream");
    }
    stream_lost(c, why);
}

/* Unlinks a call, frees it and answers its caller. reply is taken. */
static void call_finish(struct mclient *c, struct xfer *x, int status, char *reply) {
    if (x->prev) x->prev->next = x->next;
    else c->calls = x->next;
    if (x->next) x->next->prev = x->prev;
    if (x->started) c->inflight--;
    mclient_done_fn done = x->done;
    void *ud = x->ud;
    xfer_free(c, x);
    if (done) done(ud, status, status < 0 ? NULL : reply ? reply : "");
    free(reply);
}

/* A call's answer (status, or a negative errno), from libcurl or the pool: a
 * 307 moves the client to the leader it names. reply is taken. */
static void call_answered(struct mclient *c, struct xfer *x, int status, const char *location, char *reply) {
    if (status < 0 || status >= 400) c->stats.call_errors++;
    if (status == 307 && location && location[0]) {
        char base[MCLIENT_URL_MAX];
        /* Only when the client does not follow that leader already: calls
         * sent to the old master come back 307 after the stream moved. */
        if (!mclient_redirect_base(c->leader, location, base, sizeof base) && strcmp(base, c->leader)) {
            c->stats.redirects++;
            snprintf(c->leader, sizeof c->leader, "%s", base);
            c->redirected = true;
            c->redirects++;
            if (c->stream || c->subscribed) stream_lost(c, "a call was redirected to another master");
        }
    }
    call_finish(c, x, status, reply);
    pump(c);
}

static void call_done(struct mclient *c, struct xfer *x, CURLcode rc) {
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    char *reply = x->reply;
    x->reply = NULL;
    call_answered(c, x, rc == CURLE_OK ? (int)code : -EIO, x->location, reply);
}

static void process(struct mclient *c) {
    /* decoded events first: they came before whatever ended the transfer */
    for (size_t i = 0; i < c->qn; i++) {
        json_t *ev = c->q[i];
        c->q[i] = NULL;
        bool go_on = handle_event(c, ev);
        json_decref(ev);
        if (!go_on) { /* the stream was dropped: the rest is discarded */
            for (size_t j = i + 1; j < c->qn; j++) json_decref(c->q[j]);
            break;
        }
    }
    c->qn = 0;
    if (c->stopping || !c->multi) return;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(c->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        struct xfer *x = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        CURLcode rc = msg->data.result;
        if (x == c->stream) stream_done(c, rc);
        else call_done(c, x, rc);
        if (c->stopping) return;
    }
}

/* Queues a call whose body (malloc'd, taken) is written. */
static int call_body(struct mclient *c, char *body, size_t len, mclient_done_fn done, void *ud) {
    struct xfer *x = xfer_new(c, false, body, len);
    if (!x) return -ENOMEM;
    x->done = done;
    x->ud = ud;
    x->next = c->calls;
    if (c->calls) c->calls->prev = x;
    c->calls = x;
    c->stats.calls++;
    if (c->waitq_tail) c->waitq_tail->wnext = x;
    else c->waitq = x;
    c->waitq_tail = x;
    pump(c);
    return 0;
}

int mclient_call(struct mclient *c, json_t *call, mclient_done_fn done, void *ud) {
    if (!c->subscribed || c->stopping) {
        json_decref(call);
        return -ENOTCONN;
    }
    json_object_set_new(call, "framework_id", mesos_id(c->framework_id));
    size_t len = 0;
    char *body = jdump(call, JSON_COMPACT, &len);
    json_decref(call);
    return call_body(c, body, len, done, ud);
}

int mclient_call_members(struct mclient *c, const char *members, size_t len, mclient_done_fn done, void *ud) {
    if (!c->subscribed || c->stopping) return -ENOTCONN;
    char *body = NULL;
    size_t blen = 0, cap = 0;
    static const char head[] = "{\"framework_id\":{\"value\":";
    if (jdump_append(&body, &blen, &cap, head, sizeof head - 1) ||
        jdump_append_string(&body, &blen, &cap, c->framework_id, strlen(c->framework_id)) ||
        jdump_append(&body, &blen, &cap, "},", 2) || jdump_append(&body, &blen, &cap, members, len) ||
        jdump_append(&body, &blen, &cap, "}", 1)) {
        free(body);
        return -ENOMEM;
    }
    return call_body(c, body, blen, done, ud);
}

int mclient_start(uv_loop_t *loop, const struct mclient_config *cfg, struct mclient **out, char *err, size_t errlen) {
    if (!cfg->master || (strncmp(cfg->master, "http://", 7) && strncmp(cfg->master, "https://", 8)) ||
        strlen(cfg->master) >= MCLIENT_URL_MAX) {
        snprintf(err, errlen, "master URL must be http(s)://host:port, at most %d bytes", MCLIENT_URL_MAX - 1);
        return -EINVAL;
    }
    struct mclient *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->loop = loop;
    c->cfg = *cfg;
    if (!c->cfg.backoff_min_ms) c->cfg.backoff_min_ms = 500;
    if (!c->cfg.backoff_max_ms) c->cfg.backoff_max_ms = 15000;
    if (c->cfg.backoff_max_ms < c->cfg.backoff_min_ms) c->cfg.backoff_max_ms = c->cfg.backoff_min_ms;
    if (!c->cfg.missed_heartbeats) c->cfg.missed_heartbeats = 5;
    if (!c->cfg.connect_timeout_ms) c->cfg.connect_timeout_ms = 10000;
    if (!c->cfg.call_timeout_ms) c->cfg.call_timeout_ms = 30000;
    if (!c->cfg.subscribe_timeout_ms) c->cfg.subscribe_timeout_ms = 30000;
    c->backoff_ms = c->cfg.backoff_min_ms;
    snprintf(c->leader, sizeof c->leader, "%s", cfg->master);
    size_t l = strlen(c->leader);
    while (l > 0 && c->leader[l - 1] == '/') c->leader[--l] = 0;
    if (cfg->fi.id) snprintf(c->framework_id, sizeof c->framework_id, "%s", cfg->fi.id);
    c->subscribe = mesos_call_subscribe(&cfg->fi);
    c->cfg.fi = (struct mesos_framework_info){0}; /* the caller's strings are not kept */
    c->cfg.master = NULL;
    c->multi = curl_multi_init();
    c->rbuf = malloc(CONN_READ);
    if (!c->subscribe || !c->multi || !c->rbuf) {
        free(c->rbuf);
        json_decref(c->subscribe);
        if (c->multi) curl_multi_cleanup(c->multi);
        free(c);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    /* Calls wait in libcurl's line rather than open a connection each: a
     * master serves every framework on one process. */
    curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)(cfg->max_connections ? cfg->max_connections : 16));
    uv_timer_init(loop, &c->curl_timer);
    uv_timer_init(loop, &c->watchdog);
    uv_timer_init(loop, &c->retry);
    uv_prepare_init(loop, &c->flusher);
    uv_timer_init(loop, &c->conn_timer);
    c->curl_timer.data = c->watchdog.data = c->retry.data = c->flusher.data = c->conn_timer.data = c;
    c->open_handles = 5;
    recordio_decoder_init(&c->dec, cfg->max_record);
    subscribe_now(c);
    *out = c;
    return 0;
}

bool mclient_subscribed(const struct mclient *c) { return c->subscribed; }
const char *mclient_framework_id(const struct mclient *c) { return c->framework_id[0] ? c->framework_id : NULL; }
const char *mclient_leader(const struct mclient *c) { return c->leader; }
void mclient_get_stats(const struct mclient *c, struct mclient_stats *out) { *out = c->stats; }

void mclient_stop(struct mclient *c) {
    if (c->stopping) return;
    c->stopping = true;
    if (c->stream) stream_lost(c, "stopped");
    while (c->conns) conn_close(c, c->conns); /* their calls are answered below */
    c->waitq = c->waitq_tail = NULL;
    while (c->calls) call_finish(c, c->calls, -ECANCELED, NULL);
    while (c->nidle) curl_easy_cleanup(c->idle[--c->nidle]);
    for (size_t i = 0; i < c->qn; i++) json_decref(c->q[i]);
    c->qn = 0;
    curl_multi_cleanup(c->multi); /* closes pooled connections: their sockets are released through on_socket */
    c->multi = NULL;
    while (c->socks) sock_close(c, c->socks);
    uv_close((uv_handle_t *)&c->curl_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->watchdog, on_handle_closed);
    uv_close((uv_handle_t *)&c->retry, on_handle_closed);
    uv_close((uv_handle_t *)&c->flusher, on_handle_closed);
    uv_close((uv_handle_t *)&c->conn_timer, on_handle_closed);
}

void mclient_free(struct mclient *c) {
    if (!c) return;
    json_decref(c->subscribe);
    recordio_decoder_free(&c->dec);
    free(c->q);
    free(c->rbuf);
    free(c);
}
