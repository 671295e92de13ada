#!/usr/bin/env python3
"""Stop and remove every CRI container and sandbox on the default runtime endpoint.

scripts/containerd-down.sh runs this (with the project venv's python, from any cwd)
before stopping containerd, so pods are torn down through the CRI and CNI DEL releases
their IPs and network namespaces. Extra arguments go to ``python -m kubelet.cri cleanup``
(e.g. ``--kubelet-only``, ``--timeout 5``, ``--endpoint unix:///...``).
"""

from __future__ import annotations

import sys

from kubelet.cri.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["cleanup", *sys.argv[1:]]))
