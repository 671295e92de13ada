"""to_cri_error is the one place failures become our exception tree."""

import pytest
import trio
from grpclib.const import Status
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError

from kubelet.cri import errors as e


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (Status.UNAVAILABLE, e.RuntimeUnavailable),
        (Status.DEADLINE_EXCEEDED, e.DeadlineExceeded),
        (Status.NOT_FOUND, e.NotFound),
        (Status.ALREADY_EXISTS, e.AlreadyExists),
        (Status.INVALID_ARGUMENT, e.InvalidArgument),
        (Status.UNIMPLEMENTED, e.Unimplemented),
        (Status.RESOURCE_EXHAUSTED, e.MessageTooLarge),
        (Status.UNKNOWN, e.CriError),
        (Status.INTERNAL, e.CriError),
        (Status.FAILED_PRECONDITION, e.CriError),
    ],
)
def test_grpc_status_maps_to_class_and_keeps_code(status: Status, cls: type[e.CriError]) -> None:
    err = e.to_cri_error("StartContainer", GRPCError(status, "boom"))
    assert type(err) is cls
    assert err.code is status
    assert err.rpc == "StartContainer"
    assert str(err) == "StartContainer: boom"


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (FileNotFoundError(2, "No such file or directory"), e.RuntimeUnavailable),
        (ConnectionRefusedError(111, "Connection refused"), e.RuntimeUnavailable),
        (StreamTerminatedError("Connection lost"), e.RuntimeUnavailable),
        (ProtocolError("bad frame"), e.RuntimeUnavailable),
        (ConnectionResetError(104, "reset"), e.RuntimeUnavailable),
        (PermissionError(13, "denied"), e.RuntimeUnavailable),
        (TimeoutError(), e.DeadlineExceeded),
        (trio.TooSlowError(), e.DeadlineExceeded),
        (ValueError("weird"), e.CriError),
    ],
)
def test_transport_failures(exc: BaseException, cls: type[e.CriError]) -> None:
    err = e.to_cri_error("Version", exc, timeout=120.0)
    assert type(err) is cls


def test_deadline_message_names_the_timeout() -> None:
    err = e.to_cri_error("ListContainers", trio.TooSlowError(), timeout=2.5)
    assert "deadline exceeded after 2.5s" in str(err)
    assert err.code is Status.DEADLINE_EXCEEDED


def test_cri_errors_pass_through_unchanged() -> None:
    original = e.NotFound("ContainerStatus", "gone", Status.NOT_FOUND)
    assert e.to_cri_error("X", original) is original


def test_every_class_is_a_cri_error() -> None:
    for name in e.__all__:
        obj = getattr(e, name)
        if isinstance(obj, type):
            assert issubclass(obj, e.CriError)
