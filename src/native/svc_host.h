/* HostService, v0 ("peloton.api.v0.host.svc.HostService") and v1alpha
 * ("peloton.api.v1alpha.host.svc.HostService"): host maintenance over Node
 * objects, Kubelets' and Mesos agents' alike (docs/native-api.md, "v0
 * HostService"; docs/migration.md).
 *
 * QueryHosts lists the Nodes with their state (svc_host_state);
 * StartMaintenance cordons a Node and annotates it peloton.io/maintenance=
 * draining in one merge patch (the job manager then moves its tasks within
 * each Job's budget, and the host manager marks it "drained");
 * CompleteMaintenance removes the annotation and uncordons. Unknown host:
 * NOT_FOUND; a host in the wrong state: FAILED_PRECONDITION; a missing or
 * malformed name: INVALID_ARGUMENT; a Node changed meanwhile: ABORTED.
 *
 * Ownership: the service borrows kc for its life. */
#ifndef PELOTON_NATIVE_SVC_HOST_H
#define PELOTON_NATIVE_SVC_HOST_H

#include <jansson.h>

#include "kclient.h"
#include "native.h"

/* HostState values (the same numbers in v0 and v1alpha). */
enum svc_host_state {
    SVC_HOST_INVALID = 0,
    SVC_HOST_UNKNOWN = 1,
    SVC_HOST_UP = 2,
    SVC_HOST_DRAINING = 3,
    SVC_HOST_DRAINED = 4,
    SVC_HOST_DOWN = 5,
};

/* A Node's state: annotation peloton.io/maintenance "draining" DRAINING;
 * "drained" DRAINED while Ready, DOWN when not; no maintenance: UP while
 * Ready (or before any condition), UNKNOWN when Ready is False or Unknown.
 * A cordon without maintenance is UP. */
enum svc_host_state svc_host_state(const json_t *node);

struct svc_host;
struct svc_host *svc_host_new(struct kclient *kc);
void svc_host_free(struct svc_host *s);
int svc_host_register(struct svc_host *s, struct native_registry *r);

#endif
