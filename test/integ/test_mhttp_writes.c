/* mesos-master-sim's HTTP server (src/mesos/msim_http.c) on a loopback
 * socket: what one loop turn writes to a connection leaves in one write, in
 * the order it was written, and a connection that ends still sends all of it
 * first. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "msim_http.h"
#include "test.h"

static void handler(void *ud, const struct mhttp_req *req) {
    (void)ud;
    if (!strcmp(req->path, "/stream")) { /* a stream's head and three chunks, all in this turn */
        mhttp_stream_start(req->conn, "text/plain", NULL, NULL, NULL);
        mhttp_stream_chunk(req->conn, "one", 3);
        mhttp_stream_chunk(req->conn, "two", 3);
        mhttp_stream_chunk(req->conn, "three", 5);
        return;
    }
    const char *n = strncmp(req->path, "/r/", 3) ? "?" : req->path + 3;
    mhttp_reply(req->conn, 200, "text/plain", NULL, n, strlen(n));
}

struct peer {
    uv_loop_t loop;
    struct mhttp_server *s;
    int fd;
    char got[16384];
    size_t len;
    bool eof;
};

static void on_wake(uv_timer_t *t) { (void)t; }

/* Runs the loop, reading what the server sent, until want bytes came (or
 * the end, when want is 0) or 5 s passed. */
static void pump(struct peer *p, size_t want) {
    uv_timer_t wake;
    uv_timer_init(&p->loop, &wake);
    uv_timer_start(&wake, on_wake, 5, 5);
    uint64_t end = uv_now(&p->loop) + 5000;
    while (uv_now(&p->loop) < end && !p->eof && (want == 0 || p->len < want)) {
        uv_run(&p->loop, UV_RUN_ONCE);
        for (;;) {
            ssize_t n = recv(p->fd, p->got + p->len, sizeof p->got - 1 - p->len, MSG_DONTWAIT);
            if (n > 0) p->len += (size_t)n;
            if (n == 0) p->eof = true;
            if (n <= 0) break;
        }
    }
    p->got[p->len] = 0;
    uv_close((uv_handle_t *)&wake, NULL);
    uv_run(&p->loop, UV_RUN_NOWAIT);
}

static int peer_start(struct peer *p) {
    memset(p, 0, sizeof *p);
    uv_loop_init(&p->loop);
    struct mhttp_config cfg = {.handler = handler};
    char err[200];
    if (mhttp_listen(&p->loop, &cfg, &p->s, err, sizeof err)) return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)mhttp_port(p->s))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    p->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (p->fd < 0 || connect(p->fd, (struct sockaddr *)&sa, sizeof sa)) return -1; /* the kernel accepts it */
    return fcntl(p->fd, F_SETFL, O_NONBLOCK);
}

static void peer_stop(struct peer *p) {
    close(p->fd);
    mhttp_stop(p->s);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    CHECK_I64(uv_loop_close(&p->loop), 0);
}

TEST(mhttp_pipelined_replies_leave_in_one_write_in_order) {
    static struct peer p;
    REQUIRE(peer_start(&p) == 0);
    char reqs[2048];
    size_t n = 0;
    for (int i = 0; i < 16; i++) n += (size_t)snprintf(reqs + n, sizeof reqs - n, "GET /r/%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
    REQUIRE_I64(send(p.fd, reqs, n, 0), (int64_t)n);
    /* the accept, then the 16 requests in one read: 16 replies */
    const char *last = "Content-Length: 2\r\n\r\n15";
    uint64_t before = mhttp_writes(p.s);
    for (int tries = 0; tries < 100 && !strstr(p.got, last); tries++) pump(&p, p.len + 1);
    REQUIRE(strstr(p.got, last) != NULL);
    CHECK_I64(mhttp_writes(p.s) - before, 1); /* one write for the turn's 16 replies (16 before) */
    const char *at = p.got;
    for (int i = 0; i < 16; i++) { /* in the order asked */
        char body[32];
        snprintf(body, sizeof body, "\r\n\r\n%d", i);
        const char *f = strstr(at, body);
        REQUIRE(f != NULL);
        at = f + strlen(body);
    }
    peer_stop(&p);
}

TEST(mhttp_stream_chunks_of_a_turn_leave_together_in_order) {
    static struct peer p;
    REQUIRE(peer_start(&p) == 0);
    const char *req = "POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    REQUIRE_I64(send(p.fd, req, strlen(req), 0), (int64_t)strlen(req));
    uint64_t before = mhttp_writes(p.s);
    for (int tries = 0; tries < 100 && !strstr(p.got, "three"); tries++) pump(&p, p.len + 1);
    REQUIRE(strstr(p.got, "Transfer-Encoding: chunked\r\n\r\n3\r\none\r\n3\r\ntwo\r\n5\r\nthree\r\n") != NULL);
    CHECK_I64(mhttp_writes(p.s) - before, 1);
    peer_stop(&p);
}

TEST(mhttp_connection_close_sends_the_reply_first) {
    static struct peer p;
    REQUIRE(peer_start(&p) == 0);
    const char *req = "GET /r/7 HTTP/1.1\r\nHost: x\r\n\r\nGET /r/8 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    REQUIRE_I64(send(p.fd, req, strlen(req), 0), (int64_t)strlen(req));
    pump(&p, 0); /* until the server ends the connection */
    CHECK(p.eof);
    const char *a = strstr(p.got, "\r\n\r\n7"), *b = strstr(p.got, "Connection: close\r\n\r\n8");
    CHECK(a != NULL && b != NULL && a < b);
    peer_stop(&p);
}
