/* The operator API of the simulated master (POST /api/v1: the calls the
 * host manager's migration needs) and the simulator's test hooks (POST
 * /sim/...: faults a real cluster produces on its own). */
#include "msim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *msim_read_call(struct msim *m, const struct mhttp_req *req, const char *what);

static const char *drain_name(enum msim_drain d) {
    return d == MSIM_DRAIN_DRAINING ? "DRAINING" : d == MSIM_DRAIN_DRAINED ? "DRAINED" : NULL;
}

static json_t *agent_json(const struct msim_agent *a) {
    json_t *attrs = json_array();
    for (int i = 0; i < a->nattrs; i++)
        json_array_append_new(attrs, json_pack("{s:s,s:s,s:{s:s}}", "name", a->attrs[i].name, "type", "TEXT", "text",
                                               "value", a->attrs[i].text));
    struct mesos_scalars offered = a->offer ? a->offer->res : (struct mesos_scalars){0};
    json_t *j = json_pack("{s:{s:o,s:s,s:i,s:o,s:o},s:b,s:b,s:s,s:{s:I},s:o,s:o,s:o}", "agent_info", "id",
                          mesos_id(a->id), "hostname", a->hostname, "port", 5051, "resources",
                          mesos_resources_json(&a->total), "attributes", attrs, "active", a->state == MSIM_AGENT_ACTIVE,
                          "deactivated", a->deactivated, "version", "1.11.0", "registered_time", "nanoseconds",
                          (json_int_t)(a->registered_time * 1e9), "total_resources", mesos_resources_json(&a->total),
                          "allocated_resources", mesos_resources_json(&a->used), "offered_resources",
                          mesos_resources_json(&offered));
    const char *d = drain_name(a->drain);
    if (j && d) json_object_set_new(j, "drain_info", json_pack("{s:s}", "state", d));
    return j;
}

static json_t *get_agents(struct msim *m) {
    json_t *agents = json_array(), *gone = json_array();
    for (int i = 0; i < m->nagents; i++) {
        const struct msim_agent *a = &m->agents[i];
        if (a->state == MSIM_AGENT_ACTIVE) json_array_append_new(agents, agent_json(a));
        else if (a->state == MSIM_AGENT_UNREACHABLE)
            json_array_append_new(gone, json_pack("{s:o,s:s}", "id", mesos_id(a->id), "hostname", a->hostname));
    }
    return json_pack("{s:s,s:{s:o,s:o,s:[]}}", "type", "GET_AGENTS", "get_agents", "agents", agents,
                     "unreachable_agents", gone, "recovered_agents");
}

static json_t *get_tasks(struct msim *m) {
    json_t *tasks = json_array(), *unreachable = json_array(), *completed = json_array();
    for (int i = 0; i < m->nfws; i++) {
        const char *k;
        void *v;
        size_t pos = 0;
        while (strmap_next(&m->fws[i]->tasks, &pos, &k, &v)) {
            const struct msim_task *t = v;
            json_array_append_new(t->state == MESOS_TASK_UNREACHABLE ? unreachable : tasks, msim_task_json(t));
        }
    }
    for (int i = 0; i < m->ncompleted; i++) {
        const struct msim_completed *c = &m->completed[i];
        json_array_append_new(completed, json_pack("{s:o,s:o,s:o,s:s}", "task_id", mesos_id(c->task_id),
                                                   "framework_id", mesos_id(c->fw_id), "agent_id",
                                                   mesos_id(c->agent_id), "state", mesos_task_state_name(c->state)));
    }
    return json_pack("{s:s,s:{s:o,s:o,s:o}}", "type", "GET_TASKS", "get_tasks", "tasks", tasks, "unreachable_tasks",
                     unreachable, "completed_tasks", completed);
}

static json_t *get_frameworks(struct msim *m) {
    json_t *fws = json_array();
    for (int i = 0; i < m->nfws; i++) {
        const struct msim_framework *fw = m->fws[i];
        json_t *info = json_deep_copy(fw->info);
        if (info) json_object_set_new(info, "id", mesos_id(fw->id));
        json_array_append_new(fws, json_pack("{s:o,s:b,s:b,s:b,s:{s:I}}", "framework_info", info ? info : json_object(),
                                             "active", fw->stream && !fw->suppressed, "connected", fw->stream != NULL,
                                             "recovered", false, "registered_time", "nanoseconds",
                                             (json_int_t)(fw->registered_time * 1e9)));
    }
    return json_pack("{s:s,s:{s:o}}", "type", "GET_FRAMEWORKS", "get_frameworks", "frameworks", fws);
}

/* The agent named by call[member].agent_id, or NULL with a 400 sent. */
static struct msim_agent *call_agent(struct msim *m, const struct mhttp_req *req, const json_t *call, const char *member) {
    const char *id = mesos_id_get(json_object_get(call, member), "agent_id");
    if (!id) {
        char msg[128];
        snprintf(msg, sizeof msg, "Expecting '%s.agent_id' to be present", member);
        msim_reply_text(req, 400, msg);
        return NULL;
    }
    struct msim_agent *a = strmap_get(&m->agent_by_id, id);
    if (!a) {
        char msg[400];
        snprintf(msg, sizeof msg, "Unknown agent %.256s", id);
        msim_reply_text(req, 400, msg);
    }
    return a;
}

/* Whether name is a master::Call.Type of Mesos 1.x (the ones not simulated get 501). */
static bool master_call_known(const char *name) {
    static const char *const known[] = {
        "UNKNOWN", "GET_HEALTH", "GET_FLAGS", "GET_VERSION", "GET_METRICS", "GET_LOGGING_LEVEL",
        "SET_LOGGING_LEVEL", "LIST_FILES", "READ_FILE", "GET_STATE", "GET_AGENTS", "GET_FRAMEWORKS",
        "GET_EXECUTORS", "GET_OPERATIONS", "GET_TASKS", "GET_ROLES", "GET_WEIGHTS", "UPDATE_WEIGHTS",
        "GET_MASTER", "SUBSCRIBE", "RESERVE_RESOURCES", "UNRESERVE_RESOURCES", "CREATE_VOLUMES",
        "DESTROY_VOLUMES", "GROW_VOLUME", "SHRINK_VOLUME", "GET_MAINTENANCE_STATUS", "GET_MAINTENANCE_SCHEDULE",
        "UPDATE_MAINTENANCE_SCHEDULE", "START_MAINTENANCE", "STOP_MAINTENANCE", "DRAIN_AGENT",
        "DEACTIVATE_AGENT", "REACTIVATE_AGENT", "GET_QUOTA", "UPDATE_QUOTA", "SET_QUOTA", "REMOVE_QUOTA",
        "TEARDOWN", "MARK_AGENT_GONE"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(known[i], name)) return true;
    return false;
}

void msim_operator_call(struct msim *m, const struct mhttp_req *req) {
    if (!msim_is_leader(m, req)) return;
    json_t *call = msim_read_call(m, req, "master::Call");
    if (!call) return;
    const char *type = json_string_value(json_object_get(call, "type"));
    struct msim_agent *a;
    if (!json_is_object(call) || !type) {
        msim_reply_text(req, 400, "Failed to validate master::Call: Expecting 'type' to be present");
    } else if (!strcmp(type, "GET_HEALTH")) {
        msim_reply_json(req, 200, json_pack("{s:s,s:{s:b}}", "type", "GET_HEALTH", "get_health", "healthy", 1));
    } else if (!strcmp(type, "GET_AGENTS")) {
        msim_reply_json(req, 200, get_agents(m));
    } else if (!strcmp(type, "GET_TASKS")) {
        msim_reply_json(req, 200, get_tasks(m));
    } else if (!strcmp(type, "GET_FRAMEWORKS")) {
        msim_reply_json(req, 200, get_frameworks(m));
    } else if (!strcmp(type, "DRAIN_AGENT")) {
        if ((a = call_agent(m, req, call, "drain_agent"))) {
            if (a->state != MSIM_AGENT_ACTIVE) msim_reply_text(req, 400, "Agent is not registered");
            else {
                msim_agent_drain(m, a);
                msim_reply_text(req, 200, NULL);
            }
        }
    } else if (!strcmp(type, "DEACTIVATE_AGENT") || !strcmp(type, "REACTIVATE_AGENT")) {
        bool deact = type[0] == 'D';
        if ((a = call_agent(m, req, call, deact ? "deactivate_agent" : "reactivate_agent"))) {
            if (!deact && a->drain != MSIM_DRAIN_NONE) a->drain = MSIM_DRAIN_NONE;
            a->deactivated = deact;
            if (deact && a->offer) msim_offer_release(m, a->offer, true, 0);
            msim_reply_text(req, 200, NULL);
        }
    } else if (!strcmp(type, "MARK_AGENT_GONE")) {
        if ((a = call_agent(m, req, call, "mark_agent_gone"))) {
            msim_agent_gone(m, a);
            msim_reply_text(req, 200, NULL);
        }
    } else if (master_call_known(type)) {
        char msg[128];
        snprintf(msg, sizeof msg, "mesos-master-sim does not simulate %.64s", type);
        msim_reply_text(req, 501, msg);
    } else {
        msim_reply_text(req, 400, "Failed to convert JSON into Call protobuf: unknown master::Call.Type");
    }
    json_decref(call);
}

static json_t *sim_state(struct msim *m) {
    const struct msim_stats *s = &m->stats;
    int pending = m->pending_tasks; /* counted as queues fill and empty: the benchmarks poll this every 20 ms */
    unsigned long long writes = 0;
    for (int i = 0; i < 2; i++)
        if (m->http[i]) writes += mhttp_writes(m->http[i]);
    return json_pack("{s:i,s:i,s:i,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I}", "leader_port",
                     mhttp_port(m->http[m->leader]), "frameworks", m->nfws, "tasks", m->ntasks, "offers",
                     (int)strmap_count(&m->offers), "tasks_with_pending_updates", pending, "offers_sent",
                     (json_int_t)s->offers_sent, "offers_declined", (json_int_t)s->offers_declined, "offers_rescinded",
                     (json_int_t)s->offers_rescinded, "tasks_launched", (json_int_t)s->tasks_launched, "updates_sent",
                     (json_int_t)s->updates_sent, "update_resends", (json_int_t)s->update_resends, "acks",
                     (json_int_t)s->acks, "heartbeats", (json_int_t)s->heartbeats, "calls", (json_int_t)s->calls,
                     "bad_calls", (json_int_t)s->bad_calls, "revives", (json_int_t)s->revives, "acks_ignored", (json_int_t)s->acks_ignored, "running_acks", (json_int_t)s->running_acks,
                     "last_running_ack", s->last_running_ack, "writes", (json_int_t)writes);
}

void msim_hook(struct msim *m, const struct mhttp_req *req) {
    const char *p = req->path + 5;
    if (!strcmp(p, "state")) {
        msim_reply_json(req, 200, sim_state(m));
        return;
    }
    if (strcmp(req->method, "POST")) {
        msim_reply_text(req, 405, "test hooks take POST");
        return;
    }
    json_error_t jerr;
    json_t *body = req->body_len ? json_loadb(req->body, req->body_len, 0, &jerr) : json_object();
    if (!json_is_object(body)) {
        json_decref(body);
        msim_reply_text(req, 400, "hook body: expecting a JSON object");
        return;
    }
    const char *fid = json_string_value(json_object_get(body, "framework_id"));
    const char *aid = json_string_value(json_object_get(body, "agent_id"));
    struct msim_agent *a = aid ? strmap_get(&m->agent_by_id, aid) : NULL;
    if (!strcmp(p, "drop-stream")) { /* the connection breaks, as on a network fault */
        int n = 0;
        for (int i = 0; i < m->nfws; i++)
            if ((!fid || !strcmp(fid, m->fws[i]->id)) && m->fws[i]->stream) msim_fw_disconnect(m, m->fws[i], true), n++;
        msim_reply_json(req, 200, json_pack("{s:i}", "dropped", n));
    } else if (!strcmp(p, "stall") || !strcmp(p, "inject")) {
        /* stall: the current stream stays open and carries nothing
         * (heartbeats included) for a while; inject: raw bytes written into the stream as
         * one chunk (a broken master's records). */
        struct msim_framework *fw = msim_fw_find(m, fid);
        const char *data = json_string_value(json_object_get(body, "data"));
        const json_t *secs = json_object_get(body, "seconds");
        if (!fw || !fw->stream) msim_reply_text(req, 404, "no connected framework with that framework_id");
        else if (p[0] == 's' && !json_is_number(secs)) msim_reply_text(req, 400, "stall: expecting \"seconds\"");
        else if (p[0] == 'i' && (!data || !*data)) msim_reply_text(req, 400, "inject: expecting a non-empty \"data\"");
        else {
            if (p[0] == 's') {
                double ms = json_number_value(secs) * 1000.0;
                fw->stall_until = uv_now(m->loop) + (uint64_t)(ms < 0 ? 0 : ms > 1e9 ? 1e9 : ms);
                fw->stall_stream = fw->stream; /* this connection only: a new one is not black-holed */
            } else {
                mhttp_stream_chunk(fw->stream, data, strlen(data));
                if (json_is_true(json_object_get(body, "end"))) mhttp_stream_end(fw->stream); /* a clean end, right after */
            }
            msim_reply_text(req, 200, NULL);
        }
    } else if (!strcmp(p, "failover")) {
        if (!m->http[1]) msim_reply_text(req, 409, "no standby port: start with --standby-port");
        else {
            msim_failover(m);
            msim_reply_json(req, 200, json_pack("{s:i}", "leader_port", mhttp_port(m->http[m->leader])));
        }
    } else if (!strcmp(p, "agent-unreachable") || !strcmp(p, "agent-gone")) {
        if (!a) msim_reply_text(req, 404, "unknown agent_id");
        else {
            if (p[6] == 'u') msim_agent_unreachable(m, a);
            else msim_agent_gone(m, a);
            msim_reply_text(req, 200, NULL);
        }
    } else {
        msim_reply_text(req, 404, "unknown hook");
    }
    json_decref(body);
}
