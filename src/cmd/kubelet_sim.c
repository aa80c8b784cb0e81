/* kubelet-sim: a fleet of simulated Kubelets against a Kubernetes API server
 * (pelotond's shim or a real one). Flags and behaviour: docs/kubelet-sim.md.
 *
 * Prints "kubelet-sim: N nodes registered" once every node was tried, runs
 * until SIGINT or SIGTERM, then stops cleanly (exit 0). Exit 1 when the
 * server cannot be configured or reached at start, 2 on usage errors. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kclient.h"
#include "ksim.h"

#define START_ATTEMPTS 50 /* x 200 ms: how long the server may take to answer at start */

struct app {
    uv_loop_t *loop;
    struct kclient *kc;
    struct kclient *lkc; /* lease renewals: connections of their own, as a Kubelet's heartbeat client */
    struct ksim *sim;
    uv_signal_t sigint, sigterm;
    bool quiet;
};

static void on_registered(void *ud, int count) {
    struct app *a = ud;
    printf("kubelet-sim: %d nodes registered\n", count);
    fflush(stdout);
    (void)a;
}

static void on_handle_closed(uv_handle_t *h) { (void)h; }

static void on_stopped(void *ud) {
    struct app *a = ud;
    uv_close((uv_handle_t *)&a->sigint, on_handle_closed);
    uv_close((uv_handle_t *)&a->sigterm, on_handle_closed);
    kclient_free(a->kc); /* cancels what is left; the sim ignores those answers */
    kclient_free(a->lkc);
    a->kc = a->lkc = NULL;
    ksim_close(a->sim);
}

static void on_signal(uv_signal_t *h, int signum) {
    struct app *a = h->data;
    if (!a->quiet) fprintf(stderr, "kubelet-sim: level=info msg=\"signal %d: stopping\"\n", signum);
    ksim_shutdown(a->sim, on_stopped, a);
}

/* The namespace leases live in; created when missing. Also proves the server answers. */
static int ensure_lease_namespace(struct kclient *kc, char *err, size_t errlen) {
    long st = 0;
    for (int i = 0; i < START_ATTEMPTS; i++) {
        st = kclient_request_sync(kc, "GET", "/api/v1/namespaces/" KSIM_LEASE_NS, NULL, NULL, NULL, err, errlen);
        if (st > 0) break;
        usleep(200 * 1000);
    }
    if (st == 200) return 0;
    if (st == 404) {
        json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "kind", "Namespace", "apiVersion", "v1", "metadata", "name",
                               KSIM_LEASE_NS);
        st = kclient_request_sync(kc, "POST", "/api/v1/namespaces", ns, NULL, NULL, err, errlen);
        json_decref(ns);
        if (st == 201 || st == 409) return 0;
    }
    if (st > 0) snprintf(err, errlen, "namespace " KSIM_LEASE_NS ": HTTP %ld", st);
    return -EIO;
}

int main(int argc, char **argv) {
    struct ksim_config cfg;
    char err[512] = "";
    if (ksim_config_parse(&cfg, argc, argv, err, sizeof err)) {
        fprintf(stderr, "kubelet-sim: %s\n%s", err, ksim_usage);
        ksim_config_free(&cfg);
        return 2;
    }
    if (cfg.help) {
        fputs(ksim_usage, stdout);
        ksim_config_free(&cfg);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    struct app a = {.loop = uv_default_loop(), .quiet = cfg.quiet};
    struct kc_config kcfg = {0};
    int rc = cfg.server ? kc_config_from_url(cfg.server, cfg.token_file, &kcfg, err, sizeof err)
                        : kc_config_load(cfg.kubeconfig, cfg.context, &kcfg, err, sizeof err);
    int status = 1;
    if (rc) {
        fprintf(stderr, "kubelet-sim: %s\n", err);
        goto out;
    }
    if (!(a.kc = kclient_new(a.loop, &kcfg, err, sizeof err))) {
        fprintf(stderr, "kubelet-sim: %s\n", err);
        goto out;
    }
    if (ensure_lease_namespace(a.kc, err, sizeof err)) {
        fprintf(stderr, "kubelet-sim: cannot reach the API server at %s: %s\n", kcfg.server, err);
        kclient_free(a.kc);
        goto out;
    }
    if (!(a.lkc = kclient_new(a.loop, &kcfg, err, sizeof err)) ||
        !(a.sim = ksim_new(a.loop, a.kc, &cfg, err, sizeof err))) {
        fprintf(stderr, "kubelet-sim: %s\n", err);
        kclient_free(a.kc);
        kclient_free(a.lkc);
        goto out;
    }
    ksim_set_lease_client(a.sim, a.lkc);
    uv_signal_init(a.loop, &a.sigint);
    uv_signal_init(a.loop, &a.sigterm);
    a.sigint.data = a.sigterm.data = &a;
    uv_signal_start(&a.sigint, on_signal, SIGINT);
    uv_signal_start(&a.sigterm, on_signal, SIGTERM);
    if (ksim_start(a.sim, on_registered, &a)) {
        fprintf(stderr, "kubelet-sim: out of memory\n");
        ksim_shutdown(a.sim, on_stopped, &a);
    }
    uv_run(a.loop, UV_RUN_DEFAULT);
    ksim_free(a.sim);
    status = 0;
out:
    kc_config_free(&kcfg);
    ksim_config_free(&cfg);
    uv_loop_close(a.loop);
    return status;
}
