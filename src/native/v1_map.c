/* v1alpha shapes of Jobs and Pods (v1_map.h). The read direction builds on
 * the v0 TaskConfig of the Job's pod template (svc_job_task_config), whose
 * members ContainerSpec and PodSpec share; the write direction is
 * v1_job_from_spec. */
#include "v1_map.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_map.h"
#include "labels.h"
#include "peloton/api/v1alpha/job/stateless/stateless.pb-c.h"
#include "peloton/api/v1alpha/pod/pod.pb-c.h"
#include "resource.h"
#include "svc_common.h"
#include "svc_job.h"

/* The Pod annotations the job manager keeps a run's facts in. */
#define A_RUN "peloton.io/run"
#define A_FAILURES "peloton.io/failures"
#define A_CONFIG_VERSION "peloton.io/config-version"

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static long long num(const char *s, long long dflt) {
    char *end;
    long long v = s && *s ? strtoll(s, &end, 10) : -1;
    return s && *s && !*end && v >= 0 ? v : dflt;
}

static long long generation(const json_t *job) {
    json_int_t g = json_integer_value(json_object_get(json_object_get(job, "metadata"), "generation"));
    return g > 0 ? g : 1;
}

void v1_job_version(const json_t *job, char *out, size_t len) { snprintf(out, len, "%lld", generation(job)); }

static json_t *version_json(long long v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", v);
    return json_pack("{s:s}", "value", b);
}

/* "<prefix><name>" when that is a value of enum d, else dflt. */
static const char *enum_name(const ProtobufCEnumDescriptor *d, const char *prefix, const char *name, char *buf,
                             size_t len, const char *dflt) {
    snprintf(buf, len, "%s%s", prefix, name ? name : "");
    return name && protobuf_c_enum_descriptor_get_value_by_name(d, buf) ? buf : dflt;
}

/* ---------------------------------------------------------------- Job -> v1alpha */

/* A PodSpec from the v0 TaskConfig of the pod template (ContainerSpec has TaskConfig's member names). */
static json_t *pod_spec(const json_t *spec) {
    json_t *tc = svc_job_task_config(spec);
    json_t *labels = json_object_get(tc, "labels");
    for (size_t i = json_array_size(labels); i-- > 0;) /* RestartJob's mark is no label of the client's */
        if (!strcmp(jstr(json_array_get(labels, i), "key") ?: "", V1_A_RESTART)) json_array_remove(labels, i);
    json_t *c = json_object();
    static const char *const ckeys[] = {"name", "resource", "container", "command"};
    for (size_t i = 0; i < sizeof ckeys / sizeof ckeys[0]; i++)
        if (json_object_get(tc, ckeys[i])) json_object_set(c, ckeys[i], json_object_get(tc, ckeys[i]));
    json_t *ps = json_pack("{s:[o]}", "containers", c);
    static const char *const pkeys[] = {"labels", "restartPolicy", "preemptionPolicy", "killGracePeriodSeconds"};
    for (size_t i = 0; i < sizeof pkeys / sizeof pkeys[0]; i++)
        if (json_object_get(tc, pkeys[i])) json_object_set(ps, pkeys[i], json_object_get(tc, pkeys[i]));
    json_decref(tc);
    return ps;
}

json_t *v1_pod_spec(const json_t *job) { return pod_spec(json_object_get(job, "spec")); }

json_t *v1_job_spec(const json_t *job) {
    const json_t *spec = json_object_get(job, "spec");
    json_t *s = json_pack("{s:s,s:{s:I}}", "name", job_map_name(job), "revision", "version", (json_int_t)generation(job));
    job_map_read_annotations(job, s);
    const json_t *ic = json_object_get(spec, "instanceCount");
    if (json_is_integer(ic)) json_object_set(s, "instanceCount", (json_t *)ic);
    const json_t *sla = json_object_get(spec, "sla");
    if (json_is_object(sla)) {
        json_t *o = json_object();
        static const char *const keys[] = {"priority", "preemptible", "revocable"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (json_object_get(sla, keys[i])) json_object_set(o, keys[i], json_object_get(sla, keys[i]));
        json_object_set_new(s, "sla", o);
    }
    if (jstr(spec, "resourcePool"))
        json_object_set_new(s, "respoolId", json_pack("{s:s}", "value", jstr(spec, "resourcePool")));
    json_object_set_new(s, "defaultSpec", pod_spec(spec));
    return s;
}

json_t *v1_workflow_status(const json_t *job) {
    const json_t *u = json_object_get(json_object_get(job, "status"), "update");
    if (!json_is_object(u)) return NULL;
    char b[64];
    json_int_t total = json_integer_value(json_object_get(u, "instancesTotal"));
    json_int_t done = json_integer_value(json_object_get(u, "instancesDone"));
    json_int_t failed = json_integer_value(json_object_get(u, "instancesFailed"));
    json_int_t left = total - done - failed;
    json_t *w = json_pack("{s:s,s:s,s:I,s:I,s:I,s:o,s:o}", "type", "WORKFLOW_TYPE_UPDATE", "state",
                          enum_name(&peloton__api__v1alpha__job__stateless__workflow_state__descriptor,
                                    "WORKFLOW_STATE_", jstr(u, "state"), b, sizeof b, "WORKFLOW_STATE_INVALID"),
                          "numInstancesCompleted", done, "numInstancesRemaining", left > 0 ? left : 0,
                          "numInstancesFailed", failed, "version",
                          version_json(json_integer_value(json_object_get(u, "toVersion"))), "prevVersion",
                          version_json(json_integer_value(json_object_get(u, "fromVersion"))));
    json_t *cur = json_array();
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(u, "currentBatch"), i, x)
        if (json_is_integer(x) && json_integer_value(x) >= 0) json_array_append(cur, (json_t *)x);
    json_object_set_new(w, "instancesCurrent", cur);
    return w;
}

json_t *v1_update_spec(const json_t *job) {
    const json_t *us = json_object_get(json_object_get(job, "spec"), "updateStrategy");
    json_t *o = json_object();
    static const struct {
        const char *from, *to;
    } m[] = {{"batchSize", "batchSize"},
             {"rollbackOnFailure", "rollbackOnFailure"},
             {"maxInstanceAttempts", "maxInstanceRetries"},
             {"maxFailureInstances", "maxTolerableInstanceFailures"},
             {"paused", "startPaused"}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (json_object_get(us, m[i].from)) json_object_set(o, m[i].to, json_object_get(us, m[i].from));
    return o;
}

json_t *v1_job_status(const json_t *job) {
    const json_t *md = json_object_get(job, "metadata"), *st = json_object_get(job, "status");
    char b[64], k2[64];
    long long gen = generation(job);
    const char *type = jstr(json_object_get(job, "spec"), "type");
    json_t *s = json_pack(
        "{s:{s:I},s:s,s:s,s:o}", "revision", "version", (json_int_t)gen, "state",
        enum_name(&peloton__api__v1alpha__job__stateless__job_state__descriptor, "JOB_STATE_", jstr(st, "state"), b,
                  sizeof b, "JOB_STATE_INITIALIZED"),
        "desiredState", type && !strcmp(type, "BATCH") ? "JOB_STATE_SUCCEEDED" : "JOB_STATE_RUNNING", "version",
        version_json(gen));
    if (jstr(md, "creationTimestamp")) json_object_set_new(s, "creationTime", json_string(jstr(md, "creationTimestamp")));
    const json_t *ts = json_object_get(st, "taskStats");
    json_t *ps = json_object();
    const char *k;
    const json_t *n;
    json_object_foreach((json_t *)ts, k, n) {
        const char *pk = enum_name(&peloton__api__v1alpha__pod__pod_state__descriptor, "POD_STATE_", k, k2, sizeof k2,
                                   NULL);
        if (pk && json_is_integer(n) && json_integer_value(n) >= 0 && json_integer_value(n) <= UINT32_MAX)
            json_object_set(ps, pk, (json_t *)n);
    }
    json_object_set_new(s, "podStats", ps);
    json_t *w = v1_workflow_status(job);
    if (w) json_object_set_new(s, "workflowStatus", w);
    return s;
}

json_t *v1_job_summary(const json_t *job) {
    json_t *spec = v1_job_spec(job);
    json_t *s = json_pack("{s:{s:s},s:O,s:o}", "jobId", "value", svc_job_id(job), "name", json_object_get(spec, "name"),
                          "status", v1_job_status(job));
    static const char *const keys[] = {"owner", "owningTeam", "labels", "instanceCount", "respoolId"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (json_object_get(spec, keys[i])) json_object_set(s, keys[i], json_object_get(spec, keys[i]));
    json_decref(spec);
    return s;
}

/* ---------------------------------------------------------------- Pod -> PodSummary */

long long v1_pod_instance(const json_t *pod) {
    return num(jstr(json_object_get(json_object_get(pod, "metadata"), "labels"), PL_INSTANCE), -1);
}

/* docs/lifecycle.md's pod -> task state table, in v1alpha's names. */
static const char *pod_state(const json_t *pod) {
    const json_t *st = json_object_get(pod, "status");
    const char *phase = jstr(st, "phase") ?: "", *node = jstr(json_object_get(pod, "spec"), "nodeName");
    if (!strcmp(phase, "Succeeded")) return "POD_STATE_SUCCEEDED";
    if (!strcmp(phase, "Failed")) return "POD_STATE_FAILED";
    if (!strcmp(phase, "Unknown")) return "POD_STATE_LOST";
    if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp")) return "POD_STATE_KILLING";
    if (!strcmp(phase, "Running")) return "POD_STATE_RUNNING";
    return node && *node ? "POD_STATE_LAUNCHED" : "POD_STATE_PENDING";
}

json_t *v1_pod_summary(const char *jid, uint32_t i, const json_t *pod, bool deleted) {
    char name[256];
    snprintf(name, sizeof name, "%s-%u", jid, i);
    json_t *st = json_pack("{s:s}", "state", !pod ? "POD_STATE_INITIALIZED" : deleted ? "POD_STATE_DELETED" : pod_state(pod));
    json_t *images = json_object();
    json_t *sum = json_pack("{s:{s:s},s:o,s:o}", "podName", "value", name, "images", images, "status", st);
    if (!pod) return sum;
    const json_t *pst = json_object_get(pod, "status");
    char pid[300], v[32];
    snprintf(pid, sizeof pid, "%s-%lld", name, num(job_map_ann(pod, A_RUN), 1));
    json_object_set_new(st, "podId", json_pack("{s:s}", "value", pid));
    const char *node = jstr(json_object_get(pod, "spec"), "nodeName");
    if (node && *node) {
        json_object_set_new(st, "host", json_string(node));
        json_object_set_new(st, "agentId", json_pack("{s:s}", "value", node));
    }
    if (jstr(pst, "startTime")) json_object_set_new(st, "startTime", json_string(jstr(pst, "startTime")));
    if (jstr(pst, "message")) json_object_set_new(st, "message", json_string(jstr(pst, "message")));
    if (jstr(pst, "reason")) json_object_set_new(st, "reason", json_string(jstr(pst, "reason")));
    json_object_set_new(st, "failureCount", json_integer(num(job_map_ann(pod, A_FAILURES), 0) & 0xffffffff));
    snprintf(v, sizeof v, "%lld", num(job_map_ann(pod, A_CONFIG_VERSION), 0));
    json_object_set_new(st, "jobVersion", json_pack("{s:s}", "value", v));
    size_t k;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), k, c)
        if (jstr(c, "name") && jstr(c, "image")) json_object_set_new(images, jstr(c, "name"), json_string(jstr(c, "image")));
    return sum;
}

/* ---------------------------------------------------------------- JobSpec -> Job */

json_t *v1_job_from_spec(const json_t *spec, const char *id, const char *ns, char *err, size_t errlen) {
    static const char *const allowed[] = {"revision", "name", "owner", "owningTeam", "ldapGroups", "description",
                                          "labels", "instanceCount", "sla", "defaultSpec", "respoolId", NULL};
    if (job_map_only_known(spec, allowed, "spec.", err, errlen)) return NULL;
    const char *name = jstr(spec, "name") ?: "";
    char kname[JOB_NAME_MAX + 1];
    job_map_k8s_name(name, kname);
    if (!kname[0]) {
        snprintf(err, errlen, "spec.name: \"%.100s\" gives no object name (letters or digits needed)", name);
        return NULL;
    }
    const char *pool = jstr(json_object_get(spec, "respoolId"), "value");
    if (!pool || !*pool) {
        snprintf(err, errlen, "spec.respoolId: required (the id of a leaf resource pool)");
        return NULL;
    }
    const json_t *ps = json_object_get(spec, "defaultSpec");
    static const char *const pallowed[] = {"labels", "containers", "restartPolicy", "preemptionPolicy",
                                           "killGracePeriodSeconds", NULL};
    if (ps && job_map_only_known(ps, pallowed, "spec.defaultSpec.", err, errlen)) return NULL;
    if (json_array_size(json_object_get(ps, "containers")) != 1) {
        snprintf(err, errlen, "spec.defaultSpec.containers: exactly one container here (%zu given)",
                 json_array_size(json_object_get(ps, "containers")));
        return NULL;
    }
    json_t *ann = job_map_annotations(spec, name, kname, id), *tann = json_object();
    job_map_labels_to(tann, json_object_get(ps, "labels")); /* pod labels: the pods' annotations */
    const json_t *cs = json_array_get(json_object_get(ps, "containers"), 0);
    static const char *const callowed[] = {"name", "resource", "container", "command", NULL};
    const char *cn = jstr(cs, "name");
    char cname[JOB_NAME_MAX + 1];
    job_map_k8s_name(cn ?: "", cname);
    if (cn && strcmp(cname, cn)) json_object_set_new(tann, JOB_A_TASK_NAME, json_string(cn));
    json_t *c = NULL;
    if (!job_map_only_known(cs, callowed, "spec.defaultSpec.containers[0].", err, errlen))
        c = job_map_container(cs, tann, "spec.defaultSpec.containers[0].", err, errlen);
    if (!c) {
        json_decref(ann);
        json_decref(tann);
        return NULL;
    }
    json_t *tpl = json_pack("{s:{s:o},s:{s:s,s:[o]}}", "metadata", "annotations", tann, "spec", "restartPolicy",
                            "Never", "containers", c);
    const json_t *kg = json_object_get(ps, "killGracePeriodSeconds");
    if (kg) json_object_set(json_object_get(tpl, "spec"), "terminationGracePeriodSeconds", (json_t *)kg);
    json_t *kspec = json_pack("{s:s,s:s,s:I,s:o}", "type", "STATELESS", "resourcePool", pool, "instanceCount",
                              json_integer_value(json_object_get(spec, "instanceCount")), "template", tpl);
    const json_t *sla = json_object_get(spec, "sla");
    if (sla) {
        if (json_integer_value(json_object_get(sla, "maximumUnavailableInstances"))) {
            snprintf(err, errlen, "spec.sla.maximumUnavailableInstances: not supported here yet (docs/native-api.md)");
            goto bad;
        }
        json_t *o = json_object();
        static const char *const keys[] = {"priority", "preemptible", "revocable"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (json_object_get(sla, keys[i])) json_object_set(o, keys[i], json_object_get(sla, keys[i]));
        json_object_set_new(kspec, "sla", o);
    }
    job_map_policies(kspec, ps);
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:o},s:o}", "apiVersion", "peloton.io/v1alpha1", "kind", "Job", "metadata",
                     "name", kname, "namespace", ns, "annotations", ann, "spec", kspec);
bad:
    json_decref(ann);
    json_decref(kspec);
    return NULL;
}

const json_t *v1_find_job(const json_t *items, const char *jid) {
    size_t i;
    const json_t *j;
    json_array_foreach(items, i, j) if (!strcmp(svc_job_id(j), jid)) return j;
    return NULL;
}

bool v1_labels_have(const json_t *have, const json_t *want) {
    size_t i, j;
    const json_t *w, *h;
    json_array_foreach(want, i, w) {
        bool found = false;
        json_array_foreach(have, j, h) found |= json_equal((json_t *)w, (json_t *)h);
        if (!found) return false;
    }
    return true;
}
