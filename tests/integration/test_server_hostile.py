"""Hostile clients against the real servers: large HTTP/2 and HTTP/1.1 bodies,
a connection whose handling fails, none of it reaching the server nursery; HTTP/2 abuse
(control-frame floods, rapid reset, responses the client never takes).

Real sockets on 127.0.0.1 (ephemeral ports), the servers as ``serve`` runs them (on a
fake clock where time matters): the main server over TLS with anonymous requests
refused, the read-only server in plain HTTP (HTTP/2 by prior knowledge). The raw h2
client shows what httpx hides: the response arrived, how the stream ended, and that the
next request used the same connection.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import h11
import httpx
import pytest
import trio
import trio.testing
from h2.errors import ErrorCodes

from kubelet.config import KubeletAuthorization
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.logs.fields import record_fields
from kubelet.metrics import KubeletMetrics
from kubelet.server import Addresses, http2
from kubelet.server.limits import Limits
from kubelet.testing import FakeRuntime, H2Client

from .test_server import Env, FakeBackend, FakeReviews, Pki, _ca, _client, authn, config

BIG = 100 * 1024
HUGE = 1024 * 1024


@pytest.fixture(scope="module")
def hostile_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    from cryptography.hazmat.primitives import serialization

    where = tmp_path_factory.mktemp("pki")
    ca = _ca("client-ca")
    ca_file = where / "ca.crt"
    ca_file.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    other = _ca("someone-else")
    return Pki(ca_file, _client(ca, "alice", "devs", where), _client(other, "mallory", "x", where))


@asynccontextmanager
async def start_servers(
    clients: tuple[RuntimeClient, ImageClient],
    fake: FakeRuntime,
    pki: Pki,
    tmp: Path,
    limits: Limits | None = None,
) -> AsyncIterator[tuple[Env, Addresses]]:
    """Main server: x509 against the client CA, no anonymous; webhook authz allows alice."""
    runtime, images = clients
    metrics = KubeletMetrics("node1")
    backend = FakeBackend(runtime, images, metrics.registry)
    reviews = FakeReviews(allowed={("alice", "pods"), ("alice", "proxy")})
    async with trio.open_nursery() as nursery:
        env = Env(fake, backend, reviews, pki, tmp, nursery, metrics, limits)
        addresses = await env.start(
            config(
                authentication=authn(client_ca=pki.ca_file, anonymous=False),
                authorization=KubeletAuthorization(mode="Webhook"),
            )
        )
        yield env, addresses
        nursery.cancel_scope.cancel()


@pytest.fixture
async def servers(
    clients: tuple[RuntimeClient, ImageClient],
    fake: FakeRuntime,
    hostile_pki: Pki,
    short_tmp: Path,
) -> AsyncIterator[tuple[Env, Addresses]]:
    async with start_servers(clients, fake, hostile_pki, short_tmp) as started:
        yield started


def split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def tls(cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = H2Client.tls_context()
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return context


# -- HTTP/2 bodies larger than the 64 KiB window ------------------------------------------------


async def test_http2_large_body_to_the_main_server(servers: tuple[Env, Addresses]) -> None:
    env, addresses = servers
    host, port = split(addresses.main)
    client = await H2Client.connect(host, port, tls=tls())
    try:
        # answered 401 before the body arrived; the rest of the body is still taken
        r = await client.request("POST", "/pods", body=b"x" * BIG)
        assert (r.status, r.body, r.ended) == (401, b"Unauthorized", True)
        assert r.body_sent == BIG and r.reset_code is None
        # the same connection serves the next requests, its flow-control credit intact
        for _ in range(3):
            r = await client.request("POST", "/healthz", body=b"y" * BIG)
            assert r.status == 401
        r = await client.request("GET", "/pods")
        assert (r.status, r.body) == (401, b"Unauthorized")
        assert client.terminated is None and not client.closed
    finally:
        await client.aclose()
    # an authenticated client: 405 for the POST, then its pods, on one connection
    client = await H2Client.connect(host, port, tls=tls(env.pki.good))
    try:
        r = await client.request("POST", "/pods", body=b"x" * BIG)
        assert (r.status, r.body) == (405, b"Method Not Allowed")
        r = await client.request("GET", "/pods")
        assert r.status == 200 and b'"kind":"PodList"' in r.body
    finally:
        await client.aclose()


async def test_http2_large_body_with_httpx(servers: tuple[Env, Addresses]) -> None:
    _, addresses = servers
    async with httpx.AsyncClient(http2=True, verify=tls(), timeout=10) as client:
        r = await client.post(f"https://{addresses.main}/pods", content=b"x" * BIG)
        assert (r.http_version, r.status_code, r.text) == ("HTTP/2", 401, "Unauthorized")
        r = await client.get(f"https://{addresses.main}/pods")
        assert (r.http_version, r.status_code) == ("HTTP/2", 401)


async def test_http2_large_body_to_the_read_only_server(servers: tuple[Env, Addresses]) -> None:
    _, addresses = servers
    host, port = split(addresses.read_only)
    client = await H2Client.connect(host, port)  # prior knowledge: no TLS, no ALPN
    try:
        r = await client.request("POST", "/pods", body=b"x" * BIG)
        assert (r.status, r.body) == (405, b"Method Not Allowed")
        assert r.body_sent == BIG and r.reset_code is None
        # more than the server reads after its answer (256 KiB): the stream is reset with
        # NO_ERROR once the response is complete, and the connection goes on
        r = await client.request("POST", "/nothing", body=b"z" * HUGE)
        assert (r.status, r.body, r.ended) == (404, b"404 page not found\n", True)
        assert r.reset_code == 0 and r.body_sent < HUGE
        r = await client.request("GET", "/pods")
        assert r.status == 200 and b'"kind":"PodList"' in r.body
        assert client.terminated is None and not client.closed
    finally:
        await client.aclose()


async def test_http2_large_response_follows_the_client_windows(
    servers: tuple[Env, Addresses],
) -> None:
    env, addresses = servers
    await env.run_web_pod([f"line {i:06d} " + "x" * 90 for i in range(3000)])  # ~300 KiB
    host, port = split(addresses.main)
    client = await H2Client.connect(host, port, tls=tls(env.pki.good))
    try:
        r = await client.request("GET", "/containerLogs/default/web/app")
        assert r.status == 200 and r.ended
        lines = r.body.decode().splitlines()
        assert len(lines) == 3000 and lines[-1].startswith("line 002999")
    finally:
        await client.aclose()


# -- HTTP/1.1 bodies the handler does not read -----------------------------------------------


async def http1_exchange(
    stream: trio.SocketStream, client: h11.Connection, method: str, path: str, body: bytes
) -> tuple[int, bytes]:
    headers = [("Host", "x"), ("Content-Length", str(len(body)))]
    await stream.send_all(client.send(h11.Request(method=method, target=path, headers=headers)))
    status, received = 0, b""

    async def send_body() -> None:
        try:
            for i in range(0, len(body), 65536):
                await stream.send_all(client.send(h11.Data(data=body[i : i + 65536])))
            await stream.send_all(client.send(h11.EndOfMessage()))
        except trio.BrokenResourceError:
            pass  # the server stopped reading: fine, the response is what counts

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_body)
        while True:
            event = client.next_event()
            if event is h11.NEED_DATA:
                client.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                received += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise AssertionError(event)
    return status, received


async def test_http1_large_bodies_to_the_read_only_server(servers: tuple[Env, Addresses]) -> None:
    _, addresses = servers
    host, port = split(addresses.read_only)
    stream = await trio.open_tcp_stream(host, port)
    client = h11.Connection(h11.CLIENT)
    r = await http1_exchange(stream, client, "POST", "/pods", b"x" * BIG)
    assert r == (405, b"Method Not Allowed")
    client.start_next_cycle()  # the unread body was drained: the connection goes on
    r = await http1_exchange(stream, client, "GET", "/healthz", b"")
    assert r == (200, b"ok")
    client.start_next_cycle()
    # beyond 256 KiB the server answers, then closes (gently: the answer arrives intact)
    r = await http1_exchange(stream, client, "POST", "/pods", b"x" * (8 * HUGE))
    assert r == (405, b"Method Not Allowed")
    with trio.fail_after(5):
        try:
            while await stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            pass
    await stream.aclose()


# -- one connection's failure stays with it -----------------------------------------------------


@pytest.fixture
def failing_connection(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """While armed, the next connection to receive data fails inside h2 and h11."""
    armed = [False]
    h2_receive = h2.connection.H2Connection.receive_data
    h11_receive = h11.Connection.receive_data

    def boom() -> None:
        if armed[0]:
            armed[0] = False
            raise RuntimeError("injected fault")

    def h2_patched(self: h2.connection.H2Connection, data: bytes) -> list[object]:
        if self.config.client_side is False:
            boom()
        return h2_receive(self, data)  # type: ignore[return-value]

    def h11_patched(self: h11.Connection, data: bytes) -> None:
        if self.our_role is h11.SERVER:
            boom()
        h11_receive(self, data)

    monkeypatch.setattr(h2.connection.H2Connection, "receive_data", h2_patched)
    monkeypatch.setattr(h11.Connection, "receive_data", h11_patched)
    yield armed


async def h2_status(host: str, port: int, context: ssl.SSLContext | None) -> int | None:
    """The status of one GET /pods on a new HTTP/2 connection; None when it was closed."""
    try:
        client = await H2Client.connect(host, port, tls=context)
    except trio.BrokenResourceError:
        return None
    try:
        response = await client.request("GET", "/pods")
    except trio.BrokenResourceError:
        return None
    finally:
        await client.aclose()
    return response.status or None


async def test_a_failing_connection_is_closed_and_the_others_served(
    servers: tuple[Env, Addresses],
    failing_connection: list[bool],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    env, addresses = servers
    host, port = split(addresses.main)
    ro_host, ro_port = split(addresses.read_only)
    steady = await H2Client.connect(host, port, tls=tls(env.pki.good))
    try:
        assert (await steady.request("GET", "/pods")).status == 200
        # an HTTP/2 connection whose handling raises: closed, nothing else disturbed
        failing_connection[0] = True
        assert await h2_status(host, port, tls(env.pki.good)) is None  # closed, no answer
        assert not failing_connection[0], "the fault was not reached"
        # an HTTP/1.1 one on the read-only port
        failing_connection[0] = True
        async with httpx.AsyncClient(timeout=10) as plain:
            with pytest.raises(httpx.HTTPError):
                await plain.get(f"http://{addresses.read_only}/pods")
        assert not failing_connection[0]
        # the open connection, new connections and every server go on
        assert (await steady.request("GET", "/pods")).status == 200
        assert await h2_status(ro_host, ro_port, None) == 200
        async with httpx.AsyncClient(timeout=10) as plain:
            assert (await plain.get(f"http://{addresses.healthz}/healthz")).text == "ok"
    finally:
        await steady.aclose()
    failures = [r for r in caplog.records if r.getMessage() == "connection failed; closed it"]
    assert len(failures) == 2
    assert all(r.exc_info and "injected fault" in str(r.exc_info[1]) for r in failures)


# -- HTTP/2 abuse: the attacks Go's server was fixed for ------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
PING = b"\x00\x00\x08\x06\x00\x00\x00\x00\x00"  # the frame head; 8 bytes of data follow
PINGS = b"".join(PING + struct.pack(">Q", i) for i in range(10_000))


async def flood_without_reading(
    host: str, port: int, context: ssl.SSLContext | None, limit: int
) -> int:
    """PINGs (170 kB at a time) to a connection whose answers are never read; the bytes
    sent until the server closed it, or ``limit``."""
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect((host, port))
    stream: trio.abc.Stream = trio.SocketStream(sock)
    if context is not None:
        stream = trio.SSLStream(stream, context, server_hostname=host)
        await stream.do_handshake()
    sent = 0
    try:
        await stream.send_all(PREFACE + EMPTY_SETTINGS)
        while sent < limit:
            await stream.send_all(PINGS)
            sent += len(PINGS)
    except trio.BrokenResourceError:
        pass
    finally:
        await trio.aclose_forcefully(stream)
    return sent


@pytest.mark.parametrize("listener", ["main", "read_only", "healthz"])
async def test_http2_control_frame_flood_is_cut_off(
    servers: tuple[Env, Addresses],
    listener: str,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """CVE-2019-9512: PINGs whose answers the client never reads queued 34 MB before."""
    caplog.set_level(1, "kubelet.server.http2")
    _, addresses = servers
    host, port = split(getattr(addresses, listener))
    sent = await flood_without_reading(host, port, tls() if listener == "main" else None, 24 << 20)
    assert sent < 8 << 20, f"the server read {sent} bytes of PINGs nobody took the answers of"
    closing = [r for r in caplog.records if r.getMessage() == "HTTP/2 client misbehaves; closing"]
    assert [record_fields(r)["reason"] for r in closing] == ["too many queued control frames"]


async def test_http2_output_nobody_takes_stops_the_reading(
    servers: tuple[Env, Addresses],
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Whatever a client makes us queue (not only counted control frames): past 1 MiB
    the connection reads nothing more until it went, and the writer gives up after
    ``send_timeout`` (90 s) of a socket that takes nothing."""
    monkeypatch.setattr(http2, "MAX_QUEUED_CONTROL", 1 << 40)
    caplog.set_level(1, "kubelet.server.http2")
    _, addresses = servers
    host, port = split(addresses.read_only)
    t0 = trio.current_time()
    sent = await flood_without_reading(host, port, None, 24 << 20)
    assert sent < 12 << 20, f"the server read {sent} bytes of PINGs nobody took the answers of"
    assert 90 <= trio.current_time() - t0 < 91
    assert "HTTP/2 client takes no data; closing" in [r.getMessage() for r in caplog.records]


def raw_h2(stream: trio.abc.Stream, **settings: int) -> h2.connection.H2Connection:
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    codes = {getattr(h2.settings.SettingCodes, k): v for k, v in settings.items()}
    conn.local_settings = h2.settings.Settings(client=True, initial_values=codes)
    conn.initiate_connection()
    return conn


def get_pods(conn: h2.connection.H2Connection, token: str = "") -> int:
    stream_id = conn.get_next_available_stream_id()
    auth = [(b"authorization", f"Bearer {token}".encode())] if token else []
    head = [(b":method", b"GET"), (b":path", b"/pods"), (b":scheme", b"https")]
    conn.send_headers(stream_id, [*head, (b":authority", b"x"), *auth], end_stream=True)
    return stream_id


async def test_http2_rapid_reset(
    servers: tuple[Env, Addresses],
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CVE-2023-44487: HEADERS then RST_STREAM, 5,000 times, ran 5,000 handlers (and
    TokenReviews) at once against a bound of 250 streams."""
    in_flight, most = [0], [0]

    async def slow_review(self: FakeReviews, token: str) -> object:
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        try:
            await trio.sleep_forever()
        finally:
            in_flight[0] -= 1

    monkeypatch.setattr(FakeReviews, "token_review", slow_review)
    _, addresses = servers
    host, port = split(addresses.main)
    stream = trio.SSLStream(await trio.open_tcp_stream(host, port), tls(), server_hostname=host)
    await stream.do_handshake()
    conn = raw_h2(stream)
    events: list[h2.events.Event] = []

    async def read() -> None:
        with contextlib.suppress(trio.BrokenResourceError):
            while data := await stream.receive_some(65536):
                events.extend(conn.receive_data(data))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        # 250 reviews under way; their streams reset and 250 more asked at once: a reset
        # stream counts until its handler stopped
        ids = [get_pods(conn, f"a{i}") for i in range(250)]
        await stream.send_all(conn.data_to_send())
        await trio.sleep(1)
        assert in_flight[0] == 250
        for stream_id in ids:
            conn.reset_stream(stream_id, ErrorCodes.CANCEL)
        ids = [get_pods(conn, f"b{i}") for i in range(250)]
        await stream.send_all(conn.data_to_send())
        await trio.sleep(1)
        refused = [e for e in events if isinstance(e, h2.events.StreamReset)]
        assert {e.stream_id for e in refused} == set(ids)
        assert {e.error_code for e in refused} == {ErrorCodes.REFUSED_STREAM}
        assert (most[0], in_flight[0]) == (250, 0)  # the reset ones were cancelled
        # then resets as fast as the client can: GOAWAY ENHANCE_YOUR_CALM
        with contextlib.suppress(h2.exceptions.ProtocolError, trio.BrokenResourceError):
            for i in range(5000):
                conn.reset_stream(get_pods(conn, f"c{i}"), ErrorCodes.CANCEL)
                if i % 100 == 99:
                    await stream.send_all(conn.data_to_send())
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    await trio.aclose_forcefully(stream)
    goaway = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    assert [g.error_code for g in goaway] == [ErrorCodes.ENHANCE_YOUR_CALM]
    assert most[0] == 250 and in_flight[0] == 0  # every handler was cancelled with its stream


@pytest.fixture
async def four_slots(
    clients: tuple[RuntimeClient, ImageClient],
    fake: FakeRuntime,
    hostile_pki: Pki,
    short_tmp: Path,
) -> AsyncIterator[tuple[Env, Addresses]]:
    limits = Limits(max_connections=4, send_timeout=10)
    async with start_servers(clients, fake, hostile_pki, short_tmp, limits) as started:
        yield started


async def test_http2_clients_that_take_nothing_do_not_keep_the_slots(
    four_slots: tuple[Env, Addresses], autojump_clock: trio.testing.MockClock
) -> None:
    """Four connections without credentials, each with a flow-control window of 0 and a
    GET /pods: the 401 could never be sent and they held the four slots for good."""
    env, addresses = four_slots
    host, port = split(addresses.main)
    held: list[tuple[trio.SSLStream[trio.SocketStream], h2.connection.H2Connection]] = []
    for _ in range(4):
        stream = trio.SSLStream(await trio.open_tcp_stream(host, port), tls(), server_hostname=host)
        await stream.do_handshake()
        conn = raw_h2(stream, INITIAL_WINDOW_SIZE=0)
        get_pods(conn)
        await stream.send_all(conn.data_to_send())
        held.append((stream, conn))
    t0 = trio.current_time()
    with trio.fail_after(15):  # the stalled 401s are reset after 10 s, their slots given up
        client = await H2Client.connect(host, port, tls=tls(env.pki.good))
        response = await client.request("GET", "/pods")
    # served once one of them, idle then, closed (it reads on for 1 s after its GOAWAY)
    assert response.status == 200 and 10 <= trio.current_time() - t0 <= 11
    await client.aclose()
    outcomes = []
    for stream, conn in held:
        events: list[h2.events.Event] = []
        with trio.move_on_after(1), contextlib.suppress(trio.BrokenResourceError):
            while data := await stream.receive_some(65536):
                events.extend(conn.receive_data(data))
        resets = [e.error_code for e in events if isinstance(e, h2.events.StreamReset)]
        goaway = [e.error_code for e in events if isinstance(e, h2.events.ConnectionTerminated)]
        outcomes.append((resets, goaway))
        await trio.aclose_forcefully(stream)
    # each stream reset as Go's WriteTimeout does; one of the connections, idle from then
    # on, closed (GOAWAY NO_ERROR) for the client waiting in the backlog
    assert all(resets == [ErrorCodes.INTERNAL_ERROR] for resets, _ in outcomes)
    assert sorted(goaway for _, goaway in outcomes) == [[], [], [], [ErrorCodes.NO_ERROR]]
