"""Feature gates: the user's ``featureGates`` checked and merged over upstream's defaults.

``resolve_gates`` is component-base's featuregate restated for one version (1.36): an
unknown name stops start-up, a gate locked to its default cannot be changed, a gate that
needs another one switched off is refused, and setting a GA or deprecated gate is
accepted with upstream's warning. The result is a ``FeatureGates``: the one place the
rest of the kubelet asks "is gate X on?". It is built once at start-up and handed down
(``Options.features``), never a global.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

import attrs

from .gatedata import ALL_ALPHA, ALL_BETA, ALPHA, BETA, DEPENDENCIES, DEPRECATED, GA, GATES, SPECIAL

# The gates this kubelet reads (so a typo in a gate name is a NameError, not a KeyError).
KUBELET_CRASH_LOOP_BACK_OFF_MAX = "KubeletCrashLoopBackOffMax"
REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY = "ReduceDefaultCrashLoopBackOffDecay"
KUBELET_FINE_GRAINED_AUTHZ = "KubeletFineGrainedAuthz"
GRACEFUL_NODE_SHUTDOWN = "GracefulNodeShutdown"
ROTATE_KUBELET_SERVER_CERTIFICATE = "RotateKubeletServerCertificate"
SHUTDOWN_BY_POD_PRIORITY = "GracefulNodeShutdownBasedOnPodPriority"
CUSTOM_CPU_CFS_QUOTA_PERIOD = "CustomCPUCFSQuotaPeriod"
CPU_MANAGER_POLICY_ALPHA_OPTIONS = "CPUManagerPolicyAlphaOptions"
CPU_MANAGER_POLICY_BETA_OPTIONS = "CPUManagerPolicyBetaOptions"
KUBELET_ENSURE_SECRET_PULLED_IMAGES = "KubeletEnsureSecretPulledImages"
POD_READY_TO_START_CONTAINERS_CONDITION = "PodReadyToStartContainersCondition"
KUBELET_REGISTRATION_GET_ON_EXISTS_ONLY = "KubeletRegistrationGetOnExistsOnly"
ENV_FILES = "EnvFiles"
CONTAINER_RESTART_RULES = "ContainerRestartRules"
RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
POD_LEVEL_RESOURCES = "PodLevelResources"
HOSTNAME_OVERRIDE = "HostnameOverride"
KUBELET_PSI = "KubeletPSI"
CSI_VOLUME_HEALTH = "CSIVolumeHealth"
RESOURCE_HEALTH_STATUS = "ResourceHealthStatus"
RESOURCE_HEALTH_STATUS_MESSAGE = "ResourceHealthStatusMessage"
NODE_LOG_QUERY = "NodeLogQuery"
COMPONENT_FLAGZ = "ComponentFlagz"
COMPONENT_STATUSZ = "ComponentStatusz"
POD_AND_CONTAINER_STATS_FROM_CRI = "PodAndContainerStatsFromCRI"
QOS_RESERVED = "QOSReserved"
DRA_EXTENDED_RESOURCE = "DRAExtendedResource"
TAINT_TOLERATION_COMPARISON_OPERATORS = "TaintTolerationComparisonOperators"
KUBELET_POD_RESOURCES_GET = "KubeletPodResourcesGet"
KUBELET_POD_RESOURCES_DYNAMIC_RESOURCES = "KubeletPodResourcesDynamicResources"
EXTEND_WEBSOCKETS_TO_KUBELET = "ExtendWebSocketsToKubelet"
NODE_DECLARED_FEATURES = "NodeDeclaredFeatures"
USER_NAMESPACES_SUPPORT = "UserNamespacesSupport"
KUBELET_IN_USER_NAMESPACE = "KubeletInUserNamespace"
ALLOW_DNS_ONLY_NODE_CSR = "AllowDNSOnlyNodeCSR"
RELOAD_KUBELET_SERVER_CERTIFICATE_FILE = "ReloadKubeletServerCertificateFile"
RELOAD_KUBELET_CLIENT_CA_FILE = "ReloadKubeletClientCAFile"
CONTAINER_CHECKPOINT = "ContainerCheckpoint"
IN_PLACE_POD_VERTICAL_SCALING = "InPlacePodVerticalScaling"


@attrs.frozen
class GateProblem:
    """One refused gate setting: upstream's message and the gates it is about."""

    message: str
    gates: tuple[str, ...]


class GateError(ValueError):
    """The requested gates cannot be applied; one problem per refused setting."""

    def __init__(self, problems: Iterable[GateProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(p.message for p in self.problems))


def _frozen_map(value: Mapping[str, bool]) -> Mapping[str, bool]:
    return MappingProxyType(dict(value))


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


@attrs.frozen
class FeatureGates:
    """Which gates are on: upstream's v1.36 defaults with the user's choices over them."""

    explicit: Mapping[str, bool] = attrs.field(factory=dict, converter=_frozen_map)
    """What the user set (``AllAlpha``/``AllBeta`` already spread over their gates)."""

    def enabled(self, name: str) -> bool:
        """Whether gate ``name`` is on; an unknown name is a programming error (KeyError)."""
        if name in self.explicit:
            return self.explicit[name]
        spec = GATES.get(name) or SPECIAL.get(name)
        if spec is None:
            raise KeyError(f"feature {name!r} is not registered in FeatureGate")
        return spec.default

    def known(self) -> list[tuple[str, str, bool]]:
        """(name, stage, enabled) of every gate of v1.36 (``kubernetes_feature_enabled``)."""
        return [(name, spec.stage, self.enabled(name)) for name, spec in sorted(GATES.items())]

    def non_default(self) -> Mapping[str, bool]:
        """Gates set to something other than their default (what the warning looks at)."""
        return MappingProxyType(
            {
                name: value
                for name, value in sorted(self.explicit.items())
                if name in GATES and GATES[name].default != value
            }
        )


@attrs.frozen
class ResolvedGates:
    """The gates and the warnings upstream logs while setting them."""

    gates: FeatureGates
    warnings: tuple[str, ...] = ()


def resolve_gates(requested: Mapping[str, bool]) -> ResolvedGates:
    """Apply ``requested`` (the merged ``featureGates``) as upstream's SetFromMap does.

    Raises ``GateError`` with upstream's messages: an unknown gate stops at once (only
    that one is reported, as upstream returns early), locked gates are all reported, and
    dependencies are checked only when everything else was accepted.
    """
    problems: list[GateProblem] = []
    warnings: list[str] = []
    explicit: dict[str, bool] = {}
    for name, value in requested.items():
        if name not in GATES and name not in SPECIAL:
            raise GateError([GateProblem(f"unrecognized feature gate: {name}", (name,))])
        spec = GATES.get(name) or SPECIAL[name]
        if spec.locked and spec.default != value:
            message = (
                f"cannot set feature gate {name} to {_go_bool(value)}, "
                f"feature is locked to {_go_bool(spec.default)}"
            )
            problems.append(GateProblem(message, (name,)))
            continue
        if name in SPECIAL:
            continue
        explicit[name] = value
        if spec.stage == DEPRECATED:
            warnings.append(
                f"Setting deprecated feature gate {name}={_go_bool(value)}. "
                "It will be removed in a future release."
            )
        elif spec.stage == GA:
            warnings.append(
                f"Setting GA feature gate {name}={_go_bool(value)}. "
                "It will be removed in a future release."
            )
    if problems:
        raise GateError(problems)
    for special, stage in ((ALL_ALPHA, ALPHA), (ALL_BETA, BETA)):
        if special in requested:
            for name, spec in GATES.items():
                if spec.stage == stage and name not in explicit:
                    explicit[name] = requested[special]
    gates = FeatureGates(explicit)
    problems = _dependency_problems(gates)
    if problems:
        raise GateError(problems)
    return ResolvedGates(gates, tuple(warnings))


def _dependency_problems(gates: FeatureGates) -> list[GateProblem]:
    problems = []
    for feature, needs in sorted(DEPENDENCIES.items()):
        if not gates.enabled(feature):
            continue
        off = [dep for dep in needs if not gates.enabled(dep)]
        if off:
            message = (
                f"{feature} is enabled, but depends on features that are disabled: "
                f"[{' '.join(off)}]"
            )
            problems.append(GateProblem(message, (feature, *off)))
    return problems


DEFAULT_GATES = FeatureGates()
"""Upstream's defaults, for code and tests that build a kubelet without flags."""
