#!/usr/bin/env bash
# Back on this host after a device call of scripts/gpu/pretrain.sh: joins the
# pieces it returned, unpacks every run's export into OUT/NAME/ and measures
# each here, on this machine's CPU, on the whole held-out split
# (adapterd-pretrain eval), next to the figures the GPU run printed.
#
#   ./scripts/gpu/finish-pretrain.sh FILES_AT [--out data/pretrain-gpu] [--corpus data/corpus]
#
# FILES_AT is the folder the device tool copied $OUT into (models.tar.xz.NN,
# run.log). Prints one line per run: held-out masked-token accuracy and loss
# (CPU, here), steps, token positions trained on, tokens/s on the GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 1 ]] || { sed -n '2,12p' "$0"; exit 2; }
FILES=$1; shift
OUTDIR=data/pretrain-gpu
CORPUS=data/corpus
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUTDIR=$2 ;;
    --corpus) CORPUS=$2 ;;
    *) echo "finish-pretrain: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
PRETRAIN=${BUILD_DIR:-build}/tools/pretrain/adapterd-pretrain
mkdir -p "$OUTDIR"
cat "$FILES"/models.tar.xz.* | tar -xJ -C "$OUTDIR"
cp "$FILES/run.log" "$OUTDIR/run.log" 2>/dev/null || true
printf "%-12s %9s %8s %8s %14s %10s\n" run heldout loss steps token_positions gpu_tok/s
for dir in "$OUTDIR"/*/model; do
  [[ -f "$dir/model.safetensors" ]] || continue
  name=$(basename "$(dirname "$dir")")
  eval_line=$("$PRETRAIN" eval --model_dir "$dir" --corpus "$CORPUS/heldout.ids")
  python3 - "$dir" "$name" "$eval_line" <<'PY'
import json, re, sys
d, name, line = sys.argv[1:]
s = json.load(open(f"{d}/pretrain_summary.json"))
log = [json.loads(l) for l in open(f"{d}/train_log.jsonl")]
acc, loss = re.search(r"accuracy ([0-9.]+).*loss ([0-9.]+)", line).groups()
tps = sorted(r["tokens_per_second"] for r in log)[len(log) // 2]
print(f"{name:12s} {float(acc):9.4f} {float(loss):8.4f} {s['steps']:8d} {s['steps'] * s['batch_size'] * s['seq_len']:14,d} {tps:10,.0f}")
PY
done
