#!/usr/bin/python3
"""The CRDs for Kubernetes 1.20 to 1.24 (scripts/crds-nocel.py, make's
build/crds-pre1.25/): crds/ without the CEL rules those API servers refuse,
everything else the same, the removed rules listed in each file. pelotond
serving the variant takes valid Jobs and still refuses one that breaks a
removed rule: it applies those rules itself (crd_job_decode, which its job
manager also runs on every Job it reads from a real API server)."""
import json
import os
import subprocess

import yaml

import services
from simlib import run_tests

ROOT = services.ROOT
OUT = os.path.join(services.tempdir(), "crds-pre1.25")
subprocess.run(["python3", os.path.join(ROOT, "scripts", "crds-nocel.py"), os.path.join(ROOT, "crds"), OUT],
               check=True, timeout=60)


def without_cel(node):
    if isinstance(node, dict):
        return {k: without_cel(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [without_cel(v) for v in node]
    return node


def test_variant_is_the_crds_without_cel():
    names = sorted(n for n in os.listdir(os.path.join(ROOT, "crds")) if n.endswith(".yaml"))
    assert sorted(os.listdir(OUT)) == names
    for n in names:
        src = list(yaml.safe_load_all(open(os.path.join(ROOT, "crds", n))))
        text = open(os.path.join(OUT, n)).read()
        gen = list(yaml.safe_load_all(text))
        assert gen == [without_cel(d) for d in src], n
        assert "x-kubernetes-validations" not in yaml.safe_dump_all(gen), n
        rules = sum(len(v) for v in _validations(src))
        listed = [ln for ln in text.splitlines() if ln.startswith("#   ")]
        assert len(listed) == rules, (n, listed, rules)
    assert any("a revocable job must be preemptible" in ln
               for ln in open(os.path.join(OUT, "jobs.peloton.io.yaml")).read().splitlines()[:10])


def _validations(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "x-kubernetes-validations":
                yield v
            else:
                yield from _validations(v)
    elif isinstance(node, list):
        for v in node:
            yield from _validations(v)


def test_pelotond_serves_the_variant_and_enforces_the_rules_itself():
    redis = services.start_redis()
    proc, port, log = services.start_pelotond(redis, "--roles=apiserver", f"--crds={OUT}")
    try:
        kc = services.kubeconfig(port)

        def apply(job):
            return subprocess.run(["kubectl", f"--kubeconfig={kc}", "apply", "-f", "-"], input=json.dumps(job),
                                  capture_output=True, text=True, timeout=60)
        job = {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": "ok", "namespace": "default"},
               "spec": {"type": "BATCH", "resourcePool": "p", "instanceCount": 2,
                        "sla": {"revocable": True, "preemptible": True},
                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
        r = apply(job)
        assert r.returncode == 0, r.stderr
        job["metadata"]["name"] = "bad"
        job["spec"]["sla"]["preemptible"] = False
        r = apply(job)
        assert r.returncode != 0 and "a revocable job must be preemptible" in r.stderr, r
        del job["spec"]["instanceCount"]
        job["spec"]["sla"]["preemptible"] = True
        r = apply(job)
        assert r.returncode != 0 and "instanceCount" in r.stderr, r
    finally:
        assert services.stop(proc) == 0, open(log).read()[-2000:]

run_tests("crds_nocel", dict(globals()))
