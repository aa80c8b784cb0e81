/* The v1 scheduler API of the simulated master (msim.h): POST
 * /api/v1/scheduler, checked in the order a Mesos 1.x master checks it,
 * answered with its status codes and messages. */
#include "msim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"
#include "recordio.h"

#define TEXT "text/plain; charset=utf-8"

void msim_reply_text(const struct mhttp_req *req, int status, const char *text) {
    mhttp_reply(req->conn, status, text && *text ? TEXT : NULL, status == 405 ? "Allow: POST\r\n" : NULL, text,
                text ? strlen(text) : 0);
}

void msim_reply_json(const struct mhttp_req *req, int status, json_t *v) {
    size_t len = 0;
    char *body = v ? jdump(v, JSON_COMPACT, &len) : NULL;
    json_decref(v);
    if (!body) {
        msim_reply_text(req, 500, "out of memory");
        return;
    }
    mhttp_reply(req->conn, status, "application/json", NULL, body, len);
    free(body);
}

bool msim_is_leader(struct msim *m, const struct mhttp_req *req) {
    if (req->listener == m->leader) return true;
    /* A master that does not lead redirects to the one that does, with a
     * scheme-relative Location, as Mesos' masters do. */
    char loc[160];
    snprintf(loc, sizeof loc, "Location: //%s:%d%s\r\n", m->cfg.addr, mhttp_port(m->http[m->leader]), req->path);
    mhttp_reply(req->conn, 307, NULL, loc, NULL, 0);
    return false;
}

/* Whether the Accept header lets the master answer in JSON. */
static bool accepts_json(const char *accept) {
    if (!accept || !*accept) return true;
    return strstr(accept, "application/json") || strstr(accept, "*/*") || strstr(accept, "application/*");
}

/* The request's body as a JSON Call, or NULL with the reply sent. Shared with the operator API. */
json_t *msim_read_call(struct msim *m, const struct mhttp_req *req, const char *what);
json_t *msim_read_call(struct msim *m, const struct mhttp_req *req, const char *what) {
    if (strcmp(req->method, "POST")) {
        char msg[128];
        snprintf(msg, sizeof msg, "Expecting one of { 'POST' }, but received '%.16s'", req->method);
        msim_reply_text(req, 405, msg);
        return NULL;
    }
    if (!req->content_type) {
        msim_reply_text(req, 400, "Expecting 'Content-Type' to be present");
        return NULL;
    }
    /* The master compares the header as it is: parameters make it another type. */
    if (!strcmp(req->content_type, "application/x-protobuf")) {
        msim_reply_text(req, 415, "mesos-master-sim speaks JSON only: use 'Content-Type: application/json'");
        return NULL;
    }
    if (strcmp(req->content_type, "application/json")) {
        msim_reply_text(req, 415, "Expecting 'Content-Type' of application/json or application/x-protobuf");
        return NULL;
    }
    json_error_t jerr;
    json_t *root = jparse_loadb(req->body, req->body_len, 0, &jerr);
    if (!root) {
        char msg[256];
        snprintf(msg, sizeof msg, "Failed to parse body into JSON: %s", jerr.text);
        msim_reply_text(req, 400, msg);
        m->stats.bad_calls++;
        return NULL;
    }
    (void)what;
    return root;
}

static void call_accept(struct msim *m, struct msim_framework *fw, const json_t *body) {
    const char *ids[64];
    int n = 0;
    char err[256];
    mesos_call_offer_ids(body, ids, 64, &n, err, sizeof err);
    double refuse = mesos_call_refuse_seconds(body);
    /* The offers: all known, this framework's, one agent, no repeats. */
    struct msim_offer *offers[64] = {0};
    int nvalid = 0;
    char invalid[200] = "";
    if (n == 0) snprintf(invalid, sizeof invalid, "No offers specified");
    if (n > 64) snprintf(invalid, sizeof invalid, "Too many offers in one call (the simulator takes 64)");
    for (int i = 0; i < n && i < 64; i++) {
        struct msim_offer *o = strmap_get(&m->offers, ids[i]);
        if (!o || o->fw != fw) {
            if (!*invalid) snprintf(invalid, sizeof invalid, "Offer %.100s is no longer valid", ids[i]);
            continue;
        }
        bool dup = false;
        for (int j = 0; j < nvalid; j++) dup |= offers[j] == o;
        if (dup) {
            if (!*invalid) snprintf(invalid, sizeof invalid, "Duplicate offer %.100s in the same accept", ids[i]);
            continue;
        }
        if (nvalid && o->agent != offers[0]->agent && !*invalid)
            snprintf(invalid, sizeof invalid, "Aggregated offers must belong to one single agent");
        offers[nvalid++] = o;
    }
    const json_t *ops = json_object_get(body, "operations");
    if (*invalid) {
        for (int i = 0; i < nvalid; i++) msim_offer_release(m, offers[i], false, 0);
        char msg[256];
        snprintf(msg, sizeof msg, "Task launched with invalid offers: %s", invalid);
        size_t i, j;
        const json_t *op, *ti;
        json_array_foreach(ops, i, op) {
            json_array_foreach(json_object_get(json_object_get(op, "launch"), "task_infos"), j, ti) {
                const char *tid = mesos_id_get(ti, "task_id");
                if (tid)
                    msim_master_update(m, fw, tid, mesos_id_get(ti, "agent_id"),
                                       fw->partition_aware ? MESOS_TASK_DROPPED : MESOS_TASK_LOST,
                                       "REASON_INVALID_OFFERS", msg);
            }
        }
        return;
    }
    if (nvalid == 0) return; /* not reached: no valid offer is an invalid call */
    struct msim_agent *a = offers[0]->agent;
    struct mesos_scalars avail = {0};
    for (int i = 0; i < nvalid; i++) {
        mesos_scalars_add(&avail, &offers[i]->res);
        msim_offer_release(m, offers[i], false, 0);
    }
    size_t i, j;
    const json_t *op, *ti;
    json_array_foreach(ops, i, op) {
        const char *type = json_string_value(json_object_get(op, "type"));
        if (!type || strcmp(type, "LAUNCH")) {
            msim_log(m, "level=warn framework=%s msg=\"operation %.32s is not simulated: ignored\"", fw->id,
                     type ? type : "?");
            continue;
        }
        const json_t *infos = json_object_get(json_object_get(op, "launch"), "task_infos");
        json_array_foreach(infos, j, ti) {
            struct mesos_task_decl d;
            char msg[300] = "";
            const char *tid = mesos_id_get(ti, "task_id");
            if (mesos_task_info_parse(ti, &d, err, sizeof err)) snprintf(msg, sizeof msg, "%s", err);
            else if (strcmp(d.agent_id, a->id))
                snprintf(msg, sizeof msg, "Task uses agent %.80s but the offers are on agent %s", d.agent_id, a->id);
            else if (strmap_get(&fw->tasks, d.task_id)) snprintf(msg, sizeof msg, "Task has duplicate ID: %.100s", d.task_id);
            else if (!json_array_size(json_object_get(ti, "resources"))) snprintf(msg, sizeof msg, "Task uses no resources");
            else if (d.other_resources || !mesos_scalars_fit(&d.res, &avail))
                snprintf(msg, sizeof msg,
                         "Task uses more resources (cpus %g, mem %g, disk %g, gpus %g%s) than available (cpus %g, "
                         "mem %g, disk %g, gpus %g)",
                         d.res.cpus, d.res.mem, d.res.disk, d.res.gpus, d.other_resources ? ", and others" : "",
                         avail.cpus, avail.mem, avail.disk, avail.gpus);
            else if (m->ntasks >= m->cfg.max_tasks) snprintf(msg, sizeof msg, "The simulator holds no more tasks");
            if (*msg) {
                if (tid) msim_master_update(m, fw, tid, a->id, MESOS_TASK_ERROR, "REASON_TASK_INVALID", msg);
                continue;
            }
            if (msim_task_launch(m, fw, a, &d)) mesos_scalars_sub(&avail, &d.res);
        }
    }
    /* What was offered and not used goes back, refused to this framework for a while. */
    if (refuse > 0) {
        double ms = refuse * 1000.0 > 1e12 ? 1e12 : refuse * 1000.0;
        fw->refuse_until[a->index] = uv_now(m->loop) + (uint64_t)ms;
    }
}

static void call_decline(struct msim *m, struct msim_framework *fw, const json_t *body) {
    const char *ids[1];
    int n = 0;
    char err[128];
    mesos_call_offer_ids(body, ids, 0, &n, err, sizeof err);
    double refuse = mesos_call_refuse_seconds(body);
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(body, "offer_ids"), i, e) {
        struct msim_offer *o = strmap_get(&m->offers, json_string_value(json_object_get(e, "value")));
        if (!o || o->fw != fw) continue; /* the master ignores offers that are gone */
        m->stats.offers_declined++;
        msim_offer_release(m, o, false, refuse);
    }
}

static void call_kill(struct msim *m, struct msim_framework *fw, const json_t *body) {
    const char *tid = mesos_id_get(body, "task_id");
    struct msim_task *t = strmap_get(&fw->tasks, tid);
    if (t && t->state != MESOS_TASK_UNREACHABLE) {
        msim_task_kill(m, t);
        return;
    }
    /* An unknown task: the master answers with what reconciliation would say. */
    json_t *one = json_pack("[{s:O}]", "task_id", json_object_get(body, "task_id"));
    if (one && json_object_get(body, "agent_id"))
        json_object_set(json_array_get(one, 0), "agent_id", json_object_get(body, "agent_id"));
    msim_reconcile(m, fw, one);
    json_decref(one);
}

static void call_acknowledge(struct msim *m, struct msim_framework *fw, const json_t *body) {
    struct msim_task *t = strmap_get(&fw->tasks, mesos_id_get(body, "task_id"));
    unsigned char u[MESOS_UUID_LEN];
    if (!t || mesos_uuid_decode(json_string_value(json_object_get(body, "uuid")), u)) {
        msim_log(m, "level=warn framework=%s msg=\"acknowledgement for an unknown task: ignored\"", fw->id);
        m->stats.acks_ignored++;
        return;
    }
    msim_task_ack(m, t, u);
}

static void subscribe(struct msim *m, const struct mhttp_req *req, const struct mesos_call *call) {
    const json_t *info = json_object_get(call->body, "framework_info");
    const char *id = mesos_id_get(info, "id");
    if (id && strmap_get(&m->removed_fws, id)) {
        /* A torn-down framework may not come back: the stream opens with ERROR and ends. */
        char extra[96];
        msim_new_stream_id(m, extra);
        mhttp_stream_start(req->conn, "application/json", extra, NULL, NULL);
        json_t *ev = mesos_event_error("Framework has been removed");
        size_t len = 0, flen = 0, fcap = 0;
        char *text = ev ? jdump(ev, JSON_COMPACT, &len) : NULL, *framed = NULL;
        if (text && recordio_encode(&framed, &flen, &fcap, text, len) == 0) mhttp_stream_chunk(req->conn, framed, flen);
        free(text);
        free(framed);
        json_decref(ev);
        mhttp_stream_end(req->conn);
        return;
    }
    struct msim_framework *fw = msim_fw_find(m, id);
    /* An id the master does not know is taken as is: after a master failover
     * the new leader learns frameworks as they come back. */
    if (!fw) fw = msim_fw_add(m, id);
    if (!fw) {
        msim_reply_text(req, 503, "mesos-master-sim: too many frameworks");
        return;
    }
    msim_fw_connect(m, fw, req, info);
}

void msim_scheduler_call(struct msim *m, const struct mhttp_req *req) {
    m->stats.calls++;
    if (!msim_is_leader(m, req)) return;
    json_t *root = msim_read_call(m, req, "Call");
    if (!root) return;
    struct mesos_call call;
    char err[300];
    if (mesos_call_parse(root, &call, err, sizeof err)) {
        m->stats.bad_calls++;
        msim_reply_text(req, 400, err);
        json_decref(root);
        return;
    }
    if (call.type == MESOS_CALL_SUBSCRIBE) {
        if (!accepts_json(req->accept))
            msim_reply_text(req, 406, "Expecting 'Accept' to allow application/json (the simulator streams JSON only)");
        else if (req->stream_id)
            msim_reply_text(req, 400, "Subscribe calls should not include the 'Mesos-Stream-Id' header");
        else
            subscribe(m, req, &call);
        json_decref(root);
        return;
    }
    struct msim_framework *fw = msim_fw_find(m, call.framework_id);
    char msg[400];
    if (!fw) {
        msim_reply_text(req, 400, "Framework cannot be found");
    } else if (!fw->stream) {
        msim_reply_text(req, 403, "Framework is not subscribed");
    } else if (!req->stream_id) {
        msim_reply_text(req, 400, "All non-subscribe calls should include the 'Mesos-Stream-Id' header");
    } else if (strcmp(req->stream_id, fw->stream_id)) {
        snprintf(msg, sizeof msg,
                 "The stream ID '%.128s' included in this request didn't match the stream ID currently associated "
                 "with framework ID %s",
                 req->stream_id, fw->id);
        msim_reply_text(req, 400, msg);
    } else {
        switch (call.type) {
        case MESOS_CALL_TEARDOWN:
            msim_fw_remove(m, fw);
            break;
        case MESOS_CALL_ACCEPT:
            call_accept(m, fw, call.body);
            break;
        case MESOS_CALL_DECLINE:
            call_decline(m, fw, call.body);
            break;
        case MESOS_CALL_REVIVE:
            m->stats.revives++;
            fw->suppressed = false;
            memset(fw->refuse_until, 0, sizeof *fw->refuse_until * (size_t)m->nagents);
            break;
        case MESOS_CALL_SUPPRESS:
            fw->suppressed = true;
            break;
        case MESOS_CALL_KILL:
            call_kill(m, fw, call.body);
            break;
        case MESOS_CALL_ACKNOWLEDGE:
            call_acknowledge(m, fw, call.body);
            break;
        case MESOS_CALL_RECONCILE:
            msim_reconcile(m, fw, json_object_get(call.body, "tasks"));
            break;
        case MESOS_CALL_UNKNOWN:
            msim_reply_text(req, 501, "");
            json_decref(root);
            return;
        default: /* SHUTDOWN, MESSAGE, REQUEST, inverse offers, ...: accepted, not simulated */
            msim_log(m, "level=info framework=%s msg=\"call %s accepted, not simulated\"", fw->id,
                     mesos_call_type_name(call.type));
            break;
        }
        msim_reply_text(req, 202, NULL);
    }
    json_decref(root);
}
