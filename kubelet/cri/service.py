"""What RuntimeClient and ImageClient share: a channel, a stub, per-call deadlines."""

from __future__ import annotations

from typing import Any

from .channel import CriChannel

DEFAULT_REQUEST_TIMEOUT = 120.0
"""Upstream's runtimeRequestTimeout default (2 min): the deadline of ordinary CRI calls."""

_DEFAULT = object()


class ServiceClient:
    """Base of the trio-facing CRI clients: holds the channel and a lazily built stub."""

    _stub_type: Any = None

    def __init__(
        self, channel: CriChannel, *, request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    ) -> None:
        self.channel = channel
        self.request_timeout = request_timeout
        self._stub: Any = None

    async def _unary(self, rpc: str, request: Any, timeout: Any = _DEFAULT) -> Any:
        """Call ``rpc`` with the request timeout unless another ``timeout`` is given."""
        if self._stub is None:
            self._stub = self._stub_type(self.channel.channel())
        limit: float | None = self.request_timeout if timeout is _DEFAULT else timeout
        return await self.channel.call(rpc, getattr(self._stub, rpc), request, limit)
