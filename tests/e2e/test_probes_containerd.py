"""Probes and lifecycle hooks on real containerd, observed through a FakeApiServer.

The kubelet process is a node of a FakeApiServer process (so pod status, readiness and
restart counts are visible as a cluster would see them) and runs real containers.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, labels

from .cluster import Processes, node_registered

pytestmark = pytest.mark.containerd

BUSYBOX = "docker.io/library/busybox:1.35"


def pod(name: str, node: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [container], **spec},
    }


async def create(api: httpx.AsyncClient, body: dict[str, Any], node: str) -> str:
    """Create the pod once the node is registered; its UID."""
    await node_registered(api, node)
    r = await api.post("/api/v1/namespaces/default/pods", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["metadata"]["uid"])


async def status(api: httpx.AsyncClient, name: str) -> dict[str, Any]:
    r = await api.get(f"/api/v1/namespaces/default/pods/{name}")
    return dict(r.json().get("status") or {})


async def wait_status(
    api: httpx.AsyncClient, name: str, check: Any, timeout: float
) -> dict[str, Any]:
    with trio.fail_after(timeout):
        while True:
            current = await status(api, name)
            if check(current):
                return current
            await trio.sleep(0.2)


def condition(st: dict[str, Any], kind: str) -> str:
    return next((c["status"] for c in st.get("conditions", []) if c["type"] == kind), "")


def restarts(st: dict[str, Any]) -> int:
    statuses = st.get("containerStatuses") or []
    return int(statuses[0].get("restartCount", 0)) if statuses else 0


async def test_httpd_readiness_probe_becomes_ready(
    cluster: tuple[str, str, Processes],
) -> None:
    url, node, _ = cluster
    container = {
        "name": "web",
        "image": BUSYBOX,
        "command": [
            "sh",
            "-c",
            "mkdir -p /w && echo ok > /w/index.html && "
            "trap 'exit 0' TERM; httpd -f -p 8080 -h /w & wait",
        ],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await create(api, pod("web", node, container, terminationGracePeriodSeconds=5), node)
        st = await wait_status(api, "web", lambda s: condition(s, "Ready") == "True", 30)
        assert st["containerStatuses"][0]["ready"] is True


async def test_failing_liveness_exec_probe_restarts_with_backoff(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    url, node, _ = cluster
    runtime, _ = cri
    container = {
        "name": "app",
        "image": BUSYBOX,
        "command": [
            "sh",
            "-c",
            "touch /tmp/alive; trap 'exit 0' TERM; "
            "sleep 3; rm /tmp/alive; while true; do sleep 0.2; done",
        ],
        "livenessProbe": {
            "exec": {"command": ["cat", "/tmp/alive"]},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        uid = await create(api, pod("live", node, container, terminationGracePeriodSeconds=2), node)
        await wait_status(api, "live", lambda s: restarts(s) >= 1, 30)
        created: dict[int, float] = {}

        async def four_instances() -> bool:
            for c in await runtime.list_containers(labels={labels.POD_UID: uid}):
                created.setdefault(c.metadata.attempt, c.created_at / 1e9)
            return len(created) >= 4

        with trio.fail_after(60):
            while not await four_instances():
                await trio.sleep(0.1)
        starts = [created[a] for a in sorted(created)[:4]]
        # each instance is killed ~3 s after it starts; as upstream (doBackOff looks at
        # the newest *exited* instance) the first two restarts are immediate, then the
        # 10 s crash-loop back-off holds the next one
        assert starts[1] - starts[0] < 8
        assert starts[2] - starts[1] < 8
        assert starts[3] - starts[2] >= 8.0


async def test_tcp_probe_on_a_closed_port_fails(
    cluster: tuple[str, str, Processes],
) -> None:
    url, node, _ = cluster
    container = {
        "name": "app",
        "image": BUSYBOX,
        "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"],
        "readinessProbe": {"tcpSocket": {"port": 9999}, "periodSeconds": 1},
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await create(api, pod("tcp", node, container, terminationGracePeriodSeconds=2), node)
        await wait_status(api, "tcp", lambda s: s.get("phase") == "Running", 30)
        await trio.sleep(4)
        st = await status(api, "tcp")
        assert condition(st, "Ready") == "False"
        assert st["containerStatuses"][0]["ready"] is False


async def test_prestop_sleep_shortens_the_stop_timeout(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    url, node, _ = cluster
    runtime, _ = cri
    container = {
        "name": "app",
        "image": BUSYBOX,
        # ignores SIGTERM on purpose: the stop then takes its whole timeout
        "command": ["sh", "-c", "while true; do sleep 0.2; done"],
        "lifecycle": {"preStop": {"sleep": {"seconds": 3}}},
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await create(api, pod("stop", node, container, terminationGracePeriodSeconds=5), node)
        await wait_status(api, "stop", lambda s: s.get("phase") == "Running", 30)
        deleted = time.monotonic()
        r = await api.delete("/api/v1/namespaces/default/pods/stop")
        assert r.status_code == 200
        with trio.fail_after(30):
            while (await api.get("/api/v1/namespaces/default/pods/stop")).status_code != 404:
                await trio.sleep(0.1)
        took = time.monotonic() - deleted
        # 3 s of preStop, then StopContainer with timeout 5 - 3 = 2 s before SIGKILL
        assert 4.5 <= took < 9.0
        left = await runtime.list_containers(labels={labels.POD_NAME: "stop"})
        assert not left


async def test_failing_post_start_hook_restarts_the_container(
    cluster: tuple[str, str, Processes],
) -> None:
    url, node, _ = cluster
    container = {
        "name": "app",
        "image": BUSYBOX,
        "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"],
        "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 3"]}}},
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await create(api, pod("hook", node, container, terminationGracePeriodSeconds=2), node)
        await wait_status(api, "hook", lambda s: restarts(s) >= 1, 40)


def sidecar_pod(name: str, node: str, sidecar: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A pod whose first init container is ``sidecar`` (restartPolicy Always); its main
    container exits on SIGTERM."""
    main = {
        "name": "main",
        "image": BUSYBOX,
        "command": ["sh", "-c", "trap 'exit 0' TERM; " + IDLE],
    }
    body = pod(name, node, main, **spec)
    body["spec"]["initContainers"] = [{"image": BUSYBOX, "restartPolicy": "Always", **sidecar}]
    return body


IDLE = "while true; do sleep 0.2; done"


async def test_a_sidecars_startup_probe_holds_its_failing_liveness_probe_back(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    """Upstream's "should *not* be restarted by liveness probe because startup probe
    delays it", on a shorter clock: the startup probe fails for 60 s before it gives
    up, the liveness probe would kill at its first failure; for 40 s nothing happens."""
    url, node, _ = cluster
    runtime, _ = cri
    sidecar = {
        "name": "sidecar",
        "command": ["sh", "-c", IDLE],
        "startupProbe": {
            "exec": {"command": ["/bin/false"]},
            "periodSeconds": 1,
            "failureThreshold": 60,
        },
        "livenessProbe": {
            "exec": {"command": ["/bin/false"]},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        body = sidecar_pod("gated", node, sidecar, terminationGracePeriodSeconds=2)
        uid = await create(api, body, node)

        def sidecar_status(st: dict[str, Any]) -> dict[str, Any]:
            return dict((st.get("initContainerStatuses") or [{}])[0])

        def running(st: dict[str, Any]) -> bool:
            return "running" in (sidecar_status(st).get("state") or {})

        await wait_status(api, "gated", running, 30)
        watched = time.monotonic()
        while time.monotonic() - watched < 40:
            st = await status(api, "gated")
            assert sidecar_status(st).get("restartCount", 0) == 0, st
            await trio.sleep(2)
        st = await status(api, "gated")
        assert sidecar_status(st)["started"] is False
        assert (st["phase"], condition(st, "Initialized")) == ("Pending", "False")
        instances = await runtime.list_containers(labels={labels.POD_UID: uid})
        assert [c.metadata.name for c in instances] == ["sidecar"]  # one instance, no main
        r = await api.get("/api/v1/namespaces/default/events")
        messages = [e.get("message", "") for e in r.json().get("items", [])]
        assert any(m.startswith("Startup probe failed") for m in messages)
        assert not [m for m in messages if "Liveness probe" in m or "liveness probe" in m]


async def test_a_terminating_pod_goes_unready_as_soon_as_its_sidecar_does(
    cluster: tuple[str, str, Processes],
) -> None:
    """Upstream's "should mark readiness on pods to false while pod is in progress of
    terminating": on SIGTERM the sidecar stops being ready, then takes 15 s to exit."""
    url, node, _ = cluster
    script = (
        "trap 'rm -f /tmp/ready; sleep 15; exit 0' TERM; touch /tmp/ready; "
        "while true; do sleep 0.2; done"
    )
    sidecar = {
        "name": "sidecar",
        "command": ["sh", "-c", script],
        "readinessProbe": {
            "exec": {"command": ["cat", "/tmp/ready"]},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        body = sidecar_pod("leaving", node, sidecar, terminationGracePeriodSeconds=30)
        await create(api, body, node)
        await wait_status(api, "leaving", lambda s: condition(s, "Ready") == "True", 30)
        r = await api.delete("/api/v1/namespaces/default/pods/leaving")
        assert r.status_code == 200
        deleted = time.monotonic()
        await wait_status(api, "leaving", lambda s: condition(s, "Ready") == "False", 10)
        assert time.monotonic() - deleted < 8  # well before the sidecar's 15 s are over
        assert (await api.get("/api/v1/namespaces/default/pods/leaving")).status_code == 200
        with trio.fail_after(40):
            while (await api.get("/api/v1/namespaces/default/pods/leaving")).status_code != 404:
                await trio.sleep(0.2)


async def test_a_replaced_sandbox_runs_the_sidecar_and_init_containers_again_first(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    """The sandbox is stopped behind the kubelet's back: in the new one the sidecar
    starts first, the completed init container runs again, then the main container; the
    sidecar's restart count goes on from where it was."""
    url, node, _ = cluster
    runtime, _ = cri
    sidecar = {"name": "sidecar", "command": ["sh", "-c", "trap 'exit 0' TERM; " + IDLE]}
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        body = sidecar_pod("again", node, sidecar, terminationGracePeriodSeconds=2)
        body["spec"]["initContainers"].append(
            {"name": "setup", "image": BUSYBOX, "command": ["true"]}
        )
        uid = await create(api, body, node)
        await wait_status(api, "again", lambda s: condition(s, "Ready") == "True", 30)
        (old,) = await runtime.list_pod_sandbox(labels={labels.POD_UID: uid})
        await runtime.stop_pod_sandbox(old.id)

        async def new_instances() -> dict[str, Any]:
            found = await runtime.list_containers(labels={labels.POD_UID: uid})
            return {c.metadata.name: c for c in found if c.pod_sandbox_id != old.id}

        with trio.fail_after(40):
            while "main" not in (current := await new_instances()):
                await trio.sleep(0.2)
        assert current["sidecar"].created_at < current["setup"].created_at
        assert current["setup"].created_at < current["main"].created_at
        assert current["sidecar"].metadata.attempt == 1  # restart 0 was in the old sandbox
        gone = await runtime.list_containers(labels={labels.POD_UID: uid})
        assert {c.metadata.name for c in gone if c.pod_sandbox_id == old.id} == {"main"}
        st = await wait_status(api, "again", lambda s: condition(s, "Ready") == "True", 30)
        assert st["initContainerStatuses"][0]["restartCount"] == 1
