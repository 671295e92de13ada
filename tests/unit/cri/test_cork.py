"""kubelet.cri.cork: what the connection writes in one loop step leaves as one write."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio_asyncio

from kubelet.cri import aioloop
from kubelet.cri.cork import CorkedChannel, CorkedTransport


class RecordingTransport:
    """The bits of an asyncio transport CorkedTransport uses; records every write."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closing = False
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing or self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": "runtime.sock"}.get(name, default)


@pytest.fixture
async def loop() -> AsyncIterator[asyncio.AbstractEventLoop]:
    aioloop.install()
    async with trio_asyncio.open_loop() as opened:
        yield opened


def corked(loop: asyncio.AbstractEventLoop) -> tuple[CorkedTransport, RecordingTransport]:
    real = RecordingTransport()
    return CorkedTransport(real, loop), real  # type: ignore[arg-type]


async def test_the_writes_of_one_step_leave_as_one_in_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    transport, real = corked(loop)
    transport.write(b"HEADERS-1 ")
    transport.write(bytearray(b"DATA-1 "))
    transport.write(b"")  # nothing to send: no write of its own
    transport.write(memoryview(b"HEADERS-2"))
    assert real.written == []  # not before the step that wrote has ended
    await trio.testing.wait_all_tasks_blocked()
    assert real.written == [b"HEADERS-1 DATA-1 HEADERS-2"]
    assert transport.writes == 1
    transport.write(b"later")
    await trio.testing.wait_all_tasks_blocked()
    assert real.written == [b"HEADERS-1 DATA-1 HEADERS-2", b"later"]


async def test_nothing_written_sends_nothing(loop: asyncio.AbstractEventLoop) -> None:
    transport, real = corked(loop)
    transport.write(b"")
    transport.flush()
    await trio.testing.wait_all_tasks_blocked()
    assert real.written == [] and transport.writes == 0


async def test_close_sends_what_is_buffered_first(loop: asyncio.AbstractEventLoop) -> None:
    transport, real = corked(loop)
    transport.write(b"RST_STREAM")
    transport.close()
    assert real.written == [b"RST_STREAM"] and real.closed
    await trio.testing.wait_all_tasks_blocked()  # the queued flush finds nothing left
    assert real.written == [b"RST_STREAM"]


async def test_a_closing_transport_is_not_written_to(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio's own transport only logs a warning for a write after close; the bytes
    have nowhere to go either way."""
    transport, real = corked(loop)
    transport.write(b"late")
    real.closing = True
    await trio.testing.wait_all_tasks_blocked()
    assert real.written == []
    transport.write(b"x")
    transport.abort()
    await trio.testing.wait_all_tasks_blocked()
    assert real.aborted and real.written == []


async def test_the_rest_passes_through(loop: asyncio.AbstractEventLoop) -> None:
    transport, real = corked(loop)
    assert transport.get_extra_info("peername") == "runtime.sock"
    assert transport.get_extra_info("socket", "none") == "none"
    assert not transport.is_closing()
    real.closing = True
    assert transport.is_closing()


async def test_the_cri_channel_connects_corked(loop: asyncio.AbstractEventLoop) -> None:
    from kubelet.cri import CriChannel

    channel = CriChannel("unix:///nonexistent/cri.sock")
    assert isinstance(channel.channel(), CorkedChannel)
    channel.close()
