"""``runtimeClassName`` → the CRI runtime handler, through node.k8s.io/v1 RuntimeClasses.

As upstream's runtimeclass manager: RuntimeClasses are listed and watched (an informer),
a pod naming one gets its ``handler`` in ``RunPodSandbox``, and a class that does not
exist fails the pod's sandbox (``runtimeclass.node.k8s.io "<name>" not found``), retried
with back-off — the pod never starts with the default handler instead. Until the first
list has arrived a lookup asks the API server for that one class, so a kubelet that has
just started neither waits nor guesses.

A pod without ``runtimeClassName`` (or with "") runs with the runtime's default handler.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from kubelet.api import ApiError, ListWatch, NotFound, Resource, UidStore, reflect

if TYPE_CHECKING:
    from kubelet.api import ApiClient

__all__ = ["RUNTIME_CLASSES", "RuntimeClassError", "RuntimeClasses"]

log = logging.getLogger(__name__)

RUNTIME_CLASSES = Resource("node.k8s.io/v1", "runtimeclasses", namespaced=False)


class RuntimeClassError(Exception):
    """The pod's RuntimeClass cannot be resolved (its sandbox is not created)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _not_found(name: str) -> RuntimeClassError:
    return RuntimeClassError(f'runtimeclass.node.k8s.io "{name}" not found')


def _handler(obj: dict[str, Any]) -> str:
    handler = obj.get("handler")
    return handler if isinstance(handler, str) else ""


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


class RuntimeClasses:
    """The cluster's RuntimeClasses, kept current by ``run`` (list + watch)."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client
        self._handlers: dict[str, str] = {}
        self.synced = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Reflect RuntimeClasses until cancelled (retrying through API outages)."""

        async def on_change(items: list[dict[str, Any]]) -> None:
            self._handlers = {_name(rc): _handler(rc) for rc in items if _name(rc)}
            self.synced = True

        task_status.started()
        await reflect(self._client, ListWatch(RUNTIME_CLASSES.path()), UidStore(on_change))

    async def handler(self, name: str | None) -> str:
        """The runtime handler of RuntimeClass ``name`` ("" for none); ``RuntimeClassError``."""
        if not name:
            return ""
        if self.synced:
            found = self._handlers.get(name)
            if found is None:
                raise _not_found(name)
            return found
        try:
            obj = await self._client.get(RUNTIME_CLASSES.path(name=name))
        except NotFound:
            raise _not_found(name) from None
        except ApiError as exc:
            raise RuntimeClassError(f"failed to lookup RuntimeClass {name}: {exc}") from exc
        return _handler(obj)
