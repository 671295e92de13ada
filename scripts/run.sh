#!/usr/bin/env bash
# Set up everything (virtualenv, containerd with local images) and run the example: a
# standalone kubelet running the example static pods (examples/manifests) on containerd.
#
#   sudo scripts/run.sh [extra kubelet flags]
#
# The kubelet logs to the terminal; in another terminal `.venv/bin/kubelet pods` lists the
# pods as containerd holds them. Ctrl-C stops the kubelet and leaves the pods running; a
# second run adopts them. scripts/containerd-down.sh removes them and stops containerd.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup-env.sh
bash scripts/containerd-up.sh
swap=()
if [ "$(wc -l < /proc/swaps 2>/dev/null || echo 1)" -gt 1 ]; then
  # upstream's kubelet (and ours) refuses to start with swap on unless told otherwise
  echo "run.sh: swap is on here; starting the kubelet with --fail-swap-on=false" >&2
  swap=(--fail-swap-on=false)
fi
v1=()
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ]; then
  # upstream's kubelet (and ours) refuses a cgroup v1 host unless told otherwise
  echo "run.sh: this host uses cgroup v1; starting the kubelet with --fail-cgroupv1=false" >&2
  v1=(--fail-cgroupv1=false)
fi
exec .venv/bin/kubelet --pod-manifest-path "$ROOT/examples/manifests" --file-check-frequency 5s \
  "${swap[@]}" "${v1[@]}" "$@"
