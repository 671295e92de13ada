"""The allocation checkpoint: upstream's file format, read back, damage refused."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import pytest

from kubelet.api import Pod, Quantity, ResourceRequirements
from kubelet.boundedio import inline
from kubelet.decisions import Allocation
from kubelet.pods.allocstate import (
    AllocationCheckpoint,
    checksum,
    decode_checkpoint,
    encode_checkpoint,
)
from kubelet.testing.builders import make_container, make_pod

T = TypeVar("T")

SMALL = ResourceRequirements(
    limits={"cpu": Quantity("1"), "memory": Quantity("128Mi")},
    requests={"cpu": Quantity("500m")},
)
ENTRIES = {
    "uid-1": Allocation({"app": SMALL, "bare": None}),
    "uid-2": Allocation({"app": SMALL}, pod=ResourceRequirements(limits={"cpu": Quantity("2")})),
}


# Written by upstream's own test of the format (``Test_stateCheckpoint_formatUpgraded``),
# which its checkpoint manager verifies before reading.
UPSTREAM_FILE = (
    r'{"data":"{\"entries\":{\"pod1\":{\"ContainerResources\":{\"container1\":'
    r'{\"requests\":{\"cpu\":\"1Ki\",\"memory\":\"1Ki\"}}}}}}","checksum":1178570812}'
)


def test_the_file_is_upstreams_shape() -> None:
    outer = json.loads(encode_checkpoint(ENTRIES))
    assert list(outer) == ["data", "checksum"]
    data = json.loads(outer["data"])
    app = {"limits": {"cpu": "1", "memory": "128Mi"}, "requests": {"cpu": "500m"}}
    assert data == {
        "entries": {
            "uid-1": {
                "ContainerResources": {"app": app, "bare": {}},
                "PodLevelResources": None,
            },
            "uid-2": {
                "ContainerResources": {"app": app},
                "PodLevelResources": {"limits": {"cpu": "2"}},
            },
        }
    }
    assert outer["checksum"] == checksum(outer["data"])


def test_upstreams_checksum_is_reproduced_and_its_file_read() -> None:
    assert checksum(json.loads(UPSTREAM_FILE)["data"]) == 1178570812
    entries = decode_checkpoint(UPSTREAM_FILE.encode())
    assert entries["pod1"].containers["container1"] == ResourceRequirements(
        requests={"cpu": Quantity("1Ki"), "memory": Quantity("1Ki")}
    )
    assert entries["pod1"].pod is None


def test_the_checksum_hashes_the_string_unquoted_as_spew_prints_it() -> None:
    h = 0x811C9DC5
    for byte in b"(string){}":
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    assert checksum("{}") == h
    assert checksum('{"a":1}') != checksum('{"a":2}')


def test_keys_are_read_in_any_case_as_go_reads_them() -> None:
    text = '{"entries":{"u":{"containerResources":{"c":{"limits":{"cpu":"1"}}}}}}'
    blob = json.dumps({"data": text, "checksum": checksum(text)}).encode()
    assert decode_checkpoint(blob)["u"].containers["c"].limits == {"cpu": Quantity("1")}


def test_entries_round_trip() -> None:
    back = decode_checkpoint(encode_checkpoint(ENTRIES))
    assert back["uid-2"].pod == ResourceRequirements(limits={"cpu": Quantity("2")})
    assert back["uid-1"].containers["app"] == SMALL
    assert back["uid-1"].containers["bare"] == ResourceRequirements()


@pytest.mark.parametrize(
    "blob",
    [
        b"not json",
        b'{"data": "{}", "checksum": 1}',
        b'{"checksum": 1}',
    ],
)
def test_damage_is_refused(blob: bytes) -> None:
    with pytest.raises(ValueError):
        decode_checkpoint(blob)


async def test_stored_and_loaded_under_the_root_dir(tmp_path: Path) -> None:
    checkpoint = AllocationCheckpoint(str(tmp_path))
    assert await checkpoint.load(inline) == {}
    checkpoint.store(ENTRIES)
    assert (tmp_path / "allocated_pods_state").is_file()
    assert set(await checkpoint.load(inline)) == {"uid-1", "uid-2"}
    (tmp_path / "allocated_pods_state").write_text('{"data": "{}", "checksum": 7}')
    assert await checkpoint.load(inline) == {}  # damaged: ignored


async def test_entries_of_pods_no_source_wants_leave_the_file(tmp_path: Path) -> None:
    from kubelet.pods.allocation import Allocations

    checkpoint = AllocationCheckpoint(str(tmp_path))
    checkpoint.store(ENTRIES)
    allocations = Allocations(checkpoint=checkpoint, saved=await checkpoint.load(inline))
    allocations.drop_orphans(lambda uid: uid == "uid-2")
    assert set(await checkpoint.load(inline)) == {"uid-2"}


class _Counted(AllocationCheckpoint):
    """The checkpoint, counting its writes and what each held."""

    def __init__(self, root_dir: str) -> None:
        super().__init__(root_dir)
        self.writes: list[set[str]] = []

    def store(self, entries: Mapping[str, Allocation], version: int | None = None) -> None:
        self.writes.append(set(entries))
        super().store(entries, version)


def test_a_batch_of_changes_is_one_write_on_leaving(tmp_path: Path) -> None:
    from kubelet.pods.allocation import Allocations

    checkpoint = _Counted(str(tmp_path))
    allocations = Allocations(checkpoint=checkpoint)
    pods = [make_pod(make_container(), name=f"p{i}", uid=f"uid-{i}") for i in range(3)]
    with allocations.batch():
        for pod in pods:
            allocations.allocated(pod)
        allocations.forget("uid-2")  # refused: never written at all
        assert checkpoint.writes == []
    assert checkpoint.writes == [{"uid-0", "uid-1"}]
    assert (tmp_path / "allocated_pods_state").is_file()
    with allocations.batch():
        with allocations.batch():  # nested: the outer one writes
            allocations.allocated(pods[2])
        assert len(checkpoint.writes) == 1
        allocations.flush()  # before anything may act on it
        assert checkpoint.writes[1:] == [{"uid-0", "uid-1", "uid-2"}]
    assert len(checkpoint.writes) == 2  # nothing changed since the flush
    allocations.forget("uid-0")  # outside a batch: written at once
    assert checkpoint.writes[2:] == [{"uid-1", "uid-2"}]


async def test_a_burst_of_added_pods_is_one_checkpoint_write(tmp_path: Path) -> None:
    """The sync loop admits the pods of one update and writes their allocations once
    (it did once per pod, each write the whole file), before it yields to their workers."""
    import random

    import trio

    from kubelet.pleg import PodLifecycleEvent
    from kubelet.pods import PodManager, PodWorkers
    from kubelet.pods.allocation import Allocations
    from kubelet.pods.syncloop import SyncLoop, SyncLoopParts
    from kubelet.sources import PodOperation, PodUpdate

    checkpoint = _Counted(str(tmp_path))
    allocations = Allocations(checkpoint=checkpoint)
    synced: list[str] = []

    class Workers(PodWorkers):
        def sync(self, pod: Pod) -> None:
            synced.append(pod.uid)

    _, updates = trio.open_memory_channel[PodUpdate](0)
    _, events = trio.open_memory_channel[PodLifecycleEvent](0)
    loop = SyncLoop(
        SyncLoopParts(
            updates=updates,
            pleg_events=events,
            pods=PodManager(),
            workers=Workers(object()),  # type: ignore[arg-type]
            housekeeper=object(),  # type: ignore[arg-type]
            sources_ready=lambda seen: True,
            rng=random.Random(0),
            allocations=allocations,
        )
    )
    pods = tuple(make_pod(make_container(), name=f"p{i}", uid=f"uid-{i}") for i in range(30))
    await loop._handle_update(PodUpdate(PodOperation.ADD, "file", pods))
    assert len(synced) == 30
    assert checkpoint.writes == [{pod.uid for pod in pods}]
    assert set(await checkpoint.load(inline)) == {pod.uid for pod in pods}


class _HeldWrites:
    """A ``RunSync`` for the writer task: each write waits for ``release``."""

    def __init__(self) -> None:
        import trio

        self.release = trio.Event()
        self.started = 0

    async def __call__(self, fn: Callable[[], T]) -> T:
        self.started += 1
        await self.release.wait()
        return fn()


async def test_the_writer_task_writes_the_latest_state_and_workers_wait_for_it(
    tmp_path: Path,
) -> None:
    """With the writer running, a change does not write on the spot: ``written`` returns
    once the file holds it, a change made during a write is written next (the latest
    state, once), and cancelled, the writer writes what it had left before it ends."""
    import trio
    from trio.testing import wait_all_tasks_blocked

    from kubelet.pods.allocation import Allocations

    checkpoint = _Counted(str(tmp_path))
    allocations = Allocations(checkpoint=checkpoint)
    pods = [make_pod(make_container(), name=f"p{i}", uid=f"uid-{i}") for i in range(3)]
    held = _HeldWrites()
    waited: list[str] = []

    async def worker(name: str) -> None:
        await allocations.written()
        waited.append(name)

    async def disk_finishes_after_the_cancel() -> None:
        await wait_all_tasks_blocked()
        held.release.set()

    async with trio.open_nursery() as outer, trio.open_nursery() as nursery:
        await nursery.start(allocations.run, held)
        allocations.allocated(pods[0])
        nursery.start_soon(worker, "first")
        await wait_all_tasks_blocked()
        assert held.started == 1 and checkpoint.writes == [] and waited == []
        allocations.allocated(pods[1])  # while the first write is held
        allocations.allocated(pods[2])
        nursery.start_soon(worker, "second")
        await wait_all_tasks_blocked()
        held.release.set()
        await wait_all_tasks_blocked()
        assert checkpoint.writes == [{"uid-0"}, {"uid-0", "uid-1", "uid-2"}]
        assert waited == ["first", "second"]
        await allocations.written()  # nothing unwritten: no wait

        held.release = trio.Event()
        allocations.forget("uid-1")
        await wait_all_tasks_blocked()
        assert len(checkpoint.writes) == 2  # its write is held...
        outer.start_soon(disk_finishes_after_the_cancel)
        nursery.cancel_scope.cancel()
    # ...and abandoned by the cancel: the writer wrote the last state on its way out,
    # waiting for the disk (the cancel does not cut that wait short)
    assert checkpoint.writes[2:] == [{"uid-0", "uid-2"}]
    assert set(await checkpoint.load(inline)) == {"uid-0", "uid-2"}
    allocations.forget("uid-2")  # no writer any more: written at once
    assert checkpoint.writes[3:] == [{"uid-0"}]


async def test_a_last_write_the_disk_never_finishes_does_not_hold_the_exit(
    tmp_path: Path, autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """Cancelled with a change left and a disk that hangs, the writer gives up after
    ``LAST_WRITE_DEADLINE`` and says so."""
    import trio
    from trio.testing import wait_all_tasks_blocked

    from kubelet.pods.allocation import LAST_WRITE_DEADLINE, Allocations

    checkpoint = _Counted(str(tmp_path))
    allocations = Allocations(checkpoint=checkpoint)
    held = _HeldWrites()  # never released
    began = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(allocations.run, held)
        allocations.allocated(make_pod(make_container(), name="p", uid="uid-p"))
        await wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert trio.current_time() - began == pytest.approx(LAST_WRITE_DEADLINE)
    assert checkpoint.writes == [] and held.started == 2
    assert "last change not written within 5 s" in caplog.text


async def test_the_state_thread_does_not_wait_for_the_shared_pool() -> None:
    """Reads and removals holding every thread of the shared pool (``in_thread``'s) do
    not hold the checkpoint's writes (and so a pod's start at their gate)."""
    import trio

    from kubelet.boundedio import in_state_thread, offload_threads

    pool, holders = offload_threads(), []
    try:
        while pool.available_tokens:
            holders.append(object())
            pool.acquire_on_behalf_of_nowait(holders[-1])
        with trio.fail_after(5):
            assert await in_state_thread(lambda: "written") == "written"
    finally:
        for holder in holders:
            pool.release_on_behalf_of(holder)


def test_an_older_state_never_lands_over_a_newer_one(tmp_path: Path) -> None:
    """A write its cancelled task abandoned in a thread may end after the writer's last
    one: the versions order them, and the older is dropped."""
    checkpoint = AllocationCheckpoint(str(tmp_path))
    checkpoint.store({"uid-1": ENTRIES["uid-1"]}, version=2)
    checkpoint.store(ENTRIES, version=1)  # the abandoned, older write
    assert set(decode_checkpoint((tmp_path / "allocated_pods_state").read_bytes())) == {"uid-1"}
    checkpoint.store(ENTRIES, version=3)
    assert set(decode_checkpoint((tmp_path / "allocated_pods_state").read_bytes())) == {
        "uid-1",
        "uid-2",
    }


async def test_a_worker_waits_for_a_change_still_held_in_a_batch(tmp_path: Path) -> None:
    """The sync loop's batch stays open while a preemption waits; a worker asking for
    the file meanwhile gets its pod's allocation written first, not skipped."""
    import trio

    from kubelet.pods.allocation import Allocations

    checkpoint = _Counted(str(tmp_path))
    allocations = Allocations(checkpoint=checkpoint)
    async with trio.open_nursery() as nursery:
        await nursery.start(allocations.run, inline)
        with allocations.batch():
            allocations.allocated(make_pod(make_container(), name="p", uid="uid-p"))
            await allocations.written()  # as a pod's worker would, while the batch is open
            assert checkpoint.writes == [{"uid-p"}]
        nursery.cancel_scope.cancel()
