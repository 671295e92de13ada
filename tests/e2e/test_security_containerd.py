"""Security context on real containerd: runAsNonRoot, sysctls, user namespaces.

API pods go through a FakeApiServer process and a kubelet process joined to it, so the
status the kubelet reports is read back from the API; the unsafe-sysctl pod is a static
pod of a standalone kubelet started with ``--allowed-unsafe-sysctls``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, api, labels

from .cluster import Processes, node_registered
from .test_kubelet_containerd import KubeletProcess, kubelet  # noqa: F401 - the fixture

pytestmark = pytest.mark.containerd

BUSYBOX = "docker.io/library/busybox:1.35"
LOOP = "trap 'exit 0' TERM; while true; do sleep 0.2; done"


def pod(name: str, node: str, *, container: dict[str, Any] | None = None, **spec: Any) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX,
                    "command": ["sh", "-c", LOOP],
                    **(container or {}),
                }
            ],
            **spec,
        },
    }


async def wait_node(api_client: httpx.AsyncClient, node: str) -> None:
    await node_registered(api_client, node)


async def get_pod(api_client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    r = await api_client.get(f"/api/v1/namespaces/default/pods/{name}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def event_messages(api_client: httpx.AsyncClient, reason: str) -> list[str]:
    r = await api_client.get("/api/v1/namespaces/default/events")
    return [e["message"] for e in r.json()["items"] if e.get("reason") == reason]


async def test_run_as_non_root(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    """busybox runs as root: with runAsNonRoot it is never created; with runAsUser 1000
    it runs as uid 1000."""
    url, node, _ = cluster
    runtime, _ = cri
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await wait_node(client, node)
        r = await client.post(
            "/api/v1/namespaces/default/pods",
            json=pod("nonroot", node, securityContext={"runAsNonRoot": True}),
        )
        assert r.status_code == 201, r.text
        uid = r.json()["metadata"]["uid"]
        r = await client.post(
            "/api/v1/namespaces/default/pods",
            json=pod(
                "uid1000",
                node,
                securityContext={"runAsNonRoot": True},
                container={"securityContext": {"runAsUser": 1000}},
            ),
        )
        assert r.status_code == 201, r.text
        message = (
            "container has runAsNonRoot and image will run as root "
            f'(pod: "nonroot_default({uid})", container: main)'
        )

        async def waiting() -> dict[str, Any]:
            statuses = (await get_pod(client, "nonroot")).get("status", {}).get(
                "containerStatuses"
            ) or [{}]
            return dict((statuses[0].get("state") or {}).get("waiting") or {})

        with trio.fail_after(30):
            while (await waiting()).get("reason") != "CreateContainerConfigError":
                await trio.sleep(0.2)
        assert (await waiting())["message"] == message
        assert f"Error: {message}" in await event_messages(client, "Failed")
        # the sandbox exists, the container was never created
        assert not await runtime.list_containers(labels={labels.POD_UID: uid})

        with trio.fail_after(30):
            while (await get_pod(client, "uid1000")).get("status", {}).get("phase") != "Running":
                await trio.sleep(0.2)
        other = (await get_pod(client, "uid1000"))["metadata"]["uid"]
        (container,) = await runtime.list_containers(labels={labels.POD_UID: other})
        result = await runtime.exec_sync(container.id, ["id", "-u"], timeout=10)
        assert (result.exit_code, result.stdout.strip()) == (0, b"1000")


async def test_forbidden_sysctl_and_host_users_are_refused(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    """A forbidden sysctl rejects the pod (Failed, SysctlForbidden); hostUsers: false
    fails its sandbox on containerd 1.6, which reports no user-namespace support."""
    url, node, _ = cluster
    runtime, _ = cri
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await wait_node(client, node)
        sysctls = {"sysctls": [{"name": "kernel.panic", "value": "10"}]}
        r = await client.post(
            "/api/v1/namespaces/default/pods",
            json=pod("sysctl", node, securityContext=sysctls),
        )
        assert r.status_code == 201, r.text
        sysctl_uid = r.json()["metadata"]["uid"]
        r = await client.post(
            "/api/v1/namespaces/default/pods", json=pod("userns", node, hostUsers=False)
        )
        assert r.status_code == 201, r.text
        userns_uid = r.json()["metadata"]["uid"]

        with trio.fail_after(30):
            while (await get_pod(client, "sysctl")).get("status", {}).get("phase") != "Failed":
                await trio.sleep(0.2)
        status = (await get_pod(client, "sysctl"))["status"]
        assert (status["reason"], status["message"]) == (
            "SysctlForbidden",
            'Pod was rejected: forbidden sysctl: "kernel.panic" not allowlisted',
        )
        expected = (
            'Failed to create pod sandbox: RuntimeClass handler "" does not support user namespaces'
        )
        with trio.fail_after(30):
            while expected not in await event_messages(client, "FailedCreatePodSandBox"):
                await trio.sleep(0.2)
        await trio.sleep(2)
        for uid in (sysctl_uid, userns_uid):
            assert not await runtime.list_pod_sandbox(labels={labels.POD_UID: uid})
        assert (await get_pod(client, "userns")).get("status", {}).get("phase") == "Pending"


SYSCTL_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: sysctl
spec:
  restartPolicy: Never
  securityContext:
    sysctls:
    - name: net.core.somaxconn
      value: "1234"
    - name: net/ipv4/ip_unprivileged_port_start
      value: "81"
  containers:
  - name: main
    image: docker.io/library/busybox:1.35
    command:
    - cat
    - /proc/sys/net/core/somaxconn
    - /proc/sys/net/ipv4/ip_unprivileged_port_start
"""


async def test_allowed_unsafe_sysctl_is_set_in_the_pod(kubelet: KubeletProcess) -> None:  # noqa: F811
    kubelet.start("--allowed-unsafe-sysctls=net.core.somaxconn")
    kubelet.write("sysctl.yaml", SYSCTL_POD)

    async def exited() -> list[api.Container]:
        return [c for c in await kubelet.containers("sysctl") if c.state == api.CONTAINER_EXITED]

    await kubelet.wait_for(exited, what="sysctl pod done")
    (container,) = await exited()
    status = (await kubelet.runtime.container_status(container.id)).status
    assert status.exit_code == 0
    lines = Path(status.log_path).read_text().splitlines()
    assert [line.split(" ", 3)[3] for line in lines] == ["1234", "81"]
