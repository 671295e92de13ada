"""``kubelet --runonce``: start the static pods once, report, exit.

Each pod is synced until it is Running (every container up) or has finished
(Succeeded), or has Failed, retrying with a doubling delay (1 s up to 8 s, ten tries)
as upstream's run-once mode does. One line per pod is printed; the exit status is 0
when every pod is Running or Succeeded. Pods are left as they are on exit.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TextIO

import trio

from kubelet.api.pod import Pod
from kubelet.cri.types import ContainerRunState, RuntimePodStatus
from kubelet.pods.admission import AdmissionFacts, admit
from kubelet.pods.syncer import KubeletPodSyncer
from kubelet.status.phase import FAILED, RUNNING, SUCCEEDED, convert_container_statuses, get_phase

log = logging.getLogger(__name__)

MAX_RETRIES = 10
FIRST_DELAY = 1.0
MAX_DELAY = 8.0


def pod_phase(pod: Pod, status: RuntimePodStatus) -> str:
    """The API phase the runtime state implies (no probes, no previous status)."""
    init, regular = convert_container_statuses(pod, status)
    phase = get_phase(pod, (*init, *regular))
    if phase == RUNNING and not all(
        status.current(c.name) is not None
        and status.current(c.name).state is ContainerRunState.RUNNING  # type: ignore[union-attr]
        for c in pod.spec.containers
    ):
        return "Pending"  # a container is restarting: not yet "running" for run-once
    return phase


async def run_pod_once(syncer: KubeletPodSyncer, pod: Pod) -> tuple[str, str]:
    """(phase, detail) once the pod is Running/Succeeded/Failed or out of retries."""
    delay = FIRST_DELAY
    phase = "Pending"
    for _ in range(MAX_RETRIES):
        status = await syncer.cache.refresh(pod.uid)
        phase = pod_phase(pod, status)
        if phase in (RUNNING, SUCCEEDED, FAILED):
            return phase, ""
        result = await syncer.sync_pod(pod)
        if result.error:
            log.warning("run-once: pod %s: %s", pod.key, result.error)
        await trio.sleep(delay)
        delay = min(delay * 2, MAX_DELAY)
    waiting = syncer.waiting.get(pod.uid, {})
    detail = "; ".join(f"{name}: {reason}" for name, (reason, _) in waiting.items())
    return phase, detail or "timed out"


async def run_pods_once(
    syncer: KubeletPodSyncer,
    pods: list[Pod],
    out: TextIO = sys.stdout,
    *,
    admission: Callable[[], AdmissionFacts] | None = None,
) -> int:
    """Run every pod concurrently; print ``<ns>/<name>: <phase>`` lines; 0 if all good.

    Pods are admitted first, in order, as upstream's run-once does: a rejected pod is
    never started and reported Failed with the rejection."""
    results: dict[str, tuple[str, str]] = {}
    admitted: list[Pod] = []
    for pod in pods:
        rejection = admit(pod, admitted, admission()) if admission is not None else None
        if rejection is None:
            admitted.append(pod)
        else:
            log.warning("run-once: pod %s rejected: %s", pod.key, rejection.message)
            syncer.reject(pod, rejection)
            results[pod.uid] = (FAILED, f"{rejection.reason}: {rejection.message}")

    async def one(pod: Pod) -> None:
        results[pod.uid] = await run_pod_once(syncer, pod)

    async with trio.open_nursery() as nursery:
        for pod in admitted:
            nursery.start_soon(one, pod)
    ok = True
    for pod in sorted(pods, key=lambda p: p.key):
        phase, detail = results[pod.uid]
        good = phase in (RUNNING, SUCCEEDED)
        ok = ok and good
        suffix = f" ({detail})" if detail and not good else ""
        print(f"{pod.key}: {phase}{suffix}", file=out, flush=True)
    return 0 if ok else 1
