"""A ``cpu_manager_state`` made to exhaust memory or the event loop is refused."""

import json

import pytest

from kubelet.cm.cpu.checkpoint import MAX_BYTES, MAX_CPUS, CorruptCheckpoint, checksum, decode
from kubelet.cm.cpu.cpuset import CpuSetError, parse_cpuset


def _signed(entries: dict[str, dict[str, str]], default: str = "") -> bytes:
    """A checkpoint whose checksum is right (anyone who can write the file can compute it)."""
    doc = {"policyName": "static", "defaultCpuSet": default, "entries": entries}
    doc["checksum"] = checksum("static", default, entries)
    return json.dumps(doc).encode()


def test_a_short_file_that_names_billions_of_cpus_is_refused_before_they_are_made() -> None:
    # 64 KiB of ranges, each within the per-range bound: 260 million CPUs
    ranges = ",".join(f"{i * 65536}-{i * 65536 + 65535}" for i in range(200))
    entries = {f"pod-{i}": {"c": ranges} for i in range(20)}
    assert len(_signed(entries)) < MAX_BYTES
    with pytest.raises(CorruptCheckpoint, match="more than"):
        decode(_signed(entries))


def test_a_checkpoint_within_the_bound_is_read() -> None:
    state = decode(_signed({"pod": {"c": "0-3"}}, default="4-7"))
    assert state.assignments["pod"]["c"] == frozenset(range(4))


def test_a_cpu_list_counts_its_cpus_before_making_them() -> None:
    assert parse_cpuset("0-3,8", limit=5) == frozenset({0, 1, 2, 3, 8})
    with pytest.raises(CpuSetError):
        parse_cpuset("0-3,8-9", limit=5)
    assert MAX_CPUS >= 1 << 16
