"""The kubelet's API-facing adapters: the small protocols its components use, over ApiClient."""

from __future__ import annotations

from typing import Any

from kubelet.api.client import EVENTS, LEASES, ApiClient, PatchType


class ApiLeases:
    """``LeaseApi`` for the lease controller (raw JSON: unknown fields survive)."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._client.get(LEASES.path(namespace, name))

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._client.create(LEASES.path(namespace), body)

    async def update_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._client.update(LEASES.path(namespace, name), body)


class ApiEvents:
    """``EventSink`` for the event recorder."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._client.create(EVENTS.path(namespace), body)

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._client.patch(EVENTS.path(namespace, name), patch, PatchType.STRATEGIC)
