#!/usr/bin/env bash
# Builds adapterd's default encoder from scratch, offline:
#   corpus (scripts/build-corpus.sh, apt only) -> WordPiece vocabulary
#   -> masked-language-model pretraining -> HuggingFace BERT directory
#   -> held-out masked-token accuracy -> MODEL_CARD.md.
#
#   ./scripts/build-default-model.sh                       # ~1 hour on 2 CPU cores
#   ./scripts/build-default-model.sh --minutes 10 --out /tmp/m   # a quick one
#   ./scripts/build-default-model.sh --device cuda --minutes 30  # on a GPU machine
#
# On a GPU machine lent for minutes, with no apt and a cap on what travels
# (how the committed model was made), the same pretraining runs as
# scripts/gpu/prepare-pretrain.sh (here) -> scripts/gpu/pretrain.sh (there)
# -> scripts/gpu/finish-pretrain.sh (here); see docs/PERFORMANCE.md.
#
# Options (defaults in brackets):
#   --out DIR          model directory to write [models/adapterd-mini-en]
#   --work DIR         corpus, vocabulary and checkpoints [./data/pretrain]
#   --minutes N        training-time budget [55]
#   --steps N          fixed number of steps instead of --minutes
#   --vocab_size N     WordPiece vocabulary size [8192]
#   --device D         cpu or cuda [cpu]
#   --autocast A       off, bf16 or auto [auto: bf16 on CUDA or amx/avx512_bf16 CPUs]
#   --lr X             peak learning rate [2e-3]
#   --init_range X     init std of the weights [0.035: BERT's 0.02 scaled by
#                      sqrt(768/256) for hidden 256, see MODEL_CARD.md]
#   --batch_size N     sequences per step [32]
#   --seq_len N        tokens per sequence [128]
#   --dropout X        dropout while pretraining [0: the budget is short, the
#                      model underfits; the model's config keeps 0.1 for
#                      fine-tuning]
#   --new_cycle        continue a finished run in --work with a further
#                      learning-rate cycle of this budget (to resume an
#                      interrupted second cycle, run again without it)
#   --init_from DIR    start a new --work from the model in DIR (same size and
#                      vocabulary, e.g. models/adapterd-mini-en, whose own
#                      checkpoint is not kept) instead of random weights; its
#                      vocab.txt is the vocabulary. Use a new --seed so that
#                      the run sees other masks and another order.
#   --seed N           seed of the initialisation, masks and order [42]
#   --threads N        LibTorch threads [0: one per hardware thread; on a VM
#                      whose second vCPU is a busy sibling, 1 can be faster]
# Interrupting it (Ctrl-C) checkpoints; running it again with the same --work
# resumes where it stopped.
set -euo pipefail
usage() { sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//'; }

OUT=models/adapterd-mini-en
WORK=./data/pretrain
MINUTES=55
STEPS=0
VOCAB_SIZE=8192
DEVICE=cpu
AUTOCAST=auto
LR=2e-3
INIT=0.035
BATCH=32
SEQ=128
DROPOUT=0
NEW_CYCLE=()
INIT_FROM=""
SEED=42
THREADS=0
while [[ $# -gt 0 ]]; do
  [[ "$1" == -h || "$1" == --help ]] && { usage; exit 0; }
  if [[ "$1" == --new_cycle ]]; then NEW_CYCLE=(--new_cycle); shift; continue; fi
  [[ $# -ge 2 ]] || { echo "build-default-model: $1 needs a value" >&2; usage >&2; exit 2; }
  case "$1" in
    --out) OUT=$2 ;;
    --work) WORK=$2 ;;
    --minutes) MINUTES=$2 ;;
    --steps) STEPS=$2 ;;
    --vocab_size) VOCAB_SIZE=$2 ;;
    --device) DEVICE=$2 ;;
    --autocast) AUTOCAST=$2 ;;
    --lr) LR=$2 ;;
    --init_range) INIT=$2 ;;
    --batch_size) BATCH=$2 ;;
    --seq_len) SEQ=$2 ;;
    --dropout) DROPOUT=$2 ;;
    --init_from) INIT_FROM=$(cd "$2" && pwd) ;;
    --seed) SEED=$2 ;;
    --threads) THREADS=$2 ;;
    *) echo "build-default-model: unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift 2
done
cd "$(dirname "$0")/.."
mkdir -p "$WORK" "$(dirname "$OUT")"
WORK=$(cd "$WORK" && pwd)

./scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target adapterd-pretrain
PRETRAIN="$BUILD_DIR/tools/pretrain/adapterd-pretrain"

# 1. Corpus (skipped when already built).
if [[ ! -s "$WORK/corpus/train.txt" || ! -s "$WORK/corpus/heldout.txt" ]]; then
  ./scripts/build-corpus.sh --out "$WORK/corpus"
fi

# 2. Vocabulary (skipped when already built: a resumed run must keep it).
if [[ ! -s "$WORK/vocab.txt" && -n "$INIT_FROM" ]]; then
  cp "$INIT_FROM/vocab.txt" "$WORK/vocab.txt"
elif [[ ! -s "$WORK/vocab.txt" ]]; then
  "$PRETRAIN" vocab --corpus "$WORK/corpus/train.txt" --size "$VOCAB_SIZE" --out "$WORK/vocab.txt"
fi

# 3. Pretraining (resumes from $WORK/run/checkpoint when present).
budget=(--max_minutes "$MINUTES")
[[ "$STEPS" != 0 ]] && budget=(--max_steps "$STEPS")
"$PRETRAIN" train --corpus "$WORK/corpus/train.txt" --heldout "$WORK/corpus/heldout.txt" \
  --eval_sequences 0 --vocab "$WORK/vocab.txt" --work_dir "$WORK/run" --out "$OUT" \
  --preset mini --layers 4 --hidden 256 --heads 4 --intermediate 1024 \
  --batch_size "$BATCH" --seq_len "$SEQ" --lr "$LR" --init_range "$INIT" --dropout "$DROPOUT" --autocast "$AUTOCAST" --device "$DEVICE" \
  --seed "$SEED" --threads "$THREADS" "${budget[@]}" "${NEW_CYCLE[@]}" ${INIT_FROM:+--init_from "$INIT_FROM"} --out_dtype f16 --report_every 20 | tee -a "$WORK/train_stdout.log"
finished=$(date -u -r "$WORK/run/checkpoint/state.json" +%Y-%m-%dT%H:%M:%SZ)
cp "$WORK/run/train_log.jsonl" "$OUT/train_log.jsonl"

# 4. A small committed held-out sample for the model test, and the card.
head -n 300 "$WORK/corpus/heldout.txt" > "$OUT/heldout_sample.txt"
/usr/bin/env python3 scripts/corpus/model_card.py --model_dir "$OUT" --write_lineage \
  --provenance "$WORK/corpus/PROVENANCE.md" --finished "$finished" > "$OUT/MODEL_CARD.md"
echo "build-default-model: wrote $OUT (see $OUT/MODEL_CARD.md)"
