"""Pod lifecycle on real containerd: sidecar termination order, finished pods stay finished.

The kubelet process (static pods, or joined to a FakeApiServer process) against the real
runtime, real clock. Times come from the CRI (containers' finishedAt) or from polling it.
"""

from __future__ import annotations

import signal
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, api, labels
from kubelet.cri.__main__ import cleanup

from .cluster import Processes, node_registered
from .test_kubelet_containerd import BUSYBOX, KubeletProcess

pytestmark = pytest.mark.containerd

SLOW_STOP = "trap 'sleep 1; exit 0' TERM; while true; do sleep 0.2; done"
"""A container that needs a second to stop after SIGTERM."""


@pytest.fixture
async def kubelet(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[KubeletProcess]:
    runtime, _ = cri
    process = KubeletProcess(runtime, short_tmp, f"e2e-{uuid.uuid4().hex[:6]}")
    process.manifests.mkdir()
    try:
        yield process
    finally:
        if process.proc is not None and process.proc.poll() is None:
            process.stop(signal.SIGKILL)
        await cleanup(runtime, kubelet_only=True)


def sidecar_pod(name: str, *, restart: str, app: str, worker: str = SLOW_STOP) -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: v1
        kind: Pod
        metadata:
          name: {name}
        spec:
          restartPolicy: {restart}
          terminationGracePeriodSeconds: 20
          initContainers:
          - name: proxy
            image: {BUSYBOX}
            restartPolicy: Always
            command: ["sh", "-c", {SLOW_STOP!r}]
          - name: logs
            image: {BUSYBOX}
            restartPolicy: Always
            command: ["sh", "-c", {SLOW_STOP!r}]
          containers:
          - name: app
            image: {BUSYBOX}
            command: ["sh", "-c", {app!r}]
          - name: worker
            image: {BUSYBOX}
            command: ["sh", "-c", {worker!r}]
        """
    )


async def states(kubelet: KubeletProcess, name: str) -> dict[str, int]:
    return {c.metadata.name: c.state for c in await kubelet.containers(name)}


async def test_finished_run_once_pod_stops_its_sidecars_in_reverse_order(
    kubelet: KubeletProcess,
) -> None:
    """restartPolicy Never: once every regular container is done, the sidecars are
    stopped, last declared first, each after the one it waits for has exited; the pod
    is never started again."""
    kubelet.start()
    job = sidecar_pod("job", restart="Never", app="sleep 2; exit 0", worker="sleep 3; exit 0")
    kubelet.write("job.yaml", job)

    async def all_exited() -> bool:
        found = await states(kubelet, "job")
        return len(found) == 4 and set(found.values()) == {api.CONTAINER_EXITED}

    await kubelet.wait_for(all_exited, timeout=60, what="every container of the job exited")
    finished: dict[str, float] = {}
    for c in await kubelet.containers("job"):
        status = (await kubelet.runtime.container_status(c.id)).status
        finished[c.metadata.name] = status.finished_at / 1e9
    # the regular containers end by themselves; then logs stops (1 s), then proxy (1 s)
    assert finished["app"] < finished["worker"] < finished["logs"] < finished["proxy"]
    assert finished["logs"] - finished["worker"] >= 0.9
    assert finished["proxy"] - finished["logs"] >= 0.9
    await trio.sleep(5)  # relists and syncs: nothing is started again
    assert len(await kubelet.containers("job")) == 4
    assert not await kubelet.running("job")
    (sandbox,) = await kubelet.sandboxes("job")
    assert sandbox.state == api.SANDBOX_NOTREADY


async def test_deleted_pod_stops_regular_containers_first_then_sidecars_in_reverse_order(
    kubelet: KubeletProcess,
) -> None:
    """Seen by polling the runtime while the pod goes: no sidecar exits while a regular
    container runs, and proxy (declared first) does not exit while logs runs."""
    kubelet.start()
    path = kubelet.write("svc.yaml", sidecar_pod("svc", restart="Always", app=SLOW_STOP))

    async def four_running() -> bool:
        return len(await kubelet.running("svc")) == 4

    await kubelet.wait_for(four_running, timeout=60, what="four containers running")
    path.unlink()
    seen: list[dict[str, int]] = []
    start = time.monotonic()
    with trio.fail_after(30):
        while snapshot := await states(kubelet, "svc"):
            seen.append(snapshot)
            await trio.sleep(0.02)
    took = time.monotonic() - start
    running = api.CONTAINER_RUNNING
    for snap in seen:
        regular_running = running in (snap.get("app"), snap.get("worker"))
        if regular_running:
            assert snap.get("logs") == running and snap.get("proxy") == running, snap
        if snap.get("logs") == running and "proxy" in snap:
            assert snap["proxy"] == running, snap
    # the window in which only the sidecars ran was seen, and the order came out whole
    assert any(
        s.get("app") != running and s.get("worker") != running and s.get("logs") == running
        for s in seen
    )
    assert took < 10  # 1 s each: regular containers, logs, proxy, then removal


def api_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {"name": "main", "image": BUSYBOX, "command": ["sh", "-c", "echo done"]}
            ],
        },
    }


async def test_finished_api_pod_is_not_run_again_after_the_runtime_loses_it(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    url, node, procs = cluster
    runtime, _ = cri
    pod_label = {labels.POD_NAME: "once", labels.POD_NAMESPACE: "default"}
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:

        async def phase() -> str:
            r = await client.get("/api/v1/namespaces/default/pods/once")
            return str(r.json().get("status", {}).get("phase", ""))

        await node_registered(client, node)
        r = await client.post("/api/v1/namespaces/default/pods", json=api_pod("once", node))
        assert r.status_code == 201, r.text
        with trio.fail_after(60):
            while await phase() != "Succeeded":
                await trio.sleep(0.2)
        (first,) = await runtime.list_pod_sandbox(labels=pod_label)
        before = (await client.get("/api/v1/namespaces/default/pods/once")).json()["status"]

        # the runtime loses the pod behind the kubelet's back (a containerd reset)
        report = await cleanup(runtime, labels=pod_label, stop_timeout=0)
        assert not report.errors
        await trio.sleep(5)  # relists, PLEG events, syncs
        assert await runtime.list_pod_sandbox(labels=pod_label) == []
        assert await phase() == "Succeeded"

        # a kubelet restarted on that empty runtime reads the verdict from the API
        kubelet_proc = procs.procs[-1]
        args = [str(a) for a in kubelet_proc.args]  # type: ignore[union-attr]
        kubelet_proc.send_signal(signal.SIGTERM)
        kubelet_proc.wait(timeout=20)
        procs.start(args, short_tmp / "kubelet-restarted.log")
        await trio.sleep(8)
        assert await runtime.list_pod_sandbox(labels=pod_label) == []
        after = (await client.get("/api/v1/namespaces/default/pods/once")).json()["status"]
        assert after["phase"] == "Succeeded"
        assert after["containerStatuses"] == before["containerStatuses"]
        assert first.id not in {s.id for s in await runtime.list_pod_sandbox()}
