"""The sources nursery: the PodConfig merge, then every configured source.

``open_sources`` is its entry: the merge task starts first, then the manifest
directory, the manifest URL and (in a cluster) the API source, each retrying with
back-off on its own. It hands back the ``PodConfig``, whose ``updates`` the syncLoop
reads and whose ``seen_all_sources`` tells housekeeping when every source has spoken
and the syncLoop has handled what it said.
With no source at all the kubelet is ready at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from kubelet.api import Pod, drop_container_restart_rules, drop_pod_level_resources
from kubelet.boundedio import RunSync, in_thread
from kubelet.config import (
    CONTAINER_RESTART_RULES,
    POD_LEVEL_RESOURCES,
    RESTART_ALL_CONTAINERS,
    FeatureGates,
    Options,
)

from .apiserver import ApiSource
from .file import FileSource
from .podconfig import PodConfig, WatchObserver
from .static import warm_up
from .url import URLSource
from .validation import PodValidationOptions

if TYPE_CHECKING:
    from kubelet.api import ApiClient


def validation_options(features: FeatureGates) -> PodValidationOptions:
    """What static pods may hold under the kubelet's gates (upstream validates them with
    the options its gates give)."""
    return PodValidationOptions(
        container_restart_rules=features.enabled(CONTAINER_RESTART_RULES),
        restart_all_containers=features.enabled(RESTART_ALL_CONTAINERS),
    )


def pod_view(features: FeatureGates) -> Callable[[Pod], Pod] | None:
    """How the kubelet reads its pods: without the fields of a gate that is off, as
    upstream's kubelet then ignores them (the container restart fields without
    ``ContainerRestartRules``, pod-level resources without ``PodLevelResources``)."""
    views = []
    if not features.enabled(CONTAINER_RESTART_RULES):
        views.append(drop_container_restart_rules)
    if not features.enabled(POD_LEVEL_RESOURCES):
        views.append(drop_pod_level_resources)
    if not views:
        return None

    def view(pod: Pod) -> Pod:
        for each in views:
            pod = each(pod)
        return pod

    return view


def static_sources(
    options: Options, *, watch_files: bool = True, run_sync: RunSync = in_thread
) -> Sequence[FileSource | URLSource]:
    """The manifest directory (``staticPodPath``) and URL (``staticPodURL``), as set."""
    cfg = options.config
    validation = validation_options(options.features)
    found: list[FileSource | URLSource] = []
    if cfg.static_pod_path:
        found.append(
            FileSource(
                cfg.static_pod_path,
                options.node_name,
                check_frequency=cfg.file_check_frequency,
                watch=watch_files,
                run_sync=run_sync,
                validation=validation,
            )
        )
    if cfg.static_pod_url:
        found.append(
            URLSource(
                cfg.static_pod_url,
                options.node_name,
                headers=cfg.static_pod_url_header,
                check_frequency=cfg.http_check_frequency,
                run_sync=run_sync,
                validation=validation,
            )
        )
    return found


async def open_sources(
    options: Options,
    api: ApiClient | None,
    watch_files: bool = True,
    run_sync: RunSync = in_thread,
    *,
    watch: WatchObserver | None = None,
    task_status: trio.TaskStatus[PodConfig] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Merge and run every source until cancelled (pod decoding warmed up first, so that
    the first pod does not pay for it); ``watch`` hears of the API's pods (the startup
    SLI)."""
    await run_sync(warm_up)
    config = PodConfig(watch=watch, view=pod_view(options.features))
    sources: list[Any] = list(static_sources(options, watch_files=watch_files, run_sync=run_sync))
    if api is not None:
        sources.append(ApiSource(api, options.node_name))
    async with trio.open_nursery() as nursery:
        await nursery.start(config.run)
        for source in sources:
            await nursery.start(source.run, config)
        task_status.started(config)
