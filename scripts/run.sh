#!/usr/bin/env bash
# Set up everything (virtualenv, containerd with local images) and run the main job: a
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
exec .venv/bin/kubelet --pod-manifest-path "$ROOT/examples/manifests" --file-check-frequency 5s "$@"
