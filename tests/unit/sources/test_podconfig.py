"""PodStorage merge against upstream's vectors (CFG-01…CFG-16), and the trio PodConfig."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from kubelet.api import Pod, from_wire
from kubelet.cri import labels
from kubelet.sources import ALL_SOURCE, PodConfig, PodOperation, PodStorage, PodUpdate, podconfig
from kubelet.sources.podconfig import UPDATES_BUFFER

ADD, SET, UPDATE, DELETE, REMOVE, RECONCILE = (
    PodOperation.ADD,
    PodOperation.SET,
    PodOperation.UPDATE,
    PodOperation.DELETE,
    PodOperation.REMOVE,
    PodOperation.RECONCILE,
)
NOW = "2026-01-02T03:04:05.123456Z"


def make_pod(
    name: str,
    namespace: str = "new",
    *,
    uid: str | None = None,
    image: str = "img",
    **meta: Any,
) -> Pod:
    return from_wire(
        Pod,
        {
            "metadata": {"name": name, "namespace": namespace, "uid": uid or name + "-uid", **meta},
            "spec": {"containers": [{"name": "c", "image": image}]},
        },
    )


def seen(pod: Pod, source: str = "test", when: str = NOW) -> Pod:
    """``pod`` as the storage stores it: annotated with its source and first-seen time."""
    ann = {**pod.metadata.annotations, labels.CONFIG_SOURCE: source, labels.CONFIG_SEEN: when}
    return attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, annotations=ann))


def with_status_message(pod: Pod, message: str) -> Pod:
    return attrs.evolve(pod, status=attrs.evolve(pod.status, message=message))


def with_image(pod: Pod, image: str) -> Pod:
    ctr = attrs.evolve(pod.spec.containers[0], image=image)
    return attrs.evolve(pod, spec=attrs.evolve(pod.spec, containers=(ctr,)))


def with_meta(pod: Pod, **changes: Any) -> Pod:
    return attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, **changes))


@pytest.fixture
def storage() -> PodStorage:
    return PodStorage(clock=lambda: NOW)


def names(update: PodUpdate) -> list[str]:
    return [p.metadata.name for p in update.pods]


def test_cfg01_new_pod_added(storage: PodStorage) -> None:
    pod = make_pod("foo")
    assert storage.merge("test", ADD, [pod]) == [PodUpdate(ADD, "test", (seen(pod),))]
    assert storage.sync() == PodUpdate(SET, ALL_SOURCE, (seen(pod),))


def test_cfg02_namespace_is_not_defaulted(storage: PodStorage) -> None:
    pod = make_pod("foo", "")
    [update] = storage.merge("test", ADD, [pod])
    assert update.op is ADD and update.pods[0].metadata.namespace == ""


def test_cfg03_same_name_different_namespaces(storage: PodStorage) -> None:
    a, b = make_pod("foo", "default", uid="1"), make_pod("foo", "new", uid="2")
    assert storage.merge("test", ADD, [a]) == [PodUpdate(ADD, "test", (seen(a),))]
    assert storage.merge("test", ADD, [b]) == [PodUpdate(ADD, "test", (seen(b),))]
    assert storage.sync().pods == (seen(a), seen(b))


def test_cfg04_identical_pod_again_is_nothing(storage: PodStorage) -> None:
    pod = make_pod("foo")
    storage.merge("test", ADD, [pod])
    assert storage.merge("test", ADD, [pod]) == []


def test_the_same_objects_again_are_not_compared(
    storage: PodStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API source resends every pod on every watch event; unchanged pods arrive as
    the very objects of the last message and must cost no comparison (1000 pods: 0.4 ms
    per message instead of 6 ms)."""
    a, b = make_pod("a"), make_pod("b")
    storage.merge("api", SET, [a, b])
    compared: list[str] = []
    real = podconfig.check_and_update

    def spy(existing: Pod, ref: Pod) -> tuple[Pod, PodOperation | None]:
        compared.append(ref.metadata.name)
        return real(existing, ref)

    monkeypatch.setattr(podconfig, "check_and_update", spy)
    assert storage.merge("api", SET, [a, b]) == []
    assert compared == []
    b2 = with_image(b, "other")
    assert storage.merge("api", SET, [a, b2]) == [PodUpdate(UPDATE, "api", (seen(b2, "api"),))]
    assert compared == ["b"]
    # back to the older object: compared again (it is not the last one), an update
    assert storage.merge("api", SET, [a, b]) == [PodUpdate(UPDATE, "api", (seen(b, "api"),))]
    # a removed pod that comes back as the same object is a new pod
    storage.merge("api", REMOVE, [a])
    assert storage.merge("api", ADD, [a]) == [PodUpdate(ADD, "api", (seen(a, "api"),))]


def test_the_kubelet_reads_pods_through_its_view() -> None:
    """``ContainerRestartRules`` off: every pod is stored, compared and handed on without
    the container-level restart fields (``sources.run.pod_view``)."""
    from kubelet.config import FeatureGates
    from kubelet.sources.run import pod_view

    off = FeatureGates({"ContainerRestartRules": False})
    assert pod_view(FeatureGates()) is None
    view = pod_view(off)
    assert view is not None
    storage = PodStorage(clock=lambda: NOW, view=view)
    pod = make_pod("foo")
    own = attrs.evolve(pod.spec.containers[0], restart_policy="Never")
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, containers=(own,)))
    [update] = storage.merge("api", ADD, [pod])
    assert update.pods[0].spec.containers[0].restart_policy is None
    # an equal copy (compared, not the same object): seen through the view, no update
    assert storage.merge("api", ADD, [attrs.evolve(pod)]) == []


def test_pod_level_resources_are_not_seen_with_their_gate_off() -> None:
    """``PodLevelResources`` off: upstream's kubelet reads no ``spec.resources`` (QoS
    class, cgroups, admission, eviction); the view takes it away for all of them."""
    from kubelet.api import Quantity, ResourceRequirements
    from kubelet.config import FeatureGates
    from kubelet.decisions import BEST_EFFORT, GUARANTEED
    from kubelet.decisions.qos import compute_pod_qos
    from kubelet.sources.run import pod_view

    both = {"cpu": Quantity("1"), "memory": Quantity("1Gi")}
    pod = make_pod("foo")
    pod = attrs.evolve(
        pod, spec=attrs.evolve(pod.spec, resources=ResourceRequirements(requests=both, limits=both))
    )
    assert compute_pod_qos(pod) == GUARANTEED
    view = pod_view(FeatureGates({"PodLevelResources": False}))
    assert view is not None
    [update] = PodStorage(clock=lambda: NOW, view=view).merge("api", ADD, [pod])
    assert update.pods[0].spec.resources is None
    assert compute_pod_qos(update.pods[0]) == BEST_EFFORT
    on = pod_view(FeatureGates())
    assert on is None  # both gates on by default: pods are read as they come


def test_cfg05_duplicate_full_name_first_wins_with_event() -> None:
    events: list[tuple[Pod, str, str, str]] = []
    storage = PodStorage(on_event=lambda *e: events.append(e), clock=lambda: NOW)
    first, second = make_pod("a", "ns", uid="uid1"), make_pod("a", "ns", uid="uid2")
    assert storage.merge("test", SET, [first, second]) == [PodUpdate(ADD, "test", (seen(first),))]
    [(pod, kind, reason, message)] = events
    assert (pod, kind, reason) == (second, "Warning", "FailedValidation")
    assert "duplicate pod name" in message and "a_ns(uid2)" in message
    # per update and per source: another source may use the same name
    assert storage.merge("other", SET, [second]) == [
        PodUpdate(ADD, "other", (seen(second, "other"),))
    ]


def test_duplicates_are_reported_once_per_state_change_naming_the_file(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A relist that finds the same duplicate again says nothing; one that no longer finds
    it says so once; a duplicate that comes back is reported again."""
    events: list[tuple[Pod, str, str, str]] = []
    storage = PodStorage(on_event=lambda *e: events.append(e), clock=lambda: NOW)
    first, second = make_pod("a", "ns", uid="uid1"), make_pod("a", "ns", uid="uid2")
    origins = {"uid1": "/m/a.yaml", "uid2": "/m/b.yaml"}
    caplog.set_level("INFO", logger="kubelet.sources.podconfig")
    for _ in range(3):
        storage.merge("file", SET, [first, second], origins=origins)
    [line] = [r.getMessage() for r in caplog.records]
    assert line == (
        "pod failed validation due to duplicate pod name, ignoring: pod=ns/a source=file "
        "from=/m/b.yaml (the pod from /m/a.yaml keeps the name)"
    )
    [(_, _, _, message)] = events
    assert (
        message
        == "Error validating pod a_ns(uid2) from /m/b.yaml due to duplicate pod name 'a', ignoring"
    )
    storage.merge("file", SET, [first], origins=origins)
    storage.merge("file", SET, [first], origins=origins)
    assert [r.getMessage() for r in caplog.records][1:] == [
        "pod a_ns (UID uid2) from source file is no longer a duplicate"
    ]
    storage.merge("file", SET, [first, second], origins=origins)
    assert len(caplog.records) == 3 and len(events) == 2
    # without origins (the API source) the line names the source alone
    storage.merge("api", ADD, [first, second])
    storage.merge("api", ADD, [first, second])
    assert caplog.records[-1].getMessage().endswith("pod=ns/a source=api")
    assert len(caplog.records) == 4


def test_cfg06_added_updated_removed(storage: PodStorage) -> None:
    pod = make_pod("foo")
    storage.merge("test", ADD, [pod])
    changed = with_image(pod, "other")
    [update] = storage.merge("test", ADD, [changed])
    assert update == PodUpdate(UPDATE, "test", (seen(changed),))
    assert storage.merge("test", REMOVE, [changed]) == [PodUpdate(REMOVE, "test", (seen(changed),))]
    assert storage.all_pods() == []


def test_cfg07_graceful_delete(storage: PodStorage) -> None:
    pod = make_pod("foo")
    storage.merge("test", ADD, [pod])
    deleting = with_meta(pod, deletion_timestamp=NOW, deletion_grace_period_seconds=30)
    assert storage.merge("test", DELETE, [deleting]) == [
        PodUpdate(DELETE, "test", (seen(deleting),))
    ]


def test_cfg08_set_removes_adds_updates_in_order(storage: PodStorage) -> None:
    foo, foo2, foo3, foo4 = (make_pod(n) for n in ("foo", "foo2", "foo3", "foo4"))
    storage.merge("test", ADD, [foo, foo2, foo3])
    foo2_changed = with_image(foo2, "new-image")
    assert storage.merge("test", SET, [foo2_changed, foo3, foo4]) == [
        PodUpdate(REMOVE, "test", (seen(foo),)),
        PodUpdate(ADD, "test", (seen(foo4),)),
        PodUpdate(UPDATE, "test", (seen(foo2_changed),)),
    ]


@pytest.mark.parametrize("op", [ADD, SET], ids=["CFG-09-ADD", "CFG-09-SET"])
def test_cfg09_status_only_change_reconciles(storage: PodStorage, op: PodOperation) -> None:
    pods = [make_pod(f"p{i}") for i in range(3)]
    [added] = storage.merge("test", op, pods)
    assert added == PodUpdate(ADD, "test", tuple(seen(p) for p in pods))
    assert storage.merge("test", op, pods) == []
    p0 = with_status_message(pods[0], "changed")
    assert storage.merge("test", op, [p0, *pods[1:]]) == [PodUpdate(RECONCILE, "test", (seen(p0),))]
    assert storage.all_pods()[0].status.message == "changed"  # the stored status is replaced
    p0 = with_image(with_status_message(p0, "again"), "new")
    assert storage.merge("test", op, [p0, *pods[1:]]) == [PodUpdate(UPDATE, "test", (seen(p0),))]


def test_cfg10_initial_empty_set_is_an_empty_add(storage: PodStorage) -> None:
    assert storage.merge("test", SET, []) == [PodUpdate(ADD, "test", ())]
    assert storage.merge("test", SET, []) == []
    pod = make_pod("foo")
    assert storage.merge("test", ADD, [pod]) == [PodUpdate(ADD, "test", (seen(pod),))]


def test_cfg10_first_set_with_only_removals_and_reconciles_still_signals(
    storage: PodStorage,
) -> None:
    pod = make_pod("foo")
    storage.merge("test", ADD, [pod])  # an ADD does not make the source "seen"
    assert storage.merge("test", SET, [with_status_message(pod, "x")]) == [
        PodUpdate(ADD, "test", ()),
        PodUpdate(RECONCILE, "test", (seen(with_status_message(pod, "x")),)),
    ]


def test_cfg11_annotation_changes_are_updates(storage: PodStorage) -> None:
    foo1, foo3 = make_pod("foo1"), make_pod("foo3")
    foo2 = make_pod("foo2", annotations={"blah": "blah"})
    storage.merge("test", SET, [foo1, foo2, foo3])
    for ann in ({"blah": "superblah"}, {"blah": "superblah", "otherblah": "x"}, {}):
        changed = with_meta(foo2, annotations=ann)
        assert storage.merge("test", SET, [foo1, changed, foo3]) == [
            PodUpdate(UPDATE, "test", (seen(changed),))
        ]


def test_cfg12_label_changes_are_updates(storage: PodStorage) -> None:
    foo = make_pod("foo2", labels={"key": "value"})
    storage.merge("test", SET, [foo])
    changed = with_meta(foo, labels={"key": "newValue"})
    assert storage.merge("test", SET, [changed]) == [PodUpdate(UPDATE, "test", (seen(changed),))]


def test_cfg13_remove_of_unknown_uid_is_nothing(storage: PodStorage) -> None:
    assert storage.merge("test", REMOVE, [make_pod("x")]) == []


def test_cfg14_set_drops_missing_pods(storage: PodStorage) -> None:
    a, b = make_pod("a"), make_pod("b")
    storage.merge("test", SET, [a, b])
    assert storage.merge("test", SET, [b]) == [PodUpdate(REMOVE, "test", (seen(a),))]


def test_cfg15_seen_all_sources_needs_a_set_from_each() -> None:
    storage = PodStorage(["file", "api"], clock=lambda: NOW)
    assert not storage.seen_all_sources({"file", "api"})
    storage.merge("file", SET, [])
    storage.merge("api", ADD, [make_pod("a")])
    assert not storage.sources_ready()
    assert not storage.seen_all_sources({"file", "api"})
    storage.merge("api", SET, [make_pod("a")])
    assert storage.sources_ready()
    assert storage.seen_all_sources({"file", "api"})
    assert not storage.seen_all_sources({"file"})


def test_cfg16_sync_is_the_merged_snapshot_across_sources(storage: PodStorage) -> None:
    """Snapshot modes were removed upstream; their SET is what sync() gives on demand."""
    a, b = make_pod("a"), make_pod("b")
    storage.merge("file", SET, [a])
    storage.merge("api", SET, [b])
    assert storage.sync() == PodUpdate(SET, ALL_SOURCE, (seen(a, "file"), seen(b, "api")))
    storage.merge("file", SET, [])
    assert storage.sync() == PodUpdate(SET, ALL_SOURCE, (seen(b, "api"),))


# -- details of the change rules -----------------------------------------------------------


def test_update_keeps_first_seen_and_copies_generation(storage: PodStorage) -> None:
    pod = make_pod("foo", generation=1)
    storage.merge("test", SET, [pod])
    changed = with_meta(with_image(pod, "x"), generation=2)
    [update] = storage.merge("test", SET, [changed], now="later")
    stored = update.pods[0]
    assert stored.metadata.annotations[labels.CONFIG_SEEN] == NOW
    assert stored.metadata.generation == 2


def test_local_annotations_are_not_a_change(storage: PodStorage) -> None:
    pod = make_pod("foo")
    storage.merge("test", SET, [pod])
    mirrored = with_meta(pod, annotations={labels.CONFIG_MIRROR: "abc", labels.CONFIG_SEEN: "x"})
    assert storage.merge("test", SET, [mirrored]) == []


def test_update_op_for_an_unknown_pod_is_an_add(storage: PodStorage) -> None:
    pod = make_pod("foo")
    assert storage.merge("test", UPDATE, [pod]) == [PodUpdate(ADD, "test", (seen(pod),))]


def test_emission_order_in_one_merge(storage: PodStorage) -> None:
    keep, gone, upd, dele, rec = (make_pod(n) for n in ("keep", "gone", "upd", "dele", "rec"))
    storage.merge("test", SET, [keep, gone, upd, dele, rec])
    new = make_pod("new")
    out = storage.merge(
        "test",
        SET,
        [
            keep,
            with_image(upd, "u"),
            with_meta(dele, deletion_timestamp=NOW),
            with_status_message(rec, "r"),
            new,
        ],
    )
    assert [(u.op, names(u)) for u in out] == [
        (REMOVE, ["gone"]),
        (ADD, ["new"]),
        (UPDATE, ["upd"]),
        (DELETE, ["dele"]),
        (RECONCILE, ["rec"]),
    ]


# -- the trio PodConfig ---------------------------------------------------------------------


async def test_podconfig_delivers_in_order_with_backpressure() -> None:
    config = PodConfig(["test"], clock=lambda: NOW)
    pods = [make_pod(f"p{i}") for i in range(UPDATES_BUFFER + 10)]
    async with trio.open_nursery() as nursery:
        await nursery.start(config.run)

        async def produce() -> None:
            for pod in pods:
                await config.update("test", ADD, [pod])

        nursery.start_soon(produce)
        await trio.testing.wait_all_tasks_blocked()
        # the output buffer is full and the producer is held back, nothing is dropped
        assert config.updates.statistics().current_buffer_used == UPDATES_BUFFER
        received = [await config.updates.receive() for _ in pods]
        assert [u.pods[0].metadata.name for u in received] == [p.metadata.name for p in pods]
        await config.sync()
        snapshot = await config.updates.receive()
        assert snapshot.op is SET and len(snapshot.pods) == len(pods)
        nursery.cancel_scope.cancel()


async def test_podconfig_readiness_follows_sets() -> None:
    config = PodConfig(clock=lambda: NOW)
    config.register("file")
    async with trio.open_nursery() as nursery:
        await nursery.start(config.run)
        assert not config.sources_ready()
        await config.update("file", SET, [])
        assert await config.updates.receive() == PodUpdate(ADD, "file", ())
        assert config.sources_ready() and config.seen_all_sources({"file"})
        nursery.cancel_scope.cancel()


def test_an_added_ephemeral_container_is_an_update(storage: PodStorage) -> None:
    """``kubectl debug`` only changes ``spec.ephemeralContainers`` (and the generation):
    the syncLoop must hear of it as an UPDATE, so the worker starts the container."""
    pod = make_pod("dbg")
    storage.merge("api", SET, [pod])
    debug = from_wire(
        Pod,
        {
            "metadata": {"name": "dbg", "namespace": "new", "uid": "dbg-uid", "generation": 2},
            "spec": {
                "containers": [{"name": "c", "image": "img"}],
                "ephemeralContainers": [
                    {"name": "debugger", "image": "busybox", "targetContainerName": "c"}
                ],
            },
        },
    )
    [update] = storage.merge("api", SET, [debug])
    assert update.op is UPDATE
    (stored,) = update.pods
    assert [c.target_container_name for c in stored.spec.ephemeral_containers] == ["c"]
    assert stored.metadata.generation == 2


@attrs.define
class Watch:
    observed: list[str] = attrs.field(factory=list)
    forgotten: list[str] = attrs.field(factory=list)

    def observed_on_watch(self, pod: Pod) -> None:
        self.observed.append(pod.metadata.name)

    def forget(self, uid: str) -> None:
        self.forgotten.append(uid)


def test_the_startup_tracker_hears_every_api_pod_each_update() -> None:
    """As upstream's ObservedPodOnWatch: each pod of each API update, changed or not (the
    watch may show a pod running only after its status write); static sources never."""
    watch = Watch()
    storage = PodStorage(clock=lambda: NOW, watch=watch)
    a, b = make_pod("a"), make_pod("b")
    storage.merge("api", SET, [a, b])
    storage.merge("api", SET, [a, with_status_message(b, "x")])
    storage.merge("file", SET, [make_pod("static")])
    assert watch.observed == ["a", "b", "a", "b"]
    storage.merge("api", SET, [a])
    storage.merge("api", REMOVE, [a])
    assert watch.observed == ["a", "b", "a", "b", "a"]
    assert watch.forgotten == ["b-uid", "a-uid"]
