/* v0 peloton.api.respool.ResourceManager served over the object model: every
 * call becomes requests for ResourcePool objects
 * (resourcepools.peloton.io/v1alpha1) to the Kubernetes API (kclient), so the
 * API server's validation (the core's pool rules) applies and nothing is
 * kept here. Mapping (docs/native-api.md): a pool's ResourcePoolID is its
 * object's name, the root is "root" (path "/"); cpu and gpu in cores, memory
 * and disk in MB (2^20 bytes) <-> quantities; a kind without a limit of its
 * own reads as limit Infinity, and Infinity written sets none.
 *
 * Registered under the wire name Peloton's clients send
 * ("peloton.api.respool.ResourceManager") and the proto's package name
 * ("peloton.api.v0.respool.ResourceManager").
 *
 * Ownership: the service borrows kc (same loop) for its life. */
#ifndef PELOTON_NATIVE_SVC_RESPOOL_H
#define PELOTON_NATIVE_SVC_RESPOOL_H

#include "kclient.h"
#include "native.h"

struct svc_respool;
struct svc_respool *svc_respool_new(struct kclient *kc);
void svc_respool_free(struct svc_respool *s);
int svc_respool_register(struct svc_respool *s, struct native_registry *r);

#endif
