"""Fixtures shared by every test layer."""

from __future__ import annotations

import shutil
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
        shutil.rmtree(path, ignore_errors=True)
