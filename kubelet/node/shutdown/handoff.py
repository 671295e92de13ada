"""How the shutdown manager (node) reaches the pods (pod lifecycle) it must terminate.

The node component starts before the pod lifecycle, so the manager cannot hold the pod
workers. It sends each pod to terminate down a channel instead (``ChannelTerminator``,
a ``PodTerminator``) and waits for the pod lifecycle's answer; the pods to terminate are
the desired ones that have not finished (``active_pods``), as upstream's GetActivePods.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs
import trio

from kubelet.api import Pod

from .manager import ShutdownPod, Termination
from .plan import DEFAULT_PRIORITY

__all__ = ["ChannelTerminator", "KillRequest", "active_pods", "kill_channel"]

TERMINAL_PHASES = ("Succeeded", "Failed")


@attrs.frozen(eq=False)
class KillRequest:
    """Terminate ``pod`` as ``how`` says; set ``done`` once it is stopped."""

    pod: ShutdownPod
    how: Termination
    done: trio.Event = attrs.field(factory=trio.Event)


class ChannelTerminator:
    """A ``PodTerminator`` whose pods are terminated by whoever reads the channel."""

    def __init__(self, send: trio.MemorySendChannel[KillRequest]) -> None:
        self._send = send

    async def terminate(self, pod: ShutdownPod, how: Termination) -> None:
        request = KillRequest(pod, how)
        self._send.send_nowait(request)  # unbounded: the request outlives our wait
        await request.done.wait()


def kill_channel() -> tuple[ChannelTerminator, trio.MemoryReceiveChannel[KillRequest]]:
    send, receive = trio.open_memory_channel[KillRequest](math.inf)
    return ChannelTerminator(send), receive


def active_pods(pods: Iterable[Pod]) -> list[ShutdownPod]:
    """The pods a shutdown terminates: not mirror pods, not finished ones."""
    return [
        ShutdownPod(
            key=pod.key,
            uid=pod.uid,
            priority=pod.spec.priority if pod.spec.priority is not None else DEFAULT_PRIORITY,
            termination_grace=pod.spec.termination_grace_period_seconds,
        )
        for pod in pods
        if not pod.is_mirror and pod.status.phase not in TERMINAL_PHASES
    ]
