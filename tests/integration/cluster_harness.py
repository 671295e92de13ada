"""The whole kubelet joined to a FakeApiServer, on FakeRuntime, on the test's fake clock."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from kubelet import agent
from kubelet.agent import Components, Host
from kubelet.api import load_kubeconfig
from kubelet.boundedio import inline
from kubelet.config import Options, resolve
from kubelet.node import MachineInfo
from kubelet.testing import FakeApiServer, FakeRuntime
from kubelet.testing.cgroupfs import tree_cgroups, tree_flags
from kubelet.testing.fakeproc import fake_proc, fake_proc_sys
from kubelet.testing.nodestats import ScriptedNode

from .kubelet_harness import EPOCH, NODE

MACHINE = MachineInfo(
    num_cores=2,
    memory_bytes=8 * 1024**3,
    hugepages={},
    machine_id="machine-1",
    system_uuid="uuid-1",
    boot_id="boot-1",
    kernel_version="6.1.0",
    os_image="Debian GNU/Linux 12 (bookworm)",
    operating_system="linux",
    architecture="amd64",
    hostname=NODE,
)


@attrs.define
class Cluster:
    api: FakeApiServer
    fake: FakeRuntime
    tmp: Path
    nursery: trio.Nursery
    scope: trio.CancelScope | None = None
    components: Components | None = None
    """What the running kubelet handed back (``agent.run``'s task status)."""
    node: ScriptedNode | None = None
    """The node's usage figures (ample until a test scripts them)."""
    cgroup_version: int = 1
    """the fake cgroup tree's: v1 (hybrid, as this machine) is allowed by a flag"""
    proc: Path | None = None
    """A fake /proc (``kubelet.testing.fakeproc``); None: a fresh one with no swap."""
    sys: Path | None = None
    """the fake /sys the CPU manager reads (None: the host's)"""

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.api.get("pods", namespace, name)

    async def wait_for(self, predicate: object, timeout: float = 60.0, step: float = 0.1) -> float:
        assert callable(predicate)
        with trio.fail_after(timeout):
            while not predicate():
                await trio.sleep(step)
        return trio.current_time()

    def create_pod(self, name: str, *, image: str = "busybox:1.35", **spec: Any) -> dict[str, Any]:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": NODE,
                "containers": [{"name": "app", "image": image}],
                "terminationGracePeriodSeconds": 30,
                **spec,
            },
        }
        return self.api.create(body)

    def phase(self, name: str) -> str:
        pod = self.pod(name)
        return str(((pod or {}).get("status") or {}).get("phase", ""))

    def running_containers(self) -> list[Any]:
        return self.fake.running()


def cluster_kubelet(
    c: Cluster,
    manifests: Path | None = None,
    *,
    extra: Sequence[str] = (),
    kubeconfig: Path | None = None,
) -> tuple[Options, Host]:
    """The options and host of a kubelet joined to ``c.api``, on ``c.fake``, fake time
    (``kubeconfig``: the test's own, else one with a token for the node)."""
    if kubeconfig is None:
        kubeconfig = c.api.kubeconfig(c.tmp / "kubelet.conf", user=f"system:node:{NODE}")
    connection = load_kubeconfig(str(kubeconfig))
    if connection.exec_auth is not None:  # credential expiry on the test's clock
        connection.exec_auth.clock = lambda: EPOCH + trio.current_time()
    args = [
        "--kubeconfig",
        str(kubeconfig),
        "--container-runtime-endpoint",
        c.fake.endpoint,
        "--hostname-override",
        NODE,
        "--node-ip",
        "10.0.0.5",
        "--root-dir",
        str(c.tmp / "root"),
        "--enable-server=false",
        "--healthz-port=0",
        "--read-only-port=0",
        *tree_flags(c.cgroup_version),
    ]
    if manifests is not None:
        args += ["--pod-manifest-path", str(manifests), "--file-check-frequency", "1s"]
    options = resolve([*args, *extra])
    if c.node is None:
        c.node = ScriptedNode(c.tmp / "host")
    options = attrs.evolve(
        options, config=attrs.evolve(options.config, pod_logs_dir=str(c.tmp / "logs"))
    )
    return options, Host(
        wall_clock=lambda: EPOCH + trio.current_time(),
        watch_files=False,
        connection=connection,
        machine=MACHINE,
        node_ips=("10.0.0.5",),
        source_io=inline,  # no worker thread: it would look idle to autojump_clock
        volume_walks_in_threads=False,
        ephemeral_ports=True,
        cgroup_fs=tree_cgroups(c.tmp / "cgroup", c.cgroup_version),
        cgroup_io=inline,
        stats=c.node.host,
        notifier_cgroups=c.tmp / "host",  # no memory cgroup there: no kernel notifier
        kmsg=None,
        proc=c.proc or fake_proc(c.tmp / "proc"),  # no swap, whatever the machine has
        proc_sys=fake_proc_sys(c.tmp / "proc-sys"),  # the machine's tunables stay as they are
        containers_log_dir=str(c.tmp / "containers"),
        sys=c.sys or Path("/sys"),
    )


async def start_cluster_kubelet(
    c: Cluster,
    manifests: Path | None = None,
    *,
    extra: Sequence[str] = (),
    kubeconfig: Path | None = None,
) -> None:
    options, host = cluster_kubelet(c, manifests, extra=extra, kubeconfig=kubeconfig)

    async def run_it(task_status: trio.TaskStatus[Components] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            c.scope = scope
            await agent.run(options, host, task_status=task_status)

    c.components = await c.nursery.start(run_it)


@contextlib.asynccontextmanager
async def running_cluster(
    fake: FakeRuntime,
    tmp: Path,
    *,
    manifests: Path | None = None,
    extra: Sequence[str] = (),
    cgroup_version: int = 1,
    proc: Path | None = None,
    sys: Path | None = None,
) -> AsyncIterator[Cluster]:
    """A kubelet joined to a fresh FakeApiServer (``cgroup_version``, ``proc``, ``sys``:
    the host it sees, as ``Cluster`` has them)."""
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, tmp, nursery, cgroup_version=cgroup_version, proc=proc, sys=sys)
        await start_cluster_kubelet(c, manifests, extra=extra)
        yield c
        nursery.cancel_scope.cancel()
