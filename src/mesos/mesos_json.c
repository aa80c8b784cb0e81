/* The v1 scheduler API's JSON (mesos_json.h): names of the enums, the
 * builders of calls and events, and the decoders with the master's checks. */
#include "mesos_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base64.h"
#include "jparse.h"

/* ---- enum names ---- */
static const char *const CALL_NAMES[] = {
    "UNKNOWN", "SUBSCRIBE", "TEARDOWN", "ACCEPT", "DECLINE", "REVIVE", "KILL", "SHUTDOWN", "ACKNOWLEDGE",
    "RECONCILE", "MESSAGE", "REQUEST", "SUPPRESS", "ACCEPT_INVERSE_OFFERS", "DECLINE_INVERSE_OFFERS",
    "ACKNOWLEDGE_OPERATION_STATUS", "RECONCILE_OPERATIONS", "UPDATE_FRAMEWORK"};
static const char *const EVENT_NAMES[] = {
    "UNKNOWN", "SUBSCRIBED", "OFFERS", "RESCIND", "UPDATE", "MESSAGE", "FAILURE", "ERROR", "HEARTBEAT",
    "INVERSE_OFFERS", "RESCIND_INVERSE_OFFER", "UPDATE_OPERATION_STATUS"};
static const char *const STATE_NAMES[] = {
    "TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_STAGING",
    "TASK_ERROR", "TASK_KILLING", "TASK_DROPPED", "TASK_UNREACHABLE", "TASK_GONE", "TASK_GONE_BY_OPERATOR",
    "TASK_UNKNOWN"};
static const char *const SOURCE_NAMES[] = {"SOURCE_MASTER", "SOURCE_AGENT", "SOURCE_EXECUTOR"};
#define NAMES_N(a) ((int)(sizeof a / sizeof a[0]))

static const char *name_of(const char *const *names, int n, int v) { return v >= 0 && v < n ? names[v] : NULL; }
static int parse_name(const char *const *names, int n, const char *s) {
    if (!s) return -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

const char *mesos_call_type_name(int t) { return name_of(CALL_NAMES, NAMES_N(CALL_NAMES), t); }
int mesos_call_type_parse(const char *s) { return parse_name(CALL_NAMES, NAMES_N(CALL_NAMES), s); }
const char *mesos_event_type_name(int t) { return name_of(EVENT_NAMES, NAMES_N(EVENT_NAMES), t); }
int mesos_event_type_parse(const char *s) { return parse_name(EVENT_NAMES, NAMES_N(EVENT_NAMES), s); }
const char *mesos_task_state_name(int t) { return name_of(STATE_NAMES, NAMES_N(STATE_NAMES), t); }
int mesos_task_state_parse(const char *s) { return parse_name(STATE_NAMES, NAMES_N(STATE_NAMES), s); }
const char *mesos_source_name(int s) { return name_of(SOURCE_NAMES, NAMES_N(SOURCE_NAMES), s); }

bool mesos_task_state_terminal(int s) {
    switch (s) {
    case MESOS_TASK_FINISHED: case MESOS_TASK_FAILED: case MESOS_TASK_KILLED: case MESOS_TASK_LOST:
    case MESOS_TASK_ERROR: case MESOS_TASK_DROPPED: case MESOS_TASK_GONE: case MESOS_TASK_GONE_BY_OPERATOR:
        return true;
    default:
        return false;
    }
}

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- small builders ---- */
json_t *mesos_id(const char *v) { return json_pack("{s:s}", "value", v ? v : ""); }

const char *mesos_id_get(const json_t *obj, const char *member) {
    const json_t *m = json_object_get(obj, member);
    const char *v = json_string_value(json_object_get(m, "value"));
    return v && strlen(v) <= MESOS_ID_MAX ? v : NULL;
}

/* Sets obj[k] = v, stealing v; false (and v freed) when v is NULL or the set fails. */
static bool put(json_t *obj, const char *k, json_t *v) { return v && json_object_set_new(obj, k, v) == 0; }
static bool push(json_t *arr, json_t *v) { return v && json_array_append_new(arr, v) == 0; }

static json_t *scalar(const char *name, double v) {
    return json_pack("{s:s,s:s,s:{s:f},s:s}", "name", name, "type", "SCALAR", "scalar", "value", v, "role", "*");
}

json_t *mesos_resources_json(const struct mesos_scalars *r) {
    json_t *a = json_array();
    if (!a) return NULL;
    const struct { const char *n; double v; } s[] = {{"cpus", r->cpus}, {"mem", r->mem}, {"disk", r->disk}, {"gpus", r->gpus}};
    for (size_t i = 0; i < 4; i++)
        if (s[i].v > 0 && !push(a, scalar(s[i].n, s[i].v))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* Mesos keeps scalars in fixed point with three decimals. */
static long long fixed(double v) { return llround(v * 1000.0); }

bool mesos_scalars_fit(const struct mesos_scalars *a, const struct mesos_scalars *b) {
    return fixed(a->cpus) <= fixed(b->cpus) && fixed(a->mem) <= fixed(b->mem) && fixed(a->disk) <= fixed(b->disk) &&
           fixed(a->gpus) <= fixed(b->gpus);
}
void mesos_scalars_add(struct mesos_scalars *a, const struct mesos_scalars *b) {
    a->cpus += b->cpus, a->mem += b->mem, a->disk += b->disk, a->gpus += b->gpus;
}
void mesos_scalars_sub(struct mesos_scalars *a, const struct mesos_scalars *b) {
    a->cpus -= b->cpus, a->mem -= b->mem, a->disk -= b->disk, a->gpus -= b->gpus;
    /* fixed-point drift must not leave -0.0001 behind */
    if (fixed(a->cpus) == 0) a->cpus = 0;
    if (fixed(a->mem) == 0) a->mem = 0;
    if (fixed(a->disk) == 0) a->disk = 0;
    if (fixed(a->gpus) == 0) a->gpus = 0;
}

int mesos_resources_parse(const json_t *arr, struct mesos_scalars *out, int *other, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (other) *other = 0;
    if (!arr) return 0;
    if (!json_is_array(arr)) return errf(err, errlen, "'resources' must be an array"), -1;
    if (json_array_size(arr) > 1000) return errf(err, errlen, "too many resources (more than 1000)"), -1;
    size_t i;
    const json_t *r;
    json_array_foreach(arr, i, r) {
        const char *name = json_string_value(json_object_get(r, "name"));
        const char *type = json_string_value(json_object_get(r, "type"));
        if (!json_is_object(r) || !name) return errf(err, errlen, "resources[%zu]: missing required field 'name'", i), -1;
        if (!type) return errf(err, errlen, "resources[%zu]: missing required field 'type'", i), -1;
        if (!strcmp(type, "SCALAR")) {
            const json_t *v = json_object_get(json_object_get(r, "scalar"), "value");
            if (!json_is_number(v)) return errf(err, errlen, "resources[%zu] '%s': SCALAR without scalar.value", i, name), -1;
            double d = json_number_value(v);
            if (!isfinite(d) || d < 0 || d > 1e15)
                return errf(err, errlen, "resources[%zu] '%s': invalid scalar value", i, name), -1;
            double *slot = !strcmp(name, "cpus") ? &out->cpus : !strcmp(name, "mem") ? &out->mem
                         : !strcmp(name, "disk") ? &out->disk : !strcmp(name, "gpus") ? &out->gpus : NULL;
            if (slot) *slot += d;
            else if (other) (*other)++;
        } else if (!strcmp(type, "RANGES") || !strcmp(type, "SET") || !strcmp(type, "TEXT")) {
            if (other) (*other)++;
        } else {
            return errf(err, errlen, "resources[%zu] '%s': unknown type '%s'", i, name, type), -1;
        }
    }
    return 0;
}

/* ---- calls ---- */
json_t *mesos_call_new(enum mesos_call_type type, const char *fid) {
    json_t *c = json_object();
    if (!c) return NULL;
    if ((fid && !put(c, "framework_id", mesos_id(fid))) || !put(c, "type", json_string(mesos_call_type_name(type)))) {
        json_decref(c);
        return NULL;
    }
    return c;
}

static json_t *strings(const char *const *v, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (!push(a, json_string(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *mesos_call_subscribe(const struct mesos_framework_info *fi) {
    json_t *c = mesos_call_new(MESOS_CALL_SUBSCRIBE, fi->id), *info = json_object(), *caps = json_array();
    bool ok = c && info && caps && put(info, "user", json_string(fi->user ? fi->user : "root")) &&
              put(info, "name", json_string(fi->name ? fi->name : "peloton")) &&
              (!fi->id || put(info, "id", mesos_id(fi->id))) && put(info, "roles", strings(fi->roles, fi->nroles)) &&
              put(info, "failover_timeout", json_real(fi->failover_timeout)) &&
              (!fi->hostname || put(info, "hostname", json_string(fi->hostname)));
    for (int i = 0; ok && i < fi->ncapabilities; i++) ok = push(caps, json_pack("{s:s}", "type", fi->capabilities[i]));
    if (ok) {
        ok = put(info, "capabilities", caps);
        caps = NULL;
        ok = ok && put(c, "subscribe", json_pack("{s:O}", "framework_info", info));
    }
    json_decref(caps);
    json_decref(info);
    if (!ok) json_decref(c);
    return ok ? c : NULL;
}

static json_t *id_array(const char *const *ids, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (!push(a, mesos_id(ids[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *mesos_call_accept(const char *fid, const char *const *offer_ids, int n, json_t *task_infos, double refuse) {
    json_t *c = mesos_call_new(MESOS_CALL_ACCEPT, fid), *b = json_object();
    bool ok = c && b && task_infos && put(b, "offer_ids", id_array(offer_ids, n)) &&
              put(b, "operations", json_pack("[{s:s,s:{s:O}}]", "type", "LAUNCH", "launch", "task_infos", task_infos)) &&
              (refuse < 0 || put(b, "filters", json_pack("{s:f}", "refuse_seconds", refuse)));
    json_decref(task_infos);
    if (ok) {
        ok = put(c, "accept", b);
        b = NULL;
    }
    json_decref(b);
    if (!ok) json_decref(c);
    return ok ? c : NULL;
}

json_t *mesos_call_decline(const char *fid, const char *const *offer_ids, int n, double refuse) {
    json_t *c = mesos_call_new(MESOS_CALL_DECLINE, fid), *b = json_object();
    bool ok = c && b && put(b, "offer_ids", id_array(offer_ids, n)) &&
              (refuse < 0 || put(b, "filters", json_pack("{s:f}", "refuse_seconds", refuse)));
    if (ok) {
        ok = put(c, "decline", b);
        b = NULL;
    }
    json_decref(b);
    if (!ok) json_decref(c);
    return ok ? c : NULL;
}

json_t *mesos_call_kill(const char *fid, const char *task_id, const char *agent_id) {
    json_t *c = mesos_call_new(MESOS_CALL_KILL, fid), *b = json_object();
    bool ok = c && b && put(b, "task_id", mesos_id(task_id)) && (!agent_id || put(b, "agent_id", mesos_id(agent_id)));
    if (ok) {
        ok = put(c, "kill", b);
        b = NULL;
    }
    json_decref(b);
    if (!ok) json_decref(c);
    return ok ? c : NULL;
}

json_t *mesos_call_reconcile(const char *fid, const char *const *task_ids, const char *const *agent_ids, int n) {
    json_t *c = mesos_call_new(MESOS_CALL_RECONCILE, fid), *tasks = json_array();
    bool ok = c && tasks;
    for (int i = 0; ok && i < n; i++) {
        json_t *t = json_object();
        ok = t && put(t, "task_id", mesos_id(task_ids[i])) &&
             (!agent_ids || !agent_ids[i] || put(t, "agent_id", mesos_id(agent_ids[i])));
        ok = ok ? push(tasks, t) : (json_decref(t), false);
    }
    if (ok) {
        ok = put(c, "reconcile", json_pack("{s:O}", "tasks", tasks));
    }
    json_decref(tasks);
    if (!ok) json_decref(c);
    return ok ? c : NULL;
}

json_t *mesos_call_acknowledge(const char *fid, const char *agent_id, const char *task_id, const char *uuid_b64) {
    json_t *c = mesos_call_new(MESOS_CALL_ACKNOWLEDGE, fid);
    if (c && !put(c, "acknowledge", json_pack("{s:o,s:o,s:s}", "agent_id", mesos_id(agent_id), "task_id",
                                             mesos_id(task_id), "uuid", uuid_b64 ? uuid_b64 : ""))) {
        json_decref(c);
        return NULL;
    }
    return c;
}

/* "<key>":{"value":<v>} appended (v NULL: ""). */
static int id_text(char **buf, size_t *len, size_t *cap, const char *key, const char *v) {
    if (!v) v = "";
    return jdump_append(buf, len, cap, key, strlen(key)) || jdump_append(buf, len, cap, "{\"value\":", 9) ||
                   jdump_append_string(buf, len, cap, v, strlen(v)) || jdump_append(buf, len, cap, "}", 1)
               ? -1
               : 0;
}

int mesos_ack_members(char **buf, size_t *len, size_t *cap, const char *agent_id, const char *task_id,
                      const char *uuid_b64) {
    static const char head[] = "\"type\":\"ACKNOWLEDGE\",\"acknowledge\":{";
    if (!uuid_b64) uuid_b64 = "";
    return jdump_append(buf, len, cap, head, sizeof head - 1) || id_text(buf, len, cap, "\"agent_id\":", agent_id) ||
                   id_text(buf, len, cap, ",\"task_id\":", task_id) ||
                   jdump_append(buf, len, cap, ",\"uuid\":", 8) ||
                   jdump_append_string(buf, len, cap, uuid_b64, strlen(uuid_b64)) || jdump_append(buf, len, cap, "}", 1)
               ? -1
               : 0;
}

/* A real as jansson writes it (jdump takes jansson's digits for reals):
 * %.17g, ".0" when that has neither a dot nor an exponent, the exponent
 * without '+' or leading zeros. */
static int real_text(char **buf, size_t *len, size_t *cap, double v) {
    char b[40];
    int n = snprintf(b, sizeof b, "%.17g", v);
    if (n <= 0 || (size_t)n >= sizeof b - 2 || !isfinite(v)) return -1;
    char *e = strchr(b, 'e');
    if (!e && !strchr(b, '.')) {
        memcpy(b + n, ".0", 3);
        n += 2;
    } else if (e) {
        char *from = e + 1, *to = e + 1;
        if (*from == '-') from++, to++;
        else if (*from == '+') from++;
        while (*from == '0' && from[1]) from++;
        memmove(to, from, strlen(from) + 1);
        n = (int)strlen(b);
    }
    return jdump_append(buf, len, cap, b, (size_t)n);
}

#define APPEND(lit) jdump_append(buf, len, cap, lit, sizeof lit - 1)
#define APPEND_STR(v) jdump_append_string(buf, len, cap, v, strlen(v))

/* [{"<key_name>":k,"value":v},...] of "k=v" strings, as kv_list builds them. */
static int kv_text(char **buf, size_t *len, size_t *cap, const char *const *kv, int n, const char *key_name) {
    if (APPEND("[")) return -1;
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(kv[i], '=');
        size_t kl = eq ? (size_t)(eq - kv[i]) : strlen(kv[i]);
        const char *v = eq ? eq + 1 : "";
        if ((i && APPEND(",")) || APPEND("{") || jdump_append_string(buf, len, cap, key_name, strlen(key_name)) ||
            APPEND(":") || jdump_append_string(buf, len, cap, kv[i], kl) || APPEND(",\"value\":") || APPEND_STR(v) ||
            APPEND("}"))
            return -1;
    }
    return APPEND("]");
}

int mesos_task_info_text(char **buf, size_t *len, size_t *cap, const struct mesos_task_spec *t) {
    if (APPEND("{\"name\":") || APPEND_STR(t->name ? t->name : t->task_id) ||
        id_text(buf, len, cap, ",\"task_id\":", t->task_id) || id_text(buf, len, cap, ",\"agent_id\":", t->agent_id) ||
        APPEND(",\"resources\":["))
        return -1;
    const struct { const char *n; double v; } r[] = {{"cpus", t->res.cpus}, {"mem", t->res.mem}, {"disk", t->res.disk},
                                                     {"gpus", t->res.gpus}};
    bool first = true;
    for (size_t i = 0; i < 4; i++) {
        if (!(r[i].v > 0)) continue;
        if ((!first && APPEND(",")) || APPEND("{\"name\":") || APPEND_STR(r[i].n) ||
            APPEND(",\"type\":\"SCALAR\",\"scalar\":{\"value\":") || real_text(buf, len, cap, r[i].v) ||
            APPEND("},\"role\":\"*\"}"))
            return -1;
        first = false;
    }
    if (APPEND("],\"command\":{")) return -1;
    if (t->command && (APPEND("\"value\":") || APPEND_STR(t->command) || APPEND(","))) return -1;
    if (APPEND("\"shell\":") || (t->nargs ? APPEND("false") : APPEND("true"))) return -1;
    if (t->nargs) {
        if (APPEND(",\"arguments\":[")) return -1;
        for (int i = 0; i < t->nargs; i++)
            if ((i && APPEND(",")) || APPEND_STR(t->args[i])) return -1;
        if (APPEND("]")) return -1;
    }
    if (t->nenv && (APPEND(",\"environment\":{\"variables\":") || kv_text(buf, len, cap, t->env, t->nenv, "name") ||
                    APPEND("}")))
        return -1;
    if (APPEND("}")) return -1;
    if (t->image && (APPEND(",\"container\":{\"type\":\"MESOS\",\"mesos\":{\"image\":{\"type\":\"DOCKER\","
                            "\"docker\":{\"name\":") ||
                     APPEND_STR(t->image) || APPEND("}}}}")))
        return -1;
    if (t->nlabels && (APPEND(",\"labels\":{\"labels\":") || kv_text(buf, len, cap, t->labels, t->nlabels, "key") ||
                       APPEND("}")))
        return -1;
    return APPEND("}");
}

int mesos_accept_members(char **buf, size_t *len, size_t *cap, const char *const *offer_ids, int n,
                         const char *task_infos, size_t tlen, double refuse) {
    if (APPEND("\"type\":\"ACCEPT\",\"accept\":{\"offer_ids\":[")) return -1;
    for (int i = 0; i < n; i++)
        if (id_text(buf, len, cap, i ? "," : "", offer_ids[i])) return -1;
    if (APPEND("],\"operations\":[{\"type\":\"LAUNCH\",\"launch\":{\"task_infos\":[") ||
        jdump_append(buf, len, cap, task_infos, tlen) || APPEND("]}}]"))
        return -1;
    if (refuse >= 0 && (APPEND(",\"filters\":{\"refuse_seconds\":") || real_text(buf, len, cap, refuse) || APPEND("}")))
        return -1;
    return APPEND("}");
}

#undef APPEND
#undef APPEND_STR

json_t *mesos_call_roles(enum mesos_call_type type, const char *fid, const char *const *roles, int nroles) {
    json_t *c = mesos_call_new(type, fid);
    if (!c || nroles == 0) return c;
    const char *member = type == MESOS_CALL_SUPPRESS ? "suppress" : "revive";
    if (!put(c, member, json_pack("{s:o}", "roles", strings(roles, nroles)))) {
        json_decref(c);
        return NULL;
    }
    return c;
}

static json_t *kv_list(const char *const *kv, int n, const char *key_name) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        const char *eq = strchr(kv[i], '=');
        size_t kl = eq ? (size_t)(eq - kv[i]) : strlen(kv[i]);
        if (!push(a, json_pack("{s:s%,s:s}", key_name, kv[i], kl, "value", eq ? eq + 1 : ""))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *mesos_task_info(const struct mesos_task_spec *t) {
    json_t *ti = json_object(), *cmd = json_object();
    bool ok = ti && cmd && put(ti, "name", json_string(t->name ? t->name : t->task_id)) &&
              put(ti, "task_id", mesos_id(t->task_id)) && put(ti, "agent_id", mesos_id(t->agent_id)) &&
              put(ti, "resources", mesos_resources_json(&t->res));
    if (ok && t->command) ok = put(cmd, "value", json_string(t->command));
    if (ok) ok = put(cmd, "shell", json_boolean(t->nargs == 0));
    if (ok && t->nargs) ok = put(cmd, "arguments", strings(t->args, t->nargs));
    if (ok && t->nenv) ok = put(cmd, "environment", json_pack("{s:o}", "variables", kv_list(t->env, t->nenv, "name")));
    if (ok) {
        ok = put(ti, "command", cmd);
        cmd = NULL;
    }
    if (ok && t->image)
        ok = put(ti, "container", json_pack("{s:s,s:{s:{s:s,s:{s:s}}}}", "type", "MESOS", "mesos", "image", "type",
                                             "DOCKER", "docker", "name", t->image));
    if (ok && t->nlabels) ok = put(ti, "labels", json_pack("{s:o}", "labels", kv_list(t->labels, t->nlabels, "key")));
    json_decref(cmd);
    if (!ok) json_decref(ti);
    return ok ? ti : NULL;
}

/* ---- call decoding ---- */
#define CONVERT "Failed to convert JSON into Call protobuf: "
#define VALIDATE "Failed to validate scheduler::Call: "

/* An {"value": string} member: absent is fine (NULL), another shape is an error. */
static int id_member(const json_t *obj, const char *k, const char **out, const char *prefix, char *err, size_t errlen) {
    const json_t *m = json_object_get(obj, k);
    *out = NULL;
    if (!m) return 0;
    const json_t *v = json_object_get(m, "value");
    if (!json_is_object(m) || !json_is_string(v))
        return errf(err, errlen, "%s'%s' must be an object with a string 'value'", prefix, k), -1;
    if (json_string_length(v) > MESOS_ID_MAX)
        return errf(err, errlen, "%s'%s.value' is longer than %d bytes", prefix, k, MESOS_ID_MAX), -1;
    *out = json_string_value(v);
    return 0;
}

int mesos_call_parse(const json_t *root, struct mesos_call *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(root)) return errf(err, errlen, CONVERT "Expecting a JSON object"), -1;
    const json_t *type = json_object_get(root, "type");
    if (type && !json_is_string(type)) return errf(err, errlen, CONVERT "'type' must be a string"), -1;
    if (id_member(root, "framework_id", &out->framework_id, CONVERT, err, errlen)) return -1;
    if (!type) return errf(err, errlen, VALIDATE "Expecting 'type' to be present"), -1;
    int t = mesos_call_type_parse(json_string_value(type));
    if (t < 0) return errf(err, errlen, CONVERT "unknown Call.Type '%.64s'", json_string_value(type)), -1;
    out->type = (enum mesos_call_type)t;
    static const char *const member[] = {
        NULL, "subscribe", NULL, "accept", "decline", "revive", "kill", "shutdown", "acknowledge", "reconcile",
        "message", "request", "suppress", "accept_inverse_offers", "decline_inverse_offers",
        "acknowledge_operation_status", "reconcile_operations", "update_framework"};
    const char *m = member[t];
    out->body = m ? json_object_get(root, m) : NULL;
    if (out->body && !json_is_object(out->body)) return errf(err, errlen, CONVERT "'%s' must be an object", m), -1;

    if (t == MESOS_CALL_SUBSCRIBE) {
        if (!out->body) return errf(err, errlen, VALIDATE "Expecting 'subscribe' to be present"), -1;
        const json_t *fi = json_object_get(out->body, "framework_info");
        if (!json_is_object(fi))
            return errf(err, errlen, CONVERT "Missing required fields: subscribe.framework_info"), -1;
        if (!json_is_string(json_object_get(fi, "user")) || !json_is_string(json_object_get(fi, "name")))
            return errf(err, errlen, CONVERT "Missing required fields: subscribe.framework_info.user, "
                                    "subscribe.framework_info.name"), -1;
        const char *fid = NULL;
        if (id_member(fi, "id", &fid, CONVERT, err, errlen)) return -1;
        const json_t *ft = json_object_get(fi, "failover_timeout");
        if (ft && (!json_is_number(ft) || json_number_value(ft) < 0))
            return errf(err, errlen, CONVERT "'failover_timeout' must be a non-negative number"), -1;
        const json_t *roles = json_object_get(fi, "roles");
        if (roles && (!json_is_array(roles) || json_array_size(roles) > 64))
            return errf(err, errlen, CONVERT "'roles' must be an array of at most 64 names"), -1;
        if (out->framework_id && (!fid || strcmp(fid, out->framework_id)))
            return errf(err, errlen, VALIDATE "'framework_id' differs from 'subscribe.framework_info.id'"), -1;
        return 0;
    }
    if (!out->framework_id) return errf(err, errlen, VALIDATE "Expecting 'framework_id' to be present"), -1;
    switch (t) {
    case MESOS_CALL_ACCEPT: case MESOS_CALL_DECLINE: case MESOS_CALL_KILL: case MESOS_CALL_SHUTDOWN:
    case MESOS_CALL_ACKNOWLEDGE: case MESOS_CALL_RECONCILE: case MESOS_CALL_MESSAGE: case MESOS_CALL_REQUEST:
        if (!out->body) return errf(err, errlen, VALIDATE "Expecting '%s' to be present", m), -1;
        break;
    default:
        break;
    }
    if (t == MESOS_CALL_ACKNOWLEDGE) {
        const char *a, *k;
        if (id_member(out->body, "agent_id", &a, CONVERT, err, errlen) ||
            id_member(out->body, "task_id", &k, CONVERT, err, errlen))
            return -1;
        if (!a || !k) return errf(err, errlen, CONVERT "Missing required fields: acknowledge.agent_id, acknowledge.task_id"), -1;
        unsigned char u[MESOS_UUID_LEN];
        const char *uuid = json_string_value(json_object_get(out->body, "uuid"));
        if (!uuid) return errf(err, errlen, CONVERT "Missing required fields: acknowledge.uuid"), -1;
        if (mesos_uuid_decode(uuid, u)) return errf(err, errlen, VALIDATE "Not a valid UUID"), -1;
    } else if (t == MESOS_CALL_KILL) {
        const char *k, *a;
        if (id_member(out->body, "task_id", &k, CONVERT, err, errlen) ||
            id_member(out->body, "agent_id", &a, CONVERT, err, errlen))
            return -1;
        if (!k) return errf(err, errlen, CONVERT "Missing required fields: kill.task_id"), -1;
    } else if (t == MESOS_CALL_RECONCILE) {
        const json_t *tasks = json_object_get(out->body, "tasks");
        if (tasks && (!json_is_array(tasks) || json_array_size(tasks) > MESOS_CALL_MAX_IDS))
            return errf(err, errlen, CONVERT "'reconcile.tasks' must be an array of at most %d", MESOS_CALL_MAX_IDS), -1;
        size_t i;
        const json_t *e;
        json_array_foreach(tasks, i, e) {
            const char *k, *a;
            if (!json_is_object(e) || id_member(e, "task_id", &k, CONVERT, err, errlen) ||
                id_member(e, "agent_id", &a, CONVERT, err, errlen))
                return errf(err, errlen, CONVERT "reconcile.tasks[%zu] is malformed", i), -1;
            if (!k) return errf(err, errlen, CONVERT "Missing required fields: reconcile.tasks[%zu].task_id", i), -1;
        }
    } else if (t == MESOS_CALL_ACCEPT || t == MESOS_CALL_DECLINE) {
        int n;
        if (mesos_call_offer_ids(out->body, NULL, 0, &n, err, errlen)) return -1;
        const json_t *f = json_object_get(out->body, "filters");
        const json_t *rs = json_object_get(f, "refuse_seconds");
        if (f && (!json_is_object(f) || (rs && !json_is_number(rs))))
            return errf(err, errlen, CONVERT "'filters.refuse_seconds' must be a number"), -1;
        const json_t *ops = json_object_get(out->body, "operations");
        if (t == MESOS_CALL_ACCEPT && ops && (!json_is_array(ops) || json_array_size(ops) > 1000))
            return errf(err, errlen, CONVERT "'accept.operations' must be an array of at most 1000"), -1;
        size_t i;
        const json_t *op;
        json_array_foreach(ops, i, op) {
            const char *ot = json_string_value(json_object_get(op, "type"));
            if (!json_is_object(op) || !ot) return errf(err, errlen, CONVERT "accept.operations[%zu] has no 'type'", i), -1;
        }
    } else if (t == MESOS_CALL_REVIVE || t == MESOS_CALL_SUPPRESS) {
        const json_t *roles = json_object_get(out->body, "roles");
        if (roles && (!json_is_array(roles) || json_array_size(roles) > 64))
            return errf(err, errlen, CONVERT "'roles' must be an array of at most 64 names"), -1;
    }
    return 0;
}

int mesos_call_offer_ids(const json_t *body, const char **ids, int max, int *n, char *err, size_t errlen) {
    const json_t *a = json_object_get(body, "offer_ids");
    *n = 0;
    if (!a) return 0;
    if (!json_is_array(a) || json_array_size(a) > MESOS_CALL_MAX_IDS)
        return errf(err, errlen, CONVERT "'offer_ids' must be an array of at most %d", MESOS_CALL_MAX_IDS), -1;
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e) {
        const json_t *v = json_object_get(e, "value");
        if (!json_is_string(v) || json_string_length(v) > MESOS_ID_MAX)
            return errf(err, errlen, CONVERT "offer_ids[%zu] must be an object with a string 'value'", i), -1;
        if (ids && *n < max) ids[*n] = json_string_value(v);
        (*n)++;
    }
    return 0;
}

double mesos_call_refuse_seconds(const json_t *body) {
    const json_t *v = json_object_get(json_object_get(body, "filters"), "refuse_seconds");
    double d = json_is_number(v) ? json_number_value(v) : 5.0;
    return isfinite(d) && d >= 0 ? d : 5.0;
}

int mesos_task_info_parse(const json_t *ti, struct mesos_task_decl *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->info = ti;
    if (!json_is_object(ti)) return errf(err, errlen, "TaskInfo must be an object"), -1;
    out->name = json_string_value(json_object_get(ti, "name"));
    if (id_member(ti, "task_id", &out->task_id, "", err, errlen) || id_member(ti, "agent_id", &out->agent_id, "", err, errlen))
        return -1;
    if (!out->name || !out->task_id || !out->agent_id)
        return errf(err, errlen, "TaskInfo: missing required fields (name, task_id, agent_id)"), -1;
    if (!*out->task_id) return errf(err, errlen, "TaskID must not be empty"), -1;
    return mesos_resources_parse(json_object_get(ti, "resources"), &out->res, &out->other_resources, err, errlen);
}

static const char *kv_find(const json_t *arr, const char *key_name, const char *key) {
    size_t i;
    const json_t *e;
    json_array_foreach(arr, i, e) {
        const char *k = json_string_value(json_object_get(e, key_name));
        if (k && !strcmp(k, key)) return json_string_value(json_object_get(e, "value"));
    }
    return NULL;
}

const char *mesos_task_label(const json_t *ti, const char *key) {
    return kv_find(json_object_get(json_object_get(ti, "labels"), "labels"), "key", key);
}

const char *mesos_task_env(const json_t *ti, const char *name) {
    const json_t *env = json_object_get(json_object_get(ti, "command"), "environment");
    return kv_find(json_object_get(env, "variables"), "name", name);
}

/* ---- events ---- */
static json_t *event(enum mesos_event_type t, const char *member, json_t *body) {
    json_t *e = json_pack("{s:s}", "type", mesos_event_type_name(t));
    if (e && member && !put(e, member, body)) {
        json_decref(e);
        return NULL;
    }
    if (!e) json_decref(body);
    return e;
}

json_t *mesos_event_subscribed(const char *fid, double hb, const char *master_id) {
    return event(MESOS_EVENT_SUBSCRIBED, "subscribed",
                 json_pack("{s:o,s:f,s:{s:s,s:i,s:i,s:s}}", "framework_id", mesos_id(fid), "heartbeat_interval_seconds",
                           hb, "master_info", "id", master_id ? master_id : "master", "ip", 16777343, "port", 5050,
                           "hostname", "localhost"));
}
json_t *mesos_event_heartbeat(void) { return event(MESOS_EVENT_HEARTBEAT, NULL, NULL); }
json_t *mesos_event_error(const char *message) {
    return event(MESOS_EVENT_ERROR, "error", json_pack("{s:s}", "message", message ? message : ""));
}
json_t *mesos_event_offers(json_t *offers) {
    if (!offers) return NULL;
    return event(MESOS_EVENT_OFFERS, "offers", json_pack("{s:o}", "offers", offers));
}
json_t *mesos_event_rescind(const char *offer_id) {
    return event(MESOS_EVENT_RESCIND, "rescind", json_pack("{s:o}", "offer_id", mesos_id(offer_id)));
}
json_t *mesos_event_failure(const char *agent_id) {
    return event(MESOS_EVENT_FAILURE, "failure", json_pack("{s:o}", "agent_id", mesos_id(agent_id)));
}

json_t *mesos_offer(const struct mesos_offer_spec *o) {
    json_t *attrs = json_array();
    for (int i = 0; attrs && i < o->nattrs; i++)
        if (!push(attrs, json_pack("{s:s,s:s,s:{s:s}}", "name", o->attrs[i].name, "type", "TEXT", "text", "value",
                                   o->attrs[i].text))) {
            json_decref(attrs);
            attrs = NULL;
        }
    if (!attrs) return NULL;
    return json_pack("{s:o,s:o,s:o,s:s,s:o,s:o,s:{s:s}}", "id", mesos_id(o->id), "framework_id",
                     mesos_id(o->framework_id), "agent_id", mesos_id(o->agent_id), "hostname", o->hostname,
                     "resources", mesos_resources_json(&o->res), "attributes", attrs, "allocation_info", "role",
                     o->role ? o->role : "*");
}

json_t *mesos_event_update(const struct mesos_task_status *s) {
    json_t *st = json_pack("{s:o,s:o,s:s,s:s,s:f}", "task_id", mesos_id(s->task_id), "agent_id",
                           mesos_id(s->agent_id), "state", mesos_task_state_name(s->state), "source",
                           mesos_source_name(s->source), "timestamp", s->timestamp);
    bool ok = st != NULL;
    if (ok && s->reason) ok = put(st, "reason", json_string(s->reason));
    if (ok && s->message) ok = put(st, "message", json_string(s->message));
    if (ok && s->has_uuid) {
        char b64[32];
        b64_encode(s->uuid, MESOS_UUID_LEN, false, true, b64);
        ok = put(st, "uuid", json_string(b64));
    }
    if (!ok) {
        json_decref(st);
        return NULL;
    }
    return event(MESOS_EVENT_UPDATE, "update", json_pack("{s:o}", "status", st));
}

/* ---- event decoding ---- */
int mesos_event_parse(const json_t *root, struct mesos_event *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(root)) return errf(err, errlen, "event: expecting a JSON object"), -1;
    int t = mesos_event_type_parse(json_string_value(json_object_get(root, "type")));
    if (t < 0) return errf(err, errlen, "event: missing or unknown 'type'"), -1;
    out->type = (enum mesos_event_type)t;
    const json_t *b;
    switch (t) {
    case MESOS_EVENT_SUBSCRIBED: {
        b = json_object_get(root, "subscribed");
        if (id_member(b, "framework_id", &out->framework_id, "event: ", err, errlen)) return -1;
        if (!out->framework_id) return errf(err, errlen, "event: SUBSCRIBED without subscribed.framework_id"), -1;
        const json_t *hb = json_object_get(b, "heartbeat_interval_seconds");
        out->heartbeat_seconds = json_is_number(hb) && json_number_value(hb) > 0 ? json_number_value(hb) : 15.0;
        break;
    }
    case MESOS_EVENT_OFFERS:
        out->offers = json_object_get(json_object_get(root, "offers"), "offers");
        if (!json_is_array(out->offers)) return errf(err, errlen, "event: OFFERS without offers.offers[]"), -1;
        break;
    case MESOS_EVENT_RESCIND:
        if (id_member(json_object_get(root, "rescind"), "offer_id", &out->offer_id, "event: ", err, errlen)) return -1;
        if (!out->offer_id) return errf(err, errlen, "event: RESCIND without rescind.offer_id"), -1;
        break;
    case MESOS_EVENT_UPDATE: {
        const json_t *st = json_object_get(json_object_get(root, "update"), "status");
        struct mesos_task_status *s = &out->status;
        if (!json_is_object(st)) return errf(err, errlen, "event: UPDATE without update.status"), -1;
        if (id_member(st, "task_id", &s->task_id, "event: ", err, errlen) ||
            id_member(st, "agent_id", &s->agent_id, "event: ", err, errlen))
            return -1;
        int state = mesos_task_state_parse(json_string_value(json_object_get(st, "state")));
        if (!s->task_id || state < 0) return errf(err, errlen, "event: UPDATE needs status.task_id and a known state"), -1;
        s->state = (enum mesos_task_state)state;
        int src = parse_name(SOURCE_NAMES, NAMES_N(SOURCE_NAMES), json_string_value(json_object_get(st, "source")));
        s->source = src < 0 ? MESOS_SOURCE_MASTER : (enum mesos_status_source)src;
        s->reason = json_string_value(json_object_get(st, "reason"));
        s->message = json_string_value(json_object_get(st, "message"));
        s->timestamp = json_number_value(json_object_get(st, "timestamp"));
        s->uuid_b64 = json_string_value(json_object_get(st, "uuid"));
        if (s->uuid_b64) {
            if (mesos_uuid_decode(s->uuid_b64, s->uuid)) return errf(err, errlen, "event: status.uuid is not a UUID"), -1;
            s->has_uuid = true;
        }
        break;
    }
    case MESOS_EVENT_FAILURE:
        if (id_member(json_object_get(root, "failure"), "agent_id", &out->agent_id, "event: ", err, errlen)) return -1;
        break;
    case MESOS_EVENT_ERROR:
        out->message = json_string_value(json_object_get(json_object_get(root, "error"), "message"));
        if (!out->message) return errf(err, errlen, "event: ERROR without error.message"), -1;
        break;
    default:
        break;
    }
    return 0;
}

int mesos_offer_parse(const json_t *o, struct mesos_offer_decl *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(o)) return errf(err, errlen, "offer: expecting an object"), -1;
    if (id_member(o, "id", &out->id, "offer: ", err, errlen) || id_member(o, "agent_id", &out->agent_id, "offer: ", err, errlen))
        return -1;
    out->hostname = json_string_value(json_object_get(o, "hostname"));
    if (!out->id || !out->agent_id || !out->hostname) return errf(err, errlen, "offer: missing id, agent_id or hostname"), -1;
    out->attributes = json_object_get(o, "attributes");
    if (out->attributes && !json_is_array(out->attributes)) return errf(err, errlen, "offer: 'attributes' must be an array"), -1;
    return mesos_resources_parse(json_object_get(o, "resources"), &out->res, NULL, err, errlen);
}

/* ---- uuids ---- */
static int b64val(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

int mesos_uuid_decode(const char *b64, unsigned char out[MESOS_UUID_LEN]) {
    /* 16 bytes are 22 base64 characters, then "==" when padded (either alphabet, as protobuf's JSON reads both) */
    size_t n = strlen(b64);
    if (n != 22 && !(n == 24 && b64[22] == '=' && b64[23] == '=')) return -1;
    unsigned acc = 0;
    int bits = 0, k = 0;
    for (size_t i = 0; i < 22; i++) {
        int v = b64val((unsigned char)b64[i]);
        if (v < 0) return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (k < MESOS_UUID_LEN) out[k++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return k == MESOS_UUID_LEN && acc == 0 ? 0 : -1;
}
