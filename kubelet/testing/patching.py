"""The three PATCH formats of the Kubernetes API, applied to plain JSON documents.

* ``application/strategic-merge-patch+json``: JSON merge patch, except that some lists
  are merged element by element using a merge key (pod conditions by ``type``, node
  addresses by ``type``, containers by ``name``...), and that directives steer it:
  ``$patch: replace|delete`` in a map or a list element, ``$setElementOrder/<list>``,
  ``$deleteFromPrimitiveList/<list>`` and ``$retainKeys``. Which lists merge is a
  property of the Go type (``patchStrategy``/``patchMergeKey`` tags), so this module
  carries a small ``Schema`` for the types the kubelet patches (see ``apiresources``).
  A list without a merge strategy is replaced whole: upstream marks
  ``status.containerStatuses``, ``initContainerStatuses`` and ``volumesAttached``
  ``listType=atomic`` with no patch strategy, so a patch carrying two of three container
  statuses leaves two. The kubelet must send the whole list, as upstream's does.
* ``application/merge-patch+json``: RFC 7386 (maps merge, null deletes, lists replace).
* ``application/json-patch+json``: RFC 6902 operations on RFC 6901 pointers.

The behaviour follows apimachinery's ``strategicpatch`` as applied by the API server
(parallel lists merged, unmatched nulls ignored), including its element ordering:
``$setElementOrder`` first, then the patch's own order, then the live list's. Patches
and documents are never modified; results are fresh objects. Errors raise
``PatchError``; the server maps them to a 400 (undecodable) or 422 (does not apply).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "MergeList",
    "PatchError",
    "Schema",
    "apply_patch",
    "json_merge_patch",
    "json_patch",
    "strategic_merge_patch",
]

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ORDER = "$setElementOrder/"
DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"


class PatchError(ValueError):
    """A patch that cannot be applied (bad format, missing merge key, failed test)."""


@attrs.frozen
class MergeList:
    """A list merged element by element (``patchStrategy:"merge"``).

    ``key`` is the ``patchMergeKey`` for lists of maps, None for lists of scalars (which
    merge as sets). ``item`` describes the elements' own merge lists.
    """

    key: str | None = None
    item: Schema | None = None


@attrs.frozen
class Schema:
    """The merge-relevant shape of a Go struct: its map and merge-list fields.

    Fields not named here merge as maps (if both sides are maps) or are replaced.
    ``replace`` marks a struct field with ``patchStrategy:"replace"``.
    """

    fields: Mapping[str, Schema | MergeList] = attrs.field(factory=dict)
    replace: bool = False

    def field(self, name: str) -> Schema | MergeList | None:
        return self.fields.get(name)


EMPTY = Schema()


# -- strategic merge patch -----------------------------------------------------------


def strategic_merge_patch(
    original: Mapping[str, Any], patch: Mapping[str, Any], schema: Schema = EMPTY
) -> dict[str, Any]:
    """Apply a strategic merge patch to ``original`` as the API server does."""
    if not isinstance(patch, Mapping):
        raise PatchError("a strategic merge patch must be a JSON object")
    merged: dict[str, Any] = _merge_map(
        copy.deepcopy(dict(original)), copy.deepcopy(dict(patch)), schema
    )
    return merged


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: Schema) -> dict[str, Any]:
    if DIRECTIVE in patch:
        directive = patch.pop(DIRECTIVE)
        if directive == "replace":
            replaced: dict[str, Any] = _strip(patch, schema)
            return replaced
        if directive == "delete":
            return {}
        raise PatchError(f"unknown patch type {directive!r} in map")
    _retain_keys(original, patch)
    _apply_set_element_order(original, patch, schema)
    for raw_key, value in patch.items():
        key, delete_list = raw_key, False
        if raw_key.startswith(DELETE_PRIMITIVES):
            key, delete_list = raw_key[len(DELETE_PRIMITIVES) :], True
        elif raw_key.startswith(SET_ORDER):
            raise PatchError(f"{raw_key}: a $setElementOrder list must be a list")
        if value is None:
            original.pop(key, None)
            continue
        spec = schema.field(key)
        if key not in original:
            if not delete_list:
                original[key] = _strip(value, spec)
            continue
        current = original[key]
        if isinstance(current, dict) and isinstance(value, dict):
            sub = spec if isinstance(spec, Schema) else EMPTY
            original[key] = _strip(value, sub) if sub.replace else _merge_map(current, value, sub)
        elif isinstance(current, list) and isinstance(value, list):
            if isinstance(spec, MergeList):
                original[key] = _merge_list(current, value, spec, delete_list)
            elif not delete_list:
                original[key] = value
        elif not delete_list:
            original[key] = _strip(value, spec)
    return original


def _retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """``$retainKeys``: every key of ``original`` not listed is cleared."""
    if RETAIN_KEYS not in patch:
        return
    keep = patch.pop(RETAIN_KEYS)
    if not isinstance(keep, list):
        raise PatchError("$retainKeys must be a list")
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_PRIMITIVES, SET_ORDER)):
            continue
        if key not in keep:
            raise PatchError(f"$retainKeys does not list {key!r}, which the patch sets")
    for key in [k for k in original if k not in keep]:
        del original[key]


def _apply_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], schema: Schema
) -> None:
    """Merge every list that has a ``$setElementOrder`` and put it in that order."""
    for directive in [k for k in patch if k.startswith(SET_ORDER)]:
        order = patch.pop(directive)
        key = directive[len(SET_ORDER) :]
        if not isinstance(order, list):
            raise PatchError(f"{directive} must be a list")
        spec = schema.field(key)
        merge_key = spec.key if isinstance(spec, MergeList) else None
        live = original.get(key)
        if live is not None and not isinstance(live, list):
            raise PatchError(f"{key}: not a list")
        patched = patch.pop(key, None) if isinstance(patch.get(key), list) else None
        if patched is not None:
            _check_order(patched, order, merge_key)
        if live is None and patched is None:
            continue
        if patched is None:
            merged = live or []
        elif live is None:
            merged = _strip(patched, spec)
        elif isinstance(spec, MergeList):
            merged = _merge_list(live, patched, spec, False)
        else:
            merged = patched
        in_order, server_only = _partition(merged, order, merge_key)
        original[key] = _normalize_order(in_order, server_only, order, live or [], merge_key)


def _check_order(patched: list[Any], order: list[Any], merge_key: str | None) -> None:
    """The patch list's elements must appear in the order list, in the same order."""
    items = [v for v in patched if not (isinstance(v, dict) and DIRECTIVE in v)]
    i = 0
    for wanted in order:
        if i < len(items) and _same(items[i], wanted, merge_key):
            i += 1
    if i < len(items):
        raise PatchError(f"the order in the patch list does not match $setElementOrder: {order}")


def _merge_list(
    live: list[Any], patched: list[Any], spec: MergeList, delete_list: bool
) -> list[Any]:
    if not live and not patched:
        return live
    maps = any(isinstance(v, dict) for v in [*live, *patched])
    if not maps:
        if delete_list:
            return [v for v in live if v not in patched]
        merged = _dedupe([*live, *patched])
        in_patch, server_only = _partition(merged, patched, None)
        return _normalize_order(in_patch, server_only, patched, live, None)
    if spec.key is None:
        raise PatchError("cannot merge lists of maps without a merge key")
    key = spec.key
    live, patched = _special_elements(list(live), patched, key)
    item = spec.item or EMPTY
    for element in patched:
        if not isinstance(element, dict) or key not in element:
            raise PatchError(f"map {element!r} does not contain declared merge key {key!r}")
        index = _find(live, key, element[key])
        if index is None:
            live.append(_strip(element, item))
        else:
            live[index] = _merge_map(live[index], element, item)
    in_patch, server_only = _partition(live, patched, key)
    return _normalize_order(in_patch, server_only, patched, live, key)


def _special_elements(live: list[Any], patched: list[Any], key: str) -> tuple[list[Any], list[Any]]:
    """Apply ``$patch: delete`` elements; ``$patch: replace`` makes the rest the list."""
    rest: list[Any] = []
    replace = False
    for element in patched:
        if not isinstance(element, dict):
            raise PatchError(f"list element {element!r} is not a map")
        directive = element.get(DIRECTIVE)
        if directive is None:
            rest.append(element)
        elif directive == "delete":
            if key not in element:
                raise PatchError(f"map {element!r} does not contain declared merge key {key!r}")
            live = [v for v in live if not (isinstance(v, dict) and v.get(key) == element[key])]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type {directive!r} in list")
    if replace:
        return rest, []
    return live, rest


def _find(items: list[Any], key: str, value: Any) -> int | None:
    for i, v in enumerate(items):
        if isinstance(v, dict) and key in v and v[key] == value:
            return i
    return None


def _same(a: Any, b: Any, merge_key: str | None) -> bool:
    if merge_key is None:
        return bool(a == b)
    return isinstance(a, dict) and isinstance(b, dict) and a.get(merge_key) == b.get(merge_key)


def _index(items: list[Any], value: Any, merge_key: str | None) -> int:
    for i, v in enumerate(items):
        if _same(v, value, merge_key):
            return i
    return -1


def _partition(
    items: list[Any], by: list[Any], merge_key: str | None
) -> tuple[list[Any], list[Any]]:
    """Split into the items present in ``by`` and the server-only rest."""
    present = [v for v in items if _index(by, v, merge_key) >= 0]
    rest = [v for v in items if _index(by, v, merge_key) < 0]
    return present, rest


def _sorted_by(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    """Stable sort by position in ``order``; items absent from it keep their place last."""
    known = [v for v in items if _index(order, v, merge_key) >= 0]
    known.sort(key=lambda v: _index(order, v, merge_key))
    return known + [v for v in items if _index(order, v, merge_key) < 0]


def _normalize_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str | None,
) -> list[Any]:
    """Interleave patch items (in patch order) with server-only items (in live order).

    A server-only item goes before a patch item only if both are in the live list and it
    came first there; otherwise the patch item goes first. This is upstream's
    ``mergeSortedSlice``, which keeps both relative orders.
    """
    right = _sorted_by(patch_items, patch_order, merge_key)
    left = _sorted_by(server_only, server_order, merge_key)
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            out.append(left[i])
            i += 1
        elif i >= len(left):
            out.append(right[j])
            j += 1
        else:
            li = _index(server_order, left[i], merge_key)
            ri = _index(server_order, right[j], merge_key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _dedupe(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in items:
        if v not in out:
            out.append(v)
    return out


def _strip(value: Any, spec: Schema | MergeList | None) -> Any:
    """A patch value that lands where nothing was: directives applied against nothing."""
    if isinstance(value, dict):
        return _merge_map({}, value, spec if isinstance(spec, Schema) else EMPTY)
    if isinstance(value, list) and isinstance(spec, MergeList):
        return _merge_list([], value, spec, False)
    return value


# -- JSON merge patch (RFC 7386) ------------------------------------------------------


def json_merge_patch(original: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null removes a member, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


# -- JSON patch (RFC 6902) ------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    """RFC 6901: "/a/b~1c" → ["a", "b/c"]."""
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer {path!r}")
    if not path:
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _array_index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise PatchError(f"array index {index} out of range")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"path component {token!r} not found")
            node = node[token]
        elif isinstance(node, list):
            node = node[_array_index(node, token, allow_end=False)]
        else:
            raise PatchError(f"cannot descend into {token!r}")
    return node


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path component {last!r} not found")
        return parent[last]
    if isinstance(parent, list):
        return parent[_array_index(parent, last, allow_end=False)]
    raise PatchError(f"cannot read {last!r}")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_array_index(parent, last, allow_end=True), value)
    else:
        raise PatchError(f"cannot add at {last!r}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path component {last!r} not found")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_array_index(parent, last, allow_end=False))
    raise PatchError(f"cannot remove {last!r}")


def json_patch(original: Any, operations: Any) -> Any:
    """RFC 6902: apply each operation in turn; any failure fails the whole patch."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(original)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        kind, path = op["op"], _pointer(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{kind} operation without a value")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc, _ = _remove(doc, path) if path else (doc, None)
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from"))
            if kind == "move":
                if path[: len(source)] == source and len(path) > len(source):
                    raise PatchError("cannot move a value into one of its children")
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"testing value {op['path']} failed")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return doc


# -- dispatch -------------------------------------------------------------------------


def apply_patch(
    content_type: str, original: Mapping[str, Any], body: bytes, schema: Schema = EMPTY
) -> dict[str, Any]:
    """Decode ``body`` and apply it as ``content_type`` says. Raises PatchError."""
    try:
        patch = json.loads(body or b"null")
    except ValueError as exc:
        raise PatchError(f"error decoding patch: {exc}") from exc
    media = content_type.split(";", 1)[0].strip().lower()
    if media == STRATEGIC_MERGE_PATCH:
        result: Any = strategic_merge_patch(original, patch, schema)
    elif media == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise PatchError("a merge patch must be a JSON object")
        result = json_merge_patch(dict(original), patch)
    elif media == JSON_PATCH:
        result = json_patch(dict(original), patch)
    else:
        raise PatchError(f"unsupported patch type {content_type!r}")
    if not isinstance(result, dict):
        raise PatchError("the patched object is not a JSON object")
    return result
