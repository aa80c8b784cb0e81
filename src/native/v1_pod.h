/* v1alpha peloton.api.v1alpha.pod.svc.PodService over a Job's Pods: GetPod
 * (the current run and the previous runs still present), GetPodEvents (the
 * run's state transitions, read from its pod object), RestartPod (the pod is
 * deleted; the job manager starts the instance's next run). A PodName is
 * "<JobID>-<instance>". The other methods answer UNIMPLEMENTED.
 * docs/native-api.md, "v1alpha PodService".
 *
 * Ownership: the service borrows kc for its life. */
#ifndef PELOTON_NATIVE_V1_POD_H
#define PELOTON_NATIVE_V1_POD_H

#include "kclient.h"
#include "native.h"

struct v1_pod;
struct v1_pod *v1_pod_new(struct kclient *kc);
void v1_pod_free(struct v1_pod *s);
int v1_pod_register(struct v1_pod *s, struct native_registry *r);

#endif
