"""FileSource against real files: the relist path on a fake clock, inotify on the real one."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.api import Pod
from kubelet.boundedio import in_thread, inline
from kubelet.sources import (
    FILE_SOURCE,
    FileSource,
    ManifestError,
    PodConfig,
    PodOperation,
    PodUpdate,
)
from kubelet.sources import file as file_source
from kubelet.sources.static import MAX_CONFIG_LENGTH

NODE = "node1"


def manifest(name: str, image: str = "busybox:1.36") -> str:
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n"
        f"  name: {name}\nspec:\n  containers:\n  - name: c\n    image: {image}\n"
    )


BROKEN = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containers: 3\n"


def put(path: Path, text: str) -> None:
    """Write atomically (a dot-file renamed into place), as careful tools do."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class Recorder:
    """A stand-in for PodConfig that keeps every SET the source sends."""

    def __init__(self) -> None:
        self.sets: list[list[Pod]] = []
        self.times: list[float] = []
        self.origins: Mapping[str, str] = {}
        self.registered: set[str] = set()

    def register(self, source: str) -> None:
        self.registered.add(source)

    async def update(
        self,
        source: str,
        op: PodOperation,
        pods: Sequence[Pod],
        *,
        origins: Mapping[str, str] | None = None,
    ) -> None:
        assert (source, op) == (FILE_SOURCE, PodOperation.SET)
        self.sets.append(list(pods))
        self.times.append(trio.current_time())
        self.origins = origins or {}

    @property
    def last(self) -> list[str]:
        return sorted(p.metadata.name for p in self.sets[-1])

    async def wait_for(self, names: list[str], timeout: float = 5.0) -> list[Pod]:
        """The first SET (from now on, or the latest) whose pod names are ``names``."""
        with trio.fail_after(timeout):
            while not (self.sets and self.last == sorted(names)):
                await trio.sleep(0.01)
        return self.sets[-1]


async def start(
    nursery: trio.Nursery,
    path: Path,
    *,
    watch: bool,
    on_error: Callable[[ManifestError], None] | None = None,
    fake_clock: bool = False,
) -> tuple[FileSource, Recorder]:
    source = FileSource(
        path,
        NODE,
        watch=watch,
        on_error=on_error,
        check_frequency=20.0 if not watch else 3600.0,
        # tests on autojump_clock: no worker thread (it would look idle)
        run_sync=inline if fake_clock or not watch else in_thread,
    )
    recorder = Recorder()
    await nursery.start(source.run, recorder)
    return source, recorder


# -- the relist path (fake clock, no inotify) -----------------------------------------------


async def test_relist_add_edit_delete(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery:
        source, rec = await start(nursery, tmp_path, watch=False)
        assert rec.registered == {FILE_SOURCE}
        assert rec.sets == [[]]
        put(tmp_path / "web.yaml", manifest("web"))
        await trio.sleep(20.5)
        [pod] = rec.sets[-1]
        assert pod.metadata.name == "web-node1" and pod.spec.node_name == NODE
        put(tmp_path / "web.yaml", manifest("web", image="busybox:1.37"))
        await trio.sleep(20)
        [edited] = rec.sets[-1]
        assert edited.spec.containers[0].image == "busybox:1.37" and edited.uid != pod.uid
        (tmp_path / "web.yaml").unlink()
        await trio.sleep(20)
        assert rec.sets[-1] == []
        assert len(rec.sets) == 4  # one SET per relist, nothing in between
        assert source.errors == {}
        nursery.cancel_scope.cancel()


async def test_relist_broken_manifest_beside_good_ones(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    errors: list[ManifestError] = []
    put(tmp_path / "a.yaml", manifest("a"))
    put(tmp_path / "bad.yaml", BROKEN)
    put(tmp_path / "c.yaml", manifest("c"))
    async with trio.open_nursery() as nursery:
        source, rec = await start(nursery, tmp_path, watch=False, on_error=errors.append)
        assert rec.last == ["a-node1", "c-node1"]
        bad = str(tmp_path / "bad.yaml")
        assert [str(e) for e in errors] == [f"{bad}:6: spec.containers: expected a list, got int"]
        assert list(source.errors) == [bad]
        await trio.sleep(60.5)  # three more relists: the same error is not reported again
        assert len(errors) == 1 and rec.last == ["a-node1", "c-node1"]
        put(tmp_path / "bad.yaml", manifest("bad"))
        await trio.sleep(20)
        assert rec.last == ["a-node1", "bad-node1", "c-node1"] and source.errors == {}
        nursery.cancel_scope.cancel()


async def test_missing_path_sends_empty_set_and_keeps_checking(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    path = tmp_path / "manifests"
    async with trio.open_nursery() as nursery:
        _, rec = await start(nursery, path, watch=False)
        assert rec.sets == [[]]
        path.mkdir()
        put(path / "web.yaml", manifest("web"))
        await trio.sleep(20.5)
        assert rec.last == ["web-node1"]
        nursery.cancel_scope.cancel()


async def test_dot_files_and_directories_are_skipped(tmp_path: Path) -> None:
    put(tmp_path / ".web.yaml.swp", BROKEN)
    (tmp_path / "sub").mkdir()
    put(tmp_path / "sub" / "nested.yaml", manifest("nested"))
    put(tmp_path / "web.yaml", manifest("web"))
    source = FileSource(tmp_path, NODE)
    pods = await source.scan()
    assert pods is not None and [p.metadata.name for p in pods] == ["web-node1"]
    assert source.errors == {}


async def test_single_file_path(tmp_path: Path) -> None:
    put(tmp_path / "web.yaml", manifest("web"))
    put(tmp_path / "other.yaml", manifest("other"))
    pods = await FileSource(tmp_path / "web.yaml", NODE).scan()
    assert pods is not None and [p.metadata.name for p in pods] == ["web-node1"]


async def test_broken_on_inotify_keeps_the_pod_until_the_relist(tmp_path: Path) -> None:
    """Upstream's rule: an event finding a broken file changes nothing; the relist drops it."""
    put(tmp_path / "web.yaml", manifest("web"))
    source = FileSource(tmp_path, NODE)
    [good] = await source.scan() or []
    (tmp_path / "web.yaml").write_text("apiVersion: v1\nkind: Pod\nmeta")  # half-written
    assert await source.scan(relist=False) == [good]
    assert list(source.errors) == [str(tmp_path / "web.yaml")]
    assert await source.scan(relist=True) == []
    assert await source.scan(relist=False) == []  # once dropped, it stays dropped


async def test_unchanged_files_are_not_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relist of unchanged files gives the very same pod objects without parsing."""
    put(tmp_path / "a.yaml", manifest("a"))
    put(tmp_path / "b.yaml", manifest("b"))
    source = FileSource(tmp_path, NODE)
    first = await source.scan() or []
    parsed: list[str] = []
    real = file_source.load_manifest

    def spy(data: bytes, path: str, **kw: Any) -> Any:
        parsed.append(os.path.basename(path))
        return real(data, path, **kw)

    monkeypatch.setattr(file_source, "load_manifest", spy)
    again = await source.scan() or []
    assert parsed == [] and all(x is y for x, y in zip(first, again, strict=True))
    # rewritten in place with the same size and its old mtime put back: read again (the
    # bytes are compared, not timestamps, which can be too coarse to show an edit)
    before = os.stat(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").write_text(manifest("b", image="busybox:1.37"))
    os.utime(tmp_path / "b.yaml", ns=(before.st_atime_ns, before.st_mtime_ns))
    edited = await source.scan() or []
    assert parsed == ["b.yaml"] and edited[0] is first[0]
    assert edited[1].spec.containers[0].image == "busybox:1.37"
    # a file that broke is decoded once, not at every scan, until its bytes change
    put(tmp_path / "a.yaml", BROKEN)
    for _ in range(3):
        assert [p.metadata.name for p in await source.scan() or []] == ["b-node1"]
    assert parsed == ["b.yaml", "a.yaml"]
    assert list(source.errors) == [str(tmp_path / "a.yaml")]
    put(tmp_path / "a.yaml", BROKEN + "# touched\n")
    assert [p.metadata.name for p in await source.scan() or []] == ["b-node1"]
    assert parsed == ["b.yaml", "a.yaml", "a.yaml"]
    # the directory moved away and back: its files keep their identity, and are read anew
    tmp_path.rename(tmp_path.with_name("away"))
    assert await source.scan() == []
    tmp_path.with_name("away").rename(tmp_path)
    assert [p.metadata.name for p in await source.scan() or []] == ["b-node1"]
    assert parsed[-2:] == ["a.yaml", "b.yaml"]


async def test_too_large_manifest_is_refused(tmp_path: Path) -> None:
    with open(tmp_path / "huge.yaml", "wb") as f:
        f.truncate(MAX_CONFIG_LENGTH + 1)
    source = FileSource(tmp_path, NODE)
    assert await source.scan() == []
    [error] = source.errors.values()
    assert "more than the 10485760 byte (10 MiB) limit" in str(error)


async def test_duplicate_names_across_files_first_file_wins(tmp_path: Path) -> None:
    put(tmp_path / "a.yaml", manifest("web"))
    put(tmp_path / "b.yaml", manifest("web", image="busybox:1.37"))
    events: list[tuple[Pod, str, str, str]] = []
    config = PodConfig([FILE_SOURCE], on_event=lambda *e: events.append(e))
    async with trio.open_nursery() as nursery:
        await nursery.start(config.run)
        await nursery.start(FileSource(tmp_path, NODE, watch=False).run, config)
        update = await config.updates.receive()
        assert update.op is PodOperation.ADD
        [pod] = update.pods
        assert pod.spec.containers[0].image == "busybox:1.36"
        assert [reason for _, _, reason, _ in events] == ["FailedValidation"]
        nursery.cancel_scope.cancel()


# -- inotify on a fake clock: at once, and still one change per burst -----------------------
# The kernel queues inotify events during the write itself, and Trio looks at the
# descriptor before the autojump clock moves, so these timings are exact.


def names(pods: list[Pod]) -> list[str]:
    return sorted(p.metadata.name for p in pods)


async def watched(nursery: trio.Nursery, path: Path) -> tuple[FileSource, Recorder]:
    source, rec = await start(nursery, path, watch=True, fake_clock=True)
    await source.watching.wait()
    await trio.sleep(1)  # the scan a new watch begins with
    return source, rec


async def test_a_finished_manifest_is_read_at_once(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Moved in, or closed after writing: sent without waiting for the burst to end."""
    async with trio.open_nursery() as nursery:
        _, rec = await watched(nursery, tmp_path)
        t0 = trio.current_time()
        put(tmp_path / "web.yaml", manifest("web"))  # written to a dot-file, moved in
        await rec.wait_for(["web-node1"])
        assert rec.times[-1] - t0 < 0.01
        t1 = trio.current_time()
        (tmp_path / "db.yaml").write_text(manifest("db"))  # created, written, closed
        await rec.wait_for(["db-node1", "web-node1"])
        assert rec.times[-1] - t1 < 0.01
        nursery.cancel_scope.cancel()


async def test_a_removal_waits_for_the_burst_to_end(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    put(tmp_path / "web.yaml", manifest("web"))
    async with trio.open_nursery() as nursery:
        _, rec = await watched(nursery, tmp_path)
        t0 = trio.current_time()
        (tmp_path / "web.yaml").unlink()
        await rec.wait_for([])
        assert 0.05 <= rec.times[-1] - t0 < 0.06
        nursery.cancel_scope.cancel()


async def test_rm_then_cp_is_one_change_never_a_removal(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """rm, another manifest moved in meanwhile (read at once), then the first one written
    back 30 ms later: its pod is in every SET, and the same pod object when unchanged."""
    put(tmp_path / "web.yaml", manifest("web"))
    async with trio.open_nursery() as nursery:
        _, rec = await watched(nursery, tmp_path)
        [web] = rec.sets[-1]
        before = len(rec.sets)
        (tmp_path / "web.yaml").unlink()
        put(tmp_path / "db.yaml", manifest("db"))
        await trio.sleep(0.03)
        with open(tmp_path / "web.yaml", "w") as f:  # cp: created, then written
            await trio.sleep(0.01)
            f.write(manifest("web"))
        await trio.sleep(1)
        assert rec.sets[before:] and all("web-node1" in names(s) for s in rec.sets[before:])
        assert names(rec.sets[-1]) == ["db-node1", "web-node1"]
        assert [p for p in rec.sets[-1] if p.metadata.name == "web-node1"] == [web]
        nursery.cancel_scope.cancel()


async def test_an_editors_rename_dance_is_one_change(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """vim without backupcopy: the file moved to a backup name, a new one written, the
    backup removed. One new pod; the old one is never sent away before it."""
    put(tmp_path / "web.yaml", manifest("web"))
    async with trio.open_nursery() as nursery:
        _, rec = await watched(nursery, tmp_path)
        before = len(rec.sets)
        (tmp_path / "web.yaml").rename(tmp_path / "web.yaml~")
        await trio.sleep(0.005)
        (tmp_path / "web.yaml").write_text(manifest("web", image="busybox:1.37"))
        await trio.sleep(0.005)
        (tmp_path / "web.yaml~").unlink()
        await trio.sleep(1)
        assert all("web-node1" in names(s) for s in rec.sets[before:])
        [pod] = rec.sets[-1]
        assert pod.spec.containers[0].image == "busybox:1.37"
        nursery.cancel_scope.cancel()


# -- inotify (real clock, bounded) ----------------------------------------------------------


async def test_inotify_add_edit_delete(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        source, rec = await start(nursery, tmp_path, watch=True)
        with trio.fail_after(5):
            await source.watching.wait()
        put(tmp_path / "web.yaml", manifest("web"))
        [pod] = await rec.wait_for(["web-node1"])
        put(tmp_path / "web.yaml", manifest("web", image="busybox:1.37"))
        with trio.fail_after(5):
            while rec.sets[-1][0].uid == pod.uid:
                await trio.sleep(0.01)
        assert rec.sets[-1][0].spec.containers[0].image == "busybox:1.37"
        (tmp_path / "web.yaml").unlink()
        await rec.wait_for([])
        nursery.cancel_scope.cancel()


async def test_inotify_malformed_file_beside_good_ones(tmp_path: Path) -> None:
    errors: list[ManifestError] = []
    put(tmp_path / "good.yaml", manifest("good"))
    async with trio.open_nursery() as nursery:
        source, rec = await start(nursery, tmp_path, watch=True, on_error=errors.append)
        with trio.fail_after(5):
            await source.watching.wait()
        put(tmp_path / "bad.yaml", BROKEN)
        put(tmp_path / "more.yaml", manifest("more"))
        await rec.wait_for(["good-node1", "more-node1"])
        with trio.fail_after(5):
            while not errors:
                await trio.sleep(0.01)
        assert str(errors[0]).startswith(f"{tmp_path / 'bad.yaml'}:6: ")
        nursery.cancel_scope.cancel()


async def test_inotify_burst_is_one_scan_of_the_finished_state(tmp_path: Path) -> None:
    """``rm`` then ``cp`` (the file first created empty, then written): the pod is never
    sent away in between, and no error is reported for the moment it was empty."""
    put(tmp_path / "web.yaml", manifest("web"))
    errors: list[ManifestError] = []
    async with trio.open_nursery() as nursery:
        source, rec = await start(nursery, tmp_path, watch=True, on_error=errors.append)
        with trio.fail_after(5):
            await source.watching.wait()
        await trio.sleep(0.2)
        before = len(rec.sets)
        (tmp_path / "web.yaml").unlink()
        with open(tmp_path / "web.yaml", "w") as f:
            f.flush()
            await trio.sleep(0.01)  # cp: created, then written a moment later
            f.write(manifest("web", image="busybox:1.37"))
        with trio.fail_after(5):
            while not (
                len(rec.sets) > before
                and rec.sets[-1]
                and rec.sets[-1][0].spec.containers[0].image == "busybox:1.37"
            ):
                await trio.sleep(0.01)
        assert all(names for names in rec.sets[before:])  # never an empty set
        assert errors == []
        nursery.cancel_scope.cancel()


async def test_inotify_ignores_dot_files(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        source, rec = await start(nursery, tmp_path, watch=True)
        with trio.fail_after(5):
            await source.watching.wait()
        await trio.sleep(0.2)  # the scan every new watch begins with
        before = len(rec.sets)
        (tmp_path / ".hidden.yaml").write_text(manifest("hidden"))
        await trio.sleep(0.5)
        assert len(rec.sets) == before and rec.last == []  # no scan was even triggered
        nursery.cancel_scope.cancel()


async def test_inotify_directory_created_later(tmp_path: Path) -> None:
    path = tmp_path / "manifests"
    async with trio.open_nursery() as nursery:
        source, rec = await start(nursery, path, watch=True)
        with trio.fail_after(5):
            await source.watching.wait()  # watching the parent for the directory to appear
        path.mkdir()
        put(path / "web.yaml", manifest("web"))
        await rec.wait_for(["web-node1"])
        nursery.cancel_scope.cancel()


async def test_inotify_single_file_replaced_by_rename(tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    put(path, manifest("web"))
    async with trio.open_nursery() as nursery:
        source, rec = await start(nursery, path, watch=True)
        with trio.fail_after(5):
            await source.watching.wait()
        put(tmp_path / "other.yaml", manifest("other"))  # not ours: no scan
        put(path, manifest("web", image="busybox:1.37"))
        with trio.fail_after(5):
            while rec.sets[-1][0].spec.containers[0].image != "busybox:1.37":
                await trio.sleep(0.01)
        assert all(len(s) == 1 for s in rec.sets)
        nursery.cancel_scope.cancel()


async def test_cancel_is_prompt_while_watching(tmp_path: Path) -> None:
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            source, _ = await start(nursery, tmp_path, watch=True)
            await source.watching.wait()
            started = trio.current_time()
            nursery.cancel_scope.cancel()
    assert trio.current_time() - started < 1.0


async def test_through_podconfig_edit_is_remove_then_add(tmp_path: Path) -> None:
    put(tmp_path / "web.yaml", manifest("web"))
    config = PodConfig([FILE_SOURCE])
    source = FileSource(tmp_path, NODE, check_frequency=3600.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(config.run)
        await nursery.start(source.run, config)
        with trio.fail_after(5):
            await source.watching.wait()
            first = await config.updates.receive()
            assert first.op is PodOperation.ADD and config.sources_ready()
            put(tmp_path / "web.yaml", manifest("web", image="busybox:1.37"))
            removed = await config.updates.receive()
            added = await config.updates.receive()
        assert removed == PodUpdate(PodOperation.REMOVE, FILE_SOURCE, first.pods)
        assert added.op is PodOperation.ADD
        assert added.pods[0].spec.containers[0].image == "busybox:1.37"
        nursery.cancel_scope.cancel()


async def test_not_a_directory_or_file_sends_nothing(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert await FileSource(fifo, NODE).scan() is None
