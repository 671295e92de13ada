"""What the HTTP server needs from the running kubelet, and from the API server.

The server is built against these Protocols only, never against ``agent.py``: the agent
implements ``KubeletBackend`` over its components, the API client implements
``ReviewClient`` (TokenReview and SubjectAccessReview), and tests use small fakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs
from prometheus_client import CollectorRegistry

from kubelet.api.pod import Pod
from kubelet.cri import ImageClient, RuntimeClient


class KubeletBackend(Protocol):
    """The running kubelet as its HTTP endpoints see it (all reads, no writes)."""

    @property
    def runtime(self) -> RuntimeClient:
        """CRI runtime client: /runningpods/, /containerLogs, /stats."""
        ...

    @property
    def images(self) -> ImageClient | None:
        """CRI image client: the image filesystem in /stats/summary (None: omitted)."""
        ...

    @property
    def registry(self) -> CollectorRegistry:
        """The kubelet's metrics (``KubeletMetrics.registry``): /metrics."""
        ...

    @property
    def probe_registry(self) -> CollectorRegistry | None:
        """The prober's metrics: /metrics/probes (None: an empty page)."""
        ...

    def desired_pods(self) -> Sequence[Pod]:
        """The pods this node should run (the pod manager's view): /pods."""
        ...

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        """A desired pod by namespace and name (upstream ``GetPodByName``)."""
        ...

    def sync_loop_last_iteration(self) -> float | None:
        """Trio-clock time the syncLoop last began an iteration; None before the first."""
        ...


@attrs.frozen
class TokenReviewResult:
    """A TokenReview's answer: who the bearer token belongs to, if anyone."""

    authenticated: bool
    user: str = ""
    groups: tuple[str, ...] = ()
    uid: str = ""
    error: str = ""


class ReviewClient(Protocol):
    """The two API calls authentication and authorization delegate to the API server.

    Both raise on transport or server errors (the answer is then not cached, and the
    request fails: 401 for a token, 500 for an authorization error).
    """

    async def token_review(self, token: str) -> TokenReviewResult: ...

    async def subject_access_review(
        self,
        user: str,
        groups: Sequence[str],
        verb: str,
        resource: str,
        subresource: str,
        name: str,
    ) -> bool: ...
