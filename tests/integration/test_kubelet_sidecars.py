"""Sidecars (restartable init containers) through the whole kubelet, on a fake clock.

Upstream as the reference: a sidecar's startupProbe gates the next init container
(computeInitContainerActions), a sidecar that exits is restarted whatever the pod's
restart policy, and a pod's termination stops the regular containers first, then the
sidecars in reverse order (kuberuntime_termination_order.go).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trio

from kubelet.cri import api
from kubelet.testing import ContainerBehaviour, ExecResult, FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES, running_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


GATED = """\
apiVersion: v1
kind: Pod
metadata:
  name: gated
spec:
  initContainers:
  - name: proxy
    image: busybox:1.35
    restartPolicy: Always
    startupProbe:
      exec:
        command: [proxy-ready]
      periodSeconds: 1
      failureThreshold: 100
  - name: setup
    image: busybox:1.35
  containers:
  - name: app
    image: busybox:1.35
"""


def start_times(fake: FakeRuntime, name: str) -> list[float]:
    ids = {c.id for c in fake.containers.values() if c.config.metadata.name == name}
    return [c.time for c in fake.calls_of("StartContainer") if c.args.get("container_id") in ids]


async def test_sidecar_startup_probe_gates_the_next_init_container(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1), cmd=["proxy-ready"])
    fake.behave(ContainerBehaviour(exit_after=1, exit_code=0), container="setup")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("gated.yaml", GATED)
        proxy_at = await h.wait_for(lambda: h.running("gated", "proxy"))
        await trio.sleep(8)
        assert not h.containers("gated", "setup")  # the probe has not succeeded yet
        assert not h.containers("gated", "app")
        ready_at = trio.current_time()
        fake.script_exec(ExecResult(exit_code=0), cmd=["proxy-ready"])
        setup_at = await h.wait_for(lambda: h.containers("gated", "setup"))
        assert setup_at - ready_at <= 2.5  # the next probe (1 s) + the sync it triggers
        await h.wait_for(lambda: h.running("gated", "app"))
        assert setup_at - proxy_at >= 8


ORDERED = """\
apiVersion: v1
kind: Pod
metadata:
  name: ordered
spec:
  terminationGracePeriodSeconds: 30
  initContainers:
  - name: proxy
    image: busybox:1.35
    restartPolicy: Always
  - name: logs
    image: busybox:1.35
    restartPolicy: Always
  containers:
  - name: app
    image: busybox:1.35
  - name: worker
    image: busybox:1.35
"""


def stops_by_name(fake: FakeRuntime, names: dict[str, str]) -> dict[str, tuple[float, float, int]]:
    """container name → (StopContainer arrival, its end, its timeout), first stop only."""
    out: dict[str, tuple[float, float, int]] = {}
    for call in fake.calls_of("StopContainer"):
        name = names.get(call.args["container_id"], call.args["container_id"])
        assert call.finished is not None
        out.setdefault(name, (call.time, call.finished, call.args["timeout"]))
    return out


async def test_termination_stops_regular_containers_then_sidecars_in_reverse_order(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(stop_takes=3), container="app")
    fake.behave(ContainerBehaviour(stop_takes=1), container="worker")
    fake.behave(ContainerBehaviour(stop_takes=0.5), container="logs")
    fake.behave(ContainerBehaviour(stop_takes=0.5), container="proxy")
    async with running_kubelet(fake, short_tmp) as h:
        path = h.write("ordered.yaml", ORDERED)
        await h.wait_for(lambda: h.running("ordered", "app") and h.running("ordered", "worker"))
        names = {c.id: c.config.metadata.name for c in fake.containers.values()}
        path.unlink()
        removed = trio.current_time()
        await h.wait_for(lambda: not h.sandboxes("ordered"))
    stops = stops_by_name(fake, names)
    app, worker, logs, proxy = (stops[n] for n in ("app", "worker", "logs", "proxy"))
    # regular containers at once, in parallel
    assert app[0] == worker[0] and app[0] - removed < 2.5
    # the last sidecar once every regular container has stopped, the first one after it
    assert logs[0] == pytest.approx(app[1], abs=0.01)
    assert proxy[0] == pytest.approx(logs[1], abs=0.01)
    assert proxy[1] - app[0] == pytest.approx(3 + 0.5 + 0.5, abs=0.01)
    # the wait comes off each sidecar's grace period (whole seconds, as upstream)
    assert (app[2], worker[2], logs[2], proxy[2]) == (30, 30, 27, 27)
    # and the sandbox only after every container
    (sandbox_stop,) = fake.calls_of("StopPodSandbox")
    assert sandbox_stop.time >= proxy[1]
    rpcs = [
        names.get(c.args.get("container_id", ""), c.rpc)
        for c in fake.calls
        if c.rpc in ("StopContainer", "StopPodSandbox", "RemoveContainer", "RemovePodSandbox")
    ]
    assert rpcs[:4] in (["app", "worker", "logs", "proxy"], ["worker", "app", "logs", "proxy"])
    assert rpcs[4] == "StopPodSandbox" and rpcs[-1] == "RemovePodSandbox"


async def test_a_sidecar_stuck_behind_a_slow_container_still_stops_within_the_grace_period(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(stop_takes=math.inf), container="app")  # ignores SIGTERM
    async with running_kubelet(fake, short_tmp) as h:
        path = h.write("ordered.yaml", ORDERED.replace("Seconds: 30", "Seconds: 6"))
        await h.wait_for(lambda: h.running("ordered", "app") and h.running("ordered", "proxy"))
        names = {c.id: c.config.metadata.name for c in fake.containers.values()}
        path.unlink()
        await h.wait_for(lambda: not h.sandboxes("ordered"), timeout=60)
    stops = stops_by_name(fake, names)
    app, logs, proxy = (stops[n] for n in ("app", "logs", "proxy"))
    assert app[1] - app[0] == pytest.approx(6, abs=0.01)  # SIGKILL at the end of its grace
    # the sidecars wait for it only as long as their own grace allows, then get the 2 s
    # minimum: the pod is gone within its grace period plus that minimum
    assert logs[0] - app[0] == pytest.approx(6, abs=0.01) and logs[2] == 2
    assert proxy[1] - app[0] <= 6 + 2 + 0.01


RUN_ONCE = """\
apiVersion: v1
kind: Pod
metadata:
  name: once
spec:
  restartPolicy: Never
  initContainers:
  - name: proxy
    image: busybox:1.35
    restartPolicy: Always
  - name: logs
    image: busybox:1.35
    restartPolicy: Always
  containers:
  - name: app
    image: busybox:1.35
"""


def status_of(h: object, name: str) -> object:
    components = h.components
    assert components is not None
    for uid, status in components.syncer.statuses.items():
        pod = components.pods.get(uid)
        if pod is not None and pod.metadata.name.startswith(name + "-"):
            return status
    return None


def phase_of(h: object, name: str) -> str:
    status = status_of(h, name)
    return "" if status is None else str(status.phase)  # type: ignore[attr-defined]


async def test_a_sidecar_that_exits_is_restarted_even_in_a_never_pod(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("once.yaml", RUN_ONCE)
        await h.wait_for(lambda: h.running("once", "app"))
        (proxy,) = h.running("once", "proxy")
        fake.exit_container(proxy.id, 1)
        await h.wait_for(lambda: h.running("once", "proxy"), timeout=5)
        assert len(h.containers("once", "proxy")) == 2
        assert phase_of(h, "once") == "Running"
        assert h.running("once", "app")  # the regular container was left alone
        assert len(h.containers("once", "app")) == 1


async def test_regular_containers_done_stop_the_sidecars_and_the_pod_succeeds(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(exit_after=5, exit_code=0), container="app")
    fake.behave(ContainerBehaviour(stop_takes=1), container="logs")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("once.yaml", RUN_ONCE)
        await h.wait_for(lambda: h.running("once", "app"))
        names = {c.id: c.config.metadata.name for c in fake.containers.values()}
        await h.wait_for(lambda: phase_of(h, "once") == "Succeeded", timeout=30)
        assert not fake.running()
        stops = stops_by_name(fake, names)
        assert stops["proxy"][0] == pytest.approx(stops["logs"][1], abs=0.01)  # reverse order
        await trio.sleep(130)  # two periodic resyncs: nothing runs again
        assert not fake.running()
        assert len(fake.calls_of("RunPodSandbox")) == 1
        assert len(fake.calls_of("StartContainer")) == 3
        assert phase_of(h, "once") == "Succeeded"


async def test_a_crash_looping_sidecar_does_not_hold_back_a_regular_container_restart(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(exit_after=1, exit_code=1), container="proxy")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("ordered.yaml", ORDERED)
        await h.wait_for(lambda: h.running("ordered", "app"))
        await trio.sleep(60)  # the sidecar is deep in its crash-loop back-off (40 s and more)
        (app,) = h.running("ordered", "app")
        exited_at = trio.current_time()
        fake.exit_container(app.id, 2)
        restarted = await h.wait_for(lambda: h.running("ordered", "app"), timeout=60)
        assert restarted - exited_at <= 2.0  # the next relist, not the sidecar's back-off


async def test_a_shorter_grace_period_cuts_the_sidecars_wait_short(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(stop_takes=math.inf), container="app")  # ignores SIGTERM
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod(
            "web",
            initContainers=[{"name": "proxy", "image": "busybox:1.35", "restartPolicy": "Always"}],
        )
        await c.wait_for(lambda: c.phase("web") == "Running")
        names = {x.id: x.config.metadata.name for x in fake.containers.values()}
        c.api.delete("pods", "default", "web", grace=30)
        await c.wait_for(lambda: len(fake.calls_of("StopContainer")) >= 1)
        await trio.sleep(5)
        assert [names[x.args["container_id"]] for x in fake.calls_of("StopContainer")] == ["app"]
        shortened = trio.current_time()
        c.api.delete("pods", "default", "web", grace=2)
        gone = await c.wait_for(lambda: not fake.sandboxes, timeout=60)
        assert gone - shortened <= 2 + 2 + 1.5  # the new grace, the 2 s minimum, a sync
        stops = [
            (names[x.args["container_id"]], x.args["timeout"])
            for x in fake.calls_of("StopContainer")
        ]
        assert stops[0] == ("app", 30) and ("app", 2) in stops and ("proxy", 2) in stops
        await c.wait_for(lambda: c.pod("web") is None, timeout=10)


async def test_a_sidecars_post_start_hook_holds_the_next_init_container(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A sidecar without a startupProbe counts as started once running and once its
    postStart hook has returned (upstream runs the hook inside the container's start)."""
    fake.script_exec(ExecResult(exit_code=0, takes=5), cmd=["warm-up"])
    fake.behave(ContainerBehaviour(exit_after=1, exit_code=0), container="setup")
    hooked = GATED.replace(
        "    startupProbe:\n      exec:\n        command: [proxy-ready]\n"
        "      periodSeconds: 1\n      failureThreshold: 100\n",
        "    lifecycle:\n      postStart:\n        exec:\n          command: [warm-up]\n",
    )
    assert "warm-up" in hooked and "startupProbe" not in hooked
    async with running_kubelet(fake, short_tmp) as h:
        h.write("gated.yaml", hooked)
        await h.wait_for(lambda: h.running("gated", "app"))
    created = {c.args["name"]: c.time for c in fake.calls_of("CreateContainer")}
    (proxy_started,) = start_times(fake, "proxy")
    assert created["setup"] - proxy_started == pytest.approx(5, abs=0.01)


def proxy_restarts(c: Cluster) -> int:
    """The sidecar "proxy"'s restart count as the API shows it."""
    statuses = ((c.pod("web") or {}).get("status") or {}).get("initContainerStatuses") or []
    return int(next(s.get("restartCount", 0) for s in statuses if s["name"] == "proxy"))


def kill_sandbox(fake: FakeRuntime) -> None:
    """The pod's sandbox dies (its pause process killed): every container with it."""
    for sandbox in fake.sandboxes.values():
        sandbox.state = api.SANDBOX_NOTREADY
    for container in fake.running():
        fake.exit_container(container.id, 137)


async def test_a_new_sandbox_runs_the_sidecar_and_the_init_containers_again_first(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream purges the init containers of a sandbox that is replaced: in the new one
    the sidecar starts first, the completed init container runs again, and only then
    the regular container -- even while the sidecar was crash-looping."""
    fake.behave(ContainerBehaviour(exit_after=1, exit_code=0), container="setup")
    inits = [
        {"name": "proxy", "image": "busybox:1.35", "restartPolicy": "Always"},
        {"name": "setup", "image": "busybox:1.35"},
    ]
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("web", initContainers=inits)
        await c.wait_for(lambda: any(x.config.metadata.name == "app" for x in fake.running()))
        for _ in range(2):  # a crash-looping sidecar: its back-off is 20 s by now
            (proxy,) = [x for x in fake.running() if x.config.metadata.name == "proxy"]
            fake.exit_container(proxy.id, 1)
            await trio.sleep(15)
        before = len(fake.calls_of("CreateContainer"))
        restarts = proxy_restarts(c)
        assert restarts == 2
        kill_sandbox(fake)
        await c.wait_for(lambda: len(fake.calls_of("RunPodSandbox")) == 2, timeout=10)
        await c.wait_for(lambda: any(x.config.metadata.name == "app" for x in fake.running()))
        created = [x.args["name"] for x in fake.calls_of("CreateContainer")[before:]]
        assert created[-3:] == ["proxy", "setup", "app"]
        (proxy,) = [x for x in fake.running() if x.config.metadata.name == "proxy"]
        (app,) = [x for x in fake.running() if x.config.metadata.name == "app"]
        assert proxy.started_at < app.started_at
        old = {x.sandbox_id for x in fake.containers.values()} - {proxy.sandbox_id}
        left = [x.config.metadata.name for x in fake.containers.values() if x.sandbox_id in old]
        assert "proxy" not in left and "setup" not in left  # purged with their sandbox
        # the count goes on from the log files the purged instances left
        await c.wait_for(lambda: proxy_restarts(c) > restarts, timeout=10)
        assert proxy.config.metadata.attempt == restarts + 1
