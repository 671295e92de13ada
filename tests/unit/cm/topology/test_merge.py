"""The topology manager's policies merging hints, as upstream's policy tests."""

import pytest

from kubelet.cm.hints import TopologyHint, is_narrower, mask_of
from kubelet.cm.topology.merge import (
    NumaInfo,
    OptionError,
    PolicyOptions,
    merge,
    provider_hints,
)

TWO = NumaInfo(nodes=(0, 1))
N0, N1, BOTH = mask_of([0]), mask_of([1]), mask_of([0, 1])


def H(mask: int | None, preferred: bool) -> TopologyHint:
    return TopologyHint(mask, preferred)


def test_narrower_is_fewer_nodes_then_lower_numbered_ones() -> None:
    assert is_narrower(N1, BOTH)
    assert is_narrower(N0, N1) and not is_narrower(N1, N0)


def test_providers_without_preference_and_without_placement() -> None:
    assert provider_hints([{}]) == [[H(None, True)]]
    assert provider_hints([{"cpu": None}]) == [[H(None, True)]]
    assert provider_hints([{"cpu": []}]) == [[H(None, False)]]


def test_best_effort_takes_the_aligned_preferred_hint() -> None:
    cpu = {"cpu": [H(N0, True), H(N1, True), H(BOTH, False)]}
    dev = {"gpu": [H(N1, True), H(BOTH, False)]}
    assert merge("best-effort", TWO, PolicyOptions(), [cpu, dev]) == (H(N1, True), True)


def test_restricted_refuses_what_cannot_be_aligned_and_best_effort_admits_it() -> None:
    cpu = {"cpu": [H(N0, True), H(BOTH, False)]}
    dev = {"gpu": [H(N1, True), H(BOTH, False)]}
    # the non-preferred winner is as wide as the widest narrowest hint (one node)
    assert merge("restricted", TWO, PolicyOptions(), [cpu, dev]) == (H(N0, False), False)
    assert merge("best-effort", TWO, PolicyOptions(), [cpu, dev]) == (H(N0, False), True)


def test_a_request_that_needs_both_nodes_is_preferred_on_both() -> None:
    cpu = {"cpu": [H(BOTH, True)]}
    assert merge("restricted", TWO, PolicyOptions(), [cpu]) == (H(BOTH, True), True)


def test_single_numa_node_refuses_a_two_node_placement() -> None:
    cpu = {"cpu": [H(BOTH, True)]}
    assert merge("single-numa-node", TWO, PolicyOptions(), [cpu]) == (H(None, False), False)
    one = {"cpu": [H(N1, True), H(BOTH, False)]}
    assert merge("single-numa-node", TWO, PolicyOptions(), [one]) == (H(N1, True), True)


def test_no_hints_at_all_is_any_node_preferred() -> None:
    assert merge("restricted", TWO, PolicyOptions(), [{}, {}]) == (H(BOTH, True), True)
    assert merge("single-numa-node", TWO, PolicyOptions(), [{}]) == (H(None, True), True)


def test_prefer_closest_numa_nodes_picks_the_closer_pair() -> None:
    four = NumaInfo(
        nodes=(0, 1, 2, 3),
        distances={
            0: {0: 10, 1: 21, 2: 11, 3: 21},
            1: {0: 21, 1: 10, 2: 21, 3: 11},
            2: {0: 11, 1: 21, 2: 10, 3: 21},
            3: {0: 21, 1: 11, 2: 21, 3: 10},
        },
    )
    pairs = {"cpu": [H(mask_of([0, 1]), True), H(mask_of([0, 2]), True)]}
    assert merge("best-effort", four, PolicyOptions(), [pairs])[0] == H(mask_of([0, 1]), True)
    closest = PolicyOptions(prefer_closest=True)
    assert merge("best-effort", four, closest, [pairs])[0] == H(mask_of([0, 2]), True)


def test_policy_options_parse_as_upstream() -> None:
    assert PolicyOptions.parse({"prefer-closest-numa-nodes": "true"}).prefer_closest
    assert PolicyOptions.parse({"max-allowable-numa-nodes": "16"}).max_numa_nodes == 16
    with pytest.raises(OptionError, match="should not be less than 8"):
        PolicyOptions.parse({"max-allowable-numa-nodes": "4"})
    with pytest.raises(OptionError, match="unknown Topology Manager Policy option"):
        PolicyOptions.parse({"nope": "true"})
