/* Pods' and nodes' special paths: defaults on create, the binding
 * subresource (what a scheduler posts), and status subresources (what
 * kubelets write), with main-resource writes leaving status alone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim.h"
#include "shim_auth.h"
#include "jparse.h"
#include "labels.h"
#include "shim_proto.h"

/* The core group's built-in resource plural. */
static const struct shim_resource *core_resource(const char *plural) {
    for (int i = 0; i < shim_nresources; i++)
        if (!shim_resources[i].group[0] && !strcmp(shim_resources[i].plural, plural)) return &shim_resources[i];
    return NULL;
}

static const struct shim_resource *pods_resource(void) { return core_resource("pods"); }

bool shim_has_status(const struct shim_resource *r) {
    if (r->custom) return r->has_status;
    if (shim_is_workload(r)) return strcmp(r->plural, "controllerrevisions") != 0;
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

/* A Binding's annotations, which the pod gets (Kubernetes copies them onto
 * it): absent, or an object of strings. */
static bool binding_annotations_ok(const json_t *ann) {
    if (!ann || json_is_null(ann)) return true;
    if (!json_is_object(ann)) return false;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ann, k, v) if (!json_is_string(v)) return false;
    return true;
}

/* A component's name as the Scheduled Event's source: 1 to 63 lower-case
 * letters, digits, '-' or '.'. */
static bool component_ok(const char *c) {
    size_t n = strlen(c);
    if (!n || n > 63) return false;
    for (size_t i = 0; i < n; i++)
        if (!((c[i] >= 'a' && c[i] <= 'z') || (c[i] >= '0' && c[i] <= '9') || c[i] == '-' || c[i] == '.'))
            return false;
    return true;
}

/* A placement term's epoch: 1 to 19 decimal digits, not all zeros (the
 * lease's INCR starts at 1). */
static bool epoch_ok(const char *e) {
    size_t n = strlen(e);
    if (!n || n > 19 || strspn(e, "0123456789") != n) return false;
    return strspn(e, "0") != n;
}

void shim_pod_binding(struct shim *s, const char *ns, const char *name, const struct http_request *req,
                      struct http_response *resp) {
    const struct shim_resource *pods = pods_resource();
    const char *event_src = http_req_arg(req, SHIM_SCHEDULED_EVENT_ARG);
    const char *epoch = http_req_arg(req, PELOTON_PLACEMENT_EPOCH_ARG);
    if (event_src && !component_ok(event_src)) {
        shim_status(resp, 400, "BadRequest", NULL, "%s must name a component: 1 to 63 lower-case letters, digits, "
                    "'-' or '.'", SHIM_SCHEDULED_EVENT_ARG);
        return;
    }
    if (epoch && !epoch_ok(epoch)) {
        shim_status(resp, 400, "BadRequest", NULL, "%s must be a placement term's epoch: a positive decimal number "
                    "of at most 19 digits", PELOTON_PLACEMENT_EPOCH_ARG);
        return;
    }
    if (event_src && !shim_sec_may(s, "create", "events", ns, resp)) return; /* the Event is the user's write too */
    json_error_t je;
    json_t *b = shim_pb_request(req) ? shim_pb_body("Binding", req, resp) /* kube-scheduler's */
                                     : jparse_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!b && shim_pb_request(req)) return;
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
    } else if (!binding_annotations_ok(json_object_get(json_object_get(b, "metadata"), "annotations"))) {
        shim_status(resp, 400, "BadRequest", NULL, "the Binding could not be decoded: metadata.annotations must "
                    "map strings to strings");
    } else {
        shim_write_binding(s, pods, ns, name ? name : bname, b, node, event_src, epoch, req, resp);
        return;
    }
    json_decref(b);
}

/* ---- the Scheduled Event of a binding (shim.h) ---- */

/* Appends the pieces of the Event's text: literal JSON, or a string quoted
 * and escaped. Non-zero when out of memory (or a string is not UTF-8). */
struct evtext {
    char *buf;
    size_t len, cap;
    int bad;
};

static void ev_lit(struct evtext *t, const char *s) {
    if (!t->bad) t->bad = jdump_append(&t->buf, &t->len, &t->cap, s, strlen(s));
}

static void ev_str(struct evtext *t, const char *s) {
    if (!t->bad) t->bad = jdump_append_string(&t->buf, &t->len, &t->cap, s, strlen(s));
}

int shim_scheduled_event_text(struct shim *s, const char *ns, const json_t *pod, const char *node,
                              const char *component, char *name, size_t namelen, struct store_text_obj *out) {
    const struct shim_resource *r = core_resource("events");
    const char *pname = meta_str(pod, "name"), *uid = meta_str(pod, "uid");
    memset(out, 0, sizeof *out);
    if (!r || !pname || !ns[0]) return -EINVAL;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t t = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    s->event_ns = t = t > s->event_ns ? t : s->event_ns + 1; /* two in one nanosecond still differ */
    /* POD.<hex>, within a name's 253 bytes: the pod's name is cut to fit,
     * and so that the part before the dot still ends in a letter or digit */
    int keep = (int)strlen(pname);
    if (keep > STORE_MAX_NAME - 17) keep = STORE_MAX_NAME - 17;
    while (keep > 0 && (pname[keep - 1] == '-' || pname[keep - 1] == '.')) keep--;
    char ts[32], msg[STORE_MAX_NAMESPACE + 2 * STORE_MAX_NAME + 40];
    snprintf(name, namelen, "%.*s.%llx", keep, pname, (unsigned long long)t);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(msg, sizeof msg, "Successfully assigned %s/%s to %s", ns, pname, node);
    /* kube-scheduler's Event, its members in the order the API server has
     * always stored them; the store puts uid, creationTimestamp, generation
     * and resourceVersion at the end of metadata (split) */
    struct evtext x = {.buf = malloc(1024), .cap = 1024};
    if (!x.buf) return -ENOMEM;
    ev_lit(&x, "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":");
    ev_str(&x, name);
    ev_lit(&x, ",\"namespace\":");
    ev_str(&x, ns);
    size_t split = x.len;
    ev_lit(&x, "},\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":");
    ev_str(&x, pname);
    ev_lit(&x, ",\"namespace\":");
    ev_str(&x, ns);
    ev_lit(&x, ",\"uid\":");
    ev_str(&x, uid ? uid : "");
    ev_lit(&x, "},\"reason\":\"Scheduled\",\"message\":");
    ev_str(&x, msg);
    ev_lit(&x, ",\"type\":\"Normal\",\"source\":{\"component\":");
    ev_str(&x, component);
    ev_lit(&x, "},\"firstTimestamp\":");
    ev_str(&x, ts);
    ev_lit(&x, ",\"lastTimestamp\":");
    ev_str(&x, ts);
    ev_lit(&x, ",\"count\":1}");
    if (x.bad) {
        free(x.buf);
        return -ENOMEM;
    }
    *out = (struct store_text_obj){.resource = r->store_key, .ns = ns, .name = name, .text = x.buf, .len = x.len,
                                   .split = split};
    return 0;
}

int shim_scheduled_event(struct shim *s, const char *ns, const json_t *pod, const char *node, const char *component,
                         char *name, size_t namelen) {
    struct store_text_obj t;
    int rc = shim_scheduled_event_text(s, ns, pod, node, component, name, namelen, &t);
    if (rc) return rc;
    json_error_t je;
    json_t *ev = jparse_loadb(t.text, t.len, 0, &je);
    free(t.text);
    if (!ev) return -ENOMEM;
    rc = store_create(s->st, t.resource, ns, ev, NULL);
    json_decref(ev);
    if (rc) {
        fprintf(stderr, "level=warn msg=\"scheduled event not stored\" event=%s err=\"%s\"\n", name,
                store_errmsg(s->st));
        name[0] = '\0';
    }
    return rc;
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

/* A container's state in words, for the log answer: "running since T",
 * "terminated with exit code N (REASON)", "waiting (REASON)"; "" unknown. */
static void container_state(const json_t *pod, const char *container, char *out, size_t len) {
    size_t i;
    json_t *cs;
    out[0] = 0;
    json_t *st = json_object_get(pod, "status");
    for (int pass = 0; pass < 2; pass++)
        json_array_foreach(json_object_get(st, pass ? "initContainerStatuses" : "containerStatuses"), i, cs) {
            const char *n = json_string_value(json_object_get(cs, "name"));
            if (!n || strcmp(n, container) != 0) continue;
            json_t *state = json_object_get(cs, "state"), *x;
            if ((x = json_object_get(state, "running"))) {
                const char *at = json_string_value(json_object_get(x, "startedAt"));
                snprintf(out, len, "it is running since %s", at ? at : "its start");
            } else if ((x = json_object_get(state, "terminated"))) {
                const char *why = json_string_value(json_object_get(x, "reason"));
                snprintf(out, len, "it terminated with exit code %" JSON_INTEGER_FORMAT "%s%s%s",
                         json_integer_value(json_object_get(x, "exitCode")), why ? " (" : "", why ? why : "",
                         why ? ")" : "");
            } else if ((x = json_object_get(state, "waiting"))) {
                const char *why = json_string_value(json_object_get(x, "reason"));
                snprintf(out, len, "it is waiting%s%s%s", why ? " (" : "", why ? why : "", why ? ")" : "");
            }
            return;
        }
}

void shim_pod_log(struct shim *s, const char *ns, const char *name, const struct http_request *req,
                  struct http_response *resp) {
    const struct shim_resource *pods = pods_resource();
    json_t *pod = NULL;
    int rc = store_get(s->st, "pods", ns, name, &pod);
    if (rc) {
        shim_store_error(s, resp, rc, pods, name);
        return;
    }
    json_t *spec = json_object_get(pod, "spec");
    const char *want = http_req_arg(req, "container"), *container = NULL;
    size_t i, n = 0;
    json_t *c;
    for (int pass = 0; pass < 2 && !container; pass++)
        json_array_foreach(json_object_get(spec, pass ? "initContainers" : "containers"), i, c) {
            const char *cn = json_string_value(json_object_get(c, "name"));
            if (!cn) continue;
            if (!pass) n++;
            if ((want && want[0] && !strcmp(cn, want)) || ((!want || !want[0]) && !pass && !container)) container = cn;
        }
    const char *node = json_string_value(json_object_get(spec, "nodeName"));
    char state[200];
    if (want && want[0] && !container)
        shim_status(resp, 400, "BadRequest", NULL, "container %s is not valid for pod %s", want, name);
    else if (!container)
        shim_status(resp, 400, "BadRequest", NULL, "pod %s has no containers", name);
    else if ((!want || !want[0]) && n > 1)
        shim_status(resp, 400, "BadRequest", NULL, "a container name must be specified for pod %s", name);
    else if (!node || !node[0])
        shim_status(resp, 400, "BadRequest", NULL,
                    "container \"%s\" in pod \"%s\" is waiting to start: the pod is not bound to a node yet",
                    container, name);
    else {
        container_state(pod, container, state, sizeof state);
        shim_status(resp, 400, "BadRequest", NULL,
                    "container \"%s\" in pod \"%s\" has no logs: node \"%s\" is simulated by kubelet-sim, which "
                    "runs no process and so keeps no output%s%s",
                    container, name, node, state[0] ? "; " : "", state);
    }
    json_decref(pod);
}
