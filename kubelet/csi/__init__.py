"""CSI drivers: registration, their Node service, the node's CSI facts, CSI volumes.

What the package offers: ``CsiHandler`` (the plugin watcher's "CSIPlugin" handler),
``CsiDrivers`` (the registered drivers), ``NodeInfoManager`` (CSINode and the Node's
``csi.volume.kubernetes.io/nodeid`` annotation) and ``CsiClient`` (a driver's Node
service over its socket).

``CsiClient`` loads on first use (``__getattr__``), with the CSI protobuf and gRPC
stubs: a kubelet that no CSI driver registers with never pays for them.
"""

from typing import TYPE_CHECKING

from kubelet.lazyinit import lazy_names as _lazy_names

from .drivers import CsiDrivers, CsiHandler, Driver, highest_version, unique_volume_name
from .facts import (
    EXPAND_VOLUME,
    VOLUME_CONDITION,
    NodeInfo,
    VolumeUsage,
    block_capability,
    capability,
)
from .nodeinfo import CSINODES, NODE_ID_ANNOTATION, NodeInfoManager

if TYPE_CHECKING:
    from .client import CsiClient

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

_LAZY = {"CsiClient": "client"}
"""name -> the module that defines it, imported on first use (``__getattr__``)"""


__getattr__ = _lazy_names(__name__, _LAZY, globals())
