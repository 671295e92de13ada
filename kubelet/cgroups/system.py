"""``kubeletCgroups`` and ``systemCgroups``: the kubelet and the host's processes in the
cgroups the administrator named, as upstream's container manager keeps them.

Every minute (and once at start), as upstream's ``ensureStateFunc``s:

- ``kubeletCgroups``: the kubelet's own process, when it runs in the host's PID
  namespace, is moved into that cgroup (made in every hierarchy when missing) unless
  ``/proc/self/cgroup`` already places it there (upstream's
  ``ensureProcessInContainerWithOOMScore``);
- ``systemCgroups``: every process left in the root cgroup, except PID 1 and kernel
  threads (no ``/proc/<pid>/exe``), is moved into that cgroup; up to 11 passes, since
  processes fork meanwhile (upstream's ``ensureSystemCgroups``). The root's members are
  read from the ``devices`` hierarchy on v1 (upstream's ``GetPids``), the v2 tree else.

The kubelet's own ``oom_score_adj`` (``oomScoreAdj``, set once at start-up by
``process.prepare``) is written again as upstream's container manager does, and only
while the kubelet runs in the host's PID namespace: with ``kubeletCgroups``, in the same
minute step as the move; without, on its own at start and every five minutes (upstream's
periodic task). A failure is logged and tried again next time.

Both names are cgroupfs paths whatever the driver, as upstream's ``newSystemCgroups``.
The decisions (which cgroup a process is in, which PIDs to move) are pure; the moves go
through ``CgroupFs.attach``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from .fs import UNIFIED, CgroupError, CgroupFs

__all__ = [
    "MOVE_PASSES",
    "SystemCgroups",
    "cgroup_of",
    "movable",
    "parse_proc_cgroup",
]

log = logging.getLogger(__name__)

MOVE_PASSES = 11
"""Upstream's ``for i := 0; i <= 10; i++``."""
ENSURE_INTERVAL = 60.0
OOM_SCORE_EVERY = 5
"""Minutes between re-applications of the OOM score without ``kubeletCgroups``."""


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` → hierarchy → path: each v1 controller of a line
    (``4:cpu,cpuacct:/x`` gives cpu and cpuacct), ``name=systemd``, and "" for v2."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            out[controller] = path
    return out


def cgroup_of(hierarchies: Mapping[str, str], version: int) -> str:
    """The cgroup a process counts as in (upstream's ``getContainer``): the v2 path; on v1
    the cpu path, which must equal the memory one, or the ``name=systemd`` path when
    systemd keeps one. ``CgroupError`` when cpu and memory differ."""
    if version == 2:
        return hierarchies.get(UNIFIED, "")
    cpu, memory = hierarchies.get("cpu", ""), hierarchies.get("memory", "")
    if cpu != memory:
        raise CgroupError(
            f"cpu and memory cgroup hierarchy not unified.  cpu: {cpu}, memory: {memory}"
        )
    return hierarchies.get("name=systemd", cpu)


def movable(pids: Iterable[int], is_kernel: Callable[[int], bool]) -> list[int]:
    """The PIDs ``systemCgroups`` takes from the root: not 1, not a kernel thread."""
    return [pid for pid in sorted(pids) if pid != 1 and not is_kernel(pid)]


@attrs.define
class SystemCgroups:
    """The minute task's state: which cgroups, where /proc is, which process we are."""

    fs: CgroupFs
    kubelet_cgroups: str = ""
    system_cgroups: str = ""
    proc: Path = Path("/proc")
    own_pid: Callable[[], int] = os.getpid
    oom_score_adj: int | None = None
    """the kubelet's ``oomScoreAdj`` to keep applied; None: left alone"""

    @property
    def wanted(self) -> bool:
        return bool(self.kubelet_cgroups or self.system_cgroups or self.oom_score_adj is not None)

    def _apply_oom_score(self, pid: int, value: int) -> None:
        """``/proc/<pid>/oom_score_adj``, written without creating it (a process that is
        gone has none), as upstream's OOM adjuster."""
        path = self.proc / str(pid) / "oom_score_adj"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, str(value).encode())
            finally:
                os.close(fd)
        except OSError as err:
            raise CgroupError(f"failed to apply oom score {value} to PID {pid}: {err}") from err

    def _read(self, *parts: str) -> str:
        return self.proc.joinpath(*parts).read_text()

    def _in_host_pid_namespace(self, pid: int) -> bool:
        """Upstream's ``isProcessRunningInHost``; its errors name what was unreadable."""
        try:
            init = os.readlink(self.proc / "1/ns/pid")
        except OSError as err:
            raise CgroupError(f"failed to find pid namespace of init process: {err}") from err
        try:
            own = os.readlink(self.proc / f"{pid}/ns/pid")
        except OSError as err:
            raise CgroupError(f'failed to find pid namespace of process "{pid}": {err}') from err
        return init == own

    def _is_kernel(self, pid: int) -> bool:
        try:
            os.readlink(self.proc / f"{pid}/exe")
        except OSError:
            return True
        return False

    def ensure_kubelet(self) -> None:
        """The kubelet's process into ``kubeletCgroups`` unless it is there already, and its
        OOM score applied."""
        pid = self.own_pid()
        if not self._in_host_pid_namespace(pid):  # in a container: left alone, as upstream
            log.debug("PID %d is not running in the host namespace", pid)
            return
        try:
            text = self._read(str(pid), "cgroup")
        except OSError as err:
            text = ""
            log.debug("cannot read /proc/%d/cgroup: %s", pid, err)
        errors = []
        try:
            current = cgroup_of(parse_proc_cgroup(text), self.fs.layout.version)
        except CgroupError as err:  # as upstream: reported, and the move goes ahead
            errors.append(f"failed to find container of PID {pid}: {err}")
            current = ""
        name = "/" + self.kubelet_cgroups.strip("/")
        if current != name:
            try:
                self.fs.create(name)
                self.fs.attach(name, pid)
            except CgroupError as err:
                errors.append(f'failed to move PID {pid} (in "{current}") to "{name}": {err}')
        if self.oom_score_adj is not None:
            try:
                self._apply_oom_score(pid, self.oom_score_adj)
            except CgroupError as err:
                errors.append(str(err))
        if errors:
            raise CgroupError("; ".join(errors))

    def _root_members(self) -> list[int]:
        paths = self.fs.paths("/")
        key = UNIFIED if self.fs.layout.version == 2 else "devices"
        directory = paths.get(key) or next(iter(paths.values()))
        text = self.fs.read(directory, "cgroup.procs")
        return [int(line) for line in text.split() if line.isdigit()]

    def ensure_system(self) -> None:
        """Every non-kernel process of the root cgroup into ``systemCgroups``."""
        name = "/" + self.system_cgroups.strip("/")
        self.fs.create(name)
        failure: CgroupError | None = None
        for _ in range(MOVE_PASSES):
            try:
                pids = movable(self._root_members(), self._is_kernel)
            except CgroupError as err:
                failure = CgroupError(f"failed to list PIDs for root: {err}")
                continue
            if not pids:
                return
            log.debug("Moving non-kernel processes %s", pids)
            for pid in pids:
                try:
                    self.fs.attach(name, pid)
                except CgroupError as err:
                    failure = CgroupError(
                        f'failed to move PID {pid} into the system container "{name}": {err}'
                    )
        if failure is not None:
            raise failure

    def ensure(self) -> list[str]:
        """One round of both; the failures, as upstream logs them ("Failed to ensure
        state") and tries again a minute later."""
        failures = []
        for cgroup, step in (
            (self.system_cgroups, self.ensure_system),
            (self.kubelet_cgroups, self.ensure_kubelet),
        ):
            if not cgroup:
                continue
            try:
                step()
            except CgroupError as err:
                failures.append(f"{cgroup}: {err}")
        return failures

    def ensure_oom_score(self) -> None:
        """Without ``kubeletCgroups``: the kubelet's OOM score alone, when it runs in the
        host's PID namespace (upstream's ``ensureProcessInContainerWithOOMScore`` with no
        cgroup)."""
        pid = self.own_pid()
        if self.oom_score_adj is None or not self._in_host_pid_namespace(pid):
            return
        self._apply_oom_score(pid, self.oom_score_adj)

    async def run(self, offload: Callable[..., Awaitable[Any]]) -> None:
        """At once, then every minute (the OOM score on its own: every fifth minute); a
        failure is logged and tried again next time."""
        minute = 0
        while True:
            if self.kubelet_cgroups or self.system_cgroups:
                failures: list[str] = await offload(self.ensure)
                for failure in failures:
                    log.info("Failed to ensure state: %s", failure)
            if not self.kubelet_cgroups and minute % OOM_SCORE_EVERY == 0:
                try:
                    await offload(self.ensure_oom_score)
                except CgroupError as err:
                    log.error("Failed to ensure process in container with oom score: %s", err)
            minute += 1
            await trio.sleep(ENSURE_INTERVAL)
