"""Fixtures shared by every test layer."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio_asyncio


@pytest.fixture
async def aio_loop() -> AsyncIterator[None]:
    """The trio-asyncio loop grpclib needs, open for the whole test (as at the agent's root)."""
    async with trio_asyncio.open_loop():
        yield


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short temporary directory: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="kt-", dir="/tmp"))
    try:
        yield path
    finally:
        unmount_below(path)  # tmpfs volumes of pods a test left running
        shutil.rmtree(path, ignore_errors=True)


def unmount_below(path: Path) -> None:
    """Unmount everything mounted under ``path`` (deepest first)."""
    prefix = str(path) + "/"
    with open("/proc/self/mounts") as fh:
        points = [line.split()[1] for line in fh if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", point], capture_output=True, check=False)
