"""Who this node is: its name, hostname and addresses, and the Node object's UID.

One small object, made at start-up and handed to whoever needs it. The UID is known
only once the Node object exists in the API (``run_node`` records it): mirror pods and
the lease carry it in their owner reference, and go without one until then.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

import attrs

from .machine import MachineInfo


@attrs.define
class NodeIdentity:
    """The node's name (``--hostname-override``, lowercased), its hostname, its IPs."""

    name: str
    hostname: str
    ips: tuple[str, ...]
    uid: str | None = None
    """The Node object's UID, once registration (or the wait for it) found the Node."""

    @classmethod
    def detect(
        cls,
        name: str,
        hostname_override: str,
        node_ip_flag: str,
        machine: MachineInfo,
        ips: Sequence[str] | None = None,
    ) -> NodeIdentity:
        """The identity for these flags on this machine (``ips`` given: used as they are)."""
        hostname = (hostname_override or machine.hostname).lower()
        found = tuple(ips) if ips is not None else detect_node_ips(node_ip_flag, hostname)
        return cls(name, hostname, found)

    @property
    def host_ip(self) -> str:
        """The address host-network pods are probed on (their sandbox has none)."""
        return self.ips[0] if self.ips else "127.0.0.1"

    def owner_uid(self) -> str | None:
        """The UID owner references use; None before the Node is known."""
        return self.uid


def detect_node_ips(node_ip_flag: str, hostname: str) -> tuple[str, ...]:
    """``--node-ip`` if given; else the hostname's non-loopback address; else the address
    of the interface a default route would use (found without sending anything)."""
    if node_ip_flag:
        return tuple(ip.strip() for ip in node_ip_flag.split(",") if ip.strip())
    try:
        for info in socket.getaddrinfo(hostname, None, socket.AF_INET):
            address = str(info[4][0])
            if not ipaddress.ip_address(address).is_loopback:
                return (address,)
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 9))  # UDP connect: no packet leaves
            return (str(probe.getsockname()[0]),)
    except OSError:
        return ()
