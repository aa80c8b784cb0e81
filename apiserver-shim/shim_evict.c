/* POST pods/NAME/eviction (policy/v1 and policy/v1beta1 Eviction): a
 * delete that first asks the pod's disruption budgets, as kube-apiserver's
 * eviction subresource does, so that `kubectl drain` waits and retries
 * against us as against it.
 *
 * Budgets, computed from the pods as they are at the eviction (this server
 * runs no disruption controller: a PodDisruptionBudget's status is computed
 * the same way when it is read, shim_pdb_status, and never stored):
 *   - the policy/v1 PodDisruptionBudgets of the pod's namespace whose
 *     selector matches the pod (more than one is a 500, as upstream);
 *     expected pods are those the selector matches that have not ended,
 *     healthy those Running and Ready and not being deleted; desiredHealthy
 *     from minAvailable, or expected minus maxUnavailable (a percentage of
 *     expected, rounded up);
 *   - a Peloton Job's spec.sla.maximumUnavailableInstances, for a pod the
 *     Job owns: its instances not healthy, or missing, may not pass it.
 * A pod not healthy itself (or Pending, or ended) is evicted when the budget
 * is not already broken (upstream's IfHealthyBudget); a healthy one needs a
 * disruption allowed. A refusal is kube-apiserver's 429 TooManyRequests with
 * the budget's cause; an eviction done is its 201 Status Success. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "shim_proto.h"
#include "jparse.h"
#include "labels.h"
#include "selector.h"

static const char *meta_s(const json_t *o, const char *k) {
    return json_string_value(json_object_get(json_object_get(o, "metadata"), k));
}

static const char *phase_of(const json_t *pod) {
    const char *p = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    return p ? p : "";
}

static bool ended(const json_t *pod) { return !strcmp(phase_of(pod), "Succeeded") || !strcmp(phase_of(pod), "Failed"); }

/* Running, Ready (when the kubelet reports conditions) and not being deleted. */
static bool healthy(const json_t *pod) {
    if (meta_s(pod, "deletionTimestamp") || strcmp(phase_of(pod), "Running")) return false;
    json_t *conds = json_object_get(json_object_get(pod, "status"), "conditions");
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && !strcmp(t, "Ready")) return json_string_value(json_object_get(c, "status")) &&
                                            !strcmp(json_string_value(json_object_get(c, "status")), "True");
    }
    return true;
}

/* ---- counting pods ---- */

struct count {
    struct labelsel *sel; /* PDB: its selector */
    const char *job;      /* Job: its peloton.io/job label */
    int expected, healthy;
};

static int count_pod(void *ud, json_t *pod) {
    struct count *c = ud;
    json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    bool match = c->sel ? labelsel_match(c->sel, labels)
                        : json_string_value(json_object_get(labels, PL_JOB)) &&
                              !strcmp(json_string_value(json_object_get(labels, PL_JOB)), c->job);
    if (match && !ended(pod)) {
        c->expected++;
        c->healthy += healthy(pod);
    }
    json_decref(pod);
    return 0;
}

/* An IntOrString of expected: a number, or "N%" rounded up. -1 when bad. */
static int scaled(const json_t *v, int expected) {
    if (json_is_integer(v)) return (int)json_integer_value(v);
    const char *s = json_string_value(v);
    char *end;
    long pct = s ? strtol(s, &end, 10) : -1;
    if (!s || end == s || strcmp(end, "%") || pct < 0) return -1;
    return (int)ceil((double)pct * expected / 100.0);
}

/* ---- the budgets ---- */

/* A PodDisruptionBudget's spec over the pods of ns now: *expected, *healthy
 * and *desired (desiredHealthy). 0 or a store error. */
static int pdb_counts(struct shim *s, const char *ns, const json_t *spec, int *expected, int *healthy,
                      int *desired) {
    struct count c = {0};
    char err[200];
    int rc = 0;
    if (labelsel_from_object(json_object_get(spec, "selector"), &c.sel, err, sizeof err) == 0) {
        rc = shim_each(s, "pods", ns, NULL, count_pod, &c);
        labelsel_free(c.sel);
    }
    json_t *min = json_object_get(spec, "minAvailable"), *max = json_object_get(spec, "maxUnavailable");
    if (min) *desired = scaled(min, c.expected);
    else if (max) *desired = c.expected - scaled(max, c.expected);
    else *desired = 1;
    if (*desired < 0) *desired = 0;
    *expected = c.expected;
    *healthy = c.healthy;
    return rc;
}

struct budget {
    char name[300];   /* for the cause: the PDB's name, or job/NAME */
    int desired, healthy;
    bool found;
};

struct pdb_scan {
    const json_t *pod;
    struct budget *b;
    int matches;
    json_t *spec; /* the first matching PDB's spec */
};

static int pdb_match(void *ud, json_t *pdb) {
    struct pdb_scan *sc = ud;
    json_t *spec = json_object_get(pdb, "spec");
    struct labelsel *sel = NULL;
    char err[200];
    json_t *labels = json_object_get(json_object_get(sc->pod, "metadata"), "labels");
    if (labelsel_from_object(json_object_get(spec, "selector"), &sel, err, sizeof err)) {
        json_decref(pdb);
        return 0; /* a PDB we cannot read matches nothing */
    }
    /* policy/v1: an empty selector matches every pod of the namespace */
    if (labelsel_match(sel, labels) && ++sc->matches == 1) {
        sc->b->found = true;
        snprintf(sc->b->name, sizeof sc->b->name, "%s", meta_s(pdb, "name") ? meta_s(pdb, "name") : "");
        sc->spec = json_incref(spec);
    }
    labelsel_free(sel);
    json_decref(pdb);
    return 0;
}

/* The PDB budget of pod in ns: 0 (b->found says whether there is one), or
 * non-zero after an error reply. */
static int pdb_budget(struct shim *s, const char *ns, const json_t *pod, struct budget *b, struct http_response *resp) {
    const struct shim_resource *r = shim_find_resource(s, "policy", "v1", "poddisruptionbudgets");
    if (!r) return 0;
    struct pdb_scan sc = {.pod = pod, .b = b};
    int rc = shim_each(s, r->store_key, ns, NULL, pdb_match, &sc);
    json_t *spec = sc.spec;
    if (rc) {
        json_decref(spec);
        shim_store_error(s, resp, rc, r, "");
        return -1;
    }
    if (sc.matches > 1) {
        json_decref(spec);
        shim_status(resp, 500, "InternalError", NULL,
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.");
        return -1;
    }
    if (!b->found) return 0;
    int expected;
    rc = pdb_counts(s, ns, spec, &expected, &b->healthy, &b->desired);
    json_decref(spec);
    if (rc) {
        shim_store_error(s, resp, rc, shim_find_resource(s, "", "v1", "pods"), "");
        return -1;
    }
    return 0;
}

void shim_pdb_status(struct shim *s, json_t *pdb) {
    const char *ns = meta_s(pdb, "namespace");
    int expected = 0, healthy = 0, desired = 0;
    if (!ns || pdb_counts(s, ns, json_object_get(pdb, "spec"), &expected, &healthy, &desired)) return;
    json_t *gen = json_object_get(json_object_get(pdb, "metadata"), "generation");
    json_object_set_new(pdb, "status",
                        json_pack("{s:I, s:i, s:i, s:i, s:i}", "observedGeneration",
                                  json_is_integer(gen) ? json_integer_value(gen) : (json_int_t)1,
                                  "disruptionsAllowed", healthy > desired ? healthy - desired : 0,
                                  "currentHealthy", healthy, "desiredHealthy", desired, "expectedPods", expected));
}

/* The budget a Peloton Job's SLA sets for pod: 0 (b->found), or non-zero
 * after an error reply. */
static int job_budget(struct shim *s, const char *ns, const json_t *pod, struct budget *b,
                      struct http_response *resp) {
    const char *job = NULL;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(json_object_get(pod, "metadata"), "ownerReferences"), i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *av = json_string_value(json_object_get(o, "apiVersion"));
        if (kind && !strcmp(kind, "Job") && av && !strncmp(av, "peloton.io/", 11))
            job = json_string_value(json_object_get(o, "name"));
    }
    const struct shim_resource *r = shim_find_resource(s, "peloton.io", "v1alpha1", "jobs");
    if (!job || !r) return 0;
    json_t *j = NULL;
    int rc = store_get(s->st, r->store_key, ns, job, &j);
    if (rc == -ENOENT) return 0;
    if (rc) {
        shim_store_error(s, resp, rc, r, job);
        return -1;
    }
    json_t *spec = json_object_get(j, "spec");
    json_t *mu = json_object_get(json_object_get(spec, "sla"), "maximumUnavailableInstances");
    json_int_t n = json_integer_value(json_object_get(spec, "instanceCount"));
    if (json_is_integer(mu) && json_integer_value(mu) > 0) {
        struct count c = {.job = job};
        rc = shim_each(s, "pods", ns, NULL, count_pod, &c);
        if (rc) {
            json_decref(j);
            shim_store_error(s, resp, rc, shim_find_resource(s, "", "v1", "pods"), "");
            return -1;
        }
        b->found = true;
        snprintf(b->name, sizeof b->name, "job/%s", job);
        b->desired = (int)(n - json_integer_value(mu));
        if (b->desired < 0) b->desired = 0;
        b->healthy = c.healthy;
    }
    json_decref(j);
    return 0;
}

/* Whether b lets pod go; the 429 answered when not. */
static bool allowed(const struct budget *b, const json_t *pod, struct http_response *resp) {
    if (!b->found) return true;
    int spare = b->healthy - b->desired;
    if (healthy(pod) ? spare >= 1 : spare >= 0) return true;
    char cause[512];
    snprintf(cause, sizeof cause, "The disruption budget %s needs %d healthy pods and has %d currently", b->name,
             b->desired, b->healthy);
    shim_status(resp, 429, "TooManyRequests",
                json_pack("{s:[{s:s, s:s}]}", "causes", "reason", "DisruptionBudget", "message", cause),
                "Cannot evict pod as it would violate the pod's disruption budget.");
    return false;
}

/* The Eviction in the body (JSON or protobuf); NULL after an error reply. */
static json_t *read_eviction(const char *name, const struct http_request *req, struct http_response *resp) {
    json_t *ev;
    if (shim_pb_request(req)) {
        if (!(ev = shim_pb_body("Eviction", req, resp))) return NULL;
    } else {
        json_error_t je;
        ev = jparse_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(ev)) {
            shim_status(resp, 400, "BadRequest", NULL, "the body of the request could not be decoded as a "
                        "Eviction: %s", ev ? "not a JSON object" : je.text);
            json_decref(ev);
            return NULL;
        }
    }
    const char *kind = json_string_value(json_object_get(ev, "kind"));
    const char *av = json_string_value(json_object_get(ev, "apiVersion"));
    if ((kind && strcmp(kind, "Eviction")) ||
        (av && strcmp(av, "policy/v1") && strcmp(av, "policy/v1beta1"))) {
        shim_status(resp, 400, "BadRequest", NULL, "the body is a %s %s, not a policy/v1 Eviction", av ? av : "",
                    kind ? kind : "");
        json_decref(ev);
        return NULL;
    }
    const char *ename = meta_s(ev, "name");
    if (ename && ename[0] && strcmp(ename, name)) {
        shim_status(resp, 400, "BadRequest", NULL, "name in URL does not match name in Eviction object");
        json_decref(ev);
        return NULL;
    }
    json_t *opts = json_object_get(ev, "deleteOptions");
    if (opts && !json_is_object(opts) && !json_is_null(opts)) {
        shim_status(resp, 400, "BadRequest", NULL, "deleteOptions must be an object");
        json_decref(ev);
        return NULL;
    }
    return ev;
}

void shim_pod_evict(struct shim *s, const char *ns, const char *name, const struct http_request *req,
                    struct http_response *resp) {
    const struct shim_resource *pods = shim_find_resource(s, "", "v1", "pods");
    json_t *ev = read_eviction(name, req, resp);
    if (!ev) return;
    json_t *pod = NULL;
    int rc = store_get(s->st, "pods", ns, name, &pod);
    if (rc) {
        shim_store_error(s, resp, rc, pods, name);
        json_decref(ev);
        return;
    }
    /* a pod ended, not yet running, or already going needs no budget */
    bool free_to_go = ended(pod) || !strcmp(phase_of(pod), "Pending") || meta_s(pod, "deletionTimestamp");
    struct budget pdb = {0}, job = {0};
    if (!free_to_go && (pdb_budget(s, ns, pod, &pdb, resp) || job_budget(s, ns, pod, &job, resp) ||
                        !allowed(&pdb, pod, resp) || !allowed(&job, pod, resp))) {
        json_decref(pod);
        json_decref(ev);
        return;
    }
    json_decref(pod);
    /* the delete, with the Eviction's DeleteOptions as its body */
    json_t *opts = json_object_get(ev, "deleteOptions");
    char *body = json_is_object(opts) ? json_dumps(opts, JSON_COMPACT) : NULL;
    struct http_request dreq = *req;
    dreq.method = HTTP_DELETE;
    dreq.method_name = "DELETE";
    dreq.content_type = "application/json";
    dreq.body = body ? body : "";
    dreq.body_len = body ? strlen(body) : 0;
    shim_delete(s, pods, ns, name, &dreq, resp);
    free(body);
    json_decref(ev);
    if (resp->status >= 200 && resp->status < 300) { /* kube-apiserver answers a Status, not the pod */
        free(resp->body);
        resp->body = NULL;
        resp->body_len = 0;
        shim_json(resp, 201, json_pack("{s:s, s:s, s:{}, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
                                       "metadata", "status", "Success", "code", 201));
    }
}
