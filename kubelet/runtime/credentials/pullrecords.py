"""Who may use an image the kubelet pulled with credentials (KubeletEnsureSecretPulledImages).

Upstream (pkg/kubelet/images/pullmanager, beta and on by default since 1.35) remembers,
per image the kubelet pulled, which credentials pulled it. A pod asking for an image
that is already present (IfNotPresent, Never) may use it without a pull only when the
verification policy does not ask for credentials, or when the record says anyone on the
node may (it was pulled anonymously), or when one of the pod's own pull secrets for
that registry is the Secret that pulled it or holds the same credentials. Otherwise
IfNotPresent pulls again with the pod's credentials (the registry decides) and Never
fails as if the image were absent.

Policies (``imagePullCredentialsVerificationPolicy``): ``NeverVerify``;
``NeverVerifyPreloadedImages`` (the default: images the kubelet never pulled need no
credentials); ``NeverVerifyAllowlistedImages`` (only images in
``preloadedImagesVerificationAllowlist`` need none); ``AlwaysVerify``.

Records are upstream's files, so a node handed between this kubelet and upstream's keeps
them: ``<root-dir>/image_manager/pulling/sha256-<sha256 of image>`` (an
``ImagePullIntent`` written before a pull, removed after it) and
``<root-dir>/image_manager/pulled/sha256-<sha256 of image ref>`` (an
``ImagePulledRecord``), JSON of ``kubelet.config.k8s.io/v1alpha1``. An intent left by a
kubelet that died mid-pull turns, at the next start, into a record without credentials
when the image is there: such an image is verified at its next use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from kubelet.config import KubeletConfiguration
from kubelet.cri import api
from kubelet.goformat import rfc3339

from .keyring import repository_of
from .secrets import PullCredential

__all__ = [
    "ALWAYS_VERIFY",
    "DEFAULT_POLICY",
    "NEVER_VERIFY",
    "NEVER_VERIFY_ALLOWLISTED",
    "NEVER_VERIFY_PRELOADED",
    "POLICIES",
    "CredentialRecord",
    "PullRecords",
    "PulledRecord",
    "SecretRecord",
    "credentials_for",
    "match_secrets",
    "merge_credentials",
    "pull_records",
    "verification_policy",
]

log = logging.getLogger(__name__)

NEVER_VERIFY = "NeverVerify"
NEVER_VERIFY_PRELOADED = "NeverVerifyPreloadedImages"
NEVER_VERIFY_ALLOWLISTED = "NeverVerifyAllowlistedImages"
ALWAYS_VERIFY = "AlwaysVerify"
POLICIES = (NEVER_VERIFY, NEVER_VERIFY_PRELOADED, NEVER_VERIFY_ALLOWLISTED, ALWAYS_VERIFY)
DEFAULT_POLICY = NEVER_VERIFY_PRELOADED

API_VERSION = "kubelet.config.k8s.io/v1alpha1"
WRITE_WHILE_MATCHING_LIMIT = 100
"""Upstream stops adding secrets to a record found while matching past this many."""

Policy = Callable[[str, bool], bool]
"""(image, pulled by the kubelet) → must the pod's credentials be verified?"""


# -- policies ---------------------------------------------------------------------------


def verification_policy(name: str, allowlist: Sequence[str] = ()) -> Policy:
    """The policy called ``name``; ValueError with upstream's message if there is none.
    An allowlist pattern that does not parse is left out (it exempts nothing)."""
    if name == NEVER_VERIFY:
        return lambda image, pulled: False
    if name in ("", NEVER_VERIFY_PRELOADED):
        return lambda image, pulled: pulled
    if name == ALWAYS_VERIFY:
        return lambda image, pulled: True
    if name == NEVER_VERIFY_ALLOWLISTED:
        exact: set[str] = set()
        prefixes: list[str] = []
        for pattern in allowlist:
            try:
                text, wildcard = allowlist_pattern(pattern)
            except ValueError as exc:  # the config check refuses these; never widen
                log.error("preloadedImagesVerificationAllowlist: ignoring %r: %s", pattern, exc)
                continue
            if wildcard:
                prefixes.append(text)
            else:
                exact.add(text)

        def allowlisted(image: str, pulled: bool) -> bool:
            try:
                name = repository_of(image)
            except ValueError:
                return True
            return not (name in exact or any(name.startswith(p) for p in prefixes))

        return allowlisted
    raise ValueError(f"unknown image pull credential verification policy: {name}")


def allowlist_pattern(pattern: str) -> tuple[str, bool]:
    """(normalised pattern, is a ``/*`` wildcard); ValueError with upstream's message."""
    if pattern != pattern.strip():
        raise ValueError(f"leading/trailing spaces are not allowed: {pattern}")
    wildcard = pattern.endswith("/*")
    trimmed = pattern[:-1] if wildcard else pattern
    if not trimmed:
        raise ValueError(f"the supplied pattern is too short: {pattern}")
    if "*" in trimmed:
        raise ValueError(
            f"not a valid wildcard pattern, only patterns ending with '/*' are allowed: {pattern}"
        )
    if wildcard:
        if len(trimmed) == 1:
            raise ValueError("at least registry hostname is required")
        return trimmed, True
    try:
        name = repository_of(trimmed)
    except ValueError as exc:
        raise ValueError(f"failed to parse as an image name: {exc}") from None
    if name != trimmed:
        raise ValueError(f"neither tag nor digest is accepted in an image reference: {pattern}")
    return trimmed, False


# -- records ----------------------------------------------------------------------------


@attrs.frozen(order=True)
class SecretRecord:
    """A Secret that pulled an image, and the hash of the credentials it held then."""

    namespace: str
    name: str
    uid: str
    credential_hash: str = ""


@attrs.frozen
class CredentialRecord:
    """What pulled an image under one name: Secrets, or "anyone on the node"."""

    secrets: tuple[SecretRecord, ...] = ()
    node_pods_accessible: bool = False


@attrs.frozen
class PulledRecord:
    image_ref: str
    last_updated: str
    mapping: Mapping[str, CredentialRecord] = attrs.field(factory=dict)


def credentials_for(used: PullCredential | None) -> CredentialRecord:
    """The record of a successful pull: a Secret's credentials, or none (anonymous)."""
    if used is None or used.source is None:
        return CredentialRecord(node_pods_accessible=True)
    namespace, name, uid = used.source
    return CredentialRecord(secrets=(SecretRecord(namespace, name, uid, used.hash),))


def merge_credentials(
    record: PulledRecord, image_key: str, new: CredentialRecord, now: str
) -> tuple[PulledRecord, bool]:
    """``record`` with ``new`` added under ``image_key``; False when nothing changed.
    Anyone-on-the-node wins over Secrets; a Secret's new hash replaces its old one."""
    if not new.node_pods_accessible and not new.secrets:
        return record, False
    old = record.mapping.get(image_key)
    if old is None:
        merged = new
    elif old.node_pods_accessible:
        return record, False
    elif new.node_pods_accessible:
        merged = CredentialRecord(node_pods_accessible=True)
    else:
        by_coords = {(s.namespace, s.name, s.uid): s for s in old.secrets}
        changed = False
        for s in new.secrets:
            known = by_coords.get((s.namespace, s.name, s.uid))
            if known is None or known.credential_hash != s.credential_hash:
                by_coords[(s.namespace, s.name, s.uid)] = s
                changed = True
        if not changed:
            return record, False
        merged = CredentialRecord(secrets=tuple(sorted(by_coords.values())))
    mapping = {**record.mapping, image_key: merged}
    return attrs.evolve(record, mapping=mapping, last_updated=now), True


def match_secrets(
    provided: Iterable[SecretRecord], cached: Sequence[SecretRecord]
) -> tuple[bool, SecretRecord | None]:
    """Does one of the pod's secrets match the record (same credentials, or the same
    Secret)? The second value is a secret worth adding to the record (a new Secret with
    known credentials, or a known Secret whose credentials changed)."""
    if not cached:
        return False, None
    for pod_secret in provided:
        for known in cached:
            same_hash = bool(known.credential_hash) and (
                pod_secret.credential_hash == known.credential_hash
            )
            same_secret = (pod_secret.uid, pod_secret.namespace, pod_secret.name) == (
                known.uid,
                known.namespace,
                known.name,
            )
            if same_hash or same_secret:
                worth_writing = not (same_hash and same_secret)
                small = len(cached) < WRITE_WHILE_MATCHING_LIMIT
                return True, pod_secret if worth_writing and small else None
    return False, None


class RecordFiles:
    """The two directories of records, in upstream's file format. The names present are
    listed once and then kept in memory (this kubelet is their only writer), so asking
    about an image without records touches no file."""

    def __init__(self, root_dir: str | os.PathLike[str]) -> None:
        base = Path(root_dir) / "image_manager"
        self.pulling = base / "pulling"
        self.pulled = base / "pulled"
        self._names: dict[Path, set[str]] = {}

    def write_intent(self, image: str) -> None:
        doc = {"kind": "ImagePullIntent", "apiVersion": API_VERSION, "image": image}
        self._write(self.pulling, _filename(image), doc)

    def delete_intent(self, image: str) -> None:
        name = _filename(image)
        (self.pulling / name).unlink(missing_ok=True)
        self._listed(self.pulling).discard(name)

    def intent_exists(self, image: str) -> bool:
        doc = self._read(self.pulling, _filename(image))
        return doc is not None and doc.get("image") == image

    def intents(self) -> list[str]:
        return [str(doc.get("image", "")) for doc in _read_dir(self.pulling)]

    def pulled_record(self, image_ref: str) -> PulledRecord | None:
        doc = self._read(self.pulled, _filename(image_ref))
        if doc is None:
            return None
        try:
            record = _decode_record(doc)
        except (AttributeError, TypeError) as exc:
            raise ValueError(f"image pull record for {image_ref} is malformed: {exc}") from None
        return record if record.image_ref == image_ref else None

    def write_pulled_record(self, record: PulledRecord) -> None:
        self._write(self.pulled, _filename(record.image_ref), _encode_record(record))

    def _listed(self, directory: Path) -> set[str]:
        names = self._names.get(directory)
        if names is None:
            try:
                names = {n for n in os.listdir(directory) if not n.endswith(".tmp")}
            except FileNotFoundError:
                names = set()
            self._names[directory] = names
        return names

    def _read(self, directory: Path, name: str) -> dict[str, Any] | None:
        if name not in self._listed(directory):
            return None
        return _read(directory / name)

    def _write(self, directory: Path, name: str, doc: Mapping[str, Any]) -> None:
        _write(directory, name, doc)
        self._listed(directory).add(name)


def _filename(text: str) -> str:
    return "sha256-" + hashlib.sha256(text.encode()).hexdigest()


def _write(directory: Path, name: str, doc: Mapping[str, Any]) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / name
    tmp = directory / (name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _read(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when there is no file; ValueError if broken."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a JSON object")
    return doc


def _read_dir(directory: Path) -> list[dict[str, Any]]:
    docs = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    for name in names:
        if not name.startswith("sha256-") or name.endswith(".tmp"):
            continue
        try:
            doc = _read(directory / name)
        except (OSError, ValueError) as exc:
            log.error("image pull record %s cannot be read: %s", directory / name, exc)
            continue
        if doc is not None:
            docs.append(doc)
    return docs


def _decode_record(doc: Mapping[str, Any]) -> PulledRecord:
    mapping = {}
    for image, creds in (doc.get("credentialMapping") or {}).items():
        creds = creds or {}
        secrets = creds.get("kubernetesSecrets") or creds.get("kubernetesSecretCoordinates") or []
        mapping[str(image)] = CredentialRecord(
            secrets=tuple(
                SecretRecord(
                    str(s.get("namespace", "")),
                    str(s.get("name", "")),
                    str(s.get("uid", "")),
                    str(s.get("credentialHash", "")),
                )
                for s in secrets
            ),
            node_pods_accessible=bool(creds.get("nodePodsAccessible")),
        )
    return PulledRecord(str(doc.get("imageRef", "")), str(doc.get("lastUpdatedTime", "")), mapping)


def _encode_record(record: PulledRecord) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for image, creds in record.mapping.items():
        entry: dict[str, Any] = {}
        if creds.secrets:
            entry["kubernetesSecrets"] = [
                {
                    "uid": s.uid,
                    "namespace": s.namespace,
                    "name": s.name,
                    "credentialHash": s.credential_hash,
                }
                for s in creds.secrets
            ]
        if creds.node_pods_accessible:
            entry["nodePodsAccessible"] = True
        mapping[image] = entry
    doc: dict[str, Any] = {
        "kind": "ImagePulledRecord",
        "apiVersion": API_VERSION,
        "lastUpdatedTime": record.last_updated,
        "imageRef": record.image_ref,
    }
    if mapping:
        doc["credentialMapping"] = mapping
    return doc


# -- the manager ------------------------------------------------------------------------


class PullRecords:
    """Records pulls and answers "must this pod pull an image that is already here?"."""

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        policy: Policy,
        wall_clock: Callable[[], float],
    ) -> None:
        self.files = RecordFiles(root_dir)
        self._policy = policy
        self._wall = wall_clock
        self._in_flight: dict[str, int] = {}
        self.initialized = False

    def initialize(self, images: Iterable[api.Image]) -> None:
        """Intents left by an earlier run whose image is now present become records
        without credentials (verified at next use); their intents go."""
        self.initialized = True
        intents = set(self.files.intents())
        if not intents:
            return
        for image in images:
            for name in (*image.repo_digests, *image.repo_tags):
                if name not in intents:
                    continue
                try:
                    self._write_if_changed(name, image.id, None)
                    self.files.delete_intent(name)
                except OSError as exc:
                    log.error("image pull record for %s cannot be written: %s", image.id, exc)

    def record_intent(self, image: str) -> None:
        """Before a pull; OSError if the intent cannot be written (the pull must not go on)."""
        self.files.write_intent(image)
        self._in_flight[image] = self._in_flight.get(image, 0) + 1

    def record_pulled(self, image: str, image_ref: str, used: PullCredential | None) -> None:
        try:
            self._write_if_changed(image, image_ref, credentials_for(used))
        except (OSError, ValueError) as exc:
            log.error("image pull record for %s cannot be written: %s", image_ref, exc)
            return  # the intent stays: the image counts as pulled by the kubelet
        self._done(image)

    def record_failed(self, image: str) -> None:
        self._done(image)

    async def must_pull(
        self,
        image: str,
        image_ref: str,
        pod_credentials: Callable[[], Awaitable[Sequence[PullCredential]]],
    ) -> bool:
        """May the pod not use the present ``image_ref`` as it is? ``pod_credentials``
        (the pod's credentials for this image) is awaited only when the answer needs it."""
        if not image_ref:
            return True
        try:
            record = self.files.pulled_record(image_ref)
            pulled = (
                record is not None
                or self._in_flight.get(image, 0) > 0
                or self.files.intent_exists(image)
            )
        except (OSError, ValueError) as exc:
            log.error("image pull records cannot be read, verifying credentials: %s", exc)
            return True
        if not self._policy(image, pulled):
            return False
        if record is None:
            return True
        try:
            key = repository_of(image)
        except ValueError:
            return True
        cached = record.mapping.get(key)
        if cached is None:
            return True
        if cached.node_pods_accessible:
            return False
        provided = [
            SecretRecord(c.source[0], c.source[1], c.source[2], c.hash)
            for c in await pod_credentials()
            if c.source is not None
        ]
        matched, worth_writing = match_secrets(provided, cached.secrets)
        if worth_writing is not None:
            try:
                self._write_if_changed(image, image_ref, CredentialRecord(secrets=(worth_writing,)))
            except (OSError, ValueError) as exc:
                log.error("image pull record for %s cannot be written: %s", image_ref, exc)
        return not matched

    def _write_if_changed(self, image: str, image_ref: str, creds: CredentialRecord | None) -> None:
        now = rfc3339(self._wall())
        key = repository_of(image)
        try:
            record = self.files.pulled_record(image_ref)
        except ValueError:
            record = None
        if record is None:
            mapping = {key: creds} if creds is not None else {}
            self.files.write_pulled_record(PulledRecord(image_ref, now, mapping))
            return
        if creds is None:
            return
        merged, changed = merge_credentials(record, key, creds, now)
        if changed:
            self.files.write_pulled_record(merged)

    def _done(self, image: str) -> None:
        left = self._in_flight.get(image, 0) - 1
        if left > 0:
            self._in_flight[image] = left
            return
        self._in_flight.pop(image, None)
        try:
            self.files.delete_intent(image)
        except OSError as exc:
            log.error("image pull intent for %s cannot be removed: %s", image, exc)


def pull_records(
    config: KubeletConfiguration,
    root_dir: str,
    wall_clock: Callable[[], float],
    *,
    enabled: bool = True,
) -> PullRecords | None:
    """The records the configuration asks for: None when ``enabled`` (the gate
    KubeletEnsureSecretPulledImages) is off -- every present image is then used as it is,
    as before 1.35."""
    if not enabled:
        return None
    policy = verification_policy(
        config.image_pull_credentials_verification_policy,
        config.preloaded_images_verification_allowlist,
    )
    return PullRecords(root_dir, policy, wall_clock)
