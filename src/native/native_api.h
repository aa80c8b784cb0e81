/* The pelotond role "native": the native API server with every service
 * this project serves (svc_*.h) in one registry, on a loop with an API
 * client (kclient) the caller owns. docs/native-api.md lists the services.
 *
 * Ownership: native_api_start borrows loop and kc for the role's life. To
 * end it: native_api_stop on the loop thread (no new calls; calls in flight
 * finish unheard), let the loop run dry, then native_api_free. */
#ifndef PELOTON_NATIVE_API_H
#define PELOTON_NATIVE_API_H

#include "kclient.h"
#include "native.h"

#include <stdbool.h>

#define NATIVE_DEFAULT_PORT 5392 /* Peloton's job manager gRPC port: its clients' default */

/* Peloton ran one daemon per service group, each with a gRPC and a YARPC
 * HTTP port; with per-daemon ports (struct native_ports) the role opens the
 * six, each serving its daemon's services (native_daemon_of), and a service
 * asked on another daemon's port gets UNIMPLEMENTED naming the right one. */
enum native_daemon { NATIVE_JOBMGR = 0, NATIVE_RESMGR, NATIVE_HOSTMGR, NATIVE_DAEMONS };
extern const int native_default_grpc_port[NATIVE_DAEMONS]; /* 5392, 5394, 5391 */
extern const int native_default_http_port[NATIVE_DAEMONS]; /* 5292, 5290, 5291 */
/* "jobmgr", "resmgr", "hostmgr" */
const char *native_daemon_name(enum native_daemon d);
/* The daemon serving service ("peloton.api.v0.job.JobManager"), or -1 for one not known. */
int native_daemon_of(const char *service);

struct native_ports {
    bool per_daemon; /* false: every service on cfg->port, both transports */
    /* per daemon: the gRPC port (YARPC HTTP/1.1 too) and the YARPC HTTP port (HTTP/1.1 only); 0 a free one */
    int grpc[NATIVE_DAEMONS], http[NATIVE_DAEMONS];
};
/* Peloton's ports: per_daemon with native_default_grpc_port/_http_port. */
void native_ports_peloton(struct native_ports *p);

struct native_api;
/* ports NULL: one port (cfg->port). With per-daemon ports, cfg->port and
 * cfg->serve/route are not used. */
struct native_api *native_api_start(uv_loop_t *loop, struct kclient *kc, const struct native_config *cfg,
                                    const struct native_ports *ports, char *err, size_t errlen);
/* The port of the single listener, or of the job manager's gRPC one. */
int native_api_port(const struct native_api *a);
/* A daemon's gRPC (grpc true) or YARPC port; with one port, that port. */
int native_api_daemon_port(const struct native_api *a, enum native_daemon d, bool grpc);
void native_api_stop(struct native_api *a);
void native_api_free(struct native_api *a);

#endif
