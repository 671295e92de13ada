"""The archive FakeRuntime's CheckpointContainer writes: a tar with ``config.dump``."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Mapping


def write_checkpoint(location: str, config: Mapping[str, str]) -> None:
    """Write the archive at ``location`` (0600, as runtimes keep memory dumps root's)."""
    data = json.dumps(dict(config)).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("config.dump")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    fd = os.open(location, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(buffer.getvalue())
