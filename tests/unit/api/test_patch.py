"""Patch builders against hand-computed (and upstream's test) patches, and round trips."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelet.api import node_status_patch, pod_status_patch
from kubelet.api.patch import (
    POD_MERGE_KEYS,
    JsonPatch,
    PatchError,
    json_merge_patch,
    pointer,
    two_way_strategic_merge_patch,
)
from kubelet.testing.apiresources import NODE as NODE_SCHEMA
from kubelet.testing.apiresources import POD as POD_SCHEMA
from kubelet.testing.patching import PatchError as ServerPatchError
from kubelet.testing.patching import json_merge_patch as json_merge_patch_applied
from kubelet.testing.patching import json_patch, strategic_merge_patch

UID = "8bb7de3e-72f0-4102-adbd-53897040775e"


def cond(type_: str, status: str = "True", **extra: Any) -> dict[str, Any]:
    return {"type": type_, "status": status, **extra}


def status(*conditions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"phase": "Running", "conditions": list(conditions), **extra}


def wire(patch: Any) -> str:
    """As Go's encoding/json writes a map: keys sorted, no spaces."""
    return json.dumps(patch, sort_keys=True, separators=(",", ":"))


# -- pod status: what the status manager sends -----------------------------------------


def test_pod_condition_change_matches_upstream() -> None:
    # pkg/util/pod TestPatchPodStatus "pod condition change", plus the uid precondition.
    old = status(cond("Ready"), cond("PodScheduled"))
    new = status(cond("Ready", "False"), cond("PodScheduled"))
    assert wire(pod_status_patch(UID, old, new)) == (
        '{"metadata":{"uid":"' + UID + '"},"status":{"$setElementOrder/conditions":'
        '[{"type":"Ready"},{"type":"PodScheduled"}],'
        '"conditions":[{"status":"False","type":"Ready"}]}}'
    )


def test_pod_status_unchanged_is_none() -> None:
    old = status(cond("Ready"), cond("PodScheduled"))
    assert pod_status_patch(UID, old, copy.deepcopy(old)) is None


def test_pod_message_change() -> None:
    old = status(cond("Ready"))
    new = {**old, "message": "random message"}
    assert pod_status_patch(UID, old, new) == {
        "metadata": {"uid": UID},
        "status": {"message": "random message"},
    }


def test_container_statuses_are_replaced_whole() -> None:
    a = {"name": "a", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "X"}}}
    b = {"name": "b", "ready": True, "restartCount": 0, "state": {"running": {}}}
    old = status(containerStatuses=[a, b])
    new_a = {**a, "ready": True, "state": {"running": {"startedAt": "t"}}}
    new = status(containerStatuses=[new_a, b])
    assert pod_status_patch(UID, old, new) == {
        "metadata": {"uid": UID},
        "status": {"containerStatuses": [new_a, b]},
    }


def test_kubelet_start_of_a_pod() -> None:
    """Pending → Running with containers ready: several conditions change, IPs appear."""
    old = {
        "phase": "Pending",
        "conditions": [
            cond("PodReadyToStartContainers", "False", lastTransitionTime="t1"),
            cond("Initialized", lastTransitionTime="t1"),
            cond("Ready", "False", lastTransitionTime="t1", reason="ContainersNotReady"),
            cond("ContainersReady", "False", lastTransitionTime="t1", reason="ContainersNotReady"),
            cond("PodScheduled", lastTransitionTime="t0"),
        ],
        "hostIP": "10.0.0.5",
    }
    new = copy.deepcopy(old)
    new["phase"] = "Running"
    new["conditions"][0] = cond("PodReadyToStartContainers", lastTransitionTime="t2")
    new["conditions"][2] = cond("Ready", lastTransitionTime="t3")
    new["conditions"][3] = cond("ContainersReady", lastTransitionTime="t3")
    new["podIP"] = "10.88.0.7"
    new["podIPs"] = [{"ip": "10.88.0.7"}]
    new["startTime"] = "t1"
    assert pod_status_patch(UID, old, new) == {
        "metadata": {"uid": UID},
        "status": {
            "$setElementOrder/conditions": [
                {"type": "PodReadyToStartContainers"},
                {"type": "Initialized"},
                {"type": "Ready"},
                {"type": "ContainersReady"},
                {"type": "PodScheduled"},
            ],
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "t2"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "t3", "reason": None},
                {
                    "type": "ContainersReady",
                    "status": "True",
                    "lastTransitionTime": "t3",
                    "reason": None,
                },
            ],
            "phase": "Running",
            "podIP": "10.88.0.7",
            "podIPs": [{"ip": "10.88.0.7"}],  # the list was empty: sent whole, no order
            "startTime": "t1",
        },
    }


def test_removed_added_and_reordered_conditions() -> None:
    old = status(cond("A"), cond("B"), cond("C"))
    new = status(cond("C"), cond("D"), cond("A"))
    assert two_way_strategic_merge_patch(old, new, {"conditions": "type"}) == {
        "$setElementOrder/conditions": [{"type": "C"}, {"type": "D"}, {"type": "A"}],
        "conditions": [cond("D"), {"$patch": "delete", "type": "B"}],
    }


def test_reorder_only_sends_only_the_order() -> None:
    old = status(cond("A"), cond("B"))
    new = status(cond("B"), cond("A"))
    assert two_way_strategic_merge_patch(old, new, {"conditions": "type"}) == {
        "$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}],
    }


def test_all_conditions_removed() -> None:
    old = status(cond("A"), cond("B"))
    new = status()
    assert two_way_strategic_merge_patch(old, new, {"conditions": "type"}) == {
        "conditions": [{"$patch": "delete", "type": "A"}, {"$patch": "delete", "type": "B"}],
    }


def test_without_merge_key_the_list_is_atomic() -> None:
    old = status(cond("A"), cond("B"))
    new = status(cond("A"), cond("B", "False"))
    assert two_way_strategic_merge_patch(old, new, {}) == {"conditions": new["conditions"]}


def test_primitive_merge_list() -> None:
    old = {"metadata": {"finalizers": ["a", "b", "c"]}}
    new = {"metadata": {"finalizers": ["c", "d", "a"]}}
    assert two_way_strategic_merge_patch(old, new, POD_MERGE_KEYS) == {
        "metadata": {
            "finalizers": ["d"],
            "$deleteFromPrimitiveList/finalizers": ["b"],
            "$setElementOrder/finalizers": ["c", "d", "a"],
        }
    }


def test_maps_keys_removed_and_types_changed() -> None:
    old = {"a": {"x": 1, "y": 2}, "b": "s", "c": [1], "d": 1, "e": True}
    new = {"a": {"x": 1}, "b": {"now": "a map"}, "c": [1], "d": 1.0, "e": 1}
    assert two_way_strategic_merge_patch(old, new, {}) == {
        "a": {"y": None},
        "b": {"now": "a map"},
        "e": 1,  # True and 1 differ in JSON; 1 and 1.0 do not
    }


def test_nested_change_inside_a_merge_list_element() -> None:
    old = {"items": [{"name": "a", "labels": {"x": "1", "y": "2"}}, {"name": "b"}]}
    new = {"items": [{"name": "a", "labels": {"x": "1", "y": "3"}}, {"name": "b"}]}
    assert two_way_strategic_merge_patch(old, new, {"items": "name"}) == {
        "$setElementOrder/items": [{"name": "a"}, {"name": "b"}],
        "items": [{"name": "a", "labels": {"y": "3"}}],
    }


def test_merge_list_element_without_its_key_is_an_error() -> None:
    with pytest.raises(PatchError, match="merge key 'type'"):
        two_way_strategic_merge_patch(
            {"conditions": [{"type": "A"}]},
            {"conditions": [{"status": "x"}]},
            {"conditions": "type"},
        )


# -- node status ------------------------------------------------------------------------


NODE = {
    "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
    "spec": {"podCIDR": "10.244.1.0/24", "taints": [{"key": "k", "effect": "NoSchedule"}]},
    "status": {
        "conditions": [
            cond("MemoryPressure", "False", lastHeartbeatTime="h1"),
            cond("Ready", "True", lastHeartbeatTime="h1"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": "10.0.0.5"},
            {"type": "Hostname", "address": "n1"},
        ],
    },
}


def test_node_heartbeat_patch_ignores_spec() -> None:
    new = copy.deepcopy(NODE)
    new["spec"] = {"unschedulable": True}  # the kubelet never patches the spec
    for c in new["status"]["conditions"]:
        c["lastHeartbeatTime"] = "h2"
    assert node_status_patch(NODE, new) == {
        "status": {
            "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
            "conditions": [
                {"type": "MemoryPressure", "lastHeartbeatTime": "h2"},
                {"type": "Ready", "lastHeartbeatTime": "h2"},
            ],
        }
    }


def test_node_addresses_are_replaced_not_merged() -> None:
    new = copy.deepcopy(NODE)
    new["status"]["addresses"] = [
        {"type": "InternalIP", "address": "10.0.0.5"},
        {"type": "InternalIP", "address": "fd00::5"},
        {"type": "Hostname", "address": "n1"},
    ]
    assert node_status_patch(NODE, new) == {
        "status": {"addresses": [*new["status"]["addresses"], {"$patch": "replace"}]}
    }
    applied = strategic_merge_patch(NODE, node_status_patch(NODE, new), NODE_SCHEMA)
    assert applied["status"]["addresses"] == new["status"]["addresses"]


def test_node_addresses_set_the_first_time_merge_normally() -> None:
    old = copy.deepcopy(NODE)
    del old["status"]["addresses"]
    assert node_status_patch(old, NODE) == {"status": {"addresses": NODE["status"]["addresses"]}}


def test_node_labels_change_is_sent() -> None:
    new = copy.deepcopy(NODE)
    new["metadata"]["labels"]["topology.kubernetes.io/zone"] = "z1"
    assert node_status_patch(NODE, new) == {
        "metadata": {"labels": {"topology.kubernetes.io/zone": "z1"}}
    }


# -- JSON merge patch and JSON patch ----------------------------------------------------


def test_json_merge_patch_rfc7386_example() -> None:
    original = {"a": "b", "c": {"d": "e", "f": "g"}}
    modified = {"a": "z", "c": {"d": "e"}}
    patch = json_merge_patch(original, modified)
    assert patch == {"a": "z", "c": {"f": None}}
    assert json_merge_patch_applied(original, patch) == modified


def test_json_merge_patch_replaces_lists_and_adds_keys() -> None:
    original = {"metadata": {"labels": {"a": "1"}}, "list": [1, 2]}
    modified = {"metadata": {"labels": {"a": "1", "b": "2"}}, "list": [2]}
    assert json_merge_patch(original, modified) == {
        "metadata": {"labels": {"b": "2"}},
        "list": [2],
    }
    assert json_merge_patch(original, copy.deepcopy(original)) == {}


def test_json_patch_builder_and_pointer_escaping() -> None:
    ops = (
        JsonPatch()
        .test(pointer("metadata", "uid"), UID)
        .add(pointer("metadata", "labels", "node-role.kubernetes.io/worker"), "")
        .replace(pointer("status", "conditions", 0, "status"), "False")
        .remove(pointer("metadata", "annotations", "a~b"))
    )
    assert len(ops) == 4
    assert ops.ops == [
        {"op": "test", "path": "/metadata/uid", "value": UID},
        {"op": "add", "path": "/metadata/labels/node-role.kubernetes.io~1worker", "value": ""},
        {"op": "replace", "path": "/status/conditions/0/status", "value": "False"},
        {"op": "remove", "path": "/metadata/annotations/a~0b"},
    ]
    doc = {
        "metadata": {"uid": UID, "labels": {}, "annotations": {"a~b": "x"}},
        "status": {"conditions": [cond("Ready")]},
    }
    assert json_patch(doc, ops.ops) == {
        "metadata": {
            "uid": UID,
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": {},
        },
        "status": {"conditions": [cond("Ready", "False")]},
    }
    with pytest.raises(ServerPatchError, match="testing value /metadata/uid failed"):
        json_patch(doc, JsonPatch().test("/metadata/uid", "other").ops)


def test_json_patch_move_copy_and_append() -> None:
    ops = JsonPatch().copy("/a", "/b").move("/a", "/c").add("/list/-", 3).ops
    assert ops[0] == {"op": "copy", "path": "/b", "from": "/a"}
    assert json_patch({"a": 1, "list": [1, 2]}, ops) == {"b": 1, "c": 1, "list": [1, 2, 3]}


# -- round trips: applying what we build gives the modified object ----------------------

condition_types = st.sampled_from(["Ready", "Initialized", "PodScheduled", "ContainersReady", "X"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text("ab", max_size=2))


@st.composite
def conditions(draw: st.DrawFn) -> list[dict[str, Any]]:
    types = draw(st.lists(condition_types, unique=True, max_size=5))
    return [
        {
            "type": t,
            "status": draw(st.sampled_from(["True", "False", "Unknown"])),
            **draw(st.dictionaries(st.sampled_from(["reason", "message"]), st.text("xy"))),
        }
        for t in types
    ]


objects = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"finalizers": st.lists(st.sampled_from("abcde"), unique=True, max_size=4)},
            optional={"labels": st.dictionaries(st.sampled_from("pqr"), st.text("z", max_size=2))},
        ),
        "status": st.fixed_dictionaries(
            {"conditions": conditions()},
            optional={
                "phase": scalars,
                "containerStatuses": st.lists(st.dictionaries(st.sampled_from("nm"), scalars)),
                "podIPs": st.lists(
                    st.sampled_from(["10.0.0.1", "fd00::1"]).map(lambda ip: {"ip": ip}),
                    unique_by=lambda d: d["ip"],
                ),
            },
        ),
    }
)


@settings(max_examples=300, deadline=None)
@given(objects, objects)
def test_strategic_patch_round_trip(original: dict[str, Any], modified: dict[str, Any]) -> None:
    patch = two_way_strategic_merge_patch(original, modified, POD_MERGE_KEYS)
    applied = strategic_merge_patch(original, patch, POD_SCHEMA)
    # A null value is a deletion in a patch, as in the API server: compare without them.
    # Compared as JSON text, since Python's True == 1 but JSON's true is not 1.
    assert _json_text(_drop_nulls(applied)) == _json_text(_drop_nulls(modified))
    if _json_text(original) == _json_text(modified):
        assert patch == {}


@settings(max_examples=200, deadline=None)
@given(objects, objects)
def test_json_merge_patch_round_trip(original: dict[str, Any], modified: dict[str, Any]) -> None:
    patch = json_merge_patch(original, modified)
    # RFC 7386 cannot express "set to null": compare without null-valued keys.
    assert _drop_nulls(json_merge_patch_applied(original, patch)) == _drop_nulls(modified)


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    return value
