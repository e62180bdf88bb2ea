#!/usr/bin/env bash
# Prints the path of a CPython X.Y interpreter that can make virtual environments with pip: `pythonX.Y`
# on PATH (a pyenv shim counts only where it runs), else the newest pyenv build of X.Y. Fails, saying
# so, where there is none: a wheel check meant for CPython X.Y must not run under another one.
#   scripts/ci/find_python.sh 3.10
set -euo pipefail
want=$1
pyenv_builds=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$want".*/bin/"python$want" 2>/dev/null | sort -V -r || true)
for candidate in "python$want" $pyenv_builds; do
  path=$(command -v "$candidate" 2>/dev/null) || continue
  if "$path" -c "import sys, venv, ensurepip; assert '%d.%d' % sys.version_info[:2] == '$want'" 2>/dev/null; then
    echo "$path"
    exit 0
  fi
done
echo "find_python.sh: no CPython $want here (python$want on PATH or a pyenv build of it, with venv and ensurepip)" >&2
exit 1
