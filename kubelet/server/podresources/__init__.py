"""The pod-resources gRPC API (``v1.PodResourcesLister``) on a unix socket."""

from .service import SOCKET_NAME, Assigned, Lister, TokenBucket, serve_pod_resources

__all__ = [
    "SOCKET_NAME",
    "Assigned",
    "Lister",
    "TokenBucket",
    "serve_pod_resources",
]
