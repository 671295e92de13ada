"""A protobuf codec that carries a gRPC message size limit, enforced before reading.

grpclib has no message size limit of its own. The upstream kubelet raises gRPC's 4 MiB
default to 16 MiB for both directions of the CRI; its pod-resources server keeps the
4 MiB default. Exceeding it is RESOURCE_EXHAUSTED, as in gRPC.

A limit checked only when decoding comes too late: grpclib first gathers the whole
message (its length is in the 5-byte prefix), so a peer announcing 1 GiB had the
kubelet buffer 1 GiB. :func:`install` makes grpclib's clients and servers read the
prefix, refuse a length over the codec's limit and only then read the message; the
peer's unread bytes stay in HTTP/2 flow control (a few MiB at most) and the stream is
reset.
"""

from __future__ import annotations

import struct
from typing import Any

import grpclib.client
import grpclib.server
from grpclib.const import Status
from grpclib.encoding.base import CodecBase
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError

MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_PREFIX = struct.Struct(">?I")
"""gRPC's message prefix: a compressed flag and the message length."""


def _too_large(size: int, limit: int) -> GRPCError:
    return GRPCError(
        Status.RESOURCE_EXHAUSTED, f"grpc: received message larger than max ({size} vs. {limit})"
    )


class LimitedProtoCodec(ProtoCodec):
    """``ProtoCodec`` that refuses messages larger than ``max_bytes`` either way."""

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        install()
        self.max_bytes = max_bytes

    def encode(self, message: Any, message_type: Any) -> bytes:
        data: bytes = super().encode(message, message_type)
        if len(data) > self.max_bytes:
            raise GRPCError(
                Status.RESOURCE_EXHAUSTED,
                f"trying to send message larger than max ({len(data)} vs. {self.max_bytes})",
            )
        return data

    def decode(self, data: bytes, message_type: Any) -> Any:
        if len(data) > self.max_bytes:
            raise _too_large(len(data), self.max_bytes)
        return super().decode(data, message_type)


async def recv_message(stream: Any, codec: CodecBase, message_type: Any) -> Any:
    """grpclib's ``recv_message`` that asks the codec's ``max_bytes`` (when it has one)
    before it reads the message the prefix announces."""
    prefix = await stream.recv_data(_PREFIX.size)
    if not prefix:
        return None
    compressed, size = _PREFIX.unpack(prefix)
    if compressed:
        raise NotImplementedError("Compression not implemented")
    limit = getattr(codec, "max_bytes", None)
    if limit is not None and size > limit:
        raise _too_large(size, limit)
    data = await stream.recv_data(size)
    if len(data) != size:
        raise GRPCError(Status.INTERNAL, f"message of {len(data)} bytes, {size} announced")
    return codec.decode(data, message_type)


def install() -> None:
    """Idempotent; grpclib's client and server streams look ``recv_message`` up in their
    own modules at each call."""
    grpclib.client.recv_message = recv_message  # type: ignore[attr-defined]
    grpclib.server.recv_message = recv_message  # type: ignore[attr-defined]
