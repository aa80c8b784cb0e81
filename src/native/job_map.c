/* Job message <-> Job object pieces shared by svc_job.c and v1_map.c (job_map.h). */
#include "job_map.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "svc_common.h"
#include "svc_job.h"

const struct job_map_resource job_map_resources[] = {{"cpuLimit", "cpu", RES_CPU},
                                                     {"memLimitMb", "memory", RES_MEMORY},
                                                     {"diskLimitMb", "ephemeral-storage", RES_DISK},
                                                     {"gpuLimit", PELOTON_GPU_RESOURCE, RES_GPU}};
const size_t job_map_n_resources = sizeof job_map_resources / sizeof job_map_resources[0];

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

void job_map_k8s_name(const char *in, char *out) {
    size_t o = 0;
    for (const char *p = in; *p && o < JOB_NAME_MAX; p++) {
        char c = (char)tolower((unsigned char)*p);
        out[o++] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
    }
    out[o] = 0;
    while (o && out[o - 1] == '-') out[--o] = 0;
    size_t s = strspn(out, "-");
    memmove(out, out + s, o - s + 1);
}

int job_map_only_known(const json_t *obj, const char *const *allowed, const char *where, char *err, size_t errlen) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(*a, k);
        if (!ok) {
            snprintf(err, errlen, "%s%s: not supported here yet (docs/native-api.md)", where, k);
            return -1;
        }
    }
    return 0;
}

const char *job_map_ann(const json_t *obj, const char *k) {
    return jstr(json_object_get(json_object_get(obj, "metadata"), "annotations"), k);
}

const char *job_map_name(const json_t *job) {
    const char *n = job_map_ann(job, JOB_A_NAME);
    return n ? n : jstr(json_object_get(job, "metadata"), "name") ?: "";
}

/* The members kept as annotations: strings as they are, lists as JSON text. */
static const struct {
    const char *member, *annotation;
} ann_strs[] = {{"owner", JOB_A_OWNER}, {"owningTeam", JOB_A_TEAM}, {"description", JOB_A_DESC}},
  ann_lists[] = {{"ldapGroups", JOB_A_LDAP}, {"labels", JOB_A_LABELS}};

json_t *job_map_annotations(const json_t *msg, const char *name, const char *kname, const char *id) {
    json_t *ann = json_object();
    if (strcmp(kname, name)) json_object_set_new(ann, JOB_A_NAME, json_string(name));
    if (id && *id) json_object_set_new(ann, JOB_A_ID, json_string(id));
    for (size_t i = 0; i < sizeof ann_strs / sizeof ann_strs[0]; i++)
        if (jstr(msg, ann_strs[i].member))
            json_object_set_new(ann, ann_strs[i].annotation, json_string(jstr(msg, ann_strs[i].member)));
    for (size_t i = 0; i < sizeof ann_lists / sizeof ann_lists[0]; i++) {
        const json_t *a = json_object_get(msg, ann_lists[i].member);
        if (!a) continue;
        char *txt = json_dumps(a, JSON_COMPACT);
        json_object_set_new(ann, ann_lists[i].annotation, json_string(txt ? txt : "[]"));
        free(txt);
    }
    return ann;
}

void job_map_read_annotations(const json_t *job, json_t *msg) {
    const char *s;
    for (size_t i = 0; i < sizeof ann_strs / sizeof ann_strs[0]; i++)
        if ((s = job_map_ann(job, ann_strs[i].annotation))) json_object_set_new(msg, ann_strs[i].member, json_string(s));
    for (size_t i = 0; i < sizeof ann_lists / sizeof ann_lists[0]; i++) {
        s = job_map_ann(job, ann_lists[i].annotation);
        json_t *a = s ? json_loads(s, 0, NULL) : NULL;
        if (json_is_array(a)) json_object_set_new(msg, ann_lists[i].member, a);
        else json_decref(a);
    }
}

void job_map_policies(json_t *dst, const json_t *src) {
    const json_t *rp = json_object_get(src, "restartPolicy");
    if (rp)
        json_object_set_new(dst, "restartPolicy",
                            json_pack("{s:I}", "maxFailures", json_integer_value(json_object_get(rp, "maxFailures"))));
    const json_t *pp = json_object_get(src, "preemptionPolicy");
    if (pp)
        json_object_set_new(dst, "preemptionPolicy",
                            json_pack("{s:b}", "killOnPreempt", json_is_true(json_object_get(pp, "killOnPreempt"))));
}

void job_map_labels_to(json_t *tann, const json_t *labels) {
    size_t i;
    const json_t *l;
    json_array_foreach(labels, i, l) json_object_set_new(tann, jstr(l, "key") ?: "", json_string(jstr(l, "value") ?: ""));
}

/* The container's requests and limits for rc (a resource member); fdLimit into tann. */
static int container_resources(json_t *c, const json_t *rc, json_t *tann, const char *where, char *err, size_t errlen) {
    json_t *req = json_object();
    for (size_t i = 0; i < job_map_n_resources; i++) {
        const struct job_map_resource *r = &job_map_resources[i];
        const json_t *v = json_object_get(rc, r->field);
        char q[64];
        if (!v) continue;
        double d = json_number_value(v);
        if (!json_is_number(v)) snprintf(err, errlen, "%sresource.%s: expected a number", where, r->field);
        else if (svc_quantity(r->k, d, q, sizeof q) || (r->k == RES_GPU && d != floor(d)))
            snprintf(err, errlen, "%sresource.%s: %g is not a non-negative amount%s", where, r->field, d,
                     r->k == RES_GPU ? " of whole GPUs" : "");
        else {
            json_object_set_new(req, r->res, json_string(q));
            continue;
        }
        json_decref(req);
        return -1;
    }
    if (json_object_get(rc, "fdLimit"))
        json_object_set_new(tann, JOB_A_FD_LIMIT, json_integer(json_integer_value(json_object_get(rc, "fdLimit"))));
    json_object_set_new(c, "resources", json_pack("{s:O,s:o}", "requests", req, "limits", req));
    return 0;
}

/* The container's command, args and env for cmd (a CommandInfo). */
static int container_command(json_t *c, const json_t *cmd, const char *where, char *err, size_t errlen) {
    static const char *const allowed[] = {"shell", "value", "arguments", "environment", NULL};
    char w[128];
    snprintf(w, sizeof w, "%scommand.", where);
    if (job_map_only_known(cmd, allowed, w, err, errlen)) return -1;
    const char *value = jstr(cmd, "value") ?: "";
    const json_t *shell = json_object_get(cmd, "shell");
    if (!shell || json_is_true(shell)) { /* Mesos' default: /bin/sh -c value */
        json_object_set_new(c, "command", json_pack("[s,s,s]", "/bin/sh", "-c", value));
    } else {
        json_object_set_new(c, "command", json_pack("[s]", value));
        const json_t *args = json_object_get(cmd, "arguments");
        if (json_array_size(args)) json_object_set(c, "args", (json_t *)args);
    }
    const json_t *vars = json_object_get(json_object_get(cmd, "environment"), "variables");
    if (!json_array_size(vars)) return 0;
    json_t *env = json_array();
    json_object_set_new(c, "env", env);
    size_t i;
    const json_t *v;
    json_array_foreach(vars, i, v) {
        const char *t = jstr(v, "type");
        if (t && strcmp(t, "VALUE")) {
            snprintf(err, errlen, "%senvironment.variables[%zu]: only VALUE variables", w, i);
            return -1;
        }
        json_array_append_new(env, json_pack("{s:s,s:s}", "name", jstr(v, "name") ?: "", "value", jstr(v, "value") ?: ""));
    }
    return 0;
}

json_t *job_map_container(const json_t *cs, json_t *tann, const char *where, char *err, size_t errlen) {
    char cname[JOB_NAME_MAX + 1];
    job_map_k8s_name(jstr(cs, "name") ?: "", cname);
    json_t *c = json_pack("{s:s,s:s}", "name", cname[0] ? cname : "task", "image", NATIVE_DEFAULT_IMAGE);
    const json_t *rc = json_object_get(cs, "resource");
    if (rc && container_resources(c, rc, tann, where, err, errlen)) goto bad;
    /* the image: Docker's, or the Mesos containerizer's Docker image */
    const json_t *ci = json_object_get(cs, "container");
    if (ci) {
        static const char *const callowed[] = {"type", "docker", "mesos", NULL};
        char w[128];
        snprintf(w, sizeof w, "%scontainer.", where);
        if (job_map_only_known(ci, callowed, w, err, errlen)) goto bad;
        const char *img = jstr(json_object_get(ci, "docker"), "image");
        if (!img) img = jstr(json_object_get(json_object_get(json_object_get(ci, "mesos"), "image"), "docker"), "name");
        if (img) json_object_set_new(c, "image", json_string(img));
    }
    const json_t *cmd = json_object_get(cs, "command");
    if (cmd && container_command(c, cmd, where, err, errlen)) goto bad;
    return c;
bad:
    json_decref(c);
    return NULL;
}
