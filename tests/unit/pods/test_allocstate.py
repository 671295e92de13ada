"""The allocation checkpoint: upstream's file format, read back, damage refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubelet.api import Quantity, ResourceRequirements
from kubelet.boundedio import inline
from kubelet.decisions import Allocation
from kubelet.pods.allocstate import (
    AllocationCheckpoint,
    checksum,
    decode_checkpoint,
    encode_checkpoint,
)

SMALL = ResourceRequirements(
    limits={"cpu": Quantity("1"), "memory": Quantity("128Mi")},
    requests={"cpu": Quantity("500m")},
)
ENTRIES = {
    "uid-1": Allocation({"app": SMALL, "bare": None}),
    "uid-2": Allocation({"app": SMALL}, pod=ResourceRequirements(limits={"cpu": Quantity("2")})),
}


# Written by upstream's own test of the format (``Test_stateCheckpoint_formatUpgraded``),
# which its checkpoint manager verifies before reading.
UPSTREAM_FILE = (
    r'{"data":"{\"entries\":{\"pod1\":{\"ContainerResources\":{\"container1\":'
    r'{\"requests\":{\"cpu\":\"1Ki\",\"memory\":\"1Ki\"}}}}}}","checksum":1178570812}'
)


def test_the_file_is_upstreams_shape() -> None:
    outer = json.loads(encode_checkpoint(ENTRIES))
    assert list(outer) == ["data", "checksum"]
    data = json.loads(outer["data"])
    app = {"limits": {"cpu": "1", "memory": "128Mi"}, "requests": {"cpu": "500m"}}
    assert data == {
        "entries": {
            "uid-1": {
                "ContainerResources": {"app": app, "bare": {}},
                "PodLevelResources": None,
            },
            "uid-2": {
                "ContainerResources": {"app": app},
                "PodLevelResources": {"limits": {"cpu": "2"}},
            },
        }
    }
    assert outer["checksum"] == checksum(outer["data"])


def test_upstreams_checksum_is_reproduced_and_its_file_read() -> None:
    assert checksum(json.loads(UPSTREAM_FILE)["data"]) == 1178570812
    entries = decode_checkpoint(UPSTREAM_FILE.encode())
    assert entries["pod1"].containers["container1"] == ResourceRequirements(
        requests={"cpu": Quantity("1Ki"), "memory": Quantity("1Ki")}
    )
    assert entries["pod1"].pod is None


def test_the_checksum_hashes_the_string_unquoted_as_spew_prints_it() -> None:
    h = 0x811C9DC5
    for byte in b"(string){}":
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    assert checksum("{}") == h
    assert checksum('{"a":1}') != checksum('{"a":2}')


def test_keys_are_read_in_any_case_as_go_reads_them() -> None:
    text = '{"entries":{"u":{"containerResources":{"c":{"limits":{"cpu":"1"}}}}}}'
    blob = json.dumps({"data": text, "checksum": checksum(text)}).encode()
    assert decode_checkpoint(blob)["u"].containers["c"].limits == {"cpu": Quantity("1")}


def test_entries_round_trip() -> None:
    back = decode_checkpoint(encode_checkpoint(ENTRIES))
    assert back["uid-2"].pod == ResourceRequirements(limits={"cpu": Quantity("2")})
    assert back["uid-1"].containers["app"] == SMALL
    assert back["uid-1"].containers["bare"] == ResourceRequirements()


@pytest.mark.parametrize(
    "blob",
    [
        b"not json",
        b'{"data": "{}", "checksum": 1}',
        b'{"checksum": 1}',
    ],
)
def test_damage_is_refused(blob: bytes) -> None:
    with pytest.raises(ValueError):
        decode_checkpoint(blob)


async def test_stored_and_loaded_under_the_root_dir(tmp_path: Path) -> None:
    checkpoint = AllocationCheckpoint(str(tmp_path))
    assert await checkpoint.load(inline) == {}
    checkpoint.store(ENTRIES)
    assert (tmp_path / "allocated_pods_state").is_file()
    assert set(await checkpoint.load(inline)) == {"uid-1", "uid-2"}
    (tmp_path / "allocated_pods_state").write_text('{"data": "{}", "checksum": 7}')
    assert await checkpoint.load(inline) == {}  # damaged: ignored


async def test_entries_of_pods_no_source_wants_leave_the_file(tmp_path: Path) -> None:
    from kubelet.pods.allocation import Allocations

    checkpoint = AllocationCheckpoint(str(tmp_path))
    checkpoint.store(ENTRIES)
    allocations = Allocations(checkpoint=checkpoint, saved=await checkpoint.load(inline))
    allocations.drop_orphans(lambda uid: uid == "uid-2")
    assert set(await checkpoint.load(inline)) == {"uid-2"}
