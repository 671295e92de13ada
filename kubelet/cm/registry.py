"""The resource managers the container manager runs after its cgroups part, in order.

A manager is registered as the coroutine that starts it: it gets the container
manager's parts and nursery, starts what it keeps running there, and returns the
manager (a ``capabilities.ResourceManager`` that subclasses the capabilities it
implements). Admission, contributions and hooks ask the managers in this order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from . import devices
from .capabilities import ResourceManager
from .cpu import start_cpu_manager
from .dra import start_dra
from .memory import start_memory_manager
from .parts import CmParts
from .topology import start_topology_manager

StartManager = Callable[[CmParts, trio.Nursery], Awaitable[ResourceManager]]

RESOURCE_MANAGERS: tuple[StartManager, ...] = (
    start_topology_manager,  # first: its admission sets the affinities the others use
    start_cpu_manager,
    start_memory_manager,
    devices.start,
    start_dra,
)
