"""The plugin watcher: sockets in ``<root-dir>/plugins_registry``, registered by type.

Upstream's plugin manager, in one task: a scan of the registry directory at start and
every second (sooner on an inotify event) gives the sockets present; each new socket is
asked ``GetInfo`` over the pluginregistration v1 ``Registration`` service, handed to the
handler for its type, and told the outcome (``NotifyRegistrationStatus``). A socket that
goes away deregisters its plugin; a socket replaced (a plugin restarted) is registered
again. Each registration runs in its own task under a deadline, so a plugin that hangs or
answers garbage delays nobody else; a failed one is tried again, backing off to 30 s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable, Mapping

import attrs
import inotify_simple
import trio

from kubelet.boundedio import RunSync, in_thread
from kubelet.cri import CriChannel, CriError

from . import pluginregistration_api_grpc as grpc
from . import pluginregistration_api_pb2 as pb
from .handler import PluginHandler, PluginRefused

log = logging.getLogger(__name__)

REGISTRY_DIR = "plugins_registry"
RECONCILE_PERIOD = 1.0
"""seconds between scans while a registration is under way or due again, or with no
inotify watch (upstream's reconciler period)"""
RESCAN_PERIOD = 60.0
"""seconds between scans at rest with the inotify watch, which wakes the scan on any
change: a safety net (a watch lost with its directory), not a poll"""
CALL_TIMEOUT = 10.0
"""seconds a plugin has to answer GetInfo or NotifyRegistrationStatus"""
REGISTER_TIMEOUT = 60.0
"""seconds a handler has to register a plugin (its calls to the plugin, the API server)"""
MAX_ENTRIES = 1000
"""directory entries read at most per scan: a directory filled by mistake stays cheap"""
MAX_MESSAGE_BYTES = 64 * 1024
"""a PluginInfo is a few hundred bytes"""
RETRY_INITIAL = 1.0
RETRY_MAX = 30.0


@attrs.frozen(kw_only=True)
class PluginParts:
    """What the plugin watcher is made from (``agent`` builds it)."""

    root_dir: str
    handlers: Mapping[str, PluginHandler]
    """plugin type → handler; a type without one is refused"""
    watch_files: bool = True
    """inotify wakes the scan early (tests: the one-second scan alone)"""
    io: RunSync = in_thread
    """where the directory is read"""


@attrs.frozen
class Registered:
    """A plugin the watcher handed to its handler."""

    socket: str
    stamp: tuple[int, int]
    """the socket's inode and ctime: a new socket at the same path is a new plugin"""
    type: str
    name: str
    endpoint: str


def scan(directory: str, limit: int = MAX_ENTRIES) -> dict[str, tuple[int, int]]:
    """The unix sockets directly in ``directory`` (not hidden ones), with their stamps."""
    found: dict[str, tuple[int, int]] = {}
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= limit:
                    log.warning(
                        "plugin registry %s: only the first %d entries read", directory, limit
                    )
                    break
                if entry.name.startswith("."):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISSOCK(info.st_mode):
                    found[entry.path] = (info.st_ino, info.st_ctime_ns)
    except FileNotFoundError:
        pass
    return found


class PluginWatcher:
    """The state of the plugin registry: what is registered, what is in flight."""

    def __init__(self, parts: PluginParts, clock: Callable[[], float] = trio.current_time) -> None:
        self.parts = parts
        self.directory = os.path.join(parts.root_dir, REGISTRY_DIR)
        self.registered: dict[str, Registered] = {}
        """socket path → the plugin registered from it"""
        self._busy: set[str] = set()
        self._retry: dict[str, tuple[float, float]] = {}
        """socket path → (next attempt, back-off) after a failed registration"""
        self._clock = clock
        self._wake = trio.Event()

    async def run(
        self, *, task_status: trio.TaskStatus[PluginWatcher] = trio.TASK_STATUS_IGNORED
    ) -> None:
        os.makedirs(self.directory, mode=0o750, exist_ok=True)
        async with trio.open_nursery() as nursery:
            if self.parts.watch_files:
                nursery.start_soon(self._watch)
            task_status.started(self)
            while True:
                await self.reconcile(nursery)
                with trio.move_on_after(self._period()):
                    await self._wake.wait()
                self._wake = trio.Event()

    def _period(self) -> float:
        """How long to wait for a change before the next scan: a second while work is
        pending (a registration under way, a retry to come) or without a watch; at rest,
        the watch says when to look, and a scan a second would read the directory in a
        worker thread for nothing."""
        if not self.parts.watch_files or self._busy or self._retry:
            return RECONCILE_PERIOD
        return RESCAN_PERIOD

    async def _watch(self) -> None:
        """Wake the scan on any change in the registry directory."""
        flags = inotify_simple.flags
        mask = flags.CREATE | flags.DELETE | flags.MOVED_TO | flags.MOVED_FROM | flags.ATTRIB
        with inotify_simple.INotify(nonblocking=True) as inotify:
            inotify.add_watch(self.directory, mask)
            self._wake.set()  # a socket made before the watch began is found now
            while True:
                await trio.lowlevel.wait_readable(inotify.fileno())
                with contextlib.suppress(BlockingIOError):
                    inotify.read(timeout=0)
                self._wake.set()

    async def reconcile(self, nursery: trio.Nursery) -> None:
        """One pass: deregister what went, register what came."""
        present = await self.parts.io(lambda: scan(self.directory))
        for path, plugin in list(self.registered.items()):
            if present.get(path) != plugin.stamp and path not in self._busy:
                del self.registered[path]
                self._busy.add(path)
                nursery.start_soon(self._deregister, path, plugin)
        for path, stamp in present.items():
            if path in self.registered or path in self._busy:
                continue
            due = self._retry.get(path)
            if due is not None and due[0] > self._clock():
                continue
            self._busy.add(path)
            nursery.start_soon(self._register, path, stamp)
        for path in set(self._retry) - set(present):
            del self._retry[path]

    async def _deregister(self, path: str, plugin: Registered) -> None:
        try:
            handler = self.parts.handlers.get(plugin.type)
            if handler is not None:
                log.info("deregistering %s plugin %s (%s)", plugin.type, plugin.name, path)
                with trio.move_on_after(REGISTER_TIMEOUT):
                    await handler.deregister(plugin.name)
        except Exception as exc:
            log.warning("plugin %s: deregistration failed: %s", plugin.name, exc)
        finally:
            self._busy.discard(path)
            self._wake.set()

    async def _register(self, path: str, stamp: tuple[int, int]) -> None:
        channel = CriChannel(f"unix://{path}", max_message_bytes=MAX_MESSAGE_BYTES)
        try:
            client = grpc.RegistrationStub(channel.channel())
            plugin = await self._attempt(channel, client, path, stamp)
            if plugin is not None:
                self.registered[path] = plugin
                self._retry.pop(path, None)
            else:
                self._back_off(path)
        finally:
            channel.close()
            self._busy.discard(path)

    def _back_off(self, path: str) -> None:
        previous = self._retry.get(path, (0.0, RETRY_INITIAL / 2))[1]
        delay = min(previous * 2, RETRY_MAX)
        self._retry[path] = (self._clock() + delay, delay)

    async def _attempt(
        self, channel: CriChannel, client: grpc.RegistrationStub, path: str, stamp: tuple[int, int]
    ) -> Registered | None:
        """GetInfo, validate, register, notify; the plugin registered, or None."""
        try:
            info = await channel.call("GetInfo", client.GetInfo, pb.InfoRequest(), CALL_TIMEOUT)
        except CriError as exc:
            log.warning("plugin socket %s: GetInfo failed: %s", path, exc)
            return None
        endpoint = info.endpoint or path
        handler = self.parts.handlers.get(info.type)
        error = ""
        if handler is None:
            error = (
                f"RegisterPlugin error -- no handler registered for plugin type: {info.type} "
                f"at socket {path}"
            )
        else:
            error = await self._hand_over(
                handler, info.name, endpoint, list(info.supported_versions)
            )
        await self._notify(channel, client, path, error)
        if error:
            log.warning("plugin %s (%s) not registered: %s", info.name, path, error)
            return None
        log.info("registered %s plugin %s at %s", info.type, info.name, endpoint)
        return Registered(path, stamp, info.type, info.name, endpoint)

    async def _hand_over(
        self, handler: PluginHandler, name: str, endpoint: str, versions: list[str]
    ) -> str:
        """The handler's verdict: "" when it registered the plugin, else why not."""
        try:
            handler.validate(name, endpoint, versions)
        except PluginRefused as exc:
            return f"RegisterPlugin error -- plugin validation failed with err: {exc}"
        try:
            with trio.fail_after(REGISTER_TIMEOUT):
                await handler.register(name, endpoint, versions)
        except trio.TooSlowError:
            return "RegisterPlugin error -- plugin registration failed with err: timed out"
        except Exception as exc:
            return f"RegisterPlugin error -- plugin registration failed with err: {exc}"
        return ""

    async def _notify(
        self, channel: CriChannel, client: grpc.RegistrationStub, path: str, error: str
    ) -> None:
        status = pb.RegistrationStatus(plugin_registered=not error, error=error)
        try:
            await channel.call(
                "NotifyRegistrationStatus", client.NotifyRegistrationStatus, status, CALL_TIMEOUT
            )
        except CriError as exc:
            log.warning("plugin socket %s: NotifyRegistrationStatus failed: %s", path, exc)


async def run_plugin_manager(
    parts: PluginParts,
    *,
    task_status: trio.TaskStatus[PluginWatcher] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Watch the plugin registry until cancelled; hands back the watcher."""
    await PluginWatcher(parts).run(task_status=task_status)
