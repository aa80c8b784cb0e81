#!/usr/bin/env python3
"""scripts/crds-nocel.py SRC_DIR OUT_DIR: writes, for every CRD file in
SRC_DIR (crds/), the same CRD without its CEL rules
(x-kubernetes-validations), for Kubernetes 1.20 to 1.24: their API servers
refuse the field (`unknown field "x-kubernetes-validations"`) or, with
--validate=false, drop the rules silently. Everything else is kept as is.
The removed rules are listed in a comment at the top of each output file,
with their paths, so that an operator sees what the API server no longer
checks (docs/extender.md, "CRDs for Kubernetes 1.20 to 1.24"). Run by make
(build/crds-pre1.25/); the variant is never kept in the repository."""
import os
import sys

import yaml


def strip(node, path, removed):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "x-kubernetes-validations":
                field = path.split("openAPIV3Schema", 1)[-1].strip("/").replace("/", ".") or "(the object)"
                for r in v or []:
                    removed.append((field, r.get("rule", ""), r.get("message", "")))
                continue
            out[k] = strip(v, f"{path}/{k}" if k not in ("properties",) else path, removed)
        return out
    if isinstance(node, list):
        return [strip(v, path, removed) for v in node]
    return node


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: crds-nocel.py SRC_DIR OUT_DIR")
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if not name.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(src, name)) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        removed, result = [], []
        for d in docs:
            if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition":
                d = strip(d, "", removed)
            result.append(d)
        head = [f"# Generated from crds/{name} by scripts/crds-nocel.py for Kubernetes 1.20 to 1.24:",
                "# the CRD without its CEL rules (x-kubernetes-validations). Do not edit."]
        if removed:
            head.append("# Rules the API server no longer checks with this file:")
            for path, rule, msg in removed:
                head.append(f"#   {path}: {msg or rule}")
        else:
            head.append("# The source has no CEL rules: this file is the same CRD.")
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write("\n".join(head) + "\n")
            yaml.safe_dump_all(result, f, sort_keys=False, default_flow_style=False, width=120)
        os.replace(tmp, os.path.join(out, name))


if __name__ == "__main__":
    main()
