"""The stream proxy's pure parts: what goes to the runtime, what comes back, the framing facts.

Cases restated from upstream's upgradeaware.go (request line from the location, headers
cloned, X-Forwarded-For appended, the client's Host kept), Go's header canonicalisation and
response parsing, and the WebSocket channel protocols (wsstream, remotecommand).
"""

from __future__ import annotations

import pytest

from kubelet.server.streaming import (
    ProxyError,
    StreamingURL,
    UpgradeRequest,
    canonical_header_key,
    is_upgrade_request,
    parse_response_head,
    upstream_request_head,
)
from kubelet.testing import wschannels as ch

SPDY_EXEC = UpgradeRequest(
    method="POST",
    headers=(
        (b"host", b"node-1:10250"),
        (b"user-agent", b"kubectl/v1.37.1"),
        (b"content-length", b"0"),
        (b"connection", b"Upgrade"),
        (b"upgrade", b"SPDY/3.1"),
        (b"x-stream-protocol-version", b"v5.channel.k8s.io"),
        (b"x-stream-protocol-version", b"v4.channel.k8s.io"),
    ),
    client_address="10.0.0.7",
)


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        (b"sec-websocket-key", b"Sec-Websocket-Key"),
        (b"x-stream-protocol-version", b"X-Stream-Protocol-Version"),
        (b"CONNECTION", b"Connection"),
        (b"x-forwarded-for", b"X-Forwarded-For"),
        (b"a b", b"a b"),  # not a token: left alone, as Go does
    ],
)
def test_header_names_take_gos_canonical_form(name: bytes, canonical: bytes) -> None:
    assert canonical_header_key(name) == canonical


@pytest.mark.parametrize(
    ("headers", "upgrade"),
    [
        ([(b"connection", b"Upgrade")], True),
        ([(b"connection", b"keep-alive, upgrade")], True),
        ([(b"Connection", b"UPGRADE")], True),
        ([(b"upgrade", b"websocket")], False),  # no Connection: not an upgrade upstream
        ([(b"connection", b"close")], False),
        ([], False),
    ],
)
def test_upgrade_requests_as_upstream_tells_them(
    headers: list[tuple[bytes, bytes]], upgrade: bool
) -> None:
    assert is_upgrade_request(headers) is upgrade


def test_streaming_urls_from_the_runtime() -> None:
    url = StreamingURL.parse("http://127.0.0.1:38939/exec/AbCd1234")
    assert (url.scheme, url.host, url.port, url.target) == (
        "http", "127.0.0.1", 38939, b"/exec/AbCd1234",
    )  # fmt: skip
    tls = StreamingURL.parse("https://[::1]/portforward/x?a=b")
    assert (tls.host, tls.port, tls.target) == ("::1", 443, b"/portforward/x?a=b")
    assert StreamingURL.parse("http://node").target == b"/"
    for bad in ("ftp://h/x", "http:///x", "http://h:99999/x", "/exec/x", "http://h/a b"):
        with pytest.raises(ProxyError, match="invalid streaming URL"):
            StreamingURL.parse(bad)


def test_the_request_line_is_the_runtimes_and_the_headers_the_clients() -> None:
    url = StreamingURL.parse("http://127.0.0.1:38939/exec/AbCd1234")
    head = upstream_request_head(SPDY_EXEC, url)
    assert head == (
        b"POST /exec/AbCd1234 HTTP/1.1\r\n"
        b"Host: node-1:10250\r\n"
        b"User-Agent: kubectl/v1.37.1\r\n"
        b"Content-Length: 0\r\n"
        b"Connection: Upgrade\r\n"
        b"Upgrade: SPDY/3.1\r\n"
        b"X-Forwarded-For: 10.0.0.7\r\n"
        b"X-Stream-Protocol-Version: v5.channel.k8s.io\r\n"
        b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
        b"\r\n"
    )


def test_forwarded_for_is_appended_and_a_missing_host_is_the_urls() -> None:
    request = UpgradeRequest(
        "GET",
        ((b"x-forwarded-for", b"1.2.3.4"), (b"connection", b"Upgrade")),
        client_address="10.0.0.7",
    )
    head = upstream_request_head(request, StreamingURL.parse("http://[fd00::1]:8080/attach/t"))
    assert b"Host: [fd00::1]:8080\r\n" in head
    assert b"X-Forwarded-For: 1.2.3.4, 10.0.0.7\r\n" in head
    assert head.startswith(b"GET /attach/t HTTP/1.1\r\n")
    anonymous = UpgradeRequest("GET", ((b"connection", b"Upgrade"),))
    assert b"X-Forwarded-For" not in upstream_request_head(
        anonymous, StreamingURL.parse("http://h/x")
    )


def test_response_heads() -> None:
    switching = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n\x82\x01\x01"
    )
    head = parse_response_head(switching)
    assert head is not None
    assert head.status == 101
    assert head.length == len(switching) - 3
    assert head.header(b"sec-websocket-protocol") == b"v4.channel.k8s.io"
    assert parse_response_head(switching[:40]) is None
    lf_only = parse_response_head(b"HTTP/1.0 403 Forbidden\n\n")
    assert lf_only is not None
    assert (lf_only.status, lf_only.length) == (403, len(b"HTTP/1.0 403 Forbidden\n\n"))
    assert parse_response_head(b"HTTP/1.1 200\r\n\r\n") is not None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "malformed HTTP response"),
        (b"HTTP/1.1 20 OK\r\n\r\n", "malformed HTTP response"),
        (b"HTTP/1.1 101 OK\r\nno colon here\r\n\r\n", "malformed MIME header line"),
        (b"HTTP/1.1 101 OK\r\nX: " + b"a" * 100 + b"\r\n\r\n", "header too long"),
        (b"HTTP/1.1 101 OK\r\nX: " + b"a" * 100, "header too long"),
    ],
)
def test_what_is_not_a_response_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(ProxyError, match=message):
        parse_response_head(data, limit=64)


def test_channel_framing() -> None:
    assert ch.encode(ch.STDOUT, b"hi", ch.V5) == b"\x01hi"
    assert ch.encode(ch.STDERR, b"hi", ch.V4_BASE64) == "2aGk="
    assert ch.decode(b"\x03{}") == (3, b"{}")
    assert ch.decode("1aGk=") == (1, b"hi")
    assert ch.decode(b"") is None


def test_exit_status_as_containerd_words_it() -> None:
    status = ch.exit_status(3, ["sh", "-c", "exit 3"])
    assert status == {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: "
        "error executing command [sh -c exit 3], exit code 3",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }
    assert ch.status_exit_code(status) == 3
    assert ch.status_exit_code(ch.exit_status(0, ["true"])) == 0
    assert ch.status_exit_code({"status": "Failure", "reason": "InternalError"}) is None
