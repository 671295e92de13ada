"""The kubelet's CRI clients: RuntimeClient and ImageClient over grpclib, inside Trio.

Usage (inside ``async with trio_asyncio.open_loop():``)::

    async with connect("unix:///run/containerd/containerd.sock") as (runtime, images):
        print((await runtime.version()).runtime_version)

``api`` is the generated protobuf module (package runtime.v1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kubelet.tracing import NO_TRACER as _NO_TRACER
from kubelet.tracing import Tracer as _Tracer

from . import channel, imageref, labels, trace
from . import cri_api_pb2 as api
from .channel import CriChannel, Observer, priority_lane
from .codec import MAX_MESSAGE_BYTES, LimitedProtoCodec
from .convert import container_info_from_cri, sandbox_info_from_cri
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
from .imageref import DEFAULT_REGISTRY, split_reference
from .images import ImageClient
from .logformat import STDERR, STDOUT, parse_rfc3339nano
from .runtime import RuntimeClient, wait_until_answering
from .service import DEFAULT_REQUEST_TIMEOUT
from .termination import create_message_file, host_path_of, message_mount, termination_message
from .types import (
    ContainerInfo,
    ContainerRunState,
    RunningResources,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from .unixserver import start_unix_server, stop_unix_server

__all__ = [
    "DEFAULT_REGISTRY",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_RUNTIME_ENDPOINT",
    "MAX_MESSAGE_BYTES",
    "STDERR",
    "STDOUT",
    "AlreadyExists",
    "ContainerInfo",
    "ContainerRunState",
    "CriChannel",
    "CriError",
    "DeadlineExceeded",
    "ImageClient",
    "ImagePullFailed",
    "InvalidArgument",
    "LimitedProtoCodec",
    "MessageTooLarge",
    "NotFound",
    "Observer",
    "RunningResources",
    "RuntimeClient",
    "RuntimePodStatus",
    "RuntimeUnavailable",
    "SandboxInfo",
    "SandboxState",
    "Unimplemented",
    "api",
    "channel",
    "connect",
    "container_info_from_cri",
    "create_message_file",
    "host_path_of",
    "imageref",
    "labels",
    "message_mount",
    "parse_rfc3339nano",
    "priority_lane",
    "sandbox_info_from_cri",
    "socket_path",
    "split_reference",
    "start_unix_server",
    "stop_unix_server",
    "termination_message",
    "trace",
    "wait_until_answering",
]


@asynccontextmanager
async def connect(
    runtime_endpoint: str = DEFAULT_RUNTIME_ENDPOINT,
    image_endpoint: str = "",
    *,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    observer: Observer | None = None,
    tracer: _Tracer = _NO_TRACER,
) -> AsyncIterator[tuple[RuntimeClient, ImageClient]]:
    """Open clients for both services; the image endpoint defaults to the runtime's.

    No connection is made until the first call, so a runtime that is not up yet is
    reported by that call (``RuntimeUnavailable``), not here.
    """
    runtime_channel = CriChannel(runtime_endpoint, observer=observer, tracer=tracer)
    image_channel = (
        CriChannel(image_endpoint, observer=observer, tracer=tracer)
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
