"""The record of the last graceful shutdown: upstream's state file, read back at start."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry

from kubelet.node.shutdown import ShutdownRecord

START, END = 1_800_000_000.0, 1_800_000_030.0


def test_stored_during_a_shutdown_and_read_back_after_the_reboot(tmp_path: Path) -> None:
    clock = iter([START, END])
    before = ShutdownRecord(str(tmp_path), CollectorRegistry(), lambda: next(clock))
    before.started()
    state = json.loads((tmp_path / "graceful_node_shutdown_state").read_text())
    assert state == {"startTime": "2027-01-15T08:00:00Z", "endTime": "0001-01-01T00:00:00Z"}
    before.ended()
    registry = CollectorRegistry()
    after = ShutdownRecord(str(tmp_path), registry, lambda: 0.0)
    after.load()
    assert registry.get_sample_value("kubelet_graceful_shutdown_start_time_seconds") == START
    assert registry.get_sample_value("kubelet_graceful_shutdown_end_time_seconds") == END


def test_no_file_or_a_broken_one_shows_nothing(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    ShutdownRecord(str(tmp_path), registry, lambda: 0.0).load()
    assert registry.get_sample_value("kubelet_graceful_shutdown_start_time_seconds") == 0
    (tmp_path / "graceful_node_shutdown_state").write_text("{not json")
    ShutdownRecord(str(tmp_path), CollectorRegistry(), lambda: 0.0).load()
