"""The desired pods: which of them are active (what the QoS cgroups are sized from)."""

from __future__ import annotations

import attrs

from kubelet.api import CONFIG_MIRROR, CONFIG_SOURCE, PodStatus
from kubelet.pods import PodManager
from kubelet.testing.builders import make_pod


def test_active_pods_leave_out_rejected_finished_and_deleting_ones() -> None:
    pods = PodManager()
    running = make_pod(name="run", uid="run")
    rejected = make_pod(name="rej", uid="rej")
    finished = make_pod(name="done", uid="done", status=PodStatus(phase="Succeeded"))
    deleting = make_pod(name="del", uid="del")
    deleting = attrs.evolve(
        deleting,
        metadata=attrs.evolve(deleting.metadata, deletion_timestamp="2027-01-01T00:00:00Z"),
    )
    for pod in (running, rejected, finished, deleting):
        pods.upsert(pod)
    pods.set_rejected("rej")
    assert [p.uid for p in pods.active()] == ["run"]
    pods.remove("rej")
    pods.upsert(rejected)  # the same UID again (a restarted source): admitted afresh
    assert [p.uid for p in pods.active()] == ["run", "rej"]


def test_a_mirror_pods_uid_translates_to_its_static_pods() -> None:
    pods = PodManager()
    static = make_pod(name="web-node1", uid="static", annotations={CONFIG_SOURCE: "file"})
    mirror = make_pod(name="web-node1", uid="mirror", annotations={CONFIG_MIRROR: "hash"})
    other = make_pod(name="other", uid="other")
    pods.upsert(static)
    pods.upsert(other)
    assert pods.translate_uid("mirror") == "mirror"  # no mirror known yet
    pods.set_mirror(mirror)
    assert [pods.translate_uid(u) for u in ("mirror", "static", "other", "x")] == [
        "static", "static", "other", "x",
    ]  # fmt: skip
    pods.remove("static")
    assert pods.translate_uid("mirror") == "mirror"  # the static pod went: nothing to map to
    pods.upsert(static)
    pods.remove_mirror(mirror)
    assert pods.translate_uid("mirror") == "mirror"
