"""From a pod's pull secrets to the credentials a pull may use.

Upstream (pkg/credentialprovider/secrets, pkg/kubelet/kubelet_pods.go) reads the Secrets
named in ``spec.imagePullSecrets`` (entries with an empty name are skipped), keeps those
of type ``kubernetes.io/dockerconfigjson`` with a non-empty ``.dockerconfigjson`` and
``kubernetes.io/dockercfg`` with a non-empty ``.dockercfg``, and indexes every entry in
one keyring. Other types and empty data are ignored without a word.

Where upstream fails the whole pull on a secret it cannot parse, this kubelet skips that
one secret with a log line naming it and the fault (never its content) and goes on with
the others; a registry that needs the skipped credentials then refuses the pull, which
the pod reports as ErrImagePull.

The service account's pull secrets are not read here: as upstream, the kubelet relies on
the API server's ServiceAccount admission, which copies them into ``imagePullSecrets``
when the pod is created.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import attrs

from kubelet.cri import api
from kubelet.goformat import go_json

from .dockercfg import DockerConfigEntry, DockerConfigError, parse_dockercfg, parse_dockerconfigjson
from .keyring import Keyring

__all__ = [
    "DOCKERCFG",
    "DOCKERCFG_KEY",
    "DOCKERCONFIGJSON",
    "DOCKERCONFIGJSON_KEY",
    "PullCredential",
    "PullSecret",
    "SecretSource",
    "SecretUnavailable",
    "keyring_from_secrets",
    "pull_secret_names",
    "redact",
]

log = logging.getLogger(__name__)

DOCKERCFG = "kubernetes.io/dockercfg"
DOCKERCFG_KEY = ".dockercfg"
DOCKERCONFIGJSON = "kubernetes.io/dockerconfigjson"
DOCKERCONFIGJSON_KEY = ".dockerconfigjson"


@attrs.frozen
class PullSecret:
    """A Secret as the keyring needs it; ``data`` is decoded, and kept out of ``repr``."""

    namespace: str
    name: str
    uid: str = ""
    type: str = ""
    data: Mapping[str, bytes] = attrs.field(factory=dict, repr=False)


class SecretUnavailable(Exception):
    """The Secret could not be read (absent, forbidden, API down); the message is the
    API's answer, which never carries the Secret's data."""


class SecretSource(Protocol):
    async def pull_secret(self, namespace: str, name: str) -> PullSecret:
        """The Secret, or ``SecretUnavailable``."""
        ...


@attrs.frozen
class PullCredential:
    """One username/password a pull may try, with where it came from: ``source`` is
    ``(namespace, name, uid)`` of its Secret. ``hash`` is upstream's credential hash
    (sha256 of the JSON AuthConfig), what pull records compare."""

    username: str = attrs.field(repr=False)
    password: str = attrs.field(repr=False)
    source: tuple[str, str, str] | None = None
    hash: str = attrs.field(default="", repr=False)

    def auth_config(self) -> api.AuthConfig:
        """What PullImage gets: username and password, the rest empty, as upstream fills
        it for credentials from a Secret."""
        return api.AuthConfig(username=self.username, password=self.password)

    def secrets(self) -> tuple[str, ...]:
        """The strings that must never reach a log, an event or a status."""
        return _sensitive(self.username, self.password)


def pull_secret_names(refs: Sequence[Mapping[str, str]]) -> list[str]:
    """The names in ``spec.imagePullSecrets``, empty ones dropped (API validation once
    let them through; upstream ignores them to avoid needless warnings)."""
    return [str(ref.get("name") or "") for ref in refs if ref.get("name")]


class MalformedPullSecret(DockerConfigError):
    """A pod's pull secret that is not a docker config: as upstream, the pull fails
    (rather than going on without it). The message names the secret, never its content."""


def keyring_from_secrets(secrets: Iterable[PullSecret]) -> Keyring[PullCredential]:
    """One keyring over the secrets, in the order given; ``MalformedPullSecret`` if one
    of them cannot be read."""
    keyring: Keyring[PullCredential] = Keyring()
    for secret in secrets:
        origin = f"secret {secret.namespace}/{secret.name}"
        try:
            entries = _entries_of(secret)
        except DockerConfigError as exc:
            raise MalformedPullSecret(
                f"pull secret {secret.namespace}/{secret.name} ({secret.type}) cannot be read: "
                f"{exc}"
            ) from None
        source = (secret.namespace, secret.name, secret.uid)
        keyring.add(((key, _credential(entry, source)) for key, entry in entries), origin=origin)
    return keyring


def _entries_of(secret: PullSecret) -> list[tuple[str, DockerConfigEntry]]:
    if secret.type == DOCKERCONFIGJSON and secret.data.get(DOCKERCONFIGJSON_KEY):
        return parse_dockerconfigjson(secret.data[DOCKERCONFIGJSON_KEY])
    if secret.type == DOCKERCFG and secret.data.get(DOCKERCFG_KEY):
        return parse_dockercfg(secret.data[DOCKERCFG_KEY])
    return []


def _credential(entry: DockerConfigEntry, source: tuple[str, str, str]) -> PullCredential:
    return PullCredential(entry.username, entry.password, source, credential_hash(entry))


def credential_hash(entry: DockerConfigEntry) -> str:
    """sha256 hex of the AuthConfig as Go's json.Marshal writes it (empty fields left
    out), the same value upstream's pull records hold."""
    fields = {"username": entry.username, "password": entry.password, "email": entry.email}
    text = go_json({k: v for k, v in fields.items() if v})
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()


REDACTED = "<redacted>"


def redact(text: str, credentials: Iterable[PullCredential]) -> str:
    """``text`` with every password (and its ``user:password`` base64 form) replaced:
    for runtime error messages, which the kubelet repeats in events and statuses."""
    sensitive = sorted({s for c in credentials for s in c.secrets()}, key=len, reverse=True)
    for value in sensitive:
        text = text.replace(value, REDACTED)
    return text


def _sensitive(username: str, password: str) -> tuple[str, ...]:
    basic = base64.b64encode(f"{username}:{password}".encode()).decode()
    values = {password, basic, basic.rstrip("=")} if password else set()
    return tuple(sorted((v for v in values if v), key=len, reverse=True))
