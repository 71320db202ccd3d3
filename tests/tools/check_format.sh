#!/usr/bin/env bash
# Checks that every C++ source of the project is formatted as .clang-format
# says (clang-format --dry-run --Werror); prints the files that are not and
# the command that fixes them. Run by ctest as format_test.
#   tests/tools/check_format.sh [SOURCE_DIR]
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$root"
command -v clang-format >/dev/null || { echo "check_format: clang-format not found (scripts/install-deps.sh)" >&2; exit 1; }
# The project's own C++: every .h and .cc below the source directories,
# not build trees (build*/, anything with a CMakeCache.txt) or models/.
mapfile -t files < <(find bench client common proto server storage tests tools \
  \( -name 'build*' -o -name node_modules \) -prune -o \( -name '*.h' -o -name '*.cc' \) -print | sort)
[ "${#files[@]}" -gt 100 ] || { echo "check_format: found only ${#files[@]} sources under $root" >&2; exit 1; }
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check_format: ${#bad[@]} of ${#files[@]} files differ from .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted as .clang-format says"
