"""Read a static pod path without trusting what is in it: blocking, run off the event loop.

Only regular files are read, a symlink to one included (upstream's file source follows
symlinks). Anything else in the directory (a FIFO, a socket, a device, a directory,
directly or through a symlink) is skipped, as upstream skips it, and never opened: a
FIFO opened for reading blocks until a writer comes, and a device may do anything. A
file swapped for one of those between the ``stat`` and the ``open`` cannot hang either:
it is opened with ``O_NONBLOCK`` and checked again on the open descriptor.

A file whose bytes are the same as at the previous scan is not decoded again, whether
it gave a pod or an error: the caller passes the digests it knows. Nothing here logs
or keeps state; :class:`~kubelet.sources.file.FileSource` does, on the event loop.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from .errors import ManifestError
from .limits import MAX_CONFIG_LENGTH, too_large
from .static import Loaded

Decode = Callable[[bytes, str], Loaded]
"""``(data, path)`` → the pods of one manifest, or :class:`ManifestError`."""


@attrs.frozen
class Unchanged:
    """The same bytes as last time: not decoded again."""

    digest: bytes


@attrs.frozen
class Decoded:
    digest: bytes
    loaded: Loaded


@attrs.frozen
class Failed:
    error: ManifestError
    digest: bytes | None = None
    """Of the bytes that failed; None when nothing was read (it is tried again)."""


@attrs.frozen
class Skipped:
    """Not a regular file: never read. ``what`` says what it is instead."""

    what: str


@attrs.frozen
class Gone:
    """Removed between the listing and the reading."""


FileResult = Unchanged | Decoded | Failed | Skipped | Gone


@attrs.frozen
class Scan:
    """What the path holds now."""

    files: dict[str, FileResult] | None
    """By path, in name order; None when nothing can be said (see ``problem``)."""
    problem: str | None = None
    """What is wrong with the path itself, e.g. "does not exist; no static pods"."""
    level: int = logging.INFO


def scan_path(path: Path, known: Mapping[str, bytes], decode: Decode) -> Scan:
    """The manifests under ``path`` (a directory, or one file); blocking.

    ``known`` maps each path to the digest of the bytes last decoded from it.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        return Scan({}, "does not exist; no static pods")
    except OSError as exc:
        return Scan(None, f"cannot be read: {exc}", logging.ERROR)
    if stat.S_ISDIR(info.st_mode):
        try:
            names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        except OSError as exc:
            return Scan(None, f"cannot be listed: {exc}", logging.ERROR)
        paths = [str(path / n) for n in names]
    elif stat.S_ISREG(info.st_mode):
        paths = [str(path)]
    else:
        return Scan(
            None, f"is {_what(info.st_mode)}, not a directory or a regular file", logging.ERROR
        )
    return Scan({p: read_manifest(p, known.get(p), decode) for p in paths})


def read_files(
    paths: Sequence[str], known: Mapping[str, bytes], decode: Decode
) -> dict[str, FileResult]:
    """Just these manifest files (the ones an inotify event named); blocking."""
    return {p: read_manifest(p, known.get(p), decode) for p in paths}


def read_manifest(path: str, known: bytes | None, decode: Decode) -> FileResult:
    """One manifest file: skipped, unchanged, decoded or failed; blocking."""
    try:
        info = _stat(path)
    except FileNotFoundError:
        return Skipped("a symlink to nothing") if os.path.islink(path) else Gone()
    except OSError as exc:
        return Failed(ManifestError(path, None, f"cannot read: {exc}"))
    if not stat.S_ISREG(info.st_mode):
        return Skipped(_what(info.st_mode, path))
    try:
        data = _read_regular(path)
    except FileNotFoundError:
        return Gone()
    except _NotRegular as exc:
        return Skipped(f"{exc} (it was replaced while being read)")
    except ManifestError as exc:
        return Failed(exc)
    except OSError as exc:
        return Failed(ManifestError(path, None, f"cannot read: {exc}"))
    digest = hashlib.blake2b(data, digest_size=16).digest()
    if digest == known:
        return Unchanged(digest)
    try:
        return Decoded(digest, decode(data, path))
    except ManifestError as exc:
        return Failed(exc, digest)
    except Exception as exc:  # a bug must not take the other pods down with this file
        reason = f"internal error while decoding: {type(exc).__name__}: {exc}"
        return Failed(ManifestError(path, None, reason), digest)


_stat = os.stat
"""Follows symlinks (a test swaps the file for a FIFO right after it)."""

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class _NotRegular(Exception):
    pass


def _read_regular(path: str) -> bytes:
    """The bytes of ``path`` if it is still a regular file of at most 10 MiB."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular(_what(info.st_mode))
        if info.st_size > MAX_CONFIG_LENGTH:
            raise ManifestError(path, None, too_large(info.st_size))
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONFIG_LENGTH:
            want = max(info.st_size + 1 - size, 65536)  # the whole file, and its end
            chunk = os.read(fd, min(want, MAX_CONFIG_LENGTH + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_CONFIG_LENGTH:  # it grew while being read
            raise ManifestError(path, None, too_large(size))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _what(mode: int, path: str | None = None) -> str:
    """What a non-regular file is, for the log line; ``path`` to say if a symlink led there."""
    if stat.S_ISDIR(mode):
        what = "a directory (not recursing into it)"
    elif stat.S_ISFIFO(mode):
        what = "a FIFO"
    elif stat.S_ISSOCK(mode):
        what = "a socket"
    elif stat.S_ISCHR(mode):
        what = "a character device"
    elif stat.S_ISBLK(mode):
        what = "a block device"
    else:
        what = f"not a regular file (mode {stat.filemode(mode)})"
    if path is not None and os.path.islink(path):
        what += ", through a symlink"
    return what
