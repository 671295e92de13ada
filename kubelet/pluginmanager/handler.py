"""What a plugin type's handler offers the watcher (upstream's PluginHandler)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class PluginRefused(Exception):
    """A handler will not take a plugin; the message goes back to the plugin."""


class PluginHandler(Protocol):
    """The kubelet side of one plugin type ("CSIPlugin", "DRAPlugin", ...).

    ``validate`` decides quickly and without I/O; ``register`` may call the plugin (the
    watcher bounds it); ``deregister`` runs when the plugin's socket goes away.
    """

    def validate(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        """Raise PluginRefused(message) to refuse the plugin."""

    async def register(self, name: str, endpoint: str, versions: Sequence[str]) -> None: ...

    async def deregister(self, name: str) -> None: ...
