"""A pod's container or sandbox on the runtime, as the streaming and checkpoint endpoints
find it, and how their answers print the runtime's errors.

Its own module so that ``checkpoint`` does not load the streaming ends (WebSocket and
SPDY, about 1.5 MiB) before the first stream is asked for.
"""

from __future__ import annotations

from kubelet.api import Pod
from kubelet.cri import CriError, RuntimeClient, api, labels


def grpc_error_text(exc: CriError) -> str:
    """How Go prints a gRPC error: ``rpc error: code = NotFound desc = ...``."""
    if exc.code is None:
        return str(exc)
    name = "".join(part.title() for part in exc.code.name.split("_"))
    return f"rpc error: code = {name} desc = {exc.message}"


class ContainerNotFound(Exception):
    """The runtime runs no such container of the pod (upstream: 500, not 404)."""


async def running_container(runtime: RuntimeClient, pod: Pod, uid: str, container: str) -> str:
    """The id of the running container ``container`` of ``pod`` (of ``uid`` when given)."""
    selector = {labels.CONTAINER_NAME: container}
    if uid:
        selector[labels.POD_UID] = uid
    else:
        selector[labels.POD_NAME] = pod.metadata.name
        selector[labels.POD_NAMESPACE] = pod.metadata.namespace
    found = await runtime.list_containers(state=api.CONTAINER_RUNNING, labels=selector)
    if not found:
        raise ContainerNotFound(f'container not found ("{container}")')
    return max(found, key=lambda c: c.created_at).id


async def ready_sandbox(runtime: RuntimeClient, pod: Pod) -> str:
    """The pod's newest ready sandbox (what CRI PortForward needs)."""
    found = await runtime.list_pod_sandbox(
        state=api.SANDBOX_READY, labels={labels.POD_UID: pod.uid}
    )
    if not found:
        full_name = f"{pod.metadata.name}_{pod.metadata.namespace}"
        raise ContainerNotFound(f'pod not found ("{full_name}")')
    return max(found, key=lambda s: s.created_at).id
