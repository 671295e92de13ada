"""What a pod's sandbox runs under: its runtime handler and its user namespace.

Resolved before the sandbox is created (and before each container, whose namespaces
are the sandbox's), as upstream's ``NamespacesForPod`` and ``createPodSandbox`` do: the
RuntimeClass's handler from the API, then the user namespace for that handler. Either
failing fails the sandbox with upstream's "Failed to create pod sandbox: <why>" and is
retried; the pod never falls back to the default handler or the host's user namespace.
"""

from __future__ import annotations

import attrs

from kubelet.api import Pod
from kubelet.cri import api

from . import userns
from .runtimeclass import RuntimeClassError, RuntimeClasses
from .runtimeinfo import RuntimeInfo
from .userns import UserNamespaces, UsernsError

__all__ = ["Isolation", "IsolationError", "PodIsolation"]


class IsolationError(Exception):
    """The pod's handler or user namespace cannot be resolved; ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@attrs.frozen
class Isolation:
    handler: str = ""
    userns: api.UserNamespace | None = None


class PodIsolation:
    """Resolves ``Isolation`` per pod. ``runtime_classes`` is None without an API server;
    ``user_namespaces`` is None when ``hostUsers: false`` can never be honoured here."""

    def __init__(
        self,
        runtime_info: RuntimeInfo | None = None,
        runtime_classes: RuntimeClasses | None = None,
        user_namespaces: UserNamespaces | None = None,
        *,
        user_namespaces_enabled: bool = True,
    ) -> None:
        self.runtime_info = runtime_info or RuntimeInfo()
        self.runtime_classes = runtime_classes
        self.user_namespaces = user_namespaces
        self.user_namespaces_enabled = user_namespaces_enabled

    async def handler(self, pod: Pod) -> str:
        name = pod.spec.runtime_class_name
        if not name:
            return ""
        if self.runtime_classes is None:
            raise IsolationError(
                f'runtimeClassName "{name}" cannot be resolved without an API server'
            )
        try:
            return await self.runtime_classes.handler(name)
        except RuntimeClassError as exc:
            raise IsolationError(exc.message) from exc

    async def resolve(self, pod: Pod) -> Isolation:
        """The pod's handler and user namespace; ``IsolationError`` with upstream's words."""
        handler = await self.handler(pod)
        try:
            decision = userns.decide(
                pod,
                handler,
                self.runtime_info.features.handlers,
                feature_enabled=self.user_namespaces_enabled,
            )
            if not decision.own:
                mode = decision.mode
                return Isolation(handler, None if mode is None else api.UserNamespace(mode=mode))
            if self.user_namespaces is None:
                raise UsernsError("user namespaces are not available on this kubelet")
            return Isolation(handler, self.user_namespaces.mappings(pod))
        except UsernsError as exc:
            raise IsolationError(exc.message) from exc

    def release(self, uid: str) -> None:
        """The pod is gone from the node: its user namespace range is free again."""
        if self.user_namespaces is not None:
            self.user_namespaces.release(uid)
