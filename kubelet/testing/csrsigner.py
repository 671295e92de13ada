"""kube-controller-manager's csrapproving and csrsigning, for tests against FakeApiServer.

``CsrController`` watches the store, decides each new request with ``policy``
("Approved", "Denied", "Failed" or None to leave it pending) and signs approved requests
of the kubelet signers with a ``TestCA``, under upstream's rules (``csrrules``): a
request the signer's rule refuses is marked Failed (``SignerValidationFailure``) instead;
the certificate carries the CSR's subject and SANs and lives ``lifetime`` (the
``--cluster-signing-duration``) or ``spec.expirationSeconds`` if shorter.

The default policy is kube-controller-manager's csrapproving with kubeadm's RBAC
(``csrrules.csrapproving``): kubelet client requests of bootstrap tokens and of the node
itself are approved, anything else (serving requests included) stays pending, as in a
real cluster. ``csrapproving_and_serving`` also approves every kubelet-serving request,
as an administrator (``kubectl certificate approve``) or a serving-CSR approver would;
``approve_all`` approves everything (the signer still refuses what upstream refuses).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio

from kubelet.goformat import rfc3339

from .apiresources import by_kind
from .apistore import Obj, clone, meta
from .csrrules import KUBEADM_GRANTS, SERVING_SIGNER, approval_message, csrapproving, signer_error
from .csrrules import validity as signed_validity

if TYPE_CHECKING:
    from .apiregistry import Registry
    from .apistore import ApiStore
    from .certs import TestCA


class FakeApi(Protocol):
    """What the controller uses of FakeApiServer (which runs one in process mode)."""

    store: ApiStore
    registry: Registry

    def get(self, kind: str, namespace: str | None, name: str | None = None) -> Obj | None: ...

    def now(self) -> float: ...


__all__ = ["CsrController", "approve_all", "csrapproving", "csrapproving_and_serving"]

KUBELET_SIGNERS = {
    "kubernetes.io/kube-apiserver-client-kubelet": False,
    "kubernetes.io/kubelet-serving": True,
}
Policy = Callable[[Mapping[str, Any]], str | None]


def approve_all(_: Mapping[str, Any]) -> str | None:
    return "Approved"


def csrapproving_and_serving(csr: Mapping[str, Any]) -> str | None:
    """csrapproving, and every kubelet-serving request approved (by an administrator)."""
    if (csr.get("spec") or {}).get("signerName") == SERVING_SIGNER:
        return "Approved"
    return csrapproving(csr)


class CsrController:
    """Approves (by ``policy``) and signs CSRs in ``api``'s store until cancelled."""

    def __init__(
        self,
        api: FakeApi,
        ca: TestCA,
        *,
        policy: Policy = csrapproving,
        lifetime: float = 3600.0,
    ) -> None:
        self.api = api
        self.ca = ca
        self.policy = policy
        self.lifetime = lifetime
        self.issued: list[str] = []

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        rt = by_kind("CertificateSigningRequest")
        first, watcher = self.api.store.watch(rt, None, lambda _: True, None)
        task_status.started()
        try:
            for _, obj in first:
                self._handle(obj)
            async for kind, obj in watcher.receive:
                if kind != "DELETED":
                    self._handle(obj)
        finally:
            self.api.store.unwatch(watcher)

    def _handle(self, obj: Obj) -> None:
        name = str(meta(obj).get("name", ""))
        current = self.api.get("CertificateSigningRequest", name)
        if current is None:
            return
        status = current.get("status") or {}
        types = {c.get("type") for c in status.get("conditions") or []}
        if not types:
            verdict = self.policy(current)
            if verdict is not None:
                message = approval_message(current, KUBEADM_GRANTS) or ""
                self.decide(name, verdict, message=message if verdict == "Approved" else "")
            return
        if (
            "Approved" in types
            and not status.get("certificate")
            and not types & {"Denied", "Failed"}
        ):
            self._sign(name, current)

    def decide(self, name: str, verdict: str, reason: str = "", message: str = "") -> Obj:
        """Add an Approved / Denied / Failed condition, as an approver would."""
        reasons = {"Approved": "AutoApproved", "Denied": "AutoDenied", "Failed": "SignerFailed"}
        condition = {
            "type": verdict,
            "status": "True",
            "reason": reason or reasons.get(verdict, verdict),
            "message": message or f"{verdict.lower()} by the test controller",
            "lastUpdateTime": rfc3339(self.api.now()),
        }
        rt = by_kind("CertificateSigningRequest")
        obj = self.api.store.require(rt, "", name)
        status = dict(obj.get("status") or {})
        status["conditions"] = [*(status.get("conditions") or []), condition]
        body = {**clone(obj), "status": status}
        subresource = "status" if verdict == "Failed" else "approval"
        return self.api.registry.update(rt, "", name, body, subresource=subresource)[1]

    def _sign(self, name: str, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        signer = str(spec.get("signerName", ""))
        if signer not in KUBELET_SIGNERS:
            return
        refused = signer_error(spec)
        if refused is not None:
            self.decide(name, "Failed", "SignerValidationFailure", refused)
            return
        seconds = spec.get("expirationSeconds")
        now = datetime.datetime.fromtimestamp(self.api.now(), datetime.UTC)
        not_before, not_after = signed_validity(
            now,
            datetime.timedelta(seconds=self.lifetime),
            seconds if isinstance(seconds, int) else None,
        )
        pem = base64.b64decode(str(spec.get("request", "")))
        issued = self.ca.sign_csr(pem, not_before, not_after, server=KUBELET_SIGNERS[signer])
        rt = by_kind("CertificateSigningRequest")
        status = dict(obj.get("status") or {})
        status["certificate"] = base64.b64encode(issued).decode("ascii")
        self.api.registry.update(
            rt, "", name, {**clone(obj), "status": status}, subresource="status"
        )
        self.issued.append(name)
