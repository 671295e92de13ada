#!/usr/bin/env bash
# Set up everything (virtualenv, containerd with local images) and run the main job.
#
#   sudo scripts/run.sh
#
# Until the pod lifecycle lands this is a smoke run: the kubelet's version, then the
# runtime's version and status through the kubelet's own CRI client.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup-env.sh
bash scripts/containerd-up.sh
.venv/bin/kubelet --version
.venv/bin/python -m kubelet.cri version
.venv/bin/python -m kubelet.cri status
