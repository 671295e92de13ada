"""The three PATCH formats, against upstream's strategic-merge rules and the RFC examples."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubelet.testing.apiresources import NODE, POD
from kubelet.testing.patching import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    apply_patch,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)


def cond(kind: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "status": status, **extra}


def pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}},
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "b:1"},
            ]
        },
        "status": status,
    }


# -- strategic merge patch -------------------------------------------------------------


def test_conditions_merge_by_type() -> None:
    live = pod(conditions=[cond("Initialized", "True"), cond("Ready", "False", reason="NotReady")])
    out = strategic_merge_patch(
        live,
        {"status": {"conditions": [cond("Ready", "True"), cond("PodScheduled", "True")]}},
        POD,
    )
    assert out["status"]["conditions"] == [
        cond("Initialized", "True"),
        # merged into the existing element: its other keys stay unless the patch nulls them
        cond("Ready", "True", reason="NotReady"),
        cond("PodScheduled", "True"),
    ]


def test_container_statuses_are_atomic_as_upstream() -> None:
    """listType=atomic, no patchStrategy: the patch's list replaces the live one."""
    live = pod(containerStatuses=[{"name": "a", "ready": True}, {"name": "b", "ready": True}])
    out = strategic_merge_patch(
        live, {"status": {"containerStatuses": [{"name": "b", "ready": False}]}}, POD
    )
    assert out["status"]["containerStatuses"] == [{"name": "b", "ready": False}]


def test_containers_merge_by_name_with_nested_env_by_name() -> None:
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"},
            ]
        }
    }
    out = strategic_merge_patch(pod(), patch, POD)
    containers = out["spec"]["containers"]
    assert [c["name"] for c in containers] == ["a", "b", "c"]
    assert containers[0]["image"] == "a:1"
    assert containers[0]["env"] == [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]


def test_set_element_order_puts_the_list_in_that_order() -> None:
    live = pod(
        conditions=[
            cond("PodScheduled", "True"),
            cond("Ready", "False"),
            cond("Initialized", "True"),
        ]
    )
    patch = {
        "status": {
            "$setElementOrder/conditions": [
                {"type": "Initialized"},
                {"type": "Ready"},
                {"type": "PodScheduled"},
            ],
            "conditions": [cond("Ready", "True")],
        }
    }
    out = strategic_merge_patch(live, patch, POD)
    assert out["status"]["conditions"] == [
        cond("Initialized", "True"),
        cond("Ready", "True"),
        cond("PodScheduled", "True"),
    ]


def test_set_element_order_keeps_server_only_items_in_live_order() -> None:
    live = {"status": {"conditions": [cond("A", "x"), cond("B", "x"), cond("C", "x")]}}
    patch = {
        "status": {
            "$setElementOrder/conditions": [{"type": "C"}, {"type": "A"}],
            "conditions": [cond("C", "y")],
        }
    }
    out = strategic_merge_patch(live, patch, POD)
    # upstream's mergeSortedSlice: B (server only) came before C in the live list, so it
    # stays before it; C and A keep the $setElementOrder order.
    assert [c["type"] for c in out["status"]["conditions"]] == ["B", "C", "A"]
    assert out["status"]["conditions"][1] == cond("C", "y")


def test_set_element_order_that_contradicts_the_patch_is_an_error() -> None:
    patch = {
        "status": {
            "$setElementOrder/conditions": [{"type": "A"}, {"type": "B"}],
            "conditions": [cond("B", "x"), cond("A", "x")],
        }
    }
    with pytest.raises(PatchError, match="setElementOrder"):
        strategic_merge_patch({"status": {}}, patch, POD)


def test_kubelet_style_status_patch_from_upstream_two_way_diff() -> None:
    """The shape upstream's CreateTwoWayMergePatch gives the kubelet's status manager."""
    live = pod(
        phase="Pending",
        conditions=[cond("PodScheduled", "True")],
        podIPs=[{"ip": "10.0.0.1"}],
    )
    patch = {
        "metadata": {"uid": "u1"},
        "status": {
            "$setElementOrder/conditions": [
                {"type": "Initialized"},
                {"type": "Ready"},
                {"type": "PodScheduled"},
            ],
            "$setElementOrder/podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
            "conditions": [cond("Initialized", "True"), cond("Ready", "True")],
            "podIPs": [{"ip": "fd00::1"}],
            "phase": "Running",
        },
    }
    out = strategic_merge_patch(live, patch, POD)
    assert out["metadata"]["uid"] == "u1"
    assert [c["type"] for c in out["status"]["conditions"]] == [
        "Initialized",
        "Ready",
        "PodScheduled",
    ]
    assert out["status"]["podIPs"] == [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]
    assert out["status"]["phase"] == "Running"


def test_null_deletes_a_key() -> None:
    out = strategic_merge_patch(
        pod(message="hi"),
        {"metadata": {"labels": {"tier": None}}, "status": {"message": None}},
        POD,
    )
    assert out["metadata"]["labels"] == {"app": "web"}
    assert "message" not in out["status"]
    # a null for a key that is not there is ignored, not stored
    out = strategic_merge_patch(pod(), {"status": {"nominatedNodeName": None}}, POD)
    assert "nominatedNodeName" not in out["status"]


def test_patch_delete_directive_in_a_merge_list() -> None:
    live = pod(conditions=[cond("Ready", "True"), cond("Custom", "True")])
    out = strategic_merge_patch(
        live, {"status": {"conditions": [{"type": "Custom", "$patch": "delete"}]}}, POD
    )
    assert out["status"]["conditions"] == [cond("Ready", "True")]


def test_patch_replace_directive_in_a_list_and_in_a_map() -> None:
    live = pod(conditions=[cond("Ready", "True"), cond("Custom", "True")])
    out = strategic_merge_patch(
        live, {"status": {"conditions": [{"$patch": "replace"}, cond("Only", "True")]}}, POD
    )
    assert out["status"]["conditions"] == [cond("Only", "True")]
    out = strategic_merge_patch(
        pod(), {"metadata": {"labels": {"$patch": "replace", "new": "1"}}}, POD
    )
    assert out["metadata"]["labels"] == {"new": "1"}


def test_patch_delete_directive_on_a_map_empties_it() -> None:
    out = strategic_merge_patch(pod(), {"metadata": {"labels": {"$patch": "delete"}}}, POD)
    assert out["metadata"]["labels"] == {}


def test_unknown_directive_is_an_error() -> None:
    with pytest.raises(PatchError):
        strategic_merge_patch(pod(), {"metadata": {"labels": {"$patch": "explode"}}}, POD)
    with pytest.raises(PatchError, match="cannot yet"):
        strategic_merge_patch(
            pod(conditions=[]), {"status": {"conditions": [{"$patch": "merge"}]}}, POD
        )


def test_merge_list_element_without_its_key_is_an_error() -> None:
    with pytest.raises(PatchError, match="merge key"):
        strategic_merge_patch(
            pod(conditions=[cond("A", "x")]), {"status": {"conditions": [{"status": "x"}]}}, POD
        )


def test_primitive_merge_list_is_a_set_and_parallel_deletion_list_removes() -> None:
    live = {"metadata": {"name": "n", "finalizers": ["a", "b"]}}
    out = strategic_merge_patch(live, {"metadata": {"finalizers": ["b", "c"]}}, POD)
    assert out["metadata"]["finalizers"] == ["a", "b", "c"]
    out = strategic_merge_patch(
        live, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, POD
    )
    assert out["metadata"]["finalizers"] == ["b"]


def test_retain_keys_clears_what_it_does_not_list() -> None:
    live = {"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}, "extra": 1}]}}
    patch = {
        "spec": {"volumes": [{"name": "v", "$retainKeys": ["emptyDir", "name"], "emptyDir": {}}]}
    }
    out = strategic_merge_patch(live, patch, POD)
    assert out["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]
    with pytest.raises(PatchError, match="retainKeys"):
        strategic_merge_patch(live, {"spec": {"$retainKeys": ["a"], "b": 1}}, POD)


def test_node_addresses_merge_by_type_and_images_are_replaced() -> None:
    live = {
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "n1"},
            ],
            "images": [{"names": ["a"]}, {"names": ["b"]}],
            "volumesAttached": [{"name": "v1", "devicePath": "/d1"}],
        }
    }
    patch = {
        "status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
            "images": [{"names": ["c"]}],
            "volumesAttached": [{"name": "v2", "devicePath": "/d2"}],
        }
    }
    out = strategic_merge_patch(live, patch, NODE)
    assert out["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.2"},
        {"type": "Hostname", "address": "n1"},
    ]
    assert out["status"]["images"] == [{"names": ["c"]}]
    assert out["status"]["volumesAttached"] == [{"name": "v2", "devicePath": "/d2"}]


def test_directives_landing_on_missing_keys_are_applied_not_stored() -> None:
    out = strategic_merge_patch(
        {"status": {}},
        {"status": {"conditions": [cond("A", "x"), {"type": "B", "$patch": "delete"}]}},
        POD,
    )
    assert out["status"]["conditions"] == [cond("A", "x")]


def test_inputs_are_not_modified() -> None:
    live = pod(conditions=[cond("Ready", "False")])
    patch = {"status": {"conditions": [cond("Ready", "True")]}, "metadata": {"labels": None}}
    live_before, patch_before = copy.deepcopy(live), copy.deepcopy(patch)
    strategic_merge_patch(live, patch, POD)
    assert (live, patch) == (live_before, patch_before)


# -- JSON merge patch (RFC 7386, appendix A) --------------------------------------------

RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC7386)
def test_json_merge_patch_rfc7386_examples(target: Any, patch: Any, result: Any) -> None:
    assert json_merge_patch(target, patch) == result


# -- JSON patch (RFC 6902) ----------------------------------------------------------------


def test_json_patch_operations() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "x", "k~/": 1}
    ops = [
        {"op": "add", "path": "/a/b/1", "value": 9},
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "replace", "path": "/c", "value": "y"},
        {"op": "copy", "from": "/c", "path": "/d"},
        {"op": "move", "from": "/d", "path": "/e"},
        {"op": "remove", "path": "/k~0~1"},
        {"op": "test", "path": "/a/b", "value": [1, 9, 2, 3]},
    ]
    assert json_patch(doc, ops) == {"a": {"b": [1, 9, 2, 3]}, "c": "y", "e": "y"}
    assert doc == {"a": {"b": [1, 2]}, "c": "x", "k~/": 1}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/list/5", "value": 1}],
        [{"op": "add", "path": "/list/01", "value": 1}],
        [{"op": "move", "from": "/x", "path": "/x/y"}],
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "a", "value": 1}],
        {"op": "add"},
    ],
)
def test_json_patch_failures(ops: Any) -> None:
    with pytest.raises(PatchError):
        json_patch({"a": 1, "list": [0], "x": {}}, ops)


def test_a_failing_json_patch_changes_nothing() -> None:
    doc = {"a": 1}
    with pytest.raises(PatchError):
        json_patch(
            doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 0}]
        )
    assert doc == {"a": 1}


# -- dispatch -------------------------------------------------------------------------


def test_apply_patch_by_content_type() -> None:
    live = pod(conditions=[cond("A", "x")])
    body = json.dumps({"status": {"conditions": [cond("B", "y")]}}).encode()
    smp = apply_patch(STRATEGIC_MERGE_PATCH + "; charset=utf-8", live, body, POD)
    merge = apply_patch(MERGE_PATCH, live, body, POD)
    assert [c["type"] for c in smp["status"]["conditions"]] == ["A", "B"]
    assert [c["type"] for c in merge["status"]["conditions"]] == ["B"]
    ops = json.dumps([{"op": "replace", "path": "/status/conditions/0/status", "value": "z"}])
    out = apply_patch(JSON_PATCH, live, ops.encode(), POD)
    assert out["status"]["conditions"] == [cond("A", "z")]


def test_apply_patch_rejects_bad_input() -> None:
    with pytest.raises(PatchError, match="error decoding patch"):
        apply_patch(MERGE_PATCH, {}, b"{not json")
    with pytest.raises(PatchError, match="unsupported patch type"):
        apply_patch("application/apply-patch+yaml", {}, b"{}")
    with pytest.raises(PatchError):
        apply_patch(MERGE_PATCH, {}, b"[1]")
    with pytest.raises(PatchError):
        apply_patch(JSON_PATCH, {}, b'[{"op": "replace", "path": "", "value": 1}]')
