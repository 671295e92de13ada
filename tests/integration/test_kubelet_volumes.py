"""Volumes through the whole kubelet on FakeRuntime (fake clock): init containers get
their mounts, subPath escapes fail only their container, a volume the kubelet cannot
provide keeps the pod waiting before its sandbox, API data volumes are read-only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.cri import api
from kubelet.testing import ContainerBehaviour, FakeRuntime
from kubelet.volumes.mounts import mounts_under

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES, Harness, running_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def status_of(h: Harness | Cluster, container: str) -> Any:
    """The container's status as the kubelet generated it (one pod per test)."""
    assert h.components is not None
    for status in h.components.syncer.statuses.values():
        for c in (*status.init_container_statuses, *status.container_statuses):
            if c.name == container:
                return c
    return None


def waiting(h: Harness | Cluster, container: str) -> tuple[str, str] | None:
    c = status_of(h, container)
    if c is None or c.state is None or c.state.waiting is None:
        return None
    return c.state.waiting.reason, c.state.waiting.message


INIT = """\
apiVersion: v1
kind: Pod
metadata:
  name: init
spec:
  volumes:
  - name: work
    emptyDir: {}
  initContainers:
  - name: prepare
    image: busybox:1.35
    volumeMounts:
    - {name: work, mountPath: /work}
  - name: sidecar
    image: busybox:1.35
    restartPolicy: Always
    volumeMounts:
    - {name: work, mountPath: /shared, subPath: side}
  containers:
  - name: main
    image: busybox:1.35
    volumeMounts:
    - {name: work, mountPath: /data, readOnly: true}
"""


async def test_init_containers_and_sidecars_get_their_volume_mounts(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(exit_after=0.5), container="prepare")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("init.yaml", INIT)
        await h.wait_for(lambda: h.running("init", "main"))
        (prepare,) = h.containers("init", "prepare")
        (sidecar,) = h.running("init", "sidecar")
        (main,) = h.running("init", "main")
        work = next(m for m in prepare.config.mounts if m.container_path == "/work")
        data = next(m for m in main.config.mounts if m.container_path == "/data")
        shared = next(m for m in sidecar.config.mounts if m.container_path == "/shared")
        assert work.host_path == data.host_path
        assert work.host_path.endswith("/volumes/kubernetes.io~empty-dir/work")
        assert not work.readonly and data.readonly
        assert shared.host_path.endswith("/volume-subpaths/work/sidecar/0")
        assert os.stat(shared.host_path).st_ino == os.stat(f"{work.host_path}/side").st_ino


ESCAPE = """\
apiVersion: v1
kind: Pod
metadata:
  name: escape
spec:
  volumes:
  - name: shared
    hostPath: {{path: {shared}}}
  containers:
  - name: bad
    image: busybox:1.35
    volumeMounts:
    - {{name: shared, mountPath: /host, subPath: escape/etc}}
  - name: climb
    image: busybox:1.35
    volumeMounts:
    - {{name: shared, mountPath: /up, subPath: {climb}}}
  - name: good
    image: busybox:1.35
    volumeMounts:
    - {{name: shared, mountPath: /data, subPath: data}}
    - {{name: shared, mountPath: /all}}
"""


@pytest.mark.parametrize(
    ("climb", "climb_message"),
    [
        ("../..", "unable to provision SubPath `../..`: must not contain '..'"),
        ("/etc", "error SubPath `/etc` must not be an absolute path"),
    ],
)
async def test_an_escaping_sub_path_fails_only_its_container(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    climb: str,
    climb_message: str,
) -> None:
    shared = short_tmp / "shared"
    (shared / "data").mkdir(parents=True)
    (shared / "escape").symlink_to("/")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("escape.yaml", ESCAPE.format(shared=shared, climb=climb))
        await h.wait_for(lambda: h.running("escape", "good"))
        await h.wait_for(lambda: waiting(h, "bad") and waiting(h, "climb"))
        assert waiting(h, "bad") == (
            "CreateContainerConfigError",
            'failed to prepare subPath for volumeMount "shared" of container "bad"',
        )
        assert waiting(h, "climb") == ("CreateContainerConfigError", climb_message)
        assert not h.containers("escape", "bad") and not h.containers("escape", "climb")
        (good,) = h.running("escape", "good")
        data = next(m for m in good.config.mounts if m.container_path == "/data")
        assert os.stat(data.host_path).st_ino == os.stat(shared / "data").st_ino
        root = short_tmp / "root" / "pods"
        assert all("/bad/" not in p for p in mounts_under(str(root)))
        await trio.sleep(30)  # retried, still refused, never mounted
        assert not h.containers("escape", "bad")
        (path,) = [p for p in h.manifests.iterdir() if p.name == "escape.yaml"]
        path.unlink()
        await h.wait_for(lambda: not h.sandboxes("escape"))
        await trio.sleep(2)
        assert not mounts_under(str(root))
    assert (shared / "data").is_dir() and (shared / "escape").is_symlink()


def pvc_pod(c: Cluster, name: str, volume: dict[str, Any]) -> None:
    c.create_pod(
        name,
        volumes=[volume, {"name": "scratch", "emptyDir": {}}],
        containers=[
            {
                "name": "app",
                "image": "busybox:1.35",
                "volumeMounts": [
                    {"name": volume["name"], "mountPath": "/data"},
                    {"name": "scratch", "mountPath": "/scratch"},
                ],
            }
        ],
    )


@pytest.mark.parametrize(
    ("kind", "source"),
    [
        ("iscsi", {"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.x", "lun": 0}}),
    ],
)
async def test_a_volume_the_kubelet_cannot_provide_keeps_the_pod_waiting(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    kind: str,
    source: dict[str, Any],
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        pvc_pod(c, "stuck", {"name": "data", **source})

        def failed() -> list[dict[str, Any]]:
            return [e for e in c.api.list("events", "default") if e.get("reason") == "FailedMount"]

        await c.wait_for(lambda: failed(), timeout=30)
        await trio.sleep(60)
        assert not fake.sandboxes and not fake.containers  # nothing asked of the runtime
        (event,) = failed()  # one event object, repeats folded into its count
        assert event["message"] == (
            "Unable to attach or mount volumes: unmounted volumes=[data], unattached "
            "volumes=[], failed to process volumes=[data]: failed to get Plugin from "
            f'volumeSpec for volume "data" err=no volume plugin matched: {kind} volumes '
            "are not supported by this kubelet"
        )
        assert event["type"] == "Warning"
        assert 2 <= event.get("count", 1) <= 8  # retried about every 10 s, not in a loop
        pod = c.pod("stuck") or {}
        statuses = pod.get("status", {}).get("containerStatuses") or []
        assert [s["state"]["waiting"]["reason"] for s in statuses] == ["ContainerCreating"]
        assert c.phase("stuck") == "Pending"


async def test_a_missing_config_map_holds_the_sandbox_back(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream waits for the volumes before it creates the sandbox."""
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod(
            "cfg",
            volumes=[{"name": "settings", "configMap": {"name": "settings"}}],
            containers=[
                {
                    "name": "app",
                    "image": "busybox:1.35",
                    "volumeMounts": [
                        {"name": "settings", "mountPath": "/etc/settings", "readOnly": False}
                    ],
                }
            ],
        )
        await trio.sleep(15)
        assert not fake.sandboxes
        failed = [e for e in c.api.list("events", "default") if e.get("reason") == "FailedMount"]
        assert [e["message"] for e in failed] == [
            'MountVolume.SetUp failed for volume "settings" : configmap "settings" not found'
        ]
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"color": "blue"},
            }
        )
        await c.wait_for(lambda: c.phase("cfg") == "Running", timeout=60)
        (container,) = fake.running()
        (mount,) = [m for m in container.config.mounts if m.container_path == "/etc/settings"]
        assert mount.readonly  # a configMap is read-only whatever the volumeMount says
        assert mount.propagation == api.PROPAGATION_PRIVATE


async def test_sub_path_expr_from_the_downward_env(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod(
            "expr",
            volumes=[{"name": "logs", "emptyDir": {}}],
            containers=[
                {
                    "name": "app",
                    "image": "busybox:1.35",
                    "env": [
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                    ],
                    "volumeMounts": [
                        {"name": "logs", "mountPath": "/logs", "subPathExpr": "per-pod/$(POD)"}
                    ],
                },
                {
                    "name": "unset",
                    "image": "busybox:1.35",
                    "volumeMounts": [
                        {"name": "logs", "mountPath": "/logs", "subPathExpr": "$(NOWHERE)"}
                    ],
                },
            ],
        )
        await c.wait_for(lambda: len(fake.running()) == 1, timeout=30)
        (container,) = fake.running()
        (mount,) = [m for m in container.config.mounts if m.container_path == "/logs"]
        assert mount.host_path.endswith("/volume-subpaths/logs/app/0")
        volume = Path(mount.host_path).parents[3] / "volumes" / "kubernetes.io~empty-dir" / "logs"
        assert os.stat(mount.host_path).st_ino == os.stat(volume / "per-pod" / "expr").st_ino
        await c.wait_for(lambda: waiting(c, "unset") is not None, timeout=30)
        assert waiting(c, "unset") == (
            "CreateContainerConfigError",
            "missing value for NOWHERE",
        )
        failed = [e for e in c.api.list("events", "default") if e.get("reason") == "Failed"]
        assert any(e["message"] == "Error: missing value for NOWHERE" for e in failed)


WEB = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: busybox:1.35
    terminationMessagePath: /dev/termination-log
"""


async def test_the_kubelet_makes_and_tightens_its_directories(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A kubelet upgraded in place: the directories an older one made 0755 become 0750."""
    root = short_tmp / "root"
    (root / "pods").mkdir(parents=True)
    logs = short_tmp / "logs"
    logs.mkdir()
    for path in (root, root / "pods", logs):
        os.chmod(path, 0o755)
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        (container,) = h.running("web", "app")
        uid = container.config.labels["io.kubernetes.pod.uid"]

        def mode(path: Path) -> int:
            return path.stat().st_mode & 0o7777

        assert mode(root) == mode(root / "pods") == mode(logs) == 0o750
        assert mode(root / "plugins") == mode(root / "plugins_registry") == 0o750
        pod = root / "pods" / uid
        assert mode(pod) == 0o750
        assert not (pod / "volumes").exists()  # made only for a pod with volumes
        assert mode(pod / "containers") == mode(pod / "containers" / "app") == 0o750
        (message,) = [m for m in container.config.mounts if m.container_path.startswith("/dev/")]
        assert mode(Path(message.host_path)) == 0o666
        pod_logs = logs / f"default_web-node1_{uid}"
        assert mode(pod_logs) == mode(pod_logs / "app") == 0o755


ENV_FILE_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: envfile
spec:
  volumes:
  - name: config
    emptyDir: {}
  initContainers:
  - name: setup
    image: busybox:1.35
    volumeMounts:
    - {name: config, mountPath: /data}
  containers:
  - name: main
    image: busybox:1.35
    env:
    - name: COLOR
      valueFrom:
        fileKeyRef: {volumeName: config, path: app/config.env, key: COLOR}
    - {name: SHADE, value: light $(COLOR)}
"""


async def test_file_key_ref_waits_for_a_readable_key_then_starts_with_it(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    secret = short_tmp / "host-secret"
    secret.write_text("COLOR='from the host'\n")
    fake.behave(ContainerBehaviour(exit_after=0.5), container="setup")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("envfile.yaml", ENV_FILE_POD)
        await h.wait_for(lambda: h.containers("envfile", "setup"))
        (setup,) = h.containers("envfile", "setup")
        volume = Path(next(m.host_path for m in setup.config.mounts if m.container_path == "/data"))
        env_file = volume / "app" / "config.env"
        env_file.parent.mkdir()
        env_file.symlink_to(secret)  # what a hostile init container could leave
        unreadable = ("CreateContainerConfigError", "couldn't parse env file")
        await h.wait_for(lambda: waiting(h, "main") == unreadable)
        await trio.sleep(20)  # retried, still refused
        assert waiting(h, "main") == unreadable and not h.containers("envfile", "main")
        env_file.unlink()
        env_file.write_text("SIZE='big'\n")
        message = f'environment variable key "COLOR" not found in file "{env_file}"'
        await h.wait_for(lambda: waiting(h, "main") == ("CreateContainerConfigError", message))
        assert not h.containers("envfile", "main")
        env_file.write_text("# from setup\nCOLOR='blue'\n")
        await h.wait_for(lambda: h.running("envfile", "main"))
        (main,) = h.running("envfile", "main")
        envs = {kv.key: kv.value.decode() for kv in main.config.envs}
        assert (envs["COLOR"], envs["SHADE"]) == ("blue", "light blue")
