"""Volumes on real containerd: init containers share an emptyDir with the main one, a
container racing symlinks into a shared volume never gets the host's root mounted,
configMaps are read-only, fsGroup owns the volumes, a volume the kubelet cannot provide
keeps its pod waiting, and nothing stays mounted after the pods (or an orphaned pod
directory) are gone."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, api, labels
from kubelet.cri.__main__ import cleanup
from kubelet.volumes.mounts import mounts_under

from .cluster import Processes, node_registered
from .test_kubelet_containerd import BUSYBOX, LOOP, KubeletProcess

pytestmark = pytest.mark.containerd


@pytest.fixture
async def node(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[KubeletProcess]:
    """A standalone kubelet process (test_kubelet_containerd's), stopped and its pods
    removed at the end."""
    runtime, _ = cri
    process = KubeletProcess(runtime, short_tmp, f"e2e-{uuid.uuid4().hex[:6]}")
    process.manifests.mkdir()
    try:
        yield process
    finally:
        if process.proc is not None and process.proc.poll() is None:
            process.stop(signal.SIGKILL)
        await cleanup(runtime, kubelet_only=True)


async def sh(runtime: RuntimeClient, cid: str, script: str) -> api.ExecSyncResponse:
    return await runtime.exec_sync(cid, ["sh", "-c", script], timeout=10)


async def test_init_container_writes_main_container_reads(node: KubeletProcess) -> None:
    node.start()
    node.write(
        "init.yaml",
        textwrap.dedent(
            f"""\
            apiVersion: v1
            kind: Pod
            metadata:
              name: init
            spec:
              terminationGracePeriodSeconds: 2
              volumes:
              - name: work
                emptyDir: {{}}
              initContainers:
              - name: prepare
                image: {BUSYBOX}
                command: ["sh", "-c", "echo prepared-by-init > /work/message"]
                volumeMounts:
                - {{name: work, mountPath: /work}}
              containers:
              - name: main
                image: {BUSYBOX}
                command: ["sh", "-c", {LOOP!r}]
                volumeMounts:
                - {{name: work, mountPath: /data, readOnly: true}}
            """
        ),
    )

    async def main_running() -> list[api.Container]:
        return [c for c in await node.running("init") if c.metadata.name == "main"]

    await node.wait_for(main_running, what="main running")
    (main,) = await main_running()
    out = await sh(node.runtime, main.id, "cat /data/message")
    assert out.stdout.decode() == "prepared-by-init\n"
    assert (await sh(node.runtime, main.id, "touch /data/x")).exit_code != 0  # readOnly


RACER = """\
apiVersion: v1
kind: Pod
metadata:
  name: racer
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: shared
    hostPath: {{path: {shared}}}
  containers:
  - name: swap
    image: {image}
    command: ["sh", "-c", "cd /shared; while :; do {swap}; done 2>/dev/null"]
    volumeMounts:
    - {{name: shared, mountPath: /shared}}
"""

VICTIM = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: shared
    hostPath: {{path: {shared}}}
  containers:
  - name: victim
    image: {image}
    command: ["sh", "-c", {loop!r}]
    volumeMounts:
    - {{name: shared, mountPath: /mnt, subPath: d}}
"""


# each state held 0 to 0.3 s: some pods start on the directory, some meet the symlink,
# some see the directory vanish under them
SWAP = "rmdir d; ln -s / d; sleep 0.$((RANDOM % 4)); rm d; mkdir d; sleep 0.$((RANDOM % 4))"
REFUSED = "container victim waiting: CreateContainerConfigError: failed to prepare subPath"
# the kubelet mounted the directory it checked, and the racer removed that directory
# before the runtime mounted it into the container: runc cannot mount a deleted directory
VANISHED = "container victim waiting: RunContainerError: "


async def test_symlink_race_never_mounts_the_hosts_root(
    node: KubeletProcess, short_tmp: Path
) -> None:
    """A container swaps a directory of a shared volume for a symlink to / as fast as
    it can while pods mount that directory by subPath, 20 times: each mount is inside
    the volume or refused (CreateContainerConfigError), never the host's root."""
    short_tmp.chmod(0o755)
    marker = short_tmp / f"host-only-{uuid.uuid4().hex}"
    marker.write_text("only on the host")
    shared = short_tmp / "shared"
    (shared / "d").mkdir(parents=True)
    node.start()
    node.write(
        "racer.yaml",
        RACER.format(
            shared=shared,
            image=BUSYBOX,
            swap=SWAP,
        ),
    )
    await node.wait_for(lambda: node.running("racer"), what="racer running")
    outcomes = {"mounted": 0, "refused": 0, "vanished": 0}
    for i in range(20):
        name = f"victim{i}"
        node.write(
            f"{name}.yaml", VICTIM.format(name=name, shared=shared, image=BUSYBOX, loop=LOOP)
        )

        async def settled(name: str = name) -> str | None:
            if await node.running(name):
                return "mounted"
            for line in node.log().splitlines():
                if node.pod_name(name) in line:
                    if REFUSED in line:
                        return "refused"
                    if VANISHED in line and "no such file or directory" in line:
                        return "vanished"
            return None

        await node.wait_for(settled, timeout=30, what=f"{name} started or refused")
        outcome = await settled()
        assert outcome is not None
        for container in await node.running(name):
            out = await sh(
                node.runtime, container.id, f"test -e /mnt{marker} && echo ESCAPED; ls -A /mnt"
            )
            assert "ESCAPED" not in out.stdout.decode(), f"{name}: host root mounted"
            assert out.stdout.decode() == ""  # the (empty) directory d, nothing else
        outcomes[outcome] += 1
        (node.manifests / f"{name}.yaml").unlink()
    reasons = sorted(
        {
            line.split("refused: ", 1)[1][:120]
            for line in node.log().splitlines()
            if "refused: " in line
        }
    )
    print(f"symlink race: {outcomes}; refusals: {reasons}")
    assert sum(outcomes.values()) == 20
    # every victim goes; then so do the racer and its mounts
    (node.manifests / "racer.yaml").unlink()

    async def all_gone() -> bool:
        return not [
            c
            for c in await node.runtime.list_pod_sandbox()
            if c.labels.get(labels.POD_NAME, "").endswith(node.node)
        ]

    await node.wait_for(all_gone, timeout=60, what="every pod removed")
    await trio.sleep(1)
    assert not mounts_under(str(node.root / "root" / "pods"))
    assert marker.read_text() == "only on the host"


KEEPER = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: keeper
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {BUSYBOX}
    command: ["sh", "-c", {LOOP!r}]
"""


async def test_orphaned_pod_directory_with_a_sub_path_mount_is_swept_safely(
    node: KubeletProcess, short_tmp: Path
) -> None:
    """A pod directory nobody knows (its kubelet died before the teardown), with a subPath
    bind mount of a host directory: housekeeping unmounts it and removes the directory,
    and what the mount pointed to stays."""
    precious = short_tmp / "precious"
    precious.mkdir()
    (precious / "data").write_text("keep me")
    orphan = node.root / "root" / "pods" / "0rphan-uid"
    target = orphan / "volume-subpaths" / "v" / "c" / "0"
    target.mkdir(parents=True)
    (orphan / "volumes" / "kubernetes.io~empty-dir" / "v").mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(precious), str(target)], check=True)
    try:
        node.start()
        node.write("keeper.yaml", KEEPER)
        await node.wait_for(lambda: node.running("keeper"), what="a pod running")

        async def swept() -> bool:
            return not orphan.exists()

        await node.wait_for(swept, timeout=30, what="the orphan swept")
        assert not mounts_under(str(orphan))
        assert (precious / "data").read_text() == "keep me"
    finally:
        if mounts_under(str(target)):
            subprocess.run(["umount", "-l", str(target)], check=False)


async def _api_ready(api_client: httpx.AsyncClient, node: str) -> None:
    await node_registered(api_client, node)


async def _create(api_client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    kind = body["kind"].lower() + "s"
    r = await api_client.post(f"/api/v1/namespaces/default/{kind}", json=body)
    assert r.status_code == 201, r.text


async def test_config_map_read_only_fs_group_and_unsupported_volume(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    url, node, _ = cluster
    runtime, _ = cri
    owned: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "owned", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"fsGroup": 4321},
            "volumes": [
                {"name": "settings", "configMap": {"name": "settings"}},
                {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
                {"name": "scratch", "emptyDir": {}},
            ],
            "containers": [
                {
                    "name": "app",
                    "image": BUSYBOX,
                    "command": ["sh", "-c", LOOP],
                    "volumeMounts": [
                        {"name": "settings", "mountPath": "/etc/settings", "readOnly": False},
                        {"name": "settings", "mountPath": "/etc/color", "subPath": "color"},
                        {"name": "creds", "mountPath": "/etc/creds"},
                        {"name": "scratch", "mountPath": "/scratch"},
                    ],
                }
            ],
        },
    }
    stuck: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stuck", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "volumes": [{"name": "data", "nfs": {"server": "192.0.2.1", "path": "/exports"}}],
            "containers": [
                {
                    "name": "app",
                    "image": BUSYBOX,
                    "command": ["sh", "-c", LOOP],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
        },
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await _api_ready(client, node)
        for body in (
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"color": "blue"},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "namespace": "default"},
                "data": {"password": "czNjcjN0"},
            },
            owned,
            stuck,
        ):
            await _create(client, body)
        with trio.fail_after(30):
            while not (
                running := [
                    c
                    for c in await runtime.list_containers(labels={labels.POD_NAME: "owned"})
                    if c.state == api.CONTAINER_RUNNING
                ]
            ):
                await trio.sleep(0.2)
        cid = running[0].id
        write = await sh(runtime, cid, "echo x > /etc/settings/new")
        assert write.exit_code != 0 and b"Read-only file system" in write.stderr
        write = await sh(runtime, cid, "echo x > /etc/color")
        assert write.exit_code != 0 and b"Read-only file system" in write.stderr
        out = await sh(
            runtime,
            cid,
            "stat -L -c '%g %a' /etc/settings/color /etc/creds/password; stat -c '%g %a' /scratch;"
            " touch /scratch/new && stat -c %g /scratch/new",
        )
        assert out.stdout.decode().split("\n")[:4] == ["4321 644", "4321 440", "4321 2777", "4321"]

        # the pod with an nfs volume: waiting, nothing asked of containerd
        await trio.sleep(5)
        assert not await runtime.list_pod_sandbox(labels={labels.POD_NAME: "stuck"})
        events = (await client.get("/api/v1/namespaces/default/events")).json()["items"]
        mounts = [e for e in events if e["reason"] == "FailedMount"]
        assert mounts and 'for volume "data"' in mounts[0]["message"]
        assert "nfs volumes are not supported" in mounts[0]["message"]
        pod = (await client.get("/api/v1/namespaces/default/pods/stuck")).json()
        (status,) = pod["status"]["containerStatuses"]
        assert status["state"]["waiting"]["reason"] == "ContainerCreating"

        uid = running[0].labels[labels.POD_UID]
        pod_dir = short_tmp / "root" / "pods" / uid
        assert mounts_under(str(pod_dir))  # the secret's tmpfs and the subPath bind mount
        for name in ("owned", "stuck"):
            r = await client.delete(f"/api/v1/namespaces/default/pods/{name}")
            assert r.status_code == 200
        start = time.monotonic()
        with trio.fail_after(30):
            while (await client.get("/api/v1/namespaces/default/pods/owned")).status_code != 404:
                await trio.sleep(0.2)
        assert time.monotonic() - start < 30
        with trio.fail_after(10):
            while pod_dir.exists():
                await trio.sleep(0.1)
        assert not mounts_under(str(short_tmp / "root" / "pods"))
