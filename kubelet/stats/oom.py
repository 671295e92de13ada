"""Kernel OOM kills from /dev/kmsg: the record format, cAdvisor's OOM rules, the watcher.

/dev/kmsg gives one record per read: "PRIORITY,SEQ,MICROSECONDS_SINCE_BOOT,FLAGS;text",
then optional " KEY=value" lines. cAdvisor's oomparser (which upstream's OOM watcher
reads) recognises a kill as:

1. a line containing "invoked oom-killer:" opens an instance (container "/", victim
   "/", the record's time);
2. the following records are tried in turn: an "oom-kill:constraint=…,oom_memcg=…,
   task_memcg=…,task=NAME,pid=PID,uid=…" line (kernels ≥ 5.0) completes it with the
   constraint, the OOMing cgroup (the victim container: cAdvisor's current pattern takes
   it up to a space, its older one up to the comma; both are read), the killed task's
   cgroup, name and pid (a machine-wide kill writes "global_oom" instead of oom_memcg,
   which this line does not match); a legacy "Task in X killed as a result of limit
   of Y" line sets the two cgroups and goes on; a "Killed process PID (NAME)" line completes it;
3. the completed instance takes the completing record's time.

Upstream records a ``SystemOOM`` node event only when the victim container is "/" (the
whole machine ran out, not a container's limit): "System OOM encountered, victim
process: NAME, pid: PID". We add ", pod: NAMESPACE/NAME" when the killed task's cgroup
names a pod the kubelet knows. Unlike cAdvisor, the watcher starts at the end of the
log, so a restarted kubelet does not report old kills again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Iterator

import attrs
import trio

from .boot import boot_time

__all__ = [
    "SYSTEM_OOM",
    "KmsgRecord",
    "OomInstance",
    "OomParser",
    "parse_records",
    "pod_uid_of_cgroup",
    "system_oom_message",
    "watch_kmsg",
]

SYSTEM_OOM = "SystemOOM"

_FIRST = re.compile(r"invoked oom-killer:")
_FIRST_BYTES = b"invoked oom-killer:"
"""what a read must hold for an idle parser to look at it (``watch_kmsg``)"""
_CONTAINER = re.compile(
    r"oom-kill:constraint=(.*),nodemask=(.*),cpuset=(.*),mems_allowed=(.*),"
    r"oom_memcg=([^ ]*?)(?: (.*))?,task_memcg=(.*),task=(.*),pid=(.*),uid=(.*)"
)
_LEGACY = re.compile(r"Task in (.*) killed as a result of limit of (.*)")
_LAST = re.compile(r"Killed process ([0-9]+) \((.+)\)")
_TASK_MEMCG = re.compile(r"oom-kill:.*\btask_memcg=([^,\n]*)")
_POD_UID = re.compile(
    r"pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})"
)


@attrs.frozen
class KmsgRecord:
    priority: int
    sequence: int
    time: float
    """seconds since the epoch (boot time + the record's offset)"""
    message: str


def parse_records(data: str, boot_time: float) -> Iterator[KmsgRecord]:
    """Records in ``data`` (one read of /dev/kmsg, or several joined); bad ones are skipped.

    A line starting with a space continues the record before it (its key=value lines).
    """
    current: list[str] = []

    def finish() -> KmsgRecord | None:
        if not current:
            return None
        header, sep, text = current[0].partition(";")
        fields = header.split(",")
        if not sep or len(fields) < 3:
            return None
        try:
            prio, seq, usec = int(fields[0]), int(fields[1]), int(fields[2])
        except ValueError:
            return None
        body = "\n".join([text, *current[1:]])
        return KmsgRecord(prio, seq, boot_time + usec / 1e6, body)

    for line in data.split("\n"):
        if line.startswith(" ") and current:
            current.append(line)
            continue
        record = finish()
        if record is not None:
            yield record
        current = [line] if line else []
    record = finish()
    if record is not None:
        yield record


def _join(path: str) -> str:
    """Go's ``path.Join("/", p)``: cleaned and absolute."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


@attrs.frozen
class OomInstance:
    pid: int = 0
    process_name: str = ""
    time: float = 0.0
    container: str = "/"
    """the cgroup of the killed task"""
    victim_container: str = "/"
    """the cgroup that ran out of memory ("/": the whole machine)"""
    constraint: str = ""
    task_cgroup: str = ""
    """task_memcg of a kernel's oom-kill line, also for a machine-wide kill (pod lookup)"""


class OomParser:
    """Feeds records in order; returns an instance when a kill is complete."""

    def __init__(self) -> None:
        self._current: OomInstance | None = None

    @property
    def idle(self) -> bool:
        """No kill under way: only a record matching ``_FIRST`` can change that."""
        return self._current is None

    def feed(self, record: KmsgRecord) -> OomInstance | None:
        line = record.message
        if self._current is None:
            if _FIRST.search(line):
                self._current = OomInstance(time=record.time)
            return None
        current = self._current
        task = _TASK_MEMCG.search(line)
        if task is not None:
            current = attrs.evolve(current, task_cgroup=task.group(1))
        match = _CONTAINER.search(line)
        if match is not None:
            try:
                pid = int(match.group(9))
            except ValueError:
                pid = current.pid
            done = attrs.evolve(
                current,
                container=match.group(7),
                victim_container=match.group(5),
                constraint=match.group(1),
                pid=pid,
                process_name=match.group(8),
                time=record.time,
            )
            self._current = None
            return done
        legacy = _LEGACY.search(line)
        if legacy is not None:
            current = attrs.evolve(
                current, container=_join(legacy.group(1)), victim_container=_join(legacy.group(2))
            )
        last = _LAST.search(line)
        if last is not None:
            self._current = None
            return attrs.evolve(
                current, pid=int(last.group(1)), process_name=last.group(2), time=record.time
            )
        self._current = current
        return None


def pod_uid_of_cgroup(path: str) -> str | None:
    """The pod UID in a cgroup path (cgroupfs ``pod<uid>`` or systemd ``pod<uid_>.slice``)."""
    match = _POD_UID.search(path)
    return match.group(1).replace("_", "-") if match else None


def system_oom_message(instance: OomInstance, pod: str | None = None) -> str | None:
    """The ``SystemOOM`` event text, or None when it was a container's own limit."""
    if instance.victim_container != "/":
        return None
    message = "System OOM encountered"
    if instance.process_name and instance.pid:
        message += f", victim process: {instance.process_name}, pid: {instance.pid}"
    if pod:
        message += f", pod: {pod}"
    return message


async def watch_kmsg(
    on_kill: Callable[[OomInstance], None],
    path: str = "/dev/kmsg",
    *,
    from_start: bool = False,
    boot: float | None = None,
) -> None:
    """Read kernel records until cancelled; call ``on_kill`` for each completed OOM kill.

    The file is read without blocking the event loop (``wait_readable``). An overrun
    (EPIPE: records were overwritten before we read them) is skipped, as upstream does.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not from_start:
            with contextlib.suppress(OSError):  # not seekable: a pipe in tests
                os.lseek(fd, 0, os.SEEK_END)
        parser = OomParser()
        started = boot if boot is not None else (boot_time() or 0.0)
        while True:
            try:
                data = os.read(fd, 8192)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                continue
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue
                raise
            if not data:
                return
            if parser.idle and _FIRST_BYTES not in data:
                continue  # the common case: a record no kill starts with, not decoded
            for record in parse_records(data.decode("utf-8", "replace"), started):
                done = parser.feed(record)
                if done is not None:
                    on_kill(done)
    finally:
        os.close(fd)
