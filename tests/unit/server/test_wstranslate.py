"""The translator's decisions: which requests it takes, handshake answers, statuses."""

from __future__ import annotations

import json
import time
from typing import cast

import attrs

from kubelet.goformat import go_json
from kubelet.server.streaming import UpgradeRequest
from kubelet.server.wstranslate import (
    WebSocket,
    _Session,
    exit_code_status,
    handshake_refusal,
    internal_error,
    is_v5_request,
    status_from_error_stream,
)

WS = ((b"connection", b"Upgrade"), (b"upgrade", b"websocket"))


def request(*headers: tuple[bytes, bytes], method: str = "GET") -> UpgradeRequest:
    return UpgradeRequest(method, (*WS, *headers))


def test_only_websocket_requests_offering_v5_are_translated() -> None:
    assert is_v5_request(request((b"sec-websocket-protocol", b"v5.channel.k8s.io")))
    assert is_v5_request(
        request((b"sec-websocket-protocol", b"v4.channel.k8s.io, v5.channel.k8s.io"))
    )
    assert not is_v5_request(request((b"sec-websocket-protocol", b"v4.channel.k8s.io")))
    assert not is_v5_request(request())
    # only the first header counts, as Go's Header.Get
    assert not is_v5_request(
        request(
            (b"sec-websocket-protocol", b"v4.channel.k8s.io"),
            (b"sec-websocket-protocol", b"v5.channel.k8s.io"),
        )
    )
    spdy = UpgradeRequest(
        "POST", ((b"connection", b"Upgrade"), (b"upgrade", b"SPDY/3.1"),
                 (b"sec-websocket-protocol", b"v5.channel.k8s.io")),
    )  # fmt: skip
    assert not is_v5_request(spdy)


def test_handshake_answers_are_x_net_websockets() -> None:
    key = (b"sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ==")
    version = (b"sec-websocket-version", b"13")
    assert handshake_refusal(request(key, version)) is None
    refused = handshake_refusal(request(key, version, method="POST"))
    assert refused is not None and (refused.status, refused.body) == (405, b"bad method")
    refused = handshake_refusal(request(version))
    assert refused is not None and refused.body == b"mismatch challenge/response"
    refused = handshake_refusal(request(key, (b"sec-websocket-version", b"8")))
    assert refused is not None and refused.status == 400
    assert refused.headers == (("Sec-WebSocket-Version", "13"),)


def test_the_error_stream_becomes_upstreams_status() -> None:
    v4 = "v4.channel.k8s.io"
    success = {"metadata": {}, "status": "Success"}
    assert status_from_error_stream(v4, b"") == success
    assert status_from_error_stream(v4, json.dumps(success).encode()) == success
    runtime = {
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": "command terminated with non-zero exit code: error executing command "
        "[sh -c exit 3], exit code 3",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }  # fmt: skip
    assert status_from_error_stream(v4, json.dumps(runtime).encode()) == exit_code_status(3)
    assert exit_code_status(3)["message"] == (
        "command terminated with non-zero exit code: command terminated with exit code 3"
    )
    other = {"metadata": {}, "status": "Failure", "message": "no such container"}
    assert status_from_error_stream(v4, json.dumps(other).encode()) == internal_error(
        "no such container"
    )
    bad_code = {**runtime, "details": {"causes": [{"reason": "ExitCode", "message": "300"}]}}
    assert status_from_error_stream(v4, json.dumps(bad_code).encode()) == internal_error(
        'error stream protocol error: invalid exit code value "300"'
    )
    no_details = {k: v for k, v in runtime.items() if k != "details"}
    assert status_from_error_stream(v4, json.dumps(no_details).encode())["details"] == {
        "causes": [{"message": "error stream protocol error: details must be set"}]
    }
    assert status_from_error_stream("v2.channel.k8s.io", b"boom") == internal_error(
        "error executing remote command: boom"
    )
    assert internal_error("x") == {
        "metadata": {}, "status": "Failure", "message": "Internal error occurred: x",
        "reason": "InternalError", "details": {"causes": [{"message": "x"}]}, "code": 500,
    }  # fmt: skip


def test_statuses_are_written_as_go_marshals_them() -> None:
    assert go_json({"metadata": {}, "status": "Success"}) == '{"metadata":{},"status":"Success"}'
    assert go_json({"message": "<a & b> é"}) == '{"message":"\\u003ca \\u0026 b\\u003e é"}'
    # the two line separators too, as json.Marshal escapes them
    assert go_json({"message": "a\u2028b\u2029"}) == '{"message":"a\\u2028b\\u2029"}'


# -- the resize channel ----------------------------------------------------------------------


@attrs.frozen
class TtyOptions:
    stdin: bool = True
    stdout: bool = True
    stderr: bool = False
    tty: bool = True


async def session() -> _Session:
    return _Session(cast(WebSocket, None), TtyOptions(), 0)


async def test_resize_messages_cut_anywhere_decode_whole() -> None:
    stream = b'{"Width":80,"Height":24}\n {"Height":40,"Width":100}{"Width":1}'
    s = await session()
    sizes = [size for at in range(len(stream)) for size in s._sizes(stream[at : at + 1])]
    assert sizes == [(80, 24), (100, 40), (1, 0)]
    assert s._resizing


async def test_a_resize_message_that_never_ends_costs_linear_time() -> None:
    """60,000 bytes of one unfinished message, a byte at a time: resizing ends once the
    message is longer than any terminal size can be, not after decoding it again for
    every byte (quadratic: seconds of CPU on the event loop)."""
    s = await session()
    start = time.thread_time()
    assert s._sizes(b'{"Width":') == []
    for _ in range(60_000):
        assert s._sizes(b" ") == []
    assert time.thread_time() - start < 0.5
    assert not s._resizing


async def test_a_deeply_nested_resize_message_ends_resizing() -> None:
    s = await session()
    assert s._sizes(b"[" * 60_000) == []
    assert not s._resizing
    assert s._sizes(b'{"Width":1,"Height":2}') == []
