"""fileKeyRef env files read from a real emptyDir a hostile container has prepared:
nothing outside the volume is ever read, nothing blocks, nothing large is read."""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from kubelet.api import Volume
from kubelet.env import CREATE_CONTAINER_CONFIG_ERROR, MAX_ENV_FILE_BYTES, EnvError
from kubelet.testing.builders import make_container, make_pod
from kubelet.volumes import PodEnvFiles, PodVolumes
from kubelet.volumes.envfiles import read_in_volume
from kubelet.volumes.subpath import UnsafeSubPath

SECRET = b"HOST_SECRET='root:$6$never-to-be-read'\n"


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    """An emptyDir holding one good env file, next to a host file it must never show."""
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "shadow").write_bytes(SECRET)
    root = tmp_path / "pod" / "volumes" / "kubernetes.io~empty-dir" / "cfg"
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "app.env").write_bytes(b"COLOR='blue'\n")
    return root


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail (instead of hanging the suite) if a read blocks: SIGALRM interrupts it."""

    def expire(signum: int, frame: FrameType | None) -> None:
        pytest.fail("the env file read blocked")  # not an OSError: nothing catches it

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def pod_files(volume: Path, **extra: str) -> PodEnvFiles:
    volumes = (
        Volume(name="cfg", empty_dir={}),
        Volume(name="host", host_path={"path": str(volume.parent)}),
        Volume(name="unused", empty_dir={}),
    )
    pod = make_pod(make_container(), volumes=volumes)
    paths = {"cfg": str(volume), "host": str(volume.parent), **extra}
    return PodEnvFiles(pod, PodVolumes(paths))


def refused(files: PodEnvFiles, volume: str, path: str) -> str:
    with pytest.raises(EnvError) as info:
        files.read(volume, path)
    assert info.value.reason == CREATE_CONTAINER_CONFIG_ERROR
    return info.value.message


def test_reads_the_file_and_names_its_node_path(volume: Path) -> None:
    assert pod_files(volume).read("cfg", "conf/app.env") == (
        str(volume / "conf" / "app.env"),
        b"COLOR='blue'\n",
    )


def test_symlinks_inside_the_volume_are_followed(volume: Path) -> None:
    (volume / "current").symlink_to("conf")
    (volume / "link.env").symlink_to("current/app.env")
    (volume / "abs.env").symlink_to(volume / "conf" / "app.env")  # absolute, yet inside
    files = pod_files(volume)
    assert files.read("cfg", "link.env")[1] == b"COLOR='blue'\n"
    assert files.read("cfg", "abs.env")[1] == b"COLOR='blue'\n"


@pytest.mark.parametrize(
    "plant",
    [
        pytest.param(lambda v, host: (v / "shadow.env").symlink_to(host / "shadow"), id="abs"),
        pytest.param(
            lambda v, host: (v / "shadow.env").symlink_to("../../../../host/shadow"), id="rel"
        ),
        pytest.param(lambda v, host: (v / "shadow.env").symlink_to("/etc/shadow"), id="etc"),
        pytest.param(lambda v, host: (v / "d").symlink_to(host), id="dir"),
    ],
)
def test_symlinks_out_of_the_volume_are_refused(volume: Path, plant: object) -> None:
    host = volume.parents[3] / "host"
    plant(volume, host)  # type: ignore[operator]
    path = "d/shadow" if (volume / "d").is_symlink() else "shadow.env"
    with pytest.raises(UnsafeSubPath, match="leaves"):
        read_in_volume(str(volume), path, MAX_ENV_FILE_BYTES)
    assert refused(pod_files(volume), "cfg", path) == "couldn't parse env file"


def test_dot_dot_never_climbs_out(volume: Path) -> None:
    with pytest.raises(UnsafeSubPath, match="leaves the volume"):
        read_in_volume(str(volume), "conf/../../../../host/shadow", MAX_ENV_FILE_BYTES)


def test_a_fifo_is_refused_without_blocking(volume: Path, no_hang: None) -> None:
    os.mkfifo(volume / "pipe.env")
    (volume / "to-pipe.env").symlink_to("pipe.env")
    files = pod_files(volume)
    assert refused(files, "cfg", "pipe.env") == "couldn't parse env file"
    assert refused(files, "cfg", "to-pipe.env") == "couldn't parse env file"


@pytest.mark.parametrize("path", ["conf", "", "dev-null.env", "null.env"])
def test_only_regular_files_are_read(volume: Path, no_hang: None, path: str) -> None:
    (volume / "dev-null.env").symlink_to("/dev/null")
    if path == "null.env":  # the suite runs as root, as CI does
        # a container with CAP_MKNOD (a runtime default) can make a node of any device
        os.mknod(volume / "null.env", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    assert refused(pod_files(volume), "cfg", path) == "couldn't parse env file"


def test_a_huge_file_is_not_read_past_the_limit(volume: Path) -> None:
    with open(volume / "huge.env", "wb") as f:
        f.truncate(64 << 20)  # 64 MiB, sparse
    data = read_in_volume(str(volume), "huge.env", MAX_ENV_FILE_BYTES)
    assert len(data) == MAX_ENV_FILE_BYTES + 1  # one byte over: the parser refuses it


def test_a_missing_file_creates_nothing(volume: Path) -> None:
    files = pod_files(volume)
    assert refused(files, "cfg", "new/dir/app.env") == "couldn't parse env file"
    assert refused(files, "cfg", "conf/missing.env") == "couldn't parse env file"
    assert not (volume / "new").exists()


def test_the_volume_must_be_a_set_up_emptydir_of_the_pod(volume: Path) -> None:
    files = pod_files(volume)
    assert refused(files, "nope", "conf/app.env") == (
        'cannot find the volume "nope" referenced by FileKeyRef'
    )
    # in the spec but mounted by no container, so never set up (upstream: not mounted)
    assert refused(files, "unused", "conf/app.env") == (
        'cannot find the volume "unused" referenced by FileKeyRef'
    )
    assert refused(files, "host", "cfg/conf/app.env") == (
        'volume "host" referenced by FileKeyRef is not an emptyDir'
    )
    assert refused(PodEnvFiles(files.pod, None), "cfg", "conf/app.env") == (
        'cannot find the volume "cfg" referenced by FileKeyRef'
    )
