"""A memory-backed emptyDir's size when nothing smaller limits it: the node's allocatable
memory, which arrives as a quantity ("7Gi"), as the Node's status.allocatable has it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec
from kubelet.volumes import VolumeManager
from kubelet.volumes import manager as volume_manager


def test_an_unlimited_memory_volume_is_sized_to_allocatable_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mounted: list[tuple[str, str]] = []
    monkeypatch.setattr(volume_manager, "is_separate_filesystem", lambda path: False)
    monkeypatch.setattr(volume_manager, "noswap_supported", lambda probe: False)
    monkeypatch.setattr(
        volume_manager, "mount_tmpfs", lambda path, options: mounted.append((path, options))
    )
    pod = Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid="u"),
        spec=PodSpec(containers=(Container(name="c"),)),
    )
    volumes = VolumeManager(str(tmp_path), node_allocatable={"memory": "7Gi", "cpu": "3500m"})
    volumes._mount_memory(pod, str(tmp_path / "cache"), None)
    assert mounted == [(str(tmp_path / "cache"), f"size={7 * 1024**3}")]
