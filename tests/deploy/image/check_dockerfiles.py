#!/usr/bin/env python3
"""Lints docker/Dockerfile and docker/Dockerfile.cuda and checks that they
describe the same container.

1. dockerfilelint (npm, pinned by scripts/install-deps.sh, under
   $ADAPTERD_TOOLS/node_modules/.bin) reports no issue in either file, with
   docker/.dockerfilelintrc when present.
2. The runtime stages (the last FROM) agree on what a deployment relies on:
   USER, EXPOSE, VOLUME, WORKDIR, HEALTHCHECK, STOPSIGNAL, ENTRYPOINT and CMD
   are identical, the OCI label keys are the same, and so are the ENV keys but
   for the GPU-only ones (GPU_ONLY_ENV, documented in docs/DEPLOYMENT.md).
3. Both build the three binaries from the same install-deps.sh-first layer
   order, and the CPU runtime installs libopenblas0-pthread.

Usage: check_dockerfiles.py [REPO_ROOT]   (default: $ADAPTERD_SOURCE_DIR or .)
"""
import json
import os
import re
import shlex
import subprocess
import sys

GPU_ONLY_ENV = {"ADAPTERD_DEVICE", "ADAPTERD_DTYPE", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}
IDENTICAL = ["USER", "EXPOSE", "VOLUME", "WORKDIR", "HEALTHCHECK", "STOPSIGNAL", "ENTRYPOINT", "CMD"]
REQUIRED_ENV = {"ADAPTERD_LISTEN", "ADAPTERD_HTTP_LISTEN", "ADAPTERD_METRICS_LISTEN", "ADAPTERD_DATA_DIR", "ADAPTERD_MODEL_DIR",
                "GOMP_SPINCOUNT"}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def instructions(path):
    """(KEYWORD, arguments) for every instruction, continuation lines joined."""
    out, cur = [], ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not cur and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if cur and line.lstrip().startswith("#"):
                continue  # a comment inside a continued instruction
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            cur += line
            keyword, _, args = cur.strip().partition(" ")
            out.append((keyword.upper(), " ".join(args.split())))
            cur = ""
    if cur:
        fail(f"{path}: ends inside a continued instruction")
    return out


def stages(instrs):
    result, current = [], None
    for kw, args in instrs:
        if kw == "FROM":
            current = {"from": args, "instrs": []}
            result.append(current)
        elif current is not None:
            current["instrs"].append((kw, args))
    return result


def kv_keys(args):
    """Keys of ENV/LABEL arguments in the key=value form (or the legacy 'key value')."""
    parts = shlex.split(args, posix=True)
    if parts and "=" not in parts[0]:
        return [parts[0]]
    return [p.split("=", 1)[0] for p in parts]


def lint(root, files):
    tools = os.environ.get("ADAPTERD_TOOLS", "/opt/adapterd-tools")
    exe = os.path.join(tools, "node_modules", ".bin", "dockerfilelint")
    if not os.access(exe, os.X_OK):
        fail(f"dockerfilelint not found at {exe} (scripts/install-deps.sh installs it)")
        return
    cmd = [exe, "--json"]
    rc = os.path.join(root, "docker", ".dockerfilelintrc")
    if os.path.exists(rc):
        cmd += ["--config", os.path.join(root, "docker")]
    cmd += files
    p = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    try:
        report = json.loads(p.stdout)
    except json.JSONDecodeError:
        fail(f"dockerfilelint: unreadable output (rc {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}")
        return
    for f in report.get("files", []):
        for issue in f.get("issues", []):
            fail(f"dockerfilelint {f.get('file')}:{issue.get('line')}: {issue.get('category')}: "
                 f"{issue.get('title')}: {issue.get('content', '')}")
    if p.returncode != 0 and not failures:
        fail(f"dockerfilelint exited {p.returncode}: {p.stderr[-2000:]}")
    print(f"dockerfilelint: {report.get('totalIssues', '?')} issue(s) in {len(files)} file(s)")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ADAPTERD_SOURCE_DIR", "."))
    cpu_path = os.path.join(root, "docker", "Dockerfile")
    gpu_path = os.path.join(root, "docker", "Dockerfile.cuda")
    lint(root, ["docker/Dockerfile", "docker/Dockerfile.cuda"])

    cpu, gpu = stages(instructions(cpu_path)), stages(instructions(gpu_path))
    for name, st in (("Dockerfile", cpu), ("Dockerfile.cuda", gpu)):
        if len(st) < 2:
            fail(f"{name}: not multi-stage ({len(st)} stage(s))")
        if not st[0]["from"].startswith("debian:bookworm-slim"):
            fail(f"{name}: builder is FROM {st[0]['from']}, not debian:bookworm-slim")
        if not st[-1]["from"].startswith("debian:bookworm-slim"):
            fail(f"{name}: runtime is FROM {st[-1]['from']}, not debian:bookworm-slim")
        # Layer order: install-deps.sh alone is copied and run before the sources.
        b = st[0]["instrs"]
        copies = [i for i, (kw, a) in enumerate(b) if kw == "COPY"]
        deps = [i for i, (kw, a) in enumerate(b) if kw == "RUN" and "install-deps.sh" in a]
        if not copies or b[copies[0]][1] != "scripts/install-deps.sh scripts/install-deps.sh":
            fail(f"{name}: the builder's first COPY is not scripts/install-deps.sh alone")
        if not deps or any(c < deps[0] for c in copies[1:]):
            fail(f"{name}: sources are copied before install-deps.sh runs")
        build = [a for kw, a in b if kw == "RUN" and "cmake --build" in a]
        if not build or not all(t in build[0] for t in ("adapterd", "adapterctl", "adapterd-make-model")):
            fail(f"{name}: the builder does not build adapterd adapterctl adapterd-make-model")
        if not any(kw == "ENTRYPOINT" and a.startswith("[") for kw, a in st[-1]["instrs"]):
            fail(f"{name}: ENTRYPOINT is not in exec form")

    rc, rg = cpu[-1]["instrs"], gpu[-1]["instrs"]
    for kw in IDENTICAL:
        a = [args for k, args in rc if k == kw]
        b = [args for k, args in rg if k == kw]
        if a != b:
            fail(f"{kw} differs: Dockerfile {a} vs Dockerfile.cuda {b}")
        elif kw not in ("CMD",) and not a:
            fail(f"{kw} missing from both runtime stages")
    env_c = {k for kw, a in rc if kw == "ENV" for k in kv_keys(a)}
    env_g = {k for kw, a in rg if kw == "ENV" for k in kv_keys(a)}
    if env_c - env_g:
        fail(f"ENV only in Dockerfile: {sorted(env_c - env_g)}")
    if env_g - env_c - GPU_ONLY_ENV:
        fail(f"ENV only in Dockerfile.cuda and not GPU-only: {sorted(env_g - env_c - GPU_ONLY_ENV)}")
    if REQUIRED_ENV - env_c:
        fail(f"runtime ENV lacks {sorted(REQUIRED_ENV - env_c)}")
    lab_c = {k for kw, a in rc if kw == "LABEL" for k in kv_keys(a)}
    lab_g = {k for kw, a in rg if kw == "LABEL" for k in kv_keys(a)}
    if lab_c != lab_g:
        fail(f"LABEL keys differ: {sorted(lab_c ^ lab_g)}")
    if not any(k.startswith("org.opencontainers.image.") for k in lab_c):
        fail("no OCI labels (org.opencontainers.image.*)")
    if not any(kw == "RUN" and "libopenblas0-pthread" in a for kw, a in rc):
        fail("the CPU runtime stage does not install libopenblas0-pthread")
    user = [a for kw, a in rc if kw == "USER"]
    if not user or user[-1].split(":")[0] in ("0", "root"):
        fail(f"runtime USER is root or missing: {user}")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("Dockerfile and Dockerfile.cuda: lint clean, runtime stages identical but GPU-only ENV "
          f"{sorted(env_g - env_c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
