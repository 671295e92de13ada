"""replace_file: a checkpoint is the old one or the new one, never a torn mix."""

import os
import stat
from pathlib import Path

import pytest

from kubelet.atomicfile import replace_file


def test_the_file_is_written_whole_with_its_mode_and_directory(tmp_path: Path) -> None:
    target = tmp_path / "state" / "cpu_manager_state"
    replace_file(str(target), b"new", mode=0o600)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    replace_file(str(target), b"newer")
    assert target.read_bytes() == b"newer"
    assert os.listdir(target.parent) == ["cpu_manager_state"]  # no temporary left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "checkpoint"
    target.write_bytes(b"old")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        replace_file(str(target), b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["checkpoint"]


def test_a_symlink_in_place_of_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    (tmp_path / "dir").mkdir()
    target = tmp_path / "dir" / "checkpoint"
    target.symlink_to(outside)
    replace_file(str(target), b"new")
    assert outside.read_bytes() == b"keep"
    assert not target.is_symlink() and target.read_bytes() == b"new"
