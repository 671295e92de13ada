"""The node lease: the kubelet's heartbeat in kube-node-lease, renewed every 10 s.

Behaviour as upstream's lease controller: the lease ``kube-node-lease/<node>`` holds the
node name, a 40 s duration and the renew time, with an owner reference to the Node. A
renewal first updates from the last lease it wrote (no GET); if that fails it falls back
to GET (create on 404) with a back-off of 200 ms doubling to 7 s, and an update is tried
at most 5 times, refetching on 409. Every failed attempt after the first calls
``on_repeated_failure`` (the kubelet drops its API connections there).

The loop never ends on its own and never gives up: an API outage just means renewals
keep being retried, and the first one after the outage succeeds within one interval.
"""

from __future__ import annotations

import datetime
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from kubelet.api import LEASES, ApiError, Conflict, NotFound

if TYPE_CHECKING:
    from kubelet.api import ApiClient

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
DEFAULT_DURATION = 40
RENEW_FRACTION = 0.25
JITTER = 0.04
MAX_UPDATE_RETRIES = 5
BACKOFF_FIRST = 0.2
BACKOFF_MAX = 7.0


class LeaseApi(Protocol):
    """The three calls the controller makes (raw JSON objects, unknown fields kept)."""

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def update_lease(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]: ...


def micro_time(moment: datetime.datetime) -> str:
    """A MicroTime as the API writes it: RFC 3339 with microseconds, UTC."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseController:
    """The node's heartbeat: the control plane marks a node NotReady when it stops.

    It is kept apart from node status (cheap, every 10 s, its own unlimited client), so
    a slow status computation or a rate-limited API never makes a live node look dead.
    """

    def __init__(
        self,
        api: LeaseApi,
        node_name: str,
        *,
        duration: int = DEFAULT_DURATION,
        node_uid: Callable[[], str | None] = lambda: None,
        on_repeated_failure: Callable[[], Awaitable[None] | None] | None = None,
        wall_clock: Callable[[], float] = lambda: datetime.datetime.now(datetime.UTC).timestamp(),
        rng: random.Random | None = None,
    ) -> None:
        self._api = api
        self.node_name = node_name
        self.duration = duration
        self.interval = duration * RENEW_FRACTION
        self._node_uid = node_uid
        self._on_repeated_failure = on_repeated_failure
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        self.latest: dict[str, Any] | None = None
        self.renewals = 0
        self.last_renewal: float | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Renew forever: sliding interval of 10 s with 4 % jitter after each sync."""
        task_status.started()
        while True:
            await self.sync()
            await trio.sleep(self.interval * (1 + self._rng.random() * JITTER))

    async def sync(self) -> None:
        if self.latest is not None:
            try:
                await self._retry_update(self.latest)
                return
            except ApiError as exc:
                log.info("failed to update lease using the latest lease, ensuring it: %s", exc)
        lease, created = await self._backoff_ensure()
        self.latest = lease
        if not created:
            try:
                await self._retry_update(lease)
            except ApiError as exc:
                log.warning("will retry updating the node lease: %s", exc)

    def _desired(self, base: dict[str, Any] | None) -> dict[str, Any]:
        lease: dict[str, Any] = dict(base) if base else {}
        lease.setdefault("apiVersion", "coordination.k8s.io/v1")
        lease.setdefault("kind", "Lease")
        meta = dict(lease.get("metadata") or {})
        meta["name"] = self.node_name
        meta["namespace"] = LEASE_NAMESPACE
        uid = self._node_uid()
        if uid and not meta.get("ownerReferences"):
            meta["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": uid}
            ]
        lease["metadata"] = meta
        spec = dict(lease.get("spec") or {})
        spec["holderIdentity"] = self.node_name
        spec["leaseDurationSeconds"] = self.duration
        now = datetime.datetime.fromtimestamp(self._wall_clock(), datetime.UTC)
        spec["renewTime"] = micro_time(now)
        lease["spec"] = spec
        return lease

    async def _ensure(self) -> tuple[dict[str, Any], bool]:
        try:
            return await self._api.get_lease(LEASE_NAMESPACE, self.node_name), False
        except NotFound:
            created = await self._api.create_lease(LEASE_NAMESPACE, self._desired(None))
            self._renewed()
            return created, True

    async def _backoff_ensure(self) -> tuple[dict[str, Any], bool]:
        delay = BACKOFF_FIRST
        while True:
            try:
                return await self._ensure()
            except ApiError as exc:
                log.warning(
                    "failed to ensure the node lease exists, retrying in %.1fs: %s", delay, exc
                )
            await trio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _retry_update(self, base: dict[str, Any]) -> None:
        last: ApiError | None = None
        for attempt in range(MAX_UPDATE_RETRIES):
            try:
                self.latest = await self._api.update_lease(
                    LEASE_NAMESPACE, self.node_name, self._desired(base)
                )
                self._renewed()
                return
            except Conflict as exc:
                last = exc
                base, _ = await self._backoff_ensure()
            except ApiError as exc:
                last = exc
            log.warning("failed to update the node lease (attempt %d): %s", attempt + 1, last)
            if attempt > 0 and self._on_repeated_failure is not None:
                outcome = self._on_repeated_failure()
                if outcome is not None:
                    await outcome
        raise last if last is not None else ApiError(0, "", "lease update failed")

    def _renewed(self) -> None:
        self.renewals += 1
        self.last_renewal = trio.current_time()


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
