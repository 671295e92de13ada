"""Graceful node shutdown through systemd-logind's inhibitor locks.

What upstream does (pkg/kubelet/nodeshutdown): with ``shutdownGracePeriod`` (and
``shutdownGracePeriodCriticalPods``) or ``shutdownGracePeriodByPodPriority``, the
kubelet holds a logind "delay" lock on shutdown; when logind announces a shutdown
(``PrepareForShutdown(true)``) the node turns NotReady, pods are terminated in priority
groups, lowest first, each group within its share of the period, their status saying
they were terminated for the node's shutdown, and the lock is released. It raises
logind's InhibitDelayMaxSec with a drop-in when that is too short.

What this package does: the same — ``plan`` (groups, each pod's grace, messages and
conditions, config checks; pure), ``logind`` (the D-Bus side, with jeepney under Trio),
``manager`` (the loop: lock, signal, terminate by groups, release; reconnects; says
once when logind is absent and runs without it).

Wiring: ``run_node`` runs the manager when a grace period is configured; ``handoff``
sends the pods to stop to the pod lifecycle (``kubelet.pods.killer``), whose admission
reads ``admit``; the node status reads ``shutdown_status``. ``record`` keeps
upstream's state file and gauges of the last shutdown. ``LogindBus`` (the D-Bus client)
loads on first use (``__getattr__``): a node without a grace period never loads it.
"""

from typing import TYPE_CHECKING

from kubelet.lazyinit import lazy_names as _lazy_names

from .handoff import KillRequest, active_pods, kill_channel
from .logindconf import LogindError, LogindUnavailable
from .manager import PodTerminator, ShutdownManager, ShutdownPod, Termination
from .plan import PriorityPeriod, periods
from .record import ShutdownRecord

__all__ = [
    "KillRequest",
    "LogindBus",
    "LogindError",
    "LogindUnavailable",
    "PodTerminator",
    "PriorityPeriod",
    "ShutdownManager",
    "ShutdownPod",
    "ShutdownRecord",
    "Termination",
    "active_pods",
    "kill_channel",
    "periods",
]

if TYPE_CHECKING:
    from .logind import LogindBus

_LAZY = {"LogindBus": "logind"}
"""name -> the module that defines it, imported on first use (``__getattr__``)"""


__getattr__ = _lazy_names(__name__, _LAZY, globals())
