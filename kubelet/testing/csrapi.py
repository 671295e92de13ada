"""CertificateSigningRequests in FakeApiServer: what the API server checks on create.

``prepare_csr``: ``spec.request`` must be a PEM ``CERTIFICATE REQUEST``,
``spec.signerName`` and ``spec.usages`` are required, and the requester's identity is
recorded in ``spec.username`` and ``spec.groups``; a client cannot set ``status``. The
approval subresource changes only ``status.conditions`` (``apiregistry``). The
controller manager's side (approval and signing) is ``csrsigner``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from cryptography import x509

from .apierrors import StatusError
from .apistore import clone, meta

__all__ = ["MIN_EXPIRATION", "prepare_csr"]

MIN_EXPIRATION = 600
"""The shortest ``spec.expirationSeconds`` the API server accepts."""


def prepare_csr(body: Any, user: str, groups: Sequence[str] = ()) -> Any:
    """Validate a CSR being created and record who asked (the approver's review reads
    ``spec.username`` and ``spec.groups``); StatusError 422 if it is bad."""
    if not isinstance(body, dict):
        return body
    obj = clone(body)
    spec = obj.setdefault("spec", {})
    name = str(meta(obj).get("name") or meta(obj).get("generateName") or "")
    problems = []
    try:
        pem = base64.b64decode(str(spec.get("request") or ""), validate=True)
        x509.load_pem_x509_csr(pem)
    except ValueError:
        problems.append(
            (
                "spec.request",
                "Invalid value: []byte{...}: PEM block type must be CERTIFICATE REQUEST",
            )
        )
    if not spec.get("signerName"):
        problems.append(("spec.signerName", "Required value"))
    if not spec.get("usages"):
        problems.append(("spec.usages", "Required value"))
    seconds = spec.get("expirationSeconds")
    if seconds is not None and (not isinstance(seconds, int) or seconds < MIN_EXPIRATION):
        problems.append(
            (
                "spec.expirationSeconds",
                f"Invalid value: {seconds}: may not specify a duration less than 600 "
                "seconds (10 minutes)",
            )
        )
    if problems:
        field, message = problems[0]
        raise StatusError.invalid(
            "CertificateSigningRequest", name, field, message, "certificates.k8s.io"
        )
    spec["username"] = user
    spec["groups"] = list(groups)
    obj["status"] = {}
    return obj
