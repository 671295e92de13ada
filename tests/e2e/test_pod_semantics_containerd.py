"""Pod semantics on real containerd, observed through a FakeApiServer:
activeDeadlineSeconds, an ephemeral container in its target's PID namespace, the sleep
preStop hook's timing."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, labels
from kubelet.cri import api as cri_api

from .cluster import Processes
from .test_probes_containerd import BUSYBOX, create, pod, status, wait_status

pytestmark = pytest.mark.containerd

# a TERM handler, so that a stop ends at once and timings measure the kubelet alone
LOOP = "trap 'exit 0' TERM; echo semantics-marker >/dev/null; while true; do sleep 0.2; done"


def app() -> dict[str, Any]:
    return {"name": "app", "image": BUSYBOX, "command": ["sh", "-c", LOOP]}


async def test_active_deadline_fails_the_pod(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    url, node, _ = cluster
    runtime, _ = cri
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        body = pod("deadline", node, app(), activeDeadlineSeconds=4, restartPolicy="Never")
        await create(api, body, node)
        running = await wait_status(api, "deadline", lambda s: s.get("phase") == "Running", 30)
        assert running["startTime"]
        started = time.monotonic()
        failed = await wait_status(api, "deadline", lambda s: s.get("phase") == "Failed", 30)
        assert time.monotonic() - started < 8
        assert (failed["reason"], failed["message"]) == (
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline",
        )
        (cs,) = failed["containerStatuses"]
        assert cs["state"]["terminated"]["exitCode"] == 0  # its TERM handler ran
        live = await runtime.list_containers(labels={labels.POD_NAME: "deadline"})
        assert all(c.state != cri_api.CONTAINER_RUNNING for c in live)


async def test_ephemeral_container_sees_its_target_processes(
    cluster: tuple[str, str, Processes],
) -> None:
    url, node, _ = cluster
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await create(api, pod("debugged", node, app(), terminationGracePeriodSeconds=2), node)
        await wait_status(api, "debugged", lambda s: s.get("phase") == "Running", 30)
        debugger = {
            "name": "debugger",
            "image": BUSYBOX,
            "targetContainerName": "app",
            # PID 1 is the target's shell only in the target's PID namespace
            "command": ["sh", "-c", "tr '\\0' ' ' </proc/1/cmdline | grep -q semantics-marker"],
            "terminationMessagePolicy": "File",
        }
        r = await api.patch(
            "/api/v1/namespaces/default/pods/debugged/ephemeralcontainers",
            json={"spec": {"ephemeralContainers": [debugger]}},
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        assert r.status_code == 200, r.text

        def finished(s: dict[str, Any]) -> bool:
            statuses = s.get("ephemeralContainerStatuses") or [{}]
            return "terminated" in (statuses[0].get("state") or {})

        done = await wait_status(api, "debugged", finished, 30)
        (eph,) = done["ephemeralContainerStatuses"]
        assert eph["state"]["terminated"]["exitCode"] == 0, eph
        await trio.sleep(3)
        again = await status(api, "debugged")
        (eph,) = again["ephemeralContainerStatuses"]
        assert eph["restartCount"] == 0 and "terminated" in eph["state"]  # never restarted
        assert again["phase"] == "Running"
        r = await api.delete("/api/v1/namespaces/default/pods/debugged")
        assert r.status_code == 200
        with trio.fail_after(30):
            while (await api.get("/api/v1/namespaces/default/pods/debugged")).status_code != 404:
                await trio.sleep(0.1)


async def test_sleep_pre_stop_then_a_prompt_stop(
    cluster: tuple[str, str, Processes],
) -> None:
    url, node, _ = cluster
    container = {**app(), "lifecycle": {"preStop": {"sleep": {"seconds": 2}}}}
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await create(api, pod("nap", node, container, terminationGracePeriodSeconds=20), node)
        await wait_status(api, "nap", lambda s: s.get("phase") == "Running", 30)
        deleted = time.monotonic()
        r = await api.delete("/api/v1/namespaces/default/pods/nap")
        assert r.status_code == 200
        with trio.fail_after(30):
            while (await api.get("/api/v1/namespaces/default/pods/nap")).status_code != 404:
                await trio.sleep(0.1)
        took = time.monotonic() - deleted
        assert 2.0 <= took < 5.0  # 2 s of sleep, then SIGTERM ends it at once
