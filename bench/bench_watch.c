/* Watch fan-out: the time from a create's request to its event on every
 * watcher, with 1, 100, 1,000 and 5,000 watchers of pods (DESIGN.md: p99
 * <= 50 ms at 1,000), and the create's own reply time meanwhile.
 *
 * Starts its own redis-server (AOF, appendfsync everysec) and bin/pelotond
 * (the API server alone) on loopback. The watchers are raw HTTP/1.1
 * connections read with epoll by this one thread, so the client's cost per
 * event is a recv per watcher: bench_shim.py measures the same thing from
 * Python, where reading 1,000 sockets is most of the figure. Events are
 * found by the pod's name in the bytes received; one create at a time. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "bench.h"
#include "bench_proc.h"
#include "redis_proc.h"

#define EVENTS 100         /* creates per watcher count */
#define WAIT_NS 5000000000 /* an event not seen by every watcher within 5 s counts as missed */

static int tcp_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w, n -= (size_t)w;
    }
    return true;
}

/* One request on a blocking keep-alive connection; reads the reply whole
 * (Content-Length). Returns the status, 0 on failure; body (if asked) is the
 * reply's body, NUL-terminated, in a static buffer. */
static int request(int fd, const char *method, const char *path, const char *body, const char **out_body) {
    static char buf[1 << 20];
    char head[512];
    size_t bl = body ? strlen(body) : 0;
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, bl);
    if (!send_all(fd, head, (size_t)hl) || (bl && !send_all(fd, body, bl))) return 0;
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (r <= 0) return 0;
        n += (size_t)r;
        buf[n] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (!end) continue;
        const char *cl = strcasestr(buf, "content-length:");
        size_t want = (size_t)(end + 4 - buf) + (cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
        if (n < want) continue;
        if (out_body) *out_body = end + 4;
        return atoi(buf + 9);
    }
}

struct watcher {
    int fd;
    bool headers;   /* the reply's head has arrived */
    bool seen;      /* this round's event has arrived */
    char tail[64];  /* the last bytes of the previous read: a name may straddle two reads */
    size_t taillen;
};

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Looks for needle in tail + data, then keeps the end of it as the new tail. */
static bool scan(struct watcher *w, const char *data, size_t n, const char *needle, size_t nl) {
    char joined[64 + 256];
    bool hit = false;
    if (w->taillen) { /* across the boundary: the tail and the head of this read */
        size_t k = n < 256 ? n : 256;
        memcpy(joined, w->tail, w->taillen);
        memcpy(joined + w->taillen, data, k);
        hit = memmem(joined, w->taillen + k, needle, nl) != NULL;
    }
    if (!hit) hit = memmem(data, n, needle, nl) != NULL;
    size_t keep = n < sizeof w->tail ? n : sizeof w->tail;
    memcpy(w->tail, data + n - keep, keep);
    w->taillen = keep;
    return hit;
}

static void one_count(int port, int nw) {
    struct watcher *ws = calloc((size_t)nw, sizeof *ws);
    uint64_t *lat = calloc((size_t)nw * EVENTS, sizeof *lat), *create_lat = calloc(EVENTS, sizeof *create_lat);
    int ep = epoll_create1(0);
    int ctl = tcp_connect(port);
    if (!ws || !lat || !create_lat || ep < 0 || ctl < 0) {
        fprintf(stderr, "bench_watch: setup failed\n");
        goto out;
    }
    /* the watches start from the collection's version now */
    const char *body = NULL;
    if (request(ctl, "GET", "/api/v1/namespaces/default/pods?limit=1", NULL, &body) != 200) goto out;
    const char *rvp = strstr(body, "\"resourceVersion\":\"");
    char rv[32] = "0";
    if (rvp) sscanf(rvp + 19, "%31[0-9]", rv);
    char req[512];
    int rl = snprintf(req, sizeof req,
                      "GET /api/v1/namespaces/default/pods?watch=true&resourceVersion=%s&labelSelector=app%%3Dwatch "
                      "HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                      rv);
    for (int i = 0; i < nw; i++) {
        ws[i].fd = tcp_connect(port);
        if (ws[i].fd < 0 || !send_all(ws[i].fd, req, (size_t)rl)) {
            fprintf(stderr, "bench_watch: watcher %d cannot connect: %s\n", i, strerror(errno));
            goto out;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, ws[i].fd, &ev);
    }
    /* every watcher's head (200, chunked) before the first create */
    int heads = 0;
    uint64_t until = bench_now_ns() + WAIT_NS;
    struct epoll_event evs[256];
    char data[65536];
    while (heads < nw && bench_now_ns() < until) {
        int k = epoll_wait(ep, evs, 256, 100);
        for (int j = 0; j < k; j++) {
            struct watcher *w = &ws[evs[j].data.u32];
            ssize_t r = recv(w->fd, data, sizeof data, MSG_DONTWAIT);
            if (r > 0 && !w->headers) w->headers = true, heads++;
        }
    }
    if (heads < nw) {
        fprintf(stderr, "bench_watch: %d of %d watches started\n", heads, nw);
        goto out;
    }
    int nlat = 0, missed = 0;
    for (int e = 0; e < EVENTS; e++) {
        char name[64], needle[80], pod[256];
        snprintf(name, sizeof name, "w%d-%d", nw, e);
        int nl = snprintf(needle, sizeof needle, "\"name\":\"%s\"", name);
        snprintf(pod, sizeof pod,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"app\":\"watch\"}},"
                 "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}",
                 name);
        for (int i = 0; i < nw; i++) ws[i].seen = false;
        /* the create goes out; its reply is read as one more descriptor */
        char head[1024];
        int hl = snprintf(head, sizeof head,
                          "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                          strlen(pod), pod);
        uint64_t t0 = bench_now_ns();
        if (!send_all(ctl, head, (size_t)hl)) goto out;
        struct epoll_event cev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
        epoll_ctl(ep, EPOLL_CTL_ADD, ctl, &cev);
        bool replied = false;
        int pending = nw;
        until = t0 + WAIT_NS;
        while ((pending || !replied) && bench_now_ns() < until) {
            int k = epoll_wait(ep, evs, 256, 100);
            uint64_t now = bench_now_ns();
            for (int j = 0; j < k; j++) {
                if (evs[j].data.u32 == UINT32_MAX) { /* the create's reply: small, one read */
                    ssize_t r = recv(ctl, data, sizeof data - 1, MSG_DONTWAIT);
                    if (r > 0) {
                        data[r] = 0;
                        if (strncmp(data, "HTTP/1.1 201", 12)) fprintf(stderr, "bench_watch: create: %s\n", data);
                        create_lat[e] = now - t0;
                        replied = true;
                    }
                    continue;
                }
                struct watcher *w = &ws[evs[j].data.u32];
                ssize_t r;
                while ((r = recv(w->fd, data, sizeof data, MSG_DONTWAIT)) > 0)
                    if (!w->seen && scan(w, data, (size_t)r, needle, (size_t)nl)) {
                        w->seen = true;
                        lat[nlat++] = now - t0;
                        pending--;
                    }
            }
        }
        epoll_ctl(ep, EPOLL_CTL_DEL, ctl, NULL);
        missed += pending;
    }
    qsort(lat, (size_t)nlat, sizeof *lat, cmp_u64);
    qsort(create_lat, EVENTS, sizeof *create_lat, cmp_u64);
    char label[96];
    if (nlat) {
        snprintf(label, sizeof label, "watch event latency p50, %d watchers", nw);
        bench_report(label, (double)lat[nlat / 2] / 1e6, "ms", "");
        snprintf(label, sizeof label, "watch event latency p99, %d watchers", nw);
        bench_report(label, (double)lat[(size_t)nlat * 99 / 100] / 1e6, "ms", "(target <= 50 ms at 1,000)");
        snprintf(label, sizeof label, "watch event latency max, %d watchers", nw);
        bench_report(label, (double)lat[nlat - 1] / 1e6, "ms", "");
    }
    snprintf(label, sizeof label, "create reply p50, %d watchers", nw);
    bench_report(label, (double)create_lat[EVENTS / 2] / 1e6, "ms", "");
    if (missed) printf("bench watch: %d watcher-events missed (over 5 s) with %d watchers\n", missed, nw);
out:
    if (ws)
        for (int i = 0; i < nw; i++)
            if (ws[i].fd > 0) close(ws[i].fd);
    if (ctl >= 0) close(ctl);
    if (ep >= 0) close(ep);
    free(ws);
    free(lat);
    free(create_lat);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct rlimit rl; /* 5,000 watchers and the server's side of them */
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < 12000) {
        rl.rlim_cur = rl.rlim_max < 12000 ? rl.rlim_max : 12000;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct redis_proc rp = {0};
    if (redis_proc_start(&rp, "everysec")) {
        fprintf(stderr, "bench_watch: cannot start redis-server\n");
        return 1;
    }
    char dir[] = "/tmp/bench-watch-XXXXXX";
    pid_t pd = 0;
    char raddr[32];
    snprintf(raddr, sizeof raddr, "127.0.0.1:%d", rp.port);
    int port = mkdtemp(dir) ? bench_start_pelotond(dir, raddr, "--roles=apiserver", &pd) : 0;
    if (port) {
        const char *only = getenv("BENCH_WATCH_N"); /* one watcher count (profiling) */
        const int counts[] = {1, 100, 1000, 5000};
        if (only && atoi(only) > 0) one_count(port, atoi(only));
        else
            for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) one_count(port, counts[i]);
    }
    bench_stop(pd);
    redis_proc_destroy(&rp);
    return port ? 0 : 1;
}
