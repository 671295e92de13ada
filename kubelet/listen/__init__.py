"""How the kubelet's servers accept connections: a bounded, descriptor-aware accept loop.

The HTTP servers (``kubelet/server``) and the unix gRPC servers (``kubelet/cri``
``serve_unix_grpc``: device plugin registration, pod-resources) share it: at most so many
connections at a time, the rest wait in the kernel's listen backlog, and a reserve of
descriptors is left to the rest of the kubelet.
"""

from .accept import AcceptLoop
from .fdlimits import Descriptors, default_reserve

__all__ = ["AcceptLoop", "Descriptors", "default_reserve"]
