"""The URL source: a Pod or PodList polled from ``staticPodURL`` → SET(http, pods).

Upstream's behaviour, kept: a failed poll (connection error, non-200, a body that does
not decode or validate) sends nothing, so the pods of the last good body keep running;
an unchanged body is not re-sent; an empty 200 body is a SET of no pods (and is logged
as an error), which is how a server says "nothing here".

The server is not trusted: each poll has one deadline for the whole request, headers
and body (``REQUEST_TIMEOUT``, upstream's client timeout), so a server that trickles a
byte a second costs one poll, not the source; a body is read to 10 MiB and no further;
decoding runs off the event loop, bounded as for files (:mod:`.limits`), and a body that
failed is not decoded again until it changes. Failures are logged once when they start
or change and once on recovery, never once per poll.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import trio

from kubelet.boundedio import RunSync, in_thread

from .errors import ManifestError
from .limits import MAX_CONFIG_LENGTH, too_large, too_large_unknown
from .podconfig import HTTP_SOURCE, PodOperation, UpdateSink
from .static import Loaded, load_manifest
from .validation import DEFAULT_VALIDATION, PodValidationOptions

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

DEFAULT_CHECK_FREQUENCY = 20.0
"""Upstream's httpCheckFrequency default, seconds."""

REQUEST_TIMEOUT = 10.0
"""Upstream's client timeout, for the whole request (connect, headers, body): a hung or
trickling server costs one poll, not the source."""


class FetchError(Exception):
    """The manifest URL did not give a usable body."""


class FailureLog:
    """One line when failing starts or its reason changes, one when it ends.

    The same failure poll after poll is logged at debug level only: a source that has
    been failing for a day has said so once. Reasons are worded to stay the same while
    the cause does (no byte counts of an endless body, for one).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0
        self.last_error: str | None = None

    def failed(self, error: str) -> None:
        self.failures += 1
        if error != self.last_error:
            log.warning("%s failed: %s", self.what, error)
        else:
            log.debug("%s failed (%d times in a row): %s", self.what, self.failures, error)
        self.last_error = error

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
        run_sync: RunSync = in_thread,
        validation: PodValidationOptions = DEFAULT_VALIDATION,
    ) -> None:
        import httpx  # loaded with a manifest URL only

        httpx.URL(url)  # a malformed URL is a configuration error: fail at construction
        self.url = url
        self.node_name = node_name
        self.validation = validation
        self.headers = [(k, v) for k, values in (headers or {}).items() for v in values]
        self.check_frequency = check_frequency
        self.transport = transport
        self.timeout = timeout
        self.run_sync = run_sync
        """Where decoding runs (a worker thread; see :mod:`kubelet.boundedio`)."""
        self.log = FailureLog(f"reading pods from {url}")
        self._last_body: bytes | None = None
        self._last_body_error: str | None = None
        self._warnings: tuple[str, ...] = ()

    async def run(
        self, config: UpdateSink, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Poll now and then every ``check_frequency`` seconds, until cancelled."""
        import httpx

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
        import httpx

        try:
            body = await self.fetch(client)
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
            loaded = await self.run_sync(functools.partial(self._decode, body))
        except ManifestError as exc:
            self._last_body_error = str(exc)
            self.log.failed(self._last_body_error)
            return
        self._last_body_error = None
        if loaded.warnings != self._warnings:
            for warning in loaded.warnings:
                log.warning("%s", warning)
            self._warnings = loaded.warnings
        origins = dict.fromkeys((pod.uid for pod in loaded.pods), self.url)
        await config.update(HTTP_SOURCE, PodOperation.SET, loaded.pods, origins=origins)
        self.log.succeeded()

    def _decode(self, body: bytes) -> Loaded:
        return load_manifest(
            body,
            self.url,
            node_name=self.node_name,
            is_file=False,
            allow_list=True,
            validation=self.validation,
        )

    async def fetch(self, client: httpx.AsyncClient) -> bytes:
        """The body, within ``timeout`` for the whole request and at most 10 MiB."""
        with trio.move_on_after(self.timeout):
            return await self._fetch(client)
        raise FetchError(
            f"{self.url}: no complete answer within {self.timeout:g} s (the deadline for "
            "the whole request)"
        )

    async def _fetch(self, client: httpx.AsyncClient) -> bytes:
        import httpx

        async with client.stream("GET", self.url, headers=self.headers) as response:
            if response.status_code != httpx.codes.OK:
                raise FetchError(f"{self.url}: {response.status_code} {response.reason_phrase}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_CONFIG_LENGTH:
                raise FetchError(f"{self.url}: {too_large(int(declared))}")
            body = bytearray()
            try:
                async for chunk in response.aiter_bytes():
                    if len(body) > MAX_CONFIG_LENGTH:
                        continue
                    body += chunk
                    if len(body) > MAX_CONFIG_LENGTH:
                        # Close the connection under the reading generators rather than
                        # leave the loop: their next read fails and unwinds each of them
                        # (leaving them suspended makes trio warn when they are collected).
                        await response.aclose()
            except (httpx.HTTPError, httpx.StreamError):
                if len(body) <= MAX_CONFIG_LENGTH:
                    raise
            if len(body) > MAX_CONFIG_LENGTH:
                raise FetchError(f"{self.url}: {too_large_unknown()}")
            return bytes(body)
