/* v1alpha peloton.api.v1alpha.respool.ResourcePoolService, answered through
 * the v0 ResourceManager (svc_respool.c) by calls inside the process
 * (native_call_internal): each request is translated to its v0 request and
 * the v0 answer back, so the pool mapping, its validation and its errors are
 * the v0 service's. v0's error members become gRPC statuses (NOT_FOUND,
 * ALREADY_EXISTS, INVALID_ARGUMENT, FAILED_PRECONDITION for a busy pool,
 * INTERNAL). docs/native-api.md, "v1alpha ResourcePoolService".
 *
 * Ownership: nothing is kept; the service struct is empty of borrowed state. */
#ifndef PELOTON_NATIVE_V1_RESPOOL_H
#define PELOTON_NATIVE_V1_RESPOOL_H

#include "native.h"

#define V1_RESPOOL_V0 "peloton.api.respool.ResourceManager" /* the v0 service answering */

int v1_respool_register(struct native_registry *r);

#endif
