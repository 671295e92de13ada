"""New client certificates for the API client's new connections, without cutting old ones.

Upstream's kubelet closes every connection to the API server when its client certificate
rotates (every watch breaks and is re-established). Here the httpx transport is wrapped
in generations instead: on rotation the SSLContext loads the new pair (new handshakes
present it) and a new connection pool takes every new request, while requests already
under way on the old pool — long watches above all — finish undisturbed; the old pool is
closed as soon as its last request is done. The API server checks a client certificate
when a request starts, so a watch begun with the old certificate may outlive it; no new
request is ever sent with it. (``rotate(close_by=...)`` can still force an old pool
closed at a given time; the kubelet does not need it.)

``ClientRotation.follow`` connects a certificate manager to the connection and the
transport; ``RotatingTransport.run`` (in the same nursery) closes retired pools.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable

import attrs
import httpx
import trio

from kubelet.api import ClusterConnection

from .sslload import load_cert_chain_pem
from .store import CertKeyPair

__all__ = ["ClientRotation", "RotatingTransport", "transport_for"]

log = logging.getLogger(__name__)


def transport_for(connection: ClusterConnection) -> Callable[[], httpx.AsyncBaseTransport]:
    """A factory of pools as ``kubelet.api.client.make_http_client`` would build them."""

    def make() -> httpx.AsyncBaseTransport:
        return httpx.AsyncHTTPTransport(
            verify=connection.ssl_context if connection.ssl_context is not None else True,
            http2=True,
            proxy=connection.proxy_url or None,
            limits=httpx.Limits(
                max_connections=100, max_keepalive_connections=20, keepalive_expiry=90.0
            ),
        )

    return make


@attrs.define(eq=False)
class _Generation:
    transport: httpx.AsyncBaseTransport
    number: int
    active: int = 0
    close_by: float = math.inf
    closed: bool = False


class _Tracked(httpx.AsyncByteStream):
    """A response body that tells its generation when it is done."""

    def __init__(self, inner: httpx.AsyncByteStream, done: Callable[[], None]) -> None:
        self._inner = inner
        self._done: Callable[[], None] | None = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            if self._done is not None:
                done, self._done = self._done, None
                done()


class RotatingTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose pool can be replaced while requests are in flight."""

    def __init__(self, make: Callable[[], httpx.AsyncBaseTransport]) -> None:
        self._make = make
        self._number = 0
        self._current = _Generation(make(), 0)
        self._retiring: list[_Generation] = []
        self._wake = trio.Event()

    @property
    def generation(self) -> int:
        """How many times the pool was replaced."""
        return self._current.number

    @property
    def retiring(self) -> int:
        """Old pools still open (requests finishing on them)."""
        return len(self._retiring)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        generation = self._current
        generation.active += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                generation.active -= 1
                if generation.active == 0 and generation is not self._current:
                    self._wake.set()

        try:
            response = await generation.transport.handle_async_request(request)
        except BaseException:
            release()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Tracked(response.stream, release),
            extensions=response.extensions,
        )

    def rotate(self, close_by: float = math.inf) -> None:
        """New requests use a new pool from now on; the old one closes when idle, or at
        ``close_by`` (``trio.current_time()`` scale) at the latest."""
        old = self._current
        self._number += 1
        self._current = _Generation(self._make(), self._number)
        old.close_by = close_by
        self._retiring.append(old)
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Close retired pools as they empty or reach their deadline, until cancelled."""
        task_status.started()
        while True:
            self._wake = trio.Event()
            now = trio.current_time()
            for generation in list(self._retiring):
                if generation.active == 0 or now >= generation.close_by:
                    if generation.active:
                        log.info(
                            "closing %d request(s) still open with the expired client "
                            "certificate", generation.active,
                        )  # fmt: skip
                    self._retiring.remove(generation)
                    generation.closed = True
                    await generation.transport.aclose()
            deadline = min((g.close_by for g in self._retiring), default=math.inf)
            with trio.move_on_at(deadline):
                await self._wake.wait()

    async def aclose(self) -> None:
        for generation in (*self._retiring, self._current):
            if not generation.closed:
                generation.closed = True
                await generation.transport.aclose()
        self._retiring.clear()


@attrs.define
class ClientRotation:
    """Keeps the API client's connection and transport at the manager's current pair."""

    connection: ClusterConnection
    transport: RotatingTransport

    def apply(self, pair: CertKeyPair) -> None:
        # the pair's own files (kubelet-client-current.pem): a kubeconfig that embeds its
        # first certificate (kubeadm init's) still moves to the rotated ones
        if self.connection.ssl_context is not None and pair.cert_file:
            load_cert_chain_pem(self.connection.ssl_context, pair.chain_pem, pair.key_pem)
        else:
            self.connection.reload_client_certificate()
        self.transport.rotate()
        log.info(
            "certificate rotation detected, new connections to the API server use the new "
            "client certificate (serial %x)", pair.serial,
        )  # fmt: skip

    async def follow(self, updates: trio.MemoryReceiveChannel[CertKeyPair]) -> None:
        """Apply every new pair from ``updates`` (``CertificateManager.subscribe()``)."""
        async for pair in updates:
            self.apply(pair)
