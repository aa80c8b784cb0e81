/* The labels and annotations through which Kubernetes objects talk to
 * Peloton (docs/architecture.md, "Conventions"). Shared by pelotond's roles,
 * the extender, kubelet-sim and the tests, so that each name is spelled once.
 *
 * Pods:
 *   label peloton.io/resource-pool   the leaf pool (metadata.name of a ResourcePool)
 *   label peloton.io/gang            gang id: pods with the same id (in one
 *                                    namespace) are admitted and placed all or nothing
 *   label peloton.io/gang-size       the gang's size (decimal, >= 1)
 *   label peloton.io/job             the Job (jobs.peloton.io) the pod is an instance of
 *   label peloton.io/instance        its instance id (decimal)
 *   annotation peloton.io/priority   decimal, >= 0 (else spec.priority, else 0)
 *   annotation peloton.io/preemptible "false" makes the pod non-preemptible
 *                                    (admitted only within its pool's reservation)
 *   annotation peloton.io/revocable  "true": revocable (slack) work
 *   annotation peloton.io/placement-strategy PACK | SPREAD_JOB | LEAST_LOADED
 *   annotation peloton.io/preempted  set on a preemption victim (why) before it is deleted
 * Nodes:
 *   annotation peloton.io/maintenance  host maintenance (docs/migration.md):
 *                                    "draining" (its tasks are being moved),
 *                                    "drained" (none left); absent: none
 * Namespaces:
 *   annotation peloton.io/resource-pool  the pool of the namespace's pods
 *                                        that have no pool label */
#ifndef PELOTON_K8S_LABELS_H
#define PELOTON_K8S_LABELS_H

#define PL_POOL "peloton.io/resource-pool"
#define PL_GANG "peloton.io/gang"
#define PL_GANG_SIZE "peloton.io/gang-size"
#define PL_JOB "peloton.io/job"
#define PL_INSTANCE "peloton.io/instance"
#define PA_PRIORITY "peloton.io/priority"
#define PA_PREEMPTIBLE "peloton.io/preemptible"
#define PA_REVOCABLE "peloton.io/revocable"
#define PA_STRATEGY "peloton.io/placement-strategy"
/* Set by the resource manager on a preemption victim before its graceful
 * delete (value: why), so the job manager applies killOnPreempt. */
#define PA_PREEMPTED "peloton.io/preempted"
/* ... and when (RFC 3339, milliseconds), in the same write. */
#define PA_PREEMPTED_AT "peloton.io/preempted-at"
/* The timeline of a pod placement bound (RFC 3339, milliseconds): when its
 * gang was queued on its pool and admitted (the resource manager's clock)
 * and placed (placement's); carried by the Binding, which the API server
 * copies onto the pod. */
#define PA_QUEUED_AT "peloton.io/queued-at"
#define PA_ADMITTED_AT "peloton.io/admitted-at"
#define PA_PLACED_AT "peloton.io/placed-at"

/* pods/NAME/binding?placementEpoch=N: the epoch of the placement term
 * whose engine decided the Binding (the placement lease's fencing token,
 * ctl_lease.h). Our API server binds only while the lease's epoch key
 * still holds N, checked in the binding's own script call (store.h,
 * struct store_fence): a Binding of a term that has ended is refused 409
 * Conflict (a cause of reason PELOTON_PLACEMENT_TERM_ENDED) and binds
 * nothing. A Binding without it binds as in Kubernetes; another API
 * server ignores the parameter. */
#define PELOTON_PLACEMENT_EPOCH_ARG "placementEpoch"
#define PELOTON_PLACEMENT_EPOCH_KEY "peloton:placement:epoch"
#define PELOTON_PLACEMENT_TERM_ENDED "PlacementTermEnded"

/* Host maintenance of a Node: requested as "draining" (with the Node
 * cordoned), set to "drained" by the host manager once nothing runs there. */
#define PA_MAINTENANCE "peloton.io/maintenance"
#define PA_MAINT_DRAINING "draining"
#define PA_MAINT_DRAINED "drained"

/* The scheduler name pods ask for to be scheduled by pelotond. */
#define PELOTON_SCHEDULER "peloton"
/* The extended resource name of GPUs. */
#define PELOTON_GPU_RESOURCE "nvidia.com/gpu"

#endif
