"""The kubelet's HTTP servers: endpoints, authentication and authorization, TLS.

The agent implements ``KubeletBackend`` and runs ``serve(backend, options, ...)`` in its
server nursery; ``ReviewClient`` is how authentication and authorization reach the API
server (TokenReview, SubjectAccessReview).
"""

from .auth import AuthConfigError, KubeletAuth, build_auth
from .backend import KubeletBackend, ReviewClient, TokenReviewResult
from .serve import Addresses, serve

__all__ = [
    "Addresses",
    "AuthConfigError",
    "KubeletAuth",
    "KubeletBackend",
    "ReviewClient",
    "TokenReviewResult",
    "build_auth",
    "serve",
]
