"""Where the kubelet keeps a pod's files under --root-dir (upstream's layout).

<root>/pods/<uid>/volumes/<plugin>/<volume>      e.g. kubernetes.io~empty-dir/cache
<root>/pods/<uid>/containers/<container>/<id>    termination-message files
<root>/pods/<uid>/etc-hosts                      the kubelet-managed /etc/hosts
"""

from __future__ import annotations

import os

EMPTY_DIR = "kubernetes.io~empty-dir"


def pods_dir(root_dir: str) -> str:
    return os.path.join(root_dir, "pods")


def pod_dir(root_dir: str, uid: str) -> str:
    return os.path.join(pods_dir(root_dir), uid)


def volume_dir(root_dir: str, uid: str, plugin: str, name: str) -> str:
    return os.path.join(pod_dir(root_dir, uid), "volumes", plugin, name)


