"""hostPath type checks, emptyDir directories and mounts, pod directory clean-up."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, Volume, VolumeMount
from kubelet.api.pod import PodSecurityContext
from kubelet.cri import api
from kubelet.testing.builders import make_pod
from kubelet.volumes import MountConfigError, VolumeManager, pod_dir, subpath
from kubelet.volumes import manager as manager_module
from kubelet.volumes.hostpath import VolumeError, check_host_path
from kubelet.volumes.mounts import mounts_under


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
    return make_pod(
        Container(name="a", image="busybox", volume_mounts=mounts),
        name="p",
        volumes=(
            Volume(name="cache", empty_dir={}),
            Volume(name="host", host_path={"path": "/tmp"}),
            Volume(name="secret", secret={"secretName": "s", "optional": True}),
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


GID = 43210


class Objects:
    """ConfigMaps and Secrets by (namespace, name); edited by the tests."""

    def __init__(self) -> None:
        self.config_maps: dict[tuple[str, str], dict[str, str]] = {}
        self.secrets: dict[tuple[str, str], dict[str, bytes]] = {}

    async def config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        return self.config_maps.get((namespace, name))

    async def secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        return self.secrets.get((namespace, name))


class Tokens:
    async def token(
        self,
        namespace: str,
        service_account: str,
        audience: str,
        expiration_seconds: int,
        pod_name: str = "",
        pod_uid: str = "",
    ) -> tuple[str, float]:
        return "header.payload.sig", 0.0


def pod_of(
    volumes: tuple[Volume, ...],
    mounts: tuple[VolumeMount, ...],
    *,
    init: tuple[VolumeMount, ...] = (),
    security: PodSecurityContext | None = None,
    uid: str = "uid-1",
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid=uid),
        spec=PodSpec(
            init_containers=(Container(name="init", image="b", volume_mounts=init),)
            if init
            else (),
            containers=(Container(name="app", image="b", volume_mounts=mounts),),
            volumes=volumes,
            security_context=security,
        ),
    )


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[VolumeManager]:
    objects = Objects()
    m = VolumeManager(
        str(tmp_path), lookup=objects, tokens=Tokens(), node_allocatable={"memory": str(2**30)}
    )
    m.objects = objects  # type: ignore[attr-defined]
    try:
        yield m
    finally:
        for uid in m.pod_uids_on_disk():
            m.cleanup(uid)


UNSUPPORTED = [
    ("csi", Volume(name="v", csi={"driver": "d"})),
    ("nfs", Volume(name="v", nfs={"server": "s", "path": "/"})),
    ("image", Volume(name="v", image={"reference": "r"})),
    ("iscsi", Volume(name="v", iscsi={})),
    ("scaleIO", Volume(name="v", scale_io={})),
    ("gitRepo", Volume(name="v", git_repo={"repository": "r"})),
]


@pytest.mark.parametrize(("kind", "volume"), UNSUPPORTED)
async def test_a_volume_type_the_kubelet_does_not_provide_keeps_the_pod_waiting(
    manager: VolumeManager, kind: str, volume: Volume
) -> None:
    p = pod_of((volume, Volume(name="ok", empty_dir={})), (VolumeMount(name="v", mount_path="/v"),))
    result = await manager.prepare(p)
    assert not result.ready and result.unmounted == ("v",)
    assert result.events == (
        "Unable to attach or mount volumes: unmounted volumes=[v], unattached volumes=[], "
        'failed to process volumes=[v]: failed to get Plugin from volumeSpec for volume "v" '
        f"err=no volume plugin matched: {kind} volumes are not supported by this kubelet",
    )
    assert result.error == result.events[0]


async def test_a_manifest_iscsi_volume_is_not_a_volume_without_source() -> None:
    from kubelet.api import from_wire

    p = from_wire(
        Pod, {"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", "iscsi": {}}]}}
    )
    (volume,) = p.spec.volumes
    assert volume.iscsi == {} and volume.empty_dir is None


async def test_volumes_no_container_mounts_are_left_alone(
    manager: VolumeManager, tmp_path: Path
) -> None:
    p = pod_of(
        (Volume(name="nfs", nfs={}), Volume(name="unused", empty_dir={})),
        (),
    )
    result = await manager.prepare(p)
    assert result.ready and result.paths == {}
    assert not (tmp_path / "pods" / "uid-1" / "volumes" / "kubernetes.io~empty-dir").exists()


async def test_init_container_mounts_count(manager: VolumeManager) -> None:
    p = pod_of(
        (Volume(name="work", empty_dir={}),), (), init=(VolumeMount(name="work", mount_path="/w"),)
    )
    result = await manager.prepare(p)
    assert set(result.paths) == {"work"}
    (mount,) = manager.mounts(p, p.spec.init_containers[0], result, {})
    assert mount.host_path == result.paths["work"] and not mount.readonly


async def test_api_volumes_are_read_only_whatever_the_mount_says(manager: VolumeManager) -> None:
    manager.objects.config_maps[("ns", "cm")] = {"k": "v"}  # type: ignore[attr-defined]
    p = pod_of(
        (
            Volume(name="cm", config_map={"name": "cm"}),
            Volume(
                name="dw",
                downward_api={"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]},
            ),
            Volume(name="pj", projected={"sources": [{"serviceAccountToken": {"path": "t"}}]}),
            Volume(name="ed", empty_dir={}),
        ),
        (
            VolumeMount(name="cm", mount_path="/cm", read_only=False),
            VolumeMount(name="cm", mount_path="/k", sub_path="k"),
            VolumeMount(name="dw", mount_path="/dw"),
            VolumeMount(name="pj", mount_path="/pj"),
            VolumeMount(name="ed", mount_path="/ed"),
        ),
    )
    result = await manager.prepare(p)
    mounts = manager.mounts(p, p.spec.containers[0], result, {})
    assert [m.readonly for m in mounts] == [True, True, True, True, False]
    # the subPath of a configMap key: its symlink into ..data is followed, inside
    assert Path(mounts[1].host_path).read_text() == "v"


async def test_fs_group_on_api_volumes_at_every_write(manager: VolumeManager) -> None:
    objects = manager.objects  # type: ignore[attr-defined]
    objects.secrets[("ns", "s")] = {"pw": b"one"}
    p = pod_of(
        (
            Volume(name="s", secret={"secretName": "s", "defaultMode": 0o400}),
            Volume(name="t", projected={"sources": [{"serviceAccountToken": {"path": "token"}}]}),
        ),
        (VolumeMount(name="s", mount_path="/s"), VolumeMount(name="t", mount_path="/t")),
        security=PodSecurityContext(fs_group=GID, run_as_user=1001),
    )
    result = await manager.prepare(p)
    secret = Path(result.paths["s"])
    token = Path(result.paths["t"]) / "token"

    def check() -> None:
        for path in (secret, secret / "..data", secret / "pw"):
            assert path.stat().st_gid == GID, path
        assert stat.S_IMODE((secret / "pw").stat().st_mode) == 0o440
        assert secret.stat().st_mode & stat.S_ISGID
        assert stat.S_IMODE(token.stat().st_mode) == 0o640  # 0600 for fsGroup, then g+r
        assert (token.stat().st_uid, token.stat().st_gid) == (1001, GID)

    check()
    first = os.readlink(secret / "..data")
    objects.secrets[("ns", "s")] = {"pw": b"two"}
    await manager.prepare(p)
    assert os.readlink(secret / "..data") != first and (secret / "pw").read_bytes() == b"two"
    check()  # the new files carry the group too
    await manager.prepare(p)  # nothing changed: nothing rewritten, nothing undone
    assert (secret / "pw").read_bytes() == b"two"
    check()


async def test_fs_group_on_empty_dir_once(manager: VolumeManager) -> None:
    p = pod_of(
        (Volume(name="e", empty_dir={}), Volume(name="m", empty_dir={"medium": "Memory"})),
        (VolumeMount(name="e", mount_path="/e"), VolumeMount(name="m", mount_path="/m")),
        security=PodSecurityContext(fs_group=GID, fs_group_change_policy="OnRootMismatch"),
    )
    result = await manager.prepare(p)
    for name in ("e", "m"):
        info = os.stat(result.paths[name])
        assert info.st_gid == GID and info.st_mode & stat.S_ISGID and info.st_mode & 0o070 == 0o070
    assert stat.S_IMODE(os.stat(result.paths["m"]).st_mode) == 0o3777  # tmpfs 1777 + group
    assert stat.S_IMODE(os.stat(result.paths["e"]).st_mode) == 0o2777
    restarted = VolumeManager(manager.root_dir)  # a restarted kubelet: the volumes stay
    again = await restarted.prepare(p)
    assert stat.S_IMODE(os.stat(again.paths["m"]).st_mode) == 0o3777
    assert stat.S_IMODE(os.stat(again.paths["e"]).st_mode) == 0o2777


async def test_memory_volumes_are_tmpfs_with_upstreams_options(manager: VolumeManager) -> None:
    p = pod_of(
        (Volume(name="m", empty_dir={"medium": "Memory", "sizeLimit": "64Mi"}),),
        (VolumeMount(name="m", mount_path="/m"),),
    )
    result = await manager.prepare(p)
    path = result.paths["m"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o1777  # no mode option: tmpfs's default
    with open("/proc/self/mountinfo") as fh:
        (line,) = [entry for entry in fh if entry.split()[4] == path]
    assert "size=65536k" in line and "tmpfs" in line


async def test_first_setup_failure_waits_later_refresh_failure_does_not(
    manager: VolumeManager,
) -> None:
    objects = manager.objects  # type: ignore[attr-defined]
    p = pod_of(
        (Volume(name="cm", config_map={"name": "cm"}),), (VolumeMount(name="cm", mount_path="/c"),)
    )
    result = await manager.prepare(p)
    assert result.unmounted == ("cm",)
    assert result.events == ('MountVolume.SetUp failed for volume "cm" : configmap "cm" not found',)
    objects.config_maps[("ns", "cm")] = {"k": "1"}
    result = await manager.prepare(p)
    assert result.ready and not result.events
    del objects.config_maps[("ns", "cm")]
    result = await manager.prepare(p)
    assert result.ready and result.events  # reported, the old files stay
    assert (Path(result.paths["cm"]) / "k").read_text() == "1"


async def test_mount_errors_are_container_config_errors(manager: VolumeManager) -> None:
    p = pod_of(
        (Volume(name="e", empty_dir={}),),
        (
            VolumeMount(name="e", mount_path="/ok", sub_path="fine"),
            VolumeMount(name="e", mount_path="/x", sub_path_expr="$(WHERE)"),
        ),
    )
    result = await manager.prepare(p)
    container = p.spec.containers[0]
    mounts = manager.mounts(p, container, result, {"WHERE": "per-pod"})
    assert mounts[1].host_path.endswith("/volume-subpaths/e/app/1")
    for env, message in (
        ({}, "missing value for WHERE"),
        ({"WHERE": "/etc"}, "error SubPath `/etc` must not be an absolute path"),
        ({"WHERE": "../../x"}, "unable to provision SubPath `../../x`: must not contain '..'"),
    ):
        with pytest.raises(MountConfigError) as info:
            manager.mounts(p, container, result, env)
        assert str(info.value) == message
    os.symlink("/", os.path.join(result.paths["e"], "esc"))
    bad = pod_of(
        (Volume(name="e", empty_dir={}),),
        (
            VolumeMount(name="e", mount_path="/ok", sub_path="fine2"),
            VolumeMount(name="e", mount_path="/x", sub_path="esc/etc"),
        ),
    )
    with pytest.raises(MountConfigError) as info:
        manager.mounts(bad, bad.spec.containers[0], result, {})
    assert str(info.value) == 'failed to prepare subPath for volumeMount "e" of container "app"'
    # nothing of the container that is not created stays mounted, not even its good mount
    app = os.path.dirname(mounts[1].host_path)
    assert mounts_under(app) == [os.path.join(app, "1")]  # the earlier start's mount
    assert not os.path.exists(os.path.join(app, "0"))


@pytest.mark.parametrize(
    ("mount", "message"),
    [
        (
            VolumeMount(name="e", mount_path="/x", mount_propagation="Sideways"),
            'invalid MountPropagation mode: "Sideways"',
        ),
        (
            VolumeMount(name="e", mount_path="/x", read_only=True, recursive_read_only="Enabled"),
            'failed to resolve recursive read-only mode: volume "e" requested recursive '
            "read-only mode, but it is not supported by the runtime",
        ),
        (
            VolumeMount(name="e", mount_path="/x", recursive_read_only="IfPossible"),
            'failed to resolve recursive read-only mode: volume "e" requested recursive '
            "read-only mode, but it is not read-only",
        ),
    ],
)
async def test_mount_options_refused(
    manager: VolumeManager, mount: VolumeMount, message: str
) -> None:
    p = pod_of((Volume(name="e", empty_dir={}),), (mount,))
    result = await manager.prepare(p)
    with pytest.raises(MountConfigError) as info:
        manager.mounts(p, p.spec.containers[0], result, {})
    assert str(info.value) == message


async def test_if_possible_recursive_read_only_is_a_read_only_mount(manager: VolumeManager) -> None:
    mount = VolumeMount(name="e", mount_path="/x", read_only=True, recursive_read_only="IfPossible")
    p = pod_of((Volume(name="e", empty_dir={}),), (mount,))
    result = await manager.prepare(p)
    (out,) = manager.mounts(p, p.spec.containers[0], result, {})
    assert out.readonly


async def test_cleanup_unmounts_before_removing_and_spares_bind_sources(
    manager: VolumeManager, tmp_path: Path
) -> None:
    """An orphaned pod directory with a subPath bind mount of a host directory: the
    mount goes, the host directory and its files stay."""
    host = tmp_path / "host-data"
    (host / "sub").mkdir(parents=True)
    (host / "sub" / "precious").write_text("keep me")
    p = pod_of(
        (
            Volume(name="h", host_path={"path": str(host)}),
            Volume(name="m", empty_dir={"medium": "Memory"}),
        ),
        (
            VolumeMount(name="h", mount_path="/h", sub_path="sub"),
            VolumeMount(name="m", mount_path="/m"),
        ),
        uid="orphan",
    )
    result = await manager.prepare(p)
    manager.mounts(p, p.spec.containers[0], result, {})
    pod = tmp_path / "pods" / "orphan"
    assert len(mounts_under(str(pod))) == 2
    fresh = VolumeManager(str(tmp_path))  # a restarted kubelet: nothing in memory
    assert fresh.cleanup("orphan")
    assert not pod.exists() and not mounts_under(str(pod))
    assert (host / "sub" / "precious").read_text() == "keep me"


async def test_cleanup_keeps_everything_while_a_mount_stays(
    manager: VolumeManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = tmp_path / "host-data"
    host.mkdir()
    (host / "precious").write_text("keep me")
    p = pod_of(
        (Volume(name="h", host_path={"path": str(tmp_path)}),),
        (VolumeMount(name="h", mount_path="/h", sub_path="host-data"),),
    )
    result = await manager.prepare(p)
    manager.mounts(p, p.spec.containers[0], result, {})
    monkeypatch.setattr(subpath, "unmount", lambda path: None)  # a mount that will not go
    monkeypatch.setattr(manager_module, "unmount", lambda path: None)
    assert not manager.cleanup("uid-1")
    assert (host / "precious").read_text() == "keep me"
    assert (tmp_path / "pods" / "uid-1").is_dir()
    monkeypatch.undo()
    assert manager.cleanup("uid-1")
    assert (host / "precious").read_text() == "keep me"


async def test_a_raw_block_device_waits_like_a_mount(manager: VolumeManager) -> None:
    p = pod_of((Volume(name="blk", persistent_volume_claim={"claimName": "c"}),), ())
    p = attrs.evolve(
        p,
        spec=attrs.evolve(
            p.spec,
            containers=(
                Container(
                    name="app", image="b", volume_devices=({"name": "blk", "devicePath": "/dev/x"},)
                ),
            ),
        ),
    )
    result = await manager.prepare(p)
    assert result.unmounted == ("blk",)


@pytest.mark.parametrize(
    ("medium", "message"),
    [
        ("HugePages-2Mi", 'emptyDir medium "HugePages-2Mi" is not supported by this kubelet'),
        ("Tape", 'unknown storage medium "Tape"'),
    ],
)
async def test_empty_dir_media_the_kubelet_does_not_have(
    manager: VolumeManager, medium: str, message: str
) -> None:
    p = pod_of(
        (Volume(name="e", empty_dir={"medium": medium}),), (VolumeMount(name="e", mount_path="/e"),)
    )
    result = await manager.prepare(p)
    assert result.unmounted == ("e",)
    assert result.events == (f'MountVolume.SetUp failed for volume "e" : {message}',)
