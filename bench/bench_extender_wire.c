/* The extender's latency on the wire (issue #17): what kube-scheduler sees,
 * from the first byte of a request written to the last byte of its reply
 * read, over one keep-alive HTTP/1.1 connection on loopback.
 *
 * The parts are the real ones: redis-server, pelotond as the API server
 * (apiserver role), bin/peloton-extender (the release binary, fed by its
 * informers from that API server, its pool-status and gauge timers on its
 * loop, its Bindings posted there). The client is plain sockets with
 * TCP_NODELAY, as Go's net package sets it; each request is one writev (head
 * and body), as a small Go request is one write.
 *
 * For 50, 1,000 and 5,000 nodes (32 cores each, one running pod each, two
 * pools) it runs what kube-scheduler sends with nodeCacheCapable (as
 * docs/extender.md configures it):
 *   cycle    per pending pod: filter (the pod as the API server serves it
 *            and every node's name, the list starting where the last cycle's
 *            did), prioritize (the names that passed), bind (to the first
 *            of them; the Binding goes to the API server and comes back by
 *            the watch, so the next filters see a changing model);
 *   preempt  a pod of higher priority, with NodeNameToMetaVictims for as
 *            many candidate nodes as kube-scheduler 1.20 tries (10% of the
 *            nodes, at least 100), the running pod of each as the victim.
 * and prints p50, p99, p99.9 and requests/s per verb.
 *
 * BENCH_QUICK=1: 50 nodes, few requests (a smoke run). BENCH_WIRE_NODES=N
 * (one size) and BENCH_WIRE_CYCLES=N change the sizes;
 * BENCH_WIRE_EXTENDER=path another extender binary (for before/after);
 * BENCH_WIRE_DEBUG=1 prints the replies of failed requests; BENCH_WIRE_RT=1
 * runs the client and the extender (not pelotond nor redis) at SCHED_FIFO
 * priority 10 (root), which tells the extender's tail from the time it
 * waits for a CPU on a busy machine.
 * Prints figures; never fails on speed. */
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"
#include "redis_proc.h"

/* ---- a keep-alive HTTP/1.1 client on plain sockets ---- */

struct wconn {
    int fd, port;
    char *buf; /* bytes read and not yet consumed: buf[0..len) */
    size_t len, cap;
};

static void die(const char *what) {
    fprintf(stderr, "bench_extender_wire: %s\n", what);
    exit(1);
}

static void wc_open(struct wconn *c, int port) {
    c->port = port;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    if (c->fd < 0 || setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
        connect(c->fd, (struct sockaddr *)&a, sizeof a))
        die("cannot connect");
    if (!c->buf) {
        c->cap = 1 << 16;
        c->buf = malloc(c->cap);
        if (!c->buf) die("out of memory");
    }
    c->len = 0;
}

static void wc_close(struct wconn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

/* Reads more into buf (grown as needed); dies on EOF or error. */
static void wc_fill(struct wconn *c) {
    if (c->len == c->cap) {
        c->cap *= 2;
        c->buf = realloc(c->buf, c->cap);
        if (!c->buf) die("out of memory");
    }
    ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (n <= 0) die(n ? "recv failed" : "the server closed the connection");
    c->len += (size_t)n;
}

static char *find(const char *p, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (p[i] == needle[0] && !memcmp(p + i, needle, k)) return (char *)p + i;
    return NULL;
}

/* One request and its whole reply (Content-Length or chunked). The reply
 * body goes to *body (new, NUL-terminated; NULL: dropped). Returns the
 * status. */
static int wc_request(struct wconn *c, const char *method, const char *path, const char *body, size_t blen,
                      char **out, size_t *outlen) {
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: bench_extender_wire\r\n"
                      "Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: %zu\r\n\r\n",
                      method, path, c->port, blen);
    struct iovec iov[2] = {{head, (size_t)hn}, {(void *)body, blen}};
    size_t total = (size_t)hn + blen, sent = 0;
    while (sent < total) { /* one writev unless the socket is full */
        ssize_t n = writev(c->fd, iov, blen ? 2 : 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("send failed");
        sent += (size_t)n;
        for (int i = 0; i < 2 && n > 0; i++) {
            size_t k = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
            iov[i].iov_base = (char *)iov[i].iov_base + k;
            iov[i].iov_len -= k;
            n -= (ssize_t)k;
        }
    }
    char *end;
    while (!(end = find(c->buf, c->len, "\r\n\r\n"))) wc_fill(c);
    size_t hl = (size_t)(end - c->buf) + 4;
    int status = atoi(c->buf + 9);
    bool chunked = false;
    long long clen = -1;
    for (char *l = find(c->buf, hl, "\r\n") + 2; l < c->buf + hl - 2; l = find(l, (size_t)(c->buf + hl - l), "\r\n") + 2) {
        if (!strncasecmp(l, "content-length:", 15)) clen = atoll(l + 15);
        else if (!strncasecmp(l, "transfer-encoding:", 18) && find(l, 40, "chunked")) chunked = true;
    }
    size_t pos = hl, blen2 = 0, bcap = 0;
    char *b = NULL;
    if (!chunked) {
        if (clen < 0) die("a reply without Content-Length");
        while (c->len < hl + (size_t)clen) wc_fill(c);
        if (out) {
            b = malloc((size_t)clen + 1);
            memcpy(b, c->buf + hl, (size_t)clen);
        }
        blen2 = (size_t)clen;
        pos = hl + (size_t)clen;
    } else {
        for (;;) { /* size line, data, CRLF; a 0 chunk ends it */
            char *nl;
            while (!(nl = find(c->buf + pos, c->len - pos, "\r\n"))) wc_fill(c);
            size_t k = strtoul(c->buf + pos, NULL, 16);
            size_t at = (size_t)(nl - c->buf) + 2;
            while (c->len < at + k + 2) wc_fill(c);
            if (out && k) {
                if (blen2 + k + 1 > bcap) {
                    bcap = 2 * (blen2 + k + 1);
                    b = realloc(b, bcap);
                }
                memcpy(b + blen2, c->buf + at, k);
            }
            blen2 += k;
            pos = at + k + 2;
            if (!k) break;
        }
    }
    if (out) {
        if (!b) b = malloc(1);
        b[blen2] = 0;
        *out = b;
        if (outlen) *outlen = blen2;
    }
    memmove(c->buf, c->buf + pos, c->len - pos);
    c->len -= pos;
    return status;
}

/* A request whose reply must be 2xx; its body parsed (new) when keep. */
static json_t *api(struct wconn *c, const char *method, const char *path, json_t *body, bool keep) {
    char *txt = body ? json_dumps(body, JSON_COMPACT) : NULL, *reply = NULL;
    int st = wc_request(c, method, path, txt ? txt : "", txt ? strlen(txt) : 0, &reply, NULL);
    if (st < 200 || st > 299) {
        fprintf(stderr, "bench_extender_wire: %s %s: %d %s\n", method, path, st, reply);
        exit(1);
    }
    free(txt);
    json_t *v = keep ? json_loads(reply, 0, NULL) : NULL;
    free(reply);
    json_decref(body);
    return v;
}

/* ---- the cluster ---- */

#define NPOOLS 2
static const char *const pool_names[NPOOLS] = {"batch", "services"};

static json_t *node_obj(int i) {
    char name[32];
    snprintf(name, sizeof name, "node-%05d", i);
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}}, s:{}, s:{s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, "
                     "s:[{s:s, s:s}]}}",
                     "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels",
                     "kubernetes.io/hostname", name, "topology.kubernetes.io/zone", i % 2 ? "z1" : "z0", "spec",
                     "status", "capacity", "cpu", "32", "memory", "128Gi", "pods", "110", "allocatable", "cpu", "32",
                     "memory", "128Gi", "pods", "110", "conditions", "type", "Ready", "status", "True");
}

/* A pod as kube-scheduler's clients make them (a Deployment's shape: labels,
 * one container with requests, the default tolerations, a service account
 * volume); node NULL: pending. */
static json_t *pod_obj(const char *name, const char *pool, const char *node, int priority) {
    json_t *p = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s}}, s:{s:[{s:s, s:s, s:[{s:s, s:i, s:s}], s:{s:{s:s, s:s}, "
        "s:{s:s, s:s}}, s:[{s:s, s:s, s:b}], s:s, s:s, s:s}], s:s, s:s, s:i, s:s, s:s, s:i, s:b, "
        "s:[{s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, s:i}], s:[{s:s, s:{s:s}}], s:s}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", "default", "labels", "app", "web",
        "pod-template-hash", "5d7c9b6f4d", "peloton.io/resource-pool", pool, "spec", "containers", "name", "web",
        "image", "registry.example.com/team/web:1.4.2", "ports", "name", "http", "containerPort", 8080, "protocol",
        "TCP", "resources", "requests", "cpu", "100m", "memory", "128Mi", "limits", "cpu", "500m", "memory",
        "256Mi", "volumeMounts", "name", "kube-api-access", "mountPath",
        "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly", 1, "terminationMessagePath",
        "/dev/termination-log", "terminationMessagePolicy", "File", "imagePullPolicy", "IfNotPresent",
        "restartPolicy", "Always", "dnsPolicy", "ClusterFirst", "terminationGracePeriodSeconds", 30,
        "serviceAccountName", "default", "schedulerName", "default-scheduler", "priority", priority,
        "enableServiceLinks", 1, "tolerations", "key", "node.kubernetes.io/not-ready", "operator", "Exists",
        "effect", "NoExecute", "tolerationSeconds", 300, "key", "node.kubernetes.io/unreachable", "operator",
        "Exists", "effect", "NoExecute", "tolerationSeconds", 300, "volumes", "name", "kube-api-access",
        "emptyDir", "medium", "Memory", "preemptionPolicy", "PreemptLowerPriority");
    if (!p) die("pod_obj: bad pack");
    json_t *spec = json_object_get(p, "spec");
    if (node) json_object_set_new(spec, "nodeName", json_string(node));
    return p;
}

struct cluster_run {
    struct redis_proc rp;
    char dir[64];
    pid_t pelotond, extender;
    int api_port, ext_port;
    struct wconn api; /* to pelotond */
    int nodes;        /* created so far */
    int pods;         /* created so far */
};

static int healthz_count(int port, const char *what) {
    struct wconn c = {.fd = -1};
    wc_open(&c, port);
    char *reply = NULL;
    int st = wc_request(&c, "GET", "/healthz", "", 0, &reply, NULL);
    json_t *v = json_loads(reply, 0, NULL);
    int n = st == 200 ? (int)json_integer_value(json_object_get(v, what)) : -1;
    json_decref(v);
    free(reply);
    wc_close(&c);
    return n;
}

/* Waits (up to 120 s) for the extender's model to hold `nodes` nodes and
 * `pods` pods. */
static void wait_model(struct cluster_run *r) {
    for (int i = 0; i < 1200; i++) {
        if (healthz_count(r->ext_port, "nodes") == r->nodes && healthz_count(r->ext_port, "pods") == r->pods) return;
        usleep(100000);
    }
    die("the extender's model did not catch up with the API server in 120 s");
}

static void cluster_start(struct cluster_run *r) {
    if (redis_proc_start(&r->rp, "everysec")) die("cannot start redis-server");
    snprintf(r->dir, sizeof r->dir, "/tmp/bench-extwire-XXXXXX");
    if (!mkdtemp(r->dir)) die("mkdtemp");
    char raddr[160];
    snprintf(raddr, sizeof raddr, "unix://%s", r->rp.unix_path);
    r->api_port = bench_start_pelotond(r->dir, raddr, "--roles=apiserver", &r->pelotond);
    if (!r->api_port) die("pelotond did not start");
    r->api.fd = -1;
    wc_open(&r->api, r->api_port);
    for (int i = 0; i < NPOOLS; i++)
        api(&r->api, "POST", "/apis/peloton.io/v1alpha1/resourcepools",
            json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}}", "apiVersion",
                      "peloton.io/v1alpha1", "kind", "ResourcePool", "metadata", "name", pool_names[i], "spec",
                      "resources", "kind", "cpu", "reservation", "1000", "limit", "200000", "kind", "memory",
                      "reservation", "1Ti", "limit", "1000Ti"),
            false);
    char server[64], port_file[96], port_arg[112], log[96];
    snprintf(server, sizeof server, "--server=http://127.0.0.1:%d", r->api_port);
    snprintf(port_file, sizeof port_file, "%s/ext.port", r->dir);
    snprintf(port_arg, sizeof port_arg, "--port-file=%s", port_file);
    snprintf(log, sizeof log, "%s/extender.log", r->dir);
    if (getenv("BENCH_WIRE_RT")) { /* this process and, by inheritance, the extender: SCHED_FIFO */
        struct sched_param sp = {.sched_priority = 10};
        if (sched_setscheduler(0, SCHED_FIFO, &sp)) die("BENCH_WIRE_RT: sched_setscheduler failed (root?)");
    }
    const char *bin = getenv("BENCH_WIRE_EXTENDER") ? getenv("BENCH_WIRE_EXTENDER") : "bin/peloton-extender";
    char *argv[] = {(char *)bin, server, "--port=0", port_arg, "--prefix=/peloton", NULL};
    r->extender = bench_spawn(argv, log);
    for (int i = 0; i < 200 && !r->ext_port; i++) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (fscanf(f, "%d", &r->ext_port) != 1) r->ext_port = 0;
            fclose(f);
        }
        if (!r->ext_port) usleep(50000);
    }
    if (!r->ext_port) die("peloton-extender did not start");
    for (int i = 0; i < 300 && healthz_count(r->ext_port, "nodes") < 0; i++) usleep(100000);
}

static void cluster_stop(struct cluster_run *r) {
    wc_close(&r->api);
    bench_stop(r->extender);
    bench_stop(r->pelotond);
    redis_proc_destroy(&r->rp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", r->dir);
    if (system(cmd)) { /* a leftover folder in /tmp is harmless */
    }
}

/* Grows the cluster to n nodes, each with one running pod. */
static void grow(struct cluster_run *r, int n) {
    for (int i = r->nodes; i < n; i++) {
        api(&r->api, "POST", "/api/v1/nodes", node_obj(i), false);
        char name[32], node[32];
        snprintf(name, sizeof name, "run-%05d", i);
        snprintf(node, sizeof node, "node-%05d", i);
        api(&r->api, "POST", "/api/v1/namespaces/default/pods", pod_obj(name, pool_names[i % NPOOLS], node, 0),
            false);
        r->pods++;
    }
    r->nodes = n;
}

/* Creates a pending pod and returns it as the API server serves it (new). */
static json_t *pending_pod(struct cluster_run *r, const char *name, int priority) {
    json_t *p = api(&r->api, "POST", "/api/v1/namespaces/default/pods",
                    pod_obj(name, pool_names[r->pods % NPOOLS], NULL, priority), true);
    r->pods++;
    return p;
}

/* ---- figures ---- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(int nodes, const char *verb, uint64_t *lat, int n, double secs) {
    qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
    char name[96];
    static const char *const q[] = {"p50", "p99", "p99.9"};
    const int at[] = {n / 2, n * 99 / 100, n * 999 / 1000};
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "extender wire %d nodes %s %s", nodes, verb, q[k]);
        bench_report(name, (double)lat[at[k] < n ? at[k] : n - 1] / 1e6, "ms", k == 1 ? "<= 1" : NULL);
    }
    snprintf(name, sizeof name, "extender wire %d nodes %s req/s", nodes, verb);
    bench_report(name, n / secs, "req/s", NULL);
}

/* The names of the cluster's nodes as a JSON array text, starting at node
 * `from` (kube-scheduler starts each cycle where the last one stopped). */
static json_t *names_from(int n, int from) {
    json_t *a = json_array();
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "node-%05d", (from + i) % n);
        json_array_append_new(a, json_string(name));
    }
    return a;
}

/* The ExtenderArgs body (new text). */
static char *args_body(const json_t *pod, json_t *names) {
    json_t *b = json_pack("{s:O, s:n, s:o}", "Pod", pod, "Nodes", "NodeNames", names);
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

static void cycles(struct cluster_run *r, struct wconn *c, int n, int ncycles) {
    /* the pods first, so that the timed loop sees only its own changes */
    json_t **pods = malloc((size_t)ncycles * sizeof *pods);
    for (int i = 0; i < ncycles; i++) {
        char name[48];
        snprintf(name, sizeof name, "pending-%d-%05d", n, i);
        pods[i] = pending_pod(r, name, 0);
    }
    wait_model(r);
    uint64_t *lat[3];
    for (int v = 0; v < 3; v++) lat[v] = malloc((size_t)ncycles * sizeof *lat[v]);
    int from = 0, bad = 0;
    uint64_t spent[3] = {0};
    for (int i = 0; i < ncycles; i++) {
        char *body = args_body(pods[i], names_from(n, from)), *reply = NULL;
        from = (from + n / 7 + 1) % n;
        size_t len = strlen(body), rlen = 0;
        uint64_t t0 = bench_now_ns();
        int st = wc_request(c, "POST", "/peloton/filter", body, len, &reply, &rlen);
        lat[0][i] = bench_now_ns() - t0;
        free(body);
        json_t *fr = json_loads(reply, 0, NULL), *passed = json_object_get(fr, "NodeNames");
        free(reply);
        if (st != 200 || !json_array_size(passed)) {
            if (getenv("BENCH_WIRE_DEBUG")) fprintf(stderr, "filter: %d %s\n", st, json_dumps(fr, 0));
            bad++;
            json_decref(fr);
            lat[1][i] = lat[2][i] = 0;
            continue;
        }
        char node[64];
        snprintf(node, sizeof node, "%s", json_string_value(json_array_get(passed, 0)));
        body = args_body(pods[i], json_incref(passed));
        json_decref(fr);
        len = strlen(body);
        t0 = bench_now_ns();
        st = wc_request(c, "POST", "/peloton/prioritize", body, len, NULL, NULL);
        lat[1][i] = bench_now_ns() - t0;
        free(body);
        bad += st != 200;
        json_t *meta = json_object_get(pods[i], "metadata");
        json_t *bb = json_pack("{s:s, s:s, s:s, s:s}", "PodName", json_string_value(json_object_get(meta, "name")),
                               "PodNamespace", "default", "PodUID", json_string_value(json_object_get(meta, "uid")),
                               "Node", node);
        body = json_dumps(bb, JSON_COMPACT);
        json_decref(bb);
        len = strlen(body);
        t0 = bench_now_ns();
        st = wc_request(c, "POST", "/peloton/bind", body, len, &reply, NULL);
        lat[2][i] = bench_now_ns() - t0;
        const char *e = strstr(reply, "\"Error\":\""); /* an empty Error is success */
        if (st != 200 || (e && e[9] != '"')) {
            bad++;
            if (getenv("BENCH_WIRE_DEBUG")) fprintf(stderr, "bind: %d %s\n", st, reply);
        }
        free(reply);
        free(body);
        for (int v = 0; v < 3; v++) spent[v] += lat[v][i];
    }
    static const char *const verb[] = {"filter", "prioritize", "bind"};
    for (int v = 0; v < 3; v++) report(n, verb[v], lat[v], ncycles, (double)spent[v] / 1e9);
    fflush(stdout);
    if (bad) fprintf(stderr, "bench_extender_wire: %d requests failed or were refused\n", bad);
    for (int i = 0; i < ncycles; i++) json_decref(pods[i]);
    for (int v = 0; v < 3; v++) free(lat[v]);
    free(pods);
}

static void preempts(struct cluster_run *r, struct wconn *c, int n, int iters) {
    char name[48];
    snprintf(name, sizeof name, "preemptor-%d", n);
    json_t *pod = pending_pod(r, name, 1000);
    /* the running pods' UIDs, for the victims */
    json_t *list = api(&r->api, "GET", "/api/v1/namespaces/default/pods", NULL, true), *it;
    size_t i;
    json_t *victims = json_object();
    int cand = n / 10 < 100 ? (n < 100 ? n : 100) : n / 10;
    json_array_foreach(json_object_get(list, "items"), i, it) {
        const char *pn = json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
        const char *node = json_string_value(json_object_get(json_object_get(it, "spec"), "nodeName"));
        if (!pn || strncmp(pn, "run-", 4) || !node || atoi(pn + 4) >= cand) continue;
        json_object_set_new(victims, node,
                            json_pack("{s:[{s:O}], s:i}", "Pods", "UID",
                                      json_object_get(json_object_get(it, "metadata"), "uid"), "NumPDBViolations", 0));
    }
    json_decref(list);
    wait_model(r);
    json_t *b = json_pack("{s:o, s:n, s:o}", "Pod", pod, "NodeNameToVictims", "NodeNameToMetaVictims", victims);
    char *body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    size_t len = strlen(body);
    uint64_t *lat = malloc((size_t)iters * sizeof *lat), spent = 0;
    int bad = 0;
    for (int k = 0; k < iters; k++) {
        uint64_t t0 = bench_now_ns();
        int st = wc_request(c, "POST", "/peloton/preempt", body, len, NULL, NULL);
        lat[k] = bench_now_ns() - t0;
        spent += lat[k];
        bad += st != 200;
    }
    report(n, "preempt", lat, iters, (double)spent / 1e9);
    if (bad) fprintf(stderr, "bench_extender_wire: %d preempt requests failed\n", bad);
    free(lat);
    free(body);
}

/* From the extender's own histogram (/metrics): how many of a verb's
 * requests took at most le seconds in the handler, and how many there
 * were (*count). Tells the handler's time apart from the wire's. */
static double served_within(int port, const char *verb, const char *le, double *count) {
    struct wconn c = {.fd = -1};
    wc_open(&c, port);
    char *t = NULL, key[160];
    if (wc_request(&c, "GET", "/metrics", "", 0, &t, NULL) != 200) die("GET /metrics");
    wc_close(&c);
    double within = 0;
    snprintf(key, sizeof key, "peloton_extender_request_duration_seconds_bucket{verb=\"%s\",le=\"%s\"} ", verb, le);
    char *p = strstr(t, key);
    if (p) within = atof(p + strlen(key));
    snprintf(key, sizeof key, "peloton_extender_request_duration_seconds_count{verb=\"%s\"} ", verb);
    p = strstr(t, key);
    *count = p ? atof(p + strlen(key)) : 0;
    free(t);
    return within;
}

static const char *const verbs4[] = {"filter", "prioritize", "bind", "preempt"};

/* Prints, per verb, the requests of this size whose handler took over 1 ms. */
static void served_report(int port, int nodes, double before[4][2]) {
    for (int v = 0; v < 4; v++) {
        double count, within = served_within(port, verbs4[v], "0.001", &count);
        char name[96];
        snprintf(name, sizeof name, "extender wire %d nodes %s handler > 1 ms", nodes, verbs4[v]);
        double n = count - before[v][1];
        bench_report(name, n > 0 ? 100.0 * ((n - (within - before[v][0])) / n) : 0, "%", NULL);
    }
}

static void served_mark(int port, double out[4][2]) {
    for (int v = 0; v < 4; v++) out[v][0] = served_within(port, verbs4[v], "0.001", &out[v][1]);
}

int main(void) {
    bool quick = getenv("BENCH_QUICK") != NULL;
    int sizes[3] = {50, 1000, 5000}, nsizes = 3;
    if (quick) nsizes = 1;
    if (getenv("BENCH_WIRE_NODES")) sizes[0] = atoi(getenv("BENCH_WIRE_NODES")), nsizes = 1;
    int ncyc = getenv("BENCH_WIRE_CYCLES") ? atoi(getenv("BENCH_WIRE_CYCLES")) : quick ? 50 : 2000;
    struct cluster_run r = {0};
    cluster_start(&r);
    struct wconn c = {.fd = -1};
    wc_open(&c, r.ext_port);
    for (int s = 0; s < nsizes; s++) {
        grow(&r, sizes[s]);
        wait_model(&r);
        double mark[4][2];
        served_mark(r.ext_port, mark);
        uint64_t t0 = bench_now_ns();
        cycles(&r, &c, sizes[s], ncyc);
        preempts(&r, &c, sizes[s], quick ? 50 : 2000);
        served_report(r.ext_port, sizes[s], mark);
        printf("bench extender wire: %d nodes done in %.1f s\n", sizes[s],
                (double)(bench_now_ns() - t0) / 1e9);
    }
    FILE *f = fopen("/proc/loadavg", "r");
    char load[128] = "";
    if (f) {
        if (!fgets(load, sizeof load, f)) load[0] = 0;
        fclose(f);
    }
    printf("bench extender wire: load %s", load);
    wc_close(&c);
    cluster_stop(&r);
    return 0;
}
