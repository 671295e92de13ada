"""Node pressure on real containerd: a kubelet process joined to a FakeApiServer process.

- Disk: ``--root-dir`` is a small loop-mounted ext4 filesystem and ``nodefs.available``
  is set 20 MiB below its free space; a pod writing 30 MiB into an emptyDir is evicted
  (Failed, reason Evicted, upstream's message), DiskPressure is reported, a new pod is
  refused, and the space comes back when the evicted pod's volume goes.
- Images: with an image filesystem threshold no real disk meets, the eviction manager's
  node-level reclaim removes a locally built unused image, and never the images in use or
  the sandbox image.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, api
from kubelet.cri.__main__ import cleanup

from .cluster import node_registered, open_cluster

pytestmark = pytest.mark.containerd

MiB = 1 << 20
BUSYBOX = "docker.io/library/busybox:1.35"
OCI_BUILD = Path(__file__).resolve().parents[2] / "scripts" / "oci_build.py"


@contextlib.contextmanager
def loop_filesystem(where: Path, size_mib: int) -> Any:
    image = where / "fs.img"
    mount = where / "root"
    mount.mkdir()
    subprocess.run(["truncate", "-s", f"{size_mib}M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


CGROUPS = Path("/sys/fs/cgroup")


@contextlib.contextmanager
def own_cgroup_root(name: str) -> Any:
    """A cgroup root of this test's kubelet (``cgroupRoot: /<name>``) in every cgroup v1
    hierarchy. Any other kubelet on the machine (a benchmark's or a test's on FakeRuntime,
    root ``/``) removes the pod cgroups under ``/kubepods`` it does not know, killing what
    runs there, as upstream's orphan clean-up does; under a root of its own the filler pod
    is out of their reach (that interference made this test take 51 s, or time out)."""
    made = []
    for hierarchy in sorted(CGROUPS.iterdir()):
        if hierarchy.name == "unified" or not hierarchy.is_dir():
            continue
        path = hierarchy / name
        path.mkdir()
        made.append(path)
        if hierarchy.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((hierarchy / knob).read_text())
    try:
        yield f"/{name}"
    finally:
        for top in made:
            for below in sorted(
                (p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
            ):
                with contextlib.suppress(OSError):
                    below.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _config(where: Path, body: str) -> list[str]:
    path = where / "kubelet.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + body
    )
    return ["--config", str(path)]


def _pod(name: str, node: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX,
                    "command": ["sh", "-c", script],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            **spec,
        },
    }


async def _wait_node(client: httpx.AsyncClient, node: str) -> None:
    await node_registered(client, node)


async def _status(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    r = await client.get(f"/api/v1/namespaces/default/pods/{name}")
    return dict(r.json().get("status") or {}) if r.status_code == 200 else {}


async def _condition(client: httpx.AsyncClient, node: str, kind: str) -> str:
    r = await client.get(f"/api/v1/nodes/{node}")
    for cond in (r.json().get("status") or {}).get("conditions") or ():
        if cond["type"] == kind:
            return str(cond["status"])
    return ""


async def test_a_pod_filling_an_emptydir_past_nodefs_is_evicted_and_its_space_reclaimed(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    runtime, _ = cri
    with (
        loop_filesystem(short_tmp, 96) as root,
        own_cgroup_root(f"e2e-{uuid.uuid4().hex[:8]}") as cgroup_root,
    ):
        free = _free(root)
        threshold = (free - 20 * MiB) // MiB
        extra = _config(
            short_tmp,
            f"evictionHard: {{nodefs.available: {threshold}Mi}}\ncgroupRoot: {cgroup_root}\n",
        )
        cluster = open_cluster(runtime, short_tmp, extra, root_dir=root)
        async with cluster as (url, node, _), httpx.AsyncClient(base_url=url, timeout=10) as client:
            await _wait_node(client, node)
            fill = "dd if=/dev/zero of=/data/fill bs=1M count=30; sync; " + (
                "trap 'exit 0' TERM; while true; do sleep 0.2; done"
            )
            r = await client.post(
                "/api/v1/namespaces/default/pods", json=_pod("filler", node, fill)
            )
            assert r.status_code == 201, r.text
            start = time.monotonic()
            with trio.fail_after(60):
                while (await _status(client, "filler")).get("reason") != "Evicted":
                    await trio.sleep(0.5)
            took = time.monotonic() - start
            status = await _status(client, "filler")
            assert status["phase"] == "Failed"
            assert status["message"].startswith(
                f"The node was low on resource: ephemeral-storage. Threshold quantity: "
                f"{threshold}Mi, available: "
            ), status["message"]
            assert took < 40
            with trio.fail_after(30):
                while await _condition(client, node, "DiskPressure") != "True":
                    await trio.sleep(0.5)
            r = await client.post(
                "/api/v1/namespaces/default/pods",
                json=_pod("late", node, "sleep 1000"),
            )
            with trio.fail_after(30):
                while (await _status(client, "late")).get("phase") != "Failed":
                    await trio.sleep(0.5)
            late = await _status(client, "late")
            assert late["message"] == ("Pod was rejected: The node had condition: [DiskPressure]. ")
            # the evicted pod's emptyDir went with it: the space is back
            with trio.fail_after(30):
                while _free(root) < free - 10 * MiB:
                    await trio.sleep(0.5)
            events = (await client.get("/api/v1/namespaces/default/events")).json()["items"]
            assert any(
                e["reason"] == "Evicted" and e["involvedObject"]["name"] == "filler" for e in events
            )


def _build_image(where: Path, name: str) -> Path:
    out = where / "image.tar"
    subprocess.run(
        [sys.executable, str(OCI_BUILD), "--out", str(out), "--name", name,
         "--text", f"/hello:0644:{uuid.uuid4().hex}\\n", "--cmd", '["/hello"]'],
        check=True,
    )  # fmt: skip
    return out


@contextlib.asynccontextmanager
async def guard_images(
    runtime: RuntimeClient, images: ImageClient, keep: str
) -> AsyncIterator[None]:
    """Every image but ``keep`` is in use (a created, never started container of a sandbox
    without the kubelet's labels), so reclaim can only ever remove ``keep``."""
    label = {"e2e-guard": uuid.uuid4().hex[:8]}
    config = api.PodSandboxConfig(
        metadata=api.PodSandboxMetadata(name="guard", uid=label["e2e-guard"], namespace="e2e"),
        labels=label,
    )
    sandbox = await runtime.run_pod_sandbox(config)
    try:
        for i, image in enumerate(await images.list_images()):
            if keep in image.repo_tags:
                continue
            container = api.ContainerConfig(
                metadata=api.ContainerMetadata(name=f"guard{i}"),
                image=api.ImageSpec(image=image.id),
                command=["/pause"],
                labels=label,
            )
            await runtime.create_container(sandbox, container, config)
        yield
    finally:
        await cleanup(runtime, labels=label)


async def test_reclaim_removes_an_unused_local_image_and_nothing_in_use(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    runtime, images = cri
    name = f"localhost/e2e-gc-{uuid.uuid4().hex[:6]}:1"
    tar = _build_image(short_tmp, name)
    subprocess.run(["ctr", "-n", "k8s.io", "images", "import", str(tar)], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    before = {t for i in await images.list_images() for t in i.repo_tags}
    assert name in before
    extra = _config(
        short_tmp,
        "evictionHard: {imagefs.available: '99%'}\nimageMinimumGCAge: 1s\n",
    )
    try:
        async with (
            guard_images(runtime, images, name),
            open_cluster(runtime, short_tmp, extra) as (url, node, _),
        ):
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                await _wait_node(client, node)
                with trio.fail_after(60):
                    while name in {t for i in await images.list_images() for t in i.repo_tags}:
                        await trio.sleep(0.5)
            after = {t for i in await images.list_images() for t in i.repo_tags}
            assert before - after == {name}
    finally:
        subprocess.run(["ctr", "-n", "k8s.io", "images", "rm", name], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
