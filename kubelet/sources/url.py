"""The URL source: a Pod or PodList polled from ``staticPodURL`` → SET(http, pods).

Upstream's behaviour, kept: a failed poll (connection error, non-200, a body that does
not decode or validate) sends nothing, so the pods of the last good body keep running;
an unchanged body is not re-sent; an empty 200 body is a SET of no pods (and is logged
as an error), which is how a server says "nothing here".

Failures are logged without flooding: the first few, then only when the error text
changes or every ``log_every``-th repeat, and once on recovery.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import httpx
import trio

from .podconfig import HTTP_SOURCE, PodOperation, UpdateSink
from .static import MAX_CONFIG_LENGTH, ManifestError, load_manifest, too_large

log = logging.getLogger(__name__)

DEFAULT_CHECK_FREQUENCY = 20.0
"""Upstream's httpCheckFrequency default, seconds."""

REQUEST_TIMEOUT = 10.0
"""Upstream's client timeout: a hung server costs one poll, not the source."""


DRAIN_LIMIT = 4 * MAX_CONFIG_LENGTH
"""An oversized body without a Content-Length is read to its end (discarded) up to this
many bytes: stopping httpx's nested async generators early leaves them unfinalised."""


class FetchError(Exception):
    """The manifest URL did not give a usable body."""


class FailureLog:
    """Log repeated failures sparingly: the first ``first``, new texts, every Nth, recovery."""

    def __init__(self, what: str, *, first: int = 3, every: int = 30) -> None:
        self.what = what
        self.first = first
        self.every = every
        self.failures = 0
        self.last_error: str | None = None

    def failed(self, error: str) -> None:
        self.failures += 1
        changed = error != self.last_error
        self.last_error = error
        if self.failures <= self.first or changed:
            log.warning("%s failed: %s", self.what, error)
        elif self.failures % self.every == 0:
            log.warning("%s failed (%d times in a row): %s", self.what, self.failures, error)
        else:
            log.debug("%s failed (%d times in a row): %s", self.what, self.failures, error)

    def succeeded(self) -> None:
        if self.failures:
            log.info("%s succeeded again after %d failures", self.what, self.failures)
        self.failures = 0
        self.last_error = None


class URLSource:
    """Static pods from a manifest URL, polled every ``check_frequency`` seconds."""

    def __init__(
        self,
        url: str,
        node_name: str,
        *,
        headers: Mapping[str, Sequence[str]] | None = None,
        check_frequency: float = DEFAULT_CHECK_FREQUENCY,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = REQUEST_TIMEOUT,
        log_every: int = 30,
    ) -> None:
        httpx.URL(url)  # a malformed URL is a configuration error: fail at construction
        self.url = url
        self.node_name = node_name
        self.headers = [(k, v) for k, values in (headers or {}).items() for v in values]
        self.check_frequency = check_frequency
        self.transport = transport
        self.timeout = timeout
        self.log = FailureLog(f"reading pods from {url}", every=log_every)
        self._last_body: bytes | None = None
        self._last_body_error: str | None = None
        self._warnings: tuple[str, ...] = ()

    async def run(
        self, config: UpdateSink, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Poll now and then every ``check_frequency`` seconds, until cancelled."""
        config.register(HTTP_SOURCE)
        async with httpx.AsyncClient(
            transport=self.transport, timeout=self.timeout, follow_redirects=True
        ) as client:
            task_status.started()
            while True:
                await self.poll(client, config)
                await trio.sleep(self.check_frequency)

    async def poll(self, client: httpx.AsyncClient, config: UpdateSink) -> None:
        """One attempt: fetch, decode, send a SET if the body is new and good."""
        try:
            body = await self._fetch(client)
        except (httpx.HTTPError, FetchError) as exc:
            self.log.failed(str(exc) or type(exc).__name__)
            return
        if not body:
            self._last_body, self._last_body_error = body, None
            await config.update(HTTP_SOURCE, PodOperation.SET, [])
            self.log.failed(f"zero-length data received from {self.url}")
            return
        if body == self._last_body:
            if self._last_body_error is None:
                self.log.succeeded()
            else:
                self.log.failed(self._last_body_error)
            return
        self._last_body = body
        try:
            loaded = load_manifest(
                body, self.url, node_name=self.node_name, is_file=False, allow_list=True
            )
        except ManifestError as exc:
            self._last_body_error = str(exc)
            self.log.failed(self._last_body_error)
            return
        self._last_body_error = None
        if loaded.warnings != self._warnings:
            for warning in loaded.warnings:
                log.warning("%s", warning)
            self._warnings = loaded.warnings
        await config.update(HTTP_SOURCE, PodOperation.SET, loaded.pods)
        self.log.succeeded()

    async def _fetch(self, client: httpx.AsyncClient) -> bytes:
        async with client.stream("GET", self.url, headers=self.headers) as response:
            if response.status_code != httpx.codes.OK:
                raise FetchError(f"{self.url}: {response.status_code} {response.reason_phrase}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_CONFIG_LENGTH:
                raise FetchError(f"{self.url}: {too_large(int(declared))}")
            body = bytearray()
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size <= MAX_CONFIG_LENGTH:
                    body += chunk
                elif size > DRAIN_LIMIT:
                    break  # a server that never stops: give up (httpx will grumble, rightly)
            if size > MAX_CONFIG_LENGTH:
                raise FetchError(f"{self.url}: {too_large(size)}")
            return bytes(body)
