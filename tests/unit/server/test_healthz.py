"""/healthz: the apiserver's output format, and the syncloop check against a stalled syncLoop."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import trio

from kubelet.api import Pod
from kubelet.config import KubeletConfiguration
from kubelet.pleg import PodLifecycleEvent
from kubelet.pods import PodManager, PodWorkers
from kubelet.pods.syncloop import Housekeeper, OrphanPod, SyncLoop, SyncLoopParts
from kubelet.pods.workers import PodSyncer, SyncResult
from kubelet.server import healthz
from kubelet.server.app import KubeletApp
from kubelet.server.asgi import Request, Response
from kubelet.sources import PodUpdate
from kubelet.stats import SummaryProvider


def get(path: str, **query: str) -> Request:
    return Request("GET", path, {k: [v] for k, v in query.items()}, {})


def body(response: object) -> tuple[int, str]:
    assert isinstance(response, Response)
    return response.status, response.body.decode()


def checks(sync: healthz.Check) -> list[healthz.NamedCheck]:
    return [
        healthz.NamedCheck("ping", healthz.ping),
        healthz.NamedCheck("log", healthz.LogFlushCheck()),
        healthz.NamedCheck("syncloop", sync),
    ]


def test_output_format() -> None:
    ok = checks(lambda: None)
    assert body(healthz.healthz(ok, get("/healthz"))) == (200, "ok")
    assert body(healthz.healthz(ok, get("/healthz", verbose=""))) == (
        200,
        "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n",
    )
    bad = checks(lambda: "sync Loop took longer than expected")
    assert body(healthz.healthz(bad, get("/healthz"))) == (
        500,
        "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n",
    )
    excluded = healthz.healthz(bad, get("/healthz", exclude="syncloop", verbose=""))
    assert body(excluded) == (
        200,
        "[+]ping ok\n[+]log ok\n[+]syncloop excluded: ok\nhealthz check passed\n",
    )
    unknown = body(healthz.healthz(ok, get("/healthz", exclude="nope")))
    assert unknown == (200, "ok")
    assert body(healthz.single(bad[2])) == (
        500,
        "internal server error: sync Loop took longer than expected\n",
    )


async def test_log_check(autojump_clock: trio.abc.Clock) -> None:
    check = healthz.LogFlushCheck()
    assert check() is None
    check.last_flush = trio.current_time()
    await trio.sleep(119)
    assert check() is None
    await trio.sleep(2)
    assert check() == "logging blocked"


class _Syncer(PodSyncer):
    async def sync_pod(self, pod: Pod) -> SyncResult:
        return SyncResult()

    async def terminate_pod(self, pod: Pod, grace: int | None) -> None:
        pass


class _StuckHousekeeper(Housekeeper):
    """Housekeeping that never returns: the syncLoop stalls inside it."""

    def listed_uids(self) -> None:
        return None

    async def runtime_pods(self) -> Iterable[OrphanPod]:
        await trio.sleep_forever()
        return []


async def test_syncloop_check_fails_when_the_loop_stalls(autojump_clock: trio.abc.Clock) -> None:
    updates_send, updates = trio.open_memory_channel[PodUpdate](0)
    events_send, events = trio.open_memory_channel[PodLifecycleEvent](0)
    workers = PodWorkers(_Syncer())
    loop = SyncLoop(
        SyncLoopParts(
            updates=updates,
            pleg_events=events,
            pods=PodManager(),
            workers=workers,
            housekeeper=_StuckHousekeeper(),
            sources_ready=lambda seen: True,
            sync_frequency=60.0,
        )
    )
    app = KubeletApp(
        backend=cast(Any, None),
        config=KubeletConfiguration(),
        node_name="n",
        stats=cast(SummaryProvider, None),
        checks=checks(healthz.sync_loop_check(lambda: loop.last_iteration, 60.0)),
    )
    assert body(await app.route(get("/healthz"))) == (200, "ok")  # never iterated yet
    async with trio.open_nursery() as nursery:
        await nursery.start(workers.run)
        await nursery.start(loop.run)
        await trio.sleep(10)  # housekeeping began at 2 s and hangs
        stalled_at = loop.last_iteration
        assert stalled_at is not None and stalled_at < 3
        await trio.sleep(stalled_at + 300 - trio.current_time() - 0.5)
        assert body(await app.route(get("/healthz"))) == (200, "ok")
        await trio.sleep(1)
        status, text = body(await app.route(get("/healthz")))
        assert status == 500 and "[-]syncloop failed: reason withheld" in text
        assert body(await app.route(get("/healthz/syncloop"))) == (
            500,
            "internal server error: sync Loop took longer than expected\n",
        )
        nursery.cancel_scope.cancel()
    del updates_send, events_send


def test_grace_is_twice_the_sync_frequency_when_longer() -> None:
    now = [1000.0]
    check = healthz.sync_loop_check(lambda: 0.0, 600.0, clock=lambda: now[0])
    assert check() is None  # 1000 s < 2 × 600 s
    now[0] = 1201.0
    assert check() == "sync Loop took longer than expected"
