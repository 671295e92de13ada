"""Probes, lifecycle hooks and termination messages through the whole kubelet (fake clock)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trio

from kubelet.testing import ContainerBehaviour, ExecResult, FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, running_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def manifest(name: str, container_extra: str, spec_extra: str = "") -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec_extra}"
        f"  containers:\n  - name: app\n    image: busybox:1.35\n{container_extra}"
    )


def status_of(h: object, name: str) -> object:
    components = h.components
    assert components is not None
    for uid, status in components.syncer.statuses.items():
        pod = components.pods.get(uid)
        if pod is not None and pod.metadata.name.startswith(name + "-"):
            return status
    return None


async def test_failing_liveness_probe_restarts_the_container(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1, stdout=b"not alive"), cmd=["cat", "/tmp/alive"])
    probe = (
        "    livenessProbe:\n      exec:\n        command: [cat, /tmp/alive]\n"
        "      periodSeconds: 5\n      failureThreshold: 2\n"
        "      terminationGracePeriodSeconds: 3\n"
    )
    async with running_kubelet(fake, short_tmp) as h:
        h.write("live.yaml", manifest("live", probe))
        await h.wait_for(lambda: len(fake.calls_of("StartContainer")) >= 2, timeout=60)
        stops = fake.calls_of("StopContainer")
        assert stops and stops[0].args["timeout"] == 3  # the probe's own grace period
        (kill_at, first_start) = (stops[0].time, fake.calls_of("StartContainer")[0].time)
        assert 5 <= kill_at - first_start <= 12  # two failures at period 5 (plus jitter)
        restart_counts = [c.args["attempt"] for c in fake.calls_of("CreateContainer")]
        assert restart_counts[:2] == [0, 1]


async def test_readiness_probe_gates_ready(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1), cmd=["ready-check"])
    probe = (
        "    readinessProbe:\n      exec:\n        command: [ready-check]\n      periodSeconds: 2\n"
    )
    async with running_kubelet(fake, short_tmp) as h:
        h.write("r.yaml", manifest("r", probe))
        await h.wait_for(lambda: h.running("r", "app"))
        await trio.sleep(5)
        status = status_of(h, "r")
        assert status is not None
        conditions = {c.type: c.status for c in status.conditions}  # type: ignore[attr-defined]
        assert conditions["Ready"] == "False"
        fake.script_exec(ExecResult(exit_code=0), cmd=["ready-check"])

        def ready() -> bool:
            s = status_of(h, "r")
            return s is not None and {c.type: c.status for c in s.conditions}["Ready"] == "True"  # type: ignore[attr-defined]

        await h.wait_for(ready, timeout=10)


async def test_pre_stop_time_is_taken_from_the_grace_period(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """TERM-04 shape: grace 5, a preStop hook sleeping 3 s ⇒ StopContainer timeout 2."""
    hook = "    lifecycle:\n      preStop:\n        sleep:\n          seconds: 3\n"
    fake.behave(ContainerBehaviour(stop_takes=math.inf), container="app")
    async with running_kubelet(fake, short_tmp) as h:
        path = h.write("p.yaml", manifest("p", hook, "  terminationGracePeriodSeconds: 5\n"))
        await h.wait_for(lambda: h.running("p", "app"))
        removed = trio.current_time()
        path.unlink()
        await h.wait_for(lambda: fake.calls_of("StopContainer"), timeout=30)
        stop = fake.calls_of("StopContainer")[0]
        assert stop.args["timeout"] == 2
        assert stop.time - removed >= 3.0


async def test_failing_post_start_hook_kills_and_restarts(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=7, stderr=b"hook broke"), cmd=["setup"])
    hook = "    lifecycle:\n      postStart:\n        exec:\n          command: [setup]\n"
    async with running_kubelet(fake, short_tmp) as h:
        h.write("ps.yaml", manifest("ps", hook))
        await h.wait_for(lambda: len(fake.calls_of("StartContainer")) >= 2, timeout=60)
        assert fake.calls_of("StopContainer")
        components = h.components
        assert components is not None
        (waiting,) = components.syncer.waiting.values()
        assert waiting.get("app", ("",))[0] in ("PostStartHookError", "CrashLoopBackOff")


async def test_termination_message_falls_back_to_logs_on_error(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(
        ContainerBehaviour(exit_after=1, exit_code=2, log_lines=("starting", "fatal: no config")),
        container="app",
    )
    extra = "    terminationMessagePolicy: FallbackToLogsOnError\n"
    async with running_kubelet(fake, short_tmp) as h:
        h.write("t.yaml", manifest("t", extra, "  restartPolicy: Never\n"))

        def terminated() -> bool:
            s = status_of(h, "t")
            if s is None or not s.container_statuses:  # type: ignore[attr-defined]
                return False
            state = s.container_statuses[0].state  # type: ignore[attr-defined]
            return state is not None and state.terminated is not None

        await h.wait_for(terminated, timeout=30)
        state = status_of(h, "t").container_statuses[0].state.terminated  # type: ignore[union-attr]
        assert state.exit_code == 2
        assert "fatal: no config" in state.message
