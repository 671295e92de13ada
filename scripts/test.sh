#!/usr/bin/env bash
# The whole test suite: lint, types, unit, integration and e2e (real containerd).
#
#   scripts/test.sh [pytest args...]
#
# Sets up .venv and containerd when needed (as root), runs ruff, mypy, the clean-install
# check (scripts/check-clean-install.sh; CLEAN_INSTALL=0 skips it while iterating) and
# pytest, and stops containerd again if this run started it. Exit status: pytest's, except
# that a run that collected no test fails (exit 5 becomes 1).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { echo "[test] $*"; }

bash scripts/setup-env.sh || exit 1

PIDFILE=/run/containerd/containerd.pid
was_running=0
if [ -f "$PIDFILE" ] && [ -d "/proc/$(cat "$PIDFILE" 2>/dev/null)" ]; then was_running=1; fi
bash scripts/containerd-up.sh || { say "containerd could not be started"; exit 1; }
if [ "$was_running" = 0 ]; then
  trap 'say "stopping the containerd this run started"; bash scripts/containerd-down.sh' EXIT
fi

say "ruff"
.venv/bin/ruff check kubelet tests scripts || exit 1
say "mypy"
.venv/bin/mypy || exit 1
say "docs (mkdocs build --strict)"; site="$(mktemp -d)"; .venv/bin/mkdocs build --strict --quiet --site-dir "$site" || exit 1; rm -rf "$site"
if [ "${CLEAN_INSTALL:-1}" != 0 ]; then
  say "clean install (the wheel alone in fresh virtualenvs)"
  bash scripts/check-clean-install.sh || exit 1
fi
say "pytest"
.venv/bin/pytest "$@"
rc=$?
if [ "$rc" = 5 ]; then say "pytest collected no tests"; rc=1; fi
exit "$rc"
