#!/usr/bin/python3
"""The deployment files of the extender (manifests/): every kube-scheduler
configuration parses, names the extender with the fields of its API
version (field names and types as upstream's kubescheduler.config.k8s.io
types have them), and the Deployment names the image `make image` builds.
No services."""
import os
import re
import shutil
import subprocess

import yaml

from simlib import run_tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAN = os.path.join(ROOT, "manifests")

# The extender entry's keys per API version. v1beta1 in 1.19/1.20 is the
# legacy Policy type (httpTimeout a Go time.Duration in ns, enableHttps); in
# 1.21 its own type (httpTimeout a duration string, enableHTTPS): the file
# uses only the keys all three read alike.
COMMON = {"urlPrefix", "filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb", "weight", "nodeCacheCapable",
          "ignorable", "managedResources", "tlsConfig"}
KEYS = {
    "v1beta1": COMMON,
    "v1beta2": COMMON | {"httpTimeout", "enableHTTPS"},
    "v1beta3": COMMON | {"httpTimeout", "enableHTTPS"},
    "v1": COMMON | {"httpTimeout", "enableHTTPS"},
}
FILES = {"scheduler-config-v1beta1.yaml": "v1beta1", "scheduler-config-v1beta2.yaml": "v1beta2",
         "scheduler-config-v1beta3.yaml": "v1beta3", "scheduler-config.yaml": "v1"}


def test_scheduler_configs_per_version():
    for name, ver in FILES.items():
        doc = yaml.safe_load(open(os.path.join(MAN, name)))
        assert doc["apiVersion"] == f"kubescheduler.config.k8s.io/{ver}", (name, doc["apiVersion"])
        assert doc["kind"] == "KubeSchedulerConfiguration"
        assert [p["schedulerName"] for p in doc["profiles"]] == ["default-scheduler"]
        (ext,) = doc["extenders"]
        assert set(ext) <= KEYS[ver], (name, set(ext) - KEYS[ver])
        assert ext["urlPrefix"].endswith("/peloton") and ext["nodeCacheCapable"] is True
        assert (ext["filterVerb"], ext["prioritizeVerb"], ext["preemptVerb"], ext["bindVerb"]) == (
            "filter", "prioritize", "preempt", "bind")
        assert isinstance(ext["weight"], int) and ext["weight"] > 0
        if "httpTimeout" in ext:
            assert re.fullmatch(r"[0-9]+(ms|s|m)", ext["httpTimeout"]), ext["httpTimeout"]


def test_docs_name_every_config():
    doc = open(os.path.join(ROOT, "docs", "extender.md")).read()
    for name in FILES:
        assert name in doc, name


def test_deployment_names_the_image_make_image_builds():
    dep = yaml.safe_load(open(os.path.join(MAN, "extender-deployment.yaml")))
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    mk = open(os.path.join(ROOT, "Makefile")).read()
    m = re.search(r"^IMAGE\s*\?=\s*(\S+)", mk, re.M)
    assert m and image == m.group(1), (image, m and m.group(1))
    assert os.path.exists(os.path.join(ROOT, "Dockerfile"))


def builder_works():
    if shutil.which("podman") or shutil.which("buildah"):
        return True
    return bool(shutil.which("docker")) and subprocess.run(["docker", "info"], capture_output=True,
                                                           timeout=30).returncode == 0


def test_make_image_says_when_there_is_no_builder():
    if builder_works():
        return  # a real builder: `make image` would build (minutes); not part of the tests
    r = subprocess.run(["make", "-s", "image"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r
    assert "no image builder" in r.stderr and "podman" in r.stderr, r.stderr


def test_runtime_packages_of_the_release_binary():
    b = os.path.join(ROOT, "bin", "peloton-extender")
    if not os.path.exists(b):
        return  # `make test` builds it first
    r = subprocess.run([os.path.join(ROOT, "scripts", "runtime-packages.sh"), b], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    pkgs = r.stdout.split()
    for p in ("libjansson4", "libuv1", "libcurl4", "libnghttp2-14", "libprotobuf-c1", "libjemalloc2", "libc6"):
        assert p in pkgs, (p, pkgs)
    assert pkgs == sorted(set(pkgs))


run_tests("extender_manifests", dict(globals()))
