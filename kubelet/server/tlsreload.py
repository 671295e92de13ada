"""The main port's TLS, rebuilt when its files change on disk (as upstream 1.36).

``ReloadKubeletServerCertificateFile`` (beta, on): when ``tlsCertFile`` and
``tlsPrivateKeyFile`` are both set (not the self-signed pair, not the rotated serving
certificate), a changed pair is used for new handshakes; open connections keep theirs.
``ReloadKubeletClientCAFile`` (beta, on): a changed ``clientCAFile`` is what new
handshakes verify client certificates against.

Python's ``ssl`` cannot change a context's trusted CAs or swap its key and certificate
as one step, so every change builds a whole new ``SSLContext``; the listener's fixed
front context hands each handshake the newest one from its SNI callback (OpenSSL calls
it for every ClientHello, with or without a server name). A pair or bundle that does
not load (a key that does not match, a half-written file, an empty file) is logged and
the previous context stays in use; it is tried again at the next change, with backoff,
and at the one-minute resync, as upstream's dynamic certificate controllers do.

The files are outside data: each is read with a bound (:data:`PAIR_FILE_LIMIT` for a
certificate or key, :data:`CA_BUNDLE_LIMIT` for the bundle), must be a regular file (a
FIFO or a link to a device is refused, not waited on), and reading and building the
context happen in a worker thread that a shutdown abandons rather than waits for. The
context is built from the bytes read, never by OpenSSL opening the paths again.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import inotify_simple
import trio

from kubelet.boundedio import RunSync, in_thread, read_regular_file
from kubelet.node.certificates import PAIR_FILE_LIMIT, load_cert_chain_pem, load_verify_pem

from .tlsprofile import TLS_VERSIONS, TlsProfile

__all__ = ["CA_BUNDLE_LIMIT", "PAIR_FILE_LIMIT", "ServingTLS", "read_files", "watch_files"]

log = logging.getLogger(__name__)

RESYNC = 60.0
"""Upstream's ``FileRefreshDuration``: the files are read again every minute."""
SETTLE = 0.1
"""Seconds without a file event before reading, so a cert and key written one after the
other are read as one change (a pair read in between is refused and retried anyway)."""
RETRY = (1.0, RESYNC)
"""First and longest delay before a refused pair or bundle is read again."""
CA_BUNDLE_LIMIT = 10 * 1024 * 1024
"""Bytes the client CA bundle may hold: thousands of certificates (a distribution's whole
trust store is under 1 MiB); a longer file is refused, never read to its end."""

_NO_CERT = "TLS handshake refused: no serving certificate available for the kubelet"


Pair = tuple[bytes, bytes]
"""A serving certificate chain and its key, as PEM bytes."""


class ServingTLS:
    """The front ``SSLContext`` of the main port and the context it currently hands out.

    :meth:`use_pair` and :meth:`use_client_ca` build the new context in a worker thread
    (``run``) and swap it in only when it loads; one at a time, so neither loses the
    other's change. Every context it builds, the front one included, gets ``profile``
    (cipher suites, curves, minimum version): OpenSSL keeps the front context's cipher
    and group lists for the whole handshake, the chosen context's for nothing but the
    certificate and the client CAs.
    """

    def __init__(
        self,
        min_version: str,
        client_ca_file: str,
        run: RunSync = in_thread,
        profile: TlsProfile | None = None,
    ) -> None:
        self.profile = profile or TlsProfile(
            min_version=TLS_VERSIONS.get(min_version, ssl.TLSVersion.TLSv1_2)
        )
        self.min_version = self.profile.min_version
        self.client_ca_file = client_ca_file
        self._run = run
        self._pair: Pair | None = None
        self._ca_pem: bytes | None = None
        self._active: ssl.SSLContext | None = None
        self._changing = trio.Lock()
        self.front = self._blank()
        self.front.sni_callback = self._choose

    @property
    def active(self) -> ssl.SSLContext | None:
        """The context new handshakes get (None: no serving certificate yet)."""
        return self._active

    def _blank(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.profile.apply(context)
        context.set_alpn_protocols(["h2", "http/1.1"])
        # The verify mode stays the front context's for the whole handshake.
        context.verify_mode = ssl.CERT_OPTIONAL if self.client_ca_file else ssl.CERT_NONE
        return context

    def _choose(self, sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> int | None:
        active = self._active
        if active is None:
            log.info(_NO_CERT)
            return ssl.ALERT_DESCRIPTION_HANDSHAKE_FAILURE
        sock.context = active
        return None

    def _build(self, pair: Pair | None, ca_pem: bytes | None) -> ssl.SSLContext | None:
        """Blocking (OpenSSL parses everything): run it through ``self._run``."""
        if pair is None:
            return None
        context = self._blank()
        load_cert_chain_pem(context, *pair)
        if self.client_ca_file:
            if not ca_pem:
                raise ssl.SSLError("no client CA bundle loaded")
            load_verify_pem(context, ca_pem)
        return context

    def _build_ca(self, pem: bytes, pair: Pair | None) -> ssl.SSLContext | None:
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise ssl.SSLError("data does not contain any valid RSA or ECDSA certificates")
        if pair is not None:
            return self._build(pair, pem)
        probe = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        load_verify_pem(probe, pem)
        return None

    async def use_pair(self, chain_pem: bytes, key_pem: bytes) -> None:
        """Serve this chain and key from the next handshake; raises (and changes nothing)
        when they do not load as a matching pair."""
        async with self._changing:
            pair, ca_pem = (chain_pem, key_pem), self._ca_pem
            active = await self._run(lambda: self._build(pair, ca_pem))
            self._pair, self._active = pair, active

    async def use_client_ca(self, pem: bytes) -> None:
        """Verify client certificates against ``pem`` from the next handshake; raises (and
        changes nothing) when it holds no usable certificate."""
        async with self._changing:
            pair = self._pair
            active = await self._run(lambda: self._build_ca(pem, pair))
            self._ca_pem, self._active = pem, active


def read_files(paths: Sequence[str], limit: int) -> tuple[bytes, ...]:
    """The regular files' contents, each at most ``limit`` bytes (blocking: run it in a
    worker thread)."""
    return tuple(read_regular_file(p, limit) for p in paths)


async def watch_files(
    name: str,
    paths: Sequence[str],
    apply: Callable[[tuple[bytes, ...]], Awaitable[None]],
    loaded: tuple[bytes, ...],
    *,
    limit: int,
    run: RunSync = in_thread,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Call ``apply`` with the files' contents whenever they differ from what was applied.

    Read again (each at most ``limit`` bytes, through ``run``) on every inotify event of
    their directories (settled for ``SETTLE``), every ``RESYNC`` and, after a failure,
    with backoff. A failure (a file refused, unreadable or not loading) keeps what was
    applied.
    """
    current = loaded
    retry = RETRY[0]
    failing = ""
    with inotify_simple.INotify(nonblocking=True) as inotify:
        for directory in sorted({str(Path(p).parent) for p in paths}):
            try:
                inotify.add_watch(directory, _MASK)
            except OSError as exc:
                log.warning("Failed to watch %s, reading it every minute: %s", directory, exc)
        task_status.started()
        wait = RESYNC
        while True:
            with trio.move_on_after(wait):
                await trio.lowlevel.wait_readable(inotify.fileno())
                await _settle(inotify)
            try:
                contents = await run(lambda: read_files(paths, limit))
                if contents != current:
                    if any(not c for c in contents):
                        raise ValueError(f"missing content for {name!r}")
                    await apply(contents)
                    current = contents
                    log.info('"Loaded a new %s" name=%r', _WHAT.get(len(paths), "file"), name)
                failing, retry, wait = "", RETRY[0], RESYNC
            except (OSError, ValueError, ssl.SSLError) as exc:
                if str(exc) != failing:
                    log.error(
                        "%s failed with : %s (still serving what was loaded before)", name, exc
                    )
                failing = str(exc)
                wait, retry = retry, min(retry * 2, RETRY[1])


_WHAT = {1: "CA Bundle and Verifier", 2: "cert/key pair"}

_MASK = (
    inotify_simple.flags.CLOSE_WRITE
    | inotify_simple.flags.MODIFY
    | inotify_simple.flags.MOVED_TO
    | inotify_simple.flags.MOVED_FROM
    | inotify_simple.flags.CREATE
    | inotify_simple.flags.DELETE
    | inotify_simple.flags.ATTRIB
)


async def _settle(inotify: inotify_simple.INotify) -> None:
    """Drain events until ``SETTLE`` passes without one (at most a second)."""
    with trio.move_on_after(1.0):
        while True:
            inotify.read(timeout=0)
            with trio.move_on_after(SETTLE) as quiet:
                await trio.lowlevel.wait_readable(inotify.fileno())
            if quiet.cancelled_caught:
                return
    inotify.read(timeout=0)
