"""Service environment variables (``enableServiceLinks``), as upstream builds them.

For each Service with a cluster IP in the pod's namespace (when the pod enables service
links), plus ``default/kubernetes`` always, a container gets ``<NAME>_SERVICE_HOST``,
``<NAME>_SERVICE_PORT`` (and ``_PORT_<portname>`` for named ports) and the Docker-link
style ``<NAME>_PORT``, ``<NAME>_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from kubelet.api import ListWatch, Pod, UidStore, reflect

if TYPE_CHECKING:
    from kubelet.api import ApiClient


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def _service_vars(service: Mapping[str, Any]) -> dict[str, str]:
    spec = service.get("spec") or {}
    ip = str(spec.get("clusterIP") or "")
    name = _env_name(str((service.get("metadata") or {}).get("name", "")))
    listed = spec.get("ports")
    ports = [p for p in listed if isinstance(p, Mapping)] if isinstance(listed, list) else []
    out: dict[str, str] = {f"{name}_SERVICE_HOST": ip}
    if not ports:
        return out
    out[f"{name}_SERVICE_PORT"] = str(ports[0].get("port", ""))
    for port in ports:
        if port.get("name"):
            out[f"{name}_SERVICE_PORT_{_env_name(str(port['name']))}"] = str(port.get("port", ""))
    first = ports[0]
    protocol = str(first.get("protocol") or "TCP").lower()
    out[f"{name}_PORT"] = f"{protocol}://{ip}:{first.get('port', '')}"
    for port in ports:
        number = str(port.get("port", ""))
        proto = str(port.get("protocol") or "TCP")
        prefix = f"{name}_PORT_{number}_{proto.upper()}"
        out[prefix] = f"{proto.lower()}://{ip}:{number}"
        out[f"{prefix}_PROTO"] = proto.lower()
        out[f"{prefix}_PORT"] = number
        out[f"{prefix}_ADDR"] = ip
    return out


def service_env(pod: Pod, services: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The service variables a container of ``pod`` gets (empty without services)."""
    links = pod.spec.enable_service_links is not False
    chosen: dict[str, Mapping[str, Any]] = {}
    for service in services:
        meta = service.get("metadata") or {}
        spec = service.get("spec") or {}
        ip = spec.get("clusterIP")
        if not ip or ip == "None":
            continue
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        master = namespace == "default" and name == "kubernetes"
        if namespace == pod.metadata.namespace and links:
            chosen[name] = service
        elif master:
            chosen.setdefault(name, service)
    out: dict[str, str] = {}
    for name in sorted(chosen):
        out.update(_service_vars(chosen[name]))
    return out


class ServiceStore:
    """All Services, listed and watched, for the containers' service variables."""

    def env_for(self, pod: Pod) -> Mapping[str, str]:
        """The service variables ``pod`` gets (``enableServiceLinks``)."""
        return service_env(pod, self.services)

    def __init__(self, client: ApiClient) -> None:
        self._client = client
        self.services: list[dict[str, Any]] = []
        self.synced = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async def on_change(items: list[dict[str, Any]]) -> None:
            self.services = items
            self.synced = True

        task_status.started()
        await reflect(self._client, ListWatch("/api/v1/services"), UidStore(on_change))


async def run_services(
    client: ApiClient, *, task_status: trio.TaskStatus[ServiceStore] = trio.TASK_STATUS_IGNORED
) -> None:
    """Keep every Service listed and watched, for the containers' service variables."""
    store = ServiceStore(client)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        task_status.started(store)
