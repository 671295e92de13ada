"""subPath and subPathExpr, resolved inside the volume and never outside it.

A container can change what a path in a shared volume is at any moment: make a
directory a symlink to ``/`` just before the kubelet mounts ``<volume>/<subPath>``, and
a path-based bind mount hands the host's root to the pod (CVE-2017-1002101). So, as
upstream since 1.10:

* the subPath is walked one component at a time from an open descriptor of the volume
  root, each step an ``openat`` with ``O_NOFOLLOW | O_PATH``; a symlink on the way is
  read and followed by the walk itself, and only while it stays inside the volume
  (``..`` above the root, or an absolute target elsewhere, is refused);
* a missing component of the subPath is created there (``mkdirat``, the volume root's
  mode) and opened again without following anything;
* the descriptor the walk ends on is bind-mounted from ``/proc/<pid>/fd/<n>`` onto
  ``<pod dir>/volume-subpaths/<volume>/<container>/<index>``, and that path is what the
  runtime gets. Whatever a container does to the volume after the walk, the mount is of
  the file the walk checked.

The bind mounts stay until the pod's volumes are torn down (a restarted container
reuses its mount when it is still of the same file), and go before the pod directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator, Mapping

from kubelet.env import ExpansionTooLarge, expand_env

from .dirs import SUBPATH_DIR_MODE, SUBPATH_FILE_MODE, mkdir_all
from .mounts import bind_fd, is_mount_point, mounts_under, unmount

log = logging.getLogger(__name__)

SUBPATHS_DIR = "volume-subpaths"
MAX_SYMLINKS = 40
MAX_STACKED = 16

_O_WALK = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class MountConfigError(Exception):
    """A container's volumeMounts cannot be made; the container is not created and
    reports CreateContainerConfigError with this message."""


class UnsafeSubPath(Exception):
    """The walk refused a subPath (why, for the log; the user sees less, as upstream)."""


class SubPathCreateError(UnsafeSubPath):
    """A missing directory of the subPath could not be created inside the volume."""


# -- decisions ------------------------------------------------------------------------------


class _Recorder(Mapping[str, str]):
    """The container's env for ``expand_env``, noting names with no (or an empty) value."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.missing: set[str] = set()

    def __contains__(self, name: object) -> bool:
        return True

    def __getitem__(self, name: str) -> str:
        value = self.env.get(name, "")
        if not value:
            self.missing.add(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.env)

    def __len__(self) -> int:
        return len(self.env)


SUB_PATH_MAX = 4096
"""Characters an expanded ``subPathExpr`` may have: Linux's PATH_MAX, past which no
directory could be made for it anyway."""


def expand_sub_path_expr(expr: str, env: Mapping[str, str]) -> str:
    """``subPathExpr`` after ``$(VAR)`` expansion; a variable without a value is an error
    (upstream's ``missing value for A, B``), and so is a path longer than PATH_MAX."""
    recorder = _Recorder(env)
    try:
        expanded = expand_env(expr, recorder, limit=SUB_PATH_MAX)
    except ExpansionTooLarge as exc:
        raise MountConfigError(f"cannot expand subPathExpr: {exc}") from None
    if recorder.missing:
        raise MountConfigError(f"missing value for {', '.join(sorted(recorder.missing))}")
    return expanded


def check_sub_path(sub_path: str) -> None:
    """Upstream's checks before any file is touched (API validation makes the same ones
    for API pods; static pods and expanded expressions only meet them here)."""
    if sub_path.startswith("/"):
        raise MountConfigError(f"error SubPath `{sub_path}` must not be an absolute path")
    if ".." in sub_path.split("/"):
        raise MountConfigError(f"unable to provision SubPath `{sub_path}`: must not contain '..'")


def effective_sub_path(sub_path: str, sub_path_expr: str, env: Mapping[str, str]) -> str:
    """The subPath a volumeMount asks for, checked ("" for none)."""
    if sub_path and sub_path_expr:
        # the API server refuses this; a static pod meets it here
        raise MountConfigError("subPathExpr and subPath are mutually exclusive")
    value = expand_sub_path_expr(sub_path_expr, env) if sub_path_expr else sub_path
    if value:
        check_sub_path(value)
    return value


def bind_target(pod_dir: str, volume: str, container: str, index: int) -> str:
    """``<pod dir>/volume-subpaths/<volume>/<container>/<index>``."""
    return os.path.join(pod_dir, SUBPATHS_DIR, volume, container, str(index))


# -- the walk -------------------------------------------------------------------------------


def _components(path: str, creatable: bool) -> list[tuple[str, bool]]:
    """Path components in pop order (last first)."""
    return [(part, creatable) for part in reversed(path.split("/")) if part not in ("", ".")]


def open_in_volume(volume: str, sub_path: str, *, create: bool = True) -> int:
    """An ``O_PATH`` descriptor of ``<volume>/<sub_path>`` reached without leaving the
    volume, creating missing directories of ``sub_path`` on the way (unless ``create``
    is False: a reader must not change the volume). The caller closes it.

    Raises UnsafeSubPath when the path leaves the volume (a symlink or ``..``), loops,
    goes through something that is not a directory, is missing and not to be created,
    or cannot be created.
    """
    root = os.path.realpath(volume)
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    stack = [root_fd]  # descriptors of the directories from the root to where we are
    try:
        mode = stat.S_IMODE(os.fstat(root_fd).st_mode)
        pending = _components(sub_path, creatable=create)
        links = 0
        while pending:
            name, creatable = pending.pop()
            if name == "..":
                if len(stack) == 1:
                    raise UnsafeSubPath(f"{sub_path!r} leaves the volume {root}")
                os.close(stack.pop())
                continue
            parent = stack[-1]
            fd = _open_or_create(name, parent, creatable, mode, sub_path)
            info = os.fstat(fd)
            if stat.S_ISLNK(info.st_mode):
                links += 1
                try:
                    target = os.readlink(name, dir_fd=parent)
                finally:
                    os.close(fd)
                if links > MAX_SYMLINKS:
                    raise UnsafeSubPath(f"too many levels of symbolic links in {sub_path!r}")
                if target.startswith("/"):
                    inside = _within(root, target)
                    if inside is None:
                        raise UnsafeSubPath(f"{sub_path!r}: symlink to {target} leaves {root}")
                    while len(stack) > 1:
                        os.close(stack.pop())
                    target = inside
                pending.extend(_components(target, creatable=False))
                continue
            if pending and not stat.S_ISDIR(info.st_mode):
                os.close(fd)
                raise UnsafeSubPath(f"{sub_path!r}: {name} is not a directory")
            stack.append(fd)
        return stack.pop()
    finally:
        for fd in stack:
            os.close(fd)


def _within(root: str, target: str) -> str | None:
    """An absolute symlink target as a path relative to the volume root, or None when it
    names something outside (its ``..`` components are left to the walk)."""
    if root == "/":
        return target.lstrip("/")
    if target == root:
        return ""
    if target.startswith(root + "/"):
        return target[len(root) + 1 :]
    return None


def _open_or_create(name: str, parent: int, creatable: bool, mode: int, sub_path: str) -> int:
    try:
        return os.open(name, _O_WALK, dir_fd=parent)
    except FileNotFoundError:
        if not creatable:
            raise UnsafeSubPath(f"{sub_path!r}: {name} does not exist") from None
    try:
        os.mkdir(name, mode, dir_fd=parent)
    except FileExistsError:
        pass  # made in between: whatever it is now, it is opened without following it
    except OSError as exc:
        raise SubPathCreateError(f"{sub_path!r}: cannot create {name}: {exc}") from exc
    try:
        fd = os.open(name, _O_WALK, dir_fd=parent)
    except OSError as exc:
        raise UnsafeSubPath(f"{sub_path!r}: cannot open {name}: {exc}") from exc
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        # mkdirat's mode went through the umask; the volume root's mode (setgid
        # included) is what a container user needs to write there
        os.chmod(f"/proc/self/fd/{fd}", mode)
    return fd


# -- the bind mount -------------------------------------------------------------------------


def bind_sub_path(fd: int, target: str) -> None:
    """Mount what ``fd`` is onto ``target`` (a directory, or a file for anything else);
    a mount already there of the same file is kept, another one replaced."""
    mkdir_all(os.path.dirname(target), SUBPATH_DIR_MODE)
    wanted = os.fstat(fd)
    try:
        present = os.lstat(target)
    except FileNotFoundError:
        present = None
    if present is not None and is_mount_point(target):
        mounted = os.stat(target)
        if (mounted.st_dev, mounted.st_ino) == (wanted.st_dev, wanted.st_ino):
            return
        for _ in range(MAX_STACKED):
            unmount(target)
            if not is_mount_point(target):
                break
        else:
            raise OSError(f"{target} stays mounted")
        present = os.lstat(target)
    is_dir = stat.S_ISDIR(wanted.st_mode)
    if present is not None and stat.S_ISDIR(present.st_mode) != is_dir:
        (os.rmdir if stat.S_ISDIR(present.st_mode) else os.unlink)(target)
        present = None
    if present is None:
        if is_dir:
            os.mkdir(target, SUBPATH_DIR_MODE)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, SUBPATH_FILE_MODE))
    bind_fd(fd, target)


def prepare_sub_path(volume: str, sub_path: str, target: str) -> str:
    """Resolve and bind-mount one subPath; returns ``target``. Raises UnsafeSubPath or
    OSError (the caller reports upstream's message, which names the mount)."""
    fd = open_in_volume(volume, sub_path)
    try:
        bind_sub_path(fd, target)
    finally:
        os.close(fd)
    return target


def release(target: str) -> None:
    """Unmount one bind target and remove it (a subPath made for a container that then
    could not be created)."""
    unmount(target)
    if not is_mount_point(target):
        with contextlib.suppress(FileNotFoundError):
            (os.rmdir if os.path.isdir(target) else os.unlink)(target)


def clean_sub_paths(pod_dir: str) -> None:
    """Unmount every subPath bind mount of a pod and remove their targets.

    Raises OSError when a mount stays; nothing is removed below a mount point.
    """
    base = os.path.join(pod_dir, SUBPATHS_DIR)
    if not os.path.isdir(base):
        return
    for point in mounts_under(base):
        unmount(point)
    left = mounts_under(base)
    if left:
        raise OSError(f"subPath mounts still present: {', '.join(left)}")
    for dirpath, dirnames, filenames in os.walk(base, topdown=False):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))
        for name in dirnames:
            path = os.path.join(dirpath, name)
            (os.unlink if os.path.islink(path) else os.rmdir)(path)
    os.rmdir(base)
