"""kubelet_volume_stats_*: one series per claim, from the summary's volume rows."""

from kubelet.server.volumemetrics import volume_stats_text


def test_claim_volumes_are_reported_once_per_claim() -> None:
    rows = [
        {"name": "data", "pvcRef": {"name": "db", "namespace": "ns"}, "capacityBytes": 100,
         "availableBytes": 60, "usedBytes": 40, "inodes": 10, "inodesFree": 7, "inodesUsed": 3},
        {"name": "data", "pvcRef": {"name": "db", "namespace": "ns"}, "capacityBytes": 999},
        {"name": "scratch", "capacityBytes": 5},
    ]  # fmt: skip
    text = volume_stats_text(rows).decode()
    assert (
        'kubelet_volume_stats_capacity_bytes{namespace="ns",persistentvolumeclaim="db"} 100.0'
        in text
    )
    assert 'kubelet_volume_stats_used_bytes{namespace="ns",persistentvolumeclaim="db"} 40.0' in text
    assert 'kubelet_volume_stats_inodes_free{namespace="ns",persistentvolumeclaim="db"} 7.0' in text
    assert "999" not in text and "scratch" not in text
