/* The resources this shim serves, and their place in discovery. */
#include "shim.h"

const struct shim_resource shim_resources[] = {
    {"", "v1", "namespaces", "namespace", "Namespace", false, {"ns"}, "namespaces"},
    {"", "v1", "pods", "pod", "Pod", true, {"po"}, "pods"},
    {"", "v1", "nodes", "node", "Node", false, {"no"}, "nodes"},
    {"", "v1", "configmaps", "configmap", "ConfigMap", true, {"cm"}, "configmaps"},
    {"", "v1", "secrets", "secret", "Secret", true, {NULL}, "secrets"},
    {"", "v1", "services", "service", "Service", true, {"svc"}, "services"},
    {"", "v1", "events", "event", "Event", true, {"ev"}, "events"},
    {"coordination.k8s.io", "v1", "leases", "lease", "Lease", true, {NULL}, "leases.coordination.k8s.io"},
};
const int shim_nresources = (int)(sizeof shim_resources / sizeof shim_resources[0]);
