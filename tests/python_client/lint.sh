#!/usr/bin/env bash
# mypy and flake8 over the Python client and its tests: mypy over the package
# (client/python/adapterd) and tests/python_client, flake8 over client/python
# and tests/python_client. The settings are the tools' own files, read from
# client/python: pyproject.toml ([tool.mypy]) and .flake8. Prints the tools'
# versions and their findings; exits 1 if either reports anything. Run by
# ctest as python_lint_test.
#   tests/python_client/lint.sh [SOURCE_DIR]
set -uo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
python=/usr/bin/python3  # Debian's, for which python3-mypy and flake8 are installed
cd "$root/client/python" || exit 1
for tool in mypy flake8; do
  if ! "$python" -m "$tool" --version; then
    echo "lint: $python -m $tool failed (scripts/install-deps.sh installs python3-mypy and flake8)" >&2
    exit 1
  fi
done
# mypy's cache goes to a throwaway directory, not into the source tree.
cache=$(mktemp -d "${TMPDIR:-/tmp}/adapterd_mypy.XXXXXX")
trap 'rm -rf "$cache"' EXIT
export PYTHONDONTWRITEBYTECODE=1
status=0
"$python" -m mypy --cache-dir "$cache" adapterd ../../tests/python_client || status=1
"$python" -m flake8 adapterd setup.py ../../tests/python_client || status=1
if [ "$status" -eq 0 ]; then
  echo "lint: mypy and flake8 report nothing"
else
  echo "lint: findings above (settings: client/python/pyproject.toml [tool.mypy], client/python/.flake8)" >&2
fi
exit "$status"
