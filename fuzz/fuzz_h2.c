/* Fuzz target: the TLS port's HTTP/2 connection (src/http/h2.c) as
 * h1_serve.c drives it, on a real h1_server and h1_conn (no socket: the
 * connection's output is read here, as the client would read it, and
 * dropped). The first input byte picks how the rest arrives:
 *   bit 0   the HTTP/2 client preface is sent first (else the bytes alone)
 *   bit 1   the client never reads (the output stays, bounded)
 *   bits 2+ the size of the pieces the bytes arrive in (1..64)
 * Whatever the bytes: no crash or leak; the framed output within
 * max_conn_output and one frame, and one reply more unframed; and the
 * connection either goes on serving, or ends with a GOAWAY framed (or after
 * the client's own), or is dropped at once because nghttp2 refused the
 * bytes outright (a bad preface, a flood). The handler answers /healthz and
 * /big (40,000 bytes), opens a stream on /watch and defers /later, so
 * replies, streams and deferrals all meet whatever the client does. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h1_int.h"

#define OUT_BOUND 65536
#define FRAME_MAX (16384 + 9)
#define BIG_REPLY 40000

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static uv_loop_t loop;
static struct h1_server srv;
static struct http_deferred *deferred; /* the one /later left unanswered this run */

static void on_close(void *ud) { (void)ud; }

static void handler(void *ud, const struct http_request *req, struct http_response *resp) {
    (void)ud;
    if (!strcmp(req->path, "/watch")) {
        struct http_stream *st = http_stream_start(req, 200, "application/json", 4096, on_close, NULL);
        if (st) {
            http_stream_write(st, "{\"type\":\"ADDED\"}\n", 17);
            if (req->nargs) http_stream_end(st);
        }
        return;
    }
    if (!strcmp(req->path, "/later") && !deferred) {
        deferred = http_defer(req);
        return;
    }
    if (!strcmp(req->path, "/big")) { /* replies that pass the output bound in a few requests */
        resp->body = calloc(1, BIG_REPLY);
        resp->body_len = resp->body ? BIG_REPLY : 0;
        return;
    }
    resp->status = strcmp(req->path, "/healthz") ? 404 : 200;
    resp->body = strdup("{\"ok\":true}");
    resp->body_len = resp->body ? strlen(resp->body) : 0;
}

static void setup(void) {
    uv_loop_init(&loop);
    srv.loop = &loop;
    srv.cfg.handler = handler;
    srv.cfg.max_body = 8192;
    srv.cfg.max_conn_output = OUT_BOUND;
    srv.cfg.max_output = 4 * OUT_BOUND;
    uv_check_init(&loop, &srv.flush); /* started by end-of-turn work, never run: done here instead */
    srv.flush.data = &srv;
}

/* The client reads everything framed so far: a GOAWAY among it is noted. */
static void client_reads(struct h1_conn *c, bool *goaway) {
    size_t off = 0;
    while (off + 9 <= c->outlen) {
        const uint8_t *f = (const uint8_t *)c->out + off;
        size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
        if (f[3] == 7) *goaway = true;
        off += 9 + len;
    }
    if (off != c->outlen) abort(); /* the server frames whole frames */
    c->outlen = 0;
    h1_out_sync(c);
}

/* Whether the client's bytes hold a GOAWAY frame (after the preface): its
 * session may then end without one of the server's. */
static bool client_says_goaway(const uint8_t *p, size_t n, bool with_preface) {
    size_t off = 0;
    if (!with_preface) {
        if (n < sizeof preface - 1 || memcmp(p, preface, sizeof preface - 1)) return false;
        off = sizeof preface - 1;
    }
    while (off + 9 <= n) {
        if (p[off + 3] == 7) return true;
        off += 9 + ((size_t)p[off] << 16 | (size_t)p[off + 1] << 8 | p[off + 2]);
    }
    return false;
}

/* The end of the loop's turn, as h1.c's check handle would run it. */
static void end_of_turn(void) {
    for (struct h1_conn *q = srv.flushq; q; q = q->fnext) q->flush_queued = false;
    srv.flushq = NULL;
    srv.release = false;
    h1_run_retired(&srv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!srv.loop) setup();
    if (size < 1) return 0;
    bool with_preface = data[0] & 1, reads = !(data[0] & 2);
    size_t piece = 1 + (data[0] >> 2);
    data++, size--;

    struct h1_conn *c = calloc(1, sizeof *c);
    if (!c) return 0;
    c->srv = &srv;
    c->state = S_H2;
    c->h2 = h2_conn_new(c, &srv.cfg);
    if (!c->h2) abort();
    bool goaway = false, over = false, dropped = false;
    if (with_preface && h2_conn_input(c->h2, preface, sizeof preface - 1)) abort();
    size_t off = 0;
    int extra = 4; /* turns after the last bytes: what is due goes out (a window may stay shut) */
    while (!over && !dropped && extra) {
        if (off < size) {
            size_t n = size - off < piece ? size - off : piece;
            if (h2_conn_input(c->h2, (const char *)data + off, n)) dropped = true;
            off += n;
        }
        if (!dropped) {
            int rc = h2_conn_pump(c->h2);
            if (rc < 0) abort(); /* framing failed: out of memory only */
            if (c->outlen > OUT_BOUND + FRAME_MAX) abort(); /* framed: the bound and one frame */
            if (c->outlen + h2_conn_pending(c->h2) > OUT_BOUND + FRAME_MAX + BIG_REPLY)
                abort(); /* and one reply unframed */
            if (reads) client_reads(c, &goaway);
            if (deferred && (off >= size || data[off - 1] & 1)) { /* the deferred answer comes a turn later */
                struct http_response resp = {.status = 200, .content_type = "application/json"};
                http_deferred_reply(deferred, &resp);
                deferred = NULL;
            }
            if (rc == 1) over = true;
        }
        end_of_turn();
        if (off >= size) extra--;
    }
    if (over && reads && !goaway && !client_says_goaway(data, size, with_preface))
        abort(); /* a session over without telling the client */
    if (deferred) {
        http_undefer(deferred);
        deferred = NULL;
    }
    h2_conn_free(c->h2);
    c->h2 = NULL;
    c->outlen = 0;
    h1_out_sync(c);
    end_of_turn();
    if (srv.output) abort(); /* the server's output count went back to nothing */
    free(c->out);
    free(c);
    return 0;
}
