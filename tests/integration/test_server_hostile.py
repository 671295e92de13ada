"""Hostile clients against the real servers (issue 12): large HTTP/2 and HTTP/1.1 bodies,
a connection whose handling fails, and none of it reaching the server nursery.

Real sockets on 127.0.0.1 (ephemeral ports), real clock, the servers as ``serve`` runs
them: the main server over TLS with anonymous requests refused, the read-only server
in plain HTTP (HTTP/2 by prior knowledge). The raw h2 client shows what httpx hides: the
response arrived, how the stream ended, and that the next request used the same
connection.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import h2.connection
import h11
import httpx
import pytest
import trio

from kubelet.config import KubeletAuthorization
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.metrics import KubeletMetrics
from kubelet.server import Addresses
from kubelet.testing import FakeRuntime
from kubelet.testing.h2client import H2Client

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


@pytest.fixture
async def servers(
    clients: tuple[RuntimeClient, ImageClient],
    fake: FakeRuntime,
    hostile_pki: Pki,
    short_tmp: Path,
) -> AsyncIterator[tuple[Env, Addresses]]:
    """Main server: x509 against the client CA, no anonymous; webhook authz allows alice."""
    runtime, images = clients
    metrics = KubeletMetrics("node1")
    backend = FakeBackend(runtime, images, metrics.registry)
    reviews = FakeReviews(allowed={("alice", "pods"), ("alice", "proxy")})
    async with trio.open_nursery() as nursery:
        env = Env(fake, backend, reviews, hostile_pki, short_tmp, nursery, metrics)
        addresses = await env.start(
            config(
                authentication=authn(client_ca=hostile_pki.ca_file, anonymous=False),
                authorization=KubeletAuthorization(mode="Webhook"),
            )
        )
        yield env, addresses
        nursery.cancel_scope.cancel()


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
