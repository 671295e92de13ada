"""When the node expands a mounted claim, and the claim's status afterwards."""

from typing import Any

from kubelet.volumes.expansion import Expansion, expansion, finished_patch


def pvc(capacity: str, resize: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"capacity": {"storage": capacity}}
    if resize:
        status["allocatedResourceStatuses"] = {"storage": resize}
    return {"status": status}


def pv(capacity: str) -> dict[str, Any]:
    return {"spec": {"capacity": {"storage": capacity}}}


def test_a_claim_waiting_for_the_node_is_expanded_to_the_volumes_capacity() -> None:
    for status in ("NodeResizePending", "NodeResizeInProgress"):
        assert expansion(pvc("1Gi", status), pv("2Gi"), 1 << 30) == Expansion(
            2 << 30, "2Gi", update_claim=True
        )


def test_nothing_to_do_without_a_resize_status_or_growth() -> None:
    assert expansion(pvc("1Gi"), pv("2Gi"), 1 << 30) is None  # the resizer finishes alone
    assert expansion(pvc("2Gi"), pv("2Gi"), 2 << 30) is None
    assert expansion(pvc("1Gi", "NodeResizeInfeasible"), pv("2Gi"), None) is None
    assert expansion(pvc("1Gi", "NodeResizePending"), {"spec": {}}, None) is None


def test_a_volume_grown_past_what_was_published_is_expanded_leaving_the_claim() -> None:
    """Expanded on another node first: the claim already shows the size."""
    assert expansion(pvc("2Gi"), pv("2Gi"), 1 << 30) == Expansion(2 << 30, "2Gi", False)
    assert expansion(pvc("2Gi"), pv("2Gi"), None) is None  # a restarted kubelet: unknown


def test_the_finished_status_drops_the_resize_conditions_and_status() -> None:
    claim = pvc("1Gi", "NodeResizeInProgress")
    claim["status"]["conditions"] = [
        {"type": "Resizing"},
        {"type": "FileSystemResizePending"},
        {"type": "ModifyingVolume"},
    ]
    assert finished_patch(claim, "2Gi") == {
        "status": {
            "capacity": {"storage": "2Gi"},
            "conditions": [{"type": "ModifyingVolume"}],
            "allocatedResourceStatuses": {"storage": None},
        }
    }
