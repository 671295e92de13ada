"""Replace a file whole or not at all: the kubelet's checkpoints and state files.

A checkpoint read back after a crash must be either the old one or the new one, never a
torn mix: the data goes to a new file beside the target (created exclusively, never
through a symbolic link), is flushed to disk, and is renamed over the target. A failed
write leaves the target as it was and no temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets

__all__ = ["replace_file"]


def replace_file(path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` as ``path`` atomically (its directory made if missing)."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
