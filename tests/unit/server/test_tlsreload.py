"""The file watcher's timing (fake clock) and ServingTLS keeping its context on bad input."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import ssl
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet.boundedio import inline
from kubelet.server.certs import self_signed_pair
from kubelet.server.tlsreload import CA_BUNDLE_LIMIT, RESYNC, ServingTLS, watch_files
from kubelet.testing.certs import CertPair, TestCA


async def test_refused_content_is_retried_with_backoff_and_kept_out(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "ca.crt"
    path.write_bytes(b"one")
    calls: list[tuple[float, bytes]] = []
    done = trio.Event()

    async def apply(contents: tuple[bytes, ...]) -> None:
        calls.append((trio.current_time(), contents[0]))
        if len(calls) < 4:
            raise ssl.SSLError("bad bundle")
        done.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: watch_files(
                "test", [str(path)], apply, (b"one",), limit=100, run=inline,
                task_status=task_status,
            )
        )  # fmt: skip
        start = trio.current_time()
        await trio.sleep(5)
        assert calls == []  # unchanged content is not applied again
        path.write_bytes(b"two")
        await done.wait()
        gaps = [round(b[0] - a[0], 1) for a, b in itertools.pairwise(calls)]
        assert gaps == [1.0, 2.0, 4.0]
        assert calls[0][0] - start < RESYNC
        nursery.cancel_scope.cancel()


async def test_a_pair_that_does_not_match_changes_nothing() -> None:
    chain, key = self_signed_pair("a")
    other_chain, _ = self_signed_pair("b")
    tls = ServingTLS("", "", run=inline)
    await tls.use_pair(chain, key)
    before = tls.active
    with pytest.raises(ssl.SSLError):
        await tls.use_pair(other_chain, key)
    assert tls.active is before
    with pytest.raises(ssl.SSLError):
        await tls.use_client_ca(b"garbage")
    assert tls.active is before


def _unblock_readers(path: Path) -> None:
    """Give a reader stuck on the FIFO its end of file, whatever the code under test did."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("hostile", ["fifo", "dev-zero"])
async def test_a_file_that_never_ends_is_refused_and_later_reloads_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, hostile: str
) -> None:
    """Real threads and files: a FIFO or a link to /dev/zero at the bundle's path is an
    error logged while the bundle before stays, the next good file is loaded, and the
    watcher ends at once when cancelled."""
    path = tmp_path / "ca.crt"
    path.write_bytes(b"one")
    applied: list[bytes] = []
    changed = trio.Event()

    async def apply(contents: tuple[bytes, ...]) -> None:
        applied.append(contents[0])
        changed.set()

    caplog.set_level(logging.ERROR)
    try:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                await nursery.start(
                    lambda task_status: watch_files(
                        "bundle", [str(path)], apply, (b"one",), limit=CA_BUNDLE_LIMIT,
                        task_status=task_status,
                    )
                )  # fmt: skip
                path.unlink()
                if hostile == "fifo":
                    os.mkfifo(path)
                else:
                    path.symlink_to("/dev/zero")
                while "not a regular file" not in caplog.text:
                    await trio.sleep(0.05)
                assert applied == []
                path.unlink()
                path.write_bytes(b"two")
                await changed.wait()
                assert applied == [b"two"]
                started = time.monotonic()
                nursery.cancel_scope.cancel()
            assert time.monotonic() - started < 1.0
    finally:
        if path.exists() and not path.is_symlink() and not path.is_file():
            _unblock_readers(path)


async def test_an_oversized_bundle_is_refused_without_being_read(tmp_path: Path) -> None:
    path = tmp_path / "ca.crt"
    path.write_bytes(b"one")
    applied: list[bytes] = []
    refused = trio.Event()

    async def apply(contents: tuple[bytes, ...]) -> None:
        applied.append(contents[0])

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: watch_files(
                    "bundle", [str(path)], apply, (b"one",), limit=1024, task_status=task_status
                )
            )
            handler = _Seen("larger than 1024 bytes", refused)
            logging.getLogger("kubelet.server.tlsreload").addHandler(handler)
            try:
                path.write_bytes(b"x" * 4096)
                await refused.wait()
            finally:
                logging.getLogger("kubelet.server.tlsreload").removeHandler(handler)
            nursery.cancel_scope.cancel()
    assert applied == []


class _Seen(logging.Handler):
    def __init__(self, text: str, event: trio.Event) -> None:
        super().__init__()
        self.text, self.event = text, event

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


async def test_a_large_bundle_is_parsed_off_the_event_loop() -> None:
    """Thousands of certificates take OpenSSL a while: the loop keeps ticking meanwhile."""
    chain, key = self_signed_pair("a")
    bundle = chain * 4000  # about 9 MiB
    tls = ServingTLS("", "ca.crt")
    await tls.use_client_ca(chain)
    await tls.use_pair(chain, key)
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await trio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        await tls.use_client_ca(bundle)
        nursery.cancel_scope.cancel()
    assert len(bundle) < CA_BUNDLE_LIMIT
    assert gaps and max(gaps) < 0.5


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> bytes | None:
    """One TLS handshake in memory; the client certificate the server accepted (None: the
    client sent none). Raises the server's ``ssl.SSLError`` when it refuses."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_end = server.wrap_bio(to_server, to_client, server_side=True)
    client_end = client.wrap_bio(to_client, to_server, server_hostname="node")
    done = {"server": False, "client": False}
    for _ in range(20):
        for name, end in (("client", client_end), ("server", server_end)):
            if not done[name]:
                with contextlib.suppress(ssl.SSLWantReadError):
                    end.do_handshake()
                    done[name] = True
        if all(done.values()):
            with contextlib.suppress(ssl.SSLWantReadError):
                server_end.read(1)  # TLS 1.3: the client's certificate arrives after
            return server_end.getpeercert(binary_form=True)
    raise AssertionError("the handshake did not finish")


async def test_client_certificates_are_verified_against_the_client_ca_file_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As upstream's x509 authenticator: only ``clientCAFile`` vouches for a client; a
    certificate from a CA the host's trust store holds is refused."""
    ours, public = TestCA(tmp_path / "ours", "client-ca"), TestCA(tmp_path / "public", "pub")
    monkeypatch.setenv("SSL_CERT_FILE", str(public.cert_path))  # the host's trust store
    tls = ServingTLS("", str(ours.cert_path), run=inline)
    await tls.use_client_ca(ours.cert_path.read_bytes())
    await tls.use_pair(*self_signed_pair("node"))

    def client(pair: CertPair) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        context.load_cert_chain(pair.cert, pair.key)
        return context

    assert _handshake(tls.front, client(ours.issue("alice", "alice"))) is not None
    with pytest.raises(ssl.SSLError, match="certificate verify failed"):
        _handshake(tls.front, client(public.issue("admin", "system:admin", ["system:masters"])))
