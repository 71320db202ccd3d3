#!/usr/bin/env python3
"""Offline renderer for the kustomizations in deploy/k8s (no kubectl here).

    kustomize_render.py DIR            prints the rendered objects as JSON (a list)

Renders DIR the way `kubectl apply -k DIR` / `kustomize build DIR` would, for
exactly the kustomize features deploy/k8s uses, and refuses everything else
(an unknown kustomization field, patch form or generator option is an error,
never silently ignored):

  resources           YAML files (one or more documents) and directories
                      holding a kustomization.yaml (bases, rendered first)
  configMapGenerator  name, files (`path` or `key=path`), literals (`k=v`)
  secretGenerator     the same, plus type; values base64-encoded into data
  generatorOptions    disableNameSuffixHash: true only (kustomize's hash
                      suffix is not reimplemented)
  patches             `path` (or inline `patch`) of a strategic-merge patch:
                      one object matched by apiVersion group, kind and name

Strategic merge follows Kubernetes' rules for the lists the manifests patch:
maps merge recursively, a null value deletes a key, the lists below merge by
their patchMergeKey (as in the Kubernetes API), every other list is replaced.

Like kustomize's default load restrictor, files (resources, generator sources,
patches) must lie in or below the kustomization's directory; directories
(bases) may lie anywhere.
"""
import base64
import copy
import json
import os
import sys

import yaml

KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "configMapGenerator", "secretGenerator",
                        "generatorOptions", "patches"}
GENERATOR_FIELDS = {"name", "files", "literals", "type"}
PATCH_FIELDS = {"path", "patch"}

# patchMergeKey of the list fields the manifests patch (k8s.io/api core/v1).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "imagePullSecrets": "name",
}


class RenderError(Exception):
    pass


def _load_yaml_docs(path):
    with open(path, encoding="utf-8") as f:
        try:
            return [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            raise RenderError(f"{path}: not valid YAML: {e}") from e


def _inside(root, path):
    root = os.path.realpath(root)
    path = os.path.realpath(path)
    return path == root or path.startswith(root + os.sep)


def _file_under_root(root, rel, what):
    path = os.path.join(root, rel)
    if not _inside(root, path):
        raise RenderError(f"{root}: {what} '{rel}' is not in or below the kustomization directory "
                          "(kustomize's load restrictor refuses it)")
    if not os.path.isfile(path):
        raise RenderError(f"{root}: {what} '{rel}' is not a file")
    return path


def _obj_id(obj):
    group = obj.get("apiVersion", "").rpartition("/")[0]
    md = obj.get("metadata") or {}
    return (group, obj.get("kind"), md.get("namespace"), md.get("name"))


def _generate(root, gen, kind):
    unknown = set(gen) - GENERATOR_FIELDS
    if unknown:
        raise RenderError(f"{root}: {kind} generator field(s) {sorted(unknown)} not supported by this renderer")
    if "name" not in gen:
        raise RenderError(f"{root}: {kind} generator without a name")
    if kind == "ConfigMap" and "type" in gen:
        raise RenderError(f"{root}: configMapGenerator has no 'type'")
    data = {}

    def put(key, value):
        if key in data:
            raise RenderError(f"{root}: {kind} {gen['name']}: key '{key}' given twice")
        data[key] = value

    for entry in gen.get("files") or []:
        key, sep, rel = entry.partition("=")
        if not sep:
            key, rel = os.path.basename(entry), entry
        path = _file_under_root(root, rel, f"{kind} {gen['name']} source")
        with open(path, "rb") as f:
            put(key, f.read())
    for entry in gen.get("literals") or []:
        key, sep, value = entry.partition("=")
        if not sep:
            raise RenderError(f"{root}: literal '{entry}' is not key=value")
        put(key, value.encode("utf-8"))
    obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": gen["name"]}}
    if kind == "Secret":
        obj["type"] = gen.get("type", "Opaque")
        obj["data"] = {k: base64.b64encode(v).decode("ascii") for k, v in data.items()}
    else:
        try:
            obj["data"] = {k: v.decode("utf-8") for k, v in data.items()}
        except UnicodeDecodeError as e:
            raise RenderError(f"{root}: ConfigMap {gen['name']}: binary data is not supported") from e
    return obj


def strategic_merge(base, patch, field=None):
    """Strategic merge of `patch` into `base` (both parsed YAML); returns the result."""
    if isinstance(patch, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in patch):
            raise RenderError(f"patch directives ({[k for k in patch if str(k).startswith('$')]}) not supported")
        if not isinstance(base, dict):
            return copy.deepcopy(patch)
        out = copy.deepcopy(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = strategic_merge(out[k], v, k)
            else:
                out[k] = strategic_merge(None, v, k)
        return out
    if isinstance(patch, list):
        key = MERGE_KEYS.get(field)
        if key is None or not isinstance(base, list):
            return copy.deepcopy(patch)
        out = copy.deepcopy(base)
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                raise RenderError(f"patch list '{field}' entry without its merge key '{key}'")
            for i, existing in enumerate(out):
                if isinstance(existing, dict) and existing.get(key) == item[key]:
                    out[i] = strategic_merge(existing, item, None)
                    break
            else:
                out.append(strategic_merge(None, item, None))
        return out
    return copy.deepcopy(patch)


def render(directory):
    """Returns the list of objects `kustomize build directory` would print."""
    root = os.path.abspath(directory)
    kfile = os.path.join(root, "kustomization.yaml")
    if not os.path.isfile(kfile):
        raise RenderError(f"{root}: no kustomization.yaml")
    docs = _load_yaml_docs(kfile)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise RenderError(f"{kfile}: expected one mapping")
    k = docs[0]
    unknown = set(k) - KUSTOMIZATION_FIELDS
    if unknown:
        raise RenderError(f"{kfile}: field(s) {sorted(unknown)} not supported by this renderer")
    if k.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or k.get("kind") != "Kustomization":
        raise RenderError(f"{kfile}: expected apiVersion kustomize.config.k8s.io/v1beta1, kind Kustomization")

    objects = []
    for res in k.get("resources") or []:
        path = os.path.join(root, res)
        if os.path.isdir(path):
            objects.extend(render(path))
        else:
            path = _file_under_root(root, res, "resource")
            for d in _load_yaml_docs(path):
                if not isinstance(d, dict) or "kind" not in d or "apiVersion" not in d:
                    raise RenderError(f"{path}: a document is not a Kubernetes object")
                objects.append(d)

    gen_opts = k.get("generatorOptions") or {}
    if set(gen_opts) - {"disableNameSuffixHash"}:
        raise RenderError(f"{kfile}: generatorOptions {sorted(set(gen_opts) - {'disableNameSuffixHash'})} "
                          "not supported by this renderer")
    generators = [(g, "ConfigMap") for g in k.get("configMapGenerator") or []] + \
                 [(g, "Secret") for g in k.get("secretGenerator") or []]
    if generators and gen_opts.get("disableNameSuffixHash") is not True:
        raise RenderError(f"{kfile}: generators need generatorOptions.disableNameSuffixHash: true "
                          "(this renderer does not compute kustomize's name hash)")
    for g, kind in generators:
        objects.append(_generate(root, g, kind))

    seen = set()
    for o in objects:
        oid = _obj_id(o)
        if oid in seen:
            raise RenderError(f"{root}: {oid[1]} {oid[3]} defined twice")
        seen.add(oid)

    for p in k.get("patches") or []:
        if set(p) - PATCH_FIELDS or len(set(p) & PATCH_FIELDS) != 1:
            raise RenderError(f"{kfile}: a patch must have exactly one of path/patch, and nothing else "
                              "(target and JSON6902 patches are not supported by this renderer)")
        if "path" in p:
            pdocs = _load_yaml_docs(_file_under_root(root, p["path"], "patch"))
        else:
            pdocs = [d for d in yaml.safe_load_all(p["patch"]) if d is not None]
        if len(pdocs) != 1 or not isinstance(pdocs[0], dict):
            raise RenderError(f"{kfile}: patch {p.get('path', '(inline)')}: expected one object "
                              "(a strategic-merge patch)")
        patch = pdocs[0]
        pid = _obj_id(patch)
        matches = [i for i, o in enumerate(objects) if _obj_id(o) == pid]
        if len(matches) != 1:
            raise RenderError(f"{kfile}: patch {p.get('path', '(inline)')}: {pid[1]} {pid[3]} matches "
                              f"{len(matches)} objects")
        objects[matches[0]] = strategic_merge(objects[matches[0]], patch)
    return objects


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} KUSTOMIZATION_DIR", file=sys.stderr)
        return 2
    try:
        objects = render(argv[1])
    except (RenderError, OSError) as e:
        print(f"kustomize_render: {e}", file=sys.stderr)
        return 1
    json.dump(objects, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
