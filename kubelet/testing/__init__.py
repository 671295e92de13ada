"""Test doubles that speak the real protocols: FakeRuntime (CRI over grpclib)."""

from .fakeruntime import (
    BUSYBOX_IMAGE,
    PAUSE_IMAGE,
    CallRecord,
    ContainerBehaviour,
    ExecResult,
    FakeRuntime,
)
from .faults import FaultPlan

__all__ = [
    "BUSYBOX_IMAGE",
    "PAUSE_IMAGE",
    "CallRecord",
    "ContainerBehaviour",
    "ExecResult",
    "FakeRuntime",
    "FaultPlan",
]
