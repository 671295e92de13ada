"""The eviction component's edges: settings at start-up, the OOM watcher, NodePressure."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import attrs
import pytest
import trio

from kubelet.config import resolve
from kubelet.errors import ConfigError
from kubelet.events import EventRecorder, ObjectRef, node_ref
from kubelet.eviction import NodePressure, eviction_settings
from kubelet.eviction.run import OomWatcher
from kubelet.eviction.thresholds import Signal
from kubelet.stats.oom import OomInstance

from .evictionkit import pod


def _options(tmp_path: Path, body: str) -> object:
    path = tmp_path / "kubelet.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + body
    )
    return resolve([f"--config={path}"], hostname=lambda: "n")


def test_default_settings_give_upstreams_hard_thresholds(tmp_path: Path) -> None:
    options = resolve([], hostname=lambda: "n")
    signals = [t.signal for t in eviction_settings(options)]
    assert Signal.MEMORY_AVAILABLE in signals and Signal.NODEFS_AVAILABLE in signals
    # enforceNodeAllocatable has "pods": the memory threshold is copied to allocatable
    assert Signal.ALLOCATABLE_MEMORY_AVAILABLE in signals


@pytest.mark.parametrize(
    ("body", "field", "text"),
    [
        ("evictionHard: {memory.available: '0'}\n", "evictionHard", "must be positive: 0"),
        (
            "evictionSoft: {nodefs.available: '150%'}\n"
            "evictionSoftGracePeriod: {nodefs.available: 1m}\n",
            "evictionSoft",
            "eviction percentage threshold nodefs.available must be <= 100%: 150%",
        ),
        (
            "evictionMinimumReclaim: {memory.available: '0%'}\n",
            "evictionMinimumReclaim",
            "positive",
        ),
        ("evictionMaxPodGracePeriod: -5\n", "evictionMaxPodGracePeriod", "must not be negative"),
    ],
)
def test_bad_settings_stop_start_up_naming_the_field(
    tmp_path: Path, body: str, field: str, text: str
) -> None:
    options = _options(tmp_path, body)
    with pytest.raises(ConfigError) as caught:
        eviction_settings(options)  # type: ignore[arg-type]
    (problem,) = caught.value.problems
    assert problem.field == field
    assert text in problem.message
    assert problem.source.endswith("kubelet.yaml")


@attrs.define
class Recorded:
    events: list[tuple[ObjectRef, str, str, str]] = attrs.field(factory=list)

    def record(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> None:
        self.events.append((ref, event_type, reason, message))


def _watcher(recorded: Recorded, path: str = "/nonexistent/kmsg") -> OomWatcher:
    names = {"0b5a2c1e-1111-2222-3333-444455556666": "default/web"}
    return OomWatcher(cast(EventRecorder, recorded), node_ref("n1"), names.get, path)


def test_a_system_oom_is_a_node_event_naming_the_victim_and_its_pod() -> None:
    recorded = Recorded()
    watcher = _watcher(recorded)
    watcher.on_kill(
        OomInstance(
            pid=4242,
            process_name="stress",
            task_cgroup="/kubepods/besteffort/pod0b5a2c1e-1111-2222-3333-444455556666/abc",
        )
    )
    watcher.on_kill(OomInstance(pid=7, process_name="x", victim_container="/kubepods/podX"))
    assert recorded.events == [
        (
            node_ref("n1"),
            "Warning",
            "SystemOOM",
            "System OOM encountered, victim process: stress, pid: 4242, pod: default/web",
        )
    ]


async def test_an_unreadable_kmsg_does_not_stop_the_kubelet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(_watcher(Recorded()).run)
    assert "system OOM events will not be recorded" in caplog.text


async def test_kmsg_records_become_events(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    recorded = Recorded()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(_watcher(recorded, str(fifo)).run)
            os.write(writer, b"6,1,100,-;stress invoked oom-killer: gfp_mask=0x100cca\n")
            os.write(
                writer,
                b"3,2,200,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
                b"mems_allowed=0,global_oom,task_memcg=/kubepods/besteffort/"
                b"pod0b5a2c1e-1111-2222-3333-444455556666/abc,task=stress,pid=4242,uid=0\n",
            )
            os.write(writer, b"3,3,300,-;Out of memory: Killed process 4242 (stress)\n")
            await trio.sleep(1)
            nursery.cancel_scope.cancel()
    finally:
        os.close(writer)
    assert [e[3] for e in recorded.events] == [
        "System OOM encountered, victim process: stress, pid: 4242, pod: default/web"
    ]


def test_pressure_admits_as_upstream() -> None:
    besteffort = pod("be", requests=None)
    burstable = pod("bu", requests={"memory": "10Mi"})
    memory = NodePressure(("MemoryPressure",))
    assert memory.admit(burstable) is None
    refusal = memory.admit(besteffort)
    assert refusal is not None and refusal.reason == "Evicted"
    assert refusal.message == "The node had condition: [MemoryPressure]. "
    disk = NodePressure(("DiskPressure",))
    assert disk.admit(burstable) is not None
    assert NodePressure().admit(besteffort) is None
