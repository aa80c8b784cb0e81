/* Table responses (meta.k8s.io/v1) for `kubectl get`: the columns
 * kube-apiserver prints for the built-ins this shim serves, computed from the
 * stored objects. Rows carry PartialObjectMetadata (labels for -L and
 * --show-labels). */
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ktime.h"
#include "shim.h"

bool shim_wants_table(const struct http_request *req) {
    return strstr(req->accept, "as=Table") && strstr(req->accept, "g=meta.k8s.io");
}

/* Whether ts is an RFC 3339 UTC time, seconds or micro (an Event's eventTime:
 * 2026-01-01T00:00:00.123456Z); *tm gets it. */

/* Kubernetes' short human durations: 45s, 3m20s, 15m, 5h30m, 20h, 3d4h, 30d, 2y. */
static void human_age(const json_t *obj, char *out, size_t len) {
    const char *ts = json_string_value(json_object_get(json_object_get(obj, "metadata"), "creationTimestamp"));
    int64_t t;
    if (!ktime_parse(ts, &t)) {
        snprintf(out, len, "<unknown>");
        return;
    }
    long long s = (long long)(time(NULL) - t);
    if (s < 0) s = 0;
    long long m = s / 60, h = s / 3600, d = s / 86400;
    if (s < 120) snprintf(out, len, "%llds", s);
    else if (m < 10) snprintf(out, len, "%lldm%llds", m, s % 60);
    else if (h < 3) snprintf(out, len, "%lldm", m);
    else if (h < 8) snprintf(out, len, "%lldh%lldm", h, m % 60);
    else if (h < 48) snprintf(out, len, "%lldh", h);
    else if (d < 8) snprintf(out, len, "%lldd%lldh", d, h % 24);
    else if (d < 730) snprintf(out, len, "%lldd", d);
    else snprintf(out, len, "%lldy", d / 365);
}

static const char *str_at(const json_t *o, const char *a, const char *b) {
    json_t *x = json_object_get(o, a);
    const char *v = json_string_value(b ? json_object_get(x, b) : x);
    return v ? v : "";
}

struct column {
    const char *name, *type, *format;
    int priority; /* 1: only with -o wide */
};

static json_t *columns_json(const struct column *c, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", c[i].name, "type", c[i].type,
                                           "format", c[i].format, "description", "", "priority", c[i].priority));
    return a;
}

static const struct column pod_cols[] = {{"Name", "string", "name", 0},  {"Ready", "string", "", 0},
                                         {"Status", "string", "", 0},    {"Restarts", "string", "", 0},
                                         {"Age", "string", "", 0},       {"IP", "string", "", 1},
                                         {"Node", "string", "", 1},      {"Nominated Node", "string", "", 1},
                                         {"Readiness Gates", "string", "", 1}};
static const struct column node_cols[] = {{"Name", "string", "name", 0},          {"Status", "string", "", 0},
                                          {"Roles", "string", "", 0},             {"Age", "string", "", 0},
                                          {"Version", "string", "", 0},           {"Internal-IP", "string", "", 1},
                                          {"External-IP", "string", "", 1},       {"OS-Image", "string", "", 1},
                                          {"Kernel-Version", "string", "", 1},    {"Container-Runtime", "string", "", 1}};
static const struct column ns_cols[] = {{"Name", "string", "name", 0}, {"Status", "string", "", 0},
                                        {"Age", "string", "", 0}};
static const struct column cm_cols[] = {{"Name", "string", "name", 0}, {"Data", "integer", "", 0},
                                        {"Age", "string", "", 0}};
static const struct column secret_cols[] = {{"Name", "string", "name", 0}, {"Type", "string", "", 0},
                                            {"Data", "integer", "", 0},    {"Age", "string", "", 0}};
static const struct column svc_cols[] = {{"Name", "string", "name", 0},       {"Type", "string", "", 0},
                                         {"Cluster-IP", "string", "", 0},     {"External-IP", "string", "", 0},
                                         {"Port(s)", "string", "", 0},        {"Age", "string", "", 0}};
static const struct column event_cols[] = {{"Last Seen", "string", "", 0},  {"Type", "string", "", 0},
                                           {"Reason", "string", "", 0},     {"Object", "string", "", 0},
                                           {"Subobject", "string", "", 1},  {"Source", "string", "", 1},
                                           {"Message", "string", "", 0},    {"First Seen", "string", "", 1},
                                           {"Count", "string", "", 1},      {"Name", "string", "name", 1}};
static const struct column lease_cols[] = {{"Name", "string", "name", 0}, {"Holder", "string", "", 0},
                                           {"Age", "string", "", 0}};
static const struct column pdb_cols[] = {{"Name", "string", "name", 0},           {"Min Available", "string", "", 0},
                                         {"Max Unavailable", "string", "", 0},    {"Allowed Disruptions", "integer", "", 0},
                                         {"Age", "string", "", 0}};
static const struct column plain_cols[] = {{"Name", "string", "name", 0}, {"Age", "string", "", 0}};

/* The time since an RFC 3339 timestamp, as human_age writes it; "" when
 * there is none. */
static void human_since(const char *ts, char *out, size_t len) {
    out[0] = 0;
    if (!ts || !ts[0]) return;
    json_t *tmp = json_pack("{s:{s:s}}", "metadata", "creationTimestamp", ts);
    if (tmp) human_age(tmp, out, len);
    json_decref(tmp);
}

static bool condition_true(const json_t *o, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(o, "status"), "conditions"), i, c) {
        if (!strcmp(str_at(c, "type", NULL), type)) return !strcmp(str_at(c, "status", NULL), "True");
    }
    return false;
}

/* A container's reason for STATUS: its waiting or terminated reason, or for
 * a terminated container without one its signal or exit code; NULL when it
 * says nothing (running). */
static const char *container_reason(const json_t *cs, const char *prefix, char *buf, size_t len) {
    json_t *state = json_object_get(cs, "state");
    json_t *wt = json_object_get(state, "waiting"), *tm = json_object_get(state, "terminated");
    const char *wr = str_at(wt, "reason", NULL), *tr = str_at(tm, "reason", NULL);
    if (wt && wr[0]) snprintf(buf, len, "%s%s", prefix, wr);
    else if (tm && tr[0]) snprintf(buf, len, "%s%s", prefix, tr);
    else if (tm && json_integer_value(json_object_get(tm, "signal")))
        snprintf(buf, len, "%sSignal:%" JSON_INTEGER_FORMAT, prefix, json_integer_value(json_object_get(tm, "signal")));
    else if (tm)
        snprintf(buf, len, "%sExitCode:%" JSON_INTEGER_FORMAT, prefix,
                 json_integer_value(json_object_get(tm, "exitCode")));
    else return NULL;
    return buf;
}

/* A pod's row as kubectl prints it against kube-apiserver: STATUS from the
 * phase, then the init containers (Init:N/M, Init:REASON), then the
 * containers' waiting or terminated reasons (a succeeded pod's containers
 * say Completed; a pod whose phase says Succeeded without container
 * statuses says Completed too), Terminating once marked for deletion;
 * RESTARTS with the time since the last restart. */
static json_t *pod_cells(const json_t *o, const char *name, const char *age) {
    json_t *spec = json_object_get(o, "spec"), *st = json_object_get(o, "status");
    size_t total = json_array_size(json_object_get(spec, "containers")), ready = 0;
    long long restarts = 0;
    const char *last_restart = NULL;
    char reason[128], buf[128];
    const char *phase = str_at(o, "status", "phase"), *sreason = str_at(o, "status", "reason");
    snprintf(reason, sizeof reason, "%s", sreason[0] ? sreason : phase[0] ? phase : "Unknown");
    bool initializing = false;
    size_t i;
    json_t *cs, *inits = json_object_get(st, "initContainerStatuses");
    json_array_foreach(inits, i, cs) {
        restarts += json_integer_value(json_object_get(cs, "restartCount"));
        json_t *tm = json_object_get(json_object_get(cs, "state"), "terminated");
        if (tm && json_integer_value(json_object_get(tm, "exitCode")) == 0) continue;
        initializing = true;
        const char *wr = str_at(json_object_get(json_object_get(cs, "state"), "waiting"), "reason", NULL);
        if (tm || (wr[0] && strcmp(wr, "PodInitializing") != 0)) {
            if (container_reason(cs, "Init:", buf, sizeof buf)) snprintf(reason, sizeof reason, "%s", buf);
        } else {
            snprintf(reason, sizeof reason, "Init:%zu/%zu", i, json_array_size(json_object_get(spec, "initContainers")));
        }
        break;
    }
    if (!initializing || condition_true(o, "Initialized")) {
        json_t *list = json_object_get(st, "containerStatuses");
        bool running = false;
        restarts = 0;
        for (size_t k = json_array_size(list); k-- > 0;) {
            cs = json_array_get(list, k);
            restarts += json_integer_value(json_object_get(cs, "restartCount"));
            const char *lf = str_at(json_object_get(json_object_get(cs, "lastState"), "terminated"), "finishedAt", NULL);
            if (lf[0] && (!last_restart || strcmp(lf, last_restart) > 0)) last_restart = lf;
            if (container_reason(cs, "", buf, sizeof buf)) snprintf(reason, sizeof reason, "%s", buf);
            else if (json_is_true(json_object_get(cs, "ready")) && json_object_get(json_object_get(cs, "state"), "running")) {
                running = true;
                ready++;
            }
        }
        if (!strcmp(reason, "Completed") && running)
            snprintf(reason, sizeof reason, "%s", condition_true(o, "Ready") ? "Running" : "NotReady");
        if (!json_array_size(list) && !strcmp(reason, "Succeeded")) snprintf(reason, sizeof reason, "Completed");
    }
    if (json_object_get(json_object_get(o, "metadata"), "deletionTimestamp"))
        snprintf(reason, sizeof reason, "%s", !strcmp(sreason, "NodeLost") ? "Unknown" : "Terminating");
    char rd[48], rs[64], since[32];
    snprintf(rd, sizeof rd, "%zu/%zu", ready, total);
    human_since(last_restart, since, sizeof since);
    if (restarts && since[0]) snprintf(rs, sizeof rs, "%lld (%s ago)", restarts, since);
    else snprintf(rs, sizeof rs, "%lld", restarts);
    const char *ip = str_at(o, "status", "podIP"), *node = str_at(o, "spec", "nodeName"),
               *nom = str_at(o, "status", "nominatedNodeName");
    char gates[48] = "<none>";
    json_t *rg = json_object_get(spec, "readinessGates"), *g;
    if (json_array_size(rg)) {
        size_t met = 0;
        json_array_foreach(rg, i, g) met += condition_true(o, str_at(g, "conditionType", NULL));
        snprintf(gates, sizeof gates, "%zu/%zu", met, json_array_size(rg));
    }
    return json_pack("[sssssssss]", name, rd, reason, rs, age, ip[0] ? ip : "<none>", node[0] ? node : "<none>",
                     nom[0] ? nom : "<none>", gates);
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* ROLES: the suffixes of node-role.kubernetes.io/ROLE labels and the value
 * of kubernetes.io/role, sorted and comma-separated (the first 32). */
static void node_roles(const json_t *o, char *out, size_t len) {
    const char *roles[32], *k;
    size_t n = 0, off = 0;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(o, "metadata"), "labels"), k, v) {
        const char *role = NULL;
        if (!strncmp(k, "node-role.kubernetes.io/", 24) && k[24]) role = k + 24;
        else if (!strcmp(k, "kubernetes.io/role") && json_string_value(v) && json_string_value(v)[0])
            role = json_string_value(v);
        if (role && n < sizeof roles / sizeof roles[0]) roles[n++] = role;
    }
    qsort(roles, n, sizeof roles[0], cmp_cstr);
    out[0] = 0;
    for (size_t i = 0; i < n && off < len; i++) {
        if (i && !strcmp(roles[i], roles[i - 1])) continue; /* a set, as kubectl's */
        off += (size_t)snprintf(out + off, len - off, "%s%s", off ? "," : "", roles[i]);
    }
    if (!out[0]) snprintf(out, len, "<none>");
}

static const char *node_address(const json_t *o, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(o, "status"), "addresses"), i, c) {
        if (!strcmp(str_at(c, "type", NULL), type)) return str_at(c, "address", NULL);
    }
    return "<none>";
}

static json_t *node_cells(const json_t *o, const char *name, const char *age) {
    const char *ready = "Unknown";
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(o, "status"), "conditions"), i, c) {
        if (!strcmp(str_at(c, "type", NULL), "Ready"))
            ready = !strcmp(str_at(c, "status", NULL), "True") ? "Ready" : "NotReady";
    }
    char status[64], roles[256];
    snprintf(status, sizeof status, "%s%s", ready,
             json_is_true(json_object_get(json_object_get(o, "spec"), "unschedulable")) ? ",SchedulingDisabled" : "");
    node_roles(o, roles, sizeof roles);
    json_t *info = json_object_get(json_object_get(o, "status"), "nodeInfo");
    const char *ver = str_at(info, "kubeletVersion", NULL), *os = str_at(info, "osImage", NULL),
               *kern = str_at(info, "kernelVersion", NULL), *rt = str_at(info, "containerRuntimeVersion", NULL);
    return json_pack("[ssssssssss]", name, status, roles, age, ver, node_address(o, "InternalIP"),
                     node_address(o, "ExternalIP"), os[0] ? os : "<unknown>", kern[0] ? kern : "<unknown>",
                     rt[0] ? rt : "<unknown>");
}

static json_t *service_cells(const json_t *o, const char *name, const char *age) {
    json_t *spec = json_object_get(o, "spec");
    char ports[256] = "";
    size_t i, off = 0;
    json_t *p;
    json_array_foreach(json_object_get(spec, "ports"), i, p) {
        const char *proto = str_at(p, "protocol", NULL);
        off += (size_t)snprintf(ports + off, off < sizeof ports ? sizeof ports - off : 0, "%s%" JSON_INTEGER_FORMAT "/%s",
                                i ? "," : "", json_integer_value(json_object_get(p, "port")), proto[0] ? proto : "TCP");
        if (off >= sizeof ports) break;
    }
    const char *type = str_at(o, "spec", "type"), *cip = str_at(o, "spec", "clusterIP");
    return json_pack("[ssssss]", name, type[0] ? type : "ClusterIP", cip[0] ? cip : "<none>", "<none>",
                     ports[0] ? ports : "<none>", age);
}

/* An Event's row: LAST SEEN from lastTimestamp (eventTime, then the
 * creation time, when absent), "(xN over AGE)" for an Event seen N times. */
static json_t *event_cells(const json_t *o, const char *age) {
    json_t *io = json_object_get(o, "involvedObject");
    char obj[300], lower[64], last[32], first[32], seen[96], count[24];
    const char *kind = str_at(io, "kind", NULL);
    size_t k = 0;
    for (; kind[k] && k < sizeof lower - 1; k++) lower[k] = (char)(kind[k] >= 'A' && kind[k] <= 'Z' ? kind[k] + 32 : kind[k]);
    lower[k] = 0;
    snprintf(obj, sizeof obj, "%s/%s", lower, str_at(io, "name", NULL));
    const char *lt = str_at(o, "lastTimestamp", NULL), *ft = str_at(o, "firstTimestamp", NULL);
    if (!lt[0]) lt = str_at(o, "eventTime", NULL);
    human_since(lt, last, sizeof last);
    human_since(ft[0] ? ft : lt, first, sizeof first);
    if (!last[0]) snprintf(last, sizeof last, "%s", age);
    if (!first[0]) snprintf(first, sizeof first, "%s", last);
    json_int_t n = json_integer_value(json_object_get(o, "count"));
    if (n > 1) snprintf(seen, sizeof seen, "%s (x%" JSON_INTEGER_FORMAT " over %s)", last, n, first);
    else snprintf(seen, sizeof seen, "%s", last);
    snprintf(count, sizeof count, "%" JSON_INTEGER_FORMAT, n > 1 ? n : 1);
    const char *sub = str_at(io, "fieldPath", NULL), *comp = str_at(o, "source", "component");
    char source[300];
    const char *host = str_at(o, "source", "host");
    snprintf(source, sizeof source, "%s%s%s", comp, host[0] ? ", " : "", host);
    return json_pack("[ssssssssss]", seen, str_at(o, "type", NULL), str_at(o, "reason", NULL), obj, sub, source,
                     str_at(o, "message", NULL), first, count, str_at(o, "metadata", "name"));
}

/* A CRD printer column's value: dotted JSONPath only (".status.summary.cpu.entitlement"). */
static json_t *column_value(const json_t *o, const json_t *col) {
    const char *path = json_string_value(json_object_get(col, "jsonPath"));
    const char *type = json_string_value(json_object_get(col, "type"));
    const json_t *cur = o;
    char seg[256];
    while (path && *path && cur) {
        if (*path == '.') path++;
        size_t n = strcspn(path, ".");
        if (n == 0 || n >= sizeof seg) { cur = NULL; break; }
        memcpy(seg, path, n);
        seg[n] = 0;
        cur = json_object_get(cur, seg);
        path += n;
    }
    if (type && !strcmp(type, "date") && json_is_string(cur)) {
        json_t *tmp = json_pack("{s:{s:O}}", "metadata", "creationTimestamp", (json_t *)cur);
        char age[32];
        human_age(tmp, age, sizeof age);
        json_decref(tmp);
        return json_string(age);
    }
    if (!cur || json_is_null(cur)) return json_string("");
    if (json_is_string(cur) || json_is_integer(cur) || json_is_real(cur) || json_is_boolean(cur))
        return json_deep_copy(cur);
    char *s = json_dumps(cur, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *v = json_string(s ? s : "");
    free(s);
    return v;
}

static json_t *row_cells(const struct shim_resource *r, const json_t *o) {
    char age[32];
    human_age(o, age, sizeof age);
    const char *name = str_at(o, "metadata", "name");
    const char *p = r->plural;
    if (r->custom && r->columns) {
        json_t *cells = json_pack("[s]", name);
        size_t i;
        json_t *col;
        json_array_foreach(r->columns, i, col) json_array_append_new(cells, column_value(o, col));
        return cells;
    }
    if (shim_is_workload(r)) return shim_workload_cells(r, o, name, age);
    if (!strcmp(p, "pods")) return pod_cells(o, name, age);
    if (!strcmp(p, "nodes")) return node_cells(o, name, age);
    if (!strcmp(p, "namespaces")) {
        const char *ph = str_at(o, "status", "phase");
        return json_pack("[sss]", name, ph[0] ? ph : "Active", age);
    }
    if (!strcmp(p, "configmaps") || !strcmp(p, "secrets")) {
        size_t n = json_object_size(json_object_get(o, "data")) + json_object_size(json_object_get(o, "binaryData"));
        if (!strcmp(p, "configmaps")) return json_pack("[sis]", name, (int)n, age);
        const char *t = str_at(o, "type", NULL);
        return json_pack("[ssis]", name, t[0] ? t : "Opaque", (int)n, age);
    }
    if (!strcmp(p, "services")) return service_cells(o, name, age);
    if (!strcmp(p, "events")) return event_cells(o, age);
    if (!strcmp(p, "leases")) {
        const char *h = str_at(o, "spec", "holderIdentity");
        return json_pack("[sss]", name, h, age);
    }
    if (!strcmp(p, "poddisruptionbudgets")) { /* an IntOrString each, or N/A */
        json_t *spec = json_object_get(o, "spec");
        char v[2][32];
        const char *keys[2] = {"minAvailable", "maxUnavailable"};
        for (int k = 0; k < 2; k++) {
            json_t *x = json_object_get(spec, keys[k]);
            if (json_is_integer(x)) snprintf(v[k], sizeof v[k], "%lld", (long long)json_integer_value(x));
            else snprintf(v[k], sizeof v[k], "%s", json_is_string(x) ? json_string_value(x) : "N/A");
        }
        json_int_t allowed = json_integer_value(json_object_get(json_object_get(o, "status"), "disruptionsAllowed"));
        return json_pack("[sssIs]", name, v[0], v[1], allowed, age);
    }
    return json_pack("[ss]", name, age);
}

static json_t *columns_for(const struct shim_resource *r) {
#define COLS(a) columns_json(a, (int)(sizeof a / sizeof a[0]))
    const char *p = r->plural;
    if (r->custom && r->columns) {
        json_t *a = json_array();
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", "Name", "type", "string", "format",
                                           "name", "description", "", "priority", 0));
        size_t i;
        json_t *col;
        json_array_foreach(r->columns, i, col) {
            const char *t = json_string_value(json_object_get(col, "type"));
            const char *cn = json_string_value(json_object_get(col, "name"));
            json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:I}", "name", cn ? cn : "", "type",
                                               t && strcmp(t, "date") ? t : "string", "format", "", "description",
                                               "", "priority", json_integer_value(json_object_get(col, "priority"))));
        }
        return a;
    }
    if (shim_is_workload(r)) return shim_workload_columns(r);
    if (!strcmp(p, "pods")) return COLS(pod_cols);
    if (!strcmp(p, "nodes")) return COLS(node_cols);
    if (!strcmp(p, "namespaces")) return COLS(ns_cols);
    if (!strcmp(p, "configmaps")) return COLS(cm_cols);
    if (!strcmp(p, "secrets")) return COLS(secret_cols);
    if (!strcmp(p, "services")) return COLS(svc_cols);
    if (!strcmp(p, "events")) return COLS(event_cols);
    if (!strcmp(p, "leases")) return COLS(lease_cols);
    if (!strcmp(p, "poddisruptionbudgets")) return COLS(pdb_cols);
    return COLS(plain_cols);
#undef COLS
}

bool shim_table_include(const struct http_request *req, enum shim_include *inc, struct http_response *resp) {
    const char *v = http_req_arg(req, "includeObject");
    *inc = SHIM_INCLUDE_METADATA;
    if (!v || !v[0] || !strcmp(v, "Metadata")) return true;
    if (!strcmp(v, "Object")) *inc = SHIM_INCLUDE_OBJECT;
    else if (!strcmp(v, "None")) *inc = SHIM_INCLUDE_NONE;
    else {
        json_t *q = shim_string(v);
        char *qs = q ? json_dumps(q, JSON_ENCODE_ANY) : NULL;
        shim_status(resp, 400, "BadRequest", NULL,
                    "includeObject: Unsupported value: %.200s: supported values: \"Metadata\", \"None\", \"Object\"",
                    qs ? qs : "\"\"");
        free(qs);
        json_decref(q);
        return false;
    }
    return true;
}

/* A row's object: PartialObjectMetadata (kubectl's -L and --show-labels read
 * it), the whole object with its kind (what --sort-by reads), or null. */
static json_t *row_object(const struct shim_resource *r, const json_t *o, enum shim_include inc) {
    if (inc == SHIM_INCLUDE_NONE) return json_null();
    if (inc == SHIM_INCLUDE_OBJECT)
        return shim_typed(r, o) ? json_incref((json_t *)o) : shim_with_type(r, json_deep_copy(o));
    json_t *md = json_object_get(o, "metadata");
    return json_pack("{s:s, s:s, s:o}", "kind", "PartialObjectMetadata", "apiVersion", "meta.k8s.io/v1", "metadata",
                     md ? json_incref(md) : json_object());
}

json_t *shim_table_row(const struct shim_resource *r, const json_t *obj, enum shim_include inc) {
    return json_pack("{s:o, s:o}", "cells", row_cells(r, obj), "object", row_object(r, obj, inc));
}

json_t *shim_table(const struct shim_resource *r, const json_t *items, const char *rv, const char *cont,
                   enum shim_include inc, bool headers) {
    json_t *rows = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(items, i, o) json_array_append_new(rows, shim_table_row(r, o, inc));
    json_t *meta = json_object();
    if (rv) json_object_set_new(meta, "resourceVersion", json_string(rv));
    if (cont) json_object_set_new(meta, "continue", json_string(cont));
    /* a watch sends the columns with its first event only, as kube-apiserver does */
    return json_pack("{s:s, s:s, s:o, s:o, s:o}", "kind", "Table", "apiVersion", "meta.k8s.io/v1", "metadata", meta,
                     "columnDefinitions", headers ? columns_for(r) : json_null(), "rows", rows);
}

json_t *shim_table_of(const struct shim_resource *r, const json_t *obj, enum shim_include inc, bool headers) {
    json_t *one = json_pack("[O]", (json_t *)obj);
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    json_t *t = shim_table(r, one, rv, NULL, inc, headers);
    json_decref(one);
    return t;
}
