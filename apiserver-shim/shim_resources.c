/* The resources this shim serves, and their place in discovery. */
#include <string.h>

#include "shim.h"

/* Short names and categories as kube-apiserver 1.32 gives them: pods and
 * services are in "all" (with workloads this shim does not serve), CRDs in
 * "api-extensions". */
#define BUILTIN(g, v, pl, si, k, ns, sn0, sn1, key, cat)                                                \
    {.group = g, .version = v, .plural = pl, .singular = si, .kind = k, .namespaced = ns,                 \
     .short_names = {sn0, sn1, NULL}, .categories = {cat, NULL}, .store_key = key}

const struct shim_resource shim_resources[] = {
    BUILTIN("", "v1", "namespaces", "namespace", "Namespace", false, "ns", NULL, "namespaces", NULL),
    BUILTIN("", "v1", "pods", "pod", "Pod", true, "po", NULL, "pods", "all"),
    BUILTIN("", "v1", "nodes", "node", "Node", false, "no", NULL, "nodes", NULL),
    BUILTIN("", "v1", "configmaps", "configmap", "ConfigMap", true, "cm", NULL, "configmaps", NULL),
    BUILTIN("", "v1", "secrets", "secret", "Secret", true, NULL, NULL, "secrets", NULL),
    BUILTIN("", "v1", "services", "service", "Service", true, "svc", NULL, "services", "all"),
    BUILTIN("", "v1", "events", "event", "Event", true, "ev", NULL, "events", NULL),
    BUILTIN("coordination.k8s.io", "v1", "leases", "lease", "Lease", true, NULL, NULL, "leases.coordination.k8s.io",
            NULL),
    BUILTIN("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true, "pdb", NULL,
            "poddisruptionbudgets.policy", NULL),
    BUILTIN("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
            "CustomResourceDefinition", false, "crd", "crds", "customresourcedefinitions.apiextensions.k8s.io",
            "api-extensions"),
    /* the workloads (shim_workloads.c, docs/workloads.md) */
    BUILTIN("apps", "v1", "deployments", "deployment", "Deployment", true, "deploy", NULL, "deployments.apps", "all"),
    BUILTIN("apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, "sts", NULL, "statefulsets.apps", "all"),
    BUILTIN("apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, "ds", NULL, "daemonsets.apps", "all"),
    BUILTIN("apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, "rs", NULL, "replicasets.apps", "all"),
    BUILTIN("apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", true, NULL, NULL,
            "controllerrevisions.apps", NULL),
    BUILTIN("batch", "v1", "jobs", "job", "Job", true, NULL, NULL, "jobs.batch", "all"),
    BUILTIN("batch", "v1", "cronjobs", "cronjob", "CronJob", true, "cj", NULL, "cronjobs.batch", "all"),
    /* RBAC (shim_auth.h): served like any other kind, enforced on every request */
    BUILTIN("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, NULL, NULL,
            "roles.rbac.authorization.k8s.io", NULL),
    BUILTIN("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true, NULL, NULL,
            "rolebindings.rbac.authorization.k8s.io", NULL),
    BUILTIN("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false, NULL, NULL,
            "clusterroles.rbac.authorization.k8s.io", NULL),
    BUILTIN("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding",
            false, NULL, NULL, "clusterrolebindings.rbac.authorization.k8s.io", NULL),
    /* the older versions kubectl 1.20's generators write, as kube-apiserver
     * 1.20 served them: views of the same stored objects (shim_versions.c);
     * after the preferred versions, which discovery names first */
    BUILTIN("policy", "v1beta1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true, "pdb",
            NULL, "poddisruptionbudgets.policy", NULL),
    BUILTIN("batch", "v1beta1", "cronjobs", "cronjob", "CronJob", true, "cj", NULL, "cronjobs.batch", NULL),
};
const int shim_nresources = (int)(sizeof shim_resources / sizeof shim_resources[0]);

int shim_res_count(const struct shim *s) { return shim_nresources + s->ncustom; }

const struct shim_resource *shim_res_at(const struct shim *s, int i) {
    if (i < shim_nresources) return &shim_resources[i];
    const struct shim_resource *r = s->custom[i - shim_nresources];
    return r->removed ? NULL : r;
}

const struct shim_resource *shim_find_resource(const struct shim *s, const char *group, const char *version,
                                               const char *plural) {
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (r && !strcmp(r->group, group) && !strcmp(r->version, version) && !strcmp(r->plural, plural)) return r;
    }
    return NULL;
}
