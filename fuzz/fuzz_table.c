/* Fuzz target: Table rendering (apiserver-shim/shim_table.c) of stored
 * objects a client wrote, for every built-in kind and a custom resource with
 * printer columns, with each includeObject and with or without columns (a
 * watch's later events). The input is a JSON document: an object, or a list
 * of objects. Checks that every row has as many cells as the columns. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "jparse.h"
#include "shim.h"

static void check(const struct shim_resource *r, const json_t *items) {
    static const enum shim_include incs[] = {SHIM_INCLUDE_METADATA, SHIM_INCLUDE_OBJECT, SHIM_INCLUDE_NONE};
    for (size_t i = 0; i < sizeof incs / sizeof incs[0]; i++) {
        json_t *t = shim_table(r, items, "1", NULL, incs[i], true);
        if (!t) abort();
        size_t ncols = json_array_size(json_object_get(t, "columnDefinitions")), k;
        json_t *row;
        json_array_foreach(json_object_get(t, "rows"), k, row) {
            if (json_array_size(json_object_get(row, "cells")) != ncols) abort();
        }
        char *s = json_dumps(t, JSON_COMPACT);
        free(s);
        json_decref(t);
        json_t *one = json_array_get(items, 0);
        if (one && json_is_object(one)) json_decref(shim_table_of(r, one, incs[i], false));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *doc = jparse_loadb((const char *)data, size, 0, &je);
    if (!doc) return 0;
    json_t *items = json_is_array(doc) ? json_incref(doc) : json_pack("[O]", doc);
    size_t i;
    json_t *it;
    json_t *objs = json_array(); /* rows are objects: the store holds nothing else */
    json_array_foreach(items, i, it) if (json_is_object(it)) json_array_append(objs, it);
    for (int k = 0; k < shim_nresources; k++) check(&shim_resources[k], objs);
    struct shim_resource cr = {.group = "peloton.io", .version = "v1alpha1", .plural = "resourcepools",
                               .singular = "resourcepool", .kind = "ResourcePool", .custom = true};
    cr.columns = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}]", "name", "Parent", "type", "string",
                           "jsonPath", ".spec.parent", "name", "CPU", "type", "integer", "jsonPath",
                           ".status.summary.cpu.entitlement", "name", "Age", "type", "date", "jsonPath",
                           ".metadata.creationTimestamp");
    check(&cr, objs);
    json_decref(cr.columns);
    json_decref(objs);
    json_decref(items);
    json_decref(doc);
    return 0;
}
