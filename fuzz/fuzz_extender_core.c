/* Fuzz target: the extender's core on objects it reads from the API server
 * and from kube-scheduler's requests. The input is one JSON document; an
 * object goes in as a Pod (the watch: its nomination, its timestamps for the
 * watch-lag histogram) and as a ResourcePool (the pool tree, the status the
 * extender writes), and as the Pod of a filter and a preempt request; a
 * string is a timestamp of a watched object. Checks that nothing crashes or
 * leaks, that the pool status always carries its one TreeValid condition,
 * and that /metrics renders whole lines. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ext_int.h"

static struct ext_core *small_cluster(void) {
    struct ext_core *x = ext_core_new(NULL);
    if (!x) abort();
    static const char *const kinds[EXT_WATCH_KINDS] = {"Node", "Namespace", "ResourcePool", "Pod", "Job"};
    ext_metrics_feeds(x, kinds, EXT_WATCH_KINDS); /* the watch-lag histogram of Pod (3) */
    ext_metrics_synced(x, 3);
    for (int i = 1; i <= 2; i++) {
        json_t *n = json_pack("{s:{s:s}, s:{}, s:{s:{s:s, s:s, s:s}, s:[{s:s, s:s}]}}", "metadata", "name",
                              i == 1 ? "n1" : "n2", "spec", "status", "allocatable", "cpu", "2", "memory", "4Gi",
                              "pods", "110", "conditions", "type", "Ready", "status", "True");
        ext_core_set(x, "Node", n);
        json_decref(n);
    }
    json_t *p = json_pack("{s:{s:s}, s:{s:[{s:s, s:s, s:s}]}}", "metadata", "name", "team", "spec", "resources",
                          "kind", "cpu", "reservation", "1", "limit", "4");
    ext_core_set(x, "ResourcePool", p);
    json_decref(p);
    return x;
}

static void check_metrics(struct ext_core *x) {
    char *text;
    size_t len;
    if (ext_metrics_render(x, &text, &len)) abort();
    if (len == 0 || text[len - 1] != '\n' || strlen(text) != len) abort();
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!v) return 0;
    struct ext_core *x = small_cluster();
    if (json_is_string(v)) { /* a timestamp as the watch hands it over */
        json_t *obj = json_pack("{s:{s:O, s:O, s:[{s:O}]}}", "metadata", "creationTimestamp", v,
                                "deletionTimestamp", v, "managedFields", "time", v);
        ext_metrics_watch_event(x, 3, obj);
        json_decref(obj);
    } else if (json_is_object(v)) {
        json_t *copy = json_deep_copy(v);
        ext_metrics_watch_event(x, 3, v);
        ext_core_set(x, "Pod", v);
        json_t *args = json_pack("{s:O, s:n, s:[s, s]}", "Pod", v, "Nodes", "NodeNames", "n1", "n2");
        struct extender_args *a = NULL;
        char err[256];
        if (args && !extender_decode_args(args, &a, err, sizeof err)) {
            json_t *out = NULL;
            ext_filter(x, a, 1000, &out);
            json_decref(out);
            out = NULL;
            if (!ext_prioritize(x, a, &out, err, sizeof err)) json_decref(out);
            extender_args_free(a);
        }
        json_decref(args);
        json_t *pargs = json_pack("{s:O, s:n, s:{s:{s:[], s:i}}}", "Pod", v, "NodeNameToVictims",
                                  "NodeNameToMetaVictims", "n1", "Pods", "NumPDBViolations", 0);
        struct extender_preemption_args *pa = NULL;
        if (pargs && !extender_decode_preemption_args(pargs, &pa, err, sizeof err)) {
            json_t *out = NULL;
            if (!ext_preempt(x, pa, &out, err, sizeof err)) json_decref(out);
            extender_preemption_args_free(pa);
        }
        json_decref(pargs);
        ext_core_set(x, "ResourcePool", v);
        json_t *st = ext_pool_status(x, v);
        if (st && json_array_size(json_object_get(st, "conditions")) != 1) abort();
        json_decref(st);
        ext_core_del(x, "Pod", v);
        ext_core_del(x, "ResourcePool", v);
        if (!json_equal(v, copy)) abort(); /* borrowed: never changed */
        json_decref(copy);
    }
    check_metrics(x);
    ext_core_free(x);
    json_decref(v);
    return 0;
}
