"""kubelet_working_pods' census of the pod workers: every upstream combination, counted."""

from __future__ import annotations

from kubelet.pleg import pod_from_runtime
from kubelet.pods import working_pods
from kubelet.pods.workers import PodPhase, PodWorker
from kubelet.testing.builders import make_pod


def worker(uid: str, source: str, phase: PodPhase = PodPhase.SYNCING, **flags: bool) -> PodWorker:
    pod = make_pod(name=uid, uid=uid, annotations={"kubernetes.io/config.source": source})
    return PodWorker(uid=uid, pod=pod, phase=phase, **flags)


def test_each_worker_lands_in_one_combination() -> None:
    workers = [
        worker("api-running", "api"),
        worker("static-running", "file"),
        worker("api-stopping", "api", terminate_requested=True),  # asked: terminating
        worker("static-gone", "file", PodPhase.TERMINATED),
        worker("removed-api", "api", PodPhase.TERMINATING),
        PodWorker(uid="ghost", pod=pod_from_runtime("ghost", "ns", "ghost")),
    ]
    desired = {"api-running", "static-running", "api-stopping", "static-gone"}
    counts = working_pods(workers, desired.__contains__)
    assert len(counts) == 15  # 5 standings x 3 steps, zeros included
    nonzero = {k: v for k, v in counts.items() if v}
    assert nonzero == {
        ("sync", "desired", ""): 1,
        ("sync", "desired", "true"): 1,
        ("terminating", "desired", ""): 1,
        ("terminated", "desired", "true"): 1,
        ("terminating", "orphan", ""): 1,
        ("sync", "runtime_only", "unknown"): 1,
    }
