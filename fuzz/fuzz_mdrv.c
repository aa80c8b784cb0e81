/* Fuzz target: what the Mesos driver (kubelet-hostmgr/mesosdrv.c) reads from
 * the master and from pods: GET_AGENTS entries, attributes as labels, a
 * pod's resources and its TaskInfo. None may crash; an agent that decodes
 * has an id and a hostname; labels are strings; a TaskInfo built from any
 * pod passes the master's TaskInfo checks, and its text (what the driver
 * sends) is the bytes of its tree. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"
#include "mesosdrv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *root = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!root) return 0;
    size_t i;
    const json_t *x;
    const json_t *agents = json_object_get(json_object_get(root, "get_agents"), "agents");
    json_array_foreach(agents, i, x) {
        struct mdrv_agent_info ai;
        if (mdrv_agent_decode(x, &ai) == 0) {
            if (!ai.id || !ai.hostname || !(ai.total.cpus <= MDRV_SCALAR_MAX)) abort();
            json_decref(mdrv_attr_labels(ai.attributes));
        }
    }
    json_t *l = mdrv_attr_labels(json_is_array(root) ? root : json_object_get(root, "attributes"));
    const char *k;
    json_t *v;
    json_object_foreach(l, k, v) if (!json_is_string(v)) abort();
    json_decref(l);
    struct mesos_scalars r;
    if (mdrv_pod_scalars(root, &r) == 0) {
        if (r.cpus < 0.01 || r.mem < 32) abort();
        json_t *ti = mdrv_pod_task_info(root, "t-1", "a-1", &r);
        struct mesos_task_decl d;
        char err[256];
        if (ti && mesos_task_info_parse(ti, &d, err, sizeof err)) abort();
        /* the text the driver sends is the tree's bytes */
        char *want = ti ? jdump(ti, JSON_COMPACT, NULL) : NULL, *buf = NULL;
        size_t len = 0, cap = 0;
        if (want && (mdrv_pod_task_info_text(root, "t-1", "a-1", &r, &buf, &len, &cap) || strcmp(buf, want))) abort();
        free(buf);
        free(want);
        json_decref(ti);
    }
    json_decref(root);
    return 0;
}
