/* Host maintenance in the job manager (jobmgr_ctl.h, docs/migration.md):
 * a Job's instances leave the nodes in maintenance (annotation
 * peloton.io/maintenance) within the Job's availability budget.
 *
 * The budget lives here, not in the host manager, because only the job
 * manager knows a Job's instances and which of them are up. A move is a
 * restart at the instance's own version (restart_pending): the run is killed
 * (graceful delete; on a Mesos agent the driver KILLs the task), and once it
 * ended the next run is created and placed elsewhere, since the node is
 * cordoned. A moved run is neither a failure nor a loss. */
#include <inttypes.h>
#include <stdlib.h>

#include "ctl.h"
#include "jobmgr_ctl.h"
#include "labels.h"

uint32_t jm_drain_budget(const struct crd_job_extra *x) {
    if (x->max_unavailable) return x->max_unavailable;
    if (x->update.batch_size) return x->update.batch_size;
    return 1;
}

/* Up for the budget: Running and not on its way out. */
static bool inst_up(const struct jm_inst *r) {
    return r->used && r->state == TASK_RUNNING && !r->kill && !r->deleting && !r->restart_pending;
}

/* On a node in maintenance and not already leaving it. */
static bool inst_to_move(const struct jobmgr *jm, const struct jm_inst *r) {
    return r->used && r->present && r->bound && !task_state_terminal(r->state) && !r->kill && !r->deleting &&
           !r->restart_pending && jm_node_in_maintenance(jm, r->host);
}

static void move(struct jobmgr *jm, struct jm_job *job, struct jm_inst *r, uint32_t i, uint32_t unavailable,
                 uint32_t budget) {
    r->restart_pending = r->moving = true;
    r->restart_version = r->version;
    jm_log("info",
           "msg=\"instance moved off a node in maintenance\" job=%s instance=%" PRIu32 " run=%" PRIu32
           " node=%s unavailable=%" PRIu32 " budget=%" PRIu32,
           job->key, i, r->run, r->host, unavailable, budget);
    if (r->pod)
        ctl_pod_event(jm->kc, "peloton-jobmgr", job->ns, r->pod, NULL, "Normal", "NodeMaintenance",
                      "Node %s is in maintenance: instance %" PRIu32 " moves to another node", r->host, i);
}

uint32_t jm_drain_step(struct jobmgr *jm, struct jm_job *job, enum job_type type, uint32_t count, uint32_t budget) {
    if (type == JOB_DAEMON) return 0; /* a node in maintenance is cordoned, hence not eligible: jobmgr_daemon.c */
    uint32_t moved = 0;
    if (type == JOB_BATCH) { /* nothing to keep up: every run moves at once, and runs again elsewhere */
        for (uint32_t i = 0; i < job->ninst; i++) {
            struct jm_inst *r = &job->inst[i];
            if (inst_to_move(jm, r)) move(jm, job, r, i, 0, 0), moved++;
        }
        return moved;
    }
    uint32_t up = 0;
    for (uint32_t i = 0; i < job->ninst && i < count; i++) up += inst_up(&job->inst[i]);
    uint32_t unavailable = count - up;
    for (uint32_t i = 0; i < job->ninst; i++) {
        struct jm_inst *r = &job->inst[i];
        if (!inst_to_move(jm, r)) continue;
        bool costs = i < count && inst_up(r); /* moving a run that is not up takes nothing down */
        if (costs && unavailable >= budget) continue;
        if (costs) unavailable++;
        move(jm, job, r, i, unavailable, budget);
        moved++;
    }
    return moved;
}
