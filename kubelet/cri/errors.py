"""One exception tree for every way a CRI call can fail.

Callers (pod workers, PLEG, probers) decide on retry and backoff from the class alone:
``RuntimeUnavailable`` and ``DeadlineExceeded`` say nothing about the pod, ``NotFound``
means the object is already gone (teardown treats it as success), anything else is a
real answer from the runtime. ``to_cri_error`` is the single place that turns grpclib,
OS and trio failures into this tree.
"""

from __future__ import annotations

import builtins

import trio
from grpclib.const import Status
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError

__all__ = [
    "AlreadyExists",
    "CriError",
    "DeadlineExceeded",
    "ImagePullFailed",
    "InvalidArgument",
    "MessageTooLarge",
    "NotFound",
    "RuntimeUnavailable",
    "Unimplemented",
    "to_cri_error",
]


class CriError(Exception):
    """A CRI call failed. ``code`` is the gRPC status when the runtime sent one."""

    def __init__(self, rpc: str, message: str, code: Status | None = None) -> None:
        super().__init__(f"{rpc}: {message}")
        self.rpc = rpc
        self.message = message
        self.code = code


class RuntimeUnavailable(CriError):
    """The runtime could not be reached: no socket, refused, or the connection broke."""


class DeadlineExceeded(CriError):
    """The call's deadline passed, on our side or on the runtime's."""


class NotFound(CriError):
    """The sandbox, container or image does not exist (any more)."""


class AlreadyExists(CriError):
    """The runtime already has an object of that name."""


class InvalidArgument(CriError):
    """The runtime rejected the request as malformed."""


class Unimplemented(CriError):
    """The runtime does not implement this RPC (or not this CRI version)."""


class MessageTooLarge(CriError):
    """A request or response exceeded the 16 MiB message limit."""


class ImagePullFailed(CriError):
    """PullImage failed for a reason other than reachability or a deadline."""


_BY_STATUS: dict[Status, type[CriError]] = {
    Status.UNAVAILABLE: RuntimeUnavailable,
    Status.DEADLINE_EXCEEDED: DeadlineExceeded,
    Status.NOT_FOUND: NotFound,
    Status.ALREADY_EXISTS: AlreadyExists,
    Status.INVALID_ARGUMENT: InvalidArgument,
    Status.UNIMPLEMENTED: Unimplemented,
    Status.RESOURCE_EXHAUSTED: MessageTooLarge,
}


def to_cri_error(rpc: str, exc: BaseException, timeout: float | None = None) -> CriError:
    """Translate a failure raised during ``rpc`` into our exception tree.

    Covers: GRPCError with any status (including the runtime's own DEADLINE_EXCEEDED,
    which fires first for deadlines over 10 s because grpclib rounds ``grpc-timeout``
    down to whole seconds), grpclib's builtin ``TimeoutError``, ``trio.TooSlowError``
    from our own deadline, a missing or stale socket (``FileNotFoundError``,
    ``ConnectionRefusedError``), a connection that died mid-call
    (``StreamTerminatedError``, ``ConnectionError``, h2 protocol errors).
    """
    if isinstance(exc, CriError):
        return exc
    after = f" after {timeout:g}s" if timeout is not None else ""
    if isinstance(exc, GRPCError):
        cls = _BY_STATUS.get(exc.status, CriError)
        if exc.message:
            message = exc.message
        elif exc.status is Status.DEADLINE_EXCEEDED:
            message = f"deadline exceeded{after}"
        else:
            message = exc.status.name
        return cls(rpc, message, exc.status)
    if isinstance(exc, trio.TooSlowError | builtins.TimeoutError):
        return DeadlineExceeded(rpc, f"deadline exceeded{after}", Status.DEADLINE_EXCEEDED)
    if isinstance(exc, FileNotFoundError | ConnectionRefusedError):
        return RuntimeUnavailable(rpc, f"runtime not listening: {exc}", Status.UNAVAILABLE)
    if isinstance(exc, StreamTerminatedError | ProtocolError | ConnectionError | EOFError):
        return RuntimeUnavailable(rpc, f"connection to runtime lost: {exc}", Status.UNAVAILABLE)
    if isinstance(exc, OSError):
        return RuntimeUnavailable(rpc, f"cannot reach runtime: {exc}", Status.UNAVAILABLE)
    return CriError(rpc, f"{type(exc).__name__}: {exc}")
