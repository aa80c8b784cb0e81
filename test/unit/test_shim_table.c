/* shim_table: the Tables kubectl get prints, and the one-row Tables of watch
 * events (columns with the first event only; the row's object as
 * includeObject says). */
#include <jansson.h>
#include <string.h>

#include "shim.h"
#include "test.h"

static const struct shim_resource *builtin(const char *plural) {
    for (int i = 0; i < shim_nresources; i++)
        if (!strcmp(shim_resources[i].plural, plural)) return &shim_resources[i];
    return NULL;
}

static json_t *pod(const char *name, const char *node, const char *status_json) {
    json_error_t je;
    json_t *st = json_loads(status_json, 0, &je);
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{s:s, s:[{s:s}]}, s:o}", "apiVersion", "v1", "kind", "Pod",
                     "metadata", "name", name, "namespace", "default", "resourceVersion", "42", "creationTimestamp",
                     "2026-01-01T00:00:00Z", "spec", "nodeName", node, "containers", "name", "app", "status", st);
}

/* The cell under column NAME of the table's first row. */
static const char *cell(const json_t *t, const char *name) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(t, "columnDefinitions"), i, c) {
        if (!strcmp(json_string_value(json_object_get(c, "name")), name))
            return json_string_value(json_array_get(json_object_get(json_array_get(json_object_get(t, "rows"), 0),
                                                                    "cells"), i));
    }
    return NULL;
}

TEST(table_watch_event_carries_columns_first_only) {
    const struct shim_resource *r = builtin("pods");
    REQUIRE(r);
    json_t *p = pod("web", "n1", "{\"phase\":\"Running\"}");
    json_t *first = shim_table_of(r, p, SHIM_INCLUDE_METADATA, true);
    json_t *later = shim_table_of(r, p, SHIM_INCLUDE_METADATA, false);
    REQUIRE(first && later);
    CHECK_STR(json_string_value(json_object_get(first, "kind")), "Table");
    CHECK_STR(json_string_value(json_object_get(first, "apiVersion")), "meta.k8s.io/v1");
    CHECK_STR(json_string_value(json_object_get(json_object_get(first, "metadata"), "resourceVersion")), "42");
    size_t ncols = json_array_size(json_object_get(first, "columnDefinitions"));
    CHECK_I64(ncols, 9); /* NAME READY STATUS RESTARTS AGE, and -o wide's IP NODE NOMINATED NODE READINESS GATES */
    CHECK(json_is_null(json_object_get(later, "columnDefinitions"))); /* kube-apiserver's NoHeaders */
    json_t *rows = json_object_get(later, "rows");
    REQUIRE(json_array_size(rows) == 1);
    CHECK_I64(json_array_size(json_object_get(json_array_get(rows, 0), "cells")), ncols); /* same columns */
    json_t *obj = json_object_get(json_array_get(rows, 0), "object");
    CHECK_STR(json_string_value(json_object_get(obj, "kind")), "PartialObjectMetadata");
    CHECK_STR(json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")), "web");
    CHECK(!json_object_get(obj, "spec"));
    json_decref(first);
    json_decref(later);
    json_decref(p);
}

TEST(table_include_object_and_none) {
    const struct shim_resource *r = builtin("pods");
    json_t *p = pod("web", "n1", "{\"phase\":\"Running\"}");
    json_object_del(p, "kind"); /* as a stored object may be: the row still says its kind */
    json_t *items = json_pack("[O]", p);
    json_t *t = shim_table(r, items, "7", "tok", SHIM_INCLUDE_OBJECT, true);
    json_t *obj = json_object_get(json_array_get(json_object_get(t, "rows"), 0), "object");
    CHECK_STR(json_string_value(json_object_get(obj, "kind")), "Pod");
    CHECK_STR(json_string_value(json_object_get(json_object_get(obj, "spec"), "nodeName")), "n1"); /* --sort-by */
    CHECK_STR(json_string_value(json_object_get(json_object_get(t, "metadata"), "continue")), "tok");
    CHECK(!json_object_get(p, "kind")); /* the caller's object is left alone */
    json_decref(t);
    t = shim_table(r, items, "7", NULL, SHIM_INCLUDE_NONE, true);
    CHECK(json_is_null(json_object_get(json_array_get(json_object_get(t, "rows"), 0), "object")));
    json_decref(t);
    json_decref(items);
    json_decref(p);
}

TEST(table_pod_status_as_kubectl_prints_it) {
    const struct shim_resource *r = builtin("pods");
    static const struct {
        const char *status, *want;
    } cases[] = {
        {"{\"phase\":\"Pending\"}", "Pending"},
        {"{\"phase\":\"Succeeded\"}", "Completed"},
        {"{\"phase\":\"Succeeded\",\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"terminated\":"
         "{\"exitCode\":0,\"reason\":\"Completed\"}}}]}", "Completed"},
        {"{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"terminated\":{\"exitCode\":3}}}]}",
         "ExitCode:3"},
        {"{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"waiting\":"
         "{\"reason\":\"CrashLoopBackOff\"}}}]}", "CrashLoopBackOff"},
        {"{\"phase\":\"Pending\",\"initContainerStatuses\":[{\"name\":\"i\",\"state\":{\"running\":{}}}]}", "Init:0/0"},
        {"{\"phase\":\"Running\",\"reason\":\"Evicted\"}", "Evicted"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *p = pod("p", "n1", cases[i].status);
        json_t *t = shim_table_of(r, p, SHIM_INCLUDE_NONE, true);
        CHECK_STR(cell(t, "Status"), cases[i].want);
        json_decref(t);
        json_decref(p);
    }
    json_t *p = pod("p", "", "{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"app\",\"ready\":true,"
                             "\"restartCount\":2,\"state\":{\"running\":{}}}]}");
    json_object_set_new(json_object_get(p, "metadata"), "deletionTimestamp", json_string("2026-01-01T00:00:00Z"));
    json_t *t = shim_table_of(r, p, SHIM_INCLUDE_NONE, true);
    CHECK_STR(cell(t, "Status"), "Terminating");
    CHECK_STR(cell(t, "Ready"), "1/1");
    CHECK_STR(cell(t, "Restarts"), "2");
    CHECK_STR(cell(t, "Node"), "<none>");
    CHECK_STR(cell(t, "Readiness Gates"), "<none>");
    json_decref(t);
    json_decref(p);
}

TEST(table_node_wide_columns) {
    const struct shim_resource *r = builtin("nodes");
    json_error_t je;
    json_t *n = json_loads(
        "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"node-role.kubernetes.io/worker\":\"\","
        "\"kubernetes.io/role\":\"control-plane\",\"node-role.kubernetes.io/control-plane\":\"\"}},"
        "\"spec\":{\"unschedulable\":true},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
        "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.1.0.1\"}],\"nodeInfo\":{\"kubeletVersion\":\"v1.32.0\","
        "\"osImage\":\"kubelet-sim\",\"kernelVersion\":\"0.0.0-sim\",\"containerRuntimeVersion\":\"kubelet-sim://1\"}}}",
        0, &je);
    REQUIRE(n);
    json_t *t = shim_table_of(r, n, SHIM_INCLUDE_METADATA, true);
    CHECK_STR(cell(t, "Status"), "Ready,SchedulingDisabled");
    CHECK_STR(cell(t, "Roles"), "control-plane,worker");
    CHECK_STR(cell(t, "Internal-IP"), "10.1.0.1");
    CHECK_STR(cell(t, "External-IP"), "<none>");
    CHECK_STR(cell(t, "OS-Image"), "kubelet-sim");
    CHECK_STR(cell(t, "Kernel-Version"), "0.0.0-sim");
    CHECK_STR(cell(t, "Container-Runtime"), "kubelet-sim://1");
    json_decref(t);
    json_decref(n);
}

TEST(table_custom_resource_columns_in_watch_events) {
    struct shim_resource cr = {.group = "peloton.io", .version = "v1alpha1", .plural = "resourcepools",
                               .singular = "resourcepool", .kind = "ResourcePool", .custom = true};
    cr.columns = json_pack("[{s:s, s:s, s:s}]", "name", "Parent", "type", "string", "jsonPath", ".spec.parent");
    json_t *rp = json_pack("{s:{s:s}, s:{s:s}}", "metadata", "name", "training", "spec", "parent", "ml");
    json_t *first = shim_table_of(&cr, rp, SHIM_INCLUDE_METADATA, true);
    json_t *later = shim_table_of(&cr, rp, SHIM_INCLUDE_METADATA, false);
    CHECK_I64(json_array_size(json_object_get(first, "columnDefinitions")), 2);
    CHECK_STR(cell(first, "Parent"), "ml");
    json_t *cells = json_object_get(json_array_get(json_object_get(later, "rows"), 0), "cells");
    CHECK_I64(json_array_size(cells), 2);
    CHECK_STR(json_string_value(json_array_get(cells, 1)), "ml");
    json_decref(first);
    json_decref(later);
    json_decref(rp);
    json_decref(cr.columns);
}

TEST(table_event_last_seen_and_count) {
    const struct shim_resource *r = builtin("events");
    json_t *ev = json_pack("{s:{s:s, s:s}, s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:s, s:s, s:i, s:{s:s}}", "metadata",
                           "name", "web.1", "creationTimestamp", "2020-01-01T00:00:00Z", "involvedObject", "kind",
                           "Pod", "name", "web", "fieldPath", "spec.containers{app}", "type", "Warning", "reason",
                           "FailedScheduling", "message", "0/2 nodes are available", "firstTimestamp",
                           "2020-01-01T00:00:00Z", "lastTimestamp", "2999-01-01T00:00:00Z", "count", 3, "source",
                           "component", "peloton-placement");
    json_t *t = shim_table_of(r, ev, SHIM_INCLUDE_METADATA, true);
    CHECK_HAS(cell(t, "Last Seen"), "0s (x3 over "); /* lastTimestamp ahead of the clock: 0s */
    CHECK_STR(cell(t, "Object"), "pod/web");
    CHECK_STR(cell(t, "Subobject"), "spec.containers{app}");
    CHECK_STR(cell(t, "Source"), "peloton-placement");
    CHECK_STR(cell(t, "Count"), "3");
    CHECK_STR(cell(t, "Name"), "web.1");
    json_decref(t);
    json_object_del(ev, "lastTimestamp"); /* an events.k8s.io-style Event: eventTime, in microseconds */
    json_object_set_new(ev, "eventTime", json_string("2999-01-01T00:00:00.123456Z"));
    json_object_set_new(ev, "count", json_integer(1));
    t = shim_table_of(r, ev, SHIM_INCLUDE_METADATA, true);
    CHECK_STR(cell(t, "Last Seen"), "0s");
    json_decref(t);
    json_decref(ev);
}
