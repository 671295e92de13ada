"""``fileKeyRef`` env files, read from the pod's emptyDir without ever leaving it.

The file is in a volume the pod's containers write, so what its path names is theirs to
choose, up to the moment the kubelet opens it: a symlink to ``/etc/shadow``, a
directory swapped for a link between a check and an open, a FIFO that blocks a reader
forever, a file of gigabytes. So, where upstream joins the path inside the volume and
opens the result:

* the path is walked from the volume root one component at a time, each opened with
  ``O_NOFOLLOW | O_PATH`` (the subPath walk, creating nothing here); a symlink is
  followed by the walk only while it stays inside the volume;
* what the walk ends on must be a regular file; that very file (its descriptor, not its
  path) is reopened non-blocking for reading, checked to be the same inode, and at most
  ``MAX_ENV_FILE_BYTES + 1`` bytes are read (the parser refuses anything longer).

Whatever goes wrong is upstream's "couldn't parse env file" for the user, the reason in
the log. The volume must be one of the pod's emptyDirs that is set up (some container
mounts it), as upstream's API validation and volume manager have it.
"""

from __future__ import annotations

import logging
import os
import stat

from kubelet.api import Pod
from kubelet.env import (
    CREATE_CONTAINER_CONFIG_ERROR,
    MAX_ENV_FILE_BYTES,
    UNPARSABLE_ENV_FILE,
    EnvError,
)
from kubelet.goformat import go_quote

from .manager import PodVolumes
from .subpath import UnsafeSubPath, open_in_volume

__all__ = ["PodEnvFiles", "read_in_volume"]

log = logging.getLogger(__name__)

_O_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def read_in_volume(volume: str, path: str, limit: int) -> bytes:
    """The first ``limit + 1`` bytes (at most) of the regular file ``<volume>/<path>``,
    reached without leaving the volume and without creating anything.

    Raises UnsafeSubPath (the path leaves the volume, is missing, or is not a regular
    file) or OSError.
    """
    fd = open_in_volume(volume, path, create=False)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise UnsafeSubPath(f"{path!r} is not a regular file")
        # the walk's descriptor, reopened: the inode it checked, whatever the path is now
        reader = os.open(f"/proc/self/fd/{fd}", _O_READ)
    finally:
        os.close(fd)
    try:
        opened = os.fstat(reader)
        if (opened.st_dev, opened.st_ino) != (found.st_dev, found.st_ino):
            raise UnsafeSubPath(f"{path!r} changed while it was opened")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(reader, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(reader)


class PodEnvFiles:
    """``kubelet.env.variables.EnvFiles`` for one pod: its emptyDir volumes as set up."""

    def __init__(self, pod: Pod, volumes: PodVolumes | None) -> None:
        self.pod = pod
        self.paths = dict(volumes.paths) if volumes is not None else {}

    def read(self, volume: str, path: str) -> tuple[str, bytes]:
        """The env file's path on the node and (at most a byte over the limit of) its
        content; EnvError (CreateContainerConfigError) when it cannot be had."""
        source = next((v for v in self.pod.spec.volumes if v.name == volume), None)
        root = self.paths.get(volume)
        if source is None or root is None:
            raise _fail(f"cannot find the volume {go_quote(volume)} referenced by FileKeyRef")
        if source.empty_dir is None:
            raise _fail(f"volume {go_quote(volume)} referenced by FileKeyRef is not an emptyDir")
        where = os.path.normpath(os.path.join(root, path))
        try:
            return where, read_in_volume(root, path, MAX_ENV_FILE_BYTES)
        except (UnsafeSubPath, OSError) as exc:
            log.error("Failed to read env file %s of pod %s: %s", where, self.pod.key, exc)
            raise _fail(UNPARSABLE_ENV_FILE) from exc


def _fail(message: str) -> EnvError:
    return EnvError(CREATE_CONTAINER_CONFIG_ERROR, message)
