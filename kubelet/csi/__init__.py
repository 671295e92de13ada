"""CSI drivers: registration, their Node service, the node's CSI facts, CSI volumes.

What the package offers: ``CsiHandler`` (the plugin watcher's "CSIPlugin" handler),
``CsiDrivers`` (the registered drivers), ``NodeInfoManager`` (CSINode and the Node's
``csi.volume.kubernetes.io/nodeid`` annotation) and ``CsiClient`` (a driver's Node
service over its socket).
"""

from .client import (
    EXPAND_VOLUME,
    VOLUME_CONDITION,
    CsiClient,
    NodeInfo,
    VolumeUsage,
    block_capability,
    capability,
)
from .drivers import CsiDrivers, CsiHandler, Driver, highest_version, unique_volume_name
from .nodeinfo import CSINODES, NODE_ID_ANNOTATION, NodeInfoManager

__all__ = [
    "CSINODES",
    "EXPAND_VOLUME",
    "NODE_ID_ANNOTATION",
    "VOLUME_CONDITION",
    "CsiClient",
    "CsiDrivers",
    "CsiHandler",
    "Driver",
    "NodeInfo",
    "NodeInfoManager",
    "VolumeUsage",
    "block_capability",
    "capability",
    "highest_version",
    "unique_volume_name",
]
