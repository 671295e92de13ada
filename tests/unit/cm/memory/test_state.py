"""memory_manager_state in upstream's format, and reservedMemory checked as upstream."""

import pytest

from kubelet.cm.memory.reserved import (
    ReservedMemoryError,
    check_reservations,
    node_reservation,
    system_reserved,
)
from kubelet.cm.memory.state import (
    Block,
    CorruptCheckpoint,
    MemoryState,
    MemoryTable,
    NodeState,
    decode,
    encode,
)
from kubelet.config.kubeletconfig import MemoryReservation

UPSTREAM = (
    b'{"policyName":"static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":'
    b'{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,'
    b'"free":1024}},"cells":[]}},"entries":{"pod":{"container1":[{"numaAffinity":[0],'
    b'"type":"memory","size":512}]}},"checksum":4215593881}'
)
"""a checkpoint from upstream's tests, with the checksum upstream's kubelet computed"""


def test_an_upstream_checkpoint_is_read_and_written_back_byte_for_byte() -> None:
    state = decode(UPSTREAM)
    assert state.policy == "static"
    assert state.machine == {0: NodeState(0, {"memory": MemoryTable(2048, 512, 1536, 512, 1024)})}
    assert state.entries == {"pod": {"container1": [Block((0,), "memory", 512)]}}
    assert encode(state) == UPSTREAM


def test_a_wrong_checksum_or_shape_is_refused_and_zero_is_accepted() -> None:
    with pytest.raises(CorruptCheckpoint, match="checkpoint is corrupted"):
        decode(UPSTREAM.replace(b'"size":512}', b'"size":513}'))
    assert decode(UPSTREAM.replace(b"4215593881", b"0")).policy == "static"
    with pytest.raises(CorruptCheckpoint):
        decode(b'{"policyName":"Static","machineState":{"0":{"cells":"x"}}}')


def test_an_empty_static_state_round_trips() -> None:
    state = MemoryState("None")
    assert encode(state).startswith(b'{"policyName":"None","machineState":{},"checksum":')
    assert decode(encode(state)) == state


def _r(node: int, **limits: str) -> MemoryReservation:
    return MemoryReservation(
        numa_node=node, limits={k.replace("_", "-"): v for k, v in limits.items()}
    )


def test_reserved_memory_must_add_up_to_the_node_reservation() -> None:
    reservation = node_reservation({"memory": "1Gi"}, {}, {"memory.available": "100Mi"}, 8 << 30)
    assert str(reservation["memory"]) == "1124Mi"
    good = [_r(0, memory="1Gi"), _r(1, memory="100Mi")]
    assert system_reserved(good, [0, 1], reservation) == {
        0: {"memory": 1 << 30},
        1: {"memory": 100 << 20},
    }
    with pytest.raises(ReservedMemoryError) as refused:
        system_reserved([_r(0, memory="1Gi")], [0, 1], reservation)
    assert str(refused.value) == (
        'the total amount "1Gi" of type "memory" is not equal to the value "1124Mi" '
        "determined by Node Allocatable feature"
    )
    with pytest.raises(ReservedMemoryError) as refused:
        system_reserved([_r(3, memory="1124Mi")], [0, 1], reservation)
    assert str(refused.value) == (
        "the reserved memory configuration references a NUMA node 3 that does not exist on "
        "this machine"
    )


def test_reserved_memory_entries_are_checked_as_upstream_configuration() -> None:
    with pytest.raises(ReservedMemoryError, match='the limit type "cpu" for NUMA node 0'):
        check_reservations([_r(0, cpu="1")])
    with pytest.raises(ReservedMemoryError, match="may not be zero"):
        check_reservations([_r(0, memory="0")])
    with pytest.raises(ReservedMemoryError, match="duplicate value for NUMA node 0"):
        check_reservations([_r(0, memory="1Gi"), _r(0, memory="1Gi")])
    check_reservations([_r(0, memory="1Gi", hugepages_2Mi="2Mi")])
