/* Fuzz target: admission of the workload kinds (apiserver-shim/
 * shim_workloads.c): kube-apiserver's defaults and the 422s for what is not
 * translated, on any JSON a client could send as a Deployment, StatefulSet,
 * DaemonSet, ReplicaSet or batch Job; then the Table row of what was
 * admitted. Checks that a refusal has causes and that a row has as many
 * cells as its columns. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "jparse.h"
#include "shim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *doc = jparse_loadb((const char *)data, size, 0, &je);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return 0;
    }
    for (int k = 0; k < shim_nresources; k++) {
        const struct shim_resource *r = &shim_resources[k];
        if (!shim_is_workload(r)) continue;
        json_t *obj = json_deep_copy(doc);
        char msg[1024];
        json_t *details = NULL;
        int rc = shim_workload_check(r, obj, "x", msg, sizeof msg, &details);
        if (rc == -EINVAL && !json_array_size(json_object_get(details, "causes"))) abort();
        if (rc != -EINVAL && details) abort();
        json_decref(details);
        json_t *cols = shim_workload_columns(r), *cells = shim_workload_cells(r, obj, "x", "1s");
        if (!cols || !cells || json_array_size(cols) != json_array_size(cells)) abort();
        json_decref(cols);
        json_decref(cells);
        json_decref(obj);
    }
    json_decref(doc);
    return 0;
}
