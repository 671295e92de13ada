"""``agent.start``: the process exit code of a fatal condition raised in the task tree."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

from kubelet import agent, process
from kubelet.api import ClusterConnection
from kubelet.config import Options, resolve
from kubelet.errors import FatalError


async def fails_deep_in_the_tree(
    options: Options, connection: ClusterConnection | None, contention: int | None
) -> int:
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as inner:
            inner.start_soon(trio.sleep_forever)
            raise FatalError("It has been 5m0s since a valid client cert was found, exiting.")
        outer.start_soon(trio.sleep_forever)
    return 0


def test_a_fatal_error_exits_255_as_klog_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = resolve([f"--root-dir={tmp_path / 'root'}"])
    options = attrs.evolve(
        options, config=attrs.evolve(options.config, pod_logs_dir=str(tmp_path / "logs"))
    )
    monkeypatch.setattr(process, "prepare", lambda _: None)
    monkeypatch.setattr(agent, "main", fails_deep_in_the_tree)
    assert agent.start(options) == 255
