#!/bin/bash
# deploy_k8s_manifests_test: the Kubernetes manifests in deploy/k8s, offline.
#   1. yamllint on every YAML file under deploy/ (strict for deploy/k8s);
#   2. renders the base and gpu kustomizations as `kubectl apply -k` would
#      (kustomize_render.py);
#   3. validates every rendered object against the Kubernetes API schema,
#      unknown fields included (validate_k8s.js, npm's kubernetes-models from
#      $ADAPTERD_TOOLS, default /opt/adapterd-tools);
#   4. checks that the objects fit together and fit adapterd
#      (check_manifests.py: peers = replicas, router ConfigMap = the repo's
#      files byte for byte, probes, security, every ADAPTERD_* a real flag...);
#   5. proves each checker can fail: broken inputs must be rejected.
# Usage: manifests_test.sh REPO_ROOT WORK_DIR
set -euo pipefail

repo=$(cd "${1:?usage: $0 REPO_ROOT WORK_DIR}" && pwd)
work=${2:?usage: $0 REPO_ROOT WORK_DIR}
here="$repo/tests/deploy/k8s"
tools=${ADAPTERD_TOOLS:-/opt/adapterd-tools}
rm -rf "$work" && mkdir -p "$work"

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

# Tools (scripts/install-deps.sh installs them all).
python=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import yaml' 2>/dev/null; then python=$p; break; fi
done
[ -n "$python" ] || fail "no python3 with the yaml module (Debian: python3-yaml; run scripts/install-deps.sh)"
command -v yamllint >/dev/null || fail "yamllint missing (run scripts/install-deps.sh)"
command -v node >/dev/null || fail "node missing (run scripts/install-deps.sh)"
[ -f "$tools/node_modules/kubernetes-models/package.json" ] ||
  fail "kubernetes-models missing under $tools/node_modules (run scripts/install-deps.sh)"
export NODE_PATH="$tools/node_modules"

step "yamllint"
# Relaxed rules everywhere under deploy/ (errors fail: syntax, duplicate keys,
# trailing spaces, ...); deploy/k8s, this test's own, also fails on warnings.
mapfile -t all_yaml < <(find "$repo/deploy" -type f \( -name '*.yaml' -o -name '*.yml' \) | sort)
mapfile -t k8s_yaml < <(find "$repo/deploy/k8s" -type f \( -name '*.yaml' -o -name '*.yml' \) | sort)
[ ${#k8s_yaml[@]} -gt 0 ] || fail "no YAML under deploy/k8s"
yamllint -f parsable -d relaxed "${all_yaml[@]}" || fail "yamllint (relaxed) on deploy/"
yamllint -f parsable -s -d relaxed "${k8s_yaml[@]}" || fail "yamllint --strict on deploy/k8s"
echo "yamllint: ${#all_yaml[@]} files clean"

step "render"
"$python" "$here/kustomize_render.py" "$repo/deploy/k8s" > "$work/base.json" || fail "render deploy/k8s"
"$python" "$here/kustomize_render.py" "$repo/deploy/k8s/gpu" > "$work/gpu.json" || fail "render deploy/k8s/gpu"

step "schema"
node "$here/validate_k8s.js" "$work/base.json" "$work/gpu.json" || fail "schema validation"

step "consistency"
"$python" "$here/check_manifests.py" "$repo" "$work/base.json" "$work/gpu.json" || fail "consistency checks"

step "the checkers reject broken inputs"
# A schema error: replicas must be an integer.
"$python" - "$work/base.json" "$work/bad_replicas.json" <<'EOF'
import json, sys
objs = json.load(open(sys.argv[1]))
ss = next(o for o in objs if o["kind"] == "StatefulSet")
ss["spec"]["replicas"] = "three"
json.dump([ss], open(sys.argv[2], "w"))
EOF
if node "$here/validate_k8s.js" "$work/bad_replicas.json" > "$work/bad_replicas.out"; then
  cat "$work/bad_replicas.out"; fail "a StatefulSet with replicas: \"three\" passed the schema validation"
fi
grep -q 'INVALID.*/spec/replicas must be integer' "$work/bad_replicas.out" ||
  { cat "$work/bad_replicas.out"; fail "replicas: \"three\" rejected, but not for replicas"; }
echo "rejected: replicas: \"three\""

# An unknown field (a typo kubectl's strict validation would refuse).
"$python" - "$work/base.json" "$work/bad_field.json" <<'EOF'
import json, sys
objs = json.load(open(sys.argv[1]))
d = next(o for o in objs if o["kind"] == "Deployment")
d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["tcpSockett"] = {"port": 8500}
json.dump([d], open(sys.argv[2], "w"))
EOF
if node "$here/validate_k8s.js" "$work/bad_field.json" > "$work/bad_field.out"; then
  cat "$work/bad_field.out"; fail "an unknown field passed the schema validation"
fi
grep -q 'unknown field(s): /spec/template/spec/containers/0/readinessProbe/tcpSockett' "$work/bad_field.out" ||
  { cat "$work/bad_field.out"; fail "the unknown field was not named"; }
echo "rejected: unknown field readinessProbe.tcpSockett"

# A kind the schema does not know.
echo '[{"apiVersion": "apps/v1", "kind": "StatefulSett", "metadata": {"name": "x"}}]' > "$work/bad_kind.json"
node "$here/validate_k8s.js" "$work/bad_kind.json" > "$work/bad_kind.out" && fail "an unknown kind passed"
echo "rejected: kind StatefulSett"

# Consistency: a fourth replica without its peer, shard Service and upstream.
"$python" - "$work/base.json" "$work/bad_scale.json" <<'EOF'
import json, sys
objs = json.load(open(sys.argv[1]))
next(o for o in objs if o["kind"] == "StatefulSet")["spec"]["replicas"] = 4
json.dump(objs, open(sys.argv[2], "w"))
EOF
"$python" "$here/check_manifests.py" "$repo" "$work/bad_scale.json" "$work/gpu.json" > "$work/bad_scale.out" &&
  fail "replicas: 4 with three peers passed the consistency checks"
grep -q 'ADAPTERD_PEERS lists 3 replicas, the StatefulSet has replicas=4' "$work/bad_scale.out" ||
  { cat "$work/bad_scale.out"; fail "replicas: 4 rejected, but not for the peers"; }
echo "rejected: replicas 4 with 3 peers"

# Consistency: a router ConfigMap one byte off the repository's file; an
# ADAPTERD_ variable that is no flag.
"$python" - "$work/base.json" "$work/bad_router.json" <<'EOF'
import json, sys
objs = json.load(open(sys.argv[1]))
cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "adapterd-router")
cm["data"]["adapterd-router.conf"] += " "
cfg = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "adapterd-config")
cfg["data"]["ADAPTERD_MAX_TASK"] = "1"
json.dump(objs, open(sys.argv[2], "w"))
EOF
"$python" "$here/check_manifests.py" "$repo" "$work/bad_router.json" "$work/gpu.json" > "$work/bad_router.out" &&
  fail "a modified router config passed the consistency checks"
grep -q "adapterd-router.conf is byte-identical" "$work/bad_router.out" ||
  { cat "$work/bad_router.out"; fail "the modified router config was not named"; }
grep -q "ADAPTERD_MAX_TASK names an adapterd flag" "$work/bad_router.out" ||
  { cat "$work/bad_router.out"; fail "ADAPTERD_MAX_TASK was not named"; }
echo "rejected: router ConfigMap != deploy/k8s/router/adapterd-router.conf; ADAPTERD_MAX_TASK"

# The renderer: an unsupported kustomize feature, a file outside the root.
mkdir -p "$work/kbad1" "$work/kbad2/sub"
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: x-\n' \
  > "$work/kbad1/kustomization.yaml"
"$python" "$here/kustomize_render.py" "$work/kbad1" > /dev/null 2>&1 && fail "the renderer accepted namePrefix"
echo 'x: 1' > "$work/kbad2/outside.txt"
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ngeneratorOptions:\n  disableNameSuffixHash: true\nconfigMapGenerator:\n  - name: x\n    files:\n      - ../outside.txt\n' \
  > "$work/kbad2/sub/kustomization.yaml"
"$python" "$here/kustomize_render.py" "$work/kbad2/sub" > /dev/null 2>&1 &&
  fail "the renderer accepted a file outside the kustomization root"
echo "rejected: namePrefix; a generator file outside the root"

echo "PASS: deploy/k8s manifests"
