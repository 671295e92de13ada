"""The cgroup driver: the runtime's (CRI RuntimeConfig) wins over the configured one."""

from __future__ import annotations

import logging

import pytest
import trio

from kubelet.cgroups import driver_from_runtime
from kubelet.cri import RuntimeUnavailable, Unimplemented, api
from kubelet.errors import ConfigError


def answering(*answers: api.RuntimeConfigResponse | Exception) -> tuple[list[float], object]:
    calls: list[float] = []
    queue = list(answers)

    async def runtime_config() -> api.RuntimeConfigResponse:
        calls.append(trio.current_time())
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return calls, runtime_config


def says(driver: int) -> api.RuntimeConfigResponse:
    return api.RuntimeConfigResponse(
        linux=api.LinuxRuntimeConfiguration(cgroup_driver=driver)  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("reported", "configured", "used"),
    [
        (api.SYSTEMD, "cgroupfs", "systemd"),
        (api.CGROUPFS, "systemd", "cgroupfs"),
        (api.SYSTEMD, "systemd", "systemd"),
    ],
)
async def test_the_runtime_decides(
    reported: int, configured: str, used: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, call = answering(says(reported))
    with caplog.at_level(logging.INFO):
        assert await driver_from_runtime(call, configured) == used  # type: ignore[arg-type]
    assert f"Using cgroup driver setting received from the CRI runtime cgroupDriver={used}" in (
        caplog.text
    )
    assert ("is ignored" in caplog.text) == (used != configured)


async def test_an_old_runtime_leaves_the_configured_driver(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, call = answering(Unimplemented("RuntimeConfig", "unknown method"))
    with caplog.at_level(logging.INFO):
        assert await driver_from_runtime(call, "systemd") == "systemd"  # type: ignore[arg-type]
    assert "Falling back to using cgroupDriver from kubelet config." in caplog.text
    _, call = answering(api.RuntimeConfigResponse())  # no Linux section
    assert await driver_from_runtime(call, "cgroupfs") == "cgroupfs"  # type: ignore[arg-type]


async def test_errors_are_retried_then_stop_start_up(autojump_clock: trio.abc.Clock) -> None:
    calls, call = answering(RuntimeUnavailable("RuntimeConfig", "connection refused"), says(0))
    assert await driver_from_runtime(call, "cgroupfs") == "systemd"  # type: ignore[arg-type]
    assert calls == [0.0, 2.0]
    calls, call = answering(RuntimeUnavailable("RuntimeConfig", "connection refused"))
    with pytest.raises(ConfigError) as caught:
        await driver_from_runtime(call, "cgroupfs")  # type: ignore[arg-type]
    assert calls == [2.0, 4.0, 6.0]
    (problem,) = caught.value.problems
    assert problem.field == "cgroupDriver"
    assert problem.message.startswith("cannot ask the container runtime for its cgroup driver: ")


async def test_an_unknown_driver_stops_start_up() -> None:
    _, call = answering(says(7))
    with pytest.raises(ConfigError, match="runtime returned an unknown cgroup driver 7"):
        await driver_from_runtime(call, "cgroupfs")  # type: ignore[arg-type]
