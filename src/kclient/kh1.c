/* kh1: kclient's requests to a plain http:// server over HTTP/1.1 on libuv,
 * without libcurl (kclient_int.h). One request at a time per connection (no
 * pipelining: RFC 7230 6.3.2 asks clients not to pipeline after a
 * non-idempotent request), at most KC_MAX_CONNS connections, kept alive.
 *
 * A response is read by its Content-Length, its chunks, or to the end of
 * the connection; a head over KH1_HEAD_MAX or a body over KC_BODY_MAX ends
 * the request with an error and the connection. A request that finds its
 * kept-alive connection closed before any byte of an answer comes is sent
 * once more on a new connection, as libcurl does. The request timeout runs
 * from the request's start, connecting included.
 *
 * Sockets are allocated apart from their connection: a connection that
 * gives one up (an error, a timeout, kclient_free) detaches it, and its
 * callbacks, which libuv still runs while it closes, then do nothing. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kclient_int.h"

#define KH1_HEAD_MAX (64u << 10) /* largest response head */
#define KH1_READ 16384           /* room asked for per read (the buffer grows for big answers) */
#define KH1_IDLE_MS 50000        /* a connection idle longer is not reused (the server ends them at 120 s) */

enum kh1_phase { P_HEAD, P_LENGTH, P_CHUNK_SIZE, P_CHUNK_DATA, P_CHUNK_CRLF, P_TRAILER, P_EOF, P_NONE };

struct kh1_sock {
    union { /* TCP, or the server's Unix-domain socket: both streams */
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_stream_t stream;
        uv_handle_t handle;
    } io;
    uv_connect_t creq;
    uv_write_t wreq;
    char *wbuf;            /* what uv_write still sends */
    struct kh1_conn *k;    /* NULL once detached */
};

struct kh1_conn {
    struct kh1 *h;
    struct kh1_sock *s;    /* NULL: no socket */
    bool connected;
    int served;            /* answers read on this socket */
    uint64_t idle_since;
    uv_timer_t *timer;     /* the request's timeout; freed by its close callback */
    /* the request in flight */
    struct kc_req *req;
    char *out;             /* the request's bytes, kept for a second try */
    size_t outlen;
    bool retried;
    bool head_only;        /* HEAD: no body follows */
    /* its answer */
    char *in;              /* bytes read and not yet consumed */
    size_t inlen, incap;
    enum kh1_phase phase;
    long status;
    bool got_bytes, close_after;
    long long remaining;   /* body bytes (P_LENGTH) or chunk bytes (P_CHUNK_DATA) still to come */
    char *body;
    size_t bodylen, bodycap;
};

struct kh1 {
    struct kclient *c;
    struct sockaddr_storage addr;
    const char *unix_path; /* connect here instead (the client's config keeps the string) */
    char *host;            /* Host header value */
    char *base;            /* path prefix from the server URL ("" when none) */
    struct kh1_conn *conns[KC_MAX_CONNS];
    int nconns;
};

/* ---- setup ---- */

struct kh1 *kh1_new(struct kclient *c, const char *server) {
    if (strncmp(server, "http://", 7) != 0) return NULL;
    const char *auth = server + 7, *slash = strchr(auth, '/');
    size_t alen = slash ? (size_t)(slash - auth) : strlen(auth);
    if (!alen || alen > 255) return NULL;
    char a[256], host[256], port[16] = "80";
    memcpy(a, auth, alen);
    a[alen] = 0;
    if (strchr(a, '@')) return NULL; /* user info: left to libcurl */
    if (a[0] == '[') { /* [v6]:port */
        char *close = strchr(a, ']');
        if (!close) return NULL;
        *close = 0;
        snprintf(host, sizeof host, "%s", a + 1);
        if (close[1] == ':') snprintf(port, sizeof port, "%s", close + 2);
        else if (close[1]) return NULL;
    } else {
        char *colon = strrchr(a, ':');
        if (colon) {
            *colon = 0;
            snprintf(port, sizeof port, "%s", colon + 1);
        }
        snprintf(host, sizeof host, "%s", a);
    }
    /* numeric addresses and localhost only: a name would need a lookup that
     * may block; those go through libcurl */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (strcmp(host, "localhost") != 0) hints.ai_flags = AI_NUMERICHOST;
    else hints.ai_family = AF_INET; /* one address, no fallback here: the one servers bind by default */
    hints.ai_flags |= AI_NUMERICSERV;
    const char *unix_path = c->cfg.unix_socket; /* the URL then names the Host header alone */
    if (!unix_path && (getaddrinfo(host, port, &hints, &res) || !res)) return NULL;
    struct kh1 *h = calloc(1, sizeof *h);
    if (!h) {
        if (res) freeaddrinfo(res);
        return NULL;
    }
    if (res) {
        memcpy(&h->addr, res->ai_addr, res->ai_addrlen);
        freeaddrinfo(res);
    }
    h->unix_path = unix_path;
    h->c = c;
    h->host = malloc(alen + 1);
    h->base = strdup(slash ? slash : "");
    if (!h->host || !h->base) {
        free(h->host);
        free(h->base);
        free(h);
        return NULL;
    }
    memcpy(h->host, auth, alen);
    h->host[alen] = 0;
    size_t bl = strlen(h->base);
    while (bl && h->base[bl - 1] == '/') h->base[--bl] = 0;
    return h;
}

/* ---- sockets ---- */

static void sock_closed(uv_handle_t *hd) {
    struct kh1_sock *s = hd->data;
    free(s->wbuf);
    free(s);
}

/* Gives up the connection's socket (its callbacks then do nothing). */
static void sock_drop(struct kh1_conn *k) {
    struct kh1_sock *s = k->s;
    if (!s) return;
    k->s = NULL;
    k->connected = false;
    k->served = 0;
    s->k = NULL;
    if (!uv_is_closing(&s->io.handle)) uv_close(&s->io.handle, sock_closed);
}

static void timer_closed(uv_handle_t *hd) { free(hd); }

static void conn_free(struct kh1_conn *k) {
    sock_drop(k);
    uv_timer_stop(k->timer);
    uv_close((uv_handle_t *)k->timer, timer_closed);
    free(k->out);
    free(k->in);
    free(k->body);
    free(k);
}

void kh1_free(struct kh1 *h) {
    if (!h) return;
    for (int i = 0; i < h->nconns; i++) conn_free(h->conns[i]);
    free(h->host);
    free(h->base);
    free(h);
}

/* ---- finishing a request ---- */

static void reset_answer(struct kh1_conn *k) {
    if (k->incap > (1u << 20)) { /* a big answer's buffer is not kept by an idle connection */
        free(k->in);
        k->in = NULL;
        k->incap = 0;
    }
    k->inlen = 0;
    k->phase = P_HEAD;
    k->status = 0;
    k->got_bytes = k->close_after = false;
    k->remaining = 0;
    free(k->body);
    k->body = NULL;
    k->bodylen = k->bodycap = 0;
}

/* The request on k is over: its answer (status > 0) or error goes to
 * kclient. The connection is idle afterwards, or without a socket. */
static void finish(struct kh1_conn *k, long status, const char *error) {
    struct kc_req *r = k->req;
    char *body = status > 0 ? k->body : NULL;
    size_t len = status > 0 ? k->bodylen : 0;
    if (status > 0) k->body = NULL;
    k->req = NULL;
    free(k->out);
    k->out = NULL;
    k->outlen = 0;
    uv_timer_stop(k->timer);
    if (status <= 0 || k->close_after || (k->s && k->s->wbuf)) sock_drop(k); /* wbuf: answered before all was sent */
    else k->served++;
    reset_answer(k);
    k->idle_since = uv_now(k->h->c->loop);
    kc__h1_done(r, status, body, len, error); /* may start the next request on k, or free everything */
}

static void fail(struct kh1_conn *k, const char *error) { finish(k, 0, error); }

/* ---- sending ---- */

static void on_sock_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
static void sock_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *buf);

static void on_written(uv_write_t *w, int status) {
    struct kh1_sock *s = w->data;
    free(s->wbuf);
    s->wbuf = NULL;
    struct kh1_conn *k = s->k;
    if (!k || status == 0) return;
    struct kclient *c = k->h->c;
    kc__enter(c);
    char msg[96];
    snprintf(msg, sizeof msg, "send failed: %s", uv_strerror(status));
    fail(k, msg);
    kc__leave(c);
}

/* Sends the request's bytes: straight to the socket, the rest through uv_write. */
static int send_out(struct kh1_conn *k) {
    struct kh1_sock *s = k->s;
    uv_buf_t b = uv_buf_init(k->out, (unsigned)k->outlen);
    int n = uv_try_write(&s->io.stream, &b, 1);
    if (n < 0 && n != UV_EAGAIN) return n;
    size_t sent = n > 0 ? (size_t)n : 0;
    if (sent == k->outlen) return 0;
    size_t rest = k->outlen - sent;
    if (!(s->wbuf = malloc(rest))) return UV_ENOMEM;
    memcpy(s->wbuf, k->out + sent, rest);
    uv_buf_t rb = uv_buf_init(s->wbuf, (unsigned)rest);
    s->wreq.data = s;
    return uv_write(&s->wreq, &s->io.stream, &rb, 1, on_written);
}

static void on_connected(uv_connect_t *cr, int status) {
    struct kh1_sock *s = cr->data;
    struct kh1_conn *k = s->k;
    if (!k) return;
    struct kclient *c = k->h->c;
    kc__enter(c);
    int rc = status;
    if (!rc) {
        k->connected = true;
        rc = uv_read_start(&s->io.stream, sock_alloc, on_sock_read);
        if (!rc && k->req) rc = send_out(k);
    }
    if (rc && k->req) {
        char msg[192];
        snprintf(msg, sizeof msg, "cannot connect to %s: %s", k->h->unix_path ? k->h->unix_path : k->h->host,
                 uv_strerror(rc));
        fail(k, msg);
    } else if (rc) {
        sock_drop(k);
    }
    kc__leave(c);
}

/* A new socket for k, connecting; the request goes when it is up. */
static int sock_open(struct kh1_conn *k) {
    struct kh1_sock *s = calloc(1, sizeof *s);
    if (!s) return UV_ENOMEM;
    struct kh1 *h = k->h;
    int rc = h->unix_path ? uv_pipe_init(h->c->loop, &s->io.pipe, 0) : uv_tcp_init(h->c->loop, &s->io.tcp);
    if (rc) {
        free(s);
        return rc;
    }
    s->io.handle.data = s;
    s->k = k;
    k->s = s;
    k->connected = false;
    k->served = 0;
    s->creq.data = s;
    if (h->unix_path) {
        uv_pipe_connect(&s->creq, &s->io.pipe, h->unix_path, on_connected); /* errors come to on_connected */
        return 0;
    }
    uv_tcp_nodelay(&s->io.tcp, 1);
    rc = uv_tcp_connect(&s->creq, &s->io.tcp, (const struct sockaddr *)&h->addr, on_connected);
    if (rc) sock_drop(k);
    return rc;
}

static void on_timeout(uv_timer_t *t) {
    struct kh1_conn *k = t->data;
    if (!k->req) return;
    struct kclient *c = k->h->c;
    kc__enter(c);
    char msg[96];
    snprintf(msg, sizeof msg, "request timed out after %ld milliseconds", c->cfg.timeout_ms);
    fail(k, msg);
    kc__leave(c);
}

static int put(char **p, size_t *len, size_t *cap, const char *s, size_t n) {
    return jdump_append(p, len, cap, s, n) ? -ENOMEM : 0;
}

/* The request's bytes: request line, headers, body. */
static int format_request(struct kh1 *h, struct kh1_conn *k, const char *method, const char *path, const char *ctype,
                          const char *body, bool has_body) {
    const struct kc_config *cfg = &h->c->cfg;
    /* what goes into the head is one token each: no line breaks, no spaces in the request line */
    if (strpbrk(method, " \r\n") || strpbrk(path, " \r\n") || (ctype && strpbrk(ctype, "\r\n")) ||
        (cfg->token && strpbrk(cfg->token, "\r\n")))
        return -EINVAL;
    char *o = NULL;
    size_t len = 0, cap = 0;
    char line[64];
    size_t blen = body ? strlen(body) : 0;
    int rc = put(&o, &len, &cap, method, strlen(method));
    rc = rc ? rc : put(&o, &len, &cap, " ", 1);
    rc = rc ? rc : put(&o, &len, &cap, h->base, strlen(h->base));
    rc = rc ? rc : put(&o, &len, &cap, path, strlen(path));
    static const char host[] = " HTTP/1.1\r\nHost: ";
    static const char rest[] = "\r\nUser-Agent: peloton-c-kclient/1\r\nAccept: application/json\r\n";
    rc = rc ? rc : put(&o, &len, &cap, host, sizeof host - 1);
    rc = rc ? rc : put(&o, &len, &cap, h->host, strlen(h->host));
    rc = rc ? rc : put(&o, &len, &cap, rest, sizeof rest - 1);
    if (has_body) {
        const char *ct = ctype ? ctype : "application/json";
        int n = snprintf(line, sizeof line, "\r\nContent-Length: %zu\r\n", blen);
        rc = rc ? rc : put(&o, &len, &cap, "Content-Type: ", 14);
        rc = rc ? rc : put(&o, &len, &cap, ct, strlen(ct));
        rc = rc ? rc : put(&o, &len, &cap, line, (size_t)n);
    }
    if (cfg->token && *cfg->token) {
        rc = rc ? rc : put(&o, &len, &cap, "Authorization: Bearer ", 22);
        rc = rc ? rc : put(&o, &len, &cap, cfg->token, strlen(cfg->token));
        rc = rc ? rc : put(&o, &len, &cap, "\r\n", 2);
    }
    rc = rc ? rc : put(&o, &len, &cap, "\r\n", 2);
    if (has_body && blen) rc = rc ? rc : put(&o, &len, &cap, body, blen);
    if (rc) {
        free(o);
        return rc;
    }
    k->out = o;
    k->outlen = len;
    k->head_only = !strcmp(method, "HEAD");
    return 0;
}

/* Sends what k holds, on its socket if it has a live one, else on a new one. */
static int dispatch(struct kh1_conn *k) {
    reset_answer(k);
    if (k->s && k->connected && uv_now(k->h->c->loop) - k->idle_since > KH1_IDLE_MS) sock_drop(k);
    if (k->s && k->connected) return send_out(k);
    if (k->s) return 0; /* still connecting: sent when it is up */
    return sock_open(k);
}

int kh1_start(struct kh1 *h, struct kc_req *r, const char *method, const char *path, const char *ctype,
              const char *body, bool has_body) {
    struct kh1_conn *k = NULL;
    for (int i = 0; i < h->nconns && !k; i++)
        if (!h->conns[i]->req && h->conns[i]->s) k = h->conns[i]; /* a live idle connection first */
    for (int i = 0; i < h->nconns && !k; i++)
        if (!h->conns[i]->req) k = h->conns[i];
    if (!k) {
        if (h->nconns >= KC_MAX_CONNS) return -EBUSY;
        if (!(k = calloc(1, sizeof *k)) || !(k->timer = malloc(sizeof *k->timer))) {
            free(k);
            return -ENOMEM;
        }
        k->h = h;
        uv_timer_init(h->c->loop, k->timer);
        k->timer->data = k;
        h->conns[h->nconns++] = k;
    }
    int frc = format_request(h, k, method, path, ctype, body, has_body);
    if (frc) return frc;
    k->req = r;
    k->retried = false;
    uv_timer_start(k->timer, on_timeout, (uint64_t)h->c->cfg.timeout_ms, 0);
    int rc = dispatch(k);
    if (rc) {
        k->req = NULL;
        free(k->out);
        k->out = NULL;
        uv_timer_stop(k->timer);
        sock_drop(k);
        return rc == UV_ENOMEM ? -ENOMEM : -EIO;
    }
    return 0;
}

/* ---- reading the answer ---- */

static void sock_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *buf) {
    struct kh1_sock *s = hd->data;
    struct kh1_conn *k = s->k;
    buf->base = NULL;
    buf->len = 0;
    if (!k) return;
    if (k->incap - k->inlen < KH1_READ) {
        size_t nc = k->incap ? k->incap : KH1_READ * 2;
        while (nc - k->inlen < KH1_READ) nc *= 2;
        char *b = realloc(k->in, nc);
        if (!b) return;
        k->in = b;
        k->incap = nc;
    }
    buf->base = k->in + k->inlen;
    buf->len = k->incap - k->inlen - 1;
}

static void consume(struct kh1_conn *k, size_t n) {
    memmove(k->in, k->in + n, k->inlen - n);
    k->inlen -= n;
}

static bool header_is(const char *line, size_t n, const char *name) {
    size_t l = strlen(name);
    return n > l && !strncasecmp(line, name, l) && line[l] == ':';
}

static const char *header_value(const char *line, size_t n, const char *name, size_t *vlen) {
    const char *v = line + strlen(name) + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
    *vlen = (size_t)(end - v);
    return v;
}

/* The status line and headers ending at head[n] (the blank line's end): 0,
 * or -1 when they are not an HTTP/1.x response head. */
static int parse_head(struct kh1_conn *k, const char *head, size_t n) {
    if (n < 12 || strncmp(head, "HTTP/1.", 7) || head[8] != ' ') return -1;
    long st = 0;
    for (int i = 9; i < 12; i++) {
        if (head[i] < '0' || head[i] > '9') return -1;
        st = st * 10 + (head[i] - '0');
    }
    k->status = st;
    k->close_after = head[7] == '0'; /* HTTP/1.0 closes unless it says otherwise */
    long long clen = -1;
    bool chunked = false;
    const char *p = memchr(head, '\n', n), *end = head + n;
    while (p && ++p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;
        size_t ln = (size_t)(nl - p);
        if (ln && p[ln - 1] == '\r') ln--;
        if (!ln) break;
        size_t vl;
        const char *v;
        if (header_is(p, ln, "content-length")) {
            v = header_value(p, ln, "content-length", &vl);
            long long x = 0;
            if (!vl) return -1;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9' || x > (1LL << 50)) return -1;
                x = x * 10 + (v[i] - '0');
            }
            if (clen >= 0 && clen != x) return -1;
            clen = x;
        } else if (header_is(p, ln, "transfer-encoding")) {
            v = header_value(p, ln, "transfer-encoding", &vl);
            chunked = vl >= 7 && !strncasecmp(v + vl - 7, "chunked", 7);
        } else if (header_is(p, ln, "connection")) {
            v = header_value(p, ln, "connection", &vl);
            if (vl == 5 && !strncasecmp(v, "close", 5)) k->close_after = true;
            if (vl == 10 && !strncasecmp(v, "keep-alive", 10)) k->close_after = false;
        }
        p = nl;
    }
    if (k->head_only || st == 204 || st == 304 || (st >= 100 && st < 200)) k->phase = P_NONE; /* no body */
    else if (chunked) k->phase = P_CHUNK_SIZE;
    else if (clen >= 0) k->phase = P_LENGTH, k->remaining = clen;
    else k->phase = P_EOF, k->close_after = true;
    return 0;
}

static int body_put(struct kh1_conn *k, const char *p, size_t n) {
    if (k->bodylen + n > KC_BODY_MAX) return -EFBIG;
    return put(&k->body, &k->bodylen, &k->bodycap, p, n);
}

/* Moves what has come of the k->remaining body bytes (the body's or a
 * chunk's) into the body: 0, or what body_put refuses with. */
static int body_take(struct kh1_conn *k) {
    size_t take = (size_t)k->remaining < k->inlen ? (size_t)k->remaining : k->inlen;
    int rc = body_put(k, k->in, take);
    if (rc) return rc;
    consume(k, take);
    k->remaining -= (long long)take;
    return 0;
}

/* Moves what has come through the answer's phases: 1 when the answer is
 * complete, 0 when more must come, -1 on a malformed answer, -EFBIG or
 * -ENOMEM. */
static int advance(struct kh1_conn *k) {
    for (;;) {
        switch (k->phase) {
        case P_HEAD: {
            char *e = k->inlen >= 4 ? memmem(k->in, k->inlen, "\r\n\r\n", 4) : NULL;
            if (!e) return k->inlen > KH1_HEAD_MAX ? -1 : 0;
            size_t n = (size_t)(e + 4 - k->in);
            if (n > KH1_HEAD_MAX || parse_head(k, k->in, n)) return -1;
            consume(k, n);
            if (k->status >= 100 && k->status < 200) { /* an interim answer: the real one follows */
                k->phase = P_HEAD;
                continue;
            }
            if (k->phase == P_NONE) return 1;
            if (!k->body && body_put(k, "", 0)) return -ENOMEM; /* an empty body is "", not NULL */
            continue;
        }
        case P_LENGTH: {
            int rc = body_take(k);
            return rc ? rc : k->remaining == 0;
        }
        case P_CHUNK_SIZE: {
            char *nl = memchr(k->in, '\n', k->inlen);
            if (!nl) return k->inlen > 1024 ? -1 : 0;
            long long sz = 0;
            int digits = 0;
            for (char *q = k->in; q < nl && *q != ';' && *q != '\r'; q++, digits++) {
                int lc = *q | 32;
                int d = *q >= '0' && *q <= '9' ? *q - '0' : lc >= 'a' && lc <= 'f' ? lc - 'a' + 10 : -1;
                if (d < 0 || sz > (1LL << 40)) return -1;
                sz = sz * 16 + d;
            }
            if (!digits) return -1;
            consume(k, (size_t)(nl + 1 - k->in));
            if (sz == 0) k->phase = P_TRAILER;
            else k->phase = P_CHUNK_DATA, k->remaining = sz;
            continue;
        }
        case P_CHUNK_DATA: {
            int rc = body_take(k);
            if (rc || k->remaining) return rc;
            k->phase = P_CHUNK_CRLF;
            continue;
        }
        case P_CHUNK_CRLF:
            if (k->inlen < 2) return 0;
            if (k->in[0] != '\r' || k->in[1] != '\n') return -1;
            consume(k, 2);
            k->phase = P_CHUNK_SIZE;
            continue;
        case P_TRAILER: { /* trailer lines, up to an empty one */
            char *nl = memchr(k->in, '\n', k->inlen);
            if (!nl) return k->inlen > KH1_HEAD_MAX ? -1 : 0;
            size_t ln = (size_t)(nl - k->in);
            bool blank = ln == 0 || (ln == 1 && k->in[0] == '\r');
            consume(k, ln + 1);
            if (blank) return 1;
            continue;
        }
        case P_EOF: { /* the body runs to the end of the connection */
            int rc = body_put(k, k->in, k->inlen);
            if (rc) return rc;
            k->inlen = 0;
            return 0;
        }
        default: return 1;
        }
    }
}

/* The connection ended or broke before its answer was whole. */
static void ended(struct kh1_conn *k, ssize_t err) {
    if (!k->req) { /* idle: the server closed it; the next request opens another */
        sock_drop(k);
        return;
    }
    if (k->phase == P_EOF && err == UV_EOF) { /* the end was the end of the body */
        finish(k, k->status, NULL);
        return;
    }
    bool reused = k->served > 0;
    if (reused && !k->got_bytes && !k->retried && (err == UV_EOF || err == UV_ECONNRESET || err == UV_EPIPE)) {
        k->retried = true; /* a kept-alive connection the server had let go: once more on a new one */
        sock_drop(k);
        reset_answer(k);
        int rc = sock_open(k);
        if (!rc) return;
        err = rc;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "connection to %s ended: %s", k->h->host,
             err == UV_EOF ? "closed before the whole answer came" : uv_strerror((int)err));
    fail(k, msg);
}

static void on_sock_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
    struct kh1_sock *s = st->data;
    struct kh1_conn *k = s->k;
    if (!k || n == 0) return;
    struct kclient *c = k->h->c;
    kc__enter(c);
    if (n < 0) {
        ended(k, n);
    } else if (!k->req) { /* bytes nobody asked for: the connection cannot be trusted */
        sock_drop(k);
    } else {
        k->inlen += (size_t)n;
        k->got_bytes = true;
        int rc = advance(k);
        if (rc == 1) {
            if (k->inlen) k->close_after = true; /* more than one answer: do not reuse it */
            finish(k, k->status, NULL);
        } else if (rc < 0) {
            fail(k, rc == -EFBIG ? "response body exceeds KC_BODY_MAX"
                    : rc == -ENOMEM ? "out of memory reading the response"
                                    : "malformed HTTP response");
        }
    }
    kc__leave(c);
}
