#!/usr/bin/env bash
# What a new user gets from `pip install .` and `pip install .[testing]`: the wheel, built
# from this tree, in fresh virtualenvs that hold nothing else (the project's .venv has
# every extra installed, so it cannot show a runtime dependency declared only as a test one).
#
#   scripts/check-clean-install.sh          (scripts/test.sh runs it before pytest)
#
# 1. No extras: `kubelet --version`, every module outside kubelet.testing imports, and a
#    standalone kubelet (one static pod, the runtime a FakeRuntime, pod cgroups off)
#    answers `ok` on /healthz of an ephemeral loopback port and runs its pod.
#    (kubelet.tracing.otel, the [tracing] extra's SDK, is the one module left out.)
# 2. With [testing]: every module of kubelet.testing imports; this venv serves the
#    FakeRuntime of step 1, so the fakes run from a plain `pip install kubelet[testing]`.
# Dependencies are resolved once, from pip's cache, into a wheelhouse both installs read.
# Everything lives in one temp dir, removed at exit with the processes started here
# (stopped by PID); the source tree is copied, so the build leaves nothing in it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=${PYTHON:-python3}
say() { echo "[clean-install] ${SECONDS}s $*"; }
fail() { say "FAILED: $*"; exit 1; }

# the installed copy only: neither this tree (cwd, PYTHONPATH) nor a user site
unset PYTHONPATH
export PYTHONNOUSERSITE=1
TMP=$(mktemp -d /tmp/clean-install.XXXXXX)
cd "$TMP"
fake_pid= kubelet_pid=

alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"; }
stop_pid() {  # SIGTERM, then SIGKILL after 10 s; reaped either way
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 100); do alive "$pid" || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  [ -z "$kubelet_pid" ] || stop_pid "$kubelet_pid"
  [ -z "$fake_pid" ] || stop_pid "$fake_pid"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

quiet() {  # run a command, its output shown only when it fails
  local log="$TMP/step.log"
  "$@" >"$log" 2>&1 || { tail -30 "$log"; fail "$*"; }
}

# every module of the installed kubelet package outside (exclude) or inside (only)
# kubelet.testing, each imported; __main__ modules are commands, not imported
IMPORT_ALL='
import importlib, pkgutil, sys
import kubelet
mode, inside = sys.argv[1], "kubelet.testing"
extra_only = {"kubelet.tracing.otel"}  # the OpenTelemetry SDK: the [tracing] extra
where = kubelet.__path__[0]
if not where.startswith(sys.prefix):
    sys.exit(f"kubelet comes from {where}, not from {sys.prefix}")
failed, found = [], []
def record(name):
    found.append(name)
    try:
        return importlib.import_module(name)
    except BaseException as e:
        failed.append(name)
        print(f"  {name}: {type(e).__name__}: {e}", file=sys.stderr)
def walk(path, prefix):
    for info in pkgutil.iter_modules(path, prefix):
        if (info.name == inside or info.name.startswith(inside + ".")) != (mode == "only"):
            continue
        if info.name.rsplit(".", 1)[-1] == "__main__" or info.name in extra_only:
            continue
        module = record(info.name)
        if info.ispkg and module is not None:
            walk(module.__path__, info.name + ".")
walk(kubelet.__path__, "kubelet.")
print(f"{len(found) - len(failed)} of {len(found)} modules import", file=sys.stderr)
sys.exit(1 if failed or not found else 0)
'

say "building the wheel; its dependencies' wheels come from pip's cache"
mkdir src
tar -C "$ROOT" --exclude=__pycache__ --exclude='*.egg-info' -cf - pyproject.toml README.md \
  LICENSE kubelet | tar -C src -xf -
quiet "$PY" -m venv base
# one resolution for both installs, which then read only this wheelhouse
quiet base/bin/python -m pip wheel -w wheels "./src[testing]"
WHEEL=$(ls "$TMP"/wheels/kubelet-*.whl)
install() {  # VENV REQUIREMENT
  quiet base/bin/python -m pip --python "$1/bin/python" install --no-compile --no-index \
    --find-links wheels "$2"
}

say "pip install $(basename "$WHEEL") (no extras) into a fresh venv"
install base "$WHEEL"
version=$(base/bin/kubelet --version) || fail "kubelet --version"
[[ $version == "Kubernetes v"* ]] || fail "kubelet --version printed '$version'"
say "kubelet --version: $version"
base/bin/python -c "$IMPORT_ALL" exclude || fail "a module does not import without extras"

say "pip install $(basename "$WHEEL")[testing] into a second fresh venv"
quiet "$PY" -m venv --without-pip testing
install testing "$WHEEL[testing]"
testing/bin/python -c "$IMPORT_ALL" only || fail "a kubelet.testing module does not import"

say "a standalone kubelet (no extras) on a FakeRuntime ([testing])"
testing/bin/python -m kubelet.testing.fakeruntime --listen "unix://$TMP/fake.sock" \
  --no-streaming --report-running 1 >fake.out 2>fake.log &
fake_pid=$!
mkdir manifests
cat >manifests/hello.yaml <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  containers:
  - {name: main, image: docker.io/library/busybox:latest, imagePullPolicy: IfNotPresent}
EOF
cat >config.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
podLogsDir: $TMP/pod-logs
authentication: {webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
EOF
port=$(base/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
for _ in $(seq 300); do [ -S fake.sock ] && break; sleep 0.1; done
[ -S fake.sock ] || { cat fake.log; fail "the FakeRuntime did not listen"; }
# pod cgroups off and container log links here: this kubelet, as root on a fake runtime,
# must not sweep the host's kubepods tree or /var/log/containers
KUBELET_CONTAINERS_LOG_DIR="$TMP/containers" base/bin/kubelet --config config.yaml \
  --pod-manifest-path manifests --hostname-override clean-install --root-dir "$TMP/root" \
  --container-runtime-endpoint "unix://$TMP/fake.sock" --fail-swap-on=false \
  --fail-cgroupv1=false --cgroups-per-qos=false --enforce-node-allocatable= --enable-server=false \
  --read-only-port=0 --healthz-bind-address=127.0.0.1 --healthz-port="$port" \
  >/dev/null 2>kubelet.log &
kubelet_pid=$!
HEALTHZ='
import sys, time, urllib.request
deadline = time.monotonic() + 60
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
while True:
    try:
        with direct.open(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=2) as r:
            body = r.read(100).decode()
        if body == "ok":
            sys.exit(print("healthz: ok"))
    except OSError as e:
        body = repr(e)
    if time.monotonic() > deadline:
        sys.exit(f"healthz answered {body!r}")
    time.sleep(0.2)
'
base/bin/python -c "$HEALTHZ" "$port" || { tail -20 kubelet.log; fail "no ok on /healthz"; }
for _ in $(seq 300); do grep -q '"running"' fake.out && break; sleep 0.1; done
grep -q '"running"' fake.out || { tail -20 kubelet.log; fail "the static pod did not run"; }
say "the static pod runs"
kill -TERM "$kubelet_pid"
status=0
wait "$kubelet_pid" || status=$?
kubelet_pid=
[ "$status" = 0 ] || { tail -20 kubelet.log; fail "the kubelet exited with $status on SIGTERM"; }
say "ok"
