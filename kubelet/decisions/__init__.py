"""Pure decisions over a pod spec and the runtime's view: no I/O, tested on vectors.

What one sync must do (``actions``), back-off, QoS and OOM scores, grace periods, the
container hash, the CRI configs a spec asks for (``criconfig``), the security context,
sysctls and the order in which containers stop.
"""

from . import resize, sysctls
from .actions import (
    ContainerToKill,
    PodActions,
    compute_pod_actions,
    sandbox_changed,
    should_container_be_restarted,
)
from .backoff import (
    IMAGE_PULL_INITIAL,
    IMAGE_PULL_MAX,
    Backoff,
    crash_loop_backoff,
    crash_loop_key,
    crash_loop_limits,
    image_pull_key,
)
from .contribution import (
    NO_CONTRIBUTION,
    ContainerContribution,
    DeviceSpec,
    MountSpec,
    merge_contributions,
)
from .criconfig import (
    container_config,
    linux_container_resources,
    next_restart_count,
    pod_cgroup_parent,
    pod_log_directory,
    restart_count_from_logs,
    sandbox_config,
    target_namespaces,
)
from .dra import (
    FAILED_PREPARE_DYNAMIC_RESOURCES,
    ClaimError,
    ClaimRef,
    cdi_annotation,
    claim_drivers,
    claim_refusal,
    container_claim_requests,
    pod_claims,
)
from .grace import KillReason, kill_grace_period, remaining_deletion_grace, stop_container_timeout
from .limits import ContainerLimits, container_limits, container_swaps
from .nodeselector import node_selector_term_matches, node_selector_terms_match
from .qos import BEST_EFFORT, BURSTABLE, GUARANTEED, is_critical_pod, pod_qos
from .resize import (
    CONDITIONS,
    IN_PROGRESS,
    PENDING,
    Allocation,
    ResizeState,
    allocated_pod,
    allocation_from_spec,
    allocation_of,
    decode_resources,
    in_progress_condition,
    pending_condition,
    resize_conditions,
)
from .restart import container_should_restart, exited_instance_restarts
from .security import (
    APPARMOR_REASON,
    SecurityContextError,
    apparmor_admission_error,
    apparmor_host_error,
    image_user,
    needs_image_user,
    verify_run_as_non_root,
)
from .stoporder import stop_prerequisites
from .sysctls import SysctlAllowlist, kernel_version
from .taints import tolerates, untolerated_taint

__all__ = [
    "APPARMOR_REASON",
    "BEST_EFFORT",
    "BURSTABLE",
    "CONDITIONS",
    "FAILED_PREPARE_DYNAMIC_RESOURCES",
    "GUARANTEED",
    "IMAGE_PULL_INITIAL",
    "IMAGE_PULL_MAX",
    "IN_PROGRESS",
    "NO_CONTRIBUTION",
    "PENDING",
    "Allocation",
    "Backoff",
    "ClaimError",
    "ClaimRef",
    "ContainerContribution",
    "ContainerLimits",
    "ContainerToKill",
    "DeviceSpec",
    "KillReason",
    "MountSpec",
    "PodActions",
    "ResizeState",
    "SecurityContextError",
    "SysctlAllowlist",
    "allocated_pod",
    "allocation_from_spec",
    "allocation_of",
    "apparmor_admission_error",
    "apparmor_host_error",
    "cdi_annotation",
    "claim_drivers",
    "claim_refusal",
    "compute_pod_actions",
    "container_claim_requests",
    "container_config",
    "container_limits",
    "container_should_restart",
    "container_swaps",
    "crash_loop_backoff",
    "crash_loop_key",
    "crash_loop_limits",
    "decode_resources",
    "exited_instance_restarts",
    "image_pull_key",
    "image_user",
    "in_progress_condition",
    "is_critical_pod",
    "kernel_version",
    "kill_grace_period",
    "linux_container_resources",
    "merge_contributions",
    "needs_image_user",
    "next_restart_count",
    "node_selector_term_matches",
    "node_selector_terms_match",
    "pending_condition",
    "pod_cgroup_parent",
    "pod_claims",
    "pod_log_directory",
    "pod_qos",
    "remaining_deletion_grace",
    "resize",
    "resize_conditions",
    "restart_count_from_logs",
    "sandbox_changed",
    "sandbox_config",
    "should_container_be_restarted",
    "stop_container_timeout",
    "stop_prerequisites",
    "sysctls",
    "target_namespaces",
    "tolerates",
    "untolerated_taint",
    "verify_run_as_non_root",
]
