"""The device manager: device plugins (the v1beta1 device plugin API) behind the
container manager.

``start`` is what ``cm.registry`` registers: it serves ``v1beta1.Registration`` on
``<root-dir>/device-plugins/kubelet.sock`` and returns the ``DeviceManager``, which
reports the plugins' devices as extended resources, allocates them at admission, asks
the plugins' Allocate before a pod's sandbox and gives each container its devices,
mounts, variables, annotations and CDI devices. ``api`` is the generated protobuf
module (package v1beta1), ``api_grpc`` its grpclib services (a plugin's side too).
"""

from . import deviceplugin_api_grpc as api_grpc
from . import deviceplugin_api_pb2 as api
from .allocation import Granted
from .checkpoint import FILE_NAME as CHECKPOINT_FILE
from .manager import GRACE_PERIOD, MAX_DEVICES, MAX_DIALS, MAX_RESOURCES, DeviceManager
from .names import HEALTHY, UNHEALTHY, VERSION
from .registration import SOCKET_NAME
from .start import PLUGINS_DIR, start

__all__ = [
    "CHECKPOINT_FILE",
    "GRACE_PERIOD",
    "HEALTHY",
    "MAX_DEVICES",
    "MAX_DIALS",
    "MAX_RESOURCES",
    "PLUGINS_DIR",
    "SOCKET_NAME",
    "UNHEALTHY",
    "VERSION",
    "DeviceManager",
    "Granted",
    "api",
    "api_grpc",
    "start",
]
