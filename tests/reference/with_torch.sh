#!/usr/bin/env bash
# Runs a reference script with the first python3 that has torch (PATH's, then
# Debian's /usr/bin/python3); exit 77 (ctest: skipped) where none has it.
# Usage: with_torch.sh SCRIPT.py ARGS...
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import torch, numpy" 2>/dev/null; then
        exec "$p" "$@"
    fi
done
echo "$(basename "$1"): skipped (no python3 with torch and numpy)"
exit 77
