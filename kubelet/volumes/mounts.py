"""mount(2) and umount2(2) without a fork, and the mount table as the kernel reports it.

The kubelet mounts tmpfs volumes and subPath bind mounts. Calling the syscalls through
ctypes costs microseconds where ``mount(8)`` costs a fork and an exec, and lets a bind
mount take its source from ``/proc/<pid>/fd/<n>``: the file the kubelet already opened
and checked, not a path a container could change in between.

Bind mounts of a directory on the same filesystem share its device number, so only
``/proc/self/mountinfo`` says whether a path is a mount point.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
from collections.abc import Iterable

MS_BIND = 0x1000
MNT_DETACH = 0x2
UMOUNT_NOFOLLOW = 0x8

_MOUNTINFO = "/proc/self/mountinfo"

_libc: ctypes.CDLL | None = None


class MountError(OSError):
    """A mount or unmount failed; ``errno`` and the path say which and why."""


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_char_p,
        ]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return _libc


def _raise(call: str, path: str) -> None:
    code = ctypes.get_errno()
    raise MountError(code, f"{call} {path}: {os.strerror(code)}", path)


def mount(source: str, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    """mount(2); raises MountError."""
    if (
        _c().mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        )
        != 0
    ):
        _raise("mount", target)


def bind_fd(fd: int, target: str) -> None:
    """Bind-mount what ``fd`` refers to onto ``target`` (the fd's file, not a path)."""
    mount(f"/proc/{os.getpid()}/fd/{fd}", target, None, MS_BIND)


def unmount(target: str) -> None:
    """Unmount ``target`` (never following a symlink there); a busy mount is detached.

    Raises MountError, except when nothing is mounted there (EINVAL) or the path is gone.
    """
    libc = _c()
    if libc.umount2(target.encode(), UMOUNT_NOFOLLOW) == 0:
        return
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOENT):
        return
    if code == errno.EBUSY and libc.umount2(target.encode(), UMOUNT_NOFOLLOW | MNT_DETACH) == 0:
        return
    _raise("umount", target)


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as ``\\ooo``."""
    if "\\" not in field:
        return field
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mount_points(lines: Iterable[str]) -> list[str]:
    """The mount points (field 5) of mountinfo lines, unescaped, in table order."""
    points = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            points.append(_unescape(fields[4]))
    return points


def mount_points() -> list[str]:
    """Every mount point of this mount namespace."""
    try:
        with open(_MOUNTINFO) as fh:
            return parse_mount_points(fh)
    except OSError:
        return []


def mounts_under(directory: str) -> list[str]:
    """Mount points at or below ``directory``, deepest and latest first (the order to
    unmount them); a point with mounts stacked on it appears once per mount."""
    base = os.path.normpath(directory)
    prefix = base.rstrip("/") + "/"
    found = [p for p in mount_points() if p == base or p.startswith(prefix)]
    return sorted(reversed(found), key=lambda p: p.count("/"), reverse=True)


def is_mount_point(path: str) -> bool:
    return os.path.normpath(path) in set(mount_points())


def is_separate_filesystem(path: str) -> bool:
    """Whether ``path`` is the root of another filesystem than its parent (a tmpfs on
    the volume directory); cheap, but blind to bind mounts within one filesystem."""
    try:
        return os.stat(path).st_dev != os.stat(os.path.dirname(os.path.normpath(path))).st_dev
    except OSError:
        return False
