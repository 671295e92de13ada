"""Pod status: what the kubelet reports about each pod, and the manager that sends it.

What the package offers: ``StatusManager`` and ``run_status_manager`` (each pod's status
sent to the API when it changes), ``generate_pod_status`` (phase, conditions, container
statuses), ``owned_conditions``, ``terminated_status``/``is_terminal_phase`` (a finished
pod's last status), ``Kill`` (why the kubelet stops a pod itself), and the
``activeDeadlineSeconds`` rules (``deadline_left``, ``DEADLINE_EXCEEDED``), and
``new_terminations`` (the container exits a new status reports first).
"""

from .deadline import DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_MESSAGE, deadline_left
from .generate import generate_pod_status, needs_readiness_reconcile, owned_conditions
from .killed import Kill
from .manager import StatusManager, run_status_manager
from .phase import format_time, is_terminal_phase
from .readiness import with_container_readiness
from .terminal import terminated_status
from .terminations import Termination, new_terminations

__all__ = [
    "DEADLINE_EXCEEDED",
    "DEADLINE_EXCEEDED_MESSAGE",
    "Kill",
    "StatusManager",
    "Termination",
    "deadline_left",
    "format_time",
    "generate_pod_status",
    "is_terminal_phase",
    "needs_readiness_reconcile",
    "new_terminations",
    "owned_conditions",
    "run_status_manager",
    "terminated_status",
    "with_container_readiness",
]
