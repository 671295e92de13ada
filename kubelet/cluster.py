"""The kubelet's API-facing adapters: the small protocols its components use, over ApiClient."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from kubelet.api.client import EVENTS, LEASES, ApiClient, PatchType
from kubelet.api.errors import ApiError, NotFound
from kubelet.api.watch import ListWatch, UidStore, reflect
from kubelet.env.variables import CREATE_CONTAINER_CONFIG_ERROR, EnvError
from kubelet.runtime.credentials import PullSecret, SecretUnavailable
from kubelet.server.backend import TokenReviewResult


class ApiLeases:
    """``LeaseApi`` for the lease controller (raw JSON: unknown fields survive)."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._client.get(LEASES.path(namespace, name))

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._client.create(LEASES.path(namespace), body)

    async def update_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._client.update(LEASES.path(namespace, name), body)


class ApiEvents:
    """``EventSink`` for the event recorder."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._client.create(EVENTS.path(namespace), body)

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._client.patch(EVENTS.path(namespace, name), patch, PatchType.STRATEGIC)


class ApiReviews:
    """``ReviewClient`` for the server's webhook authentication and authorization."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def token_review(self, token: str) -> TokenReviewResult:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        answer = await self._client.create("/apis/authentication.k8s.io/v1/tokenreviews", body)
        status = answer.get("status") or {}
        user = status.get("user") or {}
        return TokenReviewResult(
            authenticated=bool(status.get("authenticated")),
            user=str(user.get("username", "")),
            groups=tuple(user.get("groups") or ()),
            uid=str(user.get("uid", "")),
            error=str(status.get("error", "")),
        )

    async def subject_access_review(
        self,
        user: str,
        groups: Sequence[str],
        verb: str,
        resource: str,
        subresource: str,
        name: str,
    ) -> bool:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": list(groups),
                "resourceAttributes": {
                    "verb": verb,
                    "group": "",
                    "version": "v1",
                    "resource": resource,
                    "subresource": subresource,
                    "name": name,
                },
            },
        }
        answer = await self._client.create(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews", body
        )
        return bool((answer.get("status") or {}).get("allowed"))


class ApiEnvLookup:
    """``EnvLookup`` for configMapKeyRef / secretKeyRef / envFrom, read from the API."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        obj = await self._get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        if obj is None:
            return None
        return {str(k): str(v) for k, v in (obj.get("data") or {}).items()}

    async def config_map_files(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """data and binaryData of one ConfigMap read in one GET (volumes only; env
        cannot hold bytes), so both halves come from the same version."""
        obj = await self._get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        if obj is None:
            return None
        files = {str(k): str(v).encode() for k, v in (obj.get("data") or {}).items()}
        files.update(
            {str(k): base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()}
        )
        return files

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        obj = await self._get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        if obj is None:
            return None
        return {str(k): base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}

    async def _get(self, path: str) -> dict[str, Any] | None:
        """The object, None when it does not exist; other API errors become the
        CreateContainerConfigError the pod worker reports."""
        try:
            return await self._client.get(path)
        except NotFound:
            return None
        except ApiError as exc:
            raise EnvError(CREATE_CONTAINER_CONFIG_ERROR, str(exc)) from exc


class ApiPullSecrets:
    """``SecretSource`` for image pulls: one GET per Secret, when a pull needs it."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def pull_secret(self, namespace: str, name: str) -> PullSecret:
        try:
            obj = await self._client.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        except ApiError as exc:
            # the API's message (``secrets "x" not found``, a 403...) never holds data
            raise SecretUnavailable(str(exc)) from None
        meta = obj.get("metadata") or {}
        try:
            data = {str(k): base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        except (ValueError, TypeError):
            raise SecretUnavailable(f"secret {namespace}/{name}: data is not base64") from None
        return PullSecret(namespace, name, str(meta.get("uid", "")), str(obj.get("type", "")), data)


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
        expiry = _parse_time(str(status.get("expirationTimestamp", ""))) or (
            now + expiration_seconds
        )
        refresh_at = now + 0.8 * max(expiry - now, 0.0)
        self._cache[key] = (token, expiry, refresh_at)
        return token, expiry


def _parse_time(text: str) -> float | None:
    try:
        return (
            datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
            .replace(tzinfo=datetime.UTC)
            .timestamp()
        )
    except ValueError:
        return None


class ServiceStore:
    """All Services, listed and watched, for the containers' service variables."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client
        self.services: list[dict[str, Any]] = []
        self.synced = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async def on_change(items: list[dict[str, Any]]) -> None:
            self.services = items
            self.synced = True

        task_status.started()
        await reflect(self._client, ListWatch("/api/v1/services"), UidStore(on_change))
