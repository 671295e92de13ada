"""What the node's resource managers add to one container's CRI config, as one value.

The container manager (``kubelet.cm``) asks each of its resource managers for a
``ContainerContribution`` and merges them; ``criconfig.container_config`` takes the
merged value and writes it into the ContainerConfig (``apply_contribution``). A new
manager (devices, CPU, memory, DRA) fills fields here rather than adding parameters to
the config builder. Upstream's equivalent is the RunContainerOptions the device manager
returns, plus the cpuset the CPU and memory managers set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from kubelet.cri import api


@attrs.frozen
class DeviceSpec:
    """A host device made visible in the container (``linux`` devices of the config)."""

    container_path: str
    host_path: str
    permissions: str = "rwm"


@attrs.frozen
class MountSpec:
    """A host path bind-mounted into the container, beside its volume mounts."""

    container_path: str
    host_path: str
    read_only: bool = False


@attrs.frozen
class ContainerContribution:
    """Devices, mounts, variables, annotations, CDI devices and the cpuset the managers
    give one container; the empty value (``NO_CONTRIBUTION``) changes nothing."""

    devices: tuple[DeviceSpec, ...] = ()
    mounts: tuple[MountSpec, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    """set before the container's own variables: the container's win a clash"""
    annotations: tuple[tuple[str, str], ...] = ()
    """the kubelet's own container annotations win a clash"""
    cdi_devices: tuple[str, ...] = ()
    """fully qualified CDI device names (vendor.com/class=name)"""
    cpuset_cpus: str = ""
    cpuset_mems: str = ""

    def merged(self, other: ContainerContribution) -> ContainerContribution:
        """Both managers' parts; a cpuset set by ``other`` replaces this one's."""
        return ContainerContribution(
            devices=self.devices + other.devices,
            mounts=self.mounts + other.mounts,
            env=self.env + other.env,
            annotations=self.annotations + other.annotations,
            cdi_devices=self.cdi_devices + other.cdi_devices,
            cpuset_cpus=other.cpuset_cpus or self.cpuset_cpus,
            cpuset_mems=other.cpuset_mems or self.cpuset_mems,
        )


NO_CONTRIBUTION = ContainerContribution()


def merge_contributions(parts: Iterable[ContainerContribution]) -> ContainerContribution:
    """The managers' contributions in registration order, as one value."""
    out = NO_CONTRIBUTION
    for part in parts:
        out = out.merged(part)
    return out


def apply_contribution(
    config: api.ContainerConfig, contribution: ContainerContribution
) -> api.ContainerConfig:
    """``config`` with ``contribution`` written in (in place; returned for chaining).
    Variables and mounts go before the container's own, as upstream orders its run
    options; annotations under the kubelet's own."""
    if contribution == NO_CONTRIBUTION:
        return config
    c = contribution
    envs = [api.KeyValue(key=k, value=v.encode()) for k, v in c.env]
    envs += list(config.envs)
    del config.envs[:]
    config.envs.extend(envs)
    mounts = [
        api.Mount(container_path=m.container_path, host_path=m.host_path, readonly=m.read_only)
        for m in c.mounts
    ]
    mounts += list(config.mounts)
    del config.mounts[:]
    config.mounts.extend(mounts)
    config.devices.extend(
        api.Device(
            container_path=d.container_path, host_path=d.host_path, permissions=d.permissions
        )
        for d in c.devices
    )
    config.CDI_devices.extend(api.CDIDevice(name=name) for name in c.cdi_devices)
    own: Mapping[str, str] = dict(config.annotations)
    config.annotations.update({**dict(c.annotations), **own})
    if c.cpuset_cpus:
        config.linux.resources.cpuset_cpus = c.cpuset_cpus
    if c.cpuset_mems:
        config.linux.resources.cpuset_mems = c.cpuset_mems
    return config
