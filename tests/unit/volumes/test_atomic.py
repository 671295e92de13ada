"""The atomic writer: timestamped directory, ..data swap, user-visible symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubelet.volumes.atomic import DATA_DIR, write_atomic
from kubelet.volumes.hostpath import VolumeError


def _ts_dirs(target: Path) -> list[str]:
    return sorted(p.name for p in target.iterdir() if p.name.startswith("..2"))


def test_first_write_layout(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    assert write_atomic(str(target), {"a": (b"1", 0o644), "dir/b": (b"2", 0o600)})
    data = target / DATA_DIR
    assert data.is_symlink()
    ts = os.readlink(data)
    assert ts.startswith("..") and "/" not in ts
    assert _ts_dirs(target) == [ts]
    assert os.readlink(target / "a") == "..data/a"
    assert os.readlink(target / "dir") == "..data/dir"
    assert (target / "a").read_bytes() == b"1"
    assert (target / "dir" / "b").read_bytes() == b"2"
    assert (target / "dir" / "b").stat().st_mode & 0o777 == 0o600
    assert (target / "a").stat().st_mode & 0o777 == 0o644
    assert not (target / "..data_tmp").exists()


def test_unchanged_payload_is_a_no_op(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    payload = {"a": (b"1", 0o644)}
    assert write_atomic(str(target), payload)
    before = os.readlink(target / DATA_DIR)
    assert not write_atomic(str(target), payload)
    assert os.readlink(target / DATA_DIR) == before


def test_update_swaps_and_removes_old(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    write_atomic(str(target), {"a": (b"1", 0o644), "gone": (b"x", 0o644), "d/x": (b"", 0o644)})
    old = os.readlink(target / DATA_DIR)
    assert write_atomic(str(target), {"a": (b"2", 0o644), "d/y": (b"y", 0o644)})
    new = os.readlink(target / DATA_DIR)
    assert new != old
    assert _ts_dirs(target) == [new]
    assert (target / "a").read_bytes() == b"2"
    assert not os.path.lexists(target / "gone")
    assert (target / "d" / "y").read_bytes() == b"y"
    assert not (target / "d" / "x").exists()


def test_mode_change_rewrites(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    write_atomic(str(target), {"a": (b"1", 0o644)})
    assert write_atomic(str(target), {"a": (b"1", 0o400)})
    assert (target / "a").stat().st_mode & 0o777 == 0o400


def test_removed_file_alone_rewrites(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    write_atomic(str(target), {"a": (b"1", 0o644), "b": (b"2", 0o644)})
    assert write_atomic(str(target), {"a": (b"1", 0o644)})
    assert sorted(os.listdir(target)) == sorted([DATA_DIR, "a", *_ts_dirs(target)])


def test_empty_payload(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    assert write_atomic(str(target), {})
    assert (target / DATA_DIR).is_dir()
    assert not write_atomic(str(target), {})
    write_atomic(str(target), {"a": (b"1", 0o644)})
    assert write_atomic(str(target), {})
    assert not os.path.lexists(target / "a")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/abs", "must be relative path"),
        ("a/../b", "must not contain '..'"),
        ("..hidden", "must not start with '..'"),
        ("", "must not be empty"),
    ],
)
def test_invalid_paths(tmp_path: Path, path: str, message: str) -> None:
    with pytest.raises(VolumeError, match=message):
        write_atomic(str(tmp_path / "vol"), {path: (b"", 0o644)})
    assert not (tmp_path / "vol").exists()
