"""The device manager's checkpoint is upstream's file: the checksum of files an upstream
kubelet wrote is reproduced, such files are read, and what we write reads back."""

from __future__ import annotations

import json

import pytest

from kubelet.cm.devices.allocation import Granted
from kubelet.cm.devices.checkpoint import (
    Checkpoint,
    CheckpointError,
    checksum,
    decode,
    encode,
)
from kubelet.goformat import spew_checksum

# Written by upstream kubelets (the second with a plugin's Allocate answer).
UPSTREAM_EMPTY = (
    '{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"nvidia.com/gpu":'
    '["GPU-0650a168-e770-3ea8-8ac3-8a1d419763e0"]}},"Checksum":3952659280}'
)
UPSTREAM_ONE_POD = (
    '{"Data":{"PodDeviceEntries":[{"PodUID":"bf52b2cd-b611-4e79-86b1-280b283185c3",'
    '"ContainerName":"check","ResourceName":"nvidia.com/gpu","DeviceIDs":{"-1":["tegra"]},'
    '"AllocResp":"Ch8KFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSBXRlZ3Jh"}],'
    '"RegisteredDevices":{"nvidia.com/gpu":["tegra"]}},"Checksum":3660592824}'
)


def test_fnv32a_is_gos() -> None:
    assert spew_checksum("") == 0x811C9DC5
    assert spew_checksum("a") == 0xE40C292C


@pytest.mark.parametrize("text", [UPSTREAM_EMPTY, UPSTREAM_ONE_POD])
def test_upstream_checksums_are_reproduced(text: str) -> None:
    doc = json.loads(text)
    assert checksum(doc["Data"]) == doc["Checksum"]


def test_an_upstream_checkpoint_is_read() -> None:
    cp = decode(json.loads(UPSTREAM_ONE_POD))
    granted = cp.devices["bf52b2cd-b611-4e79-86b1-280b283185c3"]["check"]["nvidia.com/gpu"]
    assert granted.device_ids == ("tegra",)
    assert granted.response is not None and b"NVIDIA_VISIBLE_DEVICES" in granted.response
    assert cp.registered == {"nvidia.com/gpu": ("tegra",)}
    assert decode(json.loads(UPSTREAM_EMPTY)).devices == {}


def test_what_we_write_is_upstreams_format_and_reads_back() -> None:
    cp = Checkpoint(
        devices={"uid-1": {"app": {"example.com/r": Granted(("d0", "d1"), b"\x0a\x00")}}},
        registered={"example.com/r": ("d0", "d1", "d2")},
        numa={"example.com/r": {"d0": (0,), "d1": ()}},
    )
    blob = encode(cp)
    doc = json.loads(blob)
    (entry,) = doc["Data"]["PodDeviceEntries"]
    assert entry == {
        "PodUID": "uid-1",
        "ContainerName": "app",
        "ResourceName": "example.com/r",
        "DeviceIDs": {"-1": ["d1"], "0": ["d0"]},
        "AllocResp": "CgA=",
    }
    assert doc["Checksum"] == checksum(doc["Data"])
    back = decode(doc)
    assert set(back.devices["uid-1"]["app"]["example.com/r"].device_ids) == {"d0", "d1"}
    assert back.registered == cp.registered
    empty = json.loads(encode(Checkpoint(devices={}, registered={})))
    assert empty["Data"] == {"PodDeviceEntries": None, "RegisteredDevices": None}


def test_a_changed_or_malformed_file_is_refused() -> None:
    doc = json.loads(UPSTREAM_ONE_POD)
    doc["Data"]["RegisteredDevices"]["nvidia.com/gpu"].append("another")
    with pytest.raises(CheckpointError, match="checksum"):
        decode(doc)
    with pytest.raises(CheckpointError):
        decode({"Data": "no"})
    bad = json.loads(UPSTREAM_ONE_POD)
    bad["Data"]["PodDeviceEntries"][0]["AllocResp"] = "%%%"
    with pytest.raises(CheckpointError):
        decode(bad)
