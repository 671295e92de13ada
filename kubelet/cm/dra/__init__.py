"""Dynamic resource allocation (resource.k8s.io/v1) on the node: the DRA manager.

``start_dra`` is the container manager's registered entry. ``DraRegistration`` is the
plugin watcher's handler for "DRAPlugin" sockets (``pluginmanager.PluginHandler``); the manager's
``plugin_handlers()`` hands it out. docs/dra.md is the user's page.
"""

from .client import SERVICES, DraCallError, DraPlugin
from .manager import RESOURCE_CLAIMS, DraManager, DraParts
from .registration import RESOURCE_SLICES, WIPE_GRACE, DraRegistration
from .start import start_dra
from .state import CHECKPOINT_FILE, Checkpoint, ClaimInfo, Device

__all__ = [
    "CHECKPOINT_FILE",
    "RESOURCE_CLAIMS",
    "RESOURCE_SLICES",
    "SERVICES",
    "WIPE_GRACE",
    "Checkpoint",
    "ClaimInfo",
    "Device",
    "DraCallError",
    "DraManager",
    "DraParts",
    "DraPlugin",
    "DraRegistration",
    "start_dra",
]
