/* v0 JobManager over Job objects (svc_job.h). Both directions are written
 * between JSON shapes: the request's JobConfig as proto3 JSON (pbjson) and
 * the Job object, and back; pbjson makes the response message. */
#include "svc_job.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "job_map.h"
#include "labels.h"
#include "ncache.h"
#include "pbjson.h"
#include "peloton/api/v0/job/job.pb-c.h"
#include "svc_common.h"
#include "svc_jobwrite.h"

#define JOBS_PATH "/apis/peloton.io/v1alpha1/jobs"
#define NS_JOBS_PATH "/apis/peloton.io/v1alpha1/namespaces/" NATIVE_JOB_NAMESPACE "/jobs"
#define QUERY_DEFAULT_LIMIT 100

struct svc_job {
    struct kclient *kc;
};

enum job_op { OP_CREATE, OP_GET, OP_QUERY, OP_DELETE_FIND, OP_DELETE_DO };

struct job_call {
    struct svc_op base;
    enum job_op kind;
    char id[128];
    json_t *query; /* QueryRequest as JSON */
};

/* ---------------------------------------------------------------- helpers */

static json_t *id_json(const char *id) { return json_pack("{s:s}", "value", id); }

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* ---------------------------------------------------------------- JobConfig -> Job */

/* The pod template for a TaskConfig (as JSON), or NULL with err. */
static json_t *template_from_task(const json_t *tc, char *err, size_t errlen) {
    static const char *const allowed[] = {"name", "labels", "resource", "container", "command", "restartPolicy",
                                          "preemptionPolicy", "killGracePeriodSeconds", NULL};
    if (job_map_only_known(tc, allowed, "defaultConfig.", err, errlen)) return NULL;
    json_t *tann = json_object();
    if (jstr(tc, "name")) json_object_set_new(tann, JOB_A_TASK_NAME, json_string(jstr(tc, "name")));
    /* task labels: the pods' annotations (the API server checks the keys) */
    job_map_labels_to(tann, json_object_get(tc, "labels"));
    json_t *c = job_map_container(tc, tann, "defaultConfig.", err, errlen);
    if (!c) {
        json_decref(tann);
        return NULL;
    }
    json_t *tpl = json_pack("{s:{s:o},s:{s:s,s:[o]}}", "metadata", "annotations", tann, "spec", "restartPolicy", "Never",
                            "containers", c);
    const json_t *kg = json_object_get(tc, "killGracePeriodSeconds");
    if (kg) json_object_set(json_object_get(tpl, "spec"), "terminationGracePeriodSeconds", (json_t *)kg);
    return tpl;
}

json_t *svc_job_from_config(const json_t *cfg, const char *id, char *err, size_t errlen) {
    static const char *const allowed[] = {"changeLog", "name", "type", "owningTeam", "ldapGroups", "description",
                                          "labels", "instanceCount", "sla", "defaultConfig", "respoolID", "owner",
                                          NULL};
    if (job_map_only_known(cfg, allowed, "config.", err, errlen)) return NULL;
    const char *name = jstr(cfg, "name");
    char kname[JOB_NAME_MAX + 1];
    job_map_k8s_name(name ? name : "", kname);
    if (!kname[0]) {
        snprintf(err, errlen, "config.name: \"%.100s\" gives no object name (letters or digits needed)", name ? name : "");
        return NULL;
    }
    const char *pool = jstr(json_object_get(cfg, "respoolID"), "value");
    if (!pool || !*pool) {
        snprintf(err, errlen, "config.respoolID: required (the id of a leaf resource pool)");
        return NULL;
    }
    const char *type = jstr(cfg, "type") ? jstr(cfg, "type") : "BATCH";
    const char *ktype = !strcmp(type, "SERVICE") ? "STATELESS" : type; /* BATCH, DAEMON as they are */
    json_t *ann = job_map_annotations(cfg, name, kname, id);
    json_t *spec = json_pack("{s:s,s:s}", "type", ktype, "resourcePool", pool);
    json_t *ic = json_object_get(cfg, "instanceCount");
    if (strcmp(ktype, "DAEMON")) json_object_set_new(spec, "instanceCount", json_integer(json_integer_value(ic)));
    const json_t *sla = json_object_get(cfg, "sla");
    if (sla) {
        static const char *const sallowed[] = {"priority", "preemptible", "revocable", "minimumRunningInstances",
                                               "maximumRunningInstances", NULL};
        if (job_map_only_known(sla, sallowed, "config.sla.", err, errlen)) goto bad;
        json_object_set(spec, "sla", (json_t *)sla);
    }
    const json_t *dc = json_object_get(cfg, "defaultConfig");
    json_t *empty = json_object();
    json_t *tpl = template_from_task(dc ? dc : empty, err, errlen);
    json_decref(empty);
    if (!tpl) goto bad;
    json_object_set_new(spec, "template", tpl);
    const char *pt = jstr(json_object_get(dc, "preemptionPolicy"), "type");
    if (pt && strcmp(pt, "TYPE_INVALID")) {
        snprintf(err, errlen, "defaultConfig.preemptionPolicy.type: per-task preemptibility is not supported "
                              "here yet (use config.sla.preemptible)");
        goto bad;
    }
    job_map_policies(spec, dc);
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:o},s:o}", "apiVersion", "peloton.io/v1alpha1", "kind", "Job", "metadata",
                     "name", kname, "namespace", NATIVE_JOB_NAMESPACE, "annotations", ann, "spec", spec);
bad:
    json_decref(ann);
    json_decref(spec);
    return NULL;
}

json_t *svc_job_merge(const json_t *cur, const json_t *fresh) {
    static const char *const native_ann[] = {JOB_A_NAME, JOB_A_OWNER, JOB_A_TEAM, JOB_A_DESC, JOB_A_LDAP, JOB_A_LABELS};
    static const char *const spec_keys[] = {"resourcePool", "instanceCount", "sla", "template", "restartPolicy",
                                            "preemptionPolicy"};
    json_t *out = json_deep_copy(cur);
    json_t *md = json_object_get(out, "metadata"), *spec = json_object_get(out, "spec");
    const json_t *fspec = json_object_get(fresh, "spec");
    json_t *ann = json_object_get(md, "annotations");
    if (!json_is_object(ann)) json_object_set_new(md, "annotations", ann = json_object());
    for (size_t i = 0; i < sizeof native_ann / sizeof native_ann[0]; i++) json_object_del(ann, native_ann[i]);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(fresh, "metadata"), "annotations"), k, v)
        if (strcmp(k, JOB_A_ID)) json_object_set(ann, k, v);
    /* a rolling restart's mark stays: it is no part of the config, and the template would change without it */
    const json_t *mark = json_object_get(json_object_get(json_object_get(json_object_get(spec, "template"), "metadata"),
                                                         "annotations"), SVC_A_RESTART);
    if (mark) json_incref((json_t *)mark);
    for (size_t i = 0; i < sizeof spec_keys / sizeof spec_keys[0]; i++) {
        json_t *fv = json_object_get(fspec, spec_keys[i]);
        if (fv) json_object_set_new(spec, spec_keys[i], json_deep_copy(fv));
        else json_object_del(spec, spec_keys[i]);
    }
    json_t *tann = json_object_get(json_object_get(json_object_get(spec, "template"), "metadata"), "annotations");
    if (mark && json_is_object(tann)) json_object_set(tann, SVC_A_RESTART, (json_t *)mark);
    json_decref((json_t *)mark);
    return out;
}

/* ---------------------------------------------------------------- Job -> JobInfo */

const char *svc_job_id(const json_t *job) {
    const json_t *md = json_object_get(job, "metadata");
    const char *id = jstr(json_object_get(md, "annotations"), JOB_A_ID);
    return id ? id : jstr(md, "uid") ? jstr(md, "uid") : "";
}

json_t *svc_job_task_config(const json_t *spec) {
    const json_t *tpl = json_object_get(spec, "template");
    const json_t *c = json_array_get(json_object_get(json_object_get(tpl, "spec"), "containers"), 0);
    const char *tn = jstr(json_object_get(json_object_get(tpl, "metadata"), "annotations"), JOB_A_TASK_NAME);
    json_t *tc = json_pack("{s:s}", "name", tn ? tn : jstr(c, "name") ? jstr(c, "name") : "");
    const char *k;
    const json_t *v;
    json_t *labels = json_array();
    json_object_foreach(json_object_get(json_object_get(tpl, "metadata"), "annotations"), k, v)
        if (json_is_string(v) && strcmp(k, JOB_A_TASK_NAME) && strcmp(k, JOB_A_FD_LIMIT) && strcmp(k, SVC_A_RESTART))
            json_array_append_new(labels, json_pack("{s:s,s:O}", "key", k, "value", v));
    if (json_array_size(labels)) json_object_set_new(tc, "labels", labels);
    else json_decref(labels);
    const json_t *res = json_object_get(json_object_get(c, "resources"), "requests");
    if (!res) res = json_object_get(json_object_get(c, "resources"), "limits");
    if (res) {
        json_t *r = json_object();
        for (size_t i = 0; i < job_map_n_resources; i++) {
            double amt = svc_native_amount(job_map_resources[i].k, json_object_get(res, job_map_resources[i].res));
            if (!isnan(amt)) json_object_set_new(r, job_map_resources[i].field, json_real(amt));
        }
        json_object_set_new(tc, "resource", r);
    }
    if (jstr(c, "image"))
        json_object_set_new(tc, "container", json_pack("{s:s,s:{s:s}}", "type", "DOCKER", "docker", "image", jstr(c, "image")));
    const json_t *cmd = json_object_get(c, "command"), *args = json_object_get(c, "args");
    if (json_array_size(cmd) == 3 &&
        !strcmp(json_string_value(json_array_get(cmd, 0)) ?: "", "/bin/sh") &&
        !strcmp(json_string_value(json_array_get(cmd, 1)) ?: "", "-c") && !json_array_size(args)) {
        json_object_set_new(tc, "command", json_pack("{s:b,s:s}", "shell", 1, "value",
                                                     json_string_value(json_array_get(cmd, 2)) ?: ""));
    } else if (json_array_size(cmd)) {
        json_t *a = json_array();
        for (size_t i = 1; i < json_array_size(cmd); i++) json_array_append(a, json_array_get(cmd, i));
        size_t i;
        json_array_foreach(args, i, v) json_array_append(a, (json_t *)v);
        json_object_set_new(tc, "command", json_pack("{s:b,s:s,s:o}", "shell", 0, "value",
                                                     json_string_value(json_array_get(cmd, 0)) ?: "", "arguments", a));
    }
    const json_t *env = json_object_get(c, "env");
    if (json_array_size(env) && json_object_get(tc, "command")) {
        json_t *vars = json_array();
        size_t i;
        json_array_foreach(env, i, v) if (jstr(v, "name") && jstr(v, "value"))
            json_array_append_new(vars, json_pack("{s:s,s:s}", "name", jstr(v, "name"), "value", jstr(v, "value")));
        json_object_set_new(json_object_get(tc, "command"), "environment", json_pack("{s:o}", "variables", vars));
    }
    job_map_policies(tc, spec);
    const json_t *tg = json_object_get(json_object_get(tpl, "spec"), "terminationGracePeriodSeconds");
    if (json_is_integer(tg) && json_integer_value(tg) >= 0 && json_integer_value(tg) <= UINT32_MAX)
        json_object_set(tc, "killGracePeriodSeconds", (json_t *)tg);
    return tc;
}

static bool is_job_state(const char *s) {
    return s && protobuf_c_enum_descriptor_get_value_by_name(&peloton__api__v0__job__job_state__descriptor, s);
}

static json_t *runtime_json(const json_t *job, const char *ptype) {
    const json_t *md = json_object_get(job, "metadata"), *st = json_object_get(job, "status");
    const char *state = jstr(st, "state");
    if (!is_job_state(state)) state = "INITIALIZED";
    const char *goal = !strcmp(ptype, "BATCH") ? "SUCCEEDED" : "RUNNING";
    if (job_map_ann(job, SVC_A_STOPPED)) { /* Stop (svc_job_ctl.c): scaled to 0, so KILLING until no instance is left */
        goal = "KILLED";
        state = !strcmp(state, "INITIALIZED") ? "KILLED" : "KILLING";
    }
    json_t *rt = json_pack("{s:s,s:s}", "state", state, "goalState", goal);
    if (jstr(md, "creationTimestamp")) json_object_set_new(rt, "creationTime", json_string(jstr(md, "creationTimestamp")));
    json_int_t gen = json_integer_value(json_object_get(md, "generation"));
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(gen ? gen : 1));
    json_object_set_new(rt, "configurationVersion", json_string(v));
    const json_t *ts = json_object_get(st, "taskStats");
    if (json_is_object(ts)) {
        json_t *m = json_object();
        const char *k;
        const json_t *n;
        json_object_foreach((json_t *)ts, k, n) if (json_is_integer(n) && json_integer_value(n) >= 0 &&
                                                    json_integer_value(n) <= UINT32_MAX) json_object_set(m, k, (json_t *)n);
        json_object_set_new(rt, "taskStats", m);
    }
    return rt;
}

const char *svc_job_type(const json_t *spec) {
    const char *t = jstr(spec, "type");
    return !t ? "BATCH" : (!strcmp(t, "STATELESS") || !strcmp(t, "STATEFUL")) ? "SERVICE" : t;
}

static json_t *config_json(const json_t *job) {
    const json_t *md = json_object_get(job, "metadata"), *spec = json_object_get(job, "spec");
    const char *ptype = svc_job_type(spec);
    json_t *cfg = json_pack("{s:s,s:s}", "name", job_map_name(job), "type", ptype);
    job_map_read_annotations(job, cfg);
    const json_t *ic = json_object_get(spec, "instanceCount");
    if (json_is_integer(ic)) json_object_set(cfg, "instanceCount", (json_t *)ic);
    const json_t *sla = json_object_get(spec, "sla");
    if (json_is_object(sla)) {
        json_t *o = json_object();
        static const char *const keys[] = {"priority", "preemptible", "revocable", "minimumRunningInstances",
                                           "maximumRunningInstances"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (json_object_get(sla, keys[i])) json_object_set(o, keys[i], json_object_get(sla, keys[i]));
        json_object_set_new(cfg, "sla", o);
    }
    if (jstr(spec, "resourcePool")) json_object_set_new(cfg, "respoolID", id_json(jstr(spec, "resourcePool")));
    json_object_set_new(cfg, "defaultConfig", svc_job_task_config(spec));
    json_int_t gen = json_integer_value(json_object_get(md, "generation"));
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(gen ? gen : 1));
    json_object_set_new(cfg, "changeLog", json_pack("{s:s}", "version", v));
    return cfg;
}

json_t *svc_job_info(const json_t *job) {
    return json_pack("{s:o,s:o,s:o}", "id", id_json(svc_job_id(job)), "config", config_json(job), "runtime",
                     runtime_json(job, svc_job_type(json_object_get(job, "spec"))));
}

static json_t *summary_json(const json_t *job) {
    json_t *cfg = config_json(job);
    json_t *s = json_pack("{s:o,s:O,s:O,s:o}", "id", id_json(svc_job_id(job)), "name", json_object_get(cfg, "name"), "type",
                          json_object_get(cfg, "type"), "runtime",
                          runtime_json(job, svc_job_type(json_object_get(job, "spec"))));
    static const char *const keys[] = {"owner", "owningTeam", "labels", "instanceCount", "respoolID", "sla"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (json_object_get(cfg, keys[i])) json_object_set(s, keys[i], json_object_get(cfg, keys[i]));
    json_decref(cfg);
    return s;
}

/* ---------------------------------------------------------------- query */

static bool has_label(const json_t *labels, const json_t *want) {
    size_t i;
    const json_t *l;
    json_array_foreach(labels, i, l) if (json_equal((json_t *)l, (json_t *)want)) return true;
    return false;
}

static bool contains(const char *hay, const char *needle) { return hay && needle && strstr(hay, needle); }

/* Whether job matches the QueryRequest q (JSON). */
static bool query_match(const json_t *job, const json_t *q) {
    const json_t *spec = json_object_get(q, "spec");
    const char *pool = jstr(json_object_get(q, "respoolID"), "value");
    if (pool && *pool && strcmp(pool, jstr(json_object_get(job, "spec"), "resourcePool") ?: "")) return false;
    json_t *cfg = config_json(job);
    json_t *rt = runtime_json(job, svc_job_type(json_object_get(job, "spec")));
    bool ok = true;
    const json_t *states = json_object_get(spec, "jobStates");
    if (json_array_size(states)) {
        bool any = false;
        size_t i;
        const json_t *s;
        json_array_foreach(states, i, s) any |= json_equal((json_t *)s, json_object_get(rt, "state"));
        ok &= any;
    }
    const char *owner = jstr(spec, "owner"), *name = jstr(spec, "name");
    if (owner && *owner) ok &= !strcmp(owner, jstr(cfg, "owner") ?: "");
    if (name && *name) ok &= contains(jstr(cfg, "name"), name);
    const json_t *labels = json_object_get(spec, "labels"), *have = json_object_get(cfg, "labels");
    size_t i;
    const json_t *l;
    json_array_foreach(labels, i, l) ok &= has_label(have, l);
    const json_t *kws = json_object_get(spec, "keywords");
    json_array_foreach(kws, i, l) {
        const char *kw = json_string_value(l);
        char *lab = have ? json_dumps(have, JSON_COMPACT) : NULL;
        ok &= contains(jstr(cfg, "name"), kw) || contains(jstr(cfg, "owner"), kw) ||
              contains(jstr(cfg, "description"), kw) || contains(lab, kw);
        free(lab);
    }
    json_decref(cfg);
    json_decref(rt);
    return ok;
}

/* Order of QuerySpec.pagination.orderBy[0]: by "name" or (default) "creation_time". */
struct job_order {
    const char *prop;
    bool desc;
};

static int by_order(const void *a, const void *b, void *ud) {
    const struct job_order *o = ud;
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c;
    if (o->prop && !strcmp(o->prop, "name")) c = strcmp(job_map_name(x), job_map_name(y));
    else {
        c = strcmp(jstr(json_object_get(x, "metadata"), "creationTimestamp") ?: "",
                   jstr(json_object_get(y, "metadata"), "creationTimestamp") ?: "");
        if (!c) c = strcmp(job_map_name(x), job_map_name(y));
    }
    return o->desc ? -c : c;
}

static void answer_query(struct job_call *op, const json_t *items) {
    const json_t *q = op->query, *pg = json_object_get(json_object_get(q, "spec"), "pagination");
    size_t n = json_array_size(items), m = 0;
    json_t **sel = calloc(n ? n : 1, sizeof *sel);
    if (!sel) {
        native_call_fail(op->base.call, NC_INTERNAL, "out of memory");
        return;
    }
    size_t i;
    json_t *j;
    json_array_foreach(items, i, j) if (query_match(j, q)) sel[m++] = j;
    const json_t *ob = json_array_get(json_object_get(pg, "orderBy"), 0);
    struct job_order order = {jstr(json_object_get(ob, "property"), "value"), !strcmp(jstr(ob, "order") ?: "", "DESC")};
    qsort_r(sel, m, sizeof *sel, by_order, &order);
    json_int_t off = json_integer_value(json_object_get(pg, "offset"));
    json_int_t lim = json_integer_value(json_object_get(pg, "limit"));
    json_int_t maxl = json_integer_value(json_object_get(pg, "maxLimit"));
    if (lim <= 0) lim = QUERY_DEFAULT_LIMIT;
    if (maxl > 0 && lim > maxl) lim = maxl;
    bool summary = json_is_true(json_object_get(q, "summaryOnly"));
    json_t *results = json_array(), *records = json_array();
    for (size_t k = (size_t)off; k < m && (json_int_t)(k - (size_t)off) < lim; k++) {
        json_array_append_new(results, summary_json(sel[k]));
        if (!summary) json_array_append_new(records, svc_job_info(sel[k]));
    }
    free(sel);
    json_t *resp = json_pack("{s:o,s:o,s:{s:I,s:I,s:I}}", "results", results, "records", records, "pagination",
                             "offset", off, "limit", lim, "total", (json_int_t)m);
    if (json_object_get(q, "spec")) json_object_set(resp, "spec", json_object_get(q, "spec"));
    svc_reply_json(op->base.call, &peloton__api__v0__job__query_response__descriptor, resp);
}

/* ---------------------------------------------------------------- calls */

static void on_list(void *ud, const struct kc_response *r);
static void on_write(void *ud, const struct kc_response *r);

static void op_release(struct svc_op *base) {
    struct job_call *op = (struct job_call *)base;
    json_decref(op->query);
    free(op);
}

static struct job_call *op_new(struct svc_job *svc, struct native_call *call, enum job_op kind, const char *id) {
    struct job_call *op = svc_op_new(sizeof *op, svc->kc, call, op_release);
    if (!op) return NULL;
    op->kind = kind;
    snprintf(op->id, sizeof op->id, "%s", id ? id : "");
    return op;
}

static bool valid_id(const char *s) {
    size_t n = strlen(s);
    return n && n <= 64 && strspn(s, "0123456789abcdefABCDEF-") == n;
}

static void h_create(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Job__CreateRequest *req = (const void *)msg;
    const char *id = req->id && req->id->value ? req->id->value : "";
    char err[512] = "";
    if (id[0] && !valid_id(id)) {
        svc_reply_json(call, &peloton__api__v0__job__create_response__descriptor,
                       json_pack("{s:{s:{s:{s:s},s:s}}}", "error", "invalidJobId", "id", "value", id, "message",
                                 "a job id is a UUID"));
        return;
    }
    json_t *cfg = req->config ? pbjson_from_msg(&req->config->base, err, sizeof err) : NULL;
    json_t *job = cfg ? svc_job_from_config(cfg, id, err, sizeof err) : NULL;
    if (!req->config) snprintf(err, sizeof err, "config is required");
    json_decref(cfg);
    if (!job) {
        svc_reply_json(call, &peloton__api__v0__job__create_response__descriptor,
                       json_pack("{s:{s:{s:{s:s},s:s}}}", "error", "invalidConfig", "id", "value", id, "message", err));
        return;
    }
    struct job_call *op = op_new(ud, call, OP_CREATE, id);
    if (op) svc_op_request(&op->base, "POST", NS_JOBS_PATH, job, on_write);
    json_decref(job);
}

/* Get from the read cache: the reply built once per version of the Job
 * (a memo) and sent as it is. false: read through the API server. */
static bool get_cached(struct native_call *call, const char *id) {
    struct ncache *c = svc_cache(call);
    const json_t *job = ncache_job(c, id);
    if (!job) return false;
    const struct ncache_reply *m = ncache_job_memo(c, id, NCACHE_MEMO_V0_GET);
    if (!m) {
        char err[256];
        json_t *j = json_pack("{s:o}", "jobInfo", svc_job_info(job));
        ProtobufCMessage *built = j ? pbjson_to_msg(&peloton__api__v0__job__get_response__descriptor, j, err, sizeof err) : NULL;
        json_decref(j);
        if (!built || !(m = ncache_job_memo_set(c, id, NCACHE_MEMO_V0_GET, built))) return false; /* the slow path says why */
    }
    native_call_reply_packed(call, m->msg, m->packed, m->len);
    return true;
}

static void h_get(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Job__GetRequest *req = (const void *)msg;
    if (get_cached(call, req->id && req->id->value ? req->id->value : "")) return;
    struct job_call *op = op_new(ud, call, OP_GET, req->id && req->id->value ? req->id->value : "");
    if (op) svc_op_request(&op->base, "GET", JOBS_PATH, NULL, on_list);
}

static void h_delete(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    const Peloton__Api__V0__Job__DeleteRequest *req = (const void *)msg;
    struct job_call *op = op_new(ud, call, OP_DELETE_FIND, req->id && req->id->value ? req->id->value : "");
    if (op) svc_op_request(&op->base, "GET", JOBS_PATH, NULL, on_list);
}

static void h_query(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    char err[256];
    json_t *q = pbjson_from_msg(msg, err, sizeof err);
    if (!q) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "%s", err);
        return;
    }
    struct job_call *op = op_new(ud, call, OP_QUERY, NULL);
    if (!op) {
        json_decref(q);
        return;
    }
    op->query = q;
    svc_op_request(&op->base, "GET", JOBS_PATH, NULL, on_list);
}

static const json_t *find_job(const json_t *items, const char *id) {
    size_t i;
    const json_t *j;
    json_array_foreach(items, i, j) if (!strcmp(svc_job_id(j), id)) return j;
    return NULL;
}

static json_t *not_found(const char *id) {
    char msg[256];
    snprintf(msg, sizeof msg, "job %.128s not found", id);
    return json_pack("{s:{s:{s:{s:s},s:s}}}", "error", "notFound", "id", "value", id, "message", msg);
}

static void on_list(void *ud, const struct kc_response *r) {
    struct job_call *op = ud;
    const json_t *items = svc_list_items_or_fail(&op->base, r);
    if (!items) return;
    const json_t *job = op->kind == OP_QUERY ? NULL : find_job(items, op->id);
    switch (op->kind) {
    case OP_QUERY: answer_query(op, items); break;
    case OP_GET:
        svc_reply_json(op->base.call, &peloton__api__v0__job__get_response__descriptor,
                       job ? json_pack("{s:o}", "jobInfo", svc_job_info(job)) : not_found(op->id));
        break;
    case OP_DELETE_FIND: {
        if (!job) {
            svc_reply_json(op->base.call, &peloton__api__v0__job__delete_response__descriptor, not_found(op->id));
            break;
        }
        const json_t *md = json_object_get(job, "metadata");
        char path[512];
        snprintf(path, sizeof path, "/apis/peloton.io/v1alpha1/namespaces/%s/jobs/%s", jstr(md, "namespace") ?: "",
                 jstr(md, "name") ?: "");
        op->kind = OP_DELETE_DO;
        svc_op_request(&op->base, "DELETE", path, NULL, on_write); /* op lives on, or is freed */
        return;
    }
    default: break;
    }
    svc_op_free(&op->base);
}

static void on_write(void *ud, const struct kc_response *r) {
    struct job_call *op = ud;
    const char *msg = r->error ? r->error : "";
    if (op->kind == OP_CREATE) {
        json_t *obj = r->status == 201 || r->status == 200 ? kc_response_body(r) : NULL;
        if (obj)
            svc_reply_json(op->base.call, &peloton__api__v0__job__create_response__descriptor,
                           json_pack("{s:o}", "jobId", id_json(svc_job_id(obj))));
        else if (r->status == 409)
            svc_reply_json(op->base.call, &peloton__api__v0__job__create_response__descriptor,
                           json_pack("{s:{s:{s:{s:s},s:s}}}", "error", "alreadyExists", "id", "value", op->id, "message", msg));
        else if (r->status == 422 || r->status == 400 || r->status == 404)
            svc_reply_json(op->base.call, &peloton__api__v0__job__create_response__descriptor,
                           json_pack("{s:{s:{s:{s:s},s:s}}}", "error", "invalidConfig", "id", "value", op->id, "message", msg));
        else svc_fail_status(op->base.call, r);
    } else if (op->kind == OP_DELETE_DO) {
        if (r->status == 200 || r->status == 202)
            svc_reply_json(op->base.call, &peloton__api__v0__job__delete_response__descriptor, json_object());
        else if (r->status == 404)
            svc_reply_json(op->base.call, &peloton__api__v0__job__delete_response__descriptor, not_found(op->id));
        else svc_fail_status(op->base.call, r);
    }
    svc_op_free(&op->base);
}

/* ---------------------------------------------------------------- registration */

static const struct native_method methods[] = {
    {"Create", &peloton__api__v0__job__create_request__descriptor, &peloton__api__v0__job__create_response__descriptor,
     h_create, false},
    {"Get", &peloton__api__v0__job__get_request__descriptor, &peloton__api__v0__job__get_response__descriptor, h_get,
     false},
    {"Query", &peloton__api__v0__job__query_request__descriptor, &peloton__api__v0__job__query_response__descriptor,
     h_query, false},
    {"Delete", &peloton__api__v0__job__delete_request__descriptor, &peloton__api__v0__job__delete_response__descriptor,
     h_delete, false},
};

struct svc_job *svc_job_new(struct kclient *kc) {
    struct svc_job *s = calloc(1, sizeof *s);
    if (s) s->kc = kc;
    return s;
}

void svc_job_free(struct svc_job *s) { free(s); }

int svc_job_register(struct svc_job *s, struct native_registry *r) {
    size_t n = sizeof methods / sizeof methods[0];
    size_t nc;
    const struct native_method *ctl = svc_job_ctl_methods(&nc);
    static const char *const names[] = {"peloton.api.job.JobManager", "peloton.api.v0.job.JobManager"};
    for (size_t i = 0; i < 2; i++) {
        int rc = native_registry_add(r, names[i], methods, n, s);
        if (!rc) rc = native_registry_add(r, names[i], ctl, nc, s->kc);
        if (rc) return rc;
    }
    return 0;
}
