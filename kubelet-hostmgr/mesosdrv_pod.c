/* The Mesos driver's pod side (mesosdrv_int.h): updates as pod status (the
 * ACKNOWLEDGE sent from the write's completion), final DELETEs, and a pod's
 * resources and TaskInfo. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostmgr.h"
#include "jparse.h"
#include "ksim.h"
#include "mesosdrv_int.h"

/* ---- pod writes ---- */

static void on_pod_write_done(void *ud, const struct kc_response *r);

bool md_pod_write(struct mdrv *d, struct md_op *op, const char *method, const char *sub, json_t *body,
                      const char *ct) {
    char path[64 + 6 * NAME_MAX_LEN];
    md_pod_path(op->ns, op->name, sub, path, sizeof path);
    return md_op_send(op, method, path, body, ct, on_pod_write_done);
}

static json_t *delete_body(const char *uid) {
    json_t *b = json_pack("{s:s, s:s, s:i}", "kind", "DeleteOptions", "apiVersion", "v1", "gracePeriodSeconds", 0);
    if (b && uid) json_object_set_new(b, "preconditions", json_pack("{s:s}", "uid", uid));
    return b;
}

/* The final DELETE of a pod whose task is over (or never ran). */
void md_pod_delete(struct mdrv *d, const char *ns, const char *name, const char *uid) {
    char key[3 * NAME_MAX_LEN + 64];
    snprintf(key, sizeof key, "%s/%s/%s", ns, name, uid ? uid : "");
    if (strmap_get(&d->deletes, key)) return;
    struct md_op *op = md_op_new(d, OP_DELETE);
    if (!op || !(op->ns = strdup(ns)) || !(op->name = strdup(name)) || (uid && !(op->uid = strdup(uid))) ||
        strmap_put(&d->deletes, key, (void *)1, NULL)) {
        if (op) md_op_free(op);
        return;
    }
    md_pod_write(d, op, "DELETE", "", delete_body(uid), NULL);
}

static const char *reason_of(int state) {
    switch (state) {
    case MESOS_TASK_STARTING: return "TaskStarting";
    case MESOS_TASK_STAGING: return "TaskStaging";
    case MESOS_TASK_FINISHED: return "TaskFinished";
    case MESOS_TASK_FAILED: return "TaskFailed";
    case MESOS_TASK_KILLED: return "TaskKilled";
    case MESOS_TASK_ERROR: return "TaskError";
    default: return NULL;
    }
}

#define APPEND(lit) jdump_append(buf, len, cap, lit, sizeof lit - 1)
#define APPEND_STR(v) jdump_append_string(buf, len, cap, v, strlen(v))

int mdrv_status_patch(const struct mesos_task_status *s, const char *uid, int64_t now_ms, char **buf, size_t *len,
                      size_t *cap) {
    const char *phase;
    switch (s->state) {
    case MESOS_TASK_STAGING:
    case MESOS_TASK_STARTING: phase = "Pending"; break;
    case MESOS_TASK_RUNNING: phase = "Running"; break;
    case MESOS_TASK_FINISHED: phase = "Succeeded"; break;
    case MESOS_TASK_FAILED:
    case MESOS_TASK_KILLED:
    case MESOS_TASK_ERROR: phase = "Failed"; break;
    default: return 1;
    }
    char now[32], msg[512];
    hostmgr_format_time(now_ms, false, now);
    bool ready = s->state == MESOS_TASK_RUNNING;
    const char *reason = reason_of((int)s->state);
    /* the uid is a precondition: a late update must not land on a new pod of the same name */
    if (APPEND("{\"metadata\":{\"uid\":") || APPEND_STR(uid) || APPEND("},\"status\":{\"phase\":") ||
        APPEND_STR(phase) || APPEND(",\"reason\":"))
        return -1;
    if (reason) {
        snprintf(msg, sizeof msg, "Mesos task %s%s%s%s%.300s", mesos_task_state_name((int)s->state),
                 s->reason ? " (" : "", s->reason ? s->reason : "", s->reason ? "): " : ": ",
                 s->message ? s->message : "");
        if (APPEND_STR(reason)) return -1;
        size_t before = *len;
        /* a message that is not UTF-8 (the master's reason or message, or their cut) is left out */
        if (APPEND(",\"message\":") || APPEND_STR(msg)) *len = before;
    } else if (APPEND("null,\"message\":null")) {
        return -1;
    }
    if (ready && (APPEND(",\"startTime\":") || APPEND_STR(now))) return -1;
    /* a merge patch replaces the list whole: PodScheduled (placement's) is kept in it, as a kubelet keeps it */
    if (APPEND(",\"conditions\":[{\"type\":\"Ready\",\"status\":") || APPEND_STR(ready ? "True" : "False") ||
        APPEND(",\"lastTransitionTime\":") || APPEND_STR(now) ||
        APPEND("},{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastTransitionTime\":") || APPEND_STR(now) ||
        APPEND("}]}}"))
        return -1;
    return 0;
}

#undef APPEND
#undef APPEND_STR

static void handle_update(struct mdrv *d, const struct mesos_task_status *s);

/* The update held while t's write was in flight, handled now that it landed. */
static void replay_held(struct mdrv *d, struct md_task *t) {
    struct md_held *h = t->held;
    t->held = NULL;
    struct mesos_task_status s = {.task_id = t->id, .agent_id = h->agent_id, .state = h->state,
                                  .reason = h->reason, .message = h->message, .uuid_b64 = h->uuid};
    handle_update(d, &s);
    md_held_free(h);
}

static void on_pod_write_done(void *ud, const struct kc_response *r) {
    struct md_op *op = ud;
    if (!md_op_landed(op)) return;
    struct mdrv *d = op->d;
    /* 404: the pod is gone; 409: another pod holds the name now: nothing left to store either way */
    bool ok = md_ok2xx(r->status) || r->status == 404 || r->status == 409;
    struct md_task *t = op->task_id ? strmap_get(&d->tasks, op->task_id) : NULL;
    if (t) {
        t->busy = false;
        free(t->write_uuid);
        t->write_uuid = NULL;
    }
    if (!ok) {
        fprintf(stderr, "level=warn msg=\"mesos: pod write failed\" pod=%s/%s status=%ld error=\"%s\"\n", op->ns,
                op->name, r->status, r->error ? r->error : "");
        if (op->kind == OP_DELETE) {
            char key[3 * NAME_MAX_LEN + 64];
            snprintf(key, sizeof key, "%s/%s/%s", op->ns, op->name, op->uid ? op->uid : "");
            strmap_del(&d->deletes, key);
        }
        /* not acknowledged: the master sends the update again (and a held one with a uuid, not
         * acknowledged either; reconciliation repeats one without) */
        if (t) {
            md_held_free(t->held);
            t->held = NULL;
        }
    } else {
        if (op->kind == OP_STATUS || op->kind == OP_LOST) d->st.status_writes++;
        if (t && op->kind == OP_STATUS) {
            t->state = op->state;
            t->terminal = mesos_task_state_terminal(op->state);
        }
        if (t && op->kind == OP_LOST) t->lost = t->terminal = true;
        md_ack(d, op->agent_id, op->task_id, op->uuid);
        if (t && t->held) replay_held(d, t); /* in the order they came: only now the next write */
    }
    const json_t *pod = t ? md_pod_get(d, t->ns, t->name) : NULL;
    const char *uid = md_str(pod, "uid");
    if (t && !t->busy && (!uid || strcmp(uid, t->uid))) { /* its pod went meanwhile (on_pod_delete left it) */
        strmap_del(&d->tasks, t->id);
        md_task_free(t);
    }
    md_op_free(op);
    md_kick(d); /* a terminal task of a pod being deleted: its DELETE */
}

/* ---- updates ---- */

/* Where a state stands in a task's life: STAGING < STARTING < RUNNING <
 * every end (terminal or lost). A task never steps back: an update ranked
 * below the state stored is stale (a resend that crossed a newer update,
 * after a failed write or a reconciliation). */
static int state_rank(int state) {
    switch (state) {
    case MESOS_TASK_STAGING: return 0;
    case MESOS_TASK_STARTING: return 1;
    case MESOS_TASK_RUNNING:
    case MESOS_TASK_KILLING: return 2;
    default: return 3;
    }
}

/* Keeps s as t's held update: the newest one replaces an older, unless it
 * ranks below the one held (then it is not acknowledged: when the master
 * sends it again, it is refused as stale and acknowledged). */
static void hold(struct md_task *t, const struct mesos_task_status *s) {
    if (t->held && state_rank((int)s->state) < state_rank(t->held->state)) return;
    struct md_held *h = calloc(1, sizeof *h);
    if (!h) return; /* not acknowledged: it comes again */
    h->state = (int)s->state;
    h->agent_id = md_dup0(s->agent_id);
    h->reason = md_dup0(s->reason);
    h->message = md_dup0(s->message);
    h->uuid = md_dup0(s->uuid_b64);
    if ((s->agent_id && !h->agent_id) || (s->reason && !h->reason) || (s->message && !h->message) ||
        (s->uuid_b64 && !h->uuid)) {
        md_held_free(h);
        return;
    }
    md_held_free(t->held);
    t->held = h;
}

void md_on_update(struct mdrv *d, const struct mesos_task_status *s) {
    d->st.updates++;
    handle_update(d, s);
}

/* t's write did not start: nothing is in flight (the update, not acknowledged, comes again). */
static void write_not_sent(struct md_task *t) {
    t->busy = false;
    free(t->write_uuid);
    t->write_uuid = NULL;
}

static void handle_update(struct mdrv *d, const struct mesos_task_status *s) {
    int state = (int)s->state;
    struct md_task *t = strmap_get(&d->tasks, s->task_id);
    if (!t) {
        if (!d->known_built) return; /* not acknowledged: it comes again once the pods are known */
        if (!mesos_task_state_terminal(state) && !md_state_lost(state) && state != MESOS_TASK_KILLING) {
            fprintf(stderr, "level=warn msg=\"mesos: unknown task killed\" task=%s state=%s\n", s->task_id,
                    mesos_task_state_name(state));
            md_kill_task(d, s->task_id, s->agent_id);
        }
        md_ack(d, s->agent_id, s->task_id, s->uuid_b64);
        return;
    }
    if (t->busy) {
        /* one write per task at a time, so that the pod shows its updates in the order they came
         * (two writes in flight land in any order: a STARTING stored over a RUNNING); a resend of
         * the update being written is acknowledged by that write, a newer one waits for it */
        if (!s->uuid_b64 || !t->write_uuid || strcmp(s->uuid_b64, t->write_uuid)) hold(t, s);
        return;
    }
    if (s->agent_id && (!t->agent_id || strcmp(t->agent_id, s->agent_id))) {
        free(t->agent_id);
        t->agent_id = strdup(s->agent_id);
    }
    const json_t *pod = md_pod_get(d, t->ns, t->name);
    const char *uid = md_str(pod, "uid");
    bool pod_here = pod && uid && t->uid && !strcmp(uid, t->uid);
    if (!pod_here || t->lost || (t->terminal && state != t->state)) {
        /* the pod went (its task is killed if it still runs), or the update is stale */
        if (!pod_here && !mesos_task_state_terminal(state) && !md_state_lost(state)) md_kill_task(d, t->id, t->agent_id);
        md_ack(d, s->agent_id, s->task_id, s->uuid_b64);
        return;
    }
    if (state == MESOS_TASK_KILLING || (state == t->state && !md_state_lost(state))) {
        md_ack(d, s->agent_id, s->task_id, s->uuid_b64); /* nothing new to store */
        return;
    }
    if (t->state >= 0 && state_rank(state) < state_rank(t->state)) {
        /* older than what the pod shows: not stored, acknowledged so that the master stops sending it */
        d->st.stale_updates++;
        fprintf(stderr, "level=info msg=\"mesos: stale update not stored\" task=%s state=%s stored=%s\n", t->id,
                mesos_task_state_name(state), mesos_task_state_name(t->state));
        md_ack(d, s->agent_id, s->task_id, s->uuid_b64);
        return;
    }
    /* killed by a drain (not by a deletion): its work moves, as a lost task's does */
    const struct md_agent *ag = t->agent_id ? md_agent_get(d, t->agent_id, false) : NULL;
    bool drained = state == MESOS_TASK_KILLED && ag && ag->drain && !md_str(pod, "deletionTimestamp");
    struct md_op *op = md_op_new(d, md_state_lost(state) || drained ? OP_LOST : OP_STATUS);
    if (!op) return;
    op->state = state;
    op->task_id = strdup(t->id);
    op->agent_id = md_dup0(s->agent_id ? s->agent_id : t->agent_id);
    op->uuid = md_dup0(s->uuid_b64);
    op->ns = strdup(t->ns);
    op->name = strdup(t->name);
    op->uid = strdup(t->uid);
    if (!op->task_id || !op->ns || !op->name || !op->uid) {
        md_op_free(op);
        return;
    }
    t->busy = true;
    free(t->write_uuid);
    t->write_uuid = md_dup0(s->uuid_b64);
    if (op->kind == OP_LOST) {
        /* lost: the pod is deleted, as for a lost Kubelet node, and the job manager runs it again */
        d->st.lost++;
        fprintf(stderr, "level=warn msg=\"mesos: task lost\" task=%s pod=%s/%s state=%s reason=%s\n", t->id, t->ns,
                t->name, mesos_task_state_name(state), s->reason ? s->reason : "");
        ctl_pod_event(d->kc, MDRV_COMPONENT, t->ns, t->name, t->uid, "Warning", "TaskLost",
                      "Mesos task %s is %s (%s): pod %s/%s is lost and deleted", t->id, mesos_task_state_name(state),
                      s->reason ? s->reason : "no reason", t->ns, t->name);
        if (!md_pod_write(d, op, "DELETE", "", delete_body(t->uid), NULL)) write_not_sent(t);
        return;
    }
    size_t len = 0;
    int rc = mdrv_status_patch(s, t->uid, md_wall_ms(), &d->text, &len, &d->text_cap);
    if (rc) {
        md_op_free(op);
        write_not_sent(t);
        if (rc > 0) md_ack(d, s->agent_id, s->task_id, s->uuid_b64); /* nothing to store; out of memory: it comes again */
        return;
    }
    char path[64 + 6 * NAME_MAX_LEN];
    md_pod_path(op->ns, op->name, "/status", path, sizeof path);
    if (!md_op_send_text(op, "PATCH", path, d->text, len, MERGE_PATCH, on_pod_write_done)) write_not_sent(t);
}

/* ---- launching ---- */

/* "k=v" strings for a task spec, malloc'd (freed by strs_free). */
struct strs {
    const char *v[MDRV_MAX_KV];
    char *own[MDRV_MAX_KV];
    int n;
};

static void strs_add(struct strs *s, const char *k, const char *v) {
    if (s->n >= MDRV_MAX_KV) return;
    size_t len = strlen(k) + strlen(v) + 2;
    char *x = malloc(len);
    if (!x) return;
    snprintf(x, len, "%s=%s", k, v);
    s->v[s->n] = s->own[s->n] = x;
    s->n++;
}

static void strs_free(struct strs *s) {
    for (int i = 0; i < s->n; i++) free(s->own[i]);
}

/* A pod's task spec (strings borrowed from pod, "k=v" ones owned by l). */
struct launch {
    struct mesos_task_spec spec;
    const char *argv[MDRV_MAX_KV];
    struct strs env, labels;
};

static void launch_spec(struct launch *l, const json_t *pod, const char *task_id, const char *agent_id,
                        const struct mesos_scalars *res) {
    const json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    const char *name = md_str(pod, "name");
    l->spec = (struct mesos_task_spec){.name = name ? name : task_id, .task_id = task_id, .agent_id = agent_id,
                                       .res = *res};
    l->spec.image = json_string_value(json_object_get(c, "image"));
    const json_t *cmd = json_object_get(c, "command"), *args = json_object_get(c, "args");
    size_t i;
    const json_t *v;
    int n = 0;
    json_array_foreach(cmd, i, v) if (json_is_string(v) && n < MDRV_MAX_KV) l->argv[n++] = json_string_value(v);
    json_array_foreach(args, i, v) if (json_is_string(v) && n < MDRV_MAX_KV) l->argv[n++] = json_string_value(v);
    if (n) { /* argv (command then args), its first word the program, as Mesos takes arguments */
        l->spec.command = l->argv[0];
        l->spec.args = l->argv;
        l->spec.nargs = n;
    }
    json_array_foreach(json_object_get(c, "env"), i, v) {
        const char *k = json_string_value(json_object_get(v, "name"));
        const char *val = json_string_value(json_object_get(v, "value"));
        if (k) strs_add(&l->env, k, val ? val : ""); /* valueFrom is not resolved */
    }
    const char *k;
    json_object_foreach(json_object_get(json_object_get(pod, "metadata"), "labels"), k, v)
        if (json_is_string(v)) strs_add(&l->labels, k, json_string_value(v));
    l->spec.env = l->env.v;
    l->spec.nenv = l->env.n;
    l->spec.labels = l->labels.v;
    l->spec.nlabels = l->labels.n;
}

json_t *mdrv_pod_task_info(const json_t *pod, const char *task_id, const char *agent_id,
                           const struct mesos_scalars *res) {
    struct launch *l = malloc(sizeof *l);
    if (!l) return NULL;
    l->env.n = l->labels.n = 0;
    launch_spec(l, pod, task_id, agent_id, res);
    json_t *ti = mesos_task_info(&l->spec);
    strs_free(&l->env);
    strs_free(&l->labels);
    free(l);
    return ti;
}

int mdrv_pod_task_info_text(const json_t *pod, const char *task_id, const char *agent_id,
                            const struct mesos_scalars *res, char **buf, size_t *len, size_t *cap) {
    struct launch *l = malloc(sizeof *l); /* not zeroed: what launch_spec reads it sets */
    if (!l) return -1;
    l->env.n = l->labels.n = 0;
    launch_spec(l, pod, task_id, agent_id, res);
    int rc = mesos_task_info_text(buf, len, cap, &l->spec);
    strs_free(&l->env);
    strs_free(&l->labels);
    free(l);
    return rc;
}

int mdrv_pod_scalars(const json_t *pod, struct mesos_scalars *out) {
    struct ksim_res r;
    char err[200];
    if (ksim_pod_requests(pod, &r, err, sizeof err)) return -1;
    out->cpus = r.cpu / 1000.0;
    out->mem = (double)r.memory / (1024.0 * 1024.0);
    out->gpus = r.gpu / 1000.0;
    out->disk = 0;
    if (out->cpus < 0.01) out->cpus = 0.01;
    if (out->mem < 32) out->mem = 32;
    /* what no agent has, and what a master refuses in a TaskInfo (past 1e15) */
    return out->cpus > MDRV_SCALAR_MAX || out->mem > MDRV_SCALAR_MAX || out->gpus > MDRV_SCALAR_MAX ? -1 : 0;
}
