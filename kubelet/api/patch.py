"""Patches the kubelet sends, built from (original, modified) JSON objects.

* ``two_way_strategic_merge_patch``: apimachinery's CreateTwoWayMergePatch. The schema
  part that matters (which lists merge, and by which key) is passed as ``merge_keys``:
  a dotted field path → the list's ``patchMergeKey`` (``""`` for a merge list of
  scalars, such as finalizers). Lists not named there are atomic: replaced whole.
  Merge lists get ``$setElementOrder/<field>`` when their content or order changed and
  ``{"$patch": "delete", key: value}`` for removed elements, as upstream writes them.
  Not covered (not used on pod or node status): retainKeys, patchStrategy=replace on
  maps, nested merge lists inside merge-list elements being re-sorted.
* ``pod_status_patch`` / ``node_status_patch``: what upstream's status manager and
  node status updater send (the pod's uid as a precondition; node addresses replaced
  with ``$patch: replace`` because their merge key is wrong upstream).
* ``json_merge_patch`` (RFC 7386) and ``JsonPatch`` (RFC 6902).
* The ``apply_*`` functions are the server's side, for tests and fakes: applying a
  patch built here to the original gives the modified object.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = [
    "NODE_MERGE_KEYS",
    "POD_MERGE_KEYS",
    "JsonPatch",
    "PatchError",
    "json_merge_patch",
    "node_status_patch",
    "pod_status_patch",
    "pointer",
    "two_way_strategic_merge_patch",
]

MergeKeys = Mapping[str, str]

POD_MERGE_KEYS: MergeKeys = {
    "metadata.ownerReferences": "uid",
    "metadata.finalizers": "",
    "status.conditions": "type",
    "status.podIPs": "ip",
    "status.hostIPs": "ip",
    "status.resourceClaimStatuses": "name",
}
"""The merge lists of a v1 Pod's metadata and status (k8s.io/api core/v1 patch tags);
container statuses have no patch strategy and are replaced whole."""

NODE_MERGE_KEYS: MergeKeys = {
    "metadata.ownerReferences": "uid",
    "metadata.finalizers": "",
    "spec.podCIDRs": "",
    "status.conditions": "type",
    "status.addresses": "type",
}
"""The merge lists of a v1 Node."""

_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


class PatchError(ValueError):
    """A patch cannot be built or applied (a list element without its merge key...)."""


# -- comparing JSON values as Go does (1 == 1.0, True != 1) ---------------------------


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    raise PatchError(f"not a JSON value: {type(value).__name__}")


def _equal(a: Any, b: Any) -> bool:
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "map":
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if kind == "list":
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _go_string(value: Any) -> str:
    """fmt's %v of a decoded JSON scalar: the sort key upstream uses for list elements."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return "<nil>"
    return str(value)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# -- two-way strategic merge patch ----------------------------------------------------


def two_way_strategic_merge_patch(
    original: Mapping[str, Any], modified: Mapping[str, Any], merge_keys: MergeKeys
) -> dict[str, Any]:
    """The strategic merge patch turning ``original`` into ``modified`` ({} if equal)."""
    return _diff_maps(original, modified, merge_keys, "")


def _diff_maps(
    original: Mapping[str, Any], modified: Mapping[str, Any], keys: MergeKeys, path: str
) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key, new in modified.items():
        if key not in original:
            patch[key] = copy.deepcopy(new)
            continue
        old = original[key]
        kind = _kind(old)
        if kind != _kind(new):
            patch[key] = copy.deepcopy(new)
        elif kind == "map":
            sub = _diff_maps(old, new, keys, _join(path, key))
            if sub:
                patch[key] = sub
        elif kind == "list":
            _diff_list_field(key, list(old), list(new), keys, _join(path, key), patch)
        elif old != new:
            patch[key] = new
    for key in original:
        if key not in modified:
            patch[key] = None
    return patch


def _diff_list_field(
    key: str,
    old: list[Any],
    new: list[Any],
    keys: MergeKeys,
    path: str,
    patch: dict[str, Any],
) -> None:
    if path not in keys:
        if not _equal(old, new):
            patch[key] = copy.deepcopy(new)
        return
    merge_key = keys[path]
    changes, deletions, order = _diff_lists(old, new, merge_key, keys, path)
    if changes:
        patch[key] = changes
    if deletions:
        patch[_DELETE_PRIMITIVE + key] = deletions
    if order:
        patch[_SET_ORDER + key] = order


def _element_kind(old: list[Any], new: list[Any], path: str) -> str:
    kinds = {_kind(v) for v in (*old, *new)}
    if len(kinds) > 1:
        raise PatchError(f"{path}: a list mixing {', '.join(sorted(kinds))}")
    kind = kinds.pop() if kinds else "null"
    if kind == "list":
        raise PatchError(f"{path}: lists of lists cannot be merged")
    return kind


def _diff_lists(
    old: list[Any], new: list[Any], merge_key: str, keys: MergeKeys, path: str
) -> tuple[list[Any], list[Any], list[Any]]:
    """(changes, deletions from a primitive list, $setElementOrder) as upstream's diffLists."""
    if not old:
        return copy.deepcopy(new), [], []
    if _element_kind(old, new, path) == "map":
        if not merge_key:
            raise PatchError(f"{path}: a merge list of objects needs a merge key")
        changes = _diff_lists_of_maps(old, new, merge_key, keys, path)
        same_order = len(old) == len(new) and all(
            _equal(_merge_value(a, merge_key, path), _merge_value(b, merge_key, path))
            for a, b in zip(old, new, strict=True)
        )
        order: list[Any] = []
        if changes or not same_order:
            order = [{merge_key: _merge_value(v, merge_key, path)} for v in new]
        return changes, [], order
    additions, deletions = _diff_lists_of_scalars(old, new)
    order = list(new) if deletions or not _equal(old, new) else []
    return additions, deletions, order


def _merge_value(element: Mapping[str, Any], merge_key: str, path: str) -> Any:
    if merge_key not in element:
        raise PatchError(f"{path}: element {dict(element)!r} has no merge key {merge_key!r}")
    return element[merge_key]


def _diff_lists_of_maps(
    old: list[Any], new: list[Any], merge_key: str, keys: MergeKeys, path: str
) -> list[Any]:
    def sort_key(element: Mapping[str, Any]) -> str:
        return _go_string(_merge_value(element, merge_key, path))

    old_sorted = sorted(old, key=sort_key)
    new_sorted = sorted(new, key=sort_key)
    changes: list[Any] = []
    deletions: list[Any] = []
    i = j = 0
    while i < len(old_sorted) or j < len(new_sorted):
        a = sort_key(old_sorted[i]) if i < len(old_sorted) else None
        b = sort_key(new_sorted[j]) if j < len(new_sorted) else None
        if a is not None and b is not None and a == b:
            sub = _diff_maps(old_sorted[i], new_sorted[j], keys, path)
            if sub:
                sub[merge_key] = new_sorted[j][merge_key]
                changes.append(sub)
            i += 1
            j += 1
        elif a is None or (b is not None and a > b):
            changes.append(copy.deepcopy(new_sorted[j]))
            j += 1
        else:
            deletions.append({"$patch": "delete", merge_key: old_sorted[i][merge_key]})
            i += 1
    # Changes in the modified list's order, deletions after them (normalizeSliceOrder).
    position = {sort_key(v): n for n, v in enumerate(new)}
    changes.sort(key=lambda v: position.get(sort_key(v), len(position)))
    return changes + deletions


def _diff_lists_of_scalars(old: list[Any], new: list[Any]) -> tuple[list[Any], list[Any]]:
    old_sorted = sorted(old, key=_go_string)
    new_sorted = sorted(new, key=_go_string)
    additions: list[Any] = []
    deletions: list[Any] = []
    i = j = 0
    while i < len(old_sorted) or j < len(new_sorted):
        a = _go_string(old_sorted[i]) if i < len(old_sorted) else None
        b = _go_string(new_sorted[j]) if j < len(new_sorted) else None
        if a is not None and b is not None and a == b:
            i += 1
            j += 1
        elif b is None or (a is not None and a < b):
            if not any(_equal(old_sorted[i], d) for d in deletions):
                deletions.append(old_sorted[i])
            i += 1
        else:
            additions.append(new_sorted[j])
            j += 1
    position = {_go_string(v): n for n, v in enumerate(new)}
    additions.sort(key=lambda v: position.get(_go_string(v), len(position)))
    return additions, deletions


# -- what the kubelet sends -----------------------------------------------------------


def pod_status_patch(
    uid: str, old_status: Mapping[str, Any], new_status: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Upstream's PatchPodStatus body: a strategic merge patch of the status with the
    pod's uid in metadata, which the server checks as a precondition (a recreated pod of
    the same name is not patched). None when only the uid would be sent: nothing changed.
    """
    patch = two_way_strategic_merge_patch(
        {"metadata": {}, "status": old_status},
        {"metadata": {"uid": uid}, "status": new_status},
        POD_MERGE_KEYS,
    )
    return None if patch == {"metadata": {"uid": uid}} else patch


def node_status_patch(old_node: Mapping[str, Any], new_node: Mapping[str, Any]) -> dict[str, Any]:
    """Upstream's PatchNodeStatus body: the spec is taken from ``old_node`` (only status
    and metadata are patched); changed addresses are sent whole, ending with
    ``{"$patch": "replace"}``, because NodeStatus.addresses is wrongly tagged as merge by
    type upstream (two InternalIPs would collapse)."""
    old_status = old_node.get("status") or {}
    new_status = dict(new_node.get("status") or {})
    old_addresses = old_status.get("addresses") or []
    new_addresses = new_status.get("addresses") or []
    replace_addresses = bool(old_addresses) and not _equal(old_addresses, new_addresses)
    diff_node = dict(new_node)
    if "spec" in old_node:
        diff_node["spec"] = old_node["spec"]
    else:
        diff_node.pop("spec", None)
    if replace_addresses:
        new_status["addresses"] = old_addresses
        diff_node["status"] = new_status
    patch = two_way_strategic_merge_patch(old_node, diff_node, NODE_MERGE_KEYS)
    if replace_addresses:
        status = patch.setdefault("status", {})
        status["addresses"] = [*copy.deepcopy(list(new_addresses)), {"$patch": "replace"}]
    return patch


# -- JSON merge patch and JSON patch --------------------------------------------------


def json_merge_patch(original: Mapping[str, Any], modified: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch from ``original`` to ``modified``: changed keys with their
    new value, nested objects recursively, removed keys as null; lists are replaced."""
    patch: dict[str, Any] = {}
    for key, new in modified.items():
        if key not in original:
            patch[key] = copy.deepcopy(new)
            continue
        old = original[key]
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            sub = json_merge_patch(old, new)
            if sub:
                patch[key] = sub
        elif not _equal(old, new):
            patch[key] = copy.deepcopy(new)
    for key in original:
        if key not in modified:
            patch[key] = None
    return patch


def pointer(*segments: str | int) -> str:
    """A JSON pointer (RFC 6901) from path segments: ``pointer("metadata", "labels",
    "a/b")`` → ``/metadata/labels/a~1b``."""
    return "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in segments)


class JsonPatch:
    """An RFC 6902 JSON patch, built op by op (chainable); ``ops`` is the body to send
    with ``application/json-patch+json``. A ``test`` op makes the patch conditional."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def _op(self, op: str, path: str, **fields: Any) -> JsonPatch:
        self.ops.append({"op": op, "path": path, **fields})
        return self

    def add(self, path: str, value: Any) -> JsonPatch:
        return self._op("add", path, value=value)

    def remove(self, path: str) -> JsonPatch:
        return self._op("remove", path)

    def replace(self, path: str, value: Any) -> JsonPatch:
        return self._op("replace", path, value=value)

    def test(self, path: str, value: Any) -> JsonPatch:
        return self._op("test", path, value=value)

    def move(self, from_: str, path: str) -> JsonPatch:
        return self._op("move", path, **{"from": from_})

    def copy(self, from_: str, path: str) -> JsonPatch:
        return self._op("copy", path, **{"from": from_})

    def __len__(self) -> int:
        return len(self.ops)
