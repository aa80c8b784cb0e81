/* The native role: registry, services, server (native_api.h). */
#include "native_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ncache.h"
#include "svc_host.h"
#include "svc_job.h"
#include "svc_respool.h"
#include "svc_task.h"
#include "svc_update.h"
#include "v1_job.h"
#include "v1_pod.h"
#include "v1_respool.h"
#include "v1_watch.h"

struct native_api;
struct daemon_route {
    struct native_api *a;
    enum native_daemon d;
};

struct native_api {
    struct native_registry reg;
    struct svc_respool *respool;
    struct svc_job *job;
    struct svc_task *task;
    struct svc_host *host;
    struct v1_job *v1job;
    struct v1_watch *v1watch;
    struct v1_pod *v1pod;
    struct native_server *srv; /* one port for all */
    struct ncache *cache;
    /* per-daemon ports: [daemon][0] gRPC, [daemon][1] YARPC */
    struct native_server *dsrv[NATIVE_DAEMONS][2];
    char elsewhere[NATIVE_DAEMONS][128]; /* "ask resmgr: gRPC port 5394, YARPC HTTP port 5290" */
    struct daemon_route route[NATIVE_DAEMONS];
};

const int native_default_grpc_port[NATIVE_DAEMONS] = {5392, 5394, 5391};
const int native_default_http_port[NATIVE_DAEMONS] = {5292, 5290, 5291};

const char *native_daemon_name(enum native_daemon d) {
    static const char *names[] = {"jobmgr", "resmgr", "hostmgr"};
    return (unsigned)d < NATIVE_DAEMONS ? names[d] : "?";
}

/* Which Peloton daemon served each service. */
static const struct {
    const char *service;
    enum native_daemon d;
} routes[] = {
    {"peloton.api.job.JobManager", NATIVE_JOBMGR},
    {"peloton.api.v0.job.JobManager", NATIVE_JOBMGR},
    {"peloton.api.task.TaskManager", NATIVE_JOBMGR},
    {"peloton.api.v0.task.TaskManager", NATIVE_JOBMGR},
    {"peloton.api.v0.update.svc.UpdateService", NATIVE_JOBMGR},
    {"peloton.api.v1alpha.job.stateless.svc.JobService", NATIVE_JOBMGR},
    {"peloton.api.v1alpha.pod.svc.PodService", NATIVE_JOBMGR},
    {"peloton.api.v1alpha.watch.svc.WatchService", NATIVE_JOBMGR},
    {"peloton.api.respool.ResourceManager", NATIVE_RESMGR},
    {"peloton.api.v0.respool.ResourceManager", NATIVE_RESMGR},
    {"peloton.api.v1alpha.respool.ResourcePoolService", NATIVE_RESMGR},
    {"peloton.api.v0.host.svc.HostService", NATIVE_HOSTMGR},
    {"peloton.api.v1alpha.host.svc.HostService", NATIVE_HOSTMGR},
};

int native_daemon_of(const char *service) {
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(routes[i].service, service)) return (int)routes[i].d;
    return -1;
}

void native_ports_peloton(struct native_ports *p) {
    p->per_daemon = true;
    for (int d = 0; d < NATIVE_DAEMONS; d++) {
        p->grpc[d] = native_default_grpc_port[d];
        p->http[d] = native_default_http_port[d];
    }
}

/* The route of one daemon's ports (native_config.route): NULL for its own
 * services, else where the service is. */
static const char *route_of(void *ud, const char *service) {
    const struct daemon_route *r = ud;
    int d = native_daemon_of(service);
    if (d < 0) return "no Peloton daemon serves it";
    return d == (int)r->d ? NULL : r->a->elsewhere[d];
}

static void api_free_parts(struct native_api *a) {
    svc_respool_free(a->respool);
    svc_job_free(a->job);
    svc_task_free(a->task);
    svc_host_free(a->host);
    v1_job_free(a->v1job);
    v1_watch_free(a->v1watch);
    v1_pod_free(a->v1pod);
    native_registry_free(&a->reg);
    ncache_free(a->cache);
    free(a);
}

struct native_api *native_api_start(uv_loop_t *loop, struct kclient *kc, const struct native_config *cfg,
                                    const struct native_ports *ports, char *err, size_t errlen) {
    struct native_api *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "native: out of memory");
        return NULL;
    }
    native_registry_init(&a->reg);
    if (!(a->respool = svc_respool_new(kc)) || svc_respool_register(a->respool, &a->reg) ||
        !(a->job = svc_job_new(kc)) || svc_job_register(a->job, &a->reg) || !(a->task = svc_task_new(kc)) ||
        svc_task_register(a->task, &a->reg) || svc_update_register(kc, &a->reg) || !(a->host = svc_host_new(kc)) ||
        svc_host_register(a->host, &a->reg) || !(a->v1job = v1_job_new(kc)) ||
        v1_job_register(a->v1job, &a->reg) || !(a->v1watch = v1_watch_new(kc)) ||
        v1_watch_register(a->v1watch, &a->reg) || !(a->v1pod = v1_pod_new(kc)) ||
        v1_pod_register(a->v1pod, &a->reg) || v1_respool_register(&a->reg) || !(a->cache = ncache_new(kc))) {
        snprintf(err, errlen, "native: out of memory");
        api_free_parts(a);
        return NULL;
    }
    struct native_config c = *cfg;
    c.registry = &a->reg;
    c.app = a->cache;
    if (!ports || !ports->per_daemon) {
        if (native_server_start(loop, &c, &a->srv, err, errlen)) {
            api_free_parts(a);
            return NULL;
        }
        return a;
    }
    size_t pos = 0;
    const char *key;
    void *val;
    while (strmap_next(&a->reg.by_path, &pos, &key, &val)) { /* a service added without its daemon in routes[] */
        char service[512];
        snprintf(service, sizeof service, "%.*s", (int)strcspn(key, "/"), key);
        if (native_daemon_of(service) < 0) {
            snprintf(err, errlen, "native: %s has no daemon for --native-daemon-ports (native_api.c routes)", service);
            api_free_parts(a);
            return NULL;
        }
    }
    for (int d = 0; d < NATIVE_DAEMONS; d++) {
        a->route[d] = (struct daemon_route){.a = a, .d = (enum native_daemon)d};
        for (int k = 0; k < 2; k++) {
            c.port = k ? ports->http[d] : ports->grpc[d];
            c.serve = k ? NATIVE_SERVE_YARPC : NATIVE_SERVE_BOTH; /* the CLI's YARPC calls go to the gRPC ports too */
            c.route = route_of;
            c.route_ud = &a->route[d];
            if (native_server_start(loop, &c, &a->dsrv[d][k], err, errlen)) {
                for (int e = 0; e < NATIVE_DAEMONS; e++) /* the ports opened so far close; the loop frees them */
                    for (int j = 0; j < 2; j++)
                        if (a->dsrv[e][j]) native_server_discard(a->dsrv[e][j]);
                api_free_parts(a);
                return NULL;
            }
        }
    }
    for (int d = 0; d < NATIVE_DAEMONS; d++) /* the ports as bound (a port 0 was a free one) */
        snprintf(a->elsewhere[d], sizeof a->elsewhere[d], "ask %s: gRPC port %d, YARPC HTTP port %d",
                 native_daemon_name((enum native_daemon)d), native_server_port(a->dsrv[d][0]),
                 native_server_port(a->dsrv[d][1]));
    return a;
}

int native_api_port(const struct native_api *a) { return native_api_daemon_port(a, NATIVE_JOBMGR, true); }

int native_api_daemon_port(const struct native_api *a, enum native_daemon d, bool grpc) {
    if (a->srv) return native_server_port(a->srv);
    return (unsigned)d < NATIVE_DAEMONS && a->dsrv[d][!grpc] ? native_server_port(a->dsrv[d][!grpc]) : -1;
}

void native_api_stop(struct native_api *a) {
    if (!a) return;
    if (a->srv) native_server_stop(a->srv);
    for (int d = 0; d < NATIVE_DAEMONS; d++)
        for (int k = 0; k < 2; k++)
            if (a->dsrv[d][k]) native_server_stop(a->dsrv[d][k]);
    ncache_stop(a->cache); /* its informers go before the client */
}

void native_api_free(struct native_api *a) {
    if (!a) return;
    native_server_free(a->srv);
    for (int d = 0; d < NATIVE_DAEMONS; d++)
        for (int k = 0; k < 2; k++) native_server_free(a->dsrv[d][k]);
    api_free_parts(a);
}
