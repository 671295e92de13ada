"""The DRA manager: a pod's ResourceClaims prepared by their drivers before its sandbox,
unprepared after its teardown once no other pod uses them, and their CDI devices handed
to the containers that ask for them.

Preparing (right before each sandbox of a pod with claims is created, after its volumes;
a no-op once they are prepared for it):
each claim is read from the API server and checked (owned by the pod when generated
from a template, reserved for it, allocated, to this node), every driver in its
allocation must be registered; only then is the pod recorded as a user of the claim
(checkpointed), and each driver is called once with every claim of the pod it has not
prepared yet. A claim several pods share is prepared once. Any failure fails the sync
with upstream's ``FailedPrepareDynamicResources`` event; the pod worker retries.

Unpreparing (after the pod's teardown): the pod is dropped from its claims; a claim no
pod uses any more is unprepared by its drivers and forgotten. A failed unprepare stays
in the checkpoint and the reconcile pass (every 60 s) tries again; that pass also drops
pods that are no longer active (deleted while the kubelet was down).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet.api import (
    ApiError,
    Container,
    NotFound,
    Pod,
    Resource,
    ResourceHealth,
    ResourceStatus,
)
from kubelet.boundedio import RunSync
from kubelet.decisions import (
    FAILED_PREPARE_DYNAMIC_RESOURCES,
    NO_CONTRIBUTION,
    ClaimError,
    ClaimRef,
    ContainerContribution,
    cdi_annotation,
    claim_drivers,
    claim_refusal,
    container_claim_requests,
    pod_claims,
)
from kubelet.pluginmanager import PluginHandler

from ..capabilities import (
    ContributesConfig,
    HandlesPlugins,
    PreparesSandbox,
    ReleasesPod,
    ReportsClaims,
    ReportsHealth,
    ResourceManager,
)
from ..resources import AssignedClaim, ClaimDevice, HealthChanged, ResourceError
from .client import ClaimRequest, DraCallError
from .health import DeviceHealth, DeviceKey
from .registration import DraRegistration, UnknownDriver
from .state import Checkpoint, ClaimInfo, Device

if TYPE_CHECKING:
    from kubelet.api import ApiClient

log = logging.getLogger(__name__)

RESOURCE_CLAIMS = Resource("resource.k8s.io/v1", "resourceclaims")
RECONCILE_PERIOD = 60.0

OperationObserver = Callable[[str, bool, float], None]
"""(operation, is_error, seconds): dra_operations_duration_seconds"""


class _Failed(Exception):
    """A prepare or unprepare that did not complete (its message is upstream's)."""


@attrs.frozen(kw_only=True)
class DraParts:
    registration: DraRegistration
    api: ApiClient | None
    node_name: str
    checkpoint: Checkpoint
    active: Callable[[], Sequence[Pod]]
    observe: OperationObserver | None = None
    node_labels: Mapping[str, str] = attrs.field(factory=dict)
    """the labels this kubelet gives its Node (an allocation's node selector is
    evaluated against them)"""
    health_changed: HealthChanged | None = None
    """told the pods whose devices changed health"""


class DraManager(
    ResourceManager,
    PreparesSandbox,
    ReleasesPod,
    ContributesConfig,
    ReportsClaims,
    ReportsHealth,
    HandlesPlugins,
):
    """The node's DRA claims, behind the container manager's resource-manager protocol."""

    name = "dra"

    def __init__(self, parts: DraParts) -> None:
        self.parts = parts
        self.registration = parts.registration
        self.claims: dict[tuple[str, str], ClaimInfo] = {}
        """(namespace, claim name) → what is known of it (``restore`` reads it back)"""
        self._locks: dict[tuple[str, str], trio.Lock] = {}
        self._gone_once: set[str] = set()
        self.registration.on_health = self._health_changed

    async def restore(self, io: RunSync) -> None:
        """The claims of the checkpoint, read and decoded through ``io`` (off the event
        loop: the file is up to 16 MiB of outside data)."""
        self.claims = {info.key: info for info in await io(self.parts.checkpoint.load)}

    # -- the resource-manager protocol ---------------------------------------------------

    def plugin_handlers(self) -> Mapping[str, PluginHandler]:
        return {"DRAPlugin": self.registration}

    async def prepare_sandbox(self, pod: Pod) -> None:
        try:
            refs = pod_claims(pod)
        except ClaimError as exc:
            raise ResourceError(FAILED_PREPARE_DYNAMIC_RESOURCES, _event(str(exc))) from exc
        if not refs or self._prepared_for(pod, refs):
            return
        started = trio.current_time()
        failed = True
        try:
            await self._prepare(pod, refs)
            failed = False
        except _Failed as exc:
            raise ResourceError(FAILED_PREPARE_DYNAMIC_RESOURCES, _event(str(exc))) from exc
        finally:
            self._observe("PrepareResources", failed, started)

    async def release_pod(self, pod: Pod) -> None:
        names = [info.key for info in self.claims.values() if pod.uid in info.pod_uids]
        if not names:
            return
        started = trio.current_time()
        failed = True
        try:
            await self._release(pod.uid, names)
            failed = False
        except _Failed as exc:
            log.warning("pod %s: unprepare dynamic resources: %s", pod.key, exc)
        finally:
            self._observe("UnprepareResources", failed, started)

    def contribute(self, pod: Pod, container: Container) -> ContainerContribution:
        """The CDI devices of the claims (and requests) the container names, with the
        ``cdi.k8s.io/`` annotations runtimes without the CRI's CDI field read."""
        wanted = container_claim_requests(pod, container)
        if not wanted:
            return NO_CONTRIBUTION
        cdi: dict[str, None] = {}
        annotations: list[tuple[str, str]] = []
        for claim_name, requests in wanted.items():
            info = self.claims.get((pod.metadata.namespace, claim_name))
            if info is None or not info.prepared:
                continue
            for driver, devices in info.drivers.items():
                ids = _ids(d.cdi_device_ids for d in devices if any(d.serves(r) for r in requests))
                cdi.update(dict.fromkeys(ids))
                annotation = cdi_annotation(driver, info.claim_uid, ids)
                if annotation is not None:
                    annotations.append(annotation)
        return ContainerContribution(cdi_devices=tuple(cdi), annotations=tuple(annotations))

    def dynamic_resources(self, pod: Pod, container: Container) -> Sequence[AssignedClaim]:
        """The claims the container names, whole, once per entry of its
        ``resources.claims`` and in the pod's claim order, as upstream's pod-resources
        server lists them; none when one of them is not known here (upstream's error).
        Each device carries its own CDI IDs."""
        try:
            refs = pod_claims(pod, extended=False)
        except ClaimError:
            return ()
        named = [
            str(c.get("name") or "")
            for c in (container.resources.claims if container.resources else ())
            if isinstance(c, Mapping)
        ]
        out: list[AssignedClaim] = []
        for ref in refs:
            for _ in range(named.count(ref.pod_claim)):
                info = self.claims.get((pod.metadata.namespace, ref.name))
                if info is None:
                    return ()
                out.append(_assigned(info))
        return out

    def resource_health(self, pod: Pod, container: Container) -> Sequence[ResourceStatus]:
        """Per entry of a regular container's ``resources.claims``: ``claim:<name>
        [/<request>]`` with every device of the claim (upstream does not narrow it to the
        request), each named by its first CDI ID or ``<driver>/<pool>/<device>``, and its
        health; entries without devices are left out, init containers get none."""
        health = self.registration.health
        if health is None or all(c.name != container.name for c in pod.spec.containers):
            return ()
        try:
            names = {ref.pod_claim: ref.name for ref in pod_claims(pod, extended=False)}
        except ClaimError:
            return ()
        out: list[ResourceStatus] = []
        for entry in container.resources.claims if container.resources else ():
            if not isinstance(entry, Mapping):
                continue
            pod_claim, request = str(entry.get("name") or ""), str(entry.get("request") or "")
            info = self.claims.get((pod.metadata.namespace, names.get(pod_claim, "")))
            if info is None or not info.prepared:
                continue
            devices = tuple(
                _device_health(driver, d, health.get(driver, d.pool_name, d.device_name))
                for driver, found in info.drivers.items()
                for d in found
            )
            name = f"claim:{pod_claim}/{request}" if request else f"claim:{pod_claim}"
            if devices:
                out.append(ResourceStatus(name=name, resources=devices))
        return out

    def _health_changed(self, devices: set[DeviceKey]) -> None:
        """The pods using a device whose health changed get a new status."""
        if self.parts.health_changed is None or not devices:
            return
        uids = {
            uid
            for info in self.claims.values()
            if any(
                (driver, d.pool_name, d.device_name) in devices
                for driver, found in info.drivers.items()
                for d in found
            )
            for uid in info.pod_uids
        }
        self.parts.health_changed(frozenset(uids))

    # -- what other parts read -----------------------------------------------------------

    def pod_claims(self, pod_uid: str) -> list[ClaimInfo]:
        """The prepared claims a pod uses (pod-resources' dynamic resources)."""
        return [i for i in self.claims.values() if pod_uid in i.pod_uids and i.prepared]

    def claims_in_use(self) -> dict[str, int]:
        """driver → claims prepared and used by a pod (dra_resource_claims_in_use)."""
        counts: dict[str, int] = {"<any>": 0}
        for info in self.claims.values():
            if info.pod_uids and info.prepared:
                counts["<any>"] += 1
                for driver in info.drivers:
                    counts[driver] = counts.get(driver, 0) + 1
        return counts

    # -- preparing -------------------------------------------------------------------------

    def _prepared_for(self, pod: Pod, refs: Iterable[ClaimRef]) -> bool:
        ns = pod.metadata.namespace
        for ref in refs:
            info = self.claims.get((ns, ref.name))
            if info is None or not info.prepared or pod.uid not in info.pod_uids:
                return False
        return True

    async def _read_claims(self, pod: Pod, refs: Sequence[ClaimRef]) -> list[dict[str, Any]]:
        """Every claim read and checked, every driver registered: nothing is recorded
        before all are fine, so a pod that can never run leaves nothing to unprepare."""
        api = self.parts.api
        if api is None:
            raise _Failed("no API server to read ResourceClaims from (standalone kubelet)")
        claims: list[dict[str, Any]] = []
        for ref in refs:
            try:
                claim = await api.get(RESOURCE_CLAIMS.path(pod.metadata.namespace, ref.name))
            except NotFound as exc:
                raise _Failed(f"fetch ResourceClaim {ref.name}: {exc}") from exc
            except (ApiError, OSError) as exc:
                raise _Failed(f"fetch ResourceClaim {ref.name}: {exc}") from exc
            refusal = claim_refusal(pod, ref, claim, self.parts.node_name, self.parts.node_labels)
            if refusal is not None:
                raise _Failed(refusal)
            for driver in claim_drivers(claim):
                try:
                    self.registration.plugin(driver)
                except UnknownDriver as exc:
                    raise _Failed(str(exc)) from None
            claims.append(claim)
        return claims

    async def _prepare(self, pod: Pod, refs: Sequence[ClaimRef]) -> None:
        claims = await self._read_claims(pod, refs)
        keys = sorted({(pod.metadata.namespace, ref.name) for ref in refs})
        async with AsyncExitStack() as stack:
            for key in keys:  # in order: two pods sharing claims cannot deadlock
                await stack.enter_async_context(self._locks.setdefault(key, trio.Lock()))
            todo = self._record_users(pod, claims)
            self._save()
            await self._call_prepare(todo)
            for info in todo:
                info.prepared = True
            self._save()

    def _record_users(self, pod: Pod, claims: Sequence[Mapping[str, Any]]) -> list[ClaimInfo]:
        """The pod recorded as a user of each claim; the claims not yet prepared."""
        todo: list[ClaimInfo] = []
        for claim in claims:
            meta = claim.get("metadata") or {}
            key = (str(meta.get("namespace") or pod.metadata.namespace), str(meta.get("name")))
            uid = str(meta.get("uid") or "")
            info = self.claims.get(key)
            if info is None:
                info = ClaimInfo(
                    claim_uid=uid,
                    claim_name=key[1],
                    namespace=key[0],
                    drivers={driver: [] for driver in claim_drivers(claim)},
                )
                self.claims[key] = info
            elif info.claim_uid != uid:
                raise _Failed(
                    f"old ResourceClaim with same name {key[1]} and different UID "
                    f"{info.claim_uid} still exists (previous pod force-deleted?!)"
                )
            info.pod_uids.add(pod.uid)
            if not info.prepared and info not in todo:
                todo.append(info)
        return todo

    async def _call_prepare(self, todo: Sequence[ClaimInfo]) -> None:
        for driver, infos in _by_driver(todo).items():
            try:
                plugin = self.registration.plugin(driver)
            except UnknownDriver as exc:
                raise _Failed(str(exc)) from None
            requests = [ClaimRequest(i.namespace, i.claim_uid, i.claim_name) for i in infos]
            try:
                results = await plugin.prepare(requests)
            except DraCallError as exc:
                raise _Failed(f"NodePrepareResources: {exc}") from exc
            by_uid = {i.claim_uid: i for i in infos}
            for uid, result in results.items():
                info = by_uid.get(uid)
                if info is None:
                    raise _Failed(
                        f"NodePrepareResources returned result for unknown claim UID {uid}"
                    )
                if result.error:
                    raise _Failed(
                        f"NodePrepareResources failed for ResourceClaim {info.claim_name}: "
                        f"{result.error}"
                    )
                info.drivers[driver] = list(result.devices)
            skipped = len(infos) - len(set(results) & set(by_uid))
            if skipped:
                raise _Failed(f"NodePrepareResources skipped {skipped} ResourceClaims")

    # -- unpreparing ----------------------------------------------------------------------

    async def _release(self, pod_uid: str, keys: Sequence[tuple[str, str]]) -> None:
        async with AsyncExitStack() as stack:
            for key in sorted(keys):
                await stack.enter_async_context(self._locks.setdefault(key, trio.Lock()))
            for key in keys:
                info = self.claims.get(key)
                if info is not None:
                    info.pod_uids.discard(pod_uid)
            self._save()
            await self._unprepare_unused(keys)

    async def _unprepare_unused(self, keys: Iterable[tuple[str, str]]) -> None:
        """Claims no pod uses go to their drivers, then out of the cache."""
        unused = [self.claims[k] for k in keys if k in self.claims and not self.claims[k].pod_uids]
        errors: list[str] = []
        for driver, infos in _by_driver(unused).items():
            try:
                plugin = self.registration.plugin(driver)
                results = await plugin.unprepare(
                    [ClaimRequest(i.namespace, i.claim_uid, i.claim_name) for i in infos]
                )
            except (UnknownDriver, DraCallError) as exc:
                errors.append(f"NodeUnprepareResources: {exc}")
                continue
            for info in infos:
                error = results.get(info.claim_uid)
                if error is None:
                    errors.append(f"NodeUnprepareResources skipped ResourceClaim {info.claim_name}")
                elif error:
                    errors.append(
                        f"NodeUnprepareResources failed for ResourceClaim {info.claim_name}: "
                        f"{error}"
                    )
                else:
                    info.drivers.pop(driver, None)
        for info in unused:
            if not info.drivers:
                self.claims.pop(info.key, None)
                self._locks.pop(info.key, None)
        self._save()
        if errors:
            raise _Failed("; ".join(errors))

    # -- reconciling ------------------------------------------------------------------------

    async def run_reconcile(self) -> None:
        """Every ``RECONCILE_PERIOD``: pods gone for two passes are dropped from their
        claims (the pod sources have had time to deliver the pods that still run), and
        claims no pod uses are unprepared again."""
        while True:
            await trio.sleep(RECONCILE_PERIOD)
            await self.reconcile()

    async def reconcile(self) -> None:
        active = {p.uid for p in self.parts.active()}
        users = {uid for info in self.claims.values() for uid in info.pod_uids}
        gone = users - active
        for uid in sorted(gone & self._gone_once):
            keys = [i.key for i in self.claims.values() if uid in i.pod_uids]
            try:
                await self._release(uid, keys)
            except _Failed as exc:
                log.warning("pod %s gone: unprepare dynamic resources: %s", uid, exc)
        self._gone_once = gone - self._gone_once
        idle = [i.key for i in self.claims.values() if not i.pod_uids]
        if idle:
            try:
                await self._release("", idle)
            except _Failed as exc:
                log.warning("unprepare dynamic resources: %s", exc)

    # -- helpers ------------------------------------------------------------------------------

    def _save(self) -> None:
        try:
            self.parts.checkpoint.save(list(self.claims.values()))
        except OSError as exc:
            raise _Failed(f"checkpoint ResourceClaim state: {exc}") from exc

    def _observe(self, operation: str, failed: bool, started: float) -> None:
        if self.parts.observe is not None:
            self.parts.observe(operation, failed, trio.current_time() - started)


def _event(message: str) -> str:
    """Upstream's event message: the kubelet's prefix and the manager's."""
    return f"Failed to prepare dynamic resources: prepare dynamic resources: {message}"


def _device_health(driver: str, device: Device, report: DeviceHealth) -> ResourceHealth:
    """A device in ``allocatedResourcesStatus``: named by its first CDI ID or
    ``<driver>/<pool>/<device>``, with its health and the driver's message."""
    return ResourceHealth(
        resource_id=(
            device.cdi_device_ids[0]
            if device.cdi_device_ids
            else f"{driver}/{device.pool_name}/{device.device_name}"
        ),
        health=report.health,
        message=report.message,
    )


def _assigned(info: ClaimInfo) -> AssignedClaim:
    return AssignedClaim(
        name=info.claim_name,
        namespace=info.namespace,
        devices=tuple(
            ClaimDevice(driver, d.pool_name, d.device_name, d.cdi_device_ids)
            for driver, devices in info.drivers.items()
            for d in devices
        ),
    )


def _by_driver(infos: Iterable[ClaimInfo]) -> dict[str, list[ClaimInfo]]:
    batches: dict[str, list[ClaimInfo]] = {}
    for info in infos:
        for driver in info.drivers:
            batches.setdefault(driver, []).append(info)
    return batches


def _ids(groups: Iterable[Iterable[str]]) -> list[str]:
    return list(dict.fromkeys(cdi for group in groups for cdi in group))
