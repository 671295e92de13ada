"""The kubelet's HTTP servers: endpoints, authentication and authorization, TLS.

The agent implements ``KubeletBackend`` and runs ``serve(ServerParts(...))`` in its
server nursery; ``ReviewClient`` is how authentication and authorization reach the API
server (TokenReview, SubjectAccessReview).
"""

from . import spdy
from .auth import AuthConfigError, KubeletAuth, build_auth
from .backend import KubeletBackend, ReviewClient, RunningKubelet, TokenReviewResult
from .reviews import ApiReviews
from .sdnotify import SystemdUnit
from .serve import Addresses, ServerParts, serve

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
