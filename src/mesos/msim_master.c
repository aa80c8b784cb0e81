/* The simulated master's state (msim.h): agents, frameworks, offers, tasks
 * and their status updates, driven by one tick timer on the loop. */
#include "msim.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "jparse.h"
#include "recordio.h"

#define TICK_MS 10
#define MAX_PENDING (64u << 20) /* --chunk-bytes: framed events waiting for the flush */

void msim_log(struct msim *m, const char *fmt, ...) {
    if (m->cfg.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("mesos-master-sim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

double msim_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void new_uuid(struct msim *m, unsigned char u[MESOS_UUID_LEN]) {
    if (getrandom(u, MESOS_UUID_LEN, GRND_NONBLOCK) != MESOS_UUID_LEN) {
        uint64_t s = ++m->uuid_seq ^ (uint64_t)uv_hrtime();
        for (int i = 0; i < MESOS_UUID_LEN; i++) s = s * 6364136223846793005ULL + 1442695040888963407ULL, u[i] = (unsigned char)(s >> 56);
    }
    u[6] = (unsigned char)((u[6] & 0x0f) | 0x40); /* version 4, as Mesos' UUID::random */
    u[8] = (unsigned char)((u[8] & 0x3f) | 0x80);
}

static void uuid_string(const unsigned char u[16], char out[37]) {
    static const char hex[] = "0123456789abcdef";
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        out[k++] = hex[u[i] >> 4];
        out[k++] = hex[u[i] & 15];
    }
    out[k] = 0;
}

int msim_new_stream_id(struct msim *m, char *out) {
    unsigned char u[MESOS_UUID_LEN];
    char id[37];
    new_uuid(m, u);
    uuid_string(u, id);
    static const char name[] = "Mesos-Stream-Id: ";
    snprintf(out, 64, "%s%s\r\n", name, id);
    return (int)sizeof name - 1;
}

void msim_config_defaults(struct msim_config *c) {
    memset(c, 0, sizeof *c);
    c->addr = "127.0.0.1";
    c->port = 5050;
    c->standby_port = -1;
    c->agents = 3;
    c->agent_res = (struct mesos_scalars){.cpus = 4, .mem = 8192, .disk = 100000, .gpus = 0};
    c->hostname_prefix = "agent-";
    c->heartbeat_s = 15;
    c->allocation_ms = 1000;
    c->staging_ms = 20;
    c->starting_ms = 20;
    c->kill_ms = 20;
    c->task_run_s = -1;
    c->update_retry_ms = 10000;
    c->update_retry_max_ms = 600000;
    c->max_tasks = 1000000;
    c->max_frameworks = 64;
    c->max_body = 8u << 20;
}

/* ---- events to a framework ---- */
void msim_send(struct msim *m, struct msim_framework *fw, json_t *ev) {
    if (!ev) return;
    if (!fw->stream || (fw->stream == fw->stall_stream && uv_now(m->loop) < fw->stall_until)) {
        json_decref(ev); /* nobody to hear it, or the network black-holes it (/sim/stall) */
        return;
    }
    size_t len = 0;
    char *text = jdump(ev, JSON_COMPACT, &len);
    json_decref(ev);
    if (!text) return;
    char *framed = NULL;
    size_t flen = 0, fcap = 0;
    if (m->cfg.chunk_bytes == 0) {
        if (recordio_encode(&framed, &flen, &fcap, text, len) == 0) mhttp_stream_chunk(fw->stream, framed, flen);
        free(framed);
    } else if (fw->plen > MAX_PENDING || recordio_encode(&fw->pend, &fw->plen, &fw->pcap, text, len)) {
        msim_log(m, "level=warn framework=%s msg=\"stream output past its bound: cut\"", fw->id);
        msim_fw_disconnect(m, fw, true);
    }
    free(text);
}

static void on_flush(uv_check_t *h) {
    struct msim *m = h->data;
    for (int i = 0; i < m->nfws; i++) {
        struct msim_framework *fw = m->fws[i];
        for (size_t off = 0; fw->stream && off < fw->plen; off += m->cfg.chunk_bytes) {
            size_t n = fw->plen - off < m->cfg.chunk_bytes ? fw->plen - off : m->cfg.chunk_bytes;
            mhttp_stream_chunk(fw->stream, fw->pend + off, n);
        }
        fw->plen = 0;
    }
}

/* ---- frameworks ---- */
struct msim_framework *msim_fw_find(struct msim *m, const char *id) {
    for (int i = 0; id && i < m->nfws; i++)
        if (!strcmp(m->fws[i]->id, id)) return m->fws[i];
    return NULL;
}

struct msim_framework *msim_fw_add(struct msim *m, const char *id) {
    if (m->nfws >= m->cfg.max_frameworks) return NULL;
    struct msim_framework *fw = calloc(1, sizeof *fw);
    struct msim_framework **fws = realloc(m->fws, sizeof *fws * (size_t)(m->nfws + 1));
    uint64_t *refuse = calloc((size_t)m->nagents + 1, sizeof *refuse);
    if (!fw || !fws || !refuse) {
        free(fw);
        free(refuse);
        if (fws) m->fws = fws;
        return NULL;
    }
    m->fws = fws;
    if (id) snprintf(fw->id, sizeof fw->id, "%s", id);
    else snprintf(fw->id, sizeof fw->id, "%s-%04llu", m->master_id, (unsigned long long)m->fw_seq++);
    fw->m = m;
    fw->refuse_until = refuse;
    fw->registered_time = msim_wall();
    m->fws[m->nfws++] = fw;
    return fw;
}

static void on_stream_closed(void *ud) {
    struct msim_framework *fw = ud;
    fw->stream = NULL; /* the connection is going: nothing more is written to it */
    msim_fw_disconnect(fw->m, fw, false);
}

static void task_send_head(struct msim *m, struct msim_task *t);

void msim_fw_connect(struct msim *m, struct msim_framework *fw, const struct mhttp_req *req, const json_t *info) {
    if (fw->stream) { /* failover to a new connection: the old one hears why and ends */
        struct mhttp_conn *old = fw->stream;
        msim_send(m, fw, mesos_event_error("Framework failed over"));
        mhttp_stream_detach(old);
        mhttp_stream_end(old);
        fw->stream = NULL;
    }
    json_decref(fw->info);
    fw->info = json_deep_copy(info);
    const json_t *ft = json_object_get(info, "failover_timeout");
    fw->failover_timeout = json_is_number(ft) ? json_number_value(ft) : 0;
    fw->partition_aware = fw->killing_state = false;
    size_t i;
    const json_t *cap;
    json_array_foreach(json_object_get(info, "capabilities"), i, cap) {
        const char *t = json_string_value(json_object_get(cap, "type"));
        if (t && !strcmp(t, "PARTITION_AWARE")) fw->partition_aware = true;
        if (t && !strcmp(t, "TASK_KILLING_STATE")) fw->killing_state = true;
    }
    fw->suppressed = false;
    char extra[96];
    int at = msim_new_stream_id(m, extra);
    snprintf(fw->stream_id, sizeof fw->stream_id, "%.36s", extra + at);
    mhttp_stream_start(req->conn, "application/json", extra, on_stream_closed, fw);
    fw->stream = req->conn;
    fw->plen = 0;
    msim_send(m, fw, mesos_event_subscribed(fw->id, m->cfg.heartbeat_s, m->master_id));
    msim_send(m, fw, mesos_event_heartbeat());
    fw->next_heartbeat = uv_now(m->loop) + (uint64_t)(m->cfg.heartbeat_s * 1000);
    /* Updates waiting for an acknowledgement go out again on the new stream. */
    const char *k;
    void *v;
    size_t pos = 0;
    while (strmap_next(&fw->tasks, &pos, &k, &v)) {
        struct msim_task *t = v;
        if (t->uq) task_send_head(m, t);
    }
    msim_log(m, "level=info event=subscribed framework=%s stream=%s", fw->id, fw->stream_id);
}

static void fw_rescind_all(struct msim *m, struct msim_framework *fw, bool tell) {
    const char *k;
    void *v;
    size_t pos = 0;
    while (strmap_next(&m->offers, &pos, &k, &v)) {
        struct msim_offer *o = v;
        if (o->fw == fw) msim_offer_release(m, o, tell, 0);
    }
}

void msim_fw_disconnect(struct msim *m, struct msim_framework *fw, bool abort_stream) {
    if (fw->stream) {
        struct mhttp_conn *c = fw->stream;
        fw->stream = NULL;
        mhttp_stream_detach(c);
        if (abort_stream) mhttp_conn_abort(c);
        else mhttp_stream_end(c);
    }
    fw->disconnected_at = uv_now(m->loop);
    fw->plen = 0;
    fw_rescind_all(m, fw, false);
    msim_log(m, "level=info event=disconnected framework=%s", fw->id);
}

static void task_remove(struct msim *m, struct msim_task *t);

void msim_fw_remove(struct msim *m, struct msim_framework *fw) {
    if (fw->stream) msim_fw_disconnect(m, fw, false);
    fw_rescind_all(m, fw, false);
    const char *k;
    void *v;
    size_t pos = 0;
    while (strmap_next(&fw->tasks, &pos, &k, &v)) task_remove(m, v);
    strmap_free(&fw->tasks);
    /* Torn-down ids are remembered up to a bound (a master keeps its last
     * completed frameworks); past it the oldest memory is dropped whole. */
    if (strmap_count(&m->removed_fws) >= MSIM_REMOVED_KEEP) strmap_free(&m->removed_fws);
    strmap_put(&m->removed_fws, fw->id, (void *)1, NULL);
    for (int i = 0; i < m->nfws; i++)
        if (m->fws[i] == fw) {
            m->fws[i] = m->fws[--m->nfws];
            break;
        }
    msim_log(m, "level=info event=removed framework=%s", fw->id);
    json_decref(fw->info);
    free(fw->refuse_until);
    free(fw->pend);
    free(fw);
}

/* ---- offers ---- */
void msim_offer_release(struct msim *m, struct msim_offer *o, bool rescind, double refuse_s) {
    strmap_del(&m->offers, o->id);
    o->agent->offer = NULL;
    if (rescind) {
        msim_send(m, o->fw, mesos_event_rescind(o->id));
        m->stats.offers_rescinded++;
    }
    if (refuse_s > 0) {
        double ms = refuse_s * 1000.0;
        if (ms > 1e12) ms = 1e12;
        o->fw->refuse_until[o->agent->index] = uv_now(m->loop) + (uint64_t)ms;
    }
    free(o);
}

static bool allocatable(const struct mesos_scalars *r) { return r->cpus >= 0.01 || r->mem >= 32; }

static void allocate(struct msim *m) {
    struct msim_framework *elig[256];
    json_t *batch[256] = {0};
    int n = 0;
    for (int i = 0; i < m->nfws && n < 256; i++)
        if (m->fws[i]->stream && !m->fws[i]->suppressed) elig[n++] = m->fws[i];
    if (n == 0) return;
    uint64_t now = uv_now(m->loop);
    m->alloc_round++;
    for (int i = 0; i < m->nagents; i++) {
        struct msim_agent *a = &m->agents[i];
        if (a->state != MSIM_AGENT_ACTIVE || a->drain != MSIM_DRAIN_NONE || a->deactivated || a->offer) continue;
        struct mesos_scalars free_res = a->total;
        mesos_scalars_sub(&free_res, &a->used);
        if (!allocatable(&free_res)) continue;
        int pick = -1;
        for (int k = 0; k < n && pick < 0; k++) {
            int f = (int)(((uint64_t)i + m->alloc_round + (uint64_t)k) % (uint64_t)n);
            if (elig[f]->refuse_until[i] <= now) pick = f;
        }
        if (pick < 0) continue;
        struct msim_offer *o = calloc(1, sizeof *o);
        if (!o) return;
        snprintf(o->id, sizeof o->id, "%s-O%llu", m->master_id, (unsigned long long)++m->offer_seq);
        o->fw = elig[pick];
        o->agent = a;
        o->res = free_res;
        if (strmap_put(&m->offers, o->id, o, NULL)) {
            free(o);
            return;
        }
        a->offer = o;
        if (!batch[pick]) batch[pick] = json_array();
        struct mesos_offer_spec spec = {.id = o->id, .framework_id = o->fw->id, .agent_id = a->id,
                                        .hostname = a->hostname, .res = free_res, .attrs = a->attrs, .nattrs = a->nattrs};
        json_array_append_new(batch[pick], mesos_offer(&spec));
        m->stats.offers_sent++;
    }
    for (int f = 0; f < n; f++)
        if (batch[f]) msim_send(m, elig[f], mesos_event_offers(batch[f]));
}

/* ---- tasks ---- */

/* When t is next due: its step, or the resend of its unacknowledged update
 * (UINT64_MAX: neither). */
static uint64_t task_due(const struct msim_task *t) {
    uint64_t d = t->step != MSIM_STEP_NONE ? t->step_at : UINT64_MAX;
    return t->uq && t->retry_at < d ? t->retry_at : d;
}

static void wheel_unlink(struct msim *m, struct msim_task *t) {
    if (!t->filed) return;
    if (t->wprev) t->wprev->wnext = t->wnext;
    else m->wheel[t->wtick % MSIM_WHEEL] = t->wnext;
    if (t->wnext) t->wnext->wprev = t->wprev;
    t->wprev = t->wnext = NULL;
    t->filed = false;
}

/* Files t in the slot of the tick it is due at, or of an earlier one (a
 * task looked at early is filed again): never beyond the wheel's turn, and
 * never at a tick the wheel has passed. */
static void wheel_file(struct msim *m, struct msim_task *t) {
    uint64_t due = task_due(t);
    if (due == UINT64_MAX) {
        wheel_unlink(m, t);
        return;
    }
    uint64_t tick = due / TICK_MS;
    if (tick < m->wtick) tick = m->wtick;
    if (tick > m->wtick + MSIM_WHEEL - 2) tick = m->wtick + MSIM_WHEEL - 2;
    if (t->filed && t->wtick <= tick) return; /* looked at no later than due already */
    wheel_unlink(m, t);
    struct msim_task **slot = &m->wheel[tick % MSIM_WHEEL];
    t->wtick = tick;
    t->filed = true;
    t->wprev = NULL;
    t->wnext = *slot;
    if (*slot) (*slot)->wprev = t;
    *slot = t;
}

static void busy_add(struct msim *m, struct msim_task *t) {
    if (!t->busy) {
        t->busy = true;
        t->busy_prev = NULL;
        t->busy_next = m->busy;
        if (m->busy) m->busy->busy_prev = t;
        m->busy = t;
    }
    wheel_file(m, t);
}

static void busy_del(struct msim *m, struct msim_task *t) {
    wheel_unlink(m, t);
    if (!t->busy) return;
    t->busy = false;
    if (t->busy_prev) t->busy_prev->busy_next = t->busy_next;
    else m->busy = t->busy_next;
    if (t->busy_next) t->busy_next->busy_prev = t->busy_prev;
}

static void release_resources(struct msim *m, struct msim_task *t) {
    (void)m;
    if (t->resources_released || !t->agent) return;
    t->resources_released = true;
    mesos_scalars_sub(&t->agent->used, &t->res);
}

static void agent_unlink(struct msim *m, struct msim_task *t) {
    struct msim_agent *a = t->agent;
    if (!a) return;
    release_resources(m, t);
    if (t->agent_prev) t->agent_prev->agent_next = t->agent_next;
    else a->tasks = t->agent_next;
    if (t->agent_next) t->agent_next->agent_prev = t->agent_prev;
    a->ntasks--;
    if (a->drain == MSIM_DRAIN_DRAINING && a->ntasks == 0) {
        a->drain = MSIM_DRAIN_DRAINED;
        msim_log(m, "level=info event=drained agent=%s", a->id);
    }
}

static void free_updates(struct msim *m, struct msim_task *t) {
    if (t->uq) m->pending_tasks--;
    while (t->uq) {
        struct msim_update *u = t->uq;
        t->uq = u->next;
        free(u);
    }
    t->uq_tail = NULL;
}

static void task_remove(struct msim *m, struct msim_task *t) {
    struct msim_completed *c = &m->completed[m->completed_at];
    snprintf(c->task_id, sizeof c->task_id, "%s", t->id);
    snprintf(c->fw_id, sizeof c->fw_id, "%s", t->fw->id);
    snprintf(c->agent_id, sizeof c->agent_id, "%s", t->agent ? t->agent->id : "");
    c->state = t->state;
    m->completed_at = (m->completed_at + 1) % MSIM_COMPLETED_KEEP;
    if (m->ncompleted < MSIM_COMPLETED_KEEP) m->ncompleted++;
    strmap_del(&t->fw->tasks, t->id);
    agent_unlink(m, t);
    busy_del(m, t);
    free_updates(m, t);
    json_decref(t->info);
    free(t->id);
    free(t->name);
    free(t);
    m->ntasks--;
}

static const char *task_agent_id(const struct msim_task *t) { return t->agent ? t->agent->id : ""; }

static void task_send_head(struct msim *m, struct msim_task *t) {
    struct msim_update *u = t->uq;
    if (!u) return;
    u->st.task_id = t->id;
    u->st.agent_id = task_agent_id(t);
    u->st.message = u->message[0] ? u->message : NULL;
    u->st.reason = u->reason[0] ? u->reason : NULL;
    if (t->sends++) m->stats.update_resends++;
    m->stats.updates_sent++;
    msim_send(m, t->fw, mesos_event_update(&u->st));
    t->retry_at = uv_now(m->loop) + t->retry_ms;
    t->retry_ms = t->retry_ms * 2 > m->cfg.update_retry_max_ms ? m->cfg.update_retry_max_ms : t->retry_ms * 2;
    if (t->busy) wheel_file(m, t);
}

/* Queues an update from the agent (with a uuid, retried until acknowledged). */
static void task_update(struct msim *m, struct msim_task *t, enum mesos_task_state state, const char *reason,
                        const char *message) {
    struct msim_update *u = calloc(1, sizeof *u);
    if (!u) return;
    t->state = state;
    u->st.state = state;
    u->st.source = MESOS_SOURCE_EXECUTOR;
    u->st.timestamp = msim_wall();
    u->st.has_uuid = true;
    new_uuid(m, u->st.uuid);
    if (reason) snprintf(u->reason, sizeof u->reason, "%s", reason);
    if (message) snprintf(u->message, sizeof u->message, "%s", message);
    if (mesos_task_state_terminal(state)) release_resources(m, t);
    busy_add(m, t);
    if (t->uq_tail) {
        t->uq_tail->next = u;
        t->uq_tail = u;
        return;
    }
    t->uq = t->uq_tail = u;
    m->pending_tasks++;
    t->sends = 0;
    t->retry_ms = m->cfg.update_retry_ms;
    task_send_head(m, t);
}

void msim_task_ack(struct msim *m, struct msim_task *t, const unsigned char uuid[MESOS_UUID_LEN]) {
    struct msim_update *u = t->uq;
    if (!u || memcmp(u->st.uuid, uuid, MESOS_UUID_LEN)) {
        msim_log(m, "level=warn event=ack_ignored task=%s msg=\"no pending update with that uuid\"", t->id);
        m->stats.acks_ignored++;
        return;
    }
    m->stats.acks++;
    if (u->st.state == MESOS_TASK_RUNNING) {
        m->stats.running_acks++;
        m->stats.last_running_ack = msim_wall();
    }
    t->uq = u->next;
    if (!t->uq) {
        t->uq_tail = NULL;
        m->pending_tasks--;
    }
    free(u);
    t->sends = 0;
    t->retry_ms = m->cfg.update_retry_ms;
    if (t->uq) task_send_head(m, t);
    else if (mesos_task_state_terminal(t->state)) task_remove(m, t);
}

void msim_master_update(struct msim *m, struct msim_framework *fw, const char *task_id, const char *agent_id,
                        enum mesos_task_state state, const char *reason, const char *message) {
    struct mesos_task_status st = {.task_id = task_id, .agent_id = agent_id, .state = state,
                                   .source = MESOS_SOURCE_MASTER, .reason = reason, .message = message,
                                   .timestamp = msim_wall()};
    m->stats.updates_sent++;
    msim_send(m, fw, mesos_event_update(&st));
}

static double task_run_seconds(struct msim *m, const json_t *info, bool *fail) {
    const char *v = mesos_task_label(info, "mesos-sim/run-seconds");
    if (!v) v = mesos_task_env(info, "MESOS_SIM_RUN_SECONDS");
    const char *f = mesos_task_label(info, "mesos-sim/fail");
    if (!f) f = mesos_task_env(info, "MESOS_SIM_FAIL");
    *fail = f && (!strcmp(f, "true") || !strcmp(f, "1"));
    if (!v) return m->cfg.task_run_s;
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || d < 0 || d > 1e9) return -1; /* "forever" and anything else: runs until killed */
    return d;
}

struct msim_task *msim_task_launch(struct msim *m, struct msim_framework *fw, struct msim_agent *a,
                                   const struct mesos_task_decl *d) {
    struct msim_task *t = calloc(1, sizeof *t);
    if (!t || !(t->id = strdup(d->task_id)) || !(t->name = strdup(d->name)) || strmap_put(&fw->tasks, t->id, t, NULL)) {
        if (t) free(t->id), free(t->name);
        free(t);
        return NULL;
    }
    t->fw = fw;
    t->agent = a;
    t->res = d->res;
    t->info = json_incref((json_t *)d->info);
    t->state = MESOS_TASK_STAGING;
    t->run_s = task_run_seconds(m, d->info, &t->fail);
    t->agent_next = a->tasks;
    if (a->tasks) a->tasks->agent_prev = t;
    a->tasks = t;
    a->ntasks++;
    mesos_scalars_add(&a->used, &t->res);
    t->step = MSIM_STEP_STARTING;
    t->step_at = uv_now(m->loop) + m->cfg.staging_ms;
    busy_add(m, t);
    m->ntasks++;
    m->stats.tasks_launched++;
    return t;
}

void msim_task_kill(struct msim *m, struct msim_task *t) {
    if (mesos_task_state_terminal(t->state) || t->step == MSIM_STEP_KILLED || t->state == MESOS_TASK_UNREACHABLE)
        return;
    uint64_t now = uv_now(m->loop);
    if (t->state == MESOS_TASK_STAGING) { /* not started yet: the agent kills it at once */
        t->step = MSIM_STEP_KILLED;
        t->step_at = now;
    } else {
        if (t->fw->killing_state) task_update(m, t, MESOS_TASK_KILLING, NULL, NULL);
        t->step = MSIM_STEP_KILLED;
        t->step_at = now + m->cfg.kill_ms;
    }
    busy_add(m, t);
}

static void task_step(struct msim *m, struct msim_task *t, uint64_t now) {
    enum msim_step s = t->step;
    t->step = MSIM_STEP_NONE;
    switch (s) {
    case MSIM_STEP_STARTING:
        task_update(m, t, MESOS_TASK_STARTING, NULL, NULL);
        t->step = MSIM_STEP_RUNNING;
        t->step_at = now + m->cfg.starting_ms;
        break;
    case MSIM_STEP_RUNNING:
        task_update(m, t, MESOS_TASK_RUNNING, NULL, NULL);
        if (t->run_s >= 0) {
            t->step = MSIM_STEP_FINISH;
            t->step_at = now + (uint64_t)(t->run_s * 1000.0);
        }
        break;
    case MSIM_STEP_FINISH:
        if (t->fail) task_update(m, t, MESOS_TASK_FAILED, "REASON_COMMAND_EXECUTOR_FAILED", "Command exited with status 1");
        else task_update(m, t, MESOS_TASK_FINISHED, NULL, "Command exited with status 0");
        break;
    case MSIM_STEP_KILLED:
        task_update(m, t, MESOS_TASK_KILLED, NULL, "Command terminated with signal Terminated");
        break;
    default:
        break;
    }
}

/* ---- reconciliation (the master's rules, by what it knows) ---- */
static void reconcile_latest(struct msim *m, struct msim_task *t) {
    msim_master_update(m, t->fw, t->id, task_agent_id(t), t->state, "REASON_RECONCILIATION",
                       "Reconciliation: Latest task state");
}

void msim_reconcile(struct msim *m, struct msim_framework *fw, const json_t *tasks) {
    if (json_array_size(tasks) == 0) { /* implicit: every task the master knows */
        const char *k;
        void *v;
        size_t pos = 0;
        while (strmap_next(&fw->tasks, &pos, &k, &v)) reconcile_latest(m, v);
        return;
    }
    size_t i;
    const json_t *e;
    json_array_foreach(tasks, i, e) {
        const char *tid = mesos_id_get(e, "task_id"), *aid = mesos_id_get(e, "agent_id");
        if (!tid) continue;
        struct msim_task *t = strmap_get(&fw->tasks, tid);
        if (t) {
            reconcile_latest(m, t);
            continue;
        }
        struct msim_agent *a = aid ? strmap_get(&m->agent_by_id, aid) : NULL;
        enum mesos_task_state st;
        const char *msg;
        if (a && a->state == MSIM_AGENT_ACTIVE)
            st = MESOS_TASK_GONE, msg = "Reconciliation: Task is unknown to the agent";
        else if (a && a->state == MSIM_AGENT_UNREACHABLE)
            st = MESOS_TASK_UNREACHABLE, msg = "Reconciliation: Task is unreachable";
        else if (a)
            st = MESOS_TASK_GONE_BY_OPERATOR, msg = "Reconciliation: Task is gone";
        else
            st = MESOS_TASK_UNKNOWN, msg = "Reconciliation: Task is unknown";
        if (!fw->partition_aware) st = MESOS_TASK_LOST;
        msim_master_update(m, fw, tid, aid, st, "REASON_RECONCILIATION", msg);
    }
}

/* ---- agents ---- */
static void agent_rescind(struct msim *m, struct msim_agent *a) {
    if (a->offer) msim_offer_release(m, a->offer, true, 0);
}

static void agent_failure(struct msim *m, struct msim_agent *a) {
    for (int i = 0; i < m->nfws; i++) msim_send(m, m->fws[i], mesos_event_failure(a->id));
}

void msim_agent_unreachable(struct msim *m, struct msim_agent *a) {
    if (a->state != MSIM_AGENT_ACTIVE) return;
    a->state = MSIM_AGENT_UNREACHABLE;
    agent_rescind(m, a);
    char msg[160];
    snprintf(msg, sizeof msg, "Agent %s is unreachable", a->hostname);
    for (struct msim_task *t = a->tasks, *next; t; t = next) {
        next = t->agent_next;
        bool was_terminal = mesos_task_state_terminal(t->state);
        free_updates(m, t); /* what the agent had not delivered is out of reach with it */
        t->step = MSIM_STEP_NONE;
        busy_del(m, t);
        if (was_terminal) {
            task_remove(m, t);
            continue;
        }
        enum mesos_task_state st = t->fw->partition_aware ? MESOS_TASK_UNREACHABLE : MESOS_TASK_LOST;
        t->state = st;
        msim_master_update(m, t->fw, t->id, a->id, st, "REASON_SLAVE_REMOVED", msg);
        if (st == MESOS_TASK_LOST) task_remove(m, t);
    }
    agent_failure(m, a);
    msim_log(m, "level=info event=unreachable agent=%s", a->id);
}

void msim_agent_gone(struct msim *m, struct msim_agent *a) {
    if (a->state == MSIM_AGENT_GONE) return;
    bool was_active = a->state == MSIM_AGENT_ACTIVE;
    a->state = MSIM_AGENT_GONE;
    agent_rescind(m, a);
    for (struct msim_task *t = a->tasks, *next; t; t = next) {
        next = t->agent_next;
        if (was_active && !mesos_task_state_terminal(t->state)) {
            enum mesos_task_state st = t->fw->partition_aware ? MESOS_TASK_GONE_BY_OPERATOR : MESOS_TASK_LOST;
            msim_master_update(m, t->fw, t->id, a->id, st, "REASON_SLAVE_REMOVED_BY_OPERATOR",
                               "Agent has been marked gone by the operator");
        }
        t->state = MESOS_TASK_GONE_BY_OPERATOR;
        task_remove(m, t);
    }
    if (was_active) agent_failure(m, a);
    msim_log(m, "level=info event=gone agent=%s", a->id);
}

void msim_agent_drain(struct msim *m, struct msim_agent *a) {
    if (a->drain != MSIM_DRAIN_NONE) return;
    a->drain = MSIM_DRAIN_DRAINING;
    a->deactivated = true;
    agent_rescind(m, a);
    for (struct msim_task *t = a->tasks; t; t = t->agent_next) msim_task_kill(m, t);
    if (a->ntasks == 0) a->drain = MSIM_DRAIN_DRAINED;
    msim_log(m, "level=info event=draining agent=%s tasks=%d", a->id, a->ntasks);
}

void msim_failover(struct msim *m) {
    if (!m->http[1]) return;
    m->leader = 1 - m->leader;
    for (int i = 0; i < m->nfws; i++) {
        struct msim_framework *fw = m->fws[i];
        if (fw->stream) msim_fw_disconnect(m, fw, true);
        fw->suppressed = false;
        memset(fw->refuse_until, 0, sizeof *fw->refuse_until * (size_t)m->nagents);
    }
    msim_log(m, "level=info event=failover leader_port=%d", mhttp_port(m->http[m->leader]));
}

json_t *msim_task_json(const struct msim_task *t) {
    json_t *j = json_pack("{s:s,s:o,s:o,s:o,s:s,s:o,s:[]}", "name", t->name, "task_id", mesos_id(t->id),
                          "framework_id", mesos_id(t->fw->id), "agent_id", mesos_id(task_agent_id(t)), "state",
                          mesos_task_state_name(t->state), "resources", mesos_resources_json(&t->res), "statuses");
    const json_t *labels = json_object_get(t->info, "labels");
    if (j && labels) json_object_set(j, "labels", (json_t *)labels);
    const json_t *container = json_object_get(t->info, "container"); /* a master's Task carries it too */
    if (j && container) json_object_set(j, "container", (json_t *)container);
    return j;
}

/* ---- the tick ---- */
static void on_tick(uv_timer_t *h) {
    struct msim *m = h->data;
    uint64_t now = uv_now(m->loop);
    if (now >= m->next_alloc) {
        allocate(m);
        m->next_alloc = now + m->cfg.allocation_ms;
    }
    for (int i = 0; i < m->nfws; i++) {
        struct msim_framework *fw = m->fws[i];
        if (fw->stream && now >= fw->next_heartbeat) {
            msim_send(m, fw, mesos_event_heartbeat());
            m->stats.heartbeats++;
            fw->next_heartbeat = now + (uint64_t)(m->cfg.heartbeat_s * 1000);
        } else if (!fw->stream && (double)(now - fw->disconnected_at) > fw->failover_timeout * 1000.0) {
            msim_fw_remove(m, fw); /* failover timeout: the framework and its tasks are gone */
            i--;
        }
    }
    /* the busy tasks whose tick came: a step due, a resend due (with a stream to send it on) */
    for (uint64_t last = now / TICK_MS; m->wtick <= last;) {
        struct msim_task **slot = &m->wheel[m->wtick % MSIM_WHEEL];
        m->wtick++; /* what is filed from here on goes to a later tick */
        struct msim_task *t;
        while ((t = *slot)) {
            wheel_unlink(m, t);
            if (t->step != MSIM_STEP_NONE && now >= t->step_at) task_step(m, t, now);
            if (t->uq && t->fw->stream && now >= t->retry_at) task_send_head(m, t);
            if (t->step == MSIM_STEP_NONE && !t->uq) busy_del(m, t);
            else wheel_file(m, t);
        }
    }
}

/* ---- start and stop ---- */
static void on_request(void *ud, const struct mhttp_req *req) {
    struct msim *m = ud;
    const char *p = req->path;
    if (!strncmp(p, "/master/", 8)) p += 7; /* the master's endpoints also live under /master */
    if (!strcmp(p, "/api/v1/scheduler")) msim_scheduler_call(m, req);
    else if (!strcmp(p, "/api/v1")) msim_operator_call(m, req);
    else if (!strncmp(p, "/sim/", 5)) msim_hook(m, req);
    else msim_reply_text(req, 404, "");
}

static void parse_attrs(struct msim_agent *a, const char *spec, int zones) {
    size_t off = 0;
    if (spec) {
        snprintf(a->attr_buf, sizeof a->attr_buf, "%s", spec);
        off = strlen(a->attr_buf) + 1;
        char *save = NULL;
        for (char *kv = strtok_r(a->attr_buf, ",", &save); kv && a->nattrs < MSIM_MAX_ATTRS - 1;
             kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) continue;
            *eq = 0;
            a->attrs[a->nattrs++] = (struct mesos_attr){kv, eq + 1};
        }
    }
    if (zones > 0 && off + 32 < sizeof a->attr_buf) {
        char *z = a->attr_buf + off;
        snprintf(z, 32, "zone-%d", a->index % zones);
        a->attrs[a->nattrs++] = (struct mesos_attr){"zone", z};
    }
}

int msim_start(uv_loop_t *loop, const struct msim_config *cfg, struct msim **out, char *err, size_t errlen) {
    struct msim *m = calloc(1, sizeof *m);
    if (!m) return -ENOMEM;
    m->loop = loop;
    m->cfg = *cfg;
    if (cfg->master_id) snprintf(m->master_id, sizeof m->master_id, "%s", cfg->master_id);
    else {
        unsigned char u[16];
        new_uuid(m, u);
        uuid_string(u, m->master_id);
    }
    m->nagents = cfg->agents;
    m->agents = calloc((size_t)cfg->agents + 1, sizeof *m->agents);
    m->completed = calloc(MSIM_COMPLETED_KEEP, sizeof *m->completed);
    if (!m->agents || !m->completed) {
        msim_free(m);
        return -ENOMEM;
    }
    for (int i = 0; i < m->nagents; i++) {
        struct msim_agent *a = &m->agents[i];
        a->index = i;
        snprintf(a->id, sizeof a->id, "%s-S%d", m->master_id, i);
        snprintf(a->hostname, sizeof a->hostname, "%.40s%d", cfg->hostname_prefix, i);
        a->total = cfg->agent_res;
        a->registered_time = msim_wall();
        parse_attrs(a, cfg->attributes, cfg->zones);
        if (strmap_put(&m->agent_by_id, a->id, a, NULL)) {
            msim_free(m);
            return -ENOMEM;
        }
    }
    for (int i = 0; i < 2; i++) {
        int port = i == 0 ? cfg->port : cfg->standby_port;
        if (port < 0) continue;
        struct mhttp_config hc = {.addr = cfg->addr, .port = port, .index = i, .max_body = cfg->max_body,
                                  .idle_ms = cfg->conn_idle_ms, .handler = on_request, .ud = m};
        int rc = mhttp_listen(loop, &hc, &m->http[i], err, errlen);
        if (rc) {
            if (m->http[0]) mhttp_stop(m->http[0]);
            m->http[0] = NULL;
            msim_free(m);
            return rc;
        }
    }
    uv_timer_init(loop, &m->tick);
    uv_check_init(loop, &m->flush);
    m->tick.data = m->flush.data = m;
    m->wtick = uv_now(loop) / TICK_MS;
    uv_timer_start(&m->tick, on_tick, TICK_MS, TICK_MS);
    if (cfg->chunk_bytes) uv_check_start(&m->flush, on_flush);
    m->next_alloc = uv_now(loop);
    *out = m;
    return 0;
}

int msim_port(const struct msim *m, int which) { return m->http[which] ? mhttp_port(m->http[which]) : -1; }

static void on_closed(uv_handle_t *h) { (void)h; }

void msim_stop(struct msim *m) {
    if (m->stopping) return;
    m->stopping = true;
    for (int i = 0; i < m->nfws; i++)
        if (m->fws[i]->stream) {
            mhttp_stream_detach(m->fws[i]->stream);
            m->fws[i]->stream = NULL;
        }
    for (int i = 0; i < 2; i++)
        if (m->http[i]) mhttp_stop(m->http[i]);
    uv_close((uv_handle_t *)&m->tick, on_closed);
    uv_close((uv_handle_t *)&m->flush, on_closed);
}

void msim_free(struct msim *m) {
    if (!m) return;
    while (m->nfws) msim_fw_remove(m, m->fws[m->nfws - 1]);
    const char *k;
    void *v;
    size_t pos = 0;
    while (strmap_next(&m->offers, &pos, &k, &v)) free(v);
    strmap_free(&m->offers);
    strmap_free(&m->agent_by_id);
    strmap_free(&m->removed_fws);
    free(m->fws);
    free(m->agents);
    free(m->completed);
    free(m);
}
