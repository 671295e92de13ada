"""Pacer: a long pass gives the loop back once per slice, and only then."""

from __future__ import annotations

import trio
import trio.testing

from kubelet.stats.pace import Pacer
from kubelet.stats.summary import from_json, from_json_paced


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_tick_yields_only_once_the_slice_is_used_up() -> None:
    clock = Clock()
    pacer = Pacer(0.005, clock)
    with trio.testing.assert_no_checkpoints():
        await pacer.tick()
        clock.now = 0.004
        await pacer.tick()
    clock.now = 0.005
    with trio.testing.assert_checkpoints():
        await pacer.tick()
    assert pacer.yields == 1
    clock.now = 0.009  # a new slice began at the yield (0.005)
    with trio.testing.assert_no_checkpoints():
        await pacer.tick()
    clock.now = 0.010
    with trio.testing.assert_checkpoints():
        await pacer.tick()
    assert pacer.yields == 2


def _summary(pods: int) -> dict[str, object]:
    when = "2026-11-27T10:00:00Z"
    memory = {"time": when, "availableBytes": 1, "usageBytes": 2, "workingSetBytes": 3}
    return {
        "node": {"memory": memory, "rlimit": {"time": when, "maxpid": 9, "curproc": 4}},
        "pods": [
            {
                "podRef": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}"},
                "memory": memory,
                "containers": [{"name": "c", "memory": memory}],
                "process_stats": {"process_count": i},
            }
            for i in range(pods)
        ]
        + ["not a pod"],
    }


async def test_from_json_paced_reads_what_from_json_reads() -> None:
    clock = Clock()
    pacer = Pacer(0.0, clock)  # a yield at every pod
    summary = _summary(3)
    assert await from_json_paced(summary, pacer) == from_json(summary)
    assert pacer.yields == 3
