/* v0 UpdateService (peloton.api.v0.update.svc.UpdateService, the name
 * Peloton's clients send) over a Job's rolling update: CreateUpdate writes
 * a new config and spec.updateStrategy from the UpdateConfig (the job
 * manager's update planner rolls it), GetUpdate/ListUpdates/GetUpdateCache
 * read status.update, Pause/Resume set spec.updateStrategy.paused,
 * Rollback/Abort set the annotations peloton.io/update-rollback and
 * peloton.io/update-abort. An UpdateID is "<JobID>-<n>" (svc_jobwrite.h); a
 * Job has one update at a time, its latest. Mapping: docs/native-api.md.
 *
 * Ownership: the service borrows kc for its life. */
#ifndef PELOTON_NATIVE_SVC_UPDATE_H
#define PELOTON_NATIVE_SVC_UPDATE_H

#include "kclient.h"
#include "native.h"

/* Registers the service's methods on r with kc (borrowed) as their state;
 * 0 or -ENOMEM. */
int svc_update_register(struct kclient *kc, struct native_registry *r);

#endif
