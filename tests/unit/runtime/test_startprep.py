"""Containers' starts readied while their sandbox is created (``runtime.startprep``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kubelet.api import Container
from kubelet.runtime.startprep import Readied, StartsAhead


async def test_a_start_waits_for_its_readying_and_takes_it_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def ready(container: Container, readied: Readied) -> None:
        await trio.sleep(0.2)
        readied.restart_count = 3

    ahead = StartsAhead()
    async with trio.open_nursery() as nursery:
        ahead.start(nursery, [Container(name="a")], ready)
        got = await ahead.take("a")
        assert got is not None and got.restart_count == 3
        assert trio.current_time() == pytest.approx(0.2)
        assert await ahead.take("a") is None  # used once
        assert await ahead.take("b") is None  # never readied


async def test_an_unexpected_error_reaches_the_start_not_the_sandbox_beside_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def ready(container: Container, readied: Readied) -> None:
        raise RuntimeError("boom")

    ahead = StartsAhead()
    sandbox_created = False
    async with trio.open_nursery() as nursery:
        ahead.start(nursery, [Container(name="a")], ready)
        await trio.sleep(1)  # RunPodSandbox, not cancelled by the failure
        sandbox_created = True
        with pytest.raises(RuntimeError, match="boom"):
            await ahead.take("a")
    assert sandbox_created


async def test_what_no_start_took_is_undone(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    async def ready(container: Container, readied: Readied) -> None:
        path = tmp_path / container.name
        path.write_bytes(b"")
        readied.message_path = str(path)
        await trio.sleep(10)  # still readying when cancelled

    ahead = StartsAhead()
    async with trio.open_nursery() as nursery:
        ahead.start(nursery, [Container(name="a"), Container(name="b")], ready)
        await trio.sleep(1)
        ahead.cancel()  # the sandbox failed
    assert trio.current_time() == pytest.approx(1)
    ahead.discard()
    assert list(tmp_path.iterdir()) == []
