/* A Node object as the core's host (nodehost.h). */
#include "nodehost.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "labels.h"
#include "quantity.h"

static int64_t node_q(const json_t *list, const char *key, enum res_kind k) {
    const json_t *v = json_object_get(list, key);
    const char *s = json_string_value(v);
    char buf[64];
    if (!s && json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        s = buf;
    }
    int64_t q = 0;
    if (!s || quantity_parse_kind(k, s, &q, NULL, 0) || q < 0) return 0;
    return q;
}

bool node_ready(const json_t *node) {
    const json_t *conds = json_object_get(json_object_get(node, "status"), "conditions"), *cd;
    size_t i;
    json_array_foreach(conds, i, cd) {
        const char *t = json_string_value(json_object_get(cd, "type"));
        if (t && !strcmp(t, "Ready")) {
            const char *s = json_string_value(json_object_get(cd, "status"));
            return s && !strcmp(s, "True");
        }
    }
    return false;
}

int node_host_spec(const json_t *node, struct kp_mem *m, struct host_spec *s) {
    const json_t *md = json_object_get(node, "metadata"), *spec = json_object_get(node, "spec");
    const json_t *st = json_object_get(node, "status"), *al = json_object_get(st, "allocatable");
    memset(s, 0, sizeof *s);
    s->name = json_string_value(json_object_get(md, "name"));
    if (!s->name || !s->name[0]) return -EINVAL;
    s->backend = HOST_KUBELET;
    if (!al) al = json_object_get(st, "capacity");
    s->allocatable.v[RES_CPU] = node_q(al, "cpu", RES_CPU);
    s->allocatable.v[RES_MEMORY] = node_q(al, "memory", RES_MEMORY);
    s->allocatable.v[RES_DISK] = node_q(al, "ephemeral-storage", RES_DISK);
    s->allocatable.v[RES_GPU] = node_q(al, PELOTON_GPU_RESOURCE, RES_GPU);
    char err[256];
    struct host_kv *labels = NULL;
    struct host_taint_spec *taints = NULL;
    int rc = kp_kv_map((json_t *)json_object_get(md, "labels"), "labels", m, &labels, &s->nlabels, err, sizeof err);
    if (rc == -ENOMEM) return rc;
    if (rc) s->nlabels = 0, labels = NULL;
    rc = kp_taints((json_t *)json_object_get(spec, "taints"), "taints", m, &taints, &s->ntaints, err, sizeof err);
    if (rc == -ENOMEM) return rc;
    if (rc) s->ntaints = 0, taints = NULL;
    s->labels = labels;
    s->taints = taints;
    s->unschedulable = json_is_true(json_object_get(spec, "unschedulable"));
    s->not_ready = !node_ready(node);
    return 0;
}
