"""Probes of sidecars (restartable init containers) through a kubelet joined to a
FakeApiServer, on FakeRuntime and a fake clock, watched through the API as upstream's
e2e tests for sidecar probes watch a pod: its restart count, every 2 s.

Upstream as the reference: a startup probe holds a sidecar's liveness and readiness
back until it succeeds; initial delays count from the sidecar's own start; a sidecar
whose liveness (or startup) probe fails is restarted alone, backed off and counted as
a regular container is; its readiness feeds the pod's Ready condition, also while the
pod terminates; and a terminating pod runs no liveness probe.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import ContainerBehaviour, ExecResult, FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES

WATCH = 180.0
"""How long a no-restart case is watched: upstream's observation window (3 min)."""


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def sidecar(**probes: Any) -> dict[str, Any]:
    return {"name": "sidecar", "image": "busybox:1.35", "restartPolicy": "Always", **probes}


def exec_probe(*command: str, **settings: Any) -> dict[str, Any]:
    return {"exec": {"command": list(command)}, **settings}


def status(c: Cluster) -> dict[str, Any]:
    return dict((c.pod("sc") or {}).get("status") or {})


def sidecar_status(c: Cluster) -> dict[str, Any]:
    found = status(c).get("initContainerStatuses") or [{}]
    return dict(found[0])


def condition(c: Cluster, kind: str) -> str:
    return next((x["status"] for x in status(c).get("conditions") or [] if x["type"] == kind), "")


def execs(fake: FakeRuntime, command: str) -> list[float]:
    return [x.time for x in fake.calls_of("ExecSync") if x.args["cmd"][0] == command]


def instances(fake: FakeRuntime, name: str) -> list[Any]:
    return [x for x in fake.containers.values() if x.config.metadata.name == name]


async def restart_counts(c: Cluster, seconds: float) -> list[int]:
    """The sidecar's restart count as the API shows it, every 2 s for ``seconds``."""
    counts = []
    for _ in range(int(seconds / 2)):
        await trio.sleep(2)
        counts.append(int(sidecar_status(c).get("restartCount", 0)))
    return counts


async def started_sidecar(c: Cluster, *, startup: bool = True) -> float:
    """When the sidecar shows running in the API (and started, if ``startup``)."""

    def up() -> bool:
        st = sidecar_status(c)
        return "running" in (st.get("state") or {}) and (st.get("started") or not startup)

    return await c.wait_for(up, timeout=30)


async def test_a_startup_probe_holds_the_sidecars_failing_liveness_probe_back(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1), cmd=["startup-check"])
    fake.script_exec(ExecResult(exit_code=1), cmd=["liveness-check"])
    probes = {
        "startupProbe": exec_probe("startup-check", initialDelaySeconds=15, failureThreshold=60),
        "livenessProbe": exec_probe("liveness-check", initialDelaySeconds=15, failureThreshold=1),
    }
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("sc", initContainers=[sidecar(**probes)])
        await started_sidecar(c, startup=False)
        assert set(await restart_counts(c, WATCH)) == {0}
        assert len(execs(fake, "startup-check")) >= 15
        assert execs(fake, "liveness-check") == []  # not once before the startup probe passed
        assert not sidecar_status(c)["started"]
        assert (c.phase("sc"), condition(c, "Initialized")) == ("Pending", "False")
        assert not instances(fake, "app")


async def test_a_sidecar_whose_liveness_probe_passes_is_never_restarted(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    probe = exec_probe("cat", "/tmp/health", initialDelaySeconds=15, timeoutSeconds=5)
    probe["failureThreshold"] = 1
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("sc", initContainers=[sidecar(livenessProbe=probe)])
        await started_sidecar(c)
        assert set(await restart_counts(c, WATCH)) == {0}
        assert len(execs(fake, "cat")) >= 15
        assert condition(c, "Ready") == "True"


async def test_a_failing_liveness_probe_restarts_only_the_sidecar_backed_off_and_counted(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1), cmd=["liveness-check"])
    probe = exec_probe("liveness-check", initialDelaySeconds=5, failureThreshold=1)
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("sc", initContainers=[sidecar(livenessProbe=probe)])
        await c.wait_for(lambda: instances(fake, "app"), timeout=30)
        (app,) = instances(fake, "app")
        counts = await restart_counts(c, 420)
        assert counts == sorted(counts) and counts[-1] >= 5  # monotonic, one at a time
        assert all(b - a <= 1 for a, b in itertools.pairwise(counts))
        assert instances(fake, "app") == [app] and app.id in {x.id for x in fake.running()}
        kills = [round(x.time) for x in fake.calls_of("StopContainer")]
        gaps = [b - a for a, b in itertools.pairwise(kills)]
        assert gaps[2:6] == sorted(gaps[2:6]) and gaps[5] > 2 * gaps[2]  # the back-off grows


async def test_liveness_waits_for_startup_success_and_its_delay_counts_from_the_start(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1), cmd=["startup-check"])
    fake.script_exec(ExecResult(exit_code=1), cmd=["liveness-check"])
    probes = {
        "startupProbe": exec_probe("startup-check", periodSeconds=1, failureThreshold=60),
        "livenessProbe": exec_probe("liveness-check", initialDelaySeconds=15, failureThreshold=1),
    }
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("sc", initContainers=[sidecar(**probes)])
        begun = await started_sidecar(c, startup=False)
        await trio.sleep(20)
        assert execs(fake, "liveness-check") == []
        fake.script_exec(ExecResult(exit_code=0), cmd=["startup-check"])
        await c.wait_for(lambda: sidecar_status(c).get("restartCount") == 1, timeout=30)
        (first, *_) = execs(fake, "liveness-check")
        # its 15 s delay ran from the sidecar's start: it probes at its first tick
        # after the startup probe passed (period 10 s), not 15 s after that
        assert 20 <= first - begun <= 20 + 2 + 10
        assert [x.args["timeout"] for x in fake.calls_of("StopContainer")] == [30]


async def test_a_sidecar_whose_startup_probe_fails_is_restarted(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1), cmd=["startup-check"])
    probes = {
        "startupProbe": exec_probe("startup-check", initialDelaySeconds=15, failureThreshold=3),
        "livenessProbe": exec_probe("true", initialDelaySeconds=15, failureThreshold=1),
    }
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("sc", initContainers=[sidecar(**probes)])
        await started_sidecar(c, startup=False)
        await c.wait_for(lambda: sidecar_status(c).get("restartCount") == 1, timeout=90)
        assert execs(fake, "true") == []


async def test_a_sidecars_readiness_feeds_the_pods_ready_condition(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1), cmd=["ready-check"])
    probe = exec_probe("ready-check", periodSeconds=2, failureThreshold=1)
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("sc", initContainers=[sidecar(readinessProbe=probe)])
        await c.wait_for(lambda: c.phase("sc") == "Running", timeout=30)
        await trio.sleep(10)
        assert (condition(c, "Ready"), condition(c, "ContainersReady")) == ("False", "False")
        fake.script_exec(ExecResult(exit_code=0), cmd=["ready-check"])
        await c.wait_for(lambda: condition(c, "Ready") == "True", timeout=5)
        assert sidecar_status(c)["ready"] is True
        fake.script_exec(ExecResult(exit_code=1), cmd=["ready-check"])
        await c.wait_for(lambda: condition(c, "Ready") == "False", timeout=5)
        assert sidecar_status(c).get("restartCount", 0) == 0


async def test_a_terminating_pod_goes_unready_when_its_sidecar_does_and_probes_no_liveness(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream's e2e: a sidecar that, on SIGTERM, stops being ready (and alive) and
    takes 20 s to exit; the pod must go unready meanwhile, with no liveness kill."""
    fake.behave(ContainerBehaviour(stop_takes=20), container="sidecar")
    probes = {
        "readinessProbe": exec_probe(
            "cat", "/tmp/ready", initialDelaySeconds=5, periodSeconds=2, failureThreshold=1
        ),
        "livenessProbe": exec_probe(
            "cat", "/tmp/liveness", initialDelaySeconds=5, periodSeconds=1, failureThreshold=1
        ),
    }
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("sc", initContainers=[sidecar(**probes)])
        await c.wait_for(lambda: condition(c, "Ready") == "True", timeout=30)
        c.api.delete("pods", "default", "sc", grace=30)
        deleted = trio.current_time()
        fake.script_exec(ExecResult(exit_code=1), cmd=["cat"])  # the TERM trap removed both
        unready = await c.wait_for(lambda: condition(c, "Ready") == "False", timeout=30)
        assert unready - deleted <= 2 + 1  # the next readiness probe, not the end of the stop
        assert c.pod("sc") is not None  # the sidecar is still stopping
        await c.wait_for(lambda: c.pod("sc") is None, timeout=60)
        events = c.api.list("events", "default")
        assert not [e for e in events if "liveness probe" in e.get("message", "")]
        assert len(fake.calls_of("StopContainer")) == 2  # app, then the sidecar: no kill before
