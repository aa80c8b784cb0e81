/* Pods' and nodes' special paths: defaults on create, the binding
 * subresource (what a scheduler posts), and status subresources (what
 * kubelets write), with main-resource writes leaving status alone. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"
#include "jparse.h"

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

static const char *meta_str(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

void shim_pod_binding(struct shim *s, const char *ns, const char *name, const struct http_request *req,
                      struct http_response *resp) {
    const struct shim_resource *pods = pods_resource();
    json_error_t je;
    json_t *b = jparse_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(b)) {
        shim_status(resp, 400, "BadRequest", NULL, "the Binding could not be decoded: %s",
                    b ? "not a JSON object" : je.text);
        json_decref(b);
        return;
    }
    const char *kind = json_string_value(json_object_get(b, "kind"));
    const char *bname = meta_str(b, "name");
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
        shim_write_binding(s, pods, ns, name ? name : bname, b, node, req, resp);
        return;
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
    shim_write_status(s, r, ns, name, req, resp);
}
