"""fsGroup: a volume's files belong to the pod's group, as upstream's SetVolumeOwnership.

Every file and directory gets the group ``fsGroup`` (its owner is kept), group read
(and write, unless the volume is read-only) permission, and directories get group
search and the setgid bit, so what containers create there inherits the group.

Upstream applies it to emptyDir once, when the volume is made, and to configMap,
secret, downwardAPI and projected volumes on every write of their files; for these
ephemeral types ``fsGroupChangePolicy`` is not consulted (upstream passes no policy:
its OnRootMismatch short cut would leave a new payload's files without the group's
read bits). Persistent volumes, where the policy matters, are not provided here.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator

from kubelet.api import Pod

log = logging.getLogger(__name__)

RW_MASK = 0o660
RO_MASK = 0o440
EXEC_MASK = 0o110


def fs_group(pod: Pod) -> int | None:
    sc = pod.spec.security_context
    return sc.fs_group if sc is not None else None


def wanted_mode(mode: int, *, is_dir: bool, read_only: bool) -> int:
    """The permission bits a file of mode ``mode`` gets (upstream's mask)."""
    mask = RO_MASK if read_only else RW_MASK
    if is_dir:
        mask |= stat.S_ISGID | EXEC_MASK
    return stat.S_IMODE(mode) | mask


def set_volume_ownership(path: str, group: int, *, read_only: bool) -> None:
    """Give ``path`` and everything below it the group and its permissions.

    The walk goes by descriptors, one ``openat(O_NOFOLLOW)`` per entry: a symlink gets
    the group but is never followed (nor chmod-ed: that would reach its target), and a
    directory swapped for a symlink during the walk is skipped, so nothing outside the
    volume is touched. Other filesystems below (mounts) are not entered. Errors on
    single entries are logged and skipped, as upstream.
    """
    try:
        root = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        log.warning("fsGroup ownership of %s: %s", path, exc)
        return
    stack: list[tuple[int, str, Iterator[str]]] = []
    try:
        root_info = os.fstat(root)
        stack.append((root, path, iter(_names(root, path))))
        while stack:
            dir_fd, dir_path, names = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                if dir_fd != root:
                    os.close(dir_fd)
                continue
            child = _entry(dir_fd, name, group, read_only, root_info.st_dev)
            if child is not None:
                child_path = os.path.join(dir_path, name)
                stack.append((child, child_path, iter(_names(child, child_path))))
        _apply(root, root_info, group, read_only, path)
    finally:
        for dir_fd, _, _ in stack:
            if dir_fd != root:
                os.close(dir_fd)
        os.close(root)


def _names(dir_fd: int, dir_path: str) -> list[str]:
    try:
        return os.listdir(dir_fd)
    except OSError as exc:
        log.warning("fsGroup ownership of %s: %s", dir_path, exc)
        return []


def _entry(dir_fd: int, name: str, group: int, read_only: bool, dev: int) -> int | None:
    """Fix one entry; a directory of the same filesystem comes back opened for the walk."""
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        log.warning("fsGroup ownership of %s: %s", name, exc)
        return None
    try:
        info = os.fstat(fd)
        if stat.S_ISLNK(info.st_mode):
            if info.st_gid != group:
                os.chown(name, -1, group, dir_fd=dir_fd, follow_symlinks=False)
            return None
        _apply(fd, info, group, read_only, name)
        if not stat.S_ISDIR(info.st_mode) or info.st_dev != dev:
            return None
        return os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError as exc:
        log.warning("fsGroup ownership of %s: %s", name, exc)
        return None
    finally:
        os.close(fd)


def _apply(fd: int, info: os.stat_result, group: int, read_only: bool, name: str) -> None:
    """chown/chmod through ``/proc/self/fd``: the inode the descriptor holds, whatever
    the path has become since."""
    where = f"/proc/self/fd/{fd}"
    try:
        if info.st_gid != group:
            os.chown(where, -1, group)
        mode = wanted_mode(info.st_mode, is_dir=stat.S_ISDIR(info.st_mode), read_only=read_only)
        if mode != stat.S_IMODE(info.st_mode):
            os.chmod(where, mode)
    except OSError as exc:
        log.warning("fsGroup ownership of %s: %s", name, exc)
