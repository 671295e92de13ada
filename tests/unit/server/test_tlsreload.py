"""The file watcher's timing (fake clock) and ServingTLS keeping its context on bad input."""

from __future__ import annotations

import itertools
import ssl
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet.server.certs import self_signed_pair
from kubelet.server.tlsreload import RESYNC, ServingTLS, watch_files


async def test_refused_content_is_retried_with_backoff_and_kept_out(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "ca.crt"
    path.write_bytes(b"one")
    calls: list[tuple[float, bytes]] = []
    done = trio.Event()

    def apply(contents: tuple[bytes, ...]) -> None:
        calls.append((trio.current_time(), contents[0]))
        if len(calls) < 4:
            raise ssl.SSLError("bad bundle")
        done.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(watch_files, "test", [str(path)], apply, (b"one",))
        start = trio.current_time()
        await trio.sleep(5)
        assert calls == []  # unchanged content is not applied again
        path.write_bytes(b"two")
        await done.wait()
        gaps = [round(b[0] - a[0], 1) for a, b in itertools.pairwise(calls)]
        assert gaps == [1.0, 2.0, 4.0]
        assert calls[0][0] - start < RESYNC
        nursery.cancel_scope.cancel()


def test_a_pair_that_does_not_match_changes_nothing(tmp_path: Path) -> None:
    chain, key = self_signed_pair("a")
    other_chain, _ = self_signed_pair("b")
    (tmp_path / "a.crt").write_bytes(chain)
    (tmp_path / "a.key").write_bytes(key)
    (tmp_path / "b.crt").write_bytes(other_chain)
    tls = ServingTLS("", "")
    tls.set_pair(str(tmp_path / "a.crt"), str(tmp_path / "a.key"))
    before = tls.active
    with pytest.raises(ssl.SSLError):
        tls.set_pair(str(tmp_path / "b.crt"), str(tmp_path / "a.key"))
    assert tls.active is before
    with pytest.raises(ssl.SSLError):
        tls.set_client_ca(b"garbage")
    assert tls.active is before
