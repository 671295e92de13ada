"""kube-controller-manager's csrapproving and csrsigning, for tests against FakeApiServer.

``CsrController`` watches the store, decides each new request with ``policy``
("Approved", "Denied", "Failed" or None to leave it pending), and signs approved requests
of the kubelet signers with a ``TestCA``: the CSR's subject and SANs, valid from 5
minutes before the fake's now for ``spec.expirationSeconds`` (at least 600, as upstream),
else ``lifetime``.
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


__all__ = ["CsrController", "approve_all"]

KUBELET_SIGNERS = {
    "kubernetes.io/kube-apiserver-client-kubelet": False,
    "kubernetes.io/kubelet-serving": True,
}
BACKDATE = datetime.timedelta(minutes=5)

Policy = Callable[[Mapping[str, Any]], str | None]


def approve_all(_: Mapping[str, Any]) -> str | None:
    return "Approved"


class CsrController:
    """Approves (by ``policy``) and signs CSRs in ``api``'s store until cancelled."""

    def __init__(
        self,
        api: FakeApi,
        ca: TestCA,
        *,
        policy: Policy = approve_all,
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
                self.decide(name, verdict)
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
        seconds = spec.get("expirationSeconds")
        lifetime = float(seconds) if isinstance(seconds, int) else self.lifetime
        start = datetime.datetime.fromtimestamp(self.api.now(), datetime.UTC) - BACKDATE
        pem = base64.b64decode(str(spec.get("request", "")))
        issued = self.ca.sign_csr(
            pem, start, start + datetime.timedelta(seconds=lifetime),
            server=KUBELET_SIGNERS[signer],
        )  # fmt: skip
        rt = by_kind("CertificateSigningRequest")
        status = dict(obj.get("status") or {})
        status["certificate"] = base64.b64encode(issued).decode("ascii")
        self.api.registry.update(
            rt, "", name, {**clone(obj), "status": status}, subresource="status"
        )
        self.issued.append(name)
