"""The only code that touches cgroup directories: mkdir, write, read, list, rmdir.

Synchronous and small: each call is a few syscalls on an in-kernel filesystem. The
manager runs a whole operation (create a pod cgroup, remove one) in one worker thread,
because a write can block (lowering ``memory.limit_in_bytes`` makes the kernel reclaim).

A cgroup is addressed by its literal name (``/kubepods/burstable/pod<uid>``), which
lives once per hierarchy: under every v1 controller's mount (and under ``unified/`` on a
hybrid host), or once under the v2 mount. Creating follows libcontainer: every missing
level is made, a new cpuset (v1) inherits its parent's ``cpuset.cpus``/``cpuset.mems``,
and (v2) every ancestor enables the root's controllers in ``cgroup.subtree_control``.
Removing goes bottom-up (a container cgroup the runtime left behind goes first).

Files are opened without ``O_CREAT``: a value for a file the kernel does not offer is an
error, never a stray file. ``TreeCgroupFs`` in kubelet.testing reproduces the kernel's
side on a temporary directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable

from .layout import CgroupLayout

__all__ = ["UNIFIED", "CgroupError", "CgroupFs"]

UNIFIED = ""
"""The key of the v2 tree among the hierarchies (upstream's and runc's convention)."""
PROCS = "cgroup.procs"
SUBTREE_CONTROL = "cgroup.subtree_control"
CONTROLLERS = "cgroup.controllers"


class CgroupError(Exception):
    """A cgroup operation failed; the message names the path and the system's reason."""


def _fail(action: str, path: str, err: OSError) -> CgroupError:
    return CgroupError(f"{action} {path}: {err.strerror or err}")


def _subdirectories(path: str) -> set[str]:
    """Names of the directories in ``path`` (none when it does not exist)."""
    try:
        with os.scandir(path) as entries:
            return {e.name for e in entries if e.is_dir(follow_symlinks=False)}
    except FileNotFoundError:
        return set()
    except OSError as err:
        raise _fail("failed to read the cgroup directory", path, err) from err


def _link_counts(paths: Iterable[str]) -> dict[str, int]:
    """Path → link count of each directory that exists."""
    counts: dict[str, int] = {}
    for path in paths:
        try:
            counts[path] = os.stat(path).st_nlink
        except FileNotFoundError:
            continue
        except OSError as err:
            raise _fail("failed to read the cgroup directory", path, err) from err
    return counts


class CgroupFs:
    """Cgroup directories of one host (or one test tree), per ``layout``.

    Paths are strings: this runs for every pod start, and ``pathlib`` would cost more
    than the syscalls."""

    def __init__(self, layout: CgroupLayout) -> None:
        self.layout = layout
        mounts: dict[str, str] = {}
        if layout.version == 1:
            mounts = {controller: str(mount) for controller, mount in layout.mounts.items()}
        if layout.unified is not None:
            mounts[UNIFIED] = str(layout.unified)
        self._mounts = mounts

    # -- addressing -----------------------------------------------------------------------

    def paths(self, literal: str) -> dict[str, str]:
        """Hierarchy → directory of ``literal``: each v1 controller (co-mounted ones share a
        directory) and ``UNIFIED`` for the v2 tree."""
        relative = literal.strip("/")
        if not relative:
            return dict(self._mounts)
        return {key: mount + "/" + relative for key, mount in self._mounts.items()}

    def dirs(self, literal: str) -> list[str]:
        """Each distinct directory of ``literal`` once, v1 trees first."""
        return list(dict.fromkeys(self.paths(literal).values()))

    def missing(self, literal: str, controllers: Iterable[str]) -> list[str]:
        """The directories of ``literal`` that do not exist, among ``controllers``'."""
        paths = self.paths(literal)
        return [paths[c] for c in controllers if c in paths and not os.path.isdir(paths[c])]

    # -- files ---------------------------------------------------------------------------

    def _open_flags(self) -> int:
        return os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC

    def write(self, directory: str, name: str, value: str) -> None:
        path = directory + "/" + name
        try:
            fd = os.open(path, self._open_flags())
            try:
                os.write(fd, value.encode())
            finally:
                os.close(fd)
        except OSError as err:
            raise CgroupError(
                f"failed to write {value!r} to {path}: {err.strerror or err}"
            ) from err

    def read(self, directory: str, name: str) -> str:
        path = directory + "/" + name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                return os.read(fd, 65536).decode().strip()
            finally:
                os.close(fd)
        except OSError as err:
            raise _fail("failed to read", path, err) from err

    def has_file(self, directory: str, name: str) -> bool:
        return os.path.isfile(directory + "/" + name)

    # -- directories ---------------------------------------------------------------------

    def _mkdir(self, path: str) -> None:
        os.mkdir(path, 0o755)

    def _rmdir(self, path: str) -> None:
        os.rmdir(path)

    def create(self, literal: str) -> list[str]:
        """Make ``literal`` (and missing ancestors) in every hierarchy; the new directories.

        v1: the leaf is tried first (its parents usually exist: one mkdir per hierarchy);
        v2: every level is walked, each ancestor offering the root's controllers."""
        created: list[str] = []
        relative = literal.strip("/")
        if not relative:
            return created
        seen: set[str] = set()
        for controller, mount in self._mounts.items():
            if mount in seen:
                continue  # co-mounted controllers share a directory
            seen.add(mount)
            if controller == UNIFIED and self.layout.version == 2:
                self._create_v2(mount, relative.split("/"), created)
            else:
                self._make(mount, mount + "/" + relative, controller == "cpuset", created)
        return created

    def _make(self, mount: str, path: str, cpuset: bool, created: list[str]) -> None:
        try:
            self._mkdir(path)
        except FileExistsError:
            return
        except FileNotFoundError:
            parent = os.path.dirname(path)
            if len(parent) <= len(mount):
                raise _fail("failed to create cgroup", path, FileNotFoundError()) from None
            self._make(mount, parent, cpuset, created)
            self._make(mount, path, cpuset, created)
            return
        except OSError as err:
            raise _fail("failed to create cgroup", path, err) from err
        created.append(path)
        if cpuset:
            self._inherit_cpuset(path)

    def _create_v2(self, mount: str, parts: list[str], created: list[str]) -> None:
        wanted = " ".join("+" + c for c in self.read(mount, CONTROLLERS).split())
        current = mount
        for part in parts:
            if wanted:
                self._enable_controllers(current, wanted)
            current = current + "/" + part
            try:
                self._mkdir(current)
            except FileExistsError:
                continue
            except OSError as err:
                raise _fail("failed to create cgroup", current, err) from err
            created.append(current)

    def _inherit_cpuset(self, path: str) -> None:
        """A v1 cpuset accepts no task until it has cpus and mems: copy the parent's."""
        parent = os.path.dirname(path)
        for name in ("cpuset.cpus", "cpuset.mems"):
            try:
                own = self.read(path, name)
            except CgroupError:
                continue  # not offered (a tree without cpuset files)
            if not own:
                self.write(path, name, self.read(parent, name))

    def _enable_controllers(self, directory: str, wanted: str) -> None:
        """v2: offer the children of ``directory`` the root's controllers (all at once,
        else one by one: one not delegated to us must not hold back the others)."""
        try:
            self.write(directory, SUBTREE_CONTROL, wanted)
        except CgroupError:
            for one in wanted.split():
                # one not delegated to us: the value writes that need it name the failure
                with contextlib.suppress(CgroupError):
                    self.write(directory, SUBTREE_CONTROL, one)

    def children(self, literal: str, *, every_hierarchy: bool = True) -> set[str]:
        """Names of the child cgroups of ``literal`` in any hierarchy.

        With ``every_hierarchy=False`` one hierarchy is listed when each of the others
        counts as many child cgroups (a directory's link count is 2 + its subdirectories,
        in cgroupfs as on disk): one listing instead of one per hierarchy (ten on a v1
        host, most of housekeeping's 3 ms sweep at 500 pods every 2 s). Children that
        differ between hierarchies yet add up to the same counts are seen only by a call
        with every hierarchy."""
        paths = self.dirs(literal)
        if not every_hierarchy and len(paths) > 1:
            links = _link_counts(paths)
            if len(set(links.values())) == 1:
                first, count = next(iter(links.items()))
                names = _subdirectories(first)
                if len(names) + 2 == count:  # else one changed meanwhile: list them all
                    return names
        out: set[str] = set()
        for path in paths:
            out.update(_subdirectories(path))
        return out

    def attach(self, literal: str, pid: int) -> None:
        """Move process ``pid`` into ``literal`` in every hierarchy (libcontainer's
        ``Apply``): the kernel takes it out of wherever it was."""
        for directory in self.dirs(literal):
            self.write(directory, PROCS, str(pid))

    def procs(self, literal: str) -> set[int]:
        """Every process in ``literal`` or below it, in any hierarchy."""
        pids: set[int] = set()
        for top in self.dirs(literal):
            for directory, _subdirs, files in os.walk(top):
                if PROCS not in files:
                    continue
                try:
                    text = self.read(directory, PROCS)
                except CgroupError:
                    continue  # removed meanwhile
                pids.update(int(line) for line in text.split() if line.isdigit())
        return pids

    def remove(self, literal: str) -> list[str]:
        """One attempt at removing ``literal`` everywhere, sub-cgroups first; the
        directories that are still there (busy: a process is still inside)."""
        left = []
        for path in self.dirs(literal):
            with contextlib.suppress(OSError):
                self._remove_tree(path)
            if os.path.exists(path):
                left.append(path)
        return left

    def _remove_tree(self, path: str) -> None:
        try:
            self._rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as err:
            if err.errno not in (errno.EBUSY, errno.ENOTEMPTY, errno.EEXIST):
                raise
        with os.scandir(path) as entries:
            children = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        for child in children:
            self._remove_tree(child)
        self._rmdir(path)
