"""The container runtime component: the pod driver and what it keeps running.

``run_runtime`` assembles the driver (``PodRuntime``: sync and teardown over the CRI)
from its parts -- images and pull credentials, volumes, isolation (RuntimeClass handler,
user namespaces), DNS, the container manager -- and runs in its nursery what the runtime
needs in the background: the runtime's features read from CRI Status, the RuntimeClass
watch and container log rotation. It hands back the ``PodRuntime``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet.api import Pod
from kubelet.boundedio import RunSync, in_thread
from kubelet.cm import ContainerManager
from kubelet.config import ENV_FILES, HOSTNAME_OVERRIDE, Options, features
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.csi import CsiDrivers
from kubelet.decisions import IMAGE_PULL_INITIAL, IMAGE_PULL_MAX, Backoff, crash_loop_limits
from kubelet.env import ApiEnvLookup, DnsSettings
from kubelet.events import EventRecorder
from kubelet.handlers import HttpGetter
from kubelet.metrics import KubeletMetrics
from kubelet.volumes import (
    ApiClaimLookup,
    ApiTokenSource,
    CsiVolumes,
    VolumeManager,
    pod_dir,
    setup_data_dirs,
)

from .credentials import (
    ApiPullSecrets,
    NodeCredentials,
    pull_records,
)
from .images import ImageManager
from .isolation import PodIsolation
from .logrotate import ContainerLogManager
from .podruntime import PodRuntime, PodRuntimeParts
from .runtimeclass import RuntimeClasses
from .runtimeinfo import RuntimeInfo
from .userns import UserNamespaces

if TYPE_CHECKING:
    from kubelet.api import ApiClient

    from .credentials import PluginKeyring


@attrs.frozen(kw_only=True)
class RuntimeParts:
    """What the runtime component is made from (``agent`` builds it)."""

    options: Options
    runtime: RuntimeClient
    images: ImageClient
    api: ApiClient | None
    recorder: EventRecorder
    metrics: KubeletMetrics
    http: HttpGetter
    """the postStart/preStop hooks' HTTP client (the prober's)"""
    node_name: str
    node_ips: Sequence[str]
    node_labels: Mapping[str, str] = attrs.field(factory=dict)
    """the Node's labels (a PersistentVolume's node affinity is matched against them)"""
    cm: ContainerManager
    """the node's resources (OOM scores, the downward API's defaults), each pod's
    cgroup, the resource managers' part of every container"""
    service_env: Callable[[Pod], Mapping[str, str]] | None = None
    wall_clock: Callable[[], float]
    containers_log_dir: str = ""
    """where started containers' logs are linked ("": nowhere)"""
    log_io: RunSync = in_thread
    """where the pods' log directories are read"""
    csi: CsiDrivers | None = None
    """the registered CSI drivers (CSI volumes); None: no CSI volume can be mounted"""


async def run_runtime(
    parts: RuntimeParts,
    *,
    task_status: trio.TaskStatus[PodRuntime] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Build the pod driver, start what it needs running, hand it back; run until cancelled."""
    options, api = parts.options, parts.api
    cfg = options.config
    setup_data_dirs(options.root_dir, cfg.pod_logs_dir, parts.containers_log_dir)
    volumes = VolumeManager(
        options.root_dir,
        lookup=ApiEnvLookup(api) if api is not None else None,
        tokens=ApiTokenSource(api, parts.wall_clock) if api is not None else None,
        node_allocatable=parts.cm.allocatable,
        claims=ApiClaimLookup(api) if api is not None else None,
        node_labels=parts.node_labels,
        csi=_csi_volumes(parts) if parts.csi is not None else None,
    )
    isolation = _isolation(options, api, volumes)
    pods = PodRuntime(_driver_parts(parts, volumes, isolation))
    try:
        await _run_background(parts, isolation, pods, task_status)
    finally:  # an open grpclib channel left behind is reported to the loop as an error
        if parts.csi is not None:
            parts.csi.close()


async def _run_background(
    parts: RuntimeParts,
    isolation: PodIsolation,
    pods: PodRuntime,
    task_status: trio.TaskStatus[PodRuntime],
) -> None:
    runtime, cfg = parts.runtime, parts.options.config
    async with trio.open_nursery() as nursery:
        await nursery.start(isolation.runtime_info.run, runtime)
        if isolation.runtime_classes is not None:
            nursery.start_soon(isolation.runtime_classes.run)
        nursery.start_soon(
            ContainerLogManager(
                runtime,
                cfg.container_log_max_size,
                cfg.container_log_max_files,
                monitor_interval=cfg.container_log_monitor_interval,
                max_workers=cfg.container_log_max_workers,
            ).run
        )
        task_status.started(pods)


def _csi_volumes(parts: RuntimeParts) -> CsiVolumes:
    api = parts.api
    assert parts.csi is not None
    return CsiVolumes(
        parts.options.root_dir,
        parts.csi,
        api=api,
        node_name=parts.node_name,
        lookup=ApiEnvLookup(api) if api is not None else None,
        tokens=ApiTokenSource(api, parts.wall_clock) if api is not None else None,
    )


def _driver_parts(
    parts: RuntimeParts, volumes: VolumeManager, isolation: PodIsolation
) -> PodRuntimeParts:
    """The pod driver's parts: the image manager, the crash-loop back-off, the settings."""
    options, api = parts.options, parts.api
    cfg = options.config
    limits = crash_loop_limits(
        options.features, cfg.crash_loop_back_off.max_container_restart_period
    )
    return PodRuntimeParts(
        runtime=parts.runtime,
        images=_image_manager(parts),
        crash_backoff=Backoff(*limits, parts.wall_clock),
        cm=parts.cm,
        pod_logs_dir=cfg.pod_logs_dir,
        recorder=parts.recorder,
        root_dir=options.root_dir,
        http=parts.http,
        volumes=volumes,
        node_name=parts.node_name,
        env_lookup=ApiEnvLookup(api) if api is not None else None,
        service_env=parts.service_env,
        dns=_dns_settings(options, parts.node_ips),
        isolation=isolation,
        seccomp_default=cfg.seccomp_default,
        metrics=parts.metrics,
        containers_log_dir=parts.containers_log_dir,
        env_files=options.features.enabled(ENV_FILES),
        log_io=parts.log_io,
    )


def _dns_settings(options: Options, node_ips: Sequence[str]) -> DnsSettings:
    """What the sandboxes' resolv.conf, hostname and /etc/hosts are made from."""
    cfg = options.config
    return DnsSettings(
        cluster_dns=tuple(cfg.cluster_dns),
        cluster_domain=cfg.cluster_domain,
        resolv_conf=cfg.resolv_conf,
        node_ips=tuple(node_ips),
        hostname_override_enabled=options.features.enabled(HOSTNAME_OVERRIDE),
    )


def _image_manager(parts: RuntimeParts) -> ImageManager:
    """Pulls with their back-off, the pod's and the node's credentials, the credential
    provider plugins', pull records."""
    options, api, metrics = parts.options, parts.api, parts.metrics
    cfg = options.config
    return ImageManager(
        parts.images,
        Backoff(IMAGE_PULL_INITIAL, IMAGE_PULL_MAX, trio.current_time),
        serialize=cfg.serialize_image_pulls,
        max_parallel=cfg.max_parallel_image_pulls,
        recorder=parts.recorder,
        secrets=ApiPullSecrets(api) if api is not None else None,
        records=pull_records(
            cfg,
            options.root_dir,
            parts.wall_clock,
            enabled=options.features.enabled(features.KUBELET_ENSURE_SECRET_PULLED_IMAGES),
        ),
        node=NodeCredentials(options.root_dir, trio.current_time),
        plugins=_credential_plugins(options, metrics),
        pulls=metrics.pod_startup,
        on_pulled=metrics.observe_image_pull,
    )


def _credential_plugins(options: Options, metrics: KubeletMetrics) -> PluginKeyring | None:
    """``--image-credential-provider-config`` / ``-bin-dir``: checked now, as upstream does
    at start-up (ConfigError names the file, field or flag)."""
    config, bin_dir = (
        options.image_credential_provider_config,
        options.image_credential_provider_bin_dir,
    )
    if not config and not bin_dir:
        return None
    from .credentials import PluginKeyring, PluginMetrics, load_provider_config

    providers = load_provider_config(config, bin_dir)
    return PluginKeyring(
        providers,
        bin_dir,
        clock=trio.current_time,
        metrics=PluginMetrics(metrics.registry),
    )


def _isolation(options: Options, api: ApiClient | None, volumes: VolumeManager) -> PodIsolation:
    """What sandboxes run under: the RuntimeClass handler, the user namespace."""
    runtime_info = RuntimeInfo()
    return PodIsolation(
        runtime_info,
        RuntimeClasses(api) if api is not None else None,
        UserNamespaces(functools.partial(pod_dir, options.root_dir), volumes.pod_uids_on_disk),
        user_namespaces_enabled=options.features.enabled(features.USER_NAMESPACES_SUPPORT),
    )
