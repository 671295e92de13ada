"""The kubelet's HTTP servers: endpoints, authentication and authorization, TLS.

The agent implements ``KubeletBackend`` and runs ``serve(ServerParts(...))`` in its
server nursery; ``ReviewClient`` is how authentication and authorization reach the API
server (TokenReview, SubjectAccessReview).

The names load on first use (``__getattr__``): a kubelet with its ports off serves only
the pod-resources socket, and never pays for the HTTP apps, TLS and authentication.
"""

from typing import TYPE_CHECKING

from kubelet.lazyinit import lazy_names as _lazy_names

from . import spdy

if TYPE_CHECKING:
    from .auth import AuthConfigError, KubeletAuth, build_auth
    from .backend import KubeletBackend, ReviewClient, RunningKubelet, TokenReviewResult
    from .reviews import ApiReviews
    from .sdnotify import SystemdUnit
    from .servers import Addresses, ServerParts, serve

__all__ = [
    "Addresses",
    "ApiReviews",
    "AuthConfigError",
    "KubeletAuth",
    "KubeletBackend",
    "ReviewClient",
    "RunningKubelet",
    "ServerParts",
    "SystemdUnit",
    "TokenReviewResult",
    "build_auth",
    "serve",
    "spdy",
]

_LAZY = {
    "Addresses": "servers",
    "ApiReviews": "reviews",
    "AuthConfigError": "auth",
    "KubeletAuth": "auth",
    "KubeletBackend": "backend",
    "ReviewClient": "backend",
    "RunningKubelet": "backend",
    "ServerParts": "servers",
    "SystemdUnit": "sdnotify",
    "TokenReviewResult": "backend",
    "build_auth": "auth",
    "serve": "servers",
}
"""name -> the module that defines it, imported on first use (``__getattr__``)"""


__getattr__ = _lazy_names(__name__, _LAZY, globals())
