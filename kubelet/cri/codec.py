"""A protobuf codec that enforces the kubelet's 16 MiB gRPC message limit.

grpclib has no message size limit of its own; the upstream kubelet raises gRPC's 4 MiB
default to 16 MiB for both directions. Exceeding it is RESOURCE_EXHAUSTED, as in gRPC.
"""

from __future__ import annotations

from typing import Any

from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError

MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class LimitedProtoCodec(ProtoCodec):
    """``ProtoCodec`` that refuses messages larger than ``max_bytes`` either way."""

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
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
            raise GRPCError(
                Status.RESOURCE_EXHAUSTED,
                f"received message larger than max ({len(data)} vs. {self.max_bytes})",
            )
        return super().decode(data, message_type)
