"""Whether the kubelet starts a container again: upstream's ``ContainerShouldRestart``.

With ``ContainerRestartRules`` (beta, on by default since 1.35) a container may carry its
own ``restartPolicy`` (Always, OnFailure, Never) and, only then, ``restartPolicyRules``.
On an exit the rules are read in order and the first whose exit codes match decides
(``Restart``: start it again); when none matches, the container's own policy decides,
and without one the pod's. A container the kubelet kills while it runs (a failed probe)
or whose state is unknown has no exit code to match, so only the policies count.

Every place that asks "will this container run again?" asks here, so the actions, the
phase, the prober and the log endpoint agree. With the gate off the kubelet never sees
the container-level fields (``api/dropfields.py`` takes them away), and every answer
here is then the pod's policy, as upstream's kubelet without the gate.
"""

from __future__ import annotations

from kubelet.api import Container, ContainerRestartRule, Pod, PodSpec, is_restartable_init_container

__all__ = [
    "ACTION_RESTART",
    "container_should_restart",
    "exited_instance_restarts",
    "matching_rule",
    "pod_restart_policy",
    "restarts_after_kill",
    "runs_once_if_succeeded",
]

ACTION_RESTART = "Restart"
OP_IN = "In"
OP_NOT_IN = "NotIn"
_POLICIES = ("Always", "OnFailure", "Never")


def pod_restart_policy(spec: PodSpec) -> str:
    """The pod's restart policy; unset means the API default, "Always"."""
    return spec.restart_policy or "Always"


def matching_rule(container: Container, exit_code: int) -> ContainerRestartRule | None:
    """The first of the container's rules whose exit codes match ``exit_code``.

    A rule without ``exitCodes`` or with an unknown operator never matches (validation
    refuses both; an API pod from a newer server may still carry them)."""
    for rule in container.restart_policy_rules:
        codes = rule.exit_codes
        if codes is None:
            continue
        listed = exit_code in codes.values
        if (codes.operator == OP_IN and listed) or (codes.operator == OP_NOT_IN and not listed):
            return rule
    return None


def _by_policy(policy: str, exit_code: int) -> bool:
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return exit_code != 0
    return True  # Always, and (for the pod) anything else: upstream's default


def container_should_restart(container: Container, spec: PodSpec, exit_code: int) -> bool:
    """Whether a container that exited with ``exit_code`` is to be started again.

    The rules count only when the container sets its own ``restartPolicy`` (validation
    requires it with rules). A matching rule whose action is not ``Restart`` (upstream's
    ``RestartAllContainers``, which needs a node feature this kubelet does not declare)
    falls through to the policies, as an action upstream does not know would."""
    if container.restart_policy is not None:
        rule = matching_rule(container, exit_code)
        if rule is not None and rule.action == ACTION_RESTART:
            return True
    return _by_policy(_effective_policy(container, spec), exit_code)


def _effective_policy(container: Container, spec: PodSpec) -> str:
    """The container's own restart policy when it sets a known one, else the pod's."""
    own = container.restart_policy
    return own if own in _POLICIES else pod_restart_policy(spec)


def restarts_after_kill(container: Container, spec: PodSpec) -> bool:
    """Whether a container stopped while running (failed liveness or startup probe) or
    in an unknown state is started again: no exit code, so no rules; its own policy
    unless Never, else the pod's unless Never."""
    return _effective_policy(container, spec) != "Never"


def runs_once_if_succeeded(container: Container, spec: PodSpec) -> bool:
    """In a new sandbox, whether a container that already exited 0 stays done: when
    its own policy, else the pod's, is OnFailure (upstream's sandbox re-creation; a pod
    whose policy is Never gets no new sandbox at all once something ran)."""
    return _effective_policy(container, spec) == "OnFailure"


def exited_instance_restarts(pod: Pod, name: str, exit_code: int) -> bool:
    """Whether container ``name``, whose newest instance exited with ``exit_code``, is
    to run again: a regular container by its rules and policies; a sidecar always; a
    plain init container only after a failure that its rules and policies restart; an
    ephemeral container never (or a name the spec does not hold)."""
    spec = pod.spec
    for container in spec.containers:
        if container.name == name:
            return container_should_restart(container, spec, exit_code)
    for container in spec.init_containers:
        if container.name == name:
            if is_restartable_init_container(container):
                return True
            return exit_code != 0 and container_should_restart(container, spec, exit_code)
    return False
