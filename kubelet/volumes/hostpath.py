"""hostPath volumes: the type checks (and creations) upstream makes before mounting."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Any


class VolumeError(Exception):
    """A volume cannot be set up; the pod waits (FailedMount) and it is retried."""


def check_host_path(source: Mapping[str, Any]) -> str:
    """The host path to mount for a hostPath volume source, after its ``type`` check."""
    path = str(source.get("path", ""))
    kind = str(source.get("type") or "")
    if not path:
        raise VolumeError("hostPath: path is required")
    if kind == "":
        return path
    if kind == "DirectoryOrCreate":
        if not os.path.exists(path):
            os.makedirs(path, mode=0o755, exist_ok=True)
        kind = "Directory"
    elif kind == "FileOrCreate":
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
            with open(path, "a"):
                pass
            os.chmod(path, 0o644)
        kind = "File"
    checks = {
        "Directory": (stat.S_ISDIR, "is not a directory"),
        "File": (stat.S_ISREG, "is not a file"),
        "Socket": (stat.S_ISSOCK, "is not a socket file"),
        "CharDevice": (stat.S_ISCHR, "is not a character device"),
        "BlockDevice": (stat.S_ISBLK, "is not a block device"),
    }
    if kind not in checks:
        raise VolumeError(f"hostPath type {kind!r} is not supported")
    test, complaint = checks[kind]
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise VolumeError(f"hostPath type check failed: {path} {complaint}") from None
    if not test(mode):
        raise VolumeError(f"hostPath type check failed: {path} {complaint}")
    return path
