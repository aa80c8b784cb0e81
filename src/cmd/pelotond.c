/* pelotond: the Peloton-C daemon, one binary with roles (docs/architecture.md):
 *   apiserver  the Kubernetes API (apiserver-shim) over HTTP, backed by Redis
 *   resmgr     pools, entitlement, admission, preemption (leader by Redis lease)
 *   placement  ready gangs -> hosts -> Bindings (leader by Redis lease; --placement-active-active: several)
 *   jobmgr     Job objects -> Pods, restarts, rolling updates
 *   hostmgr    host inventory, lease checks: a lapsed node's tasks are LOST
 *   native     Peloton's own API (gRPC and YARPC HTTP on one port, --native-port,
 *              or on Peloton's six, --native-daemon-ports; 127.0.0.1 unless
 *              --native-bind; TLS with the API's certificate, --native-tls):
 *              a facade over the same objects (docs/native-api.md)
 *   mesos      the host manager's Mesos driver (docs/mesos.md): Mesos agents as
 *              Nodes, pods bound to them run as Mesos tasks; on (with hostmgr)
 *              when --mesos-master=URL is given
 *   extender   the kube-scheduler extender (scheduler-extender/), for clusters
 *              that keep kube-scheduler: not part of "all"; usually alone with
 *              --kubeconfig pointing at the real cluster
 * All roles run in one process by default (--roles=all); --roles= picks some,
 * so that they can be split across processes sharing Redis. The controller
 * roles are clients of a Kubernetes API: the in-process apiserver, or
 * --server=URL [--token-file] / --kubeconfig=F. They run on their own thread
 * and loop, so the API server's loop never waits for them.
 *
 *   pelotond [--roles=all|apiserver,resmgr,placement,jobmgr,hostmgr,native] [--native-port=5392]
 *            [--native-daemon-ports[=jobmgr=N,jobmgr-http=N,...]] [--native-bind=ADDR] [--native-tls]
 *            [--server=URL | --kubeconfig=F] [--default-pool=NAME]
 *            [--scheduler-default=true|false]
 *            [--bind=127.0.0.1] [--port=6080] [--port-file=F] [--unix-socket=PATH]
 *            [--redis=127.0.0.1:6379 | --redis=unix:///PATH] [--token-file=F] [--history-max=1000000] [--history-seconds=300]
 *            [--watch-poll-ms=20] [--watch-bookmark-ms=10000] [--list-page-bytes=33554432] [--crds=crds]
 *            [--tls-port=N] [--tls-dir=.peloton-tls] [--tls-cert=PEM --tls-key=PEM]
 *            [--admission-round-ms=20] [--placement-tick-ms=10] [--placement-retry-max-ms=5000]
 *            [--http-idle-timeout-ms=120000]
 *            [--metrics-port=N] [--hostmgr-mass-fraction=0.55] [--hostmgr-mass-min-nodes=3]
 *            [--metrics=false] [--events=false] [--event-ttl=1h0m0s]
 *
 * The plain-HTTP port always binds 127.0.0.1 (local use). --tls-port adds a
 * TLS listener (HTTP/2 by ALPN) on --bind, with a self-signed certificate
 * made on first start in --tls-dir. Every port asks who the client is
 * (docs/security.md): a bearer token of --token-file (kube-apiserver's CSV
 * of users and groups, or one token alone, user admin in system:masters), a
 * client certificate verified against --client-ca-file on the TLS port, or,
 * only with --insecure-allow-anonymous (local development), nobody; RBAC
 * objects decide what they may do, and --audit-log-path records it
 * (--audit-log-maxsize=MB or --audit-log-maxbytes, --audit-log-maxbackup).
 * The singleton roles (resmgr, placement, jobmgr with the workload
 * translator, hostmgr, the Mesos driver) act only while this process holds
 * their Redis lease
 * (src/ctl/ctl_lease.h; --lease-ms, default 10 s; --leader-elect=false
 * starts them without), so several pelotonds may run them on one Redis.
 * --placement-active-active runs placement in every process instead (each
 * pops gangs atomically, and claims capacity in Redis before binding, so
 * two engines never commit the same free capacity: placement_claim.h).
 * Each user but system:masters is held to --max-requests-per-user a second
 * (bursts of --max-request-burst-per-user) and --max-watches-per-user open
 * watches: past either, 429 with Retry-After (apiserver-shim/shim_limits.h).
 * Whole lists (no limit) and watches without a resourceVersion hold at most
 * --list-memory-mb (default 2048) together while they are served: past
 * half of it new ones get 429 (apiserver-shim/shim_slices.c).
 * The controllers in this process use a random token of their own. A local
 * user is no less a stranger on the plain port; kubectl sends tokens only
 * over TLS, so it uses the TLS port. --unix-socket=PATH
 * serves the same plain HTTP/1.1 on a Unix-domain socket too (mode 0600),
 * and the controllers in this process reach the API server through it: the
 * same REST and watch protocol without the TCP/IP stack's cost per message.
 * The resource manager admits in rounds of --admission-round-ms and
 * placement polls the ready queue every --placement-tick-ms while work
 * flows; a pod arriving when they were idle is taken at once. A keep-alive
 * connection idle for --http-idle-timeout-ms (either port, HTTP/2 too) is
 * closed.
 *
 * GET /metrics on the API server's ports (with the API's token) is the
 * Prometheus text of every role in the process (docs/metrics.md); a process
 * without the API server serves it on 127.0.0.1:--metrics-port (0: a free
 * one, written to --port-file), behind --token-file's token when given.
 *
 * SIGINT or SIGTERM stops it cleanly. Logs are one line per event, key=value. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "ctl.h"
#include "ctl_lease.h"
#include "extender_srv.h"
#include "hostmgr.h"
#include "jobmgr.h"
#include "workloads.h"
#include "kclient.h"
#include "ktime.h"
#include "native_api.h"
#include "tlsctx.h"
#include "mesosdrv.h"
#include "metrics.h"
#include "server.h"
#include "shim.h"
#include "shim_auth.h"
#include "shim_native_auth.h"
#include "store.h"
#include "tlscert.h"
#include "unixpath.h"

enum { ROLE_API = 1, ROLE_RESMGR = 2, ROLE_PLACEMENT = 4, ROLE_JOBMGR = 8, ROLE_HOSTMGR = 16, ROLE_NATIVE = 64,
       ROLE_ALL = 31 | ROLE_NATIVE, ROLE_EXTENDER = 32, ROLE_MESOS = 128 };

/* The controller roles: their own thread, loop, API client and Redis connection. */
struct controllers {
    unsigned roles;
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t stop;
    struct kc_config kcfg;
    const char *redis_addr, *default_pool;
    bool serve_default;
    struct kclient *kc;
    struct ctl_db *db;
    struct resmgr *resmgr;
    struct placement *placement;
    struct jobmgr *jobmgr;
    struct workloads *workloads; /* the job manager role's translating controller (apps/v1, batch/v1) */
    struct hostmgr *hostmgr;
    struct mdrv *mesos;
    const char *mesos_master;
    double mass_fraction;       /* hostmgr's mass-event threshold (--hostmgr-mass-fraction) */
    uint32_t mass_min_nodes;    /* ... and the fewest lapsed nodes (--hostmgr-mass-min-nodes) */
    struct extender_srv *extender;
    int extender_port;
    const char *extender_prefix;
    struct native_api *native;
    struct native_authz *native_authz; /* with the API server in this process: RBAC on native calls */
    bool roles_with_api;
    const char *token_file;            /* the API server's token file, for native_authz */
    bool allow_anonymous;
    int native_port;        /* -1: NATIVE_DEFAULT_PORT, and a busy port is a warning, not an error */
    const char *native_bind;           /* --native-bind, default 127.0.0.1 */
    struct native_ports native_ports;  /* --native-daemon-ports: Peloton's six */
    bool native_tls;                   /* --native-tls: the API's certificate, key and client CA */
    const char *native_cert, *native_key, *native_client_ca;
    bool native_cert_made;             /* the self-signed one of --tls-dir: made when missing */
    SSL_CTX *native_ssl;
    uint32_t round_ms, tick_ms, retry_max_ms; /* 0: the roles' defaults */
    uint32_t backoff_ms, backoff_max_ms; /* jobmgr's restart backoff; 0: its defaults */
    uint32_t gang_wait_ms;      /* 0: the resource manager's default */
    uint32_t ready_timeout_ms;  /* 0: the resource manager's default */
    struct metrics *metrics;    /* the process's registry (the roles register theirs on this thread) */
    struct metrics_series *redis_series[2]; /* this thread's Redis replies and errors (made on the main one) */
    /* The singleton roles (jobmgr with workloads, hostmgr, the Mesos driver)
     * run only while this process holds their lease (ctl_lease.h), unless
     * --leader-elect=false; their options are kept for each new term. */
    bool leader_elect;
    uint32_t lease_ms;
    char lease_id[128];
    struct ctl_lease *lease_jobmgr, *lease_hostmgr, *lease_mesos, *lease_placement;
    bool placement_active_active; /* placement in every process, no lease (--placement-active-active) */
    struct ctl_env env;           /* what the roles are started with */
    struct placement_options po;
    struct jobmgr_options jo;
    struct workloads_options wo;
    struct hostmgr_options ho;
    struct mdrv_options mo;
    struct mdrv **retired; /* drivers of ended terms: freed once the loop is done */
    int nretired;
    int rc;
};

struct daemon {
    uv_loop_t *loop;
    uv_signal_t sigint, sigterm;
    struct http_server *http, *https;
    struct http_server *metrics_http; /* --metrics-port without the API server */
    struct controllers *ctl;
    struct shim *shim;
    struct store_async *ast;
};

static void ctl_stop_roles(uv_async_t *a) {
    struct controllers *c = a->data;
    ctl_lease_stop(c->lease_jobmgr); /* each stops its role first, then hands the lease over */
    ctl_lease_stop(c->lease_hostmgr);
    ctl_lease_stop(c->lease_mesos);
    ctl_lease_stop(c->lease_placement);
    c->lease_jobmgr = c->lease_hostmgr = c->lease_mesos = c->lease_placement = NULL;
    resmgr_stop(c->resmgr);
    placement_stop(c->placement);
    jobmgr_stop(c->jobmgr);
    workloads_stop(c->workloads);
    c->workloads = NULL;
    hostmgr_stop(c->hostmgr);
    mdrv_stop(c->mesos); /* freed once the loop is done */
    if (c->extender) extender_srv_stop(c->extender); /* freed once the loop is done */
    native_api_stop(c->native);                      /* before the client: its calls end unheard */
    c->resmgr = NULL;
    c->placement = NULL;
    c->jobmgr = NULL;
    c->hostmgr = NULL;
    if (c->kc) kclient_free(c->kc); /* cancels what is in flight */
    c->kc = NULL;
    uv_close((uv_handle_t *)a, NULL);
}

static int start_extender(struct controllers *c, char *err, size_t errlen) {
    struct ext_srv_options eo;
    ext_srv_options_default(&eo);
    eo.port = c->extender_port;
    if (c->extender_prefix) eo.prefix = c->extender_prefix;
    eo.core.default_pool = c->default_pool;
    eo.core.metrics = c->metrics; /* its families join the process's /metrics */
    if (c->roles & ROLE_RESMGR) eo.pool_status_ms = 0; /* the resource manager writes pool status */
    if (extender_srv_start(&c->loop, c->kc, &eo, &c->extender, err, errlen)) return -1;
    fprintf(stderr, "level=info msg=\"extender serving\" url=http://127.0.0.1:%d%s\n",
            extender_srv_port(c->extender), eo.prefix);
    return 0;
}

/* The native API on the controllers' loop and API client. On the default
 * port, a port already taken (another pelotond on this machine) leaves the
 * role off with a warning; a port given with --native-port or
 * --native-daemon-ports must be had. */
static int start_native(struct controllers *c, char *err, size_t errlen) {
    const char *bind = c->native_bind ? c->native_bind : "127.0.0.1";
    /* the API's own token: the controllers' client carries it */
    struct native_config nc = {.bind_addr = bind, .port = c->native_port < 0 ? NATIVE_DEFAULT_PORT : c->native_port,
                               .token = c->kcfg.token, .metrics = c->metrics};
    if (c->roles_with_api) { /* the API's users and RBAC decide each call (docs/security.md) */
        if (!(c->native_authz = native_authz_new(c->token_file, c->allow_anonymous, c->redis_addr, err, errlen)))
            return -1;
        nc.authorize = native_authz_check;
        nc.authorize_ud = c->native_authz;
    }
    if (c->native_tls) { /* the API's TLS certificate (made on first start when it is --tls-dir's) */
        if ((c->native_cert_made && tls_cert_ensure(c->native_cert, c->native_key, err, errlen)) ||
            !(c->native_ssl = http_tls_ctx_new(c->native_cert, c->native_key, c->native_client_ca, err, errlen)))
            return -1;
        nc.tls = c->native_ssl;
    }
    bool daemons = c->native_ports.per_daemon;
    if (!(c->native = native_api_start(&c->loop, c->kc, &nc, daemons ? &c->native_ports : NULL, err, errlen))) {
        if (c->native_port >= 0 || daemons) return -1;
        fprintf(stderr, "level=warn msg=\"native API not served\" error=\"%s\" hint=\"give --native-port\"\n", err);
        return 0;
    }
    const char *scheme = c->native_tls ? "https" : "http";
    if (!daemons) {
        fprintf(stderr, "level=info msg=\"native serving\" grpc=%s:%d yarpc=%s://%s:%d/api/v1 tls=%s\n", bind,
                native_api_port(c->native), scheme, bind, native_api_port(c->native), c->native_tls ? "on" : "off");
        return 0;
    }
    for (int d = 0; d < NATIVE_DAEMONS; d++)
        fprintf(stderr, "level=info msg=\"native serving\" daemon=%s grpc=%s:%d yarpc=%s://%s:%d/api/v1 tls=%s\n",
                native_daemon_name((enum native_daemon)d), bind,
                native_api_daemon_port(c->native, (enum native_daemon)d, true), scheme, bind,
                native_api_daemon_port(c->native, (enum native_daemon)d, false), c->native_tls ? "on" : "off");
    return 0;
}

/* --native-daemon-ports[=LIST]: Peloton's six ports, LIST changing some
 * ("jobmgr=N,jobmgr-http=N,resmgr=N,resmgr-http=N,hostmgr=N,hostmgr-http=N";
 * 0 is a free port). 0, or -1 for a bad LIST. */
static int parse_daemon_ports(const char *list, struct native_ports *p) {
    native_ports_peloton(p);
    while (list && *list) {
        size_t n = strcspn(list, ",");
        const char *eq = memchr(list, '=', n);
        if (!eq) return -1;
        char name[32], *end;
        size_t kl = (size_t)(eq - list);
        if (kl >= sizeof name) return -1;
        memcpy(name, list, kl);
        name[kl] = 0;
        long port = strtol(eq + 1, &end, 10);
        if (end != list + n || end == eq + 1 || port < 0 || port > 65535) return -1;
        bool http = kl > 5 && !strcmp(name + kl - 5, "-http");
        if (http) name[kl - 5] = 0;
        int d = -1;
        for (int k = 0; k < NATIVE_DAEMONS; k++)
            if (!strcmp(name, native_daemon_name((enum native_daemon)k))) d = k;
        if (d < 0) return -1;
        if (http) p->http[d] = (int)port;
        else p->grpc[d] = (int)port;
        list += n + (list[n] == ',');
    }
    return 0;
}

/* ---- the singleton roles' terms ---- */

static void jobmgr_term(void *ud, bool leader, long long epoch) {
    struct controllers *c = ud;
    (void)epoch;
    char err[512];
    if (!leader) {
        jobmgr_stop(c->jobmgr);
        workloads_stop(c->workloads);
        c->jobmgr = NULL;
        c->workloads = NULL;
        return;
    }
    if (!(c->jobmgr = jobmgr_start(&c->loop, c->kc, &c->jo, err, sizeof err)) ||
        !(c->workloads = workloads_start(&c->loop, c->kc, &c->wo, err, sizeof err))) {
        fprintf(stderr, "pelotond: jobmgr: %s\n", err);
        jobmgr_term(c, false, epoch);
    }
}

static void hostmgr_term(void *ud, bool leader, long long epoch) {
    struct controllers *c = ud;
    (void)epoch;
    char err[512];
    if (!leader) {
        hostmgr_stop(c->hostmgr);
        c->hostmgr = NULL;
        return;
    }
    if (!(c->hostmgr = hostmgr_start(&c->loop, c->kc, &c->ho, err, sizeof err)))
        fprintf(stderr, "pelotond: hostmgr: %s\n", err);
}

static void placement_term(void *ud, bool leader, long long epoch) {
    struct controllers *c = ud;
    (void)epoch;
    char err[512];
    if (!leader) {
        placement_stop(c->placement);
        c->placement = NULL;
        return;
    }
    struct ctl_env env = c->env;
    env.lease = c->lease_placement; /* its Redis writes are the term's (fenced) */
    if (!(c->placement = placement_start(&env, &c->po, err, sizeof err)))
        fprintf(stderr, "pelotond: placement: %s\n", err);
}

static void mesos_term(void *ud, bool leader, long long epoch) {
    struct controllers *c = ud;
    (void)epoch;
    char err[512];
    if (!leader) {
        if (!c->mesos) return;
        mdrv_stop(c->mesos);
        struct mdrv **r = realloc(c->retired, (size_t)(c->nretired + 1) * sizeof *r);
        if (r) {
            c->retired = r;
            c->retired[c->nretired++] = c->mesos;
        } /* else it leaks: freeing it before the loop is done is not safe */
        c->mesos = NULL;
        return;
    }
    c->mo.lease = c->lease_mesos; /* its Redis write is the term's (fenced) */
    if (!(c->mesos = mdrv_start(&c->loop, c->kc, c->db, &c->mo, err, sizeof err)))
        fprintf(stderr, "pelotond: mesos: %s\n", err);
}

/* Starts the singleton roles: under their leases, or at once without leader election. */
static int start_singletons(struct controllers *c, char *err, size_t errlen) {
    if ((c->roles & ROLE_PLACEMENT) && (!c->leader_elect || c->placement_active_active) &&
        !(c->placement = placement_start(&c->env, &c->po, err, errlen)))
        return -1;
    if (!c->leader_elect) {
        if (c->roles & ROLE_JOBMGR) {
            if (!(c->jobmgr = jobmgr_start(&c->loop, c->kc, &c->jo, err, errlen))) return -1;
            if (!(c->workloads = workloads_start(&c->loop, c->kc, &c->wo, err, errlen))) return -1;
        }
        if ((c->roles & ROLE_HOSTMGR) && !(c->hostmgr = hostmgr_start(&c->loop, c->kc, &c->ho, err, errlen))) return -1;
        if ((c->roles & ROLE_MESOS) && !(c->mesos = mdrv_start(&c->loop, c->kc, c->db, &c->mo, err, errlen))) return -1;
        return 0;
    }
    if ((c->roles & ROLE_PLACEMENT) && !c->placement_active_active) {
        /* made before its first term, which names it */
        if (!(c->lease_placement =
                  ctl_lease_new(&c->loop, c->db, "placement", c->lease_id, c->lease_ms, placement_term, c))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        ctl_lease_metrics(c->lease_placement, c->metrics);
        ctl_lease_begin(c->lease_placement);
    }
    if (((c->roles & ROLE_JOBMGR) &&
         !(c->lease_jobmgr = ctl_lease_start(&c->loop, c->db, "jobmgr", c->lease_id, c->lease_ms, jobmgr_term, c))) ||
        ((c->roles & ROLE_HOSTMGR) &&
         !(c->lease_hostmgr = ctl_lease_start(&c->loop, c->db, "hostmgr", c->lease_id, c->lease_ms, hostmgr_term, c))) ||
        ((c->roles & ROLE_MESOS) &&
         !(c->lease_mesos = ctl_lease_new(&c->loop, c->db, "mesos", c->lease_id, c->lease_ms, mesos_term, c)))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (c->lease_mesos) { /* made before its first term, which names it */
        ctl_lease_metrics(c->lease_mesos, c->metrics);
        ctl_lease_begin(c->lease_mesos);
    }
    return 0;
}

/* The resource manager queued gangs ready: this process's placement looks now if it was idle. */
static void tell_placement(void *ud) { placement_kick(((struct controllers *)ud)->placement); }

/* The controllers could not start: the process stops as on SIGTERM (the
 * main loop's handler stops the API server too) and exits 1, so that a
 * supervisor sees the failure rather than a process serving half its roles. */
static void ctl_failed(struct controllers *c) {
    c->rc = 1;
    fprintf(stderr, "level=error msg=\"pelotond: a role could not start; stopping\"\n");
    kill(getpid(), SIGTERM);
}

static void ctl_main(void *arg) {
    struct controllers *c = arg;
    char err[512];
    struct ctl_env env = {.loop = &c->loop, .identity = "pelotond", .metrics = c->metrics};
    /* the task queues, the framework id, the leases */
    bool need_redis = (c->roles & (ROLE_RESMGR | ROLE_PLACEMENT | ROLE_MESOS)) != 0 ||
                      (c->leader_elect && (c->roles & (ROLE_JOBMGR | ROLE_HOSTMGR)));
    if ((need_redis && !(c->db = ctl_db_open(&c->loop, c->redis_addr, err, sizeof err))) ||
        !(c->kc = kclient_new(&c->loop, &c->kcfg, err, sizeof err))) {
        fprintf(stderr, "pelotond: controllers: %s\n", err);
        ctl_failed(c);
        uv_run(&c->loop, UV_RUN_DEFAULT); /* until stopped */
        ctl_db_close(c->db);
        uv_run(&c->loop, UV_RUN_DEFAULT);
        return;
    }
    env.kc = c->kc;
    env.db = c->db;
    c->env = env;
    if (c->db) {
        c->db->m_replies = c->redis_series[0];
        c->db->m_errors = c->redis_series[1];
    }
    struct resmgr_options ro;
    resmgr_options_default(&ro);
    ro.default_pool = c->default_pool;
    ro.serve_default_scheduler = c->serve_default;
    ro.on_ready = tell_placement; /* this process's own placement, when it runs one */
    ro.on_ready_ud = c;
    ro.round_ms = c->round_ms ? c->round_ms : ro.round_ms;
    ro.gang_wait_ms = c->gang_wait_ms ? c->gang_wait_ms : ro.gang_wait_ms;
    ro.ready_timeout_ms = c->ready_timeout_ms ? c->ready_timeout_ms : ro.ready_timeout_ms;
    placement_options_default(&c->po);
    c->po.tick_ms = c->tick_ms ? c->tick_ms : c->po.tick_ms;
    c->po.retry_max_ms = c->retry_max_ms ? c->retry_max_ms : c->po.retry_max_ms;
    c->po.claims = c->placement_active_active; /* engines side by side claim capacity before binding */
    if (c->lease_ms) ro.lease_ms = c->lease_ms;
    jobmgr_options_default(&c->jo);
    if (c->backoff_ms) c->jo.backoff_ms = c->backoff_ms;
    if (c->backoff_max_ms) c->jo.backoff_max_ms = c->backoff_max_ms;
    c->jo.metrics = c->metrics;
    c->wo = (struct workloads_options){.default_pool = c->default_pool};
    hostmgr_options_default(&c->ho);
    c->ho.metrics = c->metrics;
    if (c->mass_fraction > 0) c->ho.mass_fraction = c->mass_fraction;
    if (c->mass_min_nodes) c->ho.mass_min_nodes = c->mass_min_nodes;
    mdrv_options_default(&c->mo);
    c->mo.master = c->mesos_master;
    c->mo.metrics = c->metrics;
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = (uint32_t)uv_hrtime();
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    snprintf(c->lease_id, sizeof c->lease_id, "%s-%ld-%08x", host[0] ? host : "pelotond", (long)getpid(), rnd);
    if (((c->roles & ROLE_RESMGR) && !(c->resmgr = resmgr_start(&env, &ro, err, sizeof err))) ||
        start_singletons(c, err, sizeof err) ||
        ((c->roles & ROLE_EXTENDER) && start_extender(c, err, sizeof err)) ||
        ((c->roles & ROLE_NATIVE) && start_native(c, err, sizeof err))) {
        fprintf(stderr, "pelotond: %s\n", err);
        ctl_stop_roles(&c->stop);
        ctl_failed(c);
    } else {
        fprintf(stderr, "level=info msg=\"controllers running\" api=%s%s redis=%s\n",
                c->kcfg.unix_socket ? "unix://" : c->kcfg.server, c->kcfg.unix_socket ? c->kcfg.unix_socket : "",
                c->redis_addr);
    }
    uv_run(&c->loop, UV_RUN_DEFAULT);
    extender_srv_free(c->extender);
    native_api_free(c->native);
    native_authz_free(c->native_authz);
    if (c->native_ssl) SSL_CTX_free(c->native_ssl);
    mdrv_free(c->mesos);
    for (int i = 0; i < c->nretired; i++) mdrv_free(c->retired[i]);
    free(c->retired);
    ctl_db_close(c->db);            /* what the roles deferred reaches Redis */
    uv_run(&c->loop, UV_RUN_DEFAULT); /* its handle closes */
}

static int ctl_start(struct controllers *c) {
    if (uv_loop_init(&c->loop) || uv_async_init(&c->loop, &c->stop, ctl_stop_roles)) return -1;
    c->stop.data = c;
    return uv_thread_create(&c->thread, ctl_main, c);
}

static void ctl_join(struct controllers *c) {
    uv_async_send(&c->stop);
    uv_thread_join(&c->thread);
    uv_loop_close(&c->loop);
}

static void on_signal(uv_signal_t *h, int signum) {
    struct daemon *d = h->data;
    fprintf(stderr, "level=info msg=stopping signal=%d\n", signum);
    if (d->ctl) { /* controllers first: they are clients of the API server */
        ctl_join(d->ctl);
        d->ctl = NULL;
    }
    if (d->http) http_server_stop(d->http);
    if (d->https) http_server_stop(d->https);
    if (d->metrics_http) http_server_stop(d->metrics_http);
    if (d->ast) { /* no request can come any more: the write connection goes too */
        shim_detach_async(d->shim);
        store_async_close(d->ast);
        d->ast = NULL;
    }
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
}

/* SIGINT and SIGTERM stop the daemon cleanly (on_signal). */
static void signals_start(struct daemon *d) {
    uv_signal_init(d->loop, &d->sigint);
    uv_signal_init(d->loop, &d->sigterm);
    d->sigint.data = d->sigterm.data = d;
    uv_signal_start(&d->sigint, on_signal, SIGINT);
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
}

static unsigned parse_roles(const char *s) {
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"all", ROLE_ALL},        {"apiserver", ROLE_API}, {"resmgr", ROLE_RESMGR},
                 {"placement", ROLE_PLACEMENT}, {"jobmgr", ROLE_JOBMGR}, {"hostmgr", ROLE_HOSTMGR},
                 {"extender", ROLE_EXTENDER}, {"native", ROLE_NATIVE}, {"mesos", ROLE_MESOS}};
    unsigned roles = 0;
    while (*s) {
        size_t n = strcspn(s, ",");
        unsigned bit = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == n && !strncmp(s, names[i].name, n)) bit = names[i].bit;
        if (!bit) {
            fprintf(stderr, "pelotond: unknown role \"%.*s\" (apiserver, resmgr, placement, jobmgr, hostmgr, mesos, native, extender, all)\n",
                    (int)n, s);
            return 0;
        }
        roles |= bit;
        s += n + (s[n] == ',');
    }
    return roles;
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

static int usage(void);

/* 32 random bytes in hex (malloc'd), or NULL. */
static char *internal_token(void) {
    unsigned char b[32];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) return NULL;
    char *t = malloc(2 * sizeof b + 1);
    for (size_t i = 0; t && i < sizeof b; i++) snprintf(t + 2 * i, 3, "%02x", b[i]);
    explicit_bzero(b, sizeof b);
    return t;
}

/* GET /metrics on the listener of a controller-only process: the registry's
 * text, behind the bearer token of --token-file when one is given (the
 * same token the API server asks for). */
struct metrics_listener {
    struct metrics *reg;
    char *token;
};

static void serve_metrics(void *ud, const struct http_request *req, struct http_response *resp) {
    struct metrics_listener *ml = ud;
    resp->content_type = "text/plain; charset=utf-8";
    if (strcmp(req->path, "/metrics") != 0) {
        resp->status = 404;
        return;
    }
    if (ml->token) { /* "Bearer TOKEN", compared in a time that does not depend on where it differs */
        const char *a = req->authorization;
        size_t n = strlen(ml->token);
        bool bad = strncasecmp(a, "bearer ", 7) || strlen(a + 7) != n;
        unsigned char diff = 0;
        for (size_t i = 0; !bad && i < n; i++) diff |= (unsigned char)(a[7 + i] ^ ml->token[i]);
        if (bad || diff) {
            resp->status = 401;
            return;
        }
    }
    if (metrics_render(ml->reg, &resp->body, &resp->body_len)) {
        resp->status = 500;
        return;
    }
    resp->content_type = METRICS_CONTENT_TYPE;
}

/* Controller roles without the API server in this process: a client of the
 * one at --server or in --kubeconfig. */
static int run_controllers_only(struct controllers *cp, const char *server, const char *kubeconfig,
                                const char *token_file, int metrics_port, const char *port_file) {
    struct controllers c = *cp;
    char err[512];
    if (!server && !kubeconfig) {
        fprintf(stderr, "pelotond: roles without apiserver need --server=URL or --kubeconfig=F\n");
        return 2;
    }
    if (server ? kc_config_from_url(server, token_file, &c.kcfg, err, sizeof err)
               : kc_config_load(kubeconfig, NULL, &c.kcfg, err, sizeof err)) {
        fprintf(stderr, "pelotond: %s\n", err);
        return 1;
    }
    struct daemon d = {.loop = uv_default_loop(), .ctl = &c};
    struct metrics_listener ml = {.reg = c.metrics};
    if (metrics_port >= 0) {
        if (token_file && !(ml.token = read_token(token_file))) {
            fprintf(stderr, "pelotond: cannot read a token from %s\n", token_file);
            kc_config_free(&c.kcfg);
            return 1;
        }
        struct http_server_config mcfg = {.bind_addr = "127.0.0.1", .port = metrics_port, .handler = serve_metrics,
                                          .ud = &ml};
        if (http_server_start(d.loop, &mcfg, &d.metrics_http, err, sizeof err)) {
            fprintf(stderr, "pelotond: --metrics-port: %s\n", err);
            free(ml.token);
            kc_config_free(&c.kcfg);
            return 1;
        }
        fprintf(stderr, "level=info msg=\"serving metrics\" url=http://127.0.0.1:%d/metrics auth=%s\n",
                http_server_port(d.metrics_http), ml.token ? "token" : "none");
        if (port_file) {
            FILE *f = fopen(port_file, "w");
            if (f) {
                fprintf(f, "%d\n", http_server_port(d.metrics_http));
                fclose(f);
            }
        }
    }
    if (ctl_start(&c)) {
        http_server_free(d.metrics_http);
        free(ml.token);
        kc_config_free(&c.kcfg);
        return 1;
    }
    signals_start(&d);
    uv_run(d.loop, UV_RUN_DEFAULT);
    if (d.ctl) ctl_join(d.ctl);
    if (d.metrics_http) {
        uv_run(d.loop, UV_RUN_DEFAULT);
        http_server_free(d.metrics_http);
    }
    free(ml.token);
    uv_loop_close(d.loop);
    kc_config_free(&c.kcfg);
    fprintf(stderr, "level=info msg=stopped\n");
    return c.rc;
}

static int usage(void) {
    fprintf(stderr, "usage: pelotond [--roles=all|apiserver,resmgr,placement,jobmgr,hostmgr,native,extender] "
                    "[--native-port=5392 | --native-daemon-ports[=jobmgr=N,jobmgr-http=N,...]] "
                    "[--native-bind=127.0.0.1] [--native-tls] "
                    "[--extender-port=8888] [--extender-prefix=/peloton] "
                    "[--server=URL | --kubeconfig=F] [--default-pool=NAME] [--scheduler-default=true|false] "
                    "[--bind=ADDR] [--port=N] [--port-file=F] [--unix-socket=/PATH] "
                    "[--redis=HOST:PORT|unix:///PATH | --redis-sentinel=H:P,H:P,... [--redis-master-name=peloton]] [--redis-wait-replicas=N] [--redis-wait-timeout-ms=1000] [--token-file=F] [--history-max=N] [--history-seconds=N] [--watch-poll-ms=N] "
                    "[--watch-bookmark-ms=N] [--list-page-bytes=N] [--crds=DIR] [--tls-port=N] [--tls-dir=DIR] "
                    "[--admission-round-ms=N] [--placement-tick-ms=N] [--placement-retry-max-ms=5000] "
                    "[--http-idle-timeout-ms=N] "
                    "[--restart-backoff-ms=N] [--restart-backoff-max-ms=N] "
                    "[--gang-wait-event-ms=N] [--ready-timeout-ms=30000] [--mesos-master=URL] [--metrics-port=N] [--metrics=false] "
                    "[--events=false] [--event-ttl=1h0m0s] [--leader-elect=true|false] [--lease-ms=10000] [--placement-active-active] "
                    "[--hostmgr-mass-fraction=0.55] [--hostmgr-mass-min-nodes=3] "
                    "[--tls-cert=PEM --tls-key=PEM] [--client-ca-file=PEM] [--insecure-allow-anonymous] "
                    "[--audit-log-path=F] [--audit-log-maxsize=MB | --audit-log-maxbytes=N] [--audit-log-maxbackup=N] "
                    "[--max-requests-per-user=N|none] [--max-request-burst-per-user=N] [--max-watches-per-user=N|none] "
                    "[--list-memory-mb=2048|none]\n");
    return 2;
}

/* A per-user limit's value: a count, or "none" (no limit); 0 or junk keeps the default. */
static unsigned limit_arg(const char *v) {
    if (!strcmp(v, "none")) return UINT32_MAX;
    long n = atol(v);
    return n > 0 && n < (long)UINT32_MAX ? (unsigned)n : 0;
}

static int run(int argc, char **argv, struct metrics *reg) {
    /* A peer that closes early (a client leaving a large list, Redis dying
     * under a Unix-domain socket) must cost an EPIPE on that write, not the
     * process: libuv, hiredis and libcurl write with plain write(). */
    signal(SIGPIPE, SIG_IGN);
    const char *server = NULL, *kubeconfig = NULL, *default_pool = NULL, *sched_default = "true";
    const char *ext_prefix = NULL, *mesos_master = NULL;
    int ext_port = EXT_DEFAULT_PORT, native_port = -1;
    const char *sentinels = NULL, *master_name = "peloton"; /* Redis behind Sentinel (store.h) */
    int wait_replicas = 0, wait_timeout_ms = 0;             /* acknowledged writes on replicas (store_options) */
    const char *native_bind = NULL;
    bool native_tls = false;
    struct native_ports native_ports = {0};
    const char *bind = "127.0.0.1", *roles = "all", *redis = "127.0.0.1:6379", *token_file = NULL,
               *port_file = NULL, *unix_path = NULL, *crds = "crds", *tls_dir = ".peloton-tls", *tls_cert = NULL,
               *tls_key = NULL;
    const char *client_ca = NULL;
    struct shim_sec_config sec_cfg = {0}; /* authentication, RBAC and audit (docs/security.md) */
    int tls_port = -1;
    double mass_fraction = 0.55; /* hostmgr: evictions pause while this share of the nodes lapsed at once */
    long mass_min_nodes = 3;     /* ... and at least this many */
    int metrics_port = -1; /* controller-only: serve /metrics on this port (0: a free one) */
    bool metrics_off = false, events_off = false;
    const char *event_ttl = "1h"; /* kube-apiserver's --event-ttl and its default */
    int port = 6080;
    long history_max = 0, history_seconds = -1;
    long long list_page_bytes = 0;
    size_t list_memory = 0; /* the shim's default */
    long idle_ms = 0; /* 0: the HTTP layer's default (server.h) */
    unsigned poll_ms = 0, bookmark_ms = 0, round_ms = 0, tick_ms = 0, backoff_ms = 0, backoff_max_ms = 0,
             gang_wait_ms = 0, lease_ms = 0, ready_timeout_ms = 0, retry_max_ms = 0;
    bool leader_elect = true; /* the singleton roles under leases (ctl_lease.h) */
    bool placement_aa = false; /* placement in every process without a lease */
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = opt(argv[i], "--roles"))) roles = v;
        else if ((v = opt(argv[i], "--server"))) server = v;
        else if ((v = opt(argv[i], "--kubeconfig"))) kubeconfig = v;
        else if ((v = opt(argv[i], "--default-pool"))) default_pool = v;
        else if ((v = opt(argv[i], "--scheduler-default"))) sched_default = v;
        else if ((v = opt(argv[i], "--extender-port"))) ext_port = atoi(v);
        else if ((v = opt(argv[i], "--extender-prefix"))) ext_prefix = v;
        else if ((v = opt(argv[i], "--native-port"))) native_port = atoi(v);
        else if ((v = opt(argv[i], "--native-bind"))) native_bind = v;
        else if (!strcmp(argv[i], "--native-tls")) native_tls = true;
        else if (!strcmp(argv[i], "--native-daemon-ports") || (v = opt(argv[i], "--native-daemon-ports"))) {
            if (parse_daemon_ports(!strcmp(argv[i], "--native-daemon-ports") ? NULL : v, &native_ports)) {
                fprintf(stderr, "pelotond: --native-daemon-ports takes jobmgr=N,jobmgr-http=N,resmgr=N,resmgr-http=N,"
                                "hostmgr=N,hostmgr-http=N (each optional; Peloton's ports by default)\n");
                return 2;
            }
        }
        else if ((v = opt(argv[i], "--bind"))) bind = v;
        else if ((v = opt(argv[i], "--port"))) port = atoi(v);
        else if ((v = opt(argv[i], "--port-file"))) port_file = v;
        else if ((v = opt(argv[i], "--unix-socket"))) unix_path = v;
        else if ((v = opt(argv[i], "--redis"))) redis = v;
        else if ((v = opt(argv[i], "--redis-sentinel"))) sentinels = v;
        else if ((v = opt(argv[i], "--redis-master-name"))) master_name = v;
        else if ((v = opt(argv[i], "--redis-wait-replicas"))) wait_replicas = atoi(v);
        else if ((v = opt(argv[i], "--redis-wait-timeout-ms"))) wait_timeout_ms = atoi(v);
        else if ((v = opt(argv[i], "--token-file"))) token_file = v;
        else if ((v = opt(argv[i], "--client-ca-file"))) client_ca = v;
        else if (!strcmp(argv[i], "--insecure-allow-anonymous") || (v = opt(argv[i], "--insecure-allow-anonymous")))
            sec_cfg.allow_anonymous = !v || !strcmp(v, "true");
        else if ((v = opt(argv[i], "--audit-log-path"))) sec_cfg.audit.path = v;
        else if ((v = opt(argv[i], "--audit-log-maxsize"))) sec_cfg.audit.max_bytes = (size_t)atoll(v) << 20;
        else if ((v = opt(argv[i], "--audit-log-maxbytes"))) sec_cfg.audit.max_bytes = (size_t)atoll(v);
        else if ((v = opt(argv[i], "--audit-log-maxbackup"))) sec_cfg.audit.max_backups = atoi(v);
        else if ((v = opt(argv[i], "--max-requests-per-user"))) sec_cfg.limits.qps = limit_arg(v);
        else if ((v = opt(argv[i], "--max-request-burst-per-user"))) sec_cfg.limits.burst = limit_arg(v);
        else if ((v = opt(argv[i], "--max-watches-per-user"))) sec_cfg.limits.watches = limit_arg(v);
        else if ((v = opt(argv[i], "--history-max"))) history_max = atol(v);
        else if ((v = opt(argv[i], "--history-seconds"))) history_seconds = atol(v);
        else if ((v = opt(argv[i], "--list-page-bytes"))) list_page_bytes = atoll(v);
        else if ((v = opt(argv[i], "--list-memory-mb"))) {
            long long mb = strcmp(v, "none") ? atoll(v) : -1;
            if (!mb || mb < -1 || mb > (1ll << 30)) {
                fprintf(stderr, "pelotond: --list-memory-mb takes 1 to 1073741824, or none\n");
                return 2;
            }
            list_memory = mb < 0 ? SIZE_MAX : (size_t)mb << 20;
        }
        else if ((v = opt(argv[i], "--watch-poll-ms"))) poll_ms = (unsigned)atoi(v);
        else if ((v = opt(argv[i], "--watch-bookmark-ms"))) bookmark_ms = (unsigned)atoi(v);
        else if ((v = opt(argv[i], "--admission-round-ms"))) round_ms = atoi(v) > 0 ? (unsigned)atoi(v) : 600001;
        else if ((v = opt(argv[i], "--placement-tick-ms"))) tick_ms = atoi(v) > 0 ? (unsigned)atoi(v) : 600001;
        else if ((v = opt(argv[i], "--placement-retry-max-ms")))
            retry_max_ms = atoi(v) > 0 ? (unsigned)atoi(v) : 600001;
        else if ((v = opt(argv[i], "--http-idle-timeout-ms"))) idle_ms = atol(v) > 0 ? atol(v) : -1;
        else if ((v = opt(argv[i], "--restart-backoff-ms"))) backoff_ms = atoi(v) > 0 ? (unsigned)atoi(v) : 3600001;
        else if ((v = opt(argv[i], "--restart-backoff-max-ms")))
            backoff_max_ms = atoi(v) > 0 ? (unsigned)atoi(v) : 3600001;
        else if ((v = opt(argv[i], "--leader-elect"))) leader_elect = strcmp(v, "false") != 0;
        else if (!strcmp(argv[i], "--placement-active-active")) placement_aa = true;
        else if ((v = opt(argv[i], "--lease-ms"))) lease_ms = atoi(v) >= 300 ? (unsigned)atoi(v) : 0;
        else if ((v = opt(argv[i], "--gang-wait-event-ms"))) gang_wait_ms = atoi(v) > 0 ? (unsigned)atoi(v) : 600001;
        else if ((v = opt(argv[i], "--ready-timeout-ms"))) ready_timeout_ms = atoi(v) > 0 ? (unsigned)atoi(v) : 600001;
        else if ((v = opt(argv[i], "--mesos-master"))) mesos_master = v;
        else if ((v = opt(argv[i], "--hostmgr-mass-fraction"))) mass_fraction = atof(v);
        else if ((v = opt(argv[i], "--hostmgr-mass-min-nodes"))) mass_min_nodes = atol(v);
        else if ((v = opt(argv[i], "--crds"))) crds = v;
        else if ((v = opt(argv[i], "--metrics-port"))) metrics_port = atoi(v);
        else if ((v = opt(argv[i], "--metrics"))) metrics_off = !strcmp(v, "false");
        else if ((v = opt(argv[i], "--events"))) events_off = !strcmp(v, "false");
        else if ((v = opt(argv[i], "--event-ttl"))) event_ttl = v;
        else if ((v = opt(argv[i], "--tls-port"))) tls_port = atoi(v);
        else if ((v = opt(argv[i], "--tls-dir"))) tls_dir = v;
        else if ((v = opt(argv[i], "--tls-cert"))) tls_cert = v;
        else if ((v = opt(argv[i], "--tls-key"))) tls_key = v;
        else return usage();
    }
    /* benchmarks (docs/metrics.md): no metrics kept (/metrics is 404), no Events posted by the roles */
    if (metrics_off) reg = NULL;
    if (events_off) ctl_events_disable();
    int64_t event_ttl_ns = 0;
    if (!ktime_parse_duration(event_ttl, &event_ttl_ns) || event_ttl_ns < 0) {
        fprintf(stderr, "pelotond: --event-ttl takes a duration such as 1h, 30m or 1h0m0s (0: Events are kept)\n");
        return 2;
    }
    if (list_page_bytes < 0 || list_page_bytes > API_LIST_PAGE_BYTES) {
        fprintf(stderr, "pelotond: --list-page-bytes takes 1 to %u (what every client buffers)\n", API_LIST_PAGE_BYTES);
        return 2;
    }
    if (idle_ms < 0 || idle_ms > 86400000) {
        fprintf(stderr, "pelotond: --http-idle-timeout-ms takes 1 to 86400000\n");
        return 2;
    }
    if (round_ms > 600000 || tick_ms > 600000 || gang_wait_ms > 600000 || ready_timeout_ms > 600000 ||
        retry_max_ms > 600000) {
        fprintf(stderr, "pelotond: --admission-round-ms, --placement-tick-ms, --placement-retry-max-ms, "
                        "--gang-wait-event-ms and --ready-timeout-ms take 1 to 600000\n");
        return 2;
    }
    if (backoff_ms > 3600000 || backoff_max_ms > 3600000) {
        fprintf(stderr, "pelotond: --restart-backoff-ms and --restart-backoff-max-ms take 1 to 3600000\n");
        return 2;
    }
    if (!(mass_fraction > 0 && mass_fraction <= 2) || mass_min_nodes < 1 || mass_min_nodes > 1000000) {
        fprintf(stderr, "pelotond: --hostmgr-mass-fraction takes (0, 2] (above 1: never pause) and "
                        "--hostmgr-mass-min-nodes 1 to 1000000\n");
        return 2;
    }
    if (unix_path && (unix_path[0] != '/' || strlen(unix_path) > UNIX_SOCKET_PATH_MAX)) {
        fprintf(stderr, "pelotond: --unix-socket needs an absolute path of at most %zu bytes\n", UNIX_SOCKET_PATH_MAX);
        return 2;
    }
    unsigned role_bits = parse_roles(roles);
    if (!role_bits) return usage();
    if (native_ports.per_daemon && native_port >= 0) {
        fprintf(stderr, "pelotond: --native-port and --native-daemon-ports exclude each other\n");
        return 2;
    }
    if ((tls_cert != NULL) != (tls_key != NULL)) {
        fprintf(stderr, "pelotond: --tls-cert and --tls-key go together\n");
        return 2;
    }
    /* the native ports' TLS: the API's certificate, the operator's or --tls-dir's self-signed one */
    char ncert[4096], nkey[4096];
    snprintf(ncert, sizeof ncert, tls_cert ? "%s" : "%s/apiserver.crt", tls_cert ? tls_cert : tls_dir);
    snprintf(nkey, sizeof nkey, tls_key ? "%s" : "%s/apiserver.key", tls_key ? tls_key : tls_dir);
    if (native_tls && !tls_cert) mkdir(tls_dir, 0700);
    if (mesos_master && (role_bits & ROLE_HOSTMGR)) role_bits |= ROLE_MESOS; /* the host manager's second driver */
    if ((role_bits & ROLE_MESOS) && (!mesos_master || strncmp(mesos_master, "http://", 7))) {
        fprintf(stderr, "pelotond: the mesos role needs --mesos-master=http://HOST:PORT\n");
        return 2;
    }
    if (mesos_master && !(role_bits & ROLE_MESOS)) {
        fprintf(stderr, "pelotond: --mesos-master needs the hostmgr or mesos role\n");
        return 2;
    }
    struct controllers ctl = {.roles = role_bits & ~(unsigned)ROLE_API, .redis_addr = redis,
                              .default_pool = default_pool, .serve_default = strcmp(sched_default, "false") != 0,
                              .extender_port = ext_port, .extender_prefix = ext_prefix, .native_port = native_port,
                              .round_ms = round_ms, .tick_ms = tick_ms, .retry_max_ms = retry_max_ms,
                              .backoff_ms = backoff_ms,
                              .backoff_max_ms = backoff_max_ms, .gang_wait_ms = gang_wait_ms,
                              .ready_timeout_ms = ready_timeout_ms,
                              .mesos_master = mesos_master, .mass_fraction = mass_fraction,
                              .mass_min_nodes = (uint32_t)mass_min_nodes, .leader_elect = leader_elect,
                              .lease_ms = lease_ms, .placement_active_active = placement_aa,
                              .native_bind = native_bind,
                              .native_ports = native_ports, .native_tls = native_tls, .native_cert = ncert,
                              .native_key = nkey, .native_client_ca = client_ca, .native_cert_made = !tls_cert};
    struct metrics_family *redis_replies = NULL, *redis_errors = NULL;
    if (reg) {
        static const char *const client[] = {"client"};
        metrics_collector(reg, metrics_collect_process, NULL);
        redis_replies = metrics_counter(reg, "peloton_redis_replies_total",
                                        "Redis command replies read (a round trip answers one or more), by client.",
                                        1, client);
        redis_errors = metrics_counter(reg, "peloton_redis_errors_total",
                                       "Redis commands without a reply (connection lost) or answered with an error.",
                                       1, client);
        ctl.redis_series[0] = metrics_series1(redis_replies, "controllers");
        ctl.redis_series[1] = metrics_series1(redis_errors, "controllers");
    }
    ctl.metrics = reg;
    if (sentinels) { /* before any connection, any thread */
        char serr[300];
        if (store_sentinel_config(sentinels, master_name, serr, sizeof serr)) {
            fprintf(stderr, "pelotond: --redis-sentinel: %s\n", serr);
            return 2;
        }
    }
    if (!(role_bits & ROLE_API))
        return run_controllers_only(&ctl, server, kubeconfig, token_file, metrics_port, port_file);
    char host[256];
    int redis_port;
    if (store_parse_addr(redis, host, sizeof host, &redis_port)) return usage();
    if (sentinels) {
        char serr[300];
        if (store_sentinel_primary(host, sizeof host, &redis_port, serr, sizeof serr))
            fprintf(stderr, "level=warn msg=\"redis: %s; trying on\"\n", serr);
        else fprintf(stderr, "level=info msg=\"redis: primary from Sentinel\" master=%s addr=%s:%d\n", master_name, host,
                     redis_port);
    }
    /* The controllers in this process reach the API server with a token of
     * their own, made here and never written anywhere (system:masters); the
     * token file's users are the API's clients (docs/security.md). */
    char *token = internal_token();
    if (!token) {
        fprintf(stderr, "pelotond: cannot make the internal token\n");
        return 1;
    }

    struct store *st;
    struct store_options so;
    store_options_init(&so);
    if (history_max > 0) so.history_max = history_max;
    if (history_seconds >= 0) so.history_seconds = history_seconds;
    so.wait_replicas = wait_replicas;
    so.wait_timeout_ms = wait_timeout_ms;
    if (store_open(host, redis_port, &so, &st)) {
        fprintf(stderr, "pelotond: cannot reach redis at %s\n", redis);
        free(token);
        return 1;
    }
    struct daemon d = {.loop = uv_default_loop()};
    struct store_async *ast = NULL; /* the pipelined connection for the hot writes */
    if (store_async_open(d.loop, host, redis_port, &so, &ast)) {
        fprintf(stderr, "pelotond: cannot open the asynchronous redis connection to %s\n", redis);
        store_close(st);
        free(token);
        return 1;
    }
    store_set_metrics(st, metrics_series1(redis_replies, "apiserver"), metrics_series1(redis_errors, "apiserver"));
    store_async_set_metrics(ast, metrics_series1(redis_replies, "apiserver_async"),
                            metrics_series1(redis_errors, "apiserver_async"));
    char serr[512] = "";
    sec_cfg.token_file = token_file;
    sec_cfg.internal_token = token;
    struct shim_sec *sec = shim_sec_new(&sec_cfg, d.loop, serr, sizeof serr);
    if (!sec) {
        fprintf(stderr, "pelotond: %s\n", serr);
        store_async_close(ast);
        store_close(st);
        free(token);
        return 1;
    }
    if (!token_file && !client_ca && !sec_cfg.allow_anonymous)
        fprintf(stderr, "level=warn msg=\"no --token-file, --client-ca-file or --insecure-allow-anonymous: every "
                        "request to the API is refused (401) but this process's own\"\n");
    struct shim_config scfg = {.sec = sec, .loop = d.loop, .poll_ms = poll_ms,
                               .metrics = reg,
                               .bookmark_ms = bookmark_ms, .astore = ast, .list_page_bytes = (size_t)list_page_bytes,
                               .list_memory = list_memory,
                               /* whole seconds, a fraction rounded up: Events are never deleted early */
                               .event_ttl_s = event_ttl_ns / 1000000000 + (event_ttl_ns % 1000000000 != 0)};
    struct shim *shim = shim_new(st, &scfg);
    char err[512];
    if (shim && !shim_bootstrap(shim, err, sizeof err)) {
        /* the Peloton CRDs (and any other in the directory); "" skips, a missing default is fine */
        if (crds[0] && shim_crd_install(shim, crds, err, sizeof err) && strcmp(crds, "crds") != 0) {
            fprintf(stderr, "pelotond: %s\n", err);
            shim_free(shim);
            store_async_close(ast);
            store_close(st);
            free(token);
            return 1;
        }
        shim_crd_sync(shim); /* CRDs created through the API earlier */
    } else {
        fprintf(stderr, "pelotond: %s\n", shim ? err : "out of memory");
        shim_free(shim);
        store_async_close(ast);
        store_close(st);
        free(token);
        return 1;
    }
    /* the plain port is for local use: loopback only, whatever --bind says */
    struct http_server_config hcfg = {
        .bind_addr = "127.0.0.1", .port = port, .handler = shim_handle, .ud = shim, .unix_path = unix_path,
        .idle_timeout_ms = (unsigned)idle_ms};
    char cert[4096], key[4096];
    if (tls_port >= 0) {
        if ((tls_cert != NULL) != (tls_key != NULL)) {
            fprintf(stderr, "pelotond: --tls-cert and --tls-key go together\n");
            shim_free(shim);
            store_async_close(ast);
            store_close(st);
            free(token);
            return 2;
        }
        mkdir(tls_dir, 0700);
        /* the operator's certificate, or a self-signed one made on first start */
        snprintf(cert, sizeof cert, tls_cert ? "%s" : "%s/apiserver.crt", tls_cert ? tls_cert : tls_dir);
        snprintf(key, sizeof key, tls_key ? "%s" : "%s/apiserver.key", tls_key ? tls_key : tls_dir);
        struct http_server_config tcfg = {.bind_addr = bind, .port = tls_port, .handler = shim_handle, .ud = shim,
                                          .tls_cert = cert, .tls_key = key, .tls_client_ca = client_ca,
                                          .idle_timeout_ms = (unsigned)idle_ms};
        if ((!tls_cert && tls_cert_ensure(cert, key, err, sizeof err)) ||
            http_server_start(d.loop, &tcfg, &d.https, err, sizeof err)) {
            fprintf(stderr, "pelotond: %s\n", err);
            shim_free(shim);
            store_async_close(ast);
            store_close(st);
            free(token);
            return 1;
        }
    }
    if (http_server_start(d.loop, &hcfg, &d.http, err, sizeof err)) {
        fprintf(stderr, "pelotond: %s\n", err);
        shim_free(shim);
        store_async_close(ast);
        store_close(st);
        free(token);
        return 1;
    }
    d.shim = shim;
    d.ast = ast;
    signals_start(&d);
    int actual = http_server_port(d.http);
    const char *auth = sec_cfg.allow_anonymous ? "anonymous" : token_file ? "token" : "none";
    fprintf(stderr, "level=info msg=serving api=http://127.0.0.1:%d%s%s redis=%s auth=%s\n", actual,
            unix_path ? " unix=" : "", unix_path ? unix_path : "", redis, auth);
    if (d.https)
        fprintf(stderr, "level=info msg=serving api=https://%s:%d cert=%s auth=%s%s\n", bind,
                http_server_port(d.https), cert, auth, client_ca ? ",client-cert" : "");
    if (port_file) { /* "PLAIN [TLS]" */
        FILE *f = fopen(port_file, "w");
        if (f) {
            if (d.https) fprintf(f, "%d %d\n", actual, http_server_port(d.https));
            else fprintf(f, "%d\n", actual);
            fclose(f);
        }
    }
    ctl.roles_with_api = true;
    ctl.token_file = token_file;
    ctl.allow_anonymous = sec_cfg.allow_anonymous;
    if (ctl.roles) {
        char url[160];
        if (unix_path) snprintf(url, sizeof url, "unix://%s", unix_path);
        else snprintf(url, sizeof url, "http://127.0.0.1:%d", actual);
        if (kc_config_from_url(url, NULL, &ctl.kcfg, err, sizeof err)) {
            fprintf(stderr, "pelotond: %s\n", err);
            return 1;
        }
        if (token) ctl.kcfg.token = strdup(token);
        if (ctl_start(&ctl)) {
            fprintf(stderr, "pelotond: cannot start the controller thread\n");
            return 1;
        }
        d.ctl = &ctl;
    }
    uv_run(d.loop, UV_RUN_DEFAULT);
    if (d.ctl) ctl_join(d.ctl);
    if (ctl.roles) kc_config_free(&ctl.kcfg);
    http_server_free(d.http);
    http_server_free(d.https);
    shim_free(shim);                /* closes the watch timer ... */
    store_async_close(d.ast);       /* (closed on the signal already) */
    uv_run(d.loop, UV_RUN_DEFAULT); /* ... which finishes on this turn */
    uv_loop_close(d.loop);
    store_close(st);
    free(token);
    fprintf(stderr, "level=info msg=stopped\n");
    return ctl.roles ? ctl.rc : 0;
}

int main(int argc, char **argv) {
    /* one registry for the process: the API server's families, the roles', the process's */
    struct metrics *reg = metrics_new();
    int rc = run(argc, argv, reg);
    metrics_free(reg);
    return rc;
}
