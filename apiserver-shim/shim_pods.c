/* Pods' and nodes' special paths: defaults on create, the binding
 * subresource (what a scheduler posts), and status subresources (what
 * kubelets write), with main-resource writes leaving status alone. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "shim.h"

#define CAS_ATTEMPTS 5

static const struct shim_resource *pods_resource(void) {
    for (int i = 0; i < shim_nresources; i++)
        if (!strcmp(shim_resources[i].plural, "pods")) return &shim_resources[i];
    return NULL;
}

bool shim_has_status(const struct shim_resource *r) {
    if (r->custom) return r->has_status;
    return !r->group[0] && (!strcmp(r->plural, "pods") || !strcmp(r->plural, "nodes") || !strcmp(r->plural, "namespaces"));
}

static void set_default(json_t *obj, const char *key, json_t *v) {
    if (!json_object_get(obj, key)) json_object_set(obj, key, v);
    json_decref(v);
}

/* What kube-apiserver fills in on create; status always starts Pending. */
void shim_pod_defaults(json_t *pod) {
    json_t *spec = json_object_get(pod, "spec");
    if (!json_is_object(spec)) json_object_set_new(pod, "spec", spec = json_object());
    set_default(spec, "schedulerName", json_string("default-scheduler"));
    set_default(spec, "restartPolicy", json_string("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json_integer(30));
    set_default(spec, "dnsPolicy", json_string("ClusterFirst"));
    json_object_set_new(pod, "status", json_pack("{s:s}", "phase", "Pending"));
}

int shim_keep_status(struct shim *s, const struct shim_resource *r, const char *ns, const char *name, json_t *obj,
                     struct http_response *resp) {
    json_t *cur = NULL;
    int rc = store_get(s->st, r->store_key, r->namespaced ? ns : "", name, &cur);
    if (rc == -ENOENT) return 0; /* the update itself will say NotFound */
    if (rc) {
        shim_store_error(s, resp, rc, r, name);
        return 1;
    }
    json_t *st = json_object_get(cur, "status");
    if (st) json_object_set(obj, "status", st);
    else json_object_del(obj, "status");
    json_decref(cur);
    return 0;
}

static void now_rfc3339(char out[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Replaces (or adds) the condition of the same type. */
static void set_condition(json_t *pod, const char *type, const char *status) {
    json_t *st = json_object_get(pod, "status");
    if (!json_is_object(st)) json_object_set_new(pod, "status", st = json_object());
    json_t *conds = json_object_get(st, "conditions");
    if (!json_is_array(conds)) json_object_set_new(st, "conditions", conds = json_array());
    char ts[32];
    now_rfc3339(ts);
    json_t *c = json_pack("{s:s, s:s, s:n, s:s}", "type", type, "status", status, "lastProbeTime",
                          "lastTransitionTime", ts);
    size_t i;
    json_t *x;
    json_array_foreach(conds, i, x) if (json_is_string(json_object_get(x, "type")) &&
                                        !strcmp(json_string_value(json_object_get(x, "type")), type)) {
        json_array_set_new(conds, i, c);
        return;
    }
    json_array_append_new(conds, c);
}

static const char *meta_str(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

void shim_pod_binding(struct shim *s, const char *ns, const char *name, const struct http_request *req,
                      struct http_response *resp) {
    const struct shim_resource *pods = pods_resource();
    json_error_t je;
    json_t *b = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(b)) {
        shim_status(resp, 400, "BadRequest", NULL, "the Binding could not be decoded: %s",
                    b ? "not a JSON object" : je.text);
        json_decref(b);
        return;
    }
    const char *kind = json_string_value(json_object_get(b, "kind"));
    const char *bname = meta_str(b, "name"), *uid = meta_str(b, "uid");
    const char *node = json_string_value(json_object_get(json_object_get(b, "target"), "name"));
    if (kind && strcmp(kind, "Binding")) {
        shim_status(resp, 400, "BadRequest", NULL, "expected a Binding, got %s", kind);
    } else if (!name && !bname) {
        shim_status(resp, 422, "Invalid", NULL, "Binding \"\" is invalid: metadata.name: Required value");
    } else if (name && bname && strcmp(name, bname)) {
        shim_status(resp, 400, "BadRequest", NULL, "the Binding's name (%s) does not match the pod (%s)", bname, name);
    } else if (!node || !node[0]) {
        shim_status(resp, 422, "Invalid", NULL, "Binding \"%s\" is invalid: target.name: Required value",
                    name ? name : bname);
    } else {
        if (!name) name = bname;
        for (int attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
            json_t *pod = NULL, *out = NULL;
            int rc = store_get(s->st, "pods", ns, name, &pod);
            if (rc) {
                shim_store_error(s, resp, rc, pods, name);
                break;
            }
            const char *cur_node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
            if (uid && uid[0] && strcmp(uid, meta_str(pod, "uid") ? meta_str(pod, "uid") : "")) {
                shim_status(resp, 409, "Conflict", NULL, "Operation cannot be fulfilled on pods/binding \"%s\": "
                            "the UID in the precondition does not match the pod", name);
            } else if (meta_str(pod, "deletionTimestamp")) {
                shim_status(resp, 409, "Conflict", NULL, "Operation cannot be fulfilled on pods/binding \"%s\": "
                            "pod %s is being deleted, cannot be assigned to a host", name, name);
            } else if (cur_node && cur_node[0]) {
                shim_status(resp, 409, "Conflict", NULL, "Operation cannot be fulfilled on pods/binding \"%s\": "
                            "pod %s is already assigned to node \"%s\"", name, name, cur_node);
            } else {
                json_t *spec = json_object_get(pod, "spec");
                if (!json_is_object(spec)) json_object_set_new(pod, "spec", spec = json_object());
                json_object_set_new(spec, "nodeName", json_string(node));
                set_condition(pod, "PodScheduled", "True");
                rc = store_update(s->st, "pods", ns, pod, &out, NULL); /* CAS on the resourceVersion read */
                json_decref(pod);
                json_decref(out);
                if (rc == STORE_ECONFLICT && attempt + 1 < CAS_ATTEMPTS) continue;
                if (rc) shim_store_error(s, resp, rc, pods, name);
                else {
                    shim_json(resp, 201, json_pack("{s:s, s:s, s:{}, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
                                                   "metadata", "status", "Success", "code", 201));
                    watch_kick(s->hub);
                }
                break;
            }
            json_decref(pod);
            break;
        }
    }
    json_decref(b);
}

void shim_status_subresource(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                             const struct http_request *req, struct http_response *resp) {
    const char *ns_ = r->namespaced ? ns : "";
    if (req->method == HTTP_GET) {
        json_t *cur = NULL;
        int rc = store_get(s->st, r->store_key, ns_, name, &cur);
        if (rc) shim_store_error(s, resp, rc, r, name);
        else shim_json(resp, 200, shim_with_type(r, cur));
        return;
    }
    if (req->method != HTTP_PUT && req->method != HTTP_PATCH) {
        shim_status(resp, 405, "MethodNotAllowed", NULL, "%s/status allows get, put and patch", r->plural);
        return;
    }
    json_t *patch = NULL;
    shim_patch_fn apply = NULL;
    if (req->method == HTTP_PATCH) {
        bool ssa;
        if (!(apply = shim_patch_parse(req, &patch, &ssa, resp))) return;
    } else {
        json_error_t je;
        patch = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(patch)) {
            shim_status(resp, 400, "BadRequest", NULL, "the body could not be decoded: %s",
                        patch ? "not a JSON object" : je.text);
            json_decref(patch);
            return;
        }
    }
    /* preconditions a kubelet sends: uid always, resourceVersion on PUT */
    const char *want_uid = meta_str(patch, "uid"), *want_rv = meta_str(patch, "resourceVersion");
    for (int attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
        json_t *cur = NULL, *next = NULL, *out = NULL;
        int rc = store_get(s->st, r->store_key, ns_, name, &cur);
        if (rc) {
            shim_store_error(s, resp, rc, r, name);
            break;
        }
        if ((want_uid && want_uid[0] && strcmp(want_uid, meta_str(cur, "uid") ? meta_str(cur, "uid") : "")) ||
            (req->method == HTTP_PUT && want_rv && want_rv[0] &&
             strcmp(want_rv, meta_str(cur, "resourceVersion") ? meta_str(cur, "resourceVersion") : ""))) {
            json_decref(cur);
            shim_store_error(s, resp, STORE_ECONFLICT, r, name);
            break;
        }
        char err[512] = "";
        if (apply) {
            rc = apply(cur, patch, &next, err, sizeof err);
            if (rc) {
                json_decref(cur);
                if (rc == -EINVAL) shim_status(resp, 400, "BadRequest", NULL, "%s", err);
                else shim_status(resp, 422, "Invalid", NULL, "%s \"%s\" is invalid: patch: %s", r->kind, name, err);
                break;
            }
        } else {
            next = json_incref(patch);
        }
        /* only status moves; everything else stays as stored */
        json_t *st = json_object_get(next, "status");
        if (st) json_object_set(cur, "status", st);
        json_decref(next);
        rc = store_update(s->st, r->store_key, ns_, cur, &out, NULL); /* CAS on what was read */
        json_decref(cur);
        if (rc == STORE_ECONFLICT && attempt + 1 < CAS_ATTEMPTS) continue;
        shim_reply_written(s, resp, rc, r, name, 200, out);
        break;
    }
    json_decref(patch);
}
