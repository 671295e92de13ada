"""RuntimeClient: the CRI RuntimeService as Trio-friendly async methods."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import trio

from . import cri_api_pb2 as api
from .cri_api_grpc import RuntimeServiceStub
from .errors import CriError
from .service import ServiceClient

log = logging.getLogger("kubelet.agent")

KUBE_RUNTIME_API_VERSION = "0.1.0"
"""The legacy version string the kubelet sends in VersionRequest."""


class RuntimeClient(ServiceClient):
    """One method per RuntimeService RPC, with upstream's deadlines.

    Ordinary calls get ``request_timeout`` (2 min); StopContainer gets that plus its
    grace timeout; ExecSync gets that plus its own timeout (none when the timeout is 0).
    Errors are ``kubelet.cri.errors.CriError`` subclasses.
    """

    _stub_type = RuntimeServiceStub

    async def version(self, api_version: str = KUBE_RUNTIME_API_VERSION) -> api.VersionResponse:
        resp: api.VersionResponse = await self._unary(
            "Version", api.VersionRequest(version=api_version)
        )
        return resp

    async def status(self, verbose: bool = False) -> api.StatusResponse:
        resp: api.StatusResponse = await self._unary("Status", api.StatusRequest(verbose=verbose))
        return resp

    async def update_runtime_config(self, pod_cidr: str) -> None:
        config = api.RuntimeConfig(network_config=api.NetworkConfig(pod_cidr=pod_cidr))
        await self._unary(
            "UpdateRuntimeConfig", api.UpdateRuntimeConfigRequest(runtime_config=config)
        )

    async def runtime_config(self) -> api.RuntimeConfigResponse:
        """Runtime-wide settings (the cgroup driver); ``Unimplemented`` from older runtimes."""
        resp: api.RuntimeConfigResponse = await self._unary(
            "RuntimeConfig", api.RuntimeConfigRequest()
        )
        return resp

    # -- sandboxes ---------------------------------------------------------------------

    async def run_pod_sandbox(self, config: api.PodSandboxConfig, runtime_handler: str = "") -> str:
        """Create and start a sandbox; returns its id."""
        req = api.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler)
        resp: api.RunPodSandboxResponse = await self._unary("RunPodSandbox", req)
        if not resp.pod_sandbox_id:
            raise CriError("RunPodSandbox", f"runtime returned no sandbox id for {config.metadata}")
        return resp.pod_sandbox_id

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        await self._unary(
            "StopPodSandbox", api.StopPodSandboxRequest(pod_sandbox_id=pod_sandbox_id)
        )

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        await self._unary(
            "RemovePodSandbox", api.RemovePodSandboxRequest(pod_sandbox_id=pod_sandbox_id)
        )

    async def pod_sandbox_status(
        self, pod_sandbox_id: str, verbose: bool = False
    ) -> api.PodSandboxStatusResponse:
        req = api.PodSandboxStatusRequest(pod_sandbox_id=pod_sandbox_id, verbose=verbose)
        resp: api.PodSandboxStatusResponse = await self._unary("PodSandboxStatus", req)
        if not resp.HasField("status"):
            raise CriError("PodSandboxStatus", f"runtime returned no status for {pod_sandbox_id}")
        return resp

    async def list_pod_sandbox(
        self,
        *,
        id: str = "",
        state: api.PodSandboxState | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[api.PodSandbox]:
        """Sandboxes matching every given criterion (all of them when none is given)."""
        filt = api.PodSandboxFilter(id=id, label_selector=dict(labels or {}))
        if state is not None:
            filt.state.state = state
        resp: api.ListPodSandboxResponse = await self._unary(
            "ListPodSandbox", api.ListPodSandboxRequest(filter=filt)
        )
        return list(resp.items)

    # -- containers --------------------------------------------------------------------

    async def create_container(
        self,
        pod_sandbox_id: str,
        config: api.ContainerConfig,
        sandbox_config: api.PodSandboxConfig,
    ) -> str:
        """Create a container in a sandbox; returns its id."""
        req = api.CreateContainerRequest(
            pod_sandbox_id=pod_sandbox_id, config=config, sandbox_config=sandbox_config
        )
        resp: api.CreateContainerResponse = await self._unary("CreateContainer", req)
        if not resp.container_id:
            raise CriError(
                "CreateContainer", f"runtime returned no container id for {config.metadata}"
            )
        return resp.container_id

    async def start_container(self, container_id: str) -> None:
        """Start a created container. A cancellation (a termination cutting the start
        short, the kubelet stopping) waits for the answer, within the call's own deadline:
        containerd 1.6 cancelled while it creates the task records the container exited
        and keeps the task, and after that no CRI call removes the container or its
        sandbox ("cannot delete running task")."""
        request = api.StartContainerRequest(container_id=container_id)
        with trio.CancelScope(shield=True):
            await self._unary("StartContainer", request)
        await trio.lowlevel.checkpoint_if_cancelled()

    async def stop_container(self, container_id: str, timeout: int) -> None:
        """Stop with ``timeout`` seconds of grace; the call's deadline allows for it."""
        req = api.StopContainerRequest(container_id=container_id, timeout=timeout)
        await self._unary("StopContainer", req, self.request_timeout + max(timeout, 0))

    async def remove_container(self, container_id: str) -> None:
        await self._unary("RemoveContainer", api.RemoveContainerRequest(container_id=container_id))

    async def list_containers(
        self,
        *,
        id: str = "",
        state: api.ContainerState | None = None,
        pod_sandbox_id: str = "",
        labels: Mapping[str, str] | None = None,
    ) -> list[api.Container]:
        """Containers matching every given criterion (all of them when none is given)."""
        filt = api.ContainerFilter(
            id=id, pod_sandbox_id=pod_sandbox_id, label_selector=dict(labels or {})
        )
        if state is not None:
            filt.state.state = state
        resp: api.ListContainersResponse = await self._unary(
            "ListContainers", api.ListContainersRequest(filter=filt)
        )
        return list(resp.containers)

    async def container_status(
        self, container_id: str, verbose: bool = False
    ) -> api.ContainerStatusResponse:
        req = api.ContainerStatusRequest(container_id=container_id, verbose=verbose)
        resp: api.ContainerStatusResponse = await self._unary("ContainerStatus", req)
        if not resp.HasField("status"):
            raise CriError("ContainerStatus", f"runtime returned no status for {container_id}")
        return resp

    async def update_container_resources(
        self,
        container_id: str,
        linux: api.LinuxContainerResources | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        req = api.UpdateContainerResourcesRequest(
            container_id=container_id, linux=linux, annotations=dict(annotations or {})
        )
        await self._unary("UpdateContainerResources", req)

    async def reopen_container_log(self, container_id: str) -> None:
        await self._unary(
            "ReopenContainerLog", api.ReopenContainerLogRequest(container_id=container_id)
        )

    async def exec_sync(
        self, container_id: str, cmd: Iterable[str], timeout: int = 0
    ) -> api.ExecSyncResponse:
        """Run ``cmd``; ``timeout`` seconds bounds the command (0: unbounded)."""
        req = api.ExecSyncRequest(container_id=container_id, cmd=list(cmd), timeout=timeout)
        limit = self.request_timeout + timeout if timeout > 0 else None
        resp: api.ExecSyncResponse = await self._unary("ExecSync", req, limit)
        return resp

    async def checkpoint_container(
        self, container_id: str, location: str, timeout: int = 0
    ) -> None:
        """Have the runtime write a checkpoint archive of the container to ``location``.

        As upstream, the call may take ``timeout`` seconds when that is longer than the
        CRI request timeout, else the request timeout; a negative one is refused.
        """
        if timeout < 0:
            raise ValueError("CheckpointContainer requires the timeout value to be > 0")
        req = api.CheckpointContainerRequest(
            container_id=container_id, location=location, timeout=timeout
        )
        await self._unary("CheckpointContainer", req, max(float(timeout), self.request_timeout))

    async def exec(self, request: api.ExecRequest) -> str:
        """Prepare a streaming exec; returns the runtime's streaming URL."""
        resp: api.ExecResponse = await self._unary("Exec", request)
        return resp.url

    async def attach(self, request: api.AttachRequest) -> str:
        """Prepare a streaming attach; returns the runtime's streaming URL."""
        resp: api.AttachResponse = await self._unary("Attach", request)
        return resp.url

    async def port_forward(self, pod_sandbox_id: str, ports: Iterable[int] = ()) -> str:
        """Prepare a port-forward; returns the runtime's streaming URL."""
        req = api.PortForwardRequest(pod_sandbox_id=pod_sandbox_id, port=list(ports))
        resp: api.PortForwardResponse = await self._unary("PortForward", req)
        return resp.url

    # -- statistics --------------------------------------------------------------------

    async def container_stats(self, container_id: str) -> api.ContainerStats:
        resp: api.ContainerStatsResponse = await self._unary(
            "ContainerStats", api.ContainerStatsRequest(container_id=container_id)
        )
        return resp.stats

    async def list_container_stats(
        self,
        *,
        id: str = "",
        pod_sandbox_id: str = "",
        labels: Mapping[str, str] | None = None,
    ) -> list[api.ContainerStats]:
        filt = api.ContainerStatsFilter(
            id=id, pod_sandbox_id=pod_sandbox_id, label_selector=dict(labels or {})
        )
        resp: api.ListContainerStatsResponse = await self._unary(
            "ListContainerStats", api.ListContainerStatsRequest(filter=filt)
        )
        return list(resp.stats)

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> api.PodSandboxStats:
        resp: api.PodSandboxStatsResponse = await self._unary(
            "PodSandboxStats", api.PodSandboxStatsRequest(pod_sandbox_id=pod_sandbox_id)
        )
        return resp.stats

    async def list_pod_sandbox_stats(
        self,
        *,
        id: str = "",
        labels: Mapping[str, str] | None = None,
    ) -> list[api.PodSandboxStats]:
        filt = api.PodSandboxStatsFilter(id=id, label_selector=dict(labels or {}))
        resp: api.ListPodSandboxStatsResponse = await self._unary(
            "ListPodSandboxStats", api.ListPodSandboxStatsRequest(filter=filt)
        )
        return list(resp.stats)


WAIT_INITIAL = 0.1
WAIT_MAX = 5.0


async def wait_until_answering(runtime: RuntimeClient) -> api.VersionResponse:
    """Retry Version (0.1 s doubling to 5 s) until the runtime answers: the kubelet
    touches no pod before that."""
    delay = WAIT_INITIAL
    while True:
        try:
            version = await runtime.version()
        except CriError as exc:
            log.warning("container runtime not ready (%s); retrying in %.1fs", exc, delay)
            await trio.sleep(delay)
            delay = min(delay * 2, WAIT_MAX)
            continue
        log.info(
            "container runtime %s %s (CRI %s)",
            version.runtime_name,
            version.runtime_version,
            version.runtime_api_version,
        )
        return version
