"""``--lock-file`` and ``--exit-on-lock-contention``: hand a node over between kubelets.

As upstream: the kubelet takes an exclusive ``flock`` on the file before it starts
(waiting while another process holds it) and keeps it until it exits. With
``--exit-on-lock-contention`` it watches the file with inotify and exits (code 0) as soon
as another process opens it, the way a successor asks for the lock, so that a takeover
script (``flock FILE new-kubelet`` or a new kubelet with the same flags) gets the lock
once this one is gone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import struct

import trio

IN_OPEN = 0x00000020
IN_DELETE_SELF = 0x00000400
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class LockError(Exception):
    """The lock file could not be opened or locked."""


def acquire(path: str) -> int:
    """Open ``path`` (created 0600) and flock it exclusively, waiting for a holder to let go.

    The descriptor is returned and meant to stay open for the life of the process: the
    lock goes with it when the process exits.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise LockError(f"unable to acquire file lock on {path!r}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as exc:
        os.close(fd)
        raise LockError(f"unable to acquire file lock on {path!r}: {exc.strerror}") from exc
    return fd


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def watch(path: str) -> int:
    """An inotify descriptor reporting when ``path`` is opened or deleted."""
    libc = _libc()
    fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise LockError(f"inotify_init1: {os.strerror(err)}")
    if libc.inotify_add_watch(fd, os.fsencode(path), IN_OPEN | IN_DELETE_SELF) < 0:
        err = ctypes.get_errno()
        os.close(fd)
        raise LockError(f"watching {path!r}: {os.strerror(err)}")
    return fd


async def wait_for_contention(inotify_fd: int) -> int:
    """Wait for the watched file's first open (or deletion); returns the event's mask."""
    while True:
        await trio.lowlevel.wait_readable(inotify_fd)
        try:
            data = os.read(inotify_fd, 4096)
        except BlockingIOError:
            continue
        if len(data) >= _EVENT.size:
            _, mask, _, _ = _EVENT.unpack_from(data)
            return int(mask)
