"""Service-account tokens for projected volumes, through the TokenRequest API."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kubelet.goformat import parse_rfc3339

if TYPE_CHECKING:
    from kubelet.api import ApiClient


class ApiTokenSource:
    """Service-account tokens through the TokenRequest API, reused until 80 % of their
    lifetime has passed (upstream's rotation point), then requested again."""

    def __init__(self, client: ApiClient, wall_clock: Callable[[], float]) -> None:
        self._client = client
        self._wall = wall_clock
        self._cache: dict[tuple[str, str, str, int, str], tuple[str, float, float]] = {}

    async def token(
        self,
        namespace: str,
        service_account: str,
        audience: str,
        expiration_seconds: int,
        pod_name: str = "",
        pod_uid: str = "",
    ) -> tuple[str, float]:
        key = (namespace, service_account, audience, expiration_seconds, pod_uid)
        cached = self._cache.get(key)
        now = self._wall()
        if cached is not None and now < cached[2]:
            return cached[0], cached[1]
        spec: dict[str, object] = {"expirationSeconds": expiration_seconds}
        if audience:
            spec["audiences"] = [audience]
        if pod_name and pod_uid:
            spec["boundObjectRef"] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod_name,
                "uid": pod_uid,
            }
        answer = await self._client.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        status = answer.get("status") or {}
        token = str(status.get("token", ""))
        expiry = parse_rfc3339(str(status.get("expirationTimestamp", ""))) or (
            now + expiration_seconds
        )
        refresh_at = now + 0.8 * max(expiry - now, 0.0)
        self._cache[key] = (token, expiry, refresh_at)
        return token, expiry
