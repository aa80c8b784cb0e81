/* peloton-extender: the kube-scheduler extender as a process
 * (docs/extender.md).
 *
 *   peloton-extender [--kubeconfig=F [--context=C] | --in-cluster | --server=URL [--token-file=F]]
 *                    [--bind=127.0.0.1] [--port=8888] [--port-file=F] [--prefix=/peloton]
 *                    [--tls-cert=PEM --tls-key=PEM] [--default-pool=NAME] [--max-body=BYTES]
 *                    [--gang-ttl-ms=30000] [--pool-status-ms=2000] [--bind-timeout-ms=5000]
 *
 * Without a cluster flag: the in-cluster service account when running in a
 * pod, else $KUBECONFIG or ~/.kube/config. SIGINT or SIGTERM stops it
 * cleanly. Logs are one line per event, key=value. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "extender_srv.h"
#include "kclient.h"
#include "metrics.h"

struct proc {
    uv_loop_t *loop;
    uv_signal_t sigint, sigterm;
    struct extender_srv *srv;
    struct kclient *kc;
};

static void on_signal(uv_signal_t *h, int signum) {
    struct proc *p = h->data;
    fprintf(stderr, "level=info msg=stopping signal=%d\n", signum);
    extender_srv_stop(p->srv);
    kclient_free(p->kc); /* cancels binds in flight: their replies say so */
    p->kc = NULL;
    uv_close((uv_handle_t *)&p->sigint, NULL);
    uv_close((uv_handle_t *)&p->sigterm, NULL);
}

static const char *opt(const char *arg, const char *name) {
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && arg[n] == '=' ? arg + n + 1 : NULL;
}

static int usage(void) {
    fprintf(stderr, "usage: peloton-extender [--kubeconfig=F [--context=C] | --in-cluster | --server=URL "
                    "[--token-file=F]] [--bind=ADDR] [--port=N] [--port-file=F] [--prefix=/peloton] "
                    "[--tls-cert=PEM --tls-key=PEM] [--default-pool=NAME] [--max-body=BYTES] [--gang-ttl-ms=N] "
                    "[--pool-status-ms=N] [--bind-timeout-ms=N]\n");
    return 2;
}

int main(int argc, char **argv) {
    /* A peer that closes early (a client leaving a large list, Redis dying
     * under a Unix-domain socket) must cost an EPIPE on that write, not the
     * process: libuv, hiredis and libcurl write with plain write(). */
    signal(SIGPIPE, SIG_IGN);
    const char *kubeconfig = NULL, *context = NULL, *server = NULL, *token_file = NULL, *port_file = NULL;
    bool in_cluster = false;
    struct ext_srv_options o;
    ext_srv_options_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = opt(argv[i], "--kubeconfig"))) kubeconfig = v;
        else if ((v = opt(argv[i], "--context"))) context = v;
        else if (!strcmp(argv[i], "--in-cluster")) in_cluster = true;
        else if ((v = opt(argv[i], "--server"))) server = v;
        else if ((v = opt(argv[i], "--token-file"))) token_file = v;
        else if ((v = opt(argv[i], "--bind"))) o.bind_addr = v;
        else if ((v = opt(argv[i], "--port"))) o.port = atoi(v);
        else if ((v = opt(argv[i], "--port-file"))) port_file = v;
        else if ((v = opt(argv[i], "--prefix"))) o.prefix = v;
        else if ((v = opt(argv[i], "--tls-cert"))) o.tls_cert = v;
        else if ((v = opt(argv[i], "--tls-key"))) o.tls_key = v;
        else if ((v = opt(argv[i], "--default-pool"))) o.core.default_pool = v;
        else if ((v = opt(argv[i], "--max-body"))) o.max_body = strtoull(v, NULL, 10);
        else if ((v = opt(argv[i], "--gang-ttl-ms"))) o.core.gang_ttl_ms = (uint32_t)strtoul(v, NULL, 10);
        else if ((v = opt(argv[i], "--pool-status-ms"))) o.pool_status_ms = atoi(v);
        else if ((v = opt(argv[i], "--bind-timeout-ms"))) o.bind_timeout_ms = atoi(v);
        else return usage();
    }
    if ((o.tls_cert != NULL) != (o.tls_key != NULL)) {
        fprintf(stderr, "peloton-extender: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (o.port < 0 || o.port > 65535 || o.pool_status_ms < 0 || o.bind_timeout_ms < 0 ||
        (kubeconfig && (in_cluster || server)) || (in_cluster && server))
        return usage();
    char err[512];
    struct kc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int rc;
    if (server) rc = kc_config_from_url(server, token_file, &cfg, err, sizeof err);
    else if (in_cluster) rc = kc_config_in_cluster(&cfg, err, sizeof err);
    else if (kubeconfig) rc = kc_config_load(kubeconfig, context, &cfg, err, sizeof err);
    else if ((rc = kc_config_in_cluster(&cfg, err, sizeof err)) == -ENOENT)
        rc = kc_config_load(NULL, context, &cfg, err, sizeof err);
    if (rc) {
        fprintf(stderr, "peloton-extender: %s\n", err);
        return 1;
    }
    struct proc p = {.loop = uv_default_loop()};
    struct metrics *reg = metrics_new(); /* the extender's families and the process's CPU and memory */
    if (!reg || metrics_collector(reg, metrics_collect_process, NULL)) {
        fprintf(stderr, "peloton-extender: out of memory\n");
        metrics_free(reg);
        kc_config_free(&cfg);
        return 1;
    }
    o.core.metrics = reg;
    if (!(p.kc = kclient_new(p.loop, &cfg, err, sizeof err))) {
        fprintf(stderr, "peloton-extender: %s\n", err);
        metrics_free(reg);
        kc_config_free(&cfg);
        return 1;
    }
    if ((rc = extender_srv_start(p.loop, p.kc, &o, &p.srv, err, sizeof err))) {
        fprintf(stderr, "peloton-extender: %s\n", err);
        kclient_free(p.kc);
        if (p.srv) uv_run(p.loop, UV_RUN_DEFAULT);
        extender_srv_free(p.srv);
        uv_run(p.loop, UV_RUN_DEFAULT);
        uv_loop_close(p.loop);
        metrics_free(reg);
        kc_config_free(&cfg);
        return 1;
    }
    uv_signal_init(p.loop, &p.sigint);
    uv_signal_init(p.loop, &p.sigterm);
    p.sigint.data = p.sigterm.data = &p;
    uv_signal_start(&p.sigint, on_signal, SIGINT);
    uv_signal_start(&p.sigterm, on_signal, SIGTERM);
    int port = extender_srv_port(p.srv);
    fprintf(stderr, "level=info msg=serving url=%s://%s:%d%s api=%s default_pool=%s\n", o.tls_cert ? "https" : "http",
            o.bind_addr, port, o.prefix, cfg.server, o.core.default_pool ? o.core.default_pool : "");
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (f) {
            fprintf(f, "%d\n", port);
            fclose(f);
        }
    }
    uv_run(p.loop, UV_RUN_DEFAULT);
    extender_srv_free(p.srv);
    uv_run(p.loop, UV_RUN_DEFAULT);
    uv_loop_close(p.loop);
    metrics_free(reg);
    kc_config_free(&cfg);
    fprintf(stderr, "level=info msg=stopped\n");
    return 0;
}
