"""The stream routes' pure parts: paths, options, ports, how CRI errors are answered."""

from __future__ import annotations

import pytest
from grpclib.const import Status

from kubelet.cri import CriError, NotFound
from kubelet.server.asgi import Request
from kubelet.server.streaming import UpgradeRequest
from kubelet.server.streams import (
    OptionsError,
    Target,
    cri_error_response,
    parse_path,
    port_forward_ports,
    stream_options,
)

WEBSOCKET = UpgradeRequest(
    "GET", ((b"connection", b"Upgrade"), (b"upgrade", b"websocket")), "127.0.0.1"
)
SPDY = UpgradeRequest("POST", ((b"connection", b"Upgrade"), (b"upgrade", b"SPDY/3.1")), None)


def request(query: dict[str, list[str]]) -> Request:
    return Request("GET", "/x", query, {})


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/exec/ns/web/app", Target("exec", "ns", "web", container="app")),
        ("/exec/ns/web/u1/app", Target("exec", "ns", "web", uid="u1", container="app")),
        ("/attach/ns/web/app", Target("attach", "ns", "web", container="app")),
        ("/run/ns/web/u1/app", Target("run", "ns", "web", uid="u1", container="app")),
        ("/portForward/ns/web", Target("portForward", "ns", "web")),
        ("/portForward/ns/web/u1", Target("portForward", "ns", "web", uid="u1")),
        ("/exec/ns/web", None),
        ("/exec/ns/web/u1/app/more", None),
        ("/exec/ns//app", None),
        ("/portForward/ns", None),
        ("/portForward/ns/web/u1/x", None),
        ("/execs/ns/web/app", None),
    ],
)
def test_paths(path: str, target: Target | None) -> None:
    assert parse_path(path) == target


def test_stream_options_as_remotecommand() -> None:
    options = stream_options(request({"input": ["1"], "output": ["1"], "error": ["1"]}))
    assert (options.stdin, options.stdout, options.stderr, options.tty) == (True, True, True, False)
    with_tty = stream_options(request({"output": ["1"], "error": ["1"], "tty": ["1"]}))
    assert (with_tty.stderr, with_tty.tty) == (False, True)  # no stderr with a terminal
    with pytest.raises(OptionsError, match="you must specify at least 1 of stdin, stdout, stderr"):
        stream_options(request({"input": ["true"], "output": ["0"]}))  # only "1" counts
    with pytest.raises(OptionsError):
        stream_options(request({"tty": ["1"], "error": ["1"]}))


def test_port_forward_ports_only_for_websocket() -> None:
    assert port_forward_ports(request({}), SPDY) == []  # SPDY names ports in its streams
    assert port_forward_ports(request({"port": ["80", "443,8080"]}), WEBSOCKET) == [80, 443, 8080]
    for query, message in (
        ({}, 'query parameter "port" is required'),
        ({"port": [""]}, 'query parameter "port" cannot be empty'),
        ({"port": ["x"]}, 'unable to parse "x" as a port: strconv.ParseUint: parsing "x": '
         "invalid syntax"),
        ({"port": ["-1"]}, 'unable to parse "-1" as a port: strconv.ParseUint: parsing "-1": '
         "invalid syntax"),
        ({"port": ["65536"]}, 'unable to parse "65536" as a port: strconv.ParseUint: parsing '
         '"65536": value out of range'),
        ({"port": ["0"]}, 'port "0" must be > 0'),
    ):  # fmt: skip
        with pytest.raises(OptionsError) as error:
            port_forward_ports(request(query), WEBSOCKET)
        assert str(error.value) == message


def test_cri_errors_as_the_streaming_library_writes_them() -> None:
    missing = cri_error_response(NotFound("Exec", 'container "c1" not found', Status.NOT_FOUND))
    assert (missing.status, missing.body) == (
        404, b'rpc error: code = NotFound desc = container "c1" not found',
    )  # fmt: skip
    busy = cri_error_response(CriError("Exec", "too many", Status.RESOURCE_EXHAUSTED))
    assert (busy.status, busy.body) == (429, b"rpc error: code = ResourceExhausted desc = too many")
    other = cri_error_response(CriError("Exec", "boom", Status.UNKNOWN))
    assert (other.status, other.body) == (500, b"rpc error: code = Unknown desc = boom")
    no_code = cri_error_response(CriError("Exec", "connection lost"))
    assert (no_code.status, no_code.body) == (500, b"Exec: connection lost")
