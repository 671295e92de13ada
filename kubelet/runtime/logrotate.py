"""Container log rotation: ``containerLogMaxSize`` × ``containerLogMaxFiles``, as upstream.

Every ``containerLogMonitorInterval`` the running containers' log files are checked
(``containerLogMaxWorkers`` at a time). A file at or above the size limit is rotated:

1. leftovers of an interrupted rotation go (``*.tmp``, and plain files whose ``.gz``
   exists);
2. the oldest rotated files go until at most ``maxFiles - 2`` remain (the live file
   and the one about to be rotated make ``maxFiles``);
3. older rotated files are gzip-compressed (``<log>.<stamp>.gz``);
4. the live file is renamed ``<log>.<YYYYmmdd-HHMMSS>`` (left uncompressed: the runtime
   may still be writing its last line, and log shippers finish reading it) and the
   runtime is told to reopen its log (CRI ``ReopenContainerLog``); if it cannot, the
   rename is undone so the next round tries again.

A log file that vanished is recreated through ``ReopenContainerLog``. A negative size
disables rotation. Compression runs in a worker thread and takes only regular files.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import logging
import os
import shutil
import time
from collections.abc import Callable

import trio

from kubelet.api import to_bytes
from kubelet.boundedio import InputRefused, open_regular_file
from kubelet.cri import CriError, RuntimeClient, api

log = logging.getLogger(__name__)

STAMP_FORMAT = "%Y%m%d-%H%M%S"
COMPRESS_SUFFIX = ".gz"
TMP_SUFFIX = ".tmp"


class LogRotateConfigError(ValueError):
    """``containerLogMaxFiles`` ≤ 1 or an unparsable ``containerLogMaxSize``."""


def parse_max_size(size: str | int) -> int:
    try:
        return to_bytes(size)
    except (ValueError, TypeError) as exc:
        raise LogRotateConfigError(f"invalid containerLogMaxSize {size!r}: {exc}") from exc


def in_use(logs: list[str]) -> tuple[list[str], list[str]]:
    """(in use, leftovers): temporary files and plain files already compressed are leftovers."""
    names = set(logs)
    used: list[str] = []
    unused: list[str] = []
    for name in logs:
        leftover = name.endswith(TMP_SUFFIX) or (
            not name.endswith(COMPRESS_SUFFIX) and name + COMPRESS_SUFFIX in names
        )
        (unused if leftover else used).append(name)
    return used, unused


def compress(path: str) -> None:
    """``path`` → ``path.gz`` through a temporary file; the original goes afterwards.

    Only a regular file (not a link to one) is compressed, else ``InputRefused``: a FIFO
    would hold the worker thread, and the rotation, until someone wrote to it.
    """
    tmp = path + COMPRESS_SUFFIX + TMP_SUFFIX
    src = os.fdopen(open_regular_file(path, follow_symlinks=False), "rb")
    try:
        with src, gzip.open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
            mode = os.fstat(src.fileno()).st_mode
        os.chmod(tmp, mode & 0o777)
        os.replace(tmp, path + COMPRESS_SUFFIX)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    os.unlink(path)


class ContainerLogManager:
    """Rotates running containers' logs; run ``run`` in the agent's nursery."""

    def __init__(
        self,
        runtime: RuntimeClient,
        max_size: str | int = "10Mi",
        max_files: int = 5,
        *,
        monitor_interval: float = 10.0,
        max_workers: int = 1,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if max_files <= 1:
            raise LogRotateConfigError(f"invalid containerLogMaxFiles {max_files}, must be > 1")
        self.runtime = runtime
        self.max_size = parse_max_size(max_size)
        self.max_files = max_files
        self.monitor_interval = monitor_interval
        self._limiter = trio.CapacityLimiter(max(1, max_workers))
        self._wall_clock = wall_clock
        self._paths: dict[str, str] = {}
        """Container ID → its log path: set when the container is created and never changed,
        so asked of the runtime (ContainerStatus) once, not every round for every container."""

    @property
    def enabled(self) -> bool:
        return self.max_size >= 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Check every ``monitor_interval`` until cancelled (returns at once if disabled)."""
        task_status.started()
        if not self.enabled:
            return
        while True:
            try:
                await self.rotate_all()
            except CriError as exc:
                log.warning("Failed to rotate container logs: %s", exc)
            await trio.sleep(self.monitor_interval)

    async def rotate_all(self) -> None:
        """One round over the running containers."""
        containers = await self.runtime.list_containers(state=api.CONTAINER_RUNNING)
        running = {c.id for c in containers}
        self._paths = {cid: path for cid, path in self._paths.items() if cid in running}
        async with trio.open_nursery() as nursery:
            for c in containers:
                if self._may_need_work(c.id):
                    nursery.start_soon(self._process, c.id)

    def _may_need_work(self, container_id: str) -> bool:
        """False for a container whose log is known and below the limit: one ``stat`` on
        the loop instead of a task per running container every round."""
        path = self._paths.get(container_id)
        if path is None:
            return True
        if not path:
            return False
        try:
            return os.stat(path).st_size >= self.max_size
        except OSError:  # gone (reopened by the task) or unreadable (logged by it)
            return True

    async def _process(self, container_id: str) -> None:
        async with self._limiter:
            try:
                await self.process(container_id)
            except (CriError, OSError) as exc:
                log.warning("Failed to rotate log of container %s: %s", container_id[:13], exc)

    async def process(self, container_id: str) -> bool:
        """Rotate one container's log if it is too big; True if it was rotated."""
        path = self._paths.get(container_id)
        if path is None:
            path = (await self.runtime.container_status(container_id)).status.log_path
            self._paths[container_id] = path
        if not path:
            return False
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            await self.runtime.reopen_container_log(container_id)
            size = os.stat(path).st_size
        if size < self.max_size:
            return False
        await self.rotate(container_id, path)
        return True

    async def rotate(self, container_id: str, path: str) -> None:
        logs = glob.glob(glob.escape(path) + ".*")
        logs, leftovers = in_use(logs)
        for name in leftovers:
            os.unlink(name)
        logs.sort()
        keep = max(self.max_files - 2, 0)
        cut = max(len(logs) - keep, 0)
        excess, logs = logs[:cut], logs[cut:]
        for name in excess:
            os.unlink(name)
        for name in logs:
            if not name.endswith(COMPRESS_SUFFIX):
                try:
                    await trio.to_thread.run_sync(compress, name)
                except InputRefused as exc:
                    log.warning("Not compressing rotated container log: %s", exc)
        rotated = f"{path}.{time.strftime(STAMP_FORMAT, time.localtime(self._wall_clock()))}"
        os.rename(path, rotated)
        try:
            await self.runtime.reopen_container_log(container_id)
        except CriError:
            os.rename(rotated, path)  # try again next round rather than lose the log
            raise
        log.debug("rotated %s to %s", path, rotated)

    async def clean(self, container_id: str) -> None:
        """Remove every log file of a container (live and rotated)."""
        path = (await self.runtime.container_status(container_id)).status.log_path
        if not path:
            return
        for name in glob.glob(glob.escape(path) + "*"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
