"""The legacy container log symlinks (``/var/log/containers``) whose target is gone.

Log collectors read ``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``, a
symlink into the pod's log directory. Upstream's container GC removes such a symlink once
its target no longer exists, unless the runtime still reports the container in a state
other than exited (during log rotation the file is briefly absent). ``dangling`` finds the
candidates; the collector asks the runtime and removes them.
"""

from __future__ import annotations

import glob
import os

__all__ = [
    "LEGACY_CONTAINER_LOGS_DIR",
    "container_id_of_symlink",
    "dangling",
    "legacy_log_symlink",
]

LEGACY_CONTAINER_LOGS_DIR = "/var/log/containers"
_SUFFIX = ".log"
_MAX_NAME = 255
"""ext4's limit on a file name: the name is cut to leave room for ``.log``"""
_MIN_ID = 6
"""a runtime finds a container by an ID prefix this long, as upstream requires"""


def legacy_log_symlink(
    directory: str, container_id: str, container_name: str, pod_name: str, namespace: str
) -> str:
    """``<directory>/<pod>_<namespace>_<container>-<id>.log``, the part before ``.log``
    cut to 251 characters so the name fits a file name (upstream's rule, kept so log
    shippers' globs and parsers see the names they expect)."""
    stem = f"{pod_name}_{namespace}_{container_name}-{container_id}"
    return os.path.join(directory, stem[: _MAX_NAME - len(_SUFFIX)] + _SUFFIX)


def container_id_of_symlink(path: str) -> str | None:
    """The container ID after the last ``-`` of ``…-<id>.log``; None when there is none."""
    tail = path.rsplit("-", 1)[-1]
    if "-" not in path or not tail.endswith(_SUFFIX):
        return None
    cid = tail[: -len(_SUFFIX)]
    return cid if len(cid) >= _MIN_ID else None


def dangling(directory: str) -> list[str]:
    """``*.log`` entries of ``directory`` whose target does not exist."""
    out: list[str] = []
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "*" + _SUFFIX))):
        if os.path.islink(path) and not os.path.exists(path):
            out.append(path)
    return out
