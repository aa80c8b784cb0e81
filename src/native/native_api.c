/* The native role: registry, services, server (native_api.h). */
#include "native_api.h"

#include <stdio.h>
#include <stdlib.h>

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

struct native_api {
    struct native_registry reg;
    struct svc_respool *respool;
    struct svc_job *job;
    struct svc_task *task;
    struct svc_host *host;
    struct v1_job *v1job;
    struct v1_watch *v1watch;
    struct v1_pod *v1pod;
    struct native_server *srv;
    struct ncache *cache;
};

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

struct native_api *native_api_start(uv_loop_t *loop, struct kclient *kc, const struct native_config *cfg, char *err,
                                    size_t errlen) {
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
    if (native_server_start(loop, &c, &a->srv, err, errlen)) {
        api_free_parts(a);
        return NULL;
    }
    return a;
}

int native_api_port(const struct native_api *a) { return native_server_port(a->srv); }

void native_api_stop(struct native_api *a) {
    if (!a) return;
    native_server_stop(a->srv);
    ncache_stop(a->cache); /* its informers go before the client */
}

void native_api_free(struct native_api *a) {
    if (!a) return;
    native_server_free(a->srv);
    api_free_parts(a);
}
