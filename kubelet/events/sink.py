"""The event recorder's sink over the API: create an Event, or patch the one it folds into."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubelet.api import EVENTS, PatchType

if TYPE_CHECKING:
    from kubelet.api import ApiClient


class ApiEvents:
    """``EventSink`` for the event recorder."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._client.create(EVENTS.path(namespace), body)

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._client.patch(EVENTS.path(namespace, name), patch, PatchType.STRATEGIC)
