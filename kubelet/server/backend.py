"""What the HTTP server needs from the running kubelet, and from the API server.

The server is built against these Protocols only: ``RunningKubelet`` implements
``KubeletBackend`` over the running components, ``reviews.ApiReviews`` implements
``ReviewClient`` (TokenReview and SubjectAccessReview) over the API, and tests use
small fakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs
from prometheus_client.registry import CollectorRegistry

from kubelet.api import Pod
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.pods import PodLifecycle


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

    def translate_pod_uid(self, uid: str) -> str:
        """A mirror pod's UID as its static pod's, other UIDs unchanged (upstream's
        ``TranslatePodUID``): exec, attach and run by ``{uid}``."""
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


class RunningKubelet:
    """``KubeletBackend`` over the running components: the CRI clients, the metrics
    registries and the pod lifecycle (desired pods with their last generated status)."""

    def __init__(
        self,
        runtime: RuntimeClient,
        images: ImageClient | None,
        registry: CollectorRegistry,
        probe_registry: CollectorRegistry | None,
        lifecycle: PodLifecycle,
    ) -> None:
        self.runtime = runtime
        self.images = images
        self.registry = registry
        self.probe_registry = probe_registry
        self._lifecycle = lifecycle

    def desired_pods(self) -> Sequence[Pod]:
        statuses = self._lifecycle.syncer.statuses
        return [
            attrs.evolve(pod, status=statuses.get(pod.uid, pod.status))
            for pod in self._lifecycle.pods.pods()
        ]

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        for pod in self._lifecycle.pods.pods():
            if pod.metadata.namespace == namespace and pod.metadata.name == name:
                return pod
        return None

    def translate_pod_uid(self, uid: str) -> str:
        return self._lifecycle.pods.translate_uid(uid)

    def sync_loop_last_iteration(self) -> float | None:
        return self._lifecycle.syncloop.last_iteration
