"""``SecretSource`` over the API: a pod's pull secrets, read when a pull needs them."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from kubelet.api import ApiError

from .secrets import PullSecret, SecretUnavailable

if TYPE_CHECKING:
    from kubelet.api import ApiClient


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
