/* HostService over Nodes (svc_host.h). Requests are read as proto3 JSON
 * (pbjson) so one set of handlers serves v0 and v1alpha, whose messages
 * differ only in package (and v0's HostInfo.goal_state). */
#include "svc_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "pbjson.h"
#include "peloton/api/v0/host/svc/host_svc.pb-c.h"
#include "peloton/api/v1alpha/host/svc/host_svc.pb-c.h"
#include "svc_common.h"

#define NODES_PATH "/api/v1/nodes"
#define MERGE_PATCH "application/merge-patch+json"
#define HOST_NAME_LEN 253    /* a Node's name is a DNS subdomain */
#define MAX_HOSTS 100   /* hosts in one call's deprecated hostnames list */

static const char *const state_names[] = {"HOST_STATE_INVALID", "HOST_STATE_UNKNOWN", "HOST_STATE_UP",
                                          "HOST_STATE_DRAINING", "HOST_STATE_DRAINED", "HOST_STATE_DOWN"};
#define NSTATES (sizeof state_names / sizeof state_names[0])

struct svc_host;

/* The ud of one version's methods. */
struct host_ver {
    struct svc_host *s;
    bool v1alpha;
};

struct svc_host {
    struct kclient *kc;
    struct host_ver v0, v1;
};

enum host_op { OP_QUERY, OP_START, OP_COMPLETE };

struct host_call {
    struct svc_op base;
    const struct host_ver *ver;
    enum host_op kind;
    bool want[NSTATES]; /* Query: the states asked for; none: all */
    bool any;
    char **names;       /* Start/Complete: the hosts, in order */
    size_t nnames, next;
};

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static bool node_ready(const json_t *node) {
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c) {
        const char *type = jstr(c, "type");
        if (type && !strcmp(type, "Ready")) return jstr(c, "status") && !strcmp(jstr(c, "status"), "True");
    }
    return true; /* no conditions yet */
}

static const char *maintenance(const json_t *node) {
    return jstr(json_object_get(json_object_get(node, "metadata"), "annotations"), PA_MAINTENANCE);
}

enum svc_host_state svc_host_state(const json_t *node) {
    const char *m = maintenance(node);
    bool ready = node_ready(node);
    if (m && !strcmp(m, PA_MAINT_DRAINING)) return SVC_HOST_DRAINING;
    if (m && !strcmp(m, PA_MAINT_DRAINED)) return ready ? SVC_HOST_DRAINED : SVC_HOST_DOWN;
    return ready ? SVC_HOST_UP : SVC_HOST_UNKNOWN;
}

static bool in_maintenance(enum svc_host_state st) {
    return st == SVC_HOST_DRAINING || st == SVC_HOST_DRAINED || st == SVC_HOST_DOWN;
}

/* A Node name: a lower-case DNS subdomain of at most HOST_NAME_LEN characters. */
static bool valid_name(const char *s) {
    size_t n = strnlen(s, HOST_NAME_LEN + 1);
    if (n == 0 || n > HOST_NAME_LEN) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && c != '.') return false;
        if ((i == 0 || i == n - 1) && !alnum) return false;
    }
    return true;
}

static void release(struct svc_op *base) {
    struct host_call *op = (struct host_call *)base;
    for (size_t i = 0; i < op->nnames; i++) free(op->names[i]);
    free(op->names);
    free(op);
}

static const ProtobufCMessageDescriptor *resp_desc(const struct host_call *op) {
    bool v1 = op->ver->v1alpha;
    switch (op->kind) {
    case OP_QUERY:
        return v1 ? &peloton__api__v1alpha__host__svc__query_hosts_response__descriptor
                  : &peloton__api__v0__host__svc__query_hosts_response__descriptor;
    case OP_START:
        return v1 ? &peloton__api__v1alpha__host__svc__start_maintenance_response__descriptor
                  : &peloton__api__v0__host__svc__start_maintenance_response__descriptor;
    default:
        return v1 ? &peloton__api__v1alpha__host__svc__complete_maintenance_response__descriptor
                  : &peloton__api__v0__host__svc__complete_maintenance_response__descriptor;
    }
}

/* The first InternalIP (else any address) of the Node, or "". */
static const char *node_ip(const json_t *node) {
    const char *any = "";
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "addresses"), i, a) {
        const char *type = jstr(a, "type"), *addr = jstr(a, "address");
        if (!addr) continue;
        if (type && !strcmp(type, "InternalIP")) return addr;
        if (!*any && (!type || strcmp(type, "Hostname"))) any = addr;
    }
    return any;
}

static void on_nodes(void *ud, const struct kc_response *r) {
    struct host_call *op = ud;
    const json_t *items = svc_list_items(r);
    if (!items) {
        svc_fail_status(op->base.call, r);
        svc_op_free(&op->base);
        return;
    }
    json_t *infos = json_array();
    size_t i;
    const json_t *node;
    json_array_foreach(items, i, node) {
        const char *name = jstr(json_object_get(node, "metadata"), "name");
        enum svc_host_state st = svc_host_state(node);
        if (!name || (op->any && !op->want[st])) continue;
        json_t *hi = json_pack("{s:s, s:s, s:s}", "hostname", name, "ip", node_ip(node), "state", state_names[st]);
        if (hi && !op->ver->v1alpha) /* v0 only: where maintenance takes it */
            json_object_set_new(hi, "goalState",
                                json_string(state_names[in_maintenance(st) ? SVC_HOST_DOWN : SVC_HOST_UP]));
        json_array_append_new(infos, hi);
    }
    svc_reply_json(op->base.call, resp_desc(op), json_pack("{s:o}", "hostInfos", infos));
    svc_op_free(&op->base);
}

static struct host_call *op_new(void *ud, struct native_call *call, enum host_op kind) {
    const struct host_ver *ver = ud;
    struct host_call *op = svc_op_new(sizeof *op, ver->s->kc, call, release);
    if (op) {
        op->ver = ver;
        op->kind = kind;
    }
    return op;
}

/* The request as JSON, or NULL after failing the call. */
static json_t *req_json(struct native_call *call, const ProtobufCMessage *msg) {
    char err[256];
    json_t *j = pbjson_from_msg(msg, err, sizeof err);
    if (!j) native_call_fail(call, NC_INVALID_ARGUMENT, "%s", err);
    return j;
}

static void h_query(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    json_t *j = req_json(call, msg);
    if (!j) return;
    struct host_call *op = op_new(ud, call, OP_QUERY);
    if (!op) {
        json_decref(j);
        return;
    }
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(j, "hostStates"), i, v) {
        size_t k = 1;
        while (k < NSTATES && !(json_is_string(v) && !strcmp(json_string_value(v), state_names[k]))) k++;
        if (k == NSTATES) { /* HOST_STATE_INVALID, or a number no state has */
            char *bad = json_dumps(v, JSON_ENCODE_ANY);
            native_call_fail(call, NC_INVALID_ARGUMENT, "hostStates[%zu]: %s is not a host state", i,
                             bad ? bad : "?");
            free(bad);
            json_decref(j);
            svc_op_free(&op->base);
            return;
        }
        op->want[k] = op->any = true;
    }
    json_decref(j);
    svc_op_request(&op->base, "GET", NODES_PATH, NULL, on_nodes);
}

static void step(struct host_call *op);

static void node_path(const char *name, char *path, size_t len) {
    int n = snprintf(path, len, "%s/", NODES_PATH);
    kc_escape(name, path + n, len - (size_t)n);
}

static void on_patched(void *ud, const struct kc_response *r) {
    struct host_call *op = ud;
    const char *name = op->names[op->next];
    if (r->status == 404) {
        native_call_fail(op->base.call, NC_NOT_FOUND, "host %s not found", name);
    } else if (r->status == 409) {
        native_call_fail(op->base.call, NC_ABORTED, "host %s changed meanwhile: try again", name);
    } else if (r->status < 200 || r->status >= 300) {
        svc_fail_status(op->base.call, r);
    } else {
        fprintf(stderr, "level=info msg=\"native: host maintenance %s\" host=%s\n",
                op->kind == OP_START ? "started" : "completed", name);
        op->next++;
        step(op);
        return;
    }
    svc_op_free(&op->base);
}

static void on_node(void *ud, const struct kc_response *r) {
    struct host_call *op = ud;
    const char *name = op->names[op->next];
    const json_t *node = r->status == 200 ? kc_response_body(r) : NULL;
    if (r->status == 404) {
        native_call_fail(op->base.call, NC_NOT_FOUND, "host %s not found", name);
        svc_op_free(&op->base);
        return;
    }
    if (!json_is_object(node)) {
        svc_fail_status(op->base.call, r);
        svc_op_free(&op->base);
        return;
    }
    enum svc_host_state st = svc_host_state(node);
    bool start = op->kind == OP_START;
    if (start == in_maintenance(st)) {
        native_call_fail(op->base.call, NC_FAILED_PRECONDITION, "host %s is %s: %s", name, state_names[st],
                         start ? "already in maintenance" : "not in maintenance");
        svc_op_free(&op->base);
        return;
    }
    /* one merge patch, with the resourceVersion read as its precondition */
    const char *rv = jstr(json_object_get(node, "metadata"), "resourceVersion");
    json_t *body = start ? json_pack("{s:{s:{s:s}}, s:{s:b}}", "metadata", "annotations", PA_MAINTENANCE,
                                     PA_MAINT_DRAINING, "spec", "unschedulable", 1)
                         : json_pack("{s:{s:{s:n}}, s:{s:n}}", "metadata", "annotations", PA_MAINTENANCE, "spec",
                                     "unschedulable");
    if (body && rv) json_object_set_new(json_object_get(body, "metadata"), "resourceVersion", json_string(rv));
    char path[sizeof NODES_PATH + 3 * HOST_NAME_LEN + 8];
    node_path(name, path, sizeof path);
    int rc = body ? kclient_request(op->base.kc, "PATCH", path, body, MERGE_PATCH, on_patched, op) : -1;
    json_decref(body);
    if (rc) {
        native_call_fail(op->base.call, NC_UNAVAILABLE, "API server unreachable");
        svc_op_free(&op->base);
    }
}

/* The next host of a Start/Complete call, or the answer once all are done. */
static void step(struct host_call *op) {
    if (op->next == op->nnames) {
        svc_reply_json(op->base.call, resp_desc(op), json_pack("{s:s}", "hostname", op->names[0]));
        svc_op_free(&op->base);
        return;
    }
    char path[sizeof NODES_PATH + 3 * HOST_NAME_LEN + 8];
    node_path(op->names[op->next], path, sizeof path);
    svc_op_request(&op->base, "GET", path, NULL, on_node);
}

static void h_maintenance(void *ud, struct native_call *call, const ProtobufCMessage *msg, enum host_op kind) {
    json_t *j = req_json(call, msg);
    if (!j) return;
    struct host_call *op = op_new(ud, call, kind);
    if (!op) {
        json_decref(j);
        return;
    }
    /* hostname; or Peloton's deprecated hostnames list when it is empty */
    const json_t *one = json_object_get(j, "hostname"), *many = json_object_get(j, "hostnames");
    size_t n = one ? 1 : json_array_size(many);
    if (n == 0) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "hostname: required");
        goto fail;
    }
    if (n > MAX_HOSTS) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "hostnames: %zu hosts, at most %d in one call", n, MAX_HOSTS);
        goto fail;
    }
    if (!(op->names = calloc(n, sizeof *op->names))) {
        native_call_fail(call, NC_INTERNAL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = json_string_value(one ? one : json_array_get(many, i));
        if (!name || !valid_name(name)) {
            char where[32] = "hostname";
            if (!one) snprintf(where, sizeof where, "hostnames[%zu]", i);
            native_call_fail(call, NC_INVALID_ARGUMENT, "%s: \"%.64s%s\" is not a host name", where,
                             name ? name : "", name && strlen(name) > 64 ? "..." : "");
            goto fail;
        }
        if (!(op->names[i] = strdup(name))) {
            native_call_fail(call, NC_INTERNAL, "out of memory");
            goto fail;
        }
        op->nnames = i + 1;
    }
    json_decref(j);
    step(op);
    return;
fail:
    json_decref(j);
    svc_op_free(&op->base);
}

static void h_start(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    h_maintenance(ud, call, msg, OP_START);
}

static void h_complete(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    h_maintenance(ud, call, msg, OP_COMPLETE);
}

static const struct native_method v0_methods[] = {
    {"QueryHosts", &peloton__api__v0__host__svc__query_hosts_request__descriptor,
     &peloton__api__v0__host__svc__query_hosts_response__descriptor, h_query, false},
    {"StartMaintenance", &peloton__api__v0__host__svc__start_maintenance_request__descriptor,
     &peloton__api__v0__host__svc__start_maintenance_response__descriptor, h_start, false},
    {"CompleteMaintenance", &peloton__api__v0__host__svc__complete_maintenance_request__descriptor,
     &peloton__api__v0__host__svc__complete_maintenance_response__descriptor, h_complete, false},
};

static const struct native_method v1_methods[] = {
    {"QueryHosts", &peloton__api__v1alpha__host__svc__query_hosts_request__descriptor,
     &peloton__api__v1alpha__host__svc__query_hosts_response__descriptor, h_query, false},
    {"StartMaintenance", &peloton__api__v1alpha__host__svc__start_maintenance_request__descriptor,
     &peloton__api__v1alpha__host__svc__start_maintenance_response__descriptor, h_start, false},
    {"CompleteMaintenance", &peloton__api__v1alpha__host__svc__complete_maintenance_request__descriptor,
     &peloton__api__v1alpha__host__svc__complete_maintenance_response__descriptor, h_complete, false},
};

struct svc_host *svc_host_new(struct kclient *kc) {
    struct svc_host *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->kc = kc;
    s->v0 = (struct host_ver){s, false};
    s->v1 = (struct host_ver){s, true};
    return s;
}

void svc_host_free(struct svc_host *s) { free(s); }

int svc_host_register(struct svc_host *s, struct native_registry *r) {
    int rc = native_registry_add(r, "peloton.api.v0.host.svc.HostService", v0_methods,
                                 sizeof v0_methods / sizeof v0_methods[0], &s->v0);
    return rc ? rc : native_registry_add(r, "peloton.api.v1alpha.host.svc.HostService", v1_methods,
                                         sizeof v1_methods / sizeof v1_methods[0], &s->v1);
}
