#!/usr/bin/env python3
"""Syntax and consistency checks of what deploy/ ships (docs/containers.md).

Kubernetes manifests: valid YAML; every object has apiVersion, kind and
metadata.name; pod templates' containers have a name and an image, every
volumeMount names a volume of the pod, a DaemonSet's selector matches its
template's labels. The OCI hooks.d entry and vgpud's config: valid JSON, the
hook path absolute, stages OCI stage names. Exit 1 with one line per problem.
"""
import json
import pathlib
import sys

import yaml

STAGES = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart",
          "poststop"}


def pod_spec_of(obj):
    kind = obj.get("kind")
    if kind == "Pod":
        return obj.get("spec") or {}, obj.get("metadata", {}).get("labels", {})
    if kind in ("DaemonSet", "Deployment", "StatefulSet", "Job"):
        template = obj.get("spec", {}).get("template", {})
        return template.get("spec") or {}, template.get("metadata", {}).get("labels", {})
    return None, None


def check_pod(where, spec, problems):
    volumes = {v.get("name") for v in spec.get("volumes", [])}
    containers = spec.get("containers", []) + spec.get("initContainers", [])
    if not spec.get("containers"):
        problems.append(f"{where}: no containers")
    for c in containers:
        name = c.get("name")
        if not name or not c.get("image"):
            problems.append(f"{where}: a container without name or image: {c.get('name')}")
        for m in c.get("volumeMounts", []):
            if m.get("name") not in volumes:
                problems.append(f"{where}: container {name} mounts unknown volume {m.get('name')}")
            if not str(m.get("mountPath", "")).startswith("/"):
                problems.append(f"{where}: container {name}: mountPath not absolute")


def check_manifest(path, problems):
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError as e:
        problems.append(f"{path}: not YAML: {e}")
        return
    if not docs:
        problems.append(f"{path}: no objects")
    for obj in docs:
        where = f"{path}: {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        for key in ("apiVersion", "kind"):
            if not obj.get(key):
                problems.append(f"{where}: no {key}")
        if not obj.get("metadata", {}).get("name"):
            problems.append(f"{where}: no metadata.name")
        spec, labels = pod_spec_of(obj)
        if spec is None:
            continue
        check_pod(where, spec, problems)
        selector = obj.get("spec", {}).get("selector", {}).get("matchLabels")
        if selector is not None and any(labels.get(k) != v for k, v in selector.items()):
            problems.append(f"{where}: selector {selector} does not match the template {labels}")


def check_hooks_entry(path, problems):
    try:
        entry = json.loads(path.read_text())
    except ValueError as e:
        problems.append(f"{path}: not JSON: {e}")
        return
    hook = entry.get("hook", {})
    if entry.get("version") != "1.0.0":
        problems.append(f"{path}: version is not 1.0.0")
    if not str(hook.get("path", "")).startswith("/"):
        problems.append(f"{path}: hook.path is not absolute")
    if not set(entry.get("stages", [])) or not set(entry["stages"]) <= STAGES:
        problems.append(f"{path}: stages {entry.get('stages')} are not OCI stages")
    if "when" not in entry:
        problems.append(f"{path}: no 'when'")


def main():
    deploy = pathlib.Path(sys.argv[1])
    problems = []
    manifests = sorted((deploy / "kubernetes").rglob("*.yaml"))
    if not manifests:
        problems.append(f"{deploy}/kubernetes: no manifests")
    for path in manifests:
        check_manifest(path, problems)
    for path in sorted((deploy / "oci-hooks.d").glob("*.json")):
        check_hooks_entry(path, problems)
    try:
        json.loads((deploy / "vgpud.json").read_text())
    except ValueError as e:
        problems.append(f"{deploy}/vgpud.json: not JSON: {e}")
    for p in problems:
        print(p)
    print(f"checked {len(manifests)} manifests: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
