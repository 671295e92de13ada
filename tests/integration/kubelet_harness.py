"""Run the whole kubelet in-process against FakeRuntime, on the test's (fake) clock."""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import trio
import trio.lowlevel

from kubelet import agent
from kubelet.agent import Components, Host
from kubelet.boundedio import inline
from kubelet.cgroups import SystemdAccess
from kubelet.config import resolve
from kubelet.cri import api
from kubelet.node import MachineInfo
from kubelet.testing import FakeRuntime
from kubelet.testing.cgroupfs import tree_cgroups, tree_flags
from kubelet.testing.fakeproc import fake_proc, fake_proc_sys
from kubelet.testing.fakeruntime import FakeContainer, FakeSandbox
from kubelet.testing.nodestats import ScriptedNode

EPOCH = 1_800_000_000.0
"""FakeRuntime's wall clock at trio time 0; the kubelet's too."""
NODE = "node1"
KUBELET_IMAGES = ("registry.k8s.io/pause:3.9", "busybox:1.35")

WEB = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: busybox:1.35
"""
"""The one-container static pod the kubelet tests start (its image is in KUBELET_IMAGES)."""
"""What a node needs to run the examples: tests of the whole kubelet give the runtime them
(the ``fake_images`` fixture)."""


@attrs.define
class Harness:
    fake: FakeRuntime
    manifests: Path
    nursery: trio.Nursery
    kubelet_scope: trio.CancelScope | None = None
    extra: tuple[str, ...] = ()
    sys: Path | None = None
    """the fake /sys the CPU manager reads (None: the host's)"""
    components: Components | None = None
    """What the running kubelet handed back (``agent.run``'s task status)."""
    node: ScriptedNode | None = None
    """The node's usage figures (ample until a test scripts them)."""
    proc: Path | None = None
    """A fake /proc (``kubelet.testing.fakeproc``); None: a fresh one with no swap."""
    proc_sys: Path | None = None
    """A fake /proc/sys; None: a fresh one at the kubelet's kernel tunables."""
    systemd: SystemdAccess | None = None
    """Where the systemd cgroup driver finds systemd (a private bus); None: the host's."""
    machine: MachineInfo | None = None
    """The machine's facts (cores, memory, hugepages); None: this machine's."""
    cgroup_version: int = 1
    """the fake cgroup tree's: v1 (hybrid, as this machine) is allowed by a flag"""

    def write(self, name: str, text: str) -> Path:
        path = self.manifests / name
        path.write_text(textwrap.dedent(text))
        return path

    def sandboxes(self, pod: str | None = None) -> list[FakeSandbox]:
        return [
            s
            for s in self.fake.sandboxes.values()
            if pod is None or s.config.metadata.name == f"{pod}-{NODE}"
        ]

    def containers(self, pod: str | None = None, name: str | None = None) -> list[FakeContainer]:
        return [
            c
            for c in self.fake.containers.values()
            if (pod is None or c.config.labels.get("io.kubernetes.pod.name") == f"{pod}-{NODE}")
            and (name is None or c.config.metadata.name == name)
        ]

    def running(self, pod: str, name: str) -> list[FakeContainer]:
        return [c for c in self.containers(pod, name) if c.state == api.CONTAINER_RUNNING]

    async def wait_for(self, predicate: object, timeout: float = 60.0, step: float = 0.1) -> float:
        """Poll ``predicate`` on the (fake) clock; returns the time it became true."""
        assert callable(predicate)
        with trio.fail_after(timeout):
            while not predicate():
                await trio.sleep(step)
        return trio.current_time()

    async def restart_kubelet(self) -> None:
        """Cancel the running kubelet (as SIGTERM would) and start a fresh one."""
        assert self.kubelet_scope is not None
        self.kubelet_scope.cancel()
        await trio.lowlevel.checkpoint()
        await start_kubelet(self)


async def start_kubelet(h: Harness) -> None:
    options = resolve(
        [
            "--pod-manifest-path",
            str(h.manifests),
            "--container-runtime-endpoint",
            h.fake.endpoint,
            "--hostname-override",
            NODE,
            "--file-check-frequency",
            "1s",
            "--root-dir",
            str(h.manifests.parent / "root"),
            "--enable-server=false",
            "--healthz-port=0",
            "--read-only-port=0",
            *tree_flags(h.cgroup_version),
            *h.extra,
        ]
    )
    options = attrs.evolve(
        options,
        config=attrs.evolve(options.config, pod_logs_dir=str(h.manifests.parent / "logs")),
    )
    if h.node is None:
        h.node = ScriptedNode(h.manifests.parent / "host")
    host = Host(
        wall_clock=lambda: EPOCH + trio.current_time(),
        watch_files=False,
        source_io=inline,  # no worker thread: it would look idle to autojump_clock
        volume_walks_in_threads=False,
        cgroup_fs=tree_cgroups(h.manifests.parent / "cgroup", h.cgroup_version),
        cgroup_io=inline,
        stats=h.node.host,
        notifier_cgroups=h.node.root,  # no memory cgroup there: no kernel notifier
        kmsg=None,
        proc=h.proc or fake_proc(h.manifests.parent / "proc"),
        containers_log_dir=str(h.manifests.parent / "containers"),
        machine=h.machine,
        sys=h.sys or Path("/sys"),
        proc_sys=h.proc_sys or fake_proc_sys(h.manifests.parent / "proc-sys"),
    )
    if h.systemd is not None:
        host = attrs.evolve(host, systemd=h.systemd)

    async def run_it(task_status: trio.TaskStatus[Components] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            h.kubelet_scope = scope
            await agent.run(options, host, task_status=task_status)

    h.components = await h.nursery.start(run_it)


@contextlib.asynccontextmanager
async def running_kubelet(
    fake: FakeRuntime,
    tmp: Path,
    *extra: str,
    systemd: SystemdAccess | None = None,
    machine: MachineInfo | None = None,
    sys: Path | None = None,
) -> AsyncIterator[Harness]:
    manifests = tmp / "manifests"
    manifests.mkdir(exist_ok=True)
    async with trio.open_nursery() as nursery:
        h = Harness(fake, manifests, nursery)
        h.extra = extra
        h.systemd = systemd
        h.machine = machine
        h.sys = sys
        await start_kubelet(h)
        yield h
        nursery.cancel_scope.cancel()
