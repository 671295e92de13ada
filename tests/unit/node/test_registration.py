"""Node registration: which refusals of the create still adopt an existing Node."""

from __future__ import annotations

from typing import Any, cast

import pytest
import trio

from kubelet.api import AlreadyExists, ApiClient, ApiError, Forbidden
from kubelet.node import default_labels
from kubelet.node.registration import initial_node, register

LABELS = default_labels("node1", "linux", "amd64")


class Nodes:
    """An API server whose node create fails with ``refusal``; the Node exists."""

    def __init__(self, refusal: ApiError) -> None:
        self.refusal = refusal
        self.gets = 0

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        raise self.refusal

    async def get(self, path: str) -> dict[str, Any]:
        self.gets += 1
        return {"metadata": {"name": "node1", "labels": dict(LABELS)}}


async def attempt(refusal: ApiError, *, get_on_exists_only: bool) -> tuple[Nodes, Any]:
    nodes = Nodes(refusal)
    found = None
    with trio.move_on_after(60):
        found = await register(
            cast(ApiClient, nodes),
            lambda: initial_node("node1", labels=LABELS),
            LABELS,
            get_on_exists_only=get_on_exists_only,
        )
    return nodes, found


FORBIDDEN = Forbidden(403, "Forbidden", 'nodes "node1" is forbidden: no new nodes')


@pytest.mark.parametrize("refusal", [AlreadyExists(409, "AlreadyExists", "exists"), FORBIDDEN])
async def test_a_refused_create_adopts_the_existing_node(
    autojump_clock: trio.abc.Clock, refusal: ApiError
) -> None:
    """KubeletRegistrationGetOnExistsOnly off (the default): an admission policy that
    forbids creating nodes does not keep an existing one from being adopted."""
    nodes, found = await attempt(refusal, get_on_exists_only=False)
    assert found is not None and found["metadata"]["name"] == "node1"
    assert nodes.gets == 1


async def test_with_the_gate_only_already_exists_adopts(autojump_clock: trio.abc.Clock) -> None:
    nodes, found = await attempt(FORBIDDEN, get_on_exists_only=True)
    assert found is None and nodes.gets == 0  # retried until given up on
    nodes, found = await attempt(
        AlreadyExists(409, "AlreadyExists", "exists"), get_on_exists_only=True
    )
    assert found is not None and nodes.gets == 1
