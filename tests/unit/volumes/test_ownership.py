"""fsGroup ownership (upstream's SetVolumeOwnership) and the sizes of memory volumes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, ResourceRequirements
from kubelet.cgroups import pod_memory_limit
from kubelet.volumes.ownership import set_volume_ownership, wanted_mode
from kubelet.volumes.tmpfs import _kernel_at_least, memory_volume_size, tmpfs_options

GID = 43210


@pytest.mark.parametrize(
    ("mode", "is_dir", "read_only", "expected"),
    [
        (0o644, False, True, 0o644),
        (0o400, False, True, 0o440),
        (0o600, False, True, 0o640),  # a private token: the group may read it
        (0o600, False, False, 0o660),
        (0o755, True, True, 0o2755),
        (0o700, True, False, 0o2770),
        (0o777, True, False, 0o2777),
        (0o1777, True, False, 0o3777),  # a tmpfs root keeps its sticky bit
    ],
)
def test_wanted_mode_is_upstreams_mask(
    mode: int, is_dir: bool, read_only: bool, expected: int
) -> None:
    assert wanted_mode(mode, is_dir=is_dir, read_only=read_only) == expected


def test_ownership_of_a_tree_never_leaves_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("host")
    os.chmod(outside, 0o600)
    vol = tmp_path / "vol"
    (vol / "d" / "e").mkdir(parents=True)
    (vol / "f").write_text("x")
    os.chmod(vol / "f", 0o600)
    (vol / "d" / "e" / "g").write_text("y")
    (vol / "link").symlink_to(outside)
    (vol / "d" / "dirlink").symlink_to(tmp_path)
    set_volume_ownership(str(vol), GID, read_only=False)
    for path in (vol, vol / "d", vol / "d" / "e", vol / "f", vol / "d" / "e" / "g"):
        assert path.lstat().st_gid == GID, path
    assert stat.S_IMODE((vol / "f").stat().st_mode) == 0o660
    assert stat.S_IMODE((vol / "d").stat().st_mode) & 0o2070 == 0o2070
    assert (vol / "link").lstat().st_gid == GID  # the link itself
    assert outside.stat().st_gid != GID and stat.S_IMODE(outside.stat().st_mode) == 0o600
    assert tmp_path.stat().st_gid != GID


def _pod(*limits: str, init: tuple[tuple[str, str | None], ...] = ()) -> Pod:
    def c(name: str, memory: str | None, restart: str | None = None) -> Container:
        res = ResourceRequirements(limits={"memory": memory}) if memory else None  # type: ignore[dict-item]
        return Container(name=name, image="i", resources=res, restart_policy=restart)

    return Pod(
        metadata=ObjectMeta(name="p", uid="u"),
        spec=PodSpec(
            containers=tuple(c(f"c{i}", m) for i, m in enumerate(limits)),
            init_containers=tuple(c(f"i{i}", m, r) for i, (m, r) in enumerate(init)),
        ),
    )


def test_pod_memory_limit() -> None:
    assert pod_memory_limit(_pod("100Mi", "50Mi")) == 150 * 2**20
    assert pod_memory_limit(_pod("100Mi", None)) is None  # one undeclared: no limit
    # an init container bigger than the rest sets the limit
    assert pod_memory_limit(_pod("100Mi", init=(("300Mi", None),))) == 300 * 2**20
    # a sidecar runs along: it adds up
    assert pod_memory_limit(_pod("100Mi", init=(("50Mi", "Always"),))) == 150 * 2**20
    assert pod_memory_limit(_pod("100Mi", init=(("50Mi", "Always"), ("120Mi", None)))) == (
        170 * 2**20
    )


def test_memory_volume_size_is_the_smallest() -> None:
    node = 8 * 2**30
    assert memory_volume_size(_pod("1Gi"), None, node) == 2**30
    assert memory_volume_size(_pod(None), None, node) == node
    assert memory_volume_size(_pod("1Gi"), "64Mi", node) == 64 * 2**20
    assert memory_volume_size(_pod("1Gi"), "2Gi", node) == 2**30  # sizeLimit above: ignored
    assert memory_volume_size(_pod(None), "0", node) == node


def test_tmpfs_options_have_no_mode() -> None:
    assert tmpfs_options(1024, True) == "size=1024,noswap"
    assert tmpfs_options(0, False) == ""
    assert _kernel_at_least("6.18.44-fc-v669", (6, 4))
    assert not _kernel_at_least("5.15.0-91-generic", (6, 4))
    assert _kernel_at_least("6.4", (6, 4))
