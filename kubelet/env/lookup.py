"""``EnvLookup`` over the API: ConfigMaps and Secrets for env, envFrom and volumes."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubelet.api import ApiError, NotFound

from .variables import CREATE_CONTAINER_CONFIG_ERROR, EnvError

if TYPE_CHECKING:
    from kubelet.api import ApiClient


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
