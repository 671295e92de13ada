#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv at .venv with the kubelet and its test and
# dev extras installed in editable mode. Idempotent; a no-op when nothing changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY=${PYTHON:-python3}
say() { echo "[setup-env] $*"; }

"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { say "ERROR: Python >= 3.11 required ($("$PY" --version))"; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    say "python3-venv missing: apt-get install python3-venv"
    apt-get -o DPkg::Lock::Timeout=300 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq python3-venv >/dev/null
    "$PY" -m venv "$VENV"
  fi
fi
stamp="$VENV/.installed-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  say "installing the kubelet and its test/dev extras into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[test,dev]"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
"$VENV/bin/python" -m kubelet.leanimport >/dev/null  # the command's docstring-free bytecode
say "ok: $("$VENV/bin/kubelet" --version)"
