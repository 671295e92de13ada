"""The plugin manager: plugins that register themselves through a socket.

What the package offers: ``run_plugin_manager`` (the watcher of
``<root-dir>/plugins_registry``, upstream's plugin registration v1 protocol),
``PluginParts`` (what it is built from: the handlers by plugin type), the
``PluginHandler`` protocol a plugin type implements and ``PluginRefused``.
"""

from .handler import PluginHandler, PluginRefused
from .watcher import REGISTRY_DIR, PluginParts, PluginWatcher, Registered, run_plugin_manager

__all__ = [
    "REGISTRY_DIR",
    "PluginHandler",
    "PluginParts",
    "PluginRefused",
    "PluginWatcher",
    "Registered",
    "run_plugin_manager",
]
