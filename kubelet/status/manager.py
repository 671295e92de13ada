"""The status manager: sends each pod's status to the API, only when it changed.

Pod workers hand it the status they computed (``set``); one task PATCHes
``pods/<name>/status`` with a strategic merge patch carrying the pod's uid (the server's
precondition: a recreated pod of the same name is never patched). Static pods report
through their mirror pod. Failed PATCHes are retried on the next pass (every 10 s, or at
once on a new status). Conditions the kubelet does not own (readiness gates set by
controllers) are never written: the status sent carries the API's own
copy of them (upstream's ``mergePodStatus``), so the patch never names them, except
DisruptionTarget, which the kubelet shares and sends with a terminal phase. A
terminal phase is never left: once the API shows Succeeded or Failed, or the kubelet
reported it, no later status moves the pod back.

When a pod being deleted has been torn down on the node, ``finished`` deletes its API
object with grace period 0 and a uid precondition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet.api import (
    PODS,
    ApiError,
    Conflict,
    NotFound,
    PatchType,
    Pod,
    PodCondition,
    PodStatus,
    from_wire,
    pod_status_patch,
    to_wire,
)
from kubelet.status.generate import OWNED, foreign_conditions
from kubelet.status.phase import is_terminal_phase, resolve_phase

if TYPE_CHECKING:
    from kubelet.api import ApiClient

log = logging.getLogger(__name__)

SHARED = ("DisruptionTarget",)
"""conditions the kubelet sets only when it stops a pod itself (upstream's
``PodConditionSharedByKubelet``)"""

RESYNC = 10.0
CONCURRENCY = 16


@attrs.define
class _Entry:
    pod: Pod
    status: PodStatus
    sent: PodStatus | None = None
    sent_version: str = ""
    """The resourceVersion the API answered the last PATCH with."""
    target_uid: str = ""
    delete_after: bool = False
    dirty: bool = True
    changed_at: float | None = None
    """when the oldest status not yet written was handed in (trio clock)"""
    version: int = 0
    """counts what was handed in: a write leaves the entry dirty if more came meanwhile"""


class StatusManager:
    """The one writer of pod status to the API, apart from the pod workers.

    Workers hand it a status and go on; it PATCHes only what changed, retries failures
    on its own schedule and never lets a terminal phase go back, so an API outage or a
    conflict never holds up a pod's sync.
    """

    def __init__(
        self,
        client: ApiClient,
        *,
        mirror_for: Callable[[Pod], Pod | None],
        api_copy: Callable[[str], Pod | None] | None = None,
        on_written: Callable[[Pod], None] | None = None,
        on_synced: Callable[[float], None] | None = None,
        owned: Collection[str] = OWNED,
    ) -> None:
        self._client = client
        self._owned = owned
        """the condition types the kubelet owns (``generate.owned_conditions``)"""
        self._on_synced = on_synced
        """called with the seconds from a status handed in to its write (upstream's
        ``kubelet_pod_status_sync_duration_seconds``: from the first of several)"""
        self._on_written = on_written
        """called with the pod the API answered after each status write (the startup SLI)"""
        self._mirror_for = mirror_for
        self._api_copy = api_copy
        self._entries: dict[str, _Entry] = {}
        self._wake = trio.Event()
        self._limiter = trio.CapacityLimiter(CONCURRENCY)
        self.patches = 0
        self.deletes = 0

    def last_status(self, uid: str) -> PodStatus | None:
        """What the kubelet last decided for ``uid`` (the ``previous`` of the next one)."""
        entry = self._entries.get(uid)
        return entry.status if entry is not None else None

    def set(self, pod: Pod, status: PodStatus) -> None:
        entry = self._entries.get(pod.uid)
        if entry is not None:
            status = _keep_terminal(pod, status, entry.status.phase)
        if entry is None:
            entry = self._entries[pod.uid] = _Entry(pod, status)
        else:
            if entry.status == status and entry.pod is pod:
                return
            entry.pod, entry.status, entry.dirty = pod, status, True
            entry.version += 1
        if entry.changed_at is None:
            entry.changed_at = trio.current_time()
        self._wake.set()

    def finished(self, pod: Pod, status: PodStatus | None = None) -> None:
        """``pod`` (being deleted) is gone from the node: send the last status, delete it."""
        entry = self._entries.get(pod.uid)
        if entry is None:
            entry = self._entries[pod.uid] = _Entry(pod, status or pod.status)
        if status is not None:
            entry.status = status
        entry.pod, entry.delete_after, entry.dirty = pod, True, True
        entry.version += 1
        if entry.changed_at is None:
            entry.changed_at = trio.current_time()
        self._wake.set()

    def forget(self, uid: str) -> None:
        self._entries.pop(uid, None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            with trio.move_on_after(RESYNC) as timer:
                await self._wake.wait()
            self._wake = trio.Event()
            if timer.cancelled_caught:
                self._reconcile()
            dirty = [u for u, e in self._entries.items() if e.dirty]
            async with trio.open_nursery() as nursery:
                for uid in dirty:
                    nursery.start_soon(self._sync_limited, uid)

    async def _sync_limited(self, uid: str) -> None:
        """Pods are reported concurrently (a few at a time), each one in order."""
        async with self._limiter:
            entry = self._entries.get(uid)
            if entry is not None and entry.dirty:
                await self._sync(uid, entry)

    def _target(self, pod: Pod) -> Pod | None:
        """The API's newest copy of ``pod`` we know of: its mirror pod for a static pod,
        else the watch's copy (the pod itself when there is none)."""
        if pod.is_static:
            return self._mirror_for(pod)
        found = self._api_copy(pod.uid) if self._api_copy is not None else None
        return found if found is not None and found.uid == pod.uid else pod

    def _reconcile(self) -> None:
        """Upstream's ``needsReconcile``: a status someone else changed in the API in a
        part the kubelet owns (a Ready condition replaced by hand, a container status
        overwritten) is sent again, diffed against the API's copy this time."""
        for entry in self._entries.values():
            if entry.dirty or entry.sent is None:
                continue
            target = self._target(entry.pod)
            if target is None or target.uid != entry.target_uid:
                continue
            version = target.metadata.resource_version
            if version == entry.sent_version or _older(version, entry.sent_version):
                continue  # our own write, or a watch that has not caught up with it
            if _kubelet_view(target.status, self._owned) != _kubelet_view(entry.sent, self._owned):
                log.info("status of pod %s changed in the API; reconciling", entry.pod.key)
                entry.sent, entry.dirty = None, True

    async def _sync(self, uid: str, entry: _Entry) -> None:
        pod = entry.pod
        target = self._target(pod)
        if target is None:
            return  # no mirror pod yet: try again once it exists
        api_status = target.status
        sent = entry.sent if entry.sent is not None and entry.target_uid == target.uid else None
        entry.status = _keep_terminal(
            pod, entry.status, sent.phase if sent is not None else "", api_status.phase
        )
        base = sent if sent is not None else api_status
        writing = entry.status
        merged = _merged(writing, base, self._owned)
        patch = pod_status_patch(target.uid, to_wire(base), to_wire(merged))
        path = PODS.path(target.metadata.namespace, target.metadata.name, "status")
        version, changed_at = entry.version, entry.changed_at
        entry.changed_at = None  # what is handed in while this write is out starts anew
        try:
            if patch is not None:
                answer = await self._client.patch(path, patch, PatchType.STRATEGIC)
                self.patches += 1
                answered = from_wire(Pod, answer)
                entry.sent, entry.sent_version = answered.status, answered.metadata.resource_version
                if self._on_written is not None:
                    self._on_written(answered)
            else:
                entry.sent = writing  # the version we last wrote stays the reference
        except NotFound:
            log.info("pod %s is gone from the API; not reporting its status", pod.key)
            entry.dirty = False
            if entry.delete_after:
                self._entries.pop(uid, None)
            return
        except Conflict as exc:
            # a stale view or a uid precondition: retried on the next pass; a pod that
            # was recreated under the same name reaches us as a REMOVE and is forgotten
            log.info("status of pod %s not accepted (%s); will retry", pod.key, exc)
            entry.sent = None
            _still_waiting(entry, changed_at)
            return
        except ApiError as exc:
            log.warning("failed to update status of pod %s, will retry: %s", pod.key, exc)
            _still_waiting(entry, changed_at)
            return
        entry.target_uid = target.uid
        entry.dirty = entry.version != version  # a newer status came while writing
        if changed_at is not None and self._on_synced is not None:
            self._on_synced(trio.current_time() - changed_at)
        if entry.delete_after and not entry.dirty and not pod.is_static:
            await self._delete(pod)

    async def _delete(self, pod: Pod) -> None:
        try:
            await self._client.delete(
                PODS.path(pod.metadata.namespace, pod.metadata.name),
                grace_period_seconds=0,
                uid=pod.uid,
            )
            self.deletes += 1
            log.info("pod %s deleted from the API after its termination", pod.key)
        except (NotFound, Conflict):
            pass
        self._entries.pop(pod.uid, None)


def _merged(status: PodStatus, api: PodStatus, owned: Collection[str] = OWNED) -> PodStatus:
    """``status`` with the conditions others own taken from the API's status (first,
    as upstream orders them), and the kubelet's own after them. A condition the kubelet
    shares (DisruptionTarget: eviction, node shutdown) is sent once, with the move to a
    terminal phase, replacing the API's."""
    shared: tuple[PodCondition, ...] = ()
    if is_terminal_phase(status.phase) and not is_terminal_phase(api.phase):
        shared = tuple(c for c in status.conditions if c.type in SHARED)
    replaced = {c.type for c in shared}
    theirs = [c for c in foreign_conditions(api.conditions, owned) if c.type not in replaced]
    ours = [c for c in status.conditions if c.type in owned]
    conditions = (*theirs, *shared, *ours)
    if conditions == status.conditions:
        return status
    return attrs.evolve(status, conditions=conditions)


def _older(version: str, than: str) -> bool:
    """``version`` is an older resourceVersion than ``than`` (they are etcd revisions;
    anything else is never called older)."""
    return version.isdigit() and than.isdigit() and int(version) < int(than)


def _kubelet_view(status: PodStatus, owned: Collection[str]) -> dict[str, object]:
    """What of a status the kubelet owns, to compare (upstream's
    ``isPodStatusByKubeletEqual``): others' conditions left out, the kubelet's own
    compared by status, reason and message only."""
    wire = dict(to_wire(status))
    wire["conditions"] = sorted(
        (c.type, c.status, c.reason, c.message) for c in status.conditions if c.type in owned
    )
    return wire


def _still_waiting(entry: _Entry, changed_at: float | None) -> None:
    """A write failed: the oldest status waiting is still the one it carried."""
    if changed_at is not None:
        entry.changed_at = changed_at


def _keep_terminal(pod: Pod, status: PodStatus, *earlier: str) -> PodStatus:
    """A pod that was reported (or is, in the API) Succeeded or Failed stays so: the
    status manager never sends a terminal phase back to Pending or Running."""
    phase = status.phase
    for before in earlier:
        phase = resolve_phase(phase, api_phase=before)
    if phase == status.phase:
        return status
    log.warning(
        "pod %s: phase %s after %s refused (a terminal phase is final)",
        pod.key,
        status.phase or "<none>",
        phase,
    )
    return attrs.evolve(status, phase=phase)


async def run_status_manager(
    client: ApiClient,
    mirror_for: Callable[[Pod], Pod | None],
    api_copy: Callable[[str], Pod | None] | None = None,
    *,
    on_written: Callable[[Pod], None] | None = None,
    on_synced: Callable[[float], None] | None = None,
    owned: Collection[str] = OWNED,
    task_status: trio.TaskStatus[StatusManager] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The status manager's task; ``mirror_for`` finds a static pod's mirror pod,
    ``api_copy`` the API's newest copy of a pod by uid (as the API source delivered it),
    ``on_written`` hears of each status written (the pod as the API answered),
    ``on_synced`` how long each took from being handed in, ``owned`` the condition types
    the kubelet owns."""
    manager = StatusManager(
        client,
        mirror_for=mirror_for,
        api_copy=api_copy,
        on_written=on_written,
        on_synced=on_synced,
        owned=owned,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        task_status.started(manager)
