"""subPath: the checks and the expansion (pure), the walk against symlinks planted in a
real directory, and the bind mounts (real mounts: the tests run as root)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelet.volumes import MountConfigError, subpath
from kubelet.volumes.mounts import is_mount_point, mounts_under
from kubelet.volumes.subpath import (
    SubPathCreateError,
    UnsafeSubPath,
    bind_target,
    check_sub_path,
    clean_sub_paths,
    effective_sub_path,
    expand_sub_path_expr,
    open_in_volume,
    prepare_sub_path,
)

# -- decisions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "env", "expected"),
    [
        ("$(POD_NAME)", {"POD_NAME": "web-0"}, "web-0"),
        ("logs/$(POD_NAME)/$(NS)", {"POD_NAME": "web-0", "NS": "prod"}, "logs/web-0/prod"),
        ("plain", {}, "plain"),
        ("$$(POD_NAME)", {"POD_NAME": "x"}, "$(POD_NAME)"),  # $$ escapes
        ("a$(", {}, "a$("),  # unterminated: kept as written
        ("$(UP)/x", {"UP": ".."}, "../x"),  # expansion itself does not judge
    ],
)
def test_sub_path_expr_expansion(expr: str, env: dict[str, str], expected: str) -> None:
    assert expand_sub_path_expr(expr, env) == expected


def test_sub_path_expr_missing_or_empty_variables_are_errors() -> None:
    with pytest.raises(MountConfigError, match=r"^missing value for A, B$"):
        expand_sub_path_expr("$(B)/$(A)/$(C)", {"C": "c", "A": ""})


@pytest.mark.parametrize(
    ("sub_path", "message"),
    [
        ("/etc", "error SubPath `/etc` must not be an absolute path"),
        ("..", "unable to provision SubPath `..`: must not contain '..'"),
        ("a/../../b", "unable to provision SubPath `a/../../b`: must not contain '..'"),
        ("a/..", "unable to provision SubPath `a/..`: must not contain '..'"),
    ],
)
def test_sub_path_checks(sub_path: str, message: str) -> None:
    with pytest.raises(MountConfigError) as info:
        check_sub_path(sub_path)
    assert str(info.value) == message


@pytest.mark.parametrize("sub_path", ["a", "a/b", "..a", "a..", "a/..b/c", "./a"])
def test_sub_path_checks_accept(sub_path: str) -> None:
    check_sub_path(sub_path)


def test_effective_sub_path_expr_is_checked_after_expansion() -> None:
    assert effective_sub_path("", "", {}) == ""
    assert effective_sub_path("data", "", {}) == "data"
    assert effective_sub_path("", "$(NAME)", {"NAME": "n"}) == "n"
    with pytest.raises(MountConfigError, match="must not be an absolute path"):
        effective_sub_path("", "$(ROOT)", {"ROOT": "/"})
    with pytest.raises(MountConfigError, match=r"must not contain '\.\.'"):
        effective_sub_path("", "x/$(UP)", {"UP": ".."})


def test_sub_path_and_expr_together_are_refused() -> None:
    with pytest.raises(MountConfigError, match=r"^subPathExpr and subPath are mutually exclusive$"):
        effective_sub_path("a", "$(B)", {"B": "b"})


def test_bind_target_layout() -> None:
    assert bind_target("/r/pods/u", "data", "app", 3) == "/r/pods/u/volume-subpaths/data/app/3"


# -- the walk -------------------------------------------------------------------------------


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    """A volume with a host-only file beside it and symlinks of every kind inside."""
    (tmp_path / "host-only").write_text("secret of the host")
    vol = tmp_path / "vol"
    (vol / "real" / "inner").mkdir(parents=True)
    (vol / "real" / "file").write_text("inside")
    (vol / "real" / "abs-escape").symlink_to("/")
    (vol / "real" / "up").symlink_to("../..")  # vol/real/../.. = outside
    (vol / "real" / "sibling").symlink_to("../real/inner")  # stays inside
    (vol / "rel").symlink_to("real")
    (vol / "abs-inside").symlink_to(str(vol / "real"))
    (vol / "host").symlink_to(str(tmp_path))
    (vol / "loop1").symlink_to("loop2")
    (vol / "loop2").symlink_to("loop1")
    (vol / "self").symlink_to("self")
    (vol / "dangling").symlink_to("nowhere")
    return vol


def where(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("sub_path", "expected"),
    [
        ("real", "real"),
        ("real/file", "real/file"),
        ("rel/inner", "real/inner"),  # a relative symlink that stays inside
        ("real/sibling", "real/inner"),
        ("abs-inside/inner", "real/inner"),  # an absolute one naming the volume
        ("real/inner/../file", "real/file"),
        (".", ""),
    ],
)
def test_walk_follows_symlinks_that_stay_inside(volume: Path, sub_path: str, expected: str) -> None:
    assert where(open_in_volume(str(volume), sub_path)) == str(volume / expected).rstrip("/")


@pytest.mark.parametrize(
    ("sub_path", "why"),
    [
        ("real/abs-escape", "leaves"),  # absolute symlink to /
        ("real/abs-escape/etc", "leaves"),
        ("host/host-only", "leaves"),  # absolute symlink to the volume's parent
        ("real/up", "leaves"),  # relative symlink climbing out
        ("real/up/host-only", "leaves"),
        ("..", "leaves"),
        ("real/../..", "leaves"),
        ("loop1", "too many levels"),
        ("self/x", "too many levels"),
        ("real/file/x", "not a directory"),
        ("dangling", "does not exist"),  # not created through a symlink
    ],
)
def test_walk_refuses_what_leaves_the_volume(volume: Path, sub_path: str, why: str) -> None:
    with pytest.raises(UnsafeSubPath, match=why):
        open_in_volume(str(volume), sub_path)
    assert not (volume.parent / "nowhere").exists()


def test_walk_creates_missing_directories_with_the_volume_mode(volume: Path) -> None:
    os.chmod(volume, 0o2775)
    fd = open_in_volume(str(volume), "new/deeper")
    assert where(fd) == str(volume / "new" / "deeper")
    for made in (volume / "new", volume / "new" / "deeper"):
        assert made.is_dir() and not made.is_symlink()
        assert made.stat().st_mode & 0o7777 == 0o2775
    # below an inside symlink too, but never below one that leaves
    assert where(open_in_volume(str(volume), "rel/made")) == str(volume / "real" / "made")
    with pytest.raises(UnsafeSubPath):
        open_in_volume(str(volume), "real/abs-escape/tmp/created-outside")
    assert not Path("/tmp/created-outside").exists()


def test_walk_create_failure_is_its_own_error(volume: Path) -> None:
    from kubelet.volumes.mounts import mount, unmount

    (volume / "ro").mkdir()
    mount("tmpfs", str(volume / "ro"), "tmpfs", 1)  # MS_RDONLY
    try:
        with pytest.raises(SubPathCreateError, match="Read-only file system"):
            open_in_volume(str(volume), "ro/x")
    finally:
        unmount(str(volume / "ro"))


def test_a_directory_swapped_for_a_symlink_mid_walk_is_never_followed_out(
    volume: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: once a component is open, replacing it by a symlink to / changes
    nothing: the walk goes on from the descriptor it holds."""
    real_open = os.open
    swapped: list[str] = []

    def racing_open(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if path == "real" and dir_fd is not None and not swapped:
            os.rename(volume / "real", volume / "moved")
            (volume / "real").symlink_to("/")
            swapped.append(path)
        return fd

    monkeypatch.setattr(subpath.os, "open", racing_open)
    result = where(open_in_volume(str(volume), "real/inner"))
    assert swapped
    assert result == str(volume / "moved" / "inner")  # inside: the directory it opened


def test_a_symlink_planted_before_the_walk_is_refused(volume: Path) -> None:
    os.rename(volume / "real", volume / "moved")
    (volume / "real").symlink_to("/")
    with pytest.raises(UnsafeSubPath):
        open_in_volume(str(volume), "real/etc")


# -- the bind mounts ------------------------------------------------------------------------


@pytest.fixture
def pod_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pods" / "uid"
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        for point in mounts_under(str(tmp_path)):
            os.system(f"umount -l '{point}'")


def test_prepare_binds_the_checked_file_and_clean_removes_only_the_mounts(
    volume: Path, pod_dir: Path
) -> None:
    target = bind_target(str(pod_dir), "data", "app", 0)
    assert prepare_sub_path(str(volume), "rel/inner", target) == target
    assert is_mount_point(target)
    assert os.stat(target).st_ino == (volume / "real" / "inner").stat().st_ino
    assert (pod_dir / "volume-subpaths").stat().st_mode & 0o777 == 0o750
    # a file: bound onto a file target (0640)
    file_target = bind_target(str(pod_dir), "data", "app", 1)
    prepare_sub_path(str(volume), "real/file", file_target)
    assert Path(file_target).read_text() == "inside"
    # again: the mount of the same file is kept
    prepare_sub_path(str(volume), "rel/inner", target)
    assert mounts_under(str(pod_dir)).count(target) == 1
    # the volume changes: the next start gets a mount of what the path is now
    (volume / "real" / "inner").rename(volume / "real" / "old")
    (volume / "real" / "inner").mkdir()
    prepare_sub_path(str(volume), "real/inner", target)
    assert os.stat(target).st_ino == (volume / "real" / "inner").stat().st_ino
    assert mounts_under(str(pod_dir)).count(target) == 1  # replaced, not stacked
    (volume / "real" / "inner" / "keep").write_text("x")
    clean_sub_paths(str(pod_dir))
    assert not (pod_dir / "volume-subpaths").exists()
    assert not mounts_under(str(pod_dir))
    assert (volume / "real" / "inner" / "keep").read_text() == "x"  # the source stays
    assert (volume / "real" / "file").read_text() == "inside"


def test_a_refused_sub_path_mounts_nothing(volume: Path, pod_dir: Path) -> None:
    target = bind_target(str(pod_dir), "data", "app", 0)
    with pytest.raises(UnsafeSubPath):
        prepare_sub_path(str(volume), "real/abs-escape", target)
    assert not mounts_under(str(pod_dir))
    assert not Path(target).exists()
