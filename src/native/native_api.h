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

#define NATIVE_DEFAULT_PORT 5392 /* Peloton's job manager gRPC port: its clients' default */

struct native_api;
struct native_api *native_api_start(uv_loop_t *loop, struct kclient *kc, const struct native_config *cfg, char *err,
                                    size_t errlen);
int native_api_port(const struct native_api *a);
void native_api_stop(struct native_api *a);
void native_api_free(struct native_api *a);

#endif
