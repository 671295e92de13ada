"""Setting up a pod's volumes before its containers start, and removing them after.

Supported here: emptyDir (on disk under the pod directory; medium Memory as a tmpfs
mount sized by sizeLimit) and hostPath (with upstream's type checks). Every step is
idempotent, so a sync can call ``setup`` each time. Other volume types are left out of
the containers' mounts with a warning until their plugins land.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from collections.abc import Mapping

from kubelet.api.pod import Container, Pod, Volume
from kubelet.api.quantity import parse_quantity
from kubelet.cri import api
from kubelet.runtime.env import EnvLookup

from .atomic import write_atomic
from .hostpath import VolumeError, check_host_path
from .paths import EMPTY_DIR, pod_dir, pods_dir, volume_dir
from .sources import PROJECTED, SECRET, TokenSource, build_payload, plugin_name

log = logging.getLogger(__name__)

_PROPAGATION = {
    "HostToContainer": api.PROPAGATION_HOST_TO_CONTAINER,
    "Bidirectional": api.PROPAGATION_BIDIRECTIONAL,
}


_IN_MEMORY = (SECRET, PROJECTED)


class _NoApi:
    """The lookup of a kubelet without an API server: every object is missing."""

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return None

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        return None


_NO_API = _NoApi()


def _mount_tmpfs(path: str, options: str) -> None:
    if _is_mounted(path):
        return
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", path],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise VolumeError(f"mount tmpfs on {path} failed: {result.stderr.strip()}")


def _is_mounted(path: str) -> bool:
    with contextlib.suppress(OSError), open("/proc/self/mounts") as fh:
        return any(line.split()[1] == path for line in fh if len(line.split()) > 1)
    return False


class VolumeManager:
    """Per-pod volume directories under ``root_dir``.

    configMap, secret, downwardAPI and projected volumes are written with the atomic
    writer on every call (a no-op when nothing changed), so updated objects and rotated
    tokens reach running pods within one sync period. Secrets and projected volumes live
    on tmpfs so they never touch the disk.
    """

    def __init__(
        self,
        root_dir: str,
        *,
        lookup: EnvLookup | None = None,
        tokens: TokenSource | None = None,
        node_allocatable: Mapping[str, str] | None = None,
    ) -> None:
        self.root_dir = root_dir
        self.lookup = lookup
        self.tokens = tokens
        self.node_allocatable = dict(node_allocatable or {})
        self._warned: set[tuple[str, str]] = set()

    async def setup(self, pod: Pod) -> dict[str, str]:
        """Volume name → host path for every volume this kubelet can provide."""
        paths: dict[str, str] = {}
        for volume in pod.spec.volumes:
            plugin = plugin_name(volume)
            if plugin is not None:
                paths[volume.name] = await self._setup_api_backed(pod, volume, plugin)
                continue
            path = self._setup_one(pod, volume)
            if path is not None:
                paths[volume.name] = path
        return paths

    async def _setup_api_backed(self, pod: Pod, volume: Volume, plugin: str) -> str:
        lookup = self.lookup or _NO_API
        payload = await build_payload(
            pod, volume, lookup, node_allocatable=self.node_allocatable, tokens=self.tokens
        )
        path = volume_dir(self.root_dir, pod.uid, plugin, volume.name)
        if plugin in _IN_MEMORY:
            os.makedirs(path, mode=0o755, exist_ok=True)
            _mount_tmpfs(path, "mode=0755")
        write_atomic(path, payload or {})
        return path

    def _setup_one(self, pod: Pod, volume: Volume) -> str | None:
        if volume.empty_dir is not None:
            path = volume_dir(self.root_dir, pod.uid, EMPTY_DIR, volume.name)
            os.makedirs(path, mode=0o777, exist_ok=True)
            os.chmod(path, 0o777)  # upstream: world-writable, any container user may write
            if volume.empty_dir.get("medium") == "Memory":
                options = "mode=0777"
                limit = volume.empty_dir.get("sizeLimit")
                if limit:
                    options += f",size={parse_quantity(str(limit)).value()}"
                _mount_tmpfs(path, options)
            return path
        if volume.host_path is not None:
            return check_host_path(volume.host_path)
        key = (pod.uid, volume.name)
        if key not in self._warned:
            self._warned.add(key)
            log.warning(
                "pod %s: volume %s has a type this kubelet does not provide yet; "
                "containers start without it",
                pod.key,
                volume.name,
            )
        return None

    def mounts(self, pod: Pod, container: Container, paths: dict[str, str]) -> list[api.Mount]:
        """The CRI mounts of ``container``'s volumeMounts (subPath, readOnly, propagation)."""
        out = []
        for mount in container.volume_mounts:
            host = paths.get(mount.name)
            if host is None:
                continue
            if mount.sub_path:
                host = os.path.join(host, mount.sub_path)
                if not os.path.exists(host):
                    os.makedirs(host, mode=0o755, exist_ok=True)
            out.append(
                api.Mount(
                    container_path=mount.mount_path,
                    host_path=host,
                    readonly=bool(mount.read_only),
                    propagation=_PROPAGATION.get(
                        mount.mount_propagation or "", api.PROPAGATION_PRIVATE
                    ),
                )
            )
        return out

    def pod_uids_on_disk(self) -> set[str]:
        """The pods that have a directory under ``<root>/pods``."""
        try:
            return {e.name for e in os.scandir(pods_dir(self.root_dir)) if e.is_dir()}
        except OSError:
            return set()

    def cleanup(self, uid: str) -> None:
        """Remove the pod directory (unmounting memory-backed emptyDirs first)."""
        root = pod_dir(self.root_dir, uid)
        if not os.path.isdir(root):
            return
        for plugin in (EMPTY_DIR, *_IN_MEMORY):
            volumes = os.path.join(root, "volumes", plugin)
            if os.path.isdir(volumes):
                for name in os.listdir(volumes):
                    path = os.path.join(volumes, name)
                    if _is_mounted(path):
                        subprocess.run(["umount", path], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
