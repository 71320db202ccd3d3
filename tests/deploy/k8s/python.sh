#!/bin/sh
# Runs a Python script with a python3 that has the yaml module (Debian's
# python3-yaml): the first of `python3` on PATH and /usr/bin/python3.
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import yaml' 2>/dev/null; then exec "$p" "$@"; fi
done
echo "FAIL: no python3 with the yaml module (Debian: python3-yaml; run scripts/install-deps.sh)" >&2
exit 1
