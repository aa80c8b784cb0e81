/* pelotond: the Peloton-C daemon. Today it runs the apiserver role: the
 * Kubernetes API (apiserver-shim) over HTTP on loopback, backed by Redis.
 * The other roles (resmgr, placement, jobmgr, hostmgr) are not built yet and
 * are refused by name.
 *
 *   pelotond [--roles=apiserver] [--bind=127.0.0.1] [--port=6080] [--port-file=F]
 *            [--redis=127.0.0.1:6379] [--token-file=F] [--history-max=10000]
 *            [--watch-poll-ms=20] [--watch-bookmark-ms=10000] [--crds=crds]
 *            [--tls-port=N] [--tls-dir=.peloton-tls] [--tls-cert=PEM --tls-key=PEM]
 *
 * The plain-HTTP port always binds 127.0.0.1 (local use). --tls-port adds a
 * TLS listener (HTTP/2 by ALPN) on --bind, with a self-signed certificate
 * made on first start in --tls-dir; with TLS on, the token (if any) is
 * required there and the loopback plain port stays open.
 *
 * SIGINT or SIGTERM stops it cleanly. Logs are one line per event, key=value. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "server.h"
#include "shim.h"
#include "store.h"
#include "tlscert.h"

struct daemon {
    uv_loop_t *loop;
    uv_signal_t sigint, sigterm;
    struct http_server *http, *https;
};

static void on_signal(uv_signal_t *h, int signum) {
    struct daemon *d = h->data;
    fprintf(stderr, "level=info msg=stopping signal=%d\n", signum);
    http_server_stop(d->http);
    http_server_stop(d->https);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
}

static const char *opt(const char *arg, const char *name) {
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && arg[n] == '=' ? arg + n + 1 : NULL;
}

static char *read_token(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) buf[--n] = 0;
    return n ? strdup(buf) : NULL;
}

static int usage(void) {
    fprintf(stderr, "usage: pelotond [--roles=apiserver] [--bind=ADDR] [--port=N] [--port-file=F] "
                    "[--redis=HOST:PORT] [--token-file=F] [--history-max=N] [--watch-poll-ms=N] "
                    "[--watch-bookmark-ms=N] [--crds=DIR] [--tls-port=N] [--tls-dir=DIR] "
                    "[--tls-cert=PEM --tls-key=PEM]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *bind = "127.0.0.1", *roles = "apiserver", *redis = "127.0.0.1:6379", *token_file = NULL,
               *port_file = NULL, *crds = "crds", *tls_dir = ".peloton-tls", *tls_cert = NULL, *tls_key = NULL;
    int tls_port = -1;
    int port = 6080;
    long history_max = 0;
    unsigned poll_ms = 0, bookmark_ms = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = opt(argv[i], "--roles"))) roles = v;
        else if ((v = opt(argv[i], "--bind"))) bind = v;
        else if ((v = opt(argv[i], "--port"))) port = atoi(v);
        else if ((v = opt(argv[i], "--port-file"))) port_file = v;
        else if ((v = opt(argv[i], "--redis"))) redis = v;
        else if ((v = opt(argv[i], "--token-file"))) token_file = v;
        else if ((v = opt(argv[i], "--history-max"))) history_max = atol(v);
        else if ((v = opt(argv[i], "--watch-poll-ms"))) poll_ms = (unsigned)atoi(v);
        else if ((v = opt(argv[i], "--watch-bookmark-ms"))) bookmark_ms = (unsigned)atoi(v);
        else if ((v = opt(argv[i], "--crds"))) crds = v;
        else if ((v = opt(argv[i], "--tls-port"))) tls_port = atoi(v);
        else if ((v = opt(argv[i], "--tls-dir"))) tls_dir = v;
        else if ((v = opt(argv[i], "--tls-cert"))) tls_cert = v;
        else if ((v = opt(argv[i], "--tls-key"))) tls_key = v;
        else return usage();
    }
    if (strcmp(roles, "apiserver") != 0) {
        fprintf(stderr, "pelotond: roles \"%s\": only the apiserver role is built so far\n", roles);
        return 2;
    }
    char host[256];
    const char *colon = strrchr(redis, ':');
    if (!colon || (size_t)(colon - redis) >= sizeof host) return usage();
    memcpy(host, redis, (size_t)(colon - redis));
    host[colon - redis] = 0;
    char *token = NULL;
    if (token_file && !(token = read_token(token_file))) {
        fprintf(stderr, "pelotond: cannot read a token from %s\n", token_file);
        return 1;
    }

    struct store *st;
    struct store_options so;
    store_options_init(&so);
    if (history_max > 0) so.history_max = history_max;
    if (store_open(host, atoi(colon + 1), &so, &st)) {
        fprintf(stderr, "pelotond: cannot reach redis at %s\n", redis);
        free(token);
        return 1;
    }
    struct daemon d = {.loop = uv_default_loop()};
    struct shim_config scfg = {.token = token, .token_on_plain = tls_port < 0, .loop = d.loop, .poll_ms = poll_ms,
                               .bookmark_ms = bookmark_ms};
    struct shim *shim = shim_new(st, &scfg);
    char err[512];
    if (shim && !shim_bootstrap(shim, err, sizeof err)) {
        /* the Peloton CRDs (and any other in the directory); "" skips, a missing default is fine */
        if (crds[0] && shim_crd_install(shim, crds, err, sizeof err) && strcmp(crds, "crds") != 0) {
            fprintf(stderr, "pelotond: %s\n", err);
            shim_free(shim);
            store_close(st);
            free(token);
            return 1;
        }
        shim_crd_sync(shim); /* CRDs created through the API earlier */
    } else {
        fprintf(stderr, "pelotond: %s\n", shim ? err : "out of memory");
        shim_free(shim);
        store_close(st);
        free(token);
        return 1;
    }
    /* the plain port is for local use: loopback only, whatever --bind says */
    struct http_server_config hcfg = {.bind_addr = "127.0.0.1", .port = port, .handler = shim_handle, .ud = shim};
    char cert[4096], key[4096];
    if (tls_port >= 0) {
        if ((tls_cert != NULL) != (tls_key != NULL)) {
            fprintf(stderr, "pelotond: --tls-cert and --tls-key go together\n");
            shim_free(shim);
            store_close(st);
            free(token);
            return 2;
        }
        mkdir(tls_dir, 0700);
        /* the operator's certificate, or a self-signed one made on first start */
        snprintf(cert, sizeof cert, tls_cert ? "%s" : "%s/apiserver.crt", tls_cert ? tls_cert : tls_dir);
        snprintf(key, sizeof key, tls_key ? "%s" : "%s/apiserver.key", tls_key ? tls_key : tls_dir);
        struct http_server_config tcfg = {.bind_addr = bind, .port = tls_port, .handler = shim_handle, .ud = shim,
                                          .tls_cert = cert, .tls_key = key};
        if ((!tls_cert && tls_cert_ensure(cert, key, err, sizeof err)) ||
            http_server_start(d.loop, &tcfg, &d.https, err, sizeof err)) {
            fprintf(stderr, "pelotond: %s\n", err);
            shim_free(shim);
            store_close(st);
            free(token);
            return 1;
        }
    }
    if (http_server_start(d.loop, &hcfg, &d.http, err, sizeof err)) {
        fprintf(stderr, "pelotond: %s\n", err);
        shim_free(shim);
        store_close(st);
        free(token);
        return 1;
    }
    uv_signal_init(d.loop, &d.sigint);
    uv_signal_init(d.loop, &d.sigterm);
    d.sigint.data = d.sigterm.data = &d;
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    int actual = http_server_port(d.http);
    fprintf(stderr, "level=info msg=serving api=http://127.0.0.1:%d redis=%s auth=%s\n", actual, redis,
            token && tls_port < 0 ? "token" : "none");
    if (d.https)
        fprintf(stderr, "level=info msg=serving api=https://%s:%d cert=%s auth=%s\n", bind,
                http_server_port(d.https), cert, token ? "token" : "none");
    if (port_file) { /* "PLAIN [TLS]" */
        FILE *f = fopen(port_file, "w");
        if (f) {
            if (d.https) fprintf(f, "%d %d\n", actual, http_server_port(d.https));
            else fprintf(f, "%d\n", actual);
            fclose(f);
        }
    }
    uv_run(d.loop, UV_RUN_DEFAULT);
    http_server_free(d.http);
    http_server_free(d.https);
    shim_free(shim);                /* closes the watch timer ... */
    uv_run(d.loop, UV_RUN_DEFAULT); /* ... which finishes on this turn */
    uv_loop_close(d.loop);
    store_close(st);
    free(token);
    fprintf(stderr, "level=info msg=stopped\n");
    return 0;
}
