"""The kubelet's CRI clients: RuntimeClient and ImageClient over grpclib, inside Trio.

Usage (inside ``async with trio_asyncio.open_loop():``)::

    async with connect("unix:///run/containerd/containerd.sock") as (runtime, images):
        print((await runtime.version()).runtime_version)

``api`` is the generated protobuf module (package runtime.v1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from . import cri_api_pb2 as api
from .channel import CriChannel, Observer
from .codec import MAX_MESSAGE_BYTES
from .endpoint import DEFAULT_RUNTIME_ENDPOINT, socket_path
from .errors import (
    AlreadyExists,
    CriError,
    DeadlineExceeded,
    ImagePullFailed,
    InvalidArgument,
    MessageTooLarge,
    NotFound,
    RuntimeUnavailable,
    Unimplemented,
)
from .images import ImageClient
from .runtime import RuntimeClient
from .service import DEFAULT_REQUEST_TIMEOUT

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_RUNTIME_ENDPOINT",
    "MAX_MESSAGE_BYTES",
    "AlreadyExists",
    "CriChannel",
    "CriError",
    "DeadlineExceeded",
    "ImageClient",
    "ImagePullFailed",
    "InvalidArgument",
    "MessageTooLarge",
    "NotFound",
    "RuntimeClient",
    "RuntimeUnavailable",
    "Unimplemented",
    "api",
    "connect",
    "socket_path",
]


@asynccontextmanager
async def connect(
    runtime_endpoint: str = DEFAULT_RUNTIME_ENDPOINT,
    image_endpoint: str = "",
    *,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    observer: Observer | None = None,
) -> AsyncIterator[tuple[RuntimeClient, ImageClient]]:
    """Open clients for both services; the image endpoint defaults to the runtime's.

    No connection is made until the first call, so a runtime that is not up yet is
    reported by that call (``RuntimeUnavailable``), not here.
    """
    runtime_channel = CriChannel(runtime_endpoint, observer=observer)
    image_channel = (
        CriChannel(image_endpoint, observer=observer)
        if image_endpoint and image_endpoint != runtime_endpoint
        else runtime_channel
    )
    try:
        yield (
            RuntimeClient(runtime_channel, request_timeout=request_timeout),
            ImageClient(image_channel, request_timeout=request_timeout),
        )
    finally:
        runtime_channel.close()
        image_channel.close()
