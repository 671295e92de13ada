"""The files of API-backed volumes: configMap, secret, downwardAPI and projected.

``build_payload`` turns a volume's source (raw JSON, camelCase keys as in the API) into
relative path → (content, mode), ready for ``atomic.write_atomic``. Behaviour and error
messages follow upstream's volume plugins (pkg/volume/configmap, secret, downwardapi,
projected).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from kubelet.api import ObjectFieldSelector, Pod, Quantity, ResourceFieldSelector, Volume, wire_name
from kubelet.env import EnvError, EnvLookup, pod_field_value, resource_field_value

from .hostpath import VolumeError

CONFIG_MAP = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
DOWNWARD_API = "kubernetes.io~downward-api"
PROJECTED = "kubernetes.io~projected"

DEFAULT_MODE = 0o644
TOKEN_PRIVATE_MODE = 0o600
DEFAULT_TOKEN_EXPIRATION = 3600

Payload = dict[str, tuple[bytes, int]]

_DOWNWARD_FIELDS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.labels",
    "metadata.annotations",
)


class TokenSource(Protocol):
    """Service-account tokens (the TokenRequest API); ``(token, expiry epoch seconds)``."""

    async def token(
        self,
        namespace: str,
        service_account: str,
        audience: str,
        expiration_seconds: int,
        pod_name: str = "",
        pod_uid: str = "",
    ) -> tuple[str, float]: ...


def plugin_name(volume: Volume) -> str | None:
    """The plugin directory (``kubernetes.io~...``) of an API-backed volume, else None."""
    if volume.config_map is not None:
        return CONFIG_MAP
    if volume.secret is not None:
        return SECRET
    if volume.downward_api is not None:
        return DOWNWARD_API
    if volume.projected is not None:
        return PROJECTED
    return None


def source_kind(volume: Volume) -> str | None:
    """The wire name of the volume's source (``emptyDir``, ``iscsi``, ...); None when
    the volume names none this model knows."""
    for field in attrs.fields(type(volume)):
        if field.name != "name" and getattr(volume, field.name) is not None:
            return wire_name(field)
    return None


def token_paths(volume: Volume) -> list[str]:
    """The files of a projected volume that hold service-account tokens."""
    if volume.projected is None:
        return []
    return [
        str(p["serviceAccountToken"].get("path", ""))
        for p in volume.projected.get("sources") or ()
        if isinstance(p, Mapping) and p.get("serviceAccountToken") is not None
    ]


def _aggregate(errors: list[str]) -> VolumeError:
    """Go's ``utilerrors.NewAggregate`` message: one error as is, several in brackets."""
    if len(errors) == 1:
        return VolumeError(errors[0])
    return VolumeError("[" + ", ".join(errors) + "]")


def _mode(value: Any, default: int) -> int:
    return int(value) if value is not None else default


async def _config_map_data(lookup: EnvLookup, namespace: str, name: str) -> dict[str, bytes] | None:
    # binaryData is not part of EnvLookup; a lookup may offer data and binaryData as files.
    files = getattr(lookup, "config_map_files", None)
    try:
        if files is not None:
            found = await files(namespace, name)
            return None if found is None else dict(found)
        data = await lookup.config_map(namespace, name)
    except EnvError as err:
        raise VolumeError(err.message) from err
    return None if data is None else {key: value.encode() for key, value in data.items()}


async def _secret_data(lookup: EnvLookup, namespace: str, name: str) -> dict[str, bytes] | None:
    try:
        data = await lookup.secret(namespace, name)
    except EnvError as err:
        raise VolumeError(err.message) from err
    return None if data is None else dict(data)


def _key_payload(
    data: Mapping[str, bytes],
    items: Any,
    default_mode: int,
    optional: bool,
    missing_key: str,
) -> Payload:
    """Upstream ``MakePayload`` of the configmap and secret plugins."""
    payload: Payload = {}
    if not items:
        for key, content in data.items():
            payload[key] = (content, default_mode)
        return payload
    for item in items:
        key = str(item.get("key", ""))
        if key not in data:
            if optional:
                continue
            raise VolumeError(f"{missing_key}: {key}")
        path = str(item.get("path") or key)
        payload[path] = (data[key], _mode(item.get("mode"), default_mode))
    return payload


async def _config_map_payload(
    source: Mapping[str, Any], namespace: str, lookup: EnvLookup, default_mode: int
) -> Payload:
    name = str(source.get("name") or "")
    optional = bool(source.get("optional"))
    data = await _config_map_data(lookup, namespace, name)
    if data is None:
        if optional:
            return {}
        raise VolumeError(f'configmap "{name}" not found')
    return _key_payload(
        data,
        source.get("items"),
        default_mode,
        optional,
        "configmap references non-existent config key",
    )


async def _secret_payload(
    source: Mapping[str, Any],
    namespace: str,
    lookup: EnvLookup,
    default_mode: int,
    name_key: str,
) -> Payload:
    name = str(source.get(name_key) or "")
    optional = bool(source.get("optional"))
    data = await _secret_data(lookup, namespace, name)
    if data is None:
        if optional:
            return {}
        raise VolumeError(f'secret "{name}" not found')
    return _key_payload(
        data, source.get("items"), default_mode, optional, "references non-existent secret key"
    )


def _downward_value(item: Mapping[str, Any], pod: Pod, node_allocatable: Mapping[str, str]) -> str:
    field_ref = item.get("fieldRef")
    resource_ref = item.get("resourceFieldRef")
    try:
        if field_ref is not None:
            path = str(field_ref.get("fieldPath", ""))
            head = path.split("[", 1)[0]
            if head not in _DOWNWARD_FIELDS:
                raise VolumeError(f"unsupported fieldPath: {path}")
            selector = ObjectFieldSelector(
                field_path=path, api_version=str(field_ref.get("apiVersion") or "")
            )
            return pod_field_value(selector, pod)
        if resource_ref is not None:
            container_name = str(resource_ref.get("containerName") or "")
            divisor = resource_ref.get("divisor")
            selector_r = ResourceFieldSelector(
                resource=str(resource_ref.get("resource", "")),
                container_name=container_name,
                divisor=Quantity(str(divisor)) if divisor not in (None, "") else None,
            )
            containers = (*pod.spec.containers, *pod.spec.init_containers)
            container = next((c for c in containers if c.name == container_name), None)
            if container is None:
                raise VolumeError(f"container {container_name} not found")
            return resource_field_value(selector_r, pod, container, node_allocatable)
    except EnvError as err:
        raise VolumeError(err.message) from err
    raise VolumeError(f"downwardAPI item {item.get('path', '')}: no fieldRef or resourceFieldRef")


def _downward_payload(
    source: Mapping[str, Any],
    pod: Pod,
    default_mode: int,
    node_allocatable: Mapping[str, str],
) -> Payload:
    """Upstream ``CollectData``: every item is tried, the failures reported together."""
    payload: Payload = {}
    errors: list[str] = []
    for item in source.get("items") or ():
        path = str(item.get("path", ""))
        try:
            value = _downward_value(item, pod, node_allocatable)
        except VolumeError as err:
            errors.append(str(err))
            continue
        payload[path] = (value.encode(), _mode(item.get("mode"), default_mode))
    if errors:
        raise _aggregate(errors)
    return payload


async def _projected_payload(
    source: Mapping[str, Any],
    pod: Pod,
    lookup: EnvLookup,
    tokens: TokenSource | None,
    node_allocatable: Mapping[str, str],
    private_tokens: bool,
) -> Payload:
    default_mode = _mode(source.get("defaultMode"), DEFAULT_MODE)
    # upstream: with an fsUser or fsGroup the token is 0600, and the ownership change
    # (group) or the file's owner (user) is what lets the container read it
    token_mode = TOKEN_PRIVATE_MODE if private_tokens else default_mode
    namespace = pod.metadata.namespace
    payload: Payload = {}
    errors: list[str] = []
    for projection in source.get("sources") or ():
        try:
            if projection.get("configMap") is not None:
                part = await _config_map_payload(
                    projection["configMap"], namespace, lookup, default_mode
                )
            elif projection.get("secret") is not None:
                part = await _secret_payload(
                    projection["secret"], namespace, lookup, default_mode, "name"
                )
            elif projection.get("downwardAPI") is not None:
                part = _downward_payload(
                    projection["downwardAPI"], pod, default_mode, node_allocatable
                )
            elif projection.get("serviceAccountToken") is not None:
                part = await _token_payload(
                    projection["serviceAccountToken"], pod, tokens, token_mode
                )
            else:
                kinds = ", ".join(sorted(projection)) or "empty"
                raise VolumeError(f"projected volume source {kinds} is not supported")
        except VolumeError as err:
            errors.append(str(err))
            continue
        payload.update(part)
    if errors:
        raise _aggregate(errors)
    return payload


async def _token_payload(
    source: Mapping[str, Any], pod: Pod, tokens: TokenSource | None, mode: int
) -> Payload:
    if tokens is None:
        raise VolumeError("service account token projection needs an API client")
    account = pod.spec.service_account_name or pod.spec.service_account or "default"
    expiration = int(source.get("expirationSeconds") or DEFAULT_TOKEN_EXPIRATION)
    try:
        token, _expiry = await tokens.token(
            pod.metadata.namespace,
            account,
            str(source.get("audience") or ""),
            expiration,
            pod_name=pod.metadata.name,
            pod_uid=pod.metadata.uid,
        )
    except VolumeError:
        raise
    except Exception as err:  # the API client's errors: the mount is retried
        raise VolumeError(f"failed to fetch token: {err}") from err
    return {str(source.get("path", "")): (token.encode(), mode)}


async def build_payload(
    pod: Pod,
    volume: Volume,
    lookup: EnvLookup,
    *,
    node_allocatable: Mapping[str, str],
    tokens: TokenSource | None = None,
    private_tokens: bool = False,
) -> Payload | None:
    """The files of an API-backed volume; None for other volume types.

    ``private_tokens``: the pod has an fsGroup or a single runAsUser, so projected
    tokens are written 0600 (upstream's rule).

    Raises ``VolumeError`` with upstream's message when the volume cannot be built
    (a required ConfigMap/Secret or key missing, a bad downward API reference, ...).
    """
    namespace = pod.metadata.namespace
    if volume.config_map is not None:
        source = volume.config_map
        mode = _mode(source.get("defaultMode"), DEFAULT_MODE)
        return await _config_map_payload(source, namespace, lookup, mode)
    if volume.secret is not None:
        source = volume.secret
        mode = _mode(source.get("defaultMode"), DEFAULT_MODE)
        return await _secret_payload(source, namespace, lookup, mode, "secretName")
    if volume.downward_api is not None:
        source = volume.downward_api
        mode = _mode(source.get("defaultMode"), DEFAULT_MODE)
        return _downward_payload(source, pod, mode, node_allocatable)
    if volume.projected is not None:
        return await _projected_payload(
            volume.projected, pod, lookup, tokens, node_allocatable, private_tokens
        )
    return None
