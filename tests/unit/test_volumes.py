"""hostPath type checks, emptyDir directories and mounts, pod directory clean-up."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from kubelet.api.meta import ObjectMeta
from kubelet.api.pod import Container, Pod, PodSpec, Volume, VolumeMount
from kubelet.cri import api
from kubelet.volumes.hostpath import VolumeError, check_host_path
from kubelet.volumes.manager import VolumeManager
from kubelet.volumes.paths import pod_dir


def test_host_path_types(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    assert check_host_path({"path": str(directory), "type": "DirectoryOrCreate"}) == str(directory)
    assert directory.is_dir()
    target = tmp_path / "sub" / "f"
    check_host_path({"path": str(target), "type": "FileOrCreate"})
    assert target.is_file()
    check_host_path({"path": str(target), "type": "File"})
    check_host_path({"path": str(tmp_path / "whatever")})  # no type: no check
    with pytest.raises(
        VolumeError, match=f"hostPath type check failed: {target} is not a directory"
    ):
        check_host_path({"path": str(target), "type": "Directory"})
    with pytest.raises(VolumeError, match="is not a file"):
        check_host_path({"path": str(directory), "type": "File"})
    with pytest.raises(VolumeError, match="is not a socket file"):
        check_host_path({"path": str(target), "type": "Socket"})
    with pytest.raises(VolumeError, match="is not a character device"):
        check_host_path({"path": str(target), "type": "CharDevice"})
    with pytest.raises(VolumeError, match="is not a block device"):
        check_host_path({"path": "/dev/null", "type": "BlockDevice"})
    check_host_path({"path": "/dev/null", "type": "CharDevice"})
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        check_host_path({"path": str(sock_path), "type": "Socket"})


def pod() -> Pod:
    mounts = (
        VolumeMount(name="cache", mount_path="/cache"),
        VolumeMount(name="cache", mount_path="/logs", sub_path="logs", read_only=True),
        VolumeMount(name="host", mount_path="/host", mount_propagation="HostToContainer"),
        VolumeMount(name="secret", mount_path="/secret"),
    )
    return Pod(
        metadata=ObjectMeta(name="p", namespace="default", uid="uid-1"),
        spec=PodSpec(
            containers=(Container(name="a", image="busybox", volume_mounts=mounts),),
            volumes=(
                Volume(name="cache", empty_dir={}),
                Volume(name="host", host_path={"path": "/tmp"}),
                Volume(name="secret", secret={"secretName": "s", "optional": True}),
            ),
        ),
    )


async def test_empty_dir_host_path_and_mounts(tmp_path: Path) -> None:
    manager = VolumeManager(str(tmp_path))
    p = pod()
    try:
        await check_volumes(manager, p, tmp_path)
    finally:
        manager.cleanup("uid-1")  # never leave a tmpfs mounted behind a failed test
    assert not Path(pod_dir(str(tmp_path), "uid-1")).exists()
    manager.cleanup("uid-1")  # idempotent


async def check_volumes(manager: VolumeManager, p: Pod, tmp_path: Path) -> None:
    volumes = await manager.prepare(p)
    cache = tmp_path / "pods" / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    secret = tmp_path / "pods" / "uid-1" / "volumes" / "kubernetes.io~secret" / "secret"
    assert volumes.paths == {"cache": str(cache), "host": "/tmp", "secret": str(secret)}
    assert volumes.ready and not volumes.events
    assert (secret / "..data").is_symlink()  # optional and missing: an empty volume
    assert cache.is_dir() and (os.stat(cache).st_mode & 0o777) == 0o777
    mounts = manager.mounts(p, p.spec.containers[0], volumes, {})
    logs = tmp_path / "pods" / "uid-1" / "volume-subpaths" / "cache" / "a" / "1"
    assert [(m.container_path, m.host_path, m.readonly) for m in mounts] == [
        ("/cache", str(cache), False),
        ("/logs", str(logs), True),
        ("/host", "/tmp", False),
        ("/secret", str(secret), True),  # a secret is read-only whatever the mount says
    ]
    assert mounts[2].propagation == api.PROPAGATION_HOST_TO_CONTAINER
    assert (cache / "logs").is_dir()
    assert os.stat(logs).st_ino == os.stat(cache / "logs").st_ino  # the bind mount
    assert (await manager.prepare(p)).paths == volumes.paths  # idempotent
