#!/usr/bin/python3
"""Writes apiserver-shim/builtin-schemas.json: the OpenAPI schemas of the
built-in kinds the shim serves, whole (every field, nested all the way down),
for /openapi/v2 (kubectl 1.20's explain, dry-run check and client-side
validation) and /openapi/v3 (kubectl 1.32's explain).

Run by hand after changing this script or the descriptions; the output is
committed and embedded at build time. Usage:

    scripts/gen-builtin-schemas.py            # rewrites the file
    scripts/gen-builtin-schemas.py --check    # exit 1 when it would change
    scripts/gen-builtin-schemas.py --from F   # take the descriptions from F

Where the facts come from:
- The structure (field names, JSON names, types) is read from Debian's
  python3-kubernetes (22.6, the Kubernetes 1.22 API): each model class's
  openapi_types and attribute_map. Only those two tables are used; the
  library's docstrings are not.
- Fields added to the served kinds after 1.22, up to the 1.32 this server
  answers as, are listed in EXTRA_* below (our own list).
- Descriptions, enums, formats and required lists are ours: every one found
  in the current file is kept (so the file is its own input), looked up by
  definition and field. A field we never described has none.

The output's shape: {"definitions": {NAME: schema}} with kube-apiserver's
definition names (io.k8s.api.core.v1.PodSpec); a field whose type is another
definition is {"$ref": "#/definitions/NAME"} plus its own description. The
served kinds carry x-kubernetes-group-version-kind, as kube-apiserver's do.
"""
import collections
import json
import os
import re
import sys

sys.path.insert(0, "/usr/lib/python3/dist-packages")  # Debian's python3-kubernetes
from kubernetes.client import models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "apiserver-shim", "builtin-schemas.json")

# (group, version, kind, model): every built-in kind of apiserver-shim/shim_resources.c.
KINDS = [
    ("", "v1", "Namespace", "V1Namespace"),
    ("", "v1", "Pod", "V1Pod"),
    ("", "v1", "Node", "V1Node"),
    ("", "v1", "ConfigMap", "V1ConfigMap"),
    ("", "v1", "Secret", "V1Secret"),
    ("", "v1", "Service", "V1Service"),
    ("", "v1", "Event", "CoreV1Event"),
    ("coordination.k8s.io", "v1", "Lease", "V1Lease"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "V1CustomResourceDefinition"),
    ("apps", "v1", "Deployment", "V1Deployment"),
    ("apps", "v1", "StatefulSet", "V1StatefulSet"),
    ("apps", "v1", "DaemonSet", "V1DaemonSet"),
    ("apps", "v1", "ReplicaSet", "V1ReplicaSet"),
    ("apps", "v1", "ControllerRevision", "V1ControllerRevision"),
    ("batch", "v1", "Job", "V1Job"),
    ("batch", "v1", "CronJob", "V1CronJob"),
    ("policy", "v1", "PodDisruptionBudget", "V1PodDisruptionBudget"),
    # the older versions kubectl 1.20's generators write (create cronjob,
    # create pdb), served as views of the same stored objects; after the v1
    # kinds, so that what they share (a Job's spec) keeps its v1 package
    ("batch", "v1beta1", "CronJob", "V1beta1CronJob"),
    ("policy", "v1beta1", "PodDisruptionBudget", "V1beta1PodDisruptionBudget"),
    ("autoscaling", "v1", "Scale", "V1Scale"),
    ("rbac.authorization.k8s.io", "v1", "Role", "V1Role"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", "V1RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "V1ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "V1ClusterRoleBinding"),
]

PACKAGE = {
    "": "io.k8s.api.core.v1",
    "coordination.k8s.io": "io.k8s.api.coordination.v1",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
    "apps": "io.k8s.api.apps.v1",
    "batch": "io.k8s.api.batch.v1",
    "autoscaling": "io.k8s.api.autoscaling.v1",
    "rbac.authorization.k8s.io": "io.k8s.api.rbac.v1",
    "policy": "io.k8s.api.policy.v1",
}
# A kind of a group's other version: its package.
PACKAGE_GV = {
    ("batch", "v1beta1"): "io.k8s.api.batch.v1beta1",
    ("policy", "v1beta1"): "io.k8s.api.policy.v1beta1",
}


def package_of(group, version):
    return PACKAGE_GV.get((group, version)) or PACKAGE[group]


# The workload groups' own models (by name, per package); everything else
# they reach (pod templates, volume claims) is core's.
GROUP_MODELS = {
    "io.k8s.api.batch.v1beta1": re.compile(r"V1beta1(CronJob|JobTemplateSpec)"),
    "io.k8s.api.policy.v1": re.compile(r"V1PodDisruptionBudget"),
    "io.k8s.api.policy.v1beta1": re.compile(r"V1beta1PodDisruptionBudget"),
    "apps": re.compile(r"V1(Deployment|StatefulSet|DaemonSet|ReplicaSet|RollingUpdate|ControllerRevision)"),
    "batch": re.compile(r"V1(Job|CronJob|UncountedTerminatedPods|PodFailurePolicy|SuccessPolicy)"),
    "autoscaling": re.compile(r"V1Scale"),
    "rbac.authorization.k8s.io": re.compile(r"V1(Role|RoleBinding|ClusterRole|ClusterRoleBinding|PolicyRule|Subject|RoleRef|AggregationRule)$"),
}
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
META_MODELS = {"V1ObjectMeta", "V1OwnerReference", "V1ManagedFieldsEntry", "V1LabelSelector",
               "V1LabelSelectorRequirement", "V1Condition", "V1ListMeta"}
# Models whose Kubernetes name differs from the client's.
RENAMED = {"V1Handler": "LifecycleHandler"}

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
# Shared definitions that are not client models. Both take a number or a
# string, so they have no type (any value passes kubectl 1.20's validation).
SPECIAL = {
    QUANTITY: {"x-kubernetes-int-or-string": True},  # its description is the file's
    INT_OR_STRING: {"description": "An integer or a string (a port number or a port name, a count or a percentage).",
                    "x-kubernetes-int-or-string": True},
}
# Fields the client types as plain strings (or maps of them) that are
# quantities, and the untyped ('object') ones that are IntOrString.
QUANTITY_FIELDS = {("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"),
                   ("V1NodeStatus", "capacity"), ("V1NodeStatus", "allocatable"), ("V1PodSpec", "overhead"),
                   ("V1EmptyDirVolumeSource", "sizeLimit"), ("V1ResourceFieldSelector", "divisor"),
                   ("V1ContainerStatus", "allocatedResources")}
INT_OR_STRING_FIELDS = {("V1HTTPGetAction", "port"), ("V1TCPSocketAction", "port"), ("V1ServicePort", "targetPort"),
                        ("V1RollingUpdateDeployment", "maxSurge"), ("V1RollingUpdateDeployment", "maxUnavailable"),
                        ("V1RollingUpdateDaemonSet", "maxSurge"), ("V1RollingUpdateDaemonSet", "maxUnavailable"),
                        ("V1RollingUpdateStatefulSetStrategy", "maxUnavailable")}

# Fields Kubernetes dropped before 1.32.
REMOVED = {("V1ObjectMeta", "clusterName")}
# Fields the hand-written first file had that Kubernetes does not: node
# conditions have lastHeartbeatTime, not a pod condition's lastProbeTime.
NOT_FIELDS = {("V1NodeCondition", "lastProbeTime")}

# Models added after 1.22: JSON field name -> client-style type.
EXTRA_MODELS = {
    "V1PodOS": {"name": "str"},
    "V1PodSchedulingGate": {"name": "str"},
    "V1PodResourceClaim": {"name": "str", "resourceClaimName": "str", "resourceClaimTemplateName": "str"},
    "V1PodResourceClaimStatus": {"name": "str", "resourceClaimName": "str"},
    "V1ContainerResizePolicy": {"resourceName": "str", "restartPolicy": "str"},
    "V1ResourceClaim": {"name": "str", "request": "str"},
    "V1GRPCAction": {"port": "int", "service": "str"},
    "V1SleepAction": {"seconds": "int"},
    "V1AppArmorProfile": {"type": "str", "localhostProfile": "str"},
    "V1ImageVolumeSource": {"reference": "str", "pullPolicy": "str"},
    "V1HostIP": {"ip": "str"},
    "V1VolumeMountStatus": {"name": "str", "mountPath": "str", "readOnly": "bool", "recursiveReadOnly": "str"},
    "V1NodeRuntimeHandlerFeatures": {"recursiveReadOnlyMounts": "bool", "userNamespaces": "bool"},
    "V1NodeRuntimeHandler": {"name": "str", "features": "V1NodeRuntimeHandlerFeatures"},
    "V1NodeFeatures": {"supplementalGroupsPolicy": "bool"},
    "V1ValidationRule": {"rule": "str", "message": "str", "messageExpression": "str", "reason": "str",
                         "fieldPath": "str", "optionalOldSelf": "bool"},
    "V1SelectableField": {"jsonPath": "str"},
    "V1StatefulSetOrdinals": {"start": "int"},
    "V1StatefulSetPersistentVolumeClaimRetentionPolicy": {"whenDeleted": "str", "whenScaled": "str"},
}
# Fields added after 1.22 to models the client has.
EXTRA_FIELDS = {
    "V1PodSpec": {"os": "V1PodOS", "hostUsers": "bool", "schedulingGates": "list[V1PodSchedulingGate]",
                  "resourceClaims": "list[V1PodResourceClaim]", "resources": "V1ResourceRequirements"},
    "V1Container": {"resizePolicy": "list[V1ContainerResizePolicy]", "restartPolicy": "str"},
    "V1EphemeralContainer": {"resizePolicy": "list[V1ContainerResizePolicy]", "restartPolicy": "str"},
    "V1ResourceRequirements": {"claims": "list[V1ResourceClaim]"},
    "V1Probe": {"grpc": "V1GRPCAction"},
    "V1Handler": {"sleep": "V1SleepAction"},
    "V1PodSecurityContext": {"appArmorProfile": "V1AppArmorProfile", "supplementalGroupsPolicy": "str",
                             "seLinuxChangePolicy": "str"},
    "V1SecurityContext": {"appArmorProfile": "V1AppArmorProfile"},
    "V1TopologySpreadConstraint": {"minDomains": "int", "nodeAffinityPolicy": "str", "nodeTaintsPolicy": "str",
                                   "matchLabelKeys": "list[str]"},
    "V1PodAffinityTerm": {"matchLabelKeys": "list[str]", "mismatchLabelKeys": "list[str]"},
    "V1Volume": {"image": "V1ImageVolumeSource"},
    "V1VolumeMount": {"recursiveReadOnly": "str"},
    "V1PodStatus": {"hostIPs": "list[V1HostIP]", "resize": "str",
                    "resourceClaimStatuses": "list[V1PodResourceClaimStatus]"},
    "V1ContainerStatus": {"allocatedResources": "dict(str, str)", "resources": "V1ResourceRequirements",
                          "volumeMounts": "list[V1VolumeMountStatus]"},
    "V1NodeStatus": {"runtimeHandlers": "list[V1NodeRuntimeHandler]", "features": "V1NodeFeatures"},
    "V1ServiceSpec": {"trafficDistribution": "str"},
    "V1LoadBalancerIngress": {"ipMode": "str"},
    "V1LeaseSpec": {"strategy": "str", "preferredHolder": "str"},
    "V1JSONSchemaProps": {"x-kubernetes-validations": "list[V1ValidationRule]"},
    "V1CustomResourceDefinitionVersion": {"selectableFields": "list[V1SelectableField]"},
    "V1StatefulSetSpec": {"ordinals": "V1StatefulSetOrdinals",
                          "persistentVolumeClaimRetentionPolicy": "V1StatefulSetPersistentVolumeClaimRetentionPolicy"},
    "V1JobSpec": {"backoffLimitPerIndex": "int", "maxFailedIndexes": "int", "podReplacementPolicy": "str",
                  "managedBy": "str"},
    "V1JobStatus": {"ready": "int", "terminating": "int", "failedIndexes": "str"},
    "V1CronJobSpec": {"timeZone": "str"},
    "V1PodDisruptionBudgetSpec": {"unhealthyPodEvictionPolicy": "str"},
    "V1RollingUpdateStatefulSetStrategy": {"maxUnavailable": "object"},
}

# Kubernetes' strategic-merge metadata (its Go struct tags): lists merged by
# key rather than replaced. kubectl's client-side apply reads these.
PATCH = {
    ("V1PodSpec", "containers"): ("merge", "name"),
    ("V1PodSpec", "initContainers"): ("merge", "name"),
    ("V1PodSpec", "ephemeralContainers"): ("merge", "name"),
    ("V1PodSpec", "volumes"): ("merge,retainKeys", "name"),
    ("V1PodSpec", "imagePullSecrets"): ("merge", "name"),
    ("V1PodSpec", "hostAliases"): ("merge", "ip"),
    ("V1PodSpec", "topologySpreadConstraints"): ("merge", "topologyKey"),
    ("V1PodSpec", "schedulingGates"): ("merge", "name"),
    ("V1PodSpec", "resourceClaims"): ("merge,retainKeys", "name"),
    ("V1Container", "ports"): ("merge", "containerPort"),
    ("V1Container", "env"): ("merge", "name"),
    ("V1Container", "volumeMounts"): ("merge", "mountPath"),
    ("V1Container", "volumeDevices"): ("merge", "devicePath"),
    ("V1EphemeralContainer", "ports"): ("merge", "containerPort"),
    ("V1EphemeralContainer", "env"): ("merge", "name"),
    ("V1EphemeralContainer", "volumeMounts"): ("merge", "mountPath"),
    ("V1EphemeralContainer", "volumeDevices"): ("merge", "devicePath"),
    ("V1PodStatus", "conditions"): ("merge", "type"),
    ("V1PodStatus", "podIPs"): ("merge", "ip"),
    ("V1PodStatus", "hostIPs"): ("merge", "ip"),
    ("V1NodeStatus", "addresses"): ("merge", "type"),
    ("V1NodeStatus", "conditions"): ("merge", "type"),
    ("V1NodeSpec", "podCIDRs"): ("merge", None),
    ("V1NamespaceStatus", "conditions"): ("merge", "type"),
    ("V1ServiceSpec", "ports"): ("merge", "port"),
    ("V1ObjectMeta", "finalizers"): ("merge", None),
    ("V1ObjectMeta", "ownerReferences"): ("merge", "uid"),
    ("V1DeploymentStatus", "conditions"): ("merge", "type"),
    ("V1StatefulSetStatus", "conditions"): ("merge", "type"),
    ("V1DaemonSetStatus", "conditions"): ("merge", "type"),
    ("V1ReplicaSetStatus", "conditions"): ("merge", "type"),
    ("V1JobStatus", "conditions"): ("merge", "type"),
    ("V1DeploymentSpec", "strategy"): ("retainKeys", None),
}

# What a description record may carry from the current file.
KEEP = ("description", "enum", "format")


def model_fields(name):
    """JSON field name -> client-style type string, for a model or an extra model."""
    if name in EXTRA_MODELS:
        return dict(EXTRA_MODELS[name])
    cls = getattr(models, name)
    out = {cls.attribute_map[a]: t for a, t in cls.openapi_types.items() if (name, cls.attribute_map[a]) not in REMOVED}
    for f, t in EXTRA_FIELDS.get(name, {}).items():
        if f in out:
            raise SystemExit(f"gen: {name}.{f} is already in the client; drop it from EXTRA_FIELDS")
        out[f] = t
    return out


def is_model(t):
    return t in EXTRA_MODELS or (hasattr(models, t) and hasattr(getattr(models, t), "openapi_types"))


def split_type(t):
    """('list', X), ('dict', X) or ('one', t)."""
    m = re.fullmatch(r"list\[(.*)\]", t)
    if m:
        return "list", m.group(1)
    m = re.fullmatch(r"dict\(str, (.*)\)", t)
    if m:
        return "dict", m.group(1)
    return "one", t


class Gen:
    def __init__(self, current):
        self.pkg = {}                      # model -> package
        self.order = []                    # models in the order first reached
        self.field_info = {}               # (model, field) -> kept keys for the field
        self.item_info = {}                # (model, field) -> kept keys for a primitive list/map element
        self.model_info = {}               # model -> {"description": ..., "required": [...]}
        self.special_info = {}             # QUANTITY or INT_OR_STRING -> kept keys
        self.conflicts = []
        self.current = current

    # ---- which models, in which package ----
    def reach(self, model, pkg):
        if model in self.pkg:
            return
        for group, pat in GROUP_MODELS.items():
            if pkg == PACKAGE.get(group, group) and not pat.match(model):
                pkg = PACKAGE[""]
        self.pkg[model] = META if model in META_MODELS else pkg
        self.order.append(model)
        for t in model_fields(model).values():
            e = split_type(t)[1]
            if is_model(e):
                self.reach(e, pkg)

    def def_name(self, model):
        short = RENAMED.get(model) or re.sub(r"^(?:[A-Z][a-z]+)*V\d+(?:(?:alpha|beta)\d+)?", "", model)
        return f"{self.pkg[model]}.{short}"

    # ---- the current file's descriptions ----
    def put(self, table, key, node):
        rec = {k: node[k] for k in KEEP if k in node}
        if not rec:
            return
        old = table.get(key)
        if old is None:
            table[key] = rec
        elif old != rec:
            merged = dict(rec)
            merged.update(old)  # the first one found wins
            if merged != old:
                self.conflicts.append(f"{key}: kept {old!r}, also had {rec!r}")
            table[key] = merged

    def put_model(self, model, node):
        info = self.model_info.setdefault(model, {})
        if node.get("description") and "description" not in info:
            info["description"] = node["description"]
        if node.get("required") and "required" not in info:
            info["required"] = list(node["required"])

    def absorb_value(self, node, t, site, path):
        """node: the current file's schema for a value of client type t,
        reached through site (model, field) or None at a kind's root."""
        how, elem = split_type(t)
        if how == "one" and is_model(t):
            if site:
                self.put(self.field_info, site, node)
            # the node's description is the field's; the type's comes from a
            # kind's root or a list or map element, where no field has one
            self.absorb_model(node, t, path, describes_type=not site)
            return
        if site:
            self.put(self.field_info, site, node)
        if how != "one":
            sub = node.get("items" if how == "list" else "additionalProperties")
            if isinstance(sub, dict):
                if is_model(elem):
                    self.absorb_model(sub, elem, path + ("[]" if how == "list" else "{}"))
                elif site in QUANTITY_FIELDS:
                    self.put(self.special_info, QUANTITY, sub)
                elif site:
                    self.put(self.item_info, site, sub)
        elif "properties" in node:
            raise SystemExit(f"gen: {path}: the file has properties where the client has {t}")

    def absorb_model(self, node, model, path, describes_type=True):
        self.put_model(model, node if describes_type else {k: v for k, v in node.items() if k != "description"})
        fields = model_fields(model)
        for name, sub in node.get("properties", {}).items():
            if name not in fields and (model, name) in NOT_FIELDS:
                continue
            if name not in fields:
                raise SystemExit(f"gen: {path}.{name}: not a field of {model}; add it to EXTRA_FIELDS")
            self.absorb_value(sub, fields[name], (model, name), f"{path}.{name}")

    def absorb_current(self):
        cur = self.current
        if "definitions" in cur:  # the generated shape: walk each definition by its model
            by_name = {self.def_name(m): m for m in self.order}
            for name, sch in cur["definitions"].items():
                if name in SPECIAL:
                    self.put(self.special_info, name, sch)
                elif name in by_name:
                    self.absorb_def(sch, by_name[name], name)
            return
        for group, version, kind, model in KINDS:  # the first, hand-written shape
            node = cur.get(group, {}).get(version, {}).get(kind)
            if node:
                self.absorb_model(node, model, kind)

    def absorb_def(self, sch, model, path):
        self.put_model(model, sch)
        fields = model_fields(model)
        for name, sub in sch.get("properties", {}).items():
            if name not in fields:
                continue  # a field this script no longer emits
            self.put(self.field_info, (model, name), sub)
            how, elem = split_type(fields[name])
            if how != "one" and not is_model(elem):
                inner = sub.get("items" if how == "list" else "additionalProperties")
                if isinstance(inner, dict) and "$ref" not in inner:
                    self.put(self.item_info, (model, name), inner)

    # ---- the output ----
    def ref(self, target):
        return {"$ref": f"#/definitions/{target}"}

    def prim(self, t):
        return {"str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number", "format": "double"},
                "bool": {"type": "boolean"}, "datetime": {"type": "string", "format": "date-time"},
                "date": {"type": "string", "format": "date"}, "object": {}}[t]

    def elem_schema(self, model, field, t):
        if is_model(t):
            return self.ref(self.def_name(t))
        if (model, field) in QUANTITY_FIELDS:
            return self.ref(QUANTITY)
        if (model, field) in INT_OR_STRING_FIELDS:
            return self.ref(INT_OR_STRING)
        s = self.prim(t)
        s.update(self.item_info.get((model, field), {}))
        return s

    def field_schema(self, model, field, t):
        how, elem = split_type(t)
        if how == "list":
            s = {"type": "array", "items": self.elem_schema(model, field, elem)}
        elif how == "dict":
            s = {"type": "object", "additionalProperties": self.elem_schema(model, field, elem)}
        else:
            s = self.elem_schema(model, field, elem)
            if "$ref" in s:
                s = dict(s)
        info = self.field_info.get((model, field), {})
        if "$ref" in s:
            info = {k: v for k, v in info.items() if k == "description"}  # the type is the definition's
        s.update(info)
        strategy = PATCH.get((model, field))
        if strategy:
            s["x-kubernetes-patch-strategy"] = strategy[0]
            if strategy[1]:
                s["x-kubernetes-patch-merge-key"] = strategy[1]
        return s

    def definition(self, model):
        fields = model_fields(model)
        d = {"type": "object"}
        info = self.model_info.get(model, {})
        if "description" in info:
            d["description"] = info["description"]
        d["properties"] = {f: self.field_schema(model, f, fields[f]) for f in sorted(fields)}
        req = info.get("required")
        if req:
            missing = [r for r in req if r not in fields]
            if missing:
                raise SystemExit(f"gen: {model}: required {missing} are not fields")
            d["required"] = req
        return d

    def build(self):
        for group, version, _, model in KINDS:
            self.reach(model, package_of(group, version))
        self.absorb_current()
        defs = {}
        for name, sch in SPECIAL.items():
            defs[name] = dict(self.special_info.get(name, {}))  # the description first
            defs[name].update(sch)
        for m in self.order:
            defs[self.def_name(m)] = self.definition(m)
        for group, version, kind, model in KINDS:
            defs[self.def_name(model)]["x-kubernetes-group-version-kind"] = [
                {"group": group, "kind": kind, "version": version}]
        return {"definitions": dict(sorted(defs.items()))}


def main():
    args = sys.argv[1:]
    check = "--check" in args
    src = args[args.index("--from") + 1] if "--from" in args else OUT
    with open(src) as f:
        current = json.load(f, object_pairs_hook=collections.OrderedDict)
    g = Gen(current)
    out = g.build()
    for c in g.conflicts:
        print("gen: note:", c, file=sys.stderr)
    text = json.dumps(out, indent=1, ensure_ascii=False) + "\n"
    with open(OUT) as f:
        same = f.read() == text
    if check:
        print("gen: up to date" if same else "gen: builtin-schemas.json would change", file=sys.stderr)
        sys.exit(0 if same else 1)
    if not same:
        with open(OUT, "w") as f:
            f.write(text)
    n = len(out["definitions"])
    print(f"gen: {OUT}: {n} definitions, {len(text)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
