"""The container manager component: its cgroups part, then the registered managers.

``run_container_manager`` is the entry. It starts the cgroup component (the kubepods
and QoS tree, pod cgroups on demand) and each manager of ``registry.RESOURCE_MANAGERS``
in its nursery, and hands back the ``ContainerManager`` over them.
"""

from __future__ import annotations

import functools
import logging
import os

import attrs
import trio

from kubelet.cgroups import (
    CgroupParts,
    CgroupSettings,
    PodCgroups,
    driver_from_runtime,
    run_cgroups,
)
from kubelet.config import features
from kubelet.decisions import container_limits, pod_qos
from kubelet.errors import FatalError
from kubelet.volumes import noswap_supported

from .capabilities import ResourceManager, bind_all
from .kerneltunables import KernelTunablesError, in_user_namespace, setup_kernel_tunables
from .manager import ContainerManager
from .parts import CmParts
from .podcgroups import CgroupsPart
from .registry import RESOURCE_MANAGERS

log = logging.getLogger(__name__)


async def run_container_manager(
    parts: CmParts,
    *,
    task_status: trio.TaskStatus[ContainerManager] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Start the cgroups part and the resource managers; hand back the container
    manager; run what they keep running until cancelled."""
    cfg = parts.options.config
    await _kernel_tunables(parts)
    async with trio.open_nursery() as nursery:
        cgroups = await _start_cgroups(parts, nursery)
        managers: list[ResourceManager] = [CgroupsPart(cgroups)]
        for start in RESOURCE_MANAGERS:
            managers.append(await start(parts, nursery))
        bind_all(managers)
        task_status.started(
            ContainerManager(
                parts.resources,
                managers,
                cgroups=cgroups,
                limits=container_limits(
                    cfg,
                    cgroups.swap,
                    cgroups.manager.hugepage_sizes,
                    group_oom_kill=cgroups.version.group_oom_kill,
                ),
                cgroup_root=cfg.cgroup_root,
                changed=parts.changed,
                health_changed=parts.health_changed,
            )
        )


async def _kernel_tunables(parts: CmParts) -> None:
    """Check or set the kernel tunables (``protectKernelDefaults``); the kubelet stops when
    they differ or cannot be set, as upstream's container manager does."""
    options = parts.options
    ignore = options.features.enabled(features.KUBELET_IN_USER_NAMESPACE) and in_user_namespace()
    try:
        await parts.file_io(
            functools.partial(
                setup_kernel_tunables,
                parts.proc_sys,
                protect=options.config.protect_kernel_defaults,
                ignore_write_errors=ignore,
            )
        )
    except KernelTunablesError as exc:
        log.critical('"Failed to start ContainerManager" err="%s"', exc)
        raise FatalError(f"Failed to start ContainerManager: {exc}") from exc


async def _start_cgroups(parts: CmParts, nursery: trio.Nursery) -> PodCgroups:
    """The cgroup component: the QoS tree sized from the machine, with the cgroup driver
    the runtime uses (when it says)."""
    options = parts.options
    probe = os.path.join(options.root_dir, "plugins", "kubernetes.io~empty-dir")
    settings = CgroupSettings.from_config(
        options.config,
        pod_level_resources=options.features.enabled(features.POD_LEVEL_RESOURCES),
        qos_reserved=options.features.enabled(features.QOS_RESERVED),
    )
    driver = await driver_from_runtime(parts.runtime.runtime_config, settings.driver)
    cgroups: PodCgroups = await nursery.start(
        run_cgroups,
        CgroupParts(
            settings=attrs.evolve(settings, driver=driver),
            host=parts.host,
            capacity=parts.resources.capacity,
            active=parts.active,
            qos_of=pod_qos,
            record=parts.record,
            noswap=functools.partial(noswap_supported, probe),  # tmpfs keeps volumes off swap
            observe=parts.observe,
        ),
    )
    return cgroups
