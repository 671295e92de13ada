"""What a bootstrap token may do in a kubeadm cluster, enforced by FakeApiServer.

A TLS-bootstrapping kubelet talks to the API server as ``system:bootstrap:<id>`` in the
group ``system:bootstrappers``, and RBAC allows it little (kubeadm's bindings of the
default roles): ``system:node-bootstrapper`` (create, get, list and watch
certificatesigningrequests), ``kubeadm:get-nodes`` (get nodes), ``system:basic-user``
(self reviews) and the discovery and public-info paths (``/api``, ``/apis``, ``/healthz``,
``/livez``, ``/readyz``, ``/version``, ``/openapi``). Anything else is refused with
upstream's 403 message, so a kubelet that used its bootstrap credentials for more (a GET
of its Node's status, a lease...) fails in the tests as it would against a real cluster.
Only identities in ``system:bootstrappers`` are checked; the fake does no other RBAC.
"""

from __future__ import annotations

from collections.abc import Sequence

from .apierrors import StatusError
from .apiroutes import Route

__all__ = ["BOOTSTRAPPERS", "bootstrap_refusal"]

BOOTSTRAPPERS = "system:bootstrappers"

_ALLOWED = {
    ("certificates.k8s.io", "certificatesigningrequests"): {"create", "get", "list", "watch"},
    ("", "nodes"): {"get"},
    ("authorization.k8s.io", "selfsubjectaccessreviews"): {"create"},
    ("authorization.k8s.io", "selfsubjectrulesreviews"): {"create"},
    ("authentication.k8s.io", "selfsubjectreviews"): {"create"},
}
_PUBLIC_PATHS = ("/api", "/apis", "/healthz", "/livez", "/readyz", "/version", "/openapi")


def bootstrap_refusal(
    user: str, groups: Sequence[str], verb: str, route: Route, path: str
) -> StatusError | None:
    """The 403 RBAC gives a bootstrap identity for this request, None if it is allowed."""
    if BOOTSTRAPPERS not in groups:
        return None
    rt = route.rt
    if rt is None:
        if path.rstrip("/") in _PUBLIC_PATHS or path.startswith(
            tuple(p + "/" for p in _PUBLIC_PATHS)
        ):
            return None
        return StatusError(
            403, f'forbidden: User "{user}" cannot {verb} path "{path}"', details={}
        )
    resource = rt.plural + (f"/{route.subresource}" if route.subresource else "")
    if verb in _ALLOWED.get((rt.group, resource), set()):
        return None
    what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    named = f' "{route.name}"' if route.name else ""
    scope = f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
    message = (
        f'{what}{named} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{rt.group}" {scope}'
    )
    details = {"kind": rt.plural, **({"name": route.name} if route.name else {})}
    if rt.group:
        details["group"] = rt.group
    return StatusError(403, message, details=details)
