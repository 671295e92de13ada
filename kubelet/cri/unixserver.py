"""A grpclib server on a unix socket, run from Trio: the kubelet's own gRPC endpoints.

The pod-resources API and the device plugin registration service are both served this
way: the socket's directory made (0750, root and the kubelet's group), a stale socket
replaced, as upstream's listeners do; requests bounded by their length prefix
(``LimitedProtoCodec``); on the way out the server closed within a deadline, shielded,
since teardown must finish even when the kubelet is being cancelled.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

import trio
import trio_asyncio
from grpclib.server import Server

from .codec import LimitedProtoCodec

CLOSE_DEADLINE = 5.0
"""seconds the server has to close its connections on the way out"""


async def start_unix_server(handlers: Sequence[Any], path: str, max_request_bytes: int) -> Server:
    """Listen on ``path``; raises OSError or RuntimeError when it cannot."""
    server = Server(list(handlers), codec=LimitedProtoCodec(max_request_bytes))
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    await trio_asyncio.aio_as_trio(server.start)(path=path)
    return server


async def stop_unix_server(server: Server, path: str, *, remove: bool = True) -> None:
    """Close ``server`` (shielded, within ``CLOSE_DEADLINE``); ``remove``: its socket too."""
    with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_DEADLINE):
        server.close()
        await trio_asyncio.aio_as_trio(server.wait_closed)()
        if remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
