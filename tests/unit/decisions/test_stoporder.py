"""Termination order: regular containers first, then sidecars in reverse order (pure)."""

from __future__ import annotations

from kubelet.api import Container, Pod
from kubelet.decisions import stop_prerequisites
from kubelet.testing.builders import make_pod


def pod(
    *,
    init: tuple[str, ...] = (),
    sidecars: tuple[str, ...] = (),
    regular: tuple[str, ...] = ("a", "b"),
) -> Pod:
    """Init containers in the order given; those named in ``sidecars`` restart Always."""
    return make_pod(
        *(Container(name=n, image="i") for n in regular),
        name="p",
        uid="u",
        init=tuple(
            Container(name=n, image="i", restart_policy="Always" if n in sidecars else None)
            for n in init
        ),
    )


def test_without_sidecars_nothing_waits() -> None:
    p = pod(init=("setup",))
    assert stop_prerequisites(p, ["a", "b"]) == {"a": frozenset(), "b": frozenset()}


def test_sidecars_wait_for_every_regular_container_and_the_next_sidecar() -> None:
    p = pod(init=("s1", "setup", "s2", "s3"), sidecars=("s1", "s2", "s3"))
    plan = stop_prerequisites(p, ["a", "b", "s1", "s2", "s3"])
    assert plan == {
        "a": frozenset(),
        "b": frozenset(),
        "s3": frozenset({"a", "b"}),
        "s2": frozenset({"a", "b", "s3"}),
        "s1": frozenset({"a", "b", "s2"}),
    }


def test_only_live_containers_are_waited_for() -> None:
    p = pod(init=("s1", "s2"), sidecars=("s1", "s2"))
    # b already exited: nobody waits for it
    assert stop_prerequisites(p, ["a", "s1", "s2"])["s2"] == frozenset({"a"})
    # every regular container gone: the last sidecar goes at once
    assert stop_prerequisites(p, ["s1", "s2"]) == {"s1": frozenset({"s2"}), "s2": frozenset()}


def test_a_stopped_sidecar_in_the_middle_does_not_break_the_chain() -> None:
    """Upstream waits for the next declared sidecar only; the chain is kept whole here."""
    p = pod(init=("s1", "s2", "s3"), sidecars=("s1", "s2", "s3"))
    plan = stop_prerequisites(p, ["a", "s1", "s3"])
    assert plan["s1"] == frozenset({"a", "s3"})
    assert plan["s3"] == frozenset({"a"})


def test_a_plain_init_container_still_running_neither_waits_nor_is_waited_for() -> None:
    p = pod(init=("s1", "setup"), sidecars=("s1",), regular=("a",))
    plan = stop_prerequisites(p, ["s1", "setup"])
    assert plan == {"s1": frozenset(), "setup": frozenset()}


def test_names_outside_the_spec_stop_at_once() -> None:
    p = pod(init=("s1",), sidecars=("s1",), regular=("a",))
    plan = stop_prerequisites(p, ["a", "old", "s1"])
    assert plan["old"] == frozenset()
    assert plan["s1"] == frozenset({"a"})
    assert stop_prerequisites(Pod(), ["x", "y"]) == {"x": frozenset(), "y": frozenset()}
