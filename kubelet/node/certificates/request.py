"""Asking the certificates API for a certificate and waiting until it is issued.

As client-go's util/certificate/csr: the CSR is created (``certificates.k8s.io/v1``); a
named one that already exists is reused when it is compatible (same subject and signer,
signed by our key, no expired certificate in it), which is how a restarted kubelet picks
up its pending bootstrap request. Then the request is listed and watched by name until
it is Approved and carries a certificate. A Denied or Failed condition, a deleted request
or one whose UID changed end the wait with an error that names it; the caller retries.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kubelet.api import AlreadyExists, ApiClient, ApiError, Gone, Resource, WatchEvent

from .csr import PrivateKey

__all__ = [
    "CSRS",
    "CertificateRequestError",
    "RequestDenied",
    "RequestFailed",
    "RequestGone",
    "csr_certificate",
    "request_certificate",
    "wait_for_certificate",
]

log = logging.getLogger(__name__)

CSRS = Resource("certificates.k8s.io/v1", "certificatesigningrequests", namespaced=False)


class CertificateRequestError(Exception):
    """The request cannot give a certificate; the message says why (for the log)."""


class RequestDenied(CertificateRequestError):
    pass


class RequestFailed(CertificateRequestError):
    pass


class RequestGone(CertificateRequestError):
    """Deleted, or replaced by another object of the same name."""


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def csr_body(
    csr_pem: bytes,
    name: str,
    signer: str,
    usages: Sequence[str],
    expiration_seconds: int | None = None,
) -> dict[str, Any]:
    """The CertificateSigningRequest object (``generateName: csr-`` when unnamed)."""
    spec: dict[str, Any] = {
        "request": base64.b64encode(csr_pem).decode("ascii"),
        "signerName": signer,
        "usages": list(usages),
    }
    if expiration_seconds is not None:
        spec["expirationSeconds"] = expiration_seconds
    return {
        "apiVersion": CSRS.api_version,
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name} if name else {"generateName": "csr-"},
        "spec": spec,
    }


async def request_certificate(
    client: ApiClient,
    csr_pem: bytes,
    name: str,
    signer: str,
    usages: Sequence[str],
    key: PrivateKey,
    *,
    now: float,
    expiration_seconds: int | None = None,
) -> tuple[str, str]:
    """Create the CSR (or reuse a compatible one of that ``name``); its (name, uid)."""
    body = csr_body(csr_pem, name, signer, usages, expiration_seconds)
    try:
        created = await client.create(CSRS.path(), body)
    except AlreadyExists:
        if not name:
            raise
        log.info("csr for this node already exists, reusing")
        created = await client.get(CSRS.path(name=name))
        problem = incompatibility(created, csr_pem, signer, key, now)
        if problem:
            raise CertificateRequestError(f"retrieved csr is not compatible: {problem}") from None
        log.info("csr for this node is still valid")
    m = _meta(created)
    return str(m.get("name", name)), str(m.get("uid", ""))


def incompatibility(
    existing: dict[str, Any], csr_pem: bytes, signer: str, key: PrivateKey, now: float
) -> str:
    """Why an existing CSR cannot stand for ours ("" when it can)."""
    spec = existing.get("spec") or {}
    try:
        theirs = x509.load_pem_x509_csr(base64.b64decode(str(spec.get("request", ""))))
    except ValueError:
        return "unable to parse new csr: PEM block type must be CERTIFICATE REQUEST"
    ours = x509.load_pem_x509_csr(csr_pem)
    if theirs.subject != ours.subject:
        return f"csr subjects differ: new: {theirs.subject.rfc4514_string()}, orig: " + (
            ours.subject.rfc4514_string()
        )
    if spec.get("signerName") and spec["signerName"] != signer:
        return f"csr signerNames differ: new {spec['signerName']!r}, orig: {signer!r}"
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if theirs.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        return "error validating signature new CSR against old key"
    certificate = (existing.get("status") or {}).get("certificate")
    if certificate:
        try:
            certs = x509.load_pem_x509_certificates(base64.b64decode(certificate))
        except ValueError:
            return "error parsing signed certificate for CSR"
        for cert in certs:
            if now > cert.not_valid_after_utc.timestamp():
                return (
                    "one of the certificates for the CSR has expired: "
                    f"{cert.not_valid_after_utc.isoformat()}"
                )
    return ""


def csr_certificate(obj: dict[str, Any], name: str, uid: str) -> bytes | None:
    """The issued PEM certificate if ``obj`` (the CSR as read) has one, None while it is
    pending; RequestDenied / RequestFailed / RequestGone when it never will."""
    if uid and _meta(obj).get("uid") != uid:
        raise RequestGone(f"csr {name!r} changed UIDs")
    status = obj.get("status") or {}
    approved = False
    for condition in status.get("conditions") or []:
        kind = condition.get("type")
        reason, message = condition.get("reason", ""), condition.get("message", "")
        if kind == "Denied":
            raise RequestDenied(
                f"certificate signing request is denied, reason: {reason}, message: {message}"
            )
        if kind == "Failed":
            raise RequestFailed(
                f"certificate signing request failed, reason: {reason}, message: {message}"
            )
        if kind == "Approved":
            approved = True
    if approved and status.get("certificate"):
        log.debug("certificate signing request %s is issued", name)
        return base64.b64decode(status["certificate"])
    if approved:
        log.debug("certificate signing request %s is approved, waiting to be issued", name)
    return None


async def wait_for_certificate(client: ApiClient, name: str, uid: str) -> bytes:
    """The certificate once issued (the caller bounds the wait with a cancel scope).

    List-then-watch on ``metadata.name``, as client-go's UntilWithSync; a watch that
    ends or expires starts again from a new list.
    """
    selector = f"metadata.name={name}"
    issued: list[bytes] = []

    async def on_event(event: WatchEvent) -> bool:
        if event.type == "DELETED":
            raise RequestGone(f"csr {name!r} was deleted")
        if event.type not in ("ADDED", "MODIFIED"):
            return False
        found = csr_certificate(event.object, name, uid)
        if found is not None:
            issued.append(found)
            return True
        return False

    while True:
        page = await client.list(CSRS.path(), field_selector=selector)
        if not page.items:
            raise RequestGone(f"csr {name!r} was deleted")
        found = csr_certificate(page.items[0], name, uid)
        if found is not None:
            return found
        try:
            await client.watch(
                CSRS.path(),
                on_event,
                resource_version=page.resource_version,
                field_selector=selector,
                timeout_seconds=300,
            )
        except Gone:
            continue
        except ApiError as exc:
            if exc.code != 0:
                raise
            log.info("watch of csr %s ended (%s); listing again", name, exc)
            await trio.sleep(1.0)
            continue
        if issued:
            return issued[0]
