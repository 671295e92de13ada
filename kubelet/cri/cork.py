"""One socket write per loop step for all the CRI calls in flight, not two per call.

grpclib writes each call's HEADERS frame and then its DATA frame to the transport as two
writes, and asyncio sends each at once: two ``send`` system calls per call, each waking
the runtime's reader. With a hundred calls in flight (a pod ramp) that was most of the
system calls of both processes, and every one of them a chance for the kernel to switch
to the runtime in the middle of the kubelet's batch of callbacks. :class:`CorkedTransport`
collects what the connection writes during one step of the event loop and sends it as
one write from a callback queued behind that step: the bytes and their order are
exactly those grpclib wrote; only how they are cut into writes differs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from grpclib.client import Channel
from grpclib.protocol import H2Protocol


class CorkedTransport:
    """Wraps a connected transport: ``write`` buffers; a callback soon after sends it all.

    Whatever else grpclib asks of the transport passes through; closing sends what is
    buffered first (asyncio's ``close`` itself still sends what its own buffer holds).
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._buffer: list[bytes] = []
        self.writes = 0
        """How many writes reached the real transport (for tests)."""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._buffer:
            self._loop.call_soon(self.flush)
        self._buffer.append(bytes(data))

    def flush(self) -> None:
        """Send what is buffered now (a no-op when empty, or when the transport closed)."""
        if not self._buffer:
            return
        data = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer.clear()
        if not self._transport.is_closing():
            self.writes += 1
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._buffer.clear()
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _CorkedProtocol(H2Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        corked = CorkedTransport(transport, asyncio.get_running_loop())
        super().connection_made(corked)  # type: ignore[arg-type]


class CorkedChannel(Channel):
    """grpclib's ``Channel`` whose connections write through :class:`CorkedTransport`."""

    def _protocol_factory(self) -> H2Protocol:
        base = super()._protocol_factory()
        return _CorkedProtocol(base.handler, base.config, base.h2_config)
