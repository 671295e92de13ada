"""Termination messages: the file a container writes its last words to, read after exit.

Before a container with a ``terminationMessagePath`` is created, the kubelet creates an
empty, world-writable file ``<root>/pods/<uid>/containers/<container>/<8 hex>`` (one per
instance) and mounts it at that path (``create_message_file`` + ``message_mount``).
After the container exited, ``termination_message`` builds what the API status shows:

- the runtime's own message (e.g. containerd's reason text), then ``": "``, then
- the last 4 KiB of the file (``MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH``), or — with
  policy ``FallbackToLogsOnError``, a non-zero exit, and an empty or missing file — the
  last 80 lines of the container's CRI log (partial lines joined) cut to their last
  2 KiB.

``truncate_for_pod`` applies the pod-wide cap the status manager enforces: 12 KiB
shared evenly by all (init) containers. Reading is blocking file I/O: the functions are
synchronous; ``termination_message_async`` runs them in a worker thread. The log is read
only if it is a regular file (a FIFO there would hold the thread until someone wrote to
it), and at most its last 4 MiB.
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Iterable
from typing import Protocol

from kubelet.api import Container, Pod
from kubelet.boundedio import InputRefused, in_thread, open_regular_file
from kubelet.cri import cri_api_pb2 as api
from kubelet.cri.logformat import parse_line
from kubelet.goformat import go_quote

from . import labels
from .types import ContainerInfo

__all__ = [
    "DEFAULT_TERMINATION_MESSAGE_PATH",
    "MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH",
    "MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LENGTH",
    "MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LINES",
    "MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH",
    "POLICY_FALLBACK_TO_LOGS_ON_ERROR",
    "POLICY_FILE",
    "create_message_file",
    "host_path_of",
    "message_mount",
    "pod_container_dir",
    "read_log_tail",
    "read_message_file",
    "termination_message",
    "termination_message_async",
    "truncate_for_pod",
]

MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH = 4 * 1024
MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LENGTH = 2 * 1024
MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LINES = 80
MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH = 12 * 1024

DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
POLICY_FILE = "File"
POLICY_FALLBACK_TO_LOGS_ON_ERROR = "FallbackToLogsOnError"

_READ_BLOCK = 64 * 1024
_MAX_TAIL_READ = 4 << 20
"""How far back from its end a log is read for its last lines (80 lines of a log
rotated at 10 MiB fit many times; one endless line does not hold the node's memory)."""


class MountLike(Protocol):
    """A CRI mount as ContainerStatus reports it (``api.Mount`` fits)."""

    @property
    def container_path(self) -> str: ...
    @property
    def host_path(self) -> str: ...


# -- before the container starts ------------------------------------------------------------


def pod_container_dir(root_dir: str, pod_uid: str, container_name: str) -> str:
    """``<root>/pods/<uid>/containers/<container>``: per-container kubelet data."""
    return os.path.join(root_dir, "pods", pod_uid, "containers", container_name)


def create_message_file(
    root_dir: str, pod_uid: str, container_name: str, *, rng: random.Random | None = None
) -> str:
    """Create the (empty, mode 0666) file for one container instance; its host path.

    Raises ``OSError``; upstream then starts the container without the mount.
    """
    directory = pod_container_dir(root_dir, pod_uid, container_name)
    # containers/ too is 0750 (upstream's MkdirAll gives every new level the mode)
    os.makedirs(os.path.dirname(directory), mode=0o750, exist_ok=True)
    os.makedirs(directory, mode=0o750, exist_ok=True)
    name = f"{(rng or random).getrandbits(32):08x}"
    path = os.path.join(directory, name)
    with open(path, "wb"):
        pass
    os.chmod(path, 0o666)  # whatever the umask, any container user can write it
    return path


def message_mount(container: Container, host_path: str) -> api.Mount:
    """The CRI mount of the message file at the container's terminationMessagePath."""
    return api.Mount(container_path=container.termination_message_path, host_path=host_path)


def host_path_of(mounts: Iterable[MountLike], container_path: str) -> str | None:
    """Where the runtime mounted ``container_path`` from (ContainerStatus.mounts)."""
    for mount in mounts:
        if mount.container_path == container_path:
            return mount.host_path
    return None


# -- after it exited ------------------------------------------------------------------------


def _tail_bytes(path: str, limit: int) -> bytes:
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(size - limit, 0))
        return fh.read(limit)


def read_message_file(host_path: str) -> tuple[str, bool]:
    """(the file's last 4 KiB, whether it was missing). A read error becomes the
    message itself, as upstream reports it."""
    try:
        data = _tail_bytes(host_path, MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH)
    except FileNotFoundError:
        return "", True
    except OSError as exc:
        return (
            f"Error on reading termination log {host_path}: {_go_os_error(exc, host_path)}",
            False,
        )
    return data.decode("utf-8", "replace"), False


def _last_lines(path: str, count: int) -> list[bytes]:
    """The last ``count`` newline-terminated records of a file, read from its end: at
    most ``_MAX_TAIL_READ`` bytes of it (a longer record counts as cut). Only a regular
    file, not a link: ``InputRefused`` for anything else."""
    fd = open_regular_file(path, follow_symlinks=False)
    try:
        pos = os.fstat(fd).st_size
        blocks: list[bytes] = []
        newlines = read = 0
        while pos > 0 and newlines <= count and read < _MAX_TAIL_READ:
            step = min(_READ_BLOCK, pos)
            pos -= step
            blocks.append(os.pread(fd, step, pos))
            newlines += blocks[-1].count(b"\n")
            read += step
    finally:
        os.close(fd)
    lines = b"".join(reversed(blocks)).split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if pos > 0:
        lines = lines[1:]  # the first one may be cut
    return lines[-count:] if count > 0 else []


def read_log_tail(
    log_path: str,
    lines: int = MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LINES,
    max_bytes: int = MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LENGTH,
) -> str:
    """The end of a CRI log as ``kubectl logs --tail`` would print it (both streams,
    partial lines joined), then cut to its last ``max_bytes`` bytes."""
    try:
        records = _last_lines(log_path, lines)
    except (OSError, InputRefused) as exc:
        why = (
            _go_os_error(exc, log_path)
            if isinstance(exc, OSError)
            else str(exc).removeprefix(f"{log_path}: ")
        )
        reason = f"failed to open log file {go_quote(log_path)}: {why}"
        return f"Error on reading termination message from logs: {reason}"
    out = bytearray()
    for record in records:
        try:
            line = parse_line(record)
        except ValueError:
            continue  # a malformed line is skipped, as upstream's reader does
        out += line.message
        if not line.partial:
            out += b"\n"
    return bytes(out[-max_bytes:]).decode("utf-8", "replace")


def termination_message(
    info: ContainerInfo,
    host_path: str | None,
    *,
    path: str | None = None,
    policy: str | None = None,
) -> str:
    """The message the API status shows for an exited container.

    ``host_path``: where the message file is on the host (None: no file was mounted).
    ``path``/``policy``: the container's terminationMessagePath/Policy; by default read
    from the container's annotations, so adopted containers work without their spec.
    """
    if path is None:
        path = info.annotations.get(labels.CONTAINER_TERMINATION_MESSAGE_PATH, "")
    if policy is None:
        policy = info.annotations.get(labels.CONTAINER_TERMINATION_MESSAGE_POLICY, POLICY_FILE)
    fallback = (
        policy == POLICY_FALLBACK_TO_LOGS_ON_ERROR
        and info.exit_code != 0
        and info.reason != "ContainerCannotRun"
    )
    text, check_logs = "", fallback
    if path and host_path:
        text, missing = read_message_file(host_path)
        check_logs = fallback and (missing or not text)
    if check_logs:
        text = read_log_tail(info.log_path) if info.log_path else ""
    if not text:
        return info.message
    return f"{info.message}: {text}" if info.message else text


async def termination_message_async(
    info: ContainerInfo,
    host_path: str | None,
    *,
    path: str | None = None,
    policy: str | None = None,
) -> str:
    """``termination_message`` in a worker thread (it reads files) that a cancellation
    abandons: a shutdown never waits for a slow disk."""
    return await in_thread(lambda: termination_message(info, host_path, path=path, policy=policy))


def truncate_for_pod(message: str, pod: Pod) -> str:
    """The pod-wide cap: 12 KiB shared evenly by its containers and init containers,
    keeping the start of each message (the status manager's ``normalizeStatus``)."""
    containers = len(pod.spec.containers) + len(pod.spec.init_containers)
    budget = MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH // max(containers, 1)
    data = message.encode("utf-8")
    if len(data) <= budget:
        return message
    return data[:budget].decode("utf-8", "ignore")


def _go_os_error(exc: OSError, path: str) -> str:
    """``open <path>: no such file or directory``, as Go prints a PathError."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EISDIR:
        reason = "is a directory"
    return f"open {path}: {reason[:1].lower()}{reason[1:]}"
