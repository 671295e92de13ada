"""Pod volumes: the pod directory under --root-dir, and the volume plugins.

What the package offers: ``VolumeManager`` and ``PodVolumes`` (a pod's volumes set up
before its sandbox, mounted into its containers, removed after its teardown),
``ApiTokenSource`` (service-account tokens), ``ApiClaimLookup`` (the claims and
PersistentVolumes behind persistentVolumeClaim and ephemeral volumes), ``PodEnvFiles``
(``fileKeyRef`` env files), ``CsiVolumes`` (CSI volumes: inline ones, and
``publish_persistent`` for a PersistentVolume with ``spec.csi``),
``setup_data_dirs``/``pod_dir``/``make_log_dir`` (the directories under --root-dir, with
upstream's layout and modes) and ``noswap_supported``.
"""

from .claims import ApiClaimLookup
from .csivolumes import CsiVolumes, csi_volume_stats
from .dirs import CHECKPOINTS_DIR, POD_RESOURCES_DIR, DataDirError, make_log_dir, setup_data_dirs
from .envfiles import PodEnvFiles
from .hostpath import VolumeError
from .manager import PodVolumes, VolumeManager, failure_reason
from .paths import pod_dir
from .subpath import MountConfigError, UnsafeSubPath, open_in_volume
from .tmpfs import noswap_supported
from .tokens import ApiTokenSource

__all__ = [
    "CHECKPOINTS_DIR",
    "POD_RESOURCES_DIR",
    "ApiClaimLookup",
    "ApiTokenSource",
    "CsiVolumes",
    "DataDirError",
    "MountConfigError",
    "PodEnvFiles",
    "PodVolumes",
    "UnsafeSubPath",
    "VolumeError",
    "VolumeManager",
    "csi_volume_stats",
    "failure_reason",
    "make_log_dir",
    "noswap_supported",
    "open_in_volume",
    "pod_dir",
    "setup_data_dirs",
]
