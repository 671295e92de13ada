"""The kubelet's HTTP servers: endpoints, authentication and authorization, TLS.

The agent implements ``KubeletBackend`` and runs ``serve(backend, options, ...)`` in its
server nursery; ``ReviewClient`` is how authentication and authorization reach the API
server (TokenReview, SubjectAccessReview).
"""

from . import spdy
from .auth import AuthConfigError, KubeletAuth, build_auth
from .backend import KubeletBackend, ReviewClient, RunningKubelet, TokenReviewResult
from .hoststats import HostStats
from .reviews import ApiReviews
from .serve import Addresses, serve
from .stats import SummaryProvider
from .syscontainers import SystemContainerNames
from .usage import UsageReader
from .volumemetrics import register_volume_stats

__all__ = [
    "Addresses",
    "ApiReviews",
    "AuthConfigError",
    "HostStats",
    "KubeletAuth",
    "KubeletBackend",
    "ReviewClient",
    "RunningKubelet",
    "SummaryProvider",
    "SystemContainerNames",
    "TokenReviewResult",
    "UsageReader",
    "build_auth",
    "register_volume_stats",
    "serve",
    "spdy",
]
