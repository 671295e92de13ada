"""The whole kubelet against FakeRuntime on a fake clock: start, restart, teardown."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path
from typing import Any

import pytest
import trio
from grpclib.const import Status

from kubelet.cri import api, connect, trace
from kubelet.decisions import criconfig
from kubelet.env import DnsSettings
from kubelet.metrics import exposition
from kubelet.testing import ContainerBehaviour, FakeRuntime

from .helpers import container_config, sandbox_config
from .kubelet_harness import KUBELET_IMAGES, NODE, WEB, running_kubelet, start_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


async def test_static_pod_starts(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        started = await h.wait_for(lambda: h.running("web", "app"))
        assert started < 2.5  # next relist (1 s) + sync
        (sandbox,) = h.sandboxes("web")
        assert sandbox.config.metadata.namespace == "default"
        labels = sandbox.config.labels
        assert labels["io.kubernetes.pod.name"] == f"web-{NODE}"
        (container,) = h.running("web", "app")
        assert container.config.annotations["io.kubernetes.container.restartCount"] == "0"
        assert container.log_path.endswith(
            f"default_web-{NODE}_{labels['io.kubernetes.pod.uid']}/app/0.log"
        )


CRASHER = """\
apiVersion: v1
kind: Pod
metadata:
  name: crasher
spec:
  containers:
  - name: app
    image: busybox:1.35
"""


async def test_crash_loop_backoff_10_20_40(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(exit_after=0.5, exit_code=1), container="app")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("crasher.yaml", CRASHER)
        await h.wait_for(lambda: len(h.containers("crasher", "app")) >= 1)
        await trio.sleep(200)
    starts = [c.time for c in fake.calls_of("StartContainer")]
    exits = [s + 0.5 for s in starts]
    gaps = [round(b - a, 1) for a, b in zip(exits, starts[1:], strict=False)]
    # first exit: restarted at once (after the PLEG notices); then 10, 20, 40, 80 s
    assert gaps[0] <= 1.5
    assert [round(g) for g in gaps[1:5]] == [10, 20, 40, 80]
    for g, nominal in zip(gaps[1:5], [10, 20, 40, 80], strict=True):
        assert nominal <= g < nominal + 1.0  # within a second of the nominal back-off
    # dead instances are pruned: the newest dead one is kept for logs and restart count
    assert len(h.containers("crasher", "app")) <= 2
    restart_counts = [int(c.args.get("attempt", -1)) for c in fake.calls_of("CreateContainer")]
    assert restart_counts[:5] == [0, 1, 2, 3, 4]


async def test_teardown_order_containers_then_sandbox(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    two = (
        WEB
        + """\
  - name: sidecar
    image: busybox:1.35
"""
    )
    async with running_kubelet(fake, short_tmp) as h:
        path = h.write("web.yaml", two)
        await h.wait_for(lambda: h.running("web", "app") and h.running("web", "sidecar"))
        path.unlink()
        gone_at = await h.wait_for(lambda: not h.sandboxes("web"))
        assert gone_at < 10
    teardown = [
        c.rpc
        for c in fake.calls
        if c.rpc in ("StopContainer", "StopPodSandbox", "RemoveContainer", "RemovePodSandbox")
    ]
    assert teardown == [
        "StopContainer",
        "StopContainer",
        "StopPodSandbox",
        "RemoveContainer",
        "RemoveContainer",
        "RemovePodSandbox",
    ]
    stops = fake.calls_of("StopContainer")
    assert stops[0].time == stops[1].time  # in parallel
    assert all(s.args["timeout"] == 30 for s in stops)


QUICK_AND_SLOW = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: {name}-app
    image: busybox:1.35
"""


async def _delete_two_pods(
    fake: FakeRuntime, short_tmp: Path, slow_stop: float
) -> tuple[float, float, float]:
    """A pod whose container stops at once and one whose container takes ``slow_stop``
    seconds, deleted together: (when the quick pod's sandbox stop began, when the slow
    container's stop ended, when the slow pod's sandbox stop began), from the deletion."""
    fake.behave(ContainerBehaviour(stop_takes=slow_stop), container="slow-app")
    async with running_kubelet(fake, short_tmp) as h:
        paths = [h.write(f"{n}.yaml", QUICK_AND_SLOW.format(name=n)) for n in ("quick", "slow")]
        await h.wait_for(lambda: h.running("quick", "quick-app") and h.running("slow", "slow-app"))
        (quick,), (slow,) = h.sandboxes("quick"), h.sandboxes("slow")
        (slow_app,) = h.running("slow", "slow-app")
        deleted = trio.current_time()
        for path in paths:
            path.unlink()
        await h.wait_for(lambda: not h.sandboxes(), timeout=60)
    (slow_stop_call,) = [
        c for c in fake.calls_of("StopContainer") if c.args["container_id"] == slow_app.id
    ]
    stops = {c.args["pod_sandbox_id"]: c.time - deleted for c in fake.calls_of("StopPodSandbox")}
    assert slow_stop_call.finished is not None
    return stops[quick.id], slow_stop_call.finished - deleted, stops[slow.id]


async def test_a_pods_cleanup_lets_other_pods_container_stops_end_first(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    quick_sandbox, slow_stopped, slow_sandbox = await _delete_two_pods(fake, short_tmp, 1.5)
    assert slow_stopped >= 1.5
    assert slow_stopped <= quick_sandbox < slow_stopped + 0.1  # waited for the slow stop
    assert slow_stopped <= slow_sandbox < slow_stopped + 0.1


async def test_a_pods_cleanup_waits_for_other_stops_two_seconds_at_most(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    quick_sandbox, slow_stopped, slow_sandbox = await _delete_two_pods(fake, short_tmp, 20)
    assert slow_stopped >= 20
    assert 2.0 <= quick_sandbox < 3.0  # STOPS_FIRST_LIMIT after its own stop, not 20 s
    assert slow_stopped <= slow_sandbox < slow_stopped + 0.1


async def test_order_holds_when_kubelet_is_cancelled_mid_teardown(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(stop_takes=math.inf), container="app")
    async with running_kubelet(fake, short_tmp) as h:
        path = h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        path.unlink()
        await h.wait_for(lambda: fake.calls_of("StopContainer"))
        await trio.sleep(5)  # StopContainer waits for its 30 s grace
        assert h.kubelet_scope is not None
        h.kubelet_scope.cancel()  # the kubelet dies mid-teardown
        await trio.sleep(1)
        assert fake.calls_of("StopPodSandbox") == []  # sandbox not touched before containers
        assert h.sandboxes("web")
        await start_kubelet(h)
        await h.wait_for(lambda: not h.sandboxes("web"), timeout=120)
    rpcs = [c.rpc for c in fake.calls if c.rpc in ("StopContainer", "StopPodSandbox")]
    assert rpcs.index("StopPodSandbox") > max(i for i, r in enumerate(rpcs) if r == "StopContainer")


async def test_hung_stop_container_is_bounded_by_its_deadline(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        path = h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        fake.faults.hang("StopContainer", times=1)
        path.unlink()
        first = await h.wait_for(lambda: fake.calls_of("StopContainer"))
        gone = await h.wait_for(lambda: not h.sandboxes("web"), timeout=400)
        # StopContainer deadline = runtime request timeout (120 s) + grace (30 s)
        sandbox_stop = fake.calls_of("StopPodSandbox")[0].time
        assert sandbox_stop - first == pytest.approx(150, abs=1.5)
        assert gone - first < 160


async def test_runtime_outage_kills_nothing_and_recovers(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        (before,) = h.running("web", "app")
        await fake.crash()
        await trio.sleep(60)
        await fake.restart()
        await trio.sleep(10)
        (after,) = h.running("web", "app")
        assert after.id == before.id
        assert [c for c in fake.calls if c.rpc.startswith(("Stop", "Remove"))] == []
        # the kubelet is healthy again: a new manifest starts
        h.write("other.yaml", WEB.replace("name: web", "name: other"))
        await h.wait_for(lambda: h.running("other", "app"), timeout=10)


async def test_orphans_removed_only_after_all_sources_ready(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    # an orphan: a pod the runtime holds that no source wants
    async with connect(fake.endpoint) as (runtime, _):
        cfg = sandbox_config("ghost", "ghost-uid")
        sid = await runtime.run_pod_sandbox(cfg)
        ghost = container_config("app", "busybox:1.35", pod="ghost", uid="ghost-uid")
        await runtime.start_container(await runtime.create_container(sid, ghost, cfg))
    # and a sandbox without kubelet labels: not ours, never touched
    async with connect(fake.endpoint) as (runtime, _):
        foreign = api.PodSandboxConfig(
            metadata=api.PodSandboxMetadata(name="foreign", uid="f", namespace="x")
        )
        foreign_id = await runtime.run_pod_sandbox(foreign)
    async with running_kubelet(fake, short_tmp) as h:
        await trio.sleep(1.5)
        removed = await h.wait_for(lambda: "ghost-uid" not in _uids(fake), timeout=20)
        assert removed >= 2.0  # the first housekeeping, after the file source was seen
        assert fake.calls_of("RemovePodSandbox")[0].args["pod_sandbox_id"] != foreign_id
        assert h.components is not None
        text = exposition(h.components.metrics.registry).decode().splitlines()
        assert "kubelet_orphaned_runtime_pods_total 1.0" in text
    assert foreign_id in fake.sandboxes


async def test_housekeeping_reads_the_pleg_listing_and_acts_on_a_fresh_one(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Steady state: the unfiltered lists are the PLEG's, one pair a second; housekeeping
    (every 2 s) reads its listing. An orphan that appears is still removed, after a
    listing of its own confirms it."""
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        await trio.sleep(5)
        before = len(fake.calls_of("ListPodSandbox"))
        await trio.sleep(20)  # no pod sync falls in here (every 60 s)
        # the PLEG's relists (21) and the eviction manager's summary of ready sandboxes
        # every 10 s (2); housekeeping listing for itself would add 10
        assert len(fake.calls_of("ListPodSandbox")) - before <= 23
        async with connect(fake.endpoint) as (runtime, _):
            cfg = sandbox_config("ghost", "ghost-uid")
            await runtime.run_pod_sandbox(cfg)
        await h.wait_for(lambda: "ghost-uid" not in _uids(fake), timeout=10)


async def test_a_periodic_sync_reads_the_pleg_cache(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream's GetNewerThan: a sync whose previous one ended before the last relist
    began takes the pod cache's view, so the minute's resync of an unchanged pod costs no
    CRI call. A pod whose container exits is still read and restarted at once."""
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        await trio.sleep(5)
        assert h.components is not None
        worker = h.components.lifecycle.workers.workers[
            next(iter(h.components.lifecycle.pods.uids()))
        ]
        syncs, reads = worker.syncs, len(fake.calls_of("PodSandboxStatus"))
        await trio.sleep(100)  # one resync at 60-90 s
        assert worker.syncs == syncs + 1
        assert len(fake.calls_of("PodSandboxStatus")) == reads
        [app] = h.running("web", "app")
        fake.exit_container(app.id, 1)
        await h.wait_for(
            lambda: h.running("web", "app") and h.running("web", "app")[0].id != app.id, timeout=5
        )


async def test_a_periodic_sync_of_a_running_pod_builds_no_sandbox_config(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The minute's resync of a pod that runs as it should creates nothing, so it does
    not derive the sandbox config (DNS, security context, cgroup parent) either; a pod
    whose container exits gets one again to start it."""
    built: list[str] = []
    real = criconfig.sandbox_config

    def counting(pod: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(pod.metadata.name)
        return real(pod, *args, **kwargs)

    monkeypatch.setattr("kubelet.runtime.podruntime.sandbox_config", counting)
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        await trio.sleep(5)
        assert built  # the start made one
        assert h.components is not None
        worker = h.components.lifecycle.workers.workers[
            next(iter(h.components.lifecycle.pods.uids()))
        ]
        syncs, before = worker.syncs, len(built)
        await trio.sleep(100)  # one resync at 60-90 s
        assert worker.syncs == syncs + 1
        assert len(built) == before
        [app] = h.running("web", "app")
        fake.exit_container(app.id, 1)
        await h.wait_for(
            lambda: h.running("web", "app") and h.running("web", "app")[0].id != app.id, timeout=5
        )
        assert len(built) > before


async def test_teardown_stops_containers_from_the_pleg_view(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Removing a manifest of a steady pod: StopContainer is the first call of the
    teardown (the PLEG's view says what runs); only the check that all went reads.
    The pod worker's own calls, told apart by the timing trace (the PLEG may refresh the
    pod meanwhile, with calls of its own)."""
    monkeypatch.setattr(trace, "TRACE", trace.Trace(str(short_tmp / "trace.jsonl")))
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        await trio.sleep(5)
        assert trace.TRACE is not None
        trace.TRACE.flush()
        before = len((short_tmp / "trace.jsonl").read_text().splitlines())
        (h.manifests / "web.yaml").unlink()
        await h.wait_for(lambda: not h.sandboxes("web"))
        trace.TRACE.flush()
        lines = (short_tmp / "trace.jsonl").read_text().splitlines()[before:]
        calls = [json.loads(line) for line in lines]
        teardown = [
            c["rpc"]
            for c in calls
            if c["k"] == "call" and c["pod"].startswith("web-") and not c["rpc"].startswith("List")
        ]
        assert teardown[0] == "StopContainer"
        assert "PodSandboxStatus" not in teardown[: teardown.index("RemovePodSandbox")]


async def test_a_new_pods_first_call_is_run_pod_sandbox(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod the PLEG has never listed starts from an empty view, as upstream's first
    sync: its worker's first CRI call is RunPodSandbox, no status read before it; its
    container's image status is read alongside, not after it."""
    monkeypatch.setattr(trace, "TRACE", trace.Trace(str(short_tmp / "trace.jsonl")))
    async with running_kubelet(fake, short_tmp) as h:
        await trio.sleep(3)  # the PLEG has relisted
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        assert trace.TRACE is not None
        trace.TRACE.flush()
        lines = (short_tmp / "trace.jsonl").read_text().splitlines()
        calls = [json.loads(line) for line in lines]
        ours = [c for c in calls if c["k"] == "call" and c["pod"].startswith("web-")]
        ours.sort(key=lambda c: c["t0"])
        mine = [c["rpc"] for c in ours]
        before_start = mine[: mine.index("StartContainer")]
        assert before_start[0] == "RunPodSandbox"
        assert not {"ListPodSandbox", "ListContainers", "ContainerStatus"} & set(before_start)
        # the image's status (and, for the kubelet's first pod, the pull records' image
        # list) is read while the sandbox is created, and only then
        assert set(before_start[1:3]) == {"ImageStatus", "ListImages"}
        assert before_start[3] == "PodSandboxStatus"
        assert all(c["t0"] < ours[0]["t1"] for c in ours[1:3])
        assert mine.count("ImageStatus") == 1 and mine.count("ListImages") == 1


def _uids(fake: FakeRuntime) -> set[str]:
    return {s.config.metadata.uid for s in fake.sandboxes.values()}


async def test_no_orphan_cleanup_before_sources_are_seen(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with connect(fake.endpoint) as (runtime, _):
        cfg = sandbox_config("ghost", "ghost-uid")
        await runtime.run_pod_sandbox(cfg)
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url_fails = ["--manifest-url", f"http://127.0.0.1:{port}/pods", "--http-check-frequency", "1s"]
    async with running_kubelet(fake, short_tmp, *url_fails) as h:
        await trio.sleep(30)  # the URL source never answers: not all sources seen
        assert "ghost-uid" in _uids(fake)
        assert fake.calls_of("StopPodSandbox") == []
        assert h.components is not None
        assert not h.components.config.sources_ready()


async def test_restarted_kubelet_adopts_running_containers(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        h.write("crasher.yaml", CRASHER)
        await h.wait_for(lambda: h.running("web", "app") and h.running("crasher", "app"))
        ids = {c.id for c in fake.running()}
        sandboxes = set(fake.sandboxes)
        await h.restart_kubelet()
        await trio.sleep(30)
        assert {c.id for c in fake.running()} == ids
        assert set(fake.sandboxes) == sandboxes
        assert [c for c in fake.calls if c.rpc.startswith(("Stop", "Remove"))] == []
        assert len(fake.calls_of("CreateContainer")) == 2


async def test_sync_failure_backs_off_without_touching_others(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.faults.fail("RunPodSandbox", Status.UNKNOWN, "cni plugin not initialized", times=1)
    async with running_kubelet(fake, short_tmp) as h:
        h.write("a.yaml", WEB.replace("name: web", "name: a"))
        await h.wait_for(lambda: fake.calls_of("RunPodSandbox"))
        h.write("b.yaml", WEB.replace("name: web", "name: b"))
        b_at = await h.wait_for(lambda: h.running("b", "app"))
        a_at = await h.wait_for(lambda: h.running("a", "app"), timeout=30)
        assert a_at - fake.calls_of("RunPodSandbox")[0].time == pytest.approx(10, abs=1.5)
        assert b_at < a_at


async def test_requests_during_a_slow_sync_coalesce_into_one_more_sync(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.faults.delay("StartContainer", 10.5, times=1)  # the first sync lasts 10.5 s
    async with running_kubelet(fake, short_tmp) as h:
        assert h.components is not None
        syncer = h.components.syncer
        starts: list[float] = []
        real_sync = syncer.sync_pod

        async def counting_sync(pod: object) -> object:
            starts.append(trio.current_time())
            return await real_sync(pod)  # type: ignore[arg-type]

        syncer.sync_pod = counting_sync  # type: ignore[method-assign, assignment]
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: fake.calls_of("StartContainer"))
        workers = h.components.workers
        (worker,) = workers.workers.values()
        for _ in range(5):  # five more requests while busy (PLEG adds its own)
            workers.requeue(worker.uid)
            await trio.sleep(1)
        await h.wait_for(lambda: fake.calls_of("StartContainer")[0].outcome == "ok")
        busy_end = fake.calls_of("StartContainer")[0].finished
        assert busy_end is not None
        await trio.sleep(5)
    during = [t for t in starts if starts[0] < t < busy_end]
    right_after = [t for t in starts if busy_end <= t < busy_end + 0.01]
    assert during == []  # one sync at a time
    assert len(right_after) == 1  # every request made while busy: one sync, at once
    assert len(fake.calls_of("RunPodSandbox")) == 1
    assert len(fake.calls_of("StartContainer")) == 1


async def test_metrics_move_with_pod_starts(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    from prometheus_client.openmetrics.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        await trio.sleep(2)
        assert h.components is not None
        text = generate_latest(h.components.metrics.registry).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("kubelet_started_containers_total", (("container_type", "container"),))] == 1
    assert samples[("kubelet_started_pods_total", ())] == 1
    assert samples[("kubelet_running_pods", ())] == 1
    assert samples[("kubelet_pod_start_duration_seconds_count", ())] == 1
    assert (
        samples[("kubelet_runtime_operations_total", (("operation_type", "run_podsandbox"),))] == 1
    )
    assert samples[("kubelet_pleg_relist_duration_seconds_count", ())] >= 2


async def test_metrics_upstream_adds_with_a_pod(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """What /metrics serves once a static pod runs: the families upstream has beside the
    pod start (names, labels, the counters upstream names without ``_total``)."""
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        await trio.sleep(2)
        assert h.components is not None
        text = exposition(h.components.metrics.registry).decode()
    lines = text.splitlines()
    for line in (
        "# TYPE kubelet_pleg_discard_events counter",
        "kubelet_pleg_discard_events 0.0",
        "kubelet_containers_per_pod_count_count 1.0",
        "kubelet_pod_worker_start_duration_seconds_count 1.0",
        'kubelet_run_podsandbox_duration_seconds_count{runtime_handler=""} 1.0',
        'kubelet_desired_pods{static="true"} 1.0',
        'kubelet_desired_pods{static=""} 0.0',
        'kubelet_active_pods{static="true"} 1.0',
        "kubelet_mirror_pods 0.0",
        "kubelet_managed_ephemeral_containers 0.0",
        "kubelet_cgroup_version 1.0",  # the harness's tree is v1
        'kubelet_working_pods{config="desired",lifecycle="sync",static="true"} 1.0',
        'kubelet_working_pods{config="runtime_only",lifecycle="sync",static="unknown"} 0.0',
        "kubelet_orphaned_runtime_pods_total 0.0",
    ):
        assert line in lines, line
    for operation in ("create", "update"):  # kubepods, the QoS cgroups, the pod's
        count = f'kubelet_cgroup_manager_duration_seconds_count{{operation_type="{operation}"}}'
        assert any(line.startswith(count + " ") and float(line.split()[1]) >= 1 for line in lines)
    assert "_created" not in text


async def test_empty_dir_is_shared_and_the_pod_directory_goes_with_the_pod(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    shared = """\
apiVersion: v1
kind: Pod
metadata:
  name: shared
spec:
  volumes:
  - name: scratch
    emptyDir: {}
  containers:
  - name: writer
    image: busybox:1.35
    volumeMounts:
    - {name: scratch, mountPath: /out}
  - name: reader
    image: busybox:1.35
    volumeMounts:
    - {name: scratch, mountPath: /in, readOnly: true}
"""
    async with running_kubelet(fake, short_tmp) as h:
        path = h.write("shared.yaml", shared)
        await h.wait_for(lambda: h.running("shared", "writer") and h.running("shared", "reader"))
        (writer,) = h.running("shared", "writer")
        (reader,) = h.running("shared", "reader")
        out = next(m for m in writer.config.mounts if m.container_path == "/out")
        into = next(m for m in reader.config.mounts if m.container_path == "/in")
        assert out.host_path == into.host_path and into.readonly
        assert "/volumes/kubernetes.io~empty-dir/scratch" in out.host_path
        assert Path(out.host_path).is_dir()
        pod_dir = Path(out.host_path).parents[2]
        assert pod_dir.parent.name == "pods"
        path.unlink()
        await h.wait_for(lambda: not h.sandboxes("shared"))
        await trio.sleep(1)
        assert not pod_dir.exists()


async def test_sandbox_dns_and_managed_etc_hosts(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    resolv = short_tmp / "resolv.conf"
    resolv.write_text("nameserver 192.0.2.53\nsearch corp.example\n")
    extra = [
        "--cluster-dns",
        "10.96.0.10",
        "--cluster-domain",
        "cluster.local",
        "--resolv-conf",
        str(resolv),
    ]
    named = WEB.replace("spec:\n", "spec:\n  hostname: web\n  subdomain: svc\n")
    async with running_kubelet(fake, short_tmp, *extra) as h:
        h.write("web.yaml", named)
        await h.wait_for(lambda: h.running("web", "app"))
        (sandbox,) = h.sandboxes("web")
        dns = sandbox.config.dns_config
        assert list(dns.servers) == ["10.96.0.10"]
        assert list(dns.searches) == [
            "default.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
            "corp.example",
        ]
        assert list(dns.options) == ["ndots:5"]
        (container,) = h.running("web", "app")
        hosts = next(m for m in container.config.mounts if m.container_path == "/etc/hosts")
        text = Path(hosts.host_path).read_text()
        assert text.startswith("# Kubernetes-managed hosts file.")
        assert f"{sandbox.ip}\tweb.svc.default.svc.cluster.local\tweb" in text


async def test_node_etc_hosts_is_read_for_host_network_pods_only(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The node's /etc/hosts goes into a hostNetwork pod's managed hosts file; for any
    other pod it is not read at all (once per container start, for nothing)."""
    reads: list[str] = []

    def node_hosts(self: DnsSettings) -> str:
        reads.append(self.hosts_file)
        return "192.0.2.1\tnode-alias\n"

    monkeypatch.setattr(DnsSettings, "node_hosts", node_hosts)
    host = WEB.replace("spec:\n", "spec:\n  hostNetwork: true\n").replace("web", "host")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        assert reads == []
        h.write("host.yaml", host)
        await h.wait_for(lambda: h.running("host", "app"))
        (container,) = h.running("host", "app")
        hosts = next(m for m in container.config.mounts if m.container_path == "/etc/hosts")
        assert "192.0.2.1\tnode-alias" in Path(hosts.host_path).read_text()
        assert reads


async def test_orphaned_pod_directories_are_swept(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    leftover = (
        short_tmp / "root" / "pods" / "gone-uid" / "volumes" / "kubernetes.io~empty-dir" / "x"
    )
    leftover.mkdir(parents=True)
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        await trio.sleep(3)  # a housekeeping pass after every source was seen
        assert not (short_tmp / "root" / "pods" / "gone-uid").exists()
        (container,) = h.running("web", "app")
        uid = container.config.labels["io.kubernetes.pod.uid"]
        assert (short_tmp / "root" / "pods" / uid).exists()  # a live pod's directory stays


INIT_THEN_CRASH = """\
apiVersion: v1
kind: Pod
metadata:
  name: crasher
  namespace: default
spec:
  initContainers:
  - name: init
    image: busybox:1.35
  containers:
  - name: app
    image: busybox:1.35
"""


async def test_each_container_exit_counted_once(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """kubelet_terminated_containers_total: the init container's completion once, each
    crash of the app once, however many syncs and status updates report them."""
    fake.behave(ContainerBehaviour(exit_after=1), container="init")
    fake.behave(ContainerBehaviour(exit_after=2, exit_code=3), container="app")

    async with running_kubelet(fake, short_tmp) as h:
        h.write("crasher.yaml", INIT_THEN_CRASH)
        await h.wait_for(lambda: len(fake.calls_of("StartContainer")) >= 4, timeout=120)
        await trio.sleep(1)  # the third run lasts two seconds: two crashes so far
        assert h.components is not None
        text = exposition(h.components.metrics.registry).decode().splitlines()
    family = "kubelet_terminated_containers_total"
    completed = f'{family}{{container_type="init_container",exit_code="0",reason="Completed"}}'
    crashes = f'{family}{{container_type="container",exit_code="3",reason="Error"}}'
    assert f"{completed} 1.0" in text
    assert f"{crashes} 2.0" in text
