"""DRA drivers coming and going: the plugin watcher's handler for "DRAPlugin" sockets.

The watcher (``<root-dir>/plugins_registry``, pluginregistration v1) asks ``validate``
then ``register`` for each driver socket it finds, ``deregister`` when it goes. A
driver may register several instances (a rolling update of its DaemonSet); the newest
serves calls, and the driver is gone once the last instance is. Its ResourceSlices are
then deleted after a grace period (upstream's 30 s) unless it comes back first, since a
driver that died may never publish again and the scheduler would keep sending pods for
its devices. At start no driver is registered yet: the node's slices of drivers not
registered are deleted at once, with retries (the API server may not be reachable yet).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from kubelet.api import ApiError, Resource
from kubelet.pluginmanager import PluginRefused

from .client import DraPlugin, GrpcObserver, choose_service, load_service
from .health import DeviceKey, HealthCache, watch_health

if TYPE_CHECKING:
    from kubelet.api import ApiClient

log = logging.getLogger(__name__)

RESOURCE_SLICES = Resource("resource.k8s.io/v1", "resourceslices", namespaced=False)
WIPE_GRACE = 30.0
"""seconds a deregistered driver has to come back before its ResourceSlices go"""
WIPE_BACKOFF = (1.0, 2.0, 300.0)
"""first retry, factor and cap of a failed wipe (upstream's backoff)"""


class UnknownDriver(LookupError):
    pass


class DraRegistration:
    """The registered DRA drivers, and the wiping of their ResourceSlices."""

    def __init__(
        self,
        nursery: trio.Nursery,
        node_name: str,
        api: ApiClient | None,
        *,
        grace: float = WIPE_GRACE,
        observe: GrpcObserver | None = None,
        on_change: Callable[[], None] | None = None,
        health: HealthCache | None = None,
    ) -> None:
        self.nursery = nursery
        self.node_name = node_name
        self.api = api
        self.grace = grace
        self.observe = observe
        self.on_change = on_change
        self.plugins: dict[str, list[DraPlugin]] = {}
        """driver → its instances, oldest first"""
        self._wipes: dict[str, trio.CancelScope] = {}
        self.health = health
        """the drivers' device health (None: gate ResourceHealthStatus off, not watched)"""
        self.on_health: Callable[[set[DeviceKey]], None] = lambda _: None
        """told the devices whose health changed (the DRA manager finds their pods)"""
        self._watches: dict[str, trio.CancelScope] = {}

    # -- the plugin watcher's protocol ------------------------------------------------

    def validate(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        """Refuses a driver without a name or endpoint, or one speaking no service we do."""
        if not name:
            raise PluginRefused("DRA plugin has no name")
        if not endpoint:
            raise PluginRefused(f"DRA plugin {name} has no endpoint")
        try:
            choose_service(versions)
        except ValueError as exc:
            raise PluginRefused(f"invalid versions of plugin {name}: {exc}") from None

    async def register(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        self.validate(name, endpoint, versions)
        service = choose_service(versions)
        await load_service(service)
        plugin = DraPlugin(name, endpoint, service, observe=self.observe)
        instances = self.plugins.setdefault(name, [])
        for old in [p for p in instances if p.endpoint == endpoint]:
            instances.remove(old)
            old.close()
        instances.append(plugin)
        scope = self._wipes.pop(name, None)
        if scope is not None:
            scope.cancel()  # it came back in time: its slices stay
        log.info("Registered DRA plugin %s at %s (%s)", name, endpoint, plugin.service)
        self._watch(name, endpoint)
        self._changed()

    async def deregister(self, name: str) -> None:
        instances = self.plugins.get(name)
        if not instances:
            log.info("Deregistering DRA plugin %s not necessary, was already removed", name)
            return
        instances.pop().close()
        if instances:
            return  # an older instance still serves
        del self.plugins[name]
        self._unwatch(name)
        log.info("Deregistered DRA plugin %s; its ResourceSlices go in %gs", name, self.grace)
        self._schedule_wipe(name, self.grace)
        self._changed()

    # -- device health -------------------------------------------------------------------

    def _watch(self, driver: str, endpoint: str) -> None:
        """One health stream per driver, to its newest instance."""
        if self.health is None:
            return
        old = self._watches.pop(driver, None)
        if old is not None:
            old.cancel()
        scope = self._watches[driver] = trio.CancelScope()
        self.nursery.start_soon(self._run_watch, driver, endpoint, scope)

    async def _run_watch(self, driver: str, endpoint: str, scope: trio.CancelScope) -> None:
        assert self.health is not None
        with scope:
            await watch_health(driver, endpoint, self.health, self.on_health)

    def _unwatch(self, driver: str) -> None:
        scope = self._watches.pop(driver, None)
        if scope is not None:
            scope.cancel()
        if self.health is not None:
            self.on_health(self.health.clear(driver))

    # -- lookups ------------------------------------------------------------------------

    def plugin(self, driver: str) -> DraPlugin:
        instances = self.plugins.get(driver)
        if not instances:
            raise UnknownDriver(f"DRA driver {driver} is not registered")
        return instances[-1]

    def registered(self) -> tuple[str, ...]:
        return tuple(self.plugins)

    # -- wiping ResourceSlices -------------------------------------------------------------

    def wipe_unregistered(self) -> None:
        """At start: the node's slices of drivers that are not registered go at once."""
        self._schedule_wipe("", 0.0)

    def _schedule_wipe(self, driver: str, delay: float) -> None:
        if self.api is None:
            return
        old = self._wipes.pop(driver, None)
        if old is not None:
            old.cancel()
        scope = trio.CancelScope()
        if driver:
            self._wipes[driver] = scope
        self.nursery.start_soon(self._wipe, driver, delay, scope)

    async def _wipe(self, driver: str, delay: float, scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep(delay)
            retry, factor, cap = WIPE_BACKOFF
            while not await self._wipe_once(driver):
                await trio.sleep(retry)
                retry = min(retry * factor, cap)
        if self._wipes.get(driver) is scope:
            del self._wipes[driver]

    async def _wipe_once(self, driver: str) -> bool:
        """One attempt; True when done."""
        assert self.api is not None
        selector = f"spec.nodeName={self.node_name}"
        try:
            if driver:
                await self.api.delete_collection(
                    RESOURCE_SLICES.path(), field_selector=f"{selector},spec.driver={driver}"
                )
                log.info("Deleted the ResourceSlices of DRA driver %s", driver)
                return True
            page = await self.api.list_all(RESOURCE_SLICES.path(), field_selector=selector)
            drivers = {str((s.get("spec") or {}).get("driver") or "") for s in page.items}
            for gone in sorted(drivers - set(self.plugins) - {""}):
                await self.api.delete_collection(
                    RESOURCE_SLICES.path(), field_selector=f"{selector},spec.driver={gone}"
                )
                log.info("Deleted the ResourceSlices of unregistered DRA driver %s", gone)
            return True
        except (ApiError, OSError) as exc:
            log.info("Deleting ResourceSlices (%s) failed, retrying: %s", selector, exc)
            return False

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def close(self) -> None:
        for scope in self._watches.values():
            scope.cancel()
        for instances in self.plugins.values():
            for plugin in instances:
                plugin.close()
