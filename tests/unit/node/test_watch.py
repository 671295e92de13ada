"""Which copy of the Node admission reads: the newer of the watch's and the reporter's."""

from __future__ import annotations

from typing import Any

from kubelet.node.watch import newest


def node(rv: str, taints: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": "n", "resourceVersion": rv}, "spec": {"taints": [{}] * taints}}


def test_the_newer_copy_wins() -> None:
    watched, written = node("12", taints=1), node("9")
    assert newest(watched, written) is watched
    assert newest(node("8"), written) is written
    assert newest(None, written) is written
    assert newest(watched, None) is watched
    assert newest(None, None) is None
    same = node("9")
    assert newest(same, written) is same  # a tie: the first (the watch's)
