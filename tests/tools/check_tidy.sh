#!/usr/bin/env bash
# Runs clang-tidy with the project's profile (.clang-tidy) over the libraries
# that parse outside input and build without LibTorch; fails on any finding
# (the profile makes every warning an error) and prints it. Run by ctest as
# tidy_test.
#   tests/tools/check_tidy.sh SOURCE_DIR BUILD_DIR   # BUILD_DIR: its compile_commands.json
set -euo pipefail
src=$(cd "${1:?usage: check_tidy.sh SOURCE_DIR BUILD_DIR}" && pwd)
build=$(cd "${2:?usage: check_tidy.sh SOURCE_DIR BUILD_DIR}" && pwd)
command -v clang-tidy >/dev/null || { echo "check_tidy: clang-tidy not found (scripts/install-deps.sh)" >&2; exit 1; }
[ -f "$build/compile_commands.json" ] || { echo "check_tidy: $build has no compile_commands.json" >&2; exit 1; }
cd "$src"
files=(common/*.cc
       storage/batch.cc storage/keys.cc storage/record_codec.cc
       server/api/ids.cc server/api/page_token.cc server/api/request_checks.cc server/api/tenants.cc
       server/training/dataset_validator.cc server/training/example.cc
       server/model/safetensors.cc server/model/tokenizer.cc)
if ! clang-tidy -p "$build" --quiet "${files[@]}" 2>/dev/null; then
  echo "check_tidy: clang-tidy found problems (above) in ${#files[@]} files checked" >&2
  exit 1
fi
echo "check_tidy: ${#files[@]} files, no findings"
