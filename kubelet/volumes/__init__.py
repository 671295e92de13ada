"""Pod volumes: the pod directory under --root-dir, and the volume plugins."""

from .dirs import CHECKPOINTS_DIR, POD_RESOURCES_DIR, DataDirError, make_log_dir, setup_data_dirs
from .envfiles import PodEnvFiles
from .manager import PodVolumes, VolumeManager
from .paths import pod_dir
from .subpath import MountConfigError
from .tmpfs import noswap_supported
from .tokens import ApiTokenSource

__all__ = [
    "CHECKPOINTS_DIR",
    "POD_RESOURCES_DIR",
    "ApiTokenSource",
    "DataDirError",
    "MountConfigError",
    "PodEnvFiles",
    "PodVolumes",
    "VolumeManager",
    "make_log_dir",
    "noswap_supported",
    "pod_dir",
    "setup_data_dirs",
]
