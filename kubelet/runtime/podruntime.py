"""Driving one pod's sandbox and containers toward its spec over the CRI.

``PodRuntime.sync`` computes the actions (``decisions.actions.compute_pod_actions``,
pure) and carries them out: kill what must go, create the sandbox, start the next init
container or the regular containers, each with its image, environment, mounts and
postStart hook. Teardown (``kill``, ``terminate``, ``remove``) is ``teardown.PodTeardown``'s:
a fixed order that holds even when the caller is cancelled half-way.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Collection, Mapping

import attrs
import trio

from kubelet.api import (
    Container,
    EphemeralContainer,
    Pod,
    format_pod,
    is_restartable_init_container,
)
from kubelet.boundedio import InputRefused, RunSync, file_names, in_thread
from kubelet.cm import ContainerManager, ResourceError
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    CriError,
    RuntimeClient,
    RuntimePodStatus,
    api,
    create_message_file,
    message_mount,
)
from kubelet.decisions import (
    Backoff,
    ContainerContribution,
    KillReason,
    PodActions,
    SecurityContextError,
    compute_pod_actions,
    container_config,
    crash_loop_backoff,
    crash_loop_key,
    image_user,
    needs_image_user,
    next_restart_count,
    pod_log_directory,
    restart_count_from_logs,
    sandbox_config,
    target_namespaces,
    verify_run_as_non_root,
)
from kubelet.env import (
    CREATE_CONTAINER_CONFIG_ERROR,
    INVALID_ENV_NAMES_REASON,
    DnsSettings,
    DNSWarning,
    EnvError,
    EnvLookup,
    EnvResult,
    PodHostnameError,
    hosts_file_content,
    hosts_file_path,
    hosts_mount,
    needs_pod_ip,
    resolve_command,
    resolve_env,
    should_mount_hosts_file,
    write_hosts_file,
)
from kubelet.events import NORMAL, WARNING, EventRecorder, ObjectRef, node_ref, pod_ref
from kubelet.handlers import HttpGetter
from kubelet.metrics import KubeletMetrics
from kubelet.volumes import (
    MountConfigError,
    PodEnvFiles,
    PodVolumes,
    VolumeManager,
    failure_reason,
    make_log_dir,
    pod_dir,
)

from .hooks import (
    EVENT_FAILED_POST_START_HOOK,
    POST_START_HOOK_ERROR,
    run_post_start,
)
from .images import ImageError, ImageManager, StatusesAhead
from .isolation import Isolation, IsolationError, PodIsolation
from .legacylogs import link_container_log
from .resize import Resizer, ResizeResult
from .startprep import Readied, StartsAhead
from .teardown import PodTeardown, still_running

log = logging.getLogger(__name__)

MAX_LOG_FILES = 65536
"""Entries of a container's log directory read for its restart count, at most."""

CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
CREATE_CONTAINER_ERROR = "CreateContainerError"
RUN_CONTAINER_ERROR = "RunContainerError"
PRE_START_HOOK_ERROR = "PreStartHookError"
DEFAULT_ROOT_DIR = "/var/lib/kubelet"


@attrs.frozen
class SyncOutcome:
    """What a sync left behind: containers waiting and why, when to look again, errors."""

    waiting: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    requeue_after: float | None = None
    errors: tuple[str, ...] = ()
    acted: bool = False
    """whether anything was killed, created, started or resized (the view is stale)"""
    resize_pending: bool = False
    """some running container is not yet at its allocation's resources"""
    resize_error: str = ""
    """why resizing it failed ("" none)"""


@attrs.define
class _Progress:
    waiting: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    requeue_after: float | None = None
    errors: list[str] = attrs.field(factory=list)
    acted: bool = False
    resize: ResizeResult = attrs.field(factory=ResizeResult)

    def retry_in(self, seconds: float | None) -> None:
        if seconds is None:
            return
        seconds = max(seconds, 0.0)
        if self.requeue_after is None or seconds < self.requeue_after:
            self.requeue_after = seconds

    def freeze(self) -> SyncOutcome:
        return SyncOutcome(
            dict(self.waiting),
            self.requeue_after,
            tuple(self.errors),
            self.acted,
            self.resize.pending,
            self.resize.error,
        )


@attrs.frozen
class _SandboxPlan:
    """The sandbox a sync would create: its config, handler and user namespace, DNS
    warnings, or why it cannot be made."""

    config: api.PodSandboxConfig
    isolation: Isolation
    error: str | None
    dns_warnings: tuple[DNSWarning, ...] = ()


@attrs.frozen
class _Target:
    """Where a container starts: its sandbox, the sandbox config, the pod IP, volumes."""

    sandbox_id: str
    config: api.PodSandboxConfig
    pod_ip: str
    volumes: PodVolumes | None
    ahead: StatusesAhead | None = None
    """image statuses read while the sandbox was created"""
    ready: StartsAhead | None = None
    """the first containers' starts readied while the sandbox was created"""


@attrs.frozen(kw_only=True)
class PodRuntimeParts:
    """What the pod driver is made from (``run.run_runtime`` builds it)."""

    runtime: RuntimeClient
    images: ImageManager
    crash_backoff: Backoff
    cm: ContainerManager
    """the node's resources, each pod's cgroup, what the resource managers add to a
    container's config, and their hooks around its start and removal"""
    pod_logs_dir: str
    recorder: EventRecorder = attrs.field(factory=lambda: EventRecorder(""))
    root_dir: str = ""
    http: HttpGetter | None = None
    volumes: VolumeManager | None = None
    dns: DnsSettings = attrs.field(factory=DnsSettings)
    node_name: str = ""
    env_lookup: EnvLookup | None = None
    service_env: Callable[[Pod], Mapping[str, str]] | None = None
    isolation: PodIsolation = attrs.field(factory=PodIsolation)
    seccomp_default: bool = False
    metrics: KubeletMetrics | None = None
    containers_log_dir: str = ""
    """where each started container's log is linked ("": nowhere; tests)"""
    env_files: bool = True
    """the EnvFiles gate: ``fileKeyRef`` reads the pod's env files (else it is "")"""
    log_io: RunSync = in_thread
    """where the pods' log directories are read (tests on a fake clock: inline)"""


class PodRuntime:
    """The CRI side of pod sync and teardown. One instance serves every pod."""

    def __init__(self, parts: PodRuntimeParts) -> None:
        self.parts = parts
        self.cm = parts.cm
        self.env_files = parts.env_files
        self.isolation = parts.isolation
        self.seccomp_default = parts.seccomp_default
        self.service_env = parts.service_env
        self.node_name = parts.node_name
        self.env_lookup = parts.env_lookup
        self.volumes = parts.volumes
        self.dns = parts.dns
        self.recorder = parts.recorder
        self.root_dir = parts.root_dir
        self.http = parts.http
        self.metrics = parts.metrics
        self.teardown = PodTeardown(
            parts.runtime,
            self.recorder,
            parts.http,
            parts.containers_log_dir,
            post_stop=self.cm.post_stop,
        )
        self.containers_log_dir = parts.containers_log_dir
        self.runtime = parts.runtime
        self.images = parts.images
        self.crash_backoff = parts.crash_backoff
        self.pod_logs_dir = parts.pod_logs_dir
        self.log_io = parts.log_io
        """where the pods' log directories are read (tests on a fake clock: inline)"""
        self.resizer = Resizer(parts.runtime, parts.cm)
        """in-place resizes: the running containers brought to their allocation"""

    @property
    def backoffs(self) -> tuple[Backoff, ...]:
        """The back-off tables housekeeping trims: crash loops, image pulls."""
        return (self.crash_backoff, self.images.backoff)

    @property
    def wall_clock(self) -> Callable[[], float]:
        return self.crash_backoff.clock

    # -- sync -----------------------------------------------------------------------------

    async def sync(
        self,
        pod: Pod,
        status: RuntimePodStatus,
        *,
        liveness_failed: Collection[str] = (),
        startup_failed: Collection[str] = (),
        startup_succeeded: Collection[str] | None = None,
        before_acting: Callable[[], Awaitable[object]] | None = None,
    ) -> SyncOutcome:
        """One sync of ``pod`` against ``status``. ``before_acting`` is awaited once the
        pod's cgroup and volumes are ready and before anything on the runtime changes
        (the allocation checkpoint reaches the disk meanwhile)."""
        progress = _Progress()
        if not await self._prepare_pod(pod, progress):
            return progress.freeze()
        volumes = await self._prepare_volumes(pod, progress)
        if volumes is None:
            return progress.freeze()
        if before_acting is not None:
            await before_acting()
        restarted = self.resizer.to_restart(pod, status)
        actions = compute_pod_actions(
            pod,
            status,
            liveness_failed=liveness_failed,
            startup_failed=startup_failed,
            startup_succeeded=startup_succeeded,
            resize_restart=restarted,
        )
        await self._kill_what_must_go(pod, status, actions, progress)
        if not (actions.kill_pod or actions.create_sandbox):
            started = trio.current_time()
            progress.resize = await self.resizer.resize(pod, status, restarted)
            if self.metrics is not None and (progress.resize.acted or progress.resize.error):
                took = trio.current_time() - started
                self.metrics.observe_pod_resize(took, not progress.resize.error)
            progress.acted = progress.acted or progress.resize.acted
        if not (
            actions.create_sandbox
            or actions.ephemeral_containers_to_start
            or actions.init_containers_to_start
            or actions.containers_to_start
        ):
            # a running pod's periodic sync: nothing is created, so no sandbox config (its
            # DNS, security context and cgroup parent: a quarter of a steady sync's CPU)
            return progress.freeze()
        if actions.create_sandbox and not await self._prepare_sandbox(pod, progress):
            return progress.freeze()
        plan = await self._sandbox_plan(pod, actions)
        if actions.create_sandbox and plan.error is not None:
            self._sandbox_failed(pod, progress, plan.error)
            return progress.freeze()
        sandbox_id, pod_ip, ahead, ready = actions.sandbox_id, status.ip, None, None
        try:
            async with trio.open_nursery() as nursery:
                if actions.create_sandbox:
                    ahead = self.images.statuses_ahead()
                    if plan.error is None:
                        ready = self._ready_ahead(nursery, pod, status, actions, plan, volumes)
                        ahead.start(nursery, _first_starts(pod, actions))
                    created = await self._create_sandbox(pod, actions.attempt, plan, progress)
                    if created is None:
                        if ready is not None:
                            ready.cancel()
                        return progress.freeze()
                    sandbox_id, pod_ip = created
                if not sandbox_id:
                    return progress.freeze()
                where = _Target(sandbox_id, plan.config, pod_ip, volumes, ahead, ready)
                await self._start_containers(pod, status, actions, where, plan.error, progress)
        finally:
            if ready is not None:
                ready.discard()
        return progress.freeze()

    def _ready_ahead(
        self,
        nursery: trio.Nursery,
        pod: Pod,
        status: RuntimePodStatus,
        actions: PodActions,
        plan: _SandboxPlan,
        volumes: PodVolumes,
    ) -> StartsAhead:
        """Ready the first containers' starts while RunPodSandbox runs (``startprep``)."""
        ready = StartsAhead()
        made = functools.partial(self._make_ahead, pod, status, plan.config, volumes)
        ready.start(nursery, _first_starts(pod, actions), made)
        return ready

    async def _make_ahead(
        self,
        pod: Pod,
        status: RuntimePodStatus,
        config: api.PodSandboxConfig,
        volumes: PodVolumes,
        container: Container,
        readied: Readied,
    ) -> None:
        """What the container's start needs that the sandbox does not decide."""
        if next_restart_count(status, container.name) is None:
            readied.restart_count = await self._logged_restarts(config.log_directory, container)
        try:
            make_log_dir(os.path.join(config.log_directory, container.name))
        except OSError as exc:
            readied.log_dir_error = exc
        readied.message_path = self._message_file(pod, container)
        if not needs_pod_ip(container):
            try:
                env, readied.command_args = await self._env_and_command(pod, container, "", volumes)
                readied.env = env
            except EnvError as exc:
                readied.env = exc

    async def _prepare_pod(self, pod: Pod, progress: _Progress) -> bool:
        """Every sync, first (upstream's SyncPod): the container manager's preparation,
        the pod's cgroup created with its limits when missing, so the sandbox and
        containers start inside it. False: it could not; the sync fails and is retried."""
        try:
            await self.cm.prepare_pod(pod)
        except ResourceError as exc:
            self._resource_failed(pod, progress, exc)
            return False
        return True

    async def _prepare_sandbox(self, pod: Pod, progress: _Progress) -> bool:
        """Right before a sandbox is created (upstream's SyncPod prepares the pod's
        dynamic resources there): False, the sync fails before the sandbox."""
        try:
            await self.cm.prepare_sandbox(pod)
        except ResourceError as exc:
            self._resource_failed(pod, progress, exc)
            return False
        return True

    def _resource_failed(self, pod: Pod, progress: _Progress, exc: ResourceError) -> None:
        self.recorder.record(pod_ref(pod), WARNING, exc.reason, exc.message)
        progress.errors.append(exc.message)

    async def _prepare_volumes(self, pod: Pod, progress: _Progress) -> PodVolumes | None:
        """Every sync, before the sandbox (upstream waits for the volumes first):
        configMap/secret changes and token rotations reach running pods too. None: not
        ready (the error is in ``progress``)."""
        if self.volumes is None:
            return PodVolumes()
        volumes = await self.volumes.prepare(pod)
        for message in volumes.events:
            self.recorder.record(pod_ref(pod), WARNING, failure_reason(message), message)
        for notice in volumes.notices:
            self.recorder.record(pod_ref(pod), notice.type, notice.reason, notice.message)
            if notice.claim is not None:
                namespace, name, uid = notice.claim
                claim = ObjectRef("PersistentVolumeClaim", name, namespace, uid)
                self.recorder.record(claim, notice.type, notice.reason, notice.message)
        if not volumes.ready:
            progress.errors.append(volumes.error)
            return None
        return volumes

    async def _kill_what_must_go(
        self, pod: Pod, status: RuntimePodStatus, actions: PodActions, progress: _Progress
    ) -> None:
        """The whole pod (a changed sandbox), or the containers the actions name."""
        if actions.kill_pod and still_running(status):
            if actions.create_sandbox and status.sandboxes:
                self.recorder.record(
                    pod_ref(pod),
                    NORMAL,
                    "SandboxChanged",
                    "Pod sandbox changed, it will be killed and re-created.",
                )
            log.info("killing pod %s", pod.key)
            await self.kill(pod, status)
            progress.acted = True
        elif actions.containers_to_kill:
            await self.teardown.kill_containers(pod, status, actions.containers_to_kill)
            progress.acted = True
        if actions.kill_pod and actions.create_sandbox:
            progress.acted = await self._purge_init_containers(pod, status) or progress.acted

    async def _purge_init_containers(self, pod: Pod, status: RuntimePodStatus) -> bool:
        """A new sandbox runs every init container again, sidecars first, before any
        regular container (upstream's purgeInitContainers): the instances of the old
        sandbox go, or a completed one would count as done in the new sandbox and a
        regular container could start while a sidecar is still backing off. The
        restart counts of this sync's starts come from ``status``, read before. True
        when some went."""
        names = {c.name for c in pod.spec.init_containers}
        old = [c for c in status.containers if c.name in names]
        for info in old:
            await self.teardown.remove_container(info, status)
        return bool(old)

    async def _sandbox_plan(self, pod: Pod, actions: PodActions) -> _SandboxPlan:
        """The sandbox config and what it runs under; ``error`` when it cannot be made."""
        isolation, error = Isolation(), None
        if (
            actions.create_sandbox
            or actions.init_containers_to_start
            or actions.containers_to_start
        ):
            try:
                isolation = await self.isolation.resolve(pod)
            except IsolationError as exc:
                error = exc.message
        dns_config, dns_warnings = self.dns.for_pod(pod)
        if actions.create_sandbox:
            self._warn_ignored_override(pod)
        try:
            config = sandbox_config(
                pod,
                actions.attempt,
                pod_logs_dir=self.pod_logs_dir,
                cgroup_parent=self.cm.pod_cgroup_parent(pod),
                dns=dns_config,
                userns=isolation.userns,
                limits=self.cm.limits,
                cluster_domain=self.dns.cluster_domain,
                hostname_override_enabled=self.dns.hostname_override_enabled,
            )
        except SecurityContextError as exc:
            error = exc.message
            config = api.PodSandboxConfig()
        except PodHostnameError as exc:
            error = str(exc)
            config = api.PodSandboxConfig()
        return _SandboxPlan(config, isolation, error, tuple(dns_warnings))

    def _warn_ignored_override(self, pod: Pod) -> None:
        """With the HostnameOverride gate off, upstream ignores ``spec.hostnameOverride``
        without a word (its API server would have dropped it); we say so in the log."""
        if pod.spec.hostname_override is not None and not self.dns.hostname_override_enabled:
            log.warning(
                "pod %s: spec.hostnameOverride is ignored: the HostnameOverride feature gate "
                "is disabled",
                pod.key,
            )

    async def _create_sandbox(
        self, pod: Pod, attempt: int, plan: _SandboxPlan, progress: _Progress
    ) -> tuple[str, str] | None:
        """RunPodSandbox; (sandbox id, pod IP), or None when it failed (reported)."""
        for warning in plan.dns_warnings:
            ref = node_ref(self.recorder.node_name) if warning.on_node else pod_ref(pod)
            self.recorder.record(ref, WARNING, warning.reason, warning.message)
        progress.acted = True
        try:
            created_id = ""
            handler = plan.isolation.handler
            try:
                make_log_dir(plan.config.log_directory)
                called = trio.current_time()
                try:
                    created_id = await self.runtime.run_pod_sandbox(plan.config, handler)
                finally:
                    if self.metrics is not None:
                        took = trio.current_time() - called
                        self.metrics.observe_run_podsandbox(handler, took, not created_id)
            finally:
                if self.metrics is not None:
                    self.metrics.pod_started(error=not created_id)
            created = await self.runtime.pod_sandbox_status(created_id)
            # -v=4, as upstream's "Created PodSandbox for pod" (the lines of a pod start)
            log.debug("pod %s: sandbox %s created (attempt %d)", pod.key, created_id[:13], attempt)
            return created_id, created.status.network.ip
        except CriError as exc:
            self._sandbox_failed(pod, progress, exc.message)
        except OSError as exc:
            progress.errors.append(f"Failed to create log directory for pod {pod.key}: {exc}")
        return None

    async def _start_containers(
        self,
        pod: Pod,
        status: RuntimePodStatus,
        actions: PodActions,
        where: _Target,
        error: str | None,
        progress: _Progress,
    ) -> None:
        """Ephemeral containers (first, so that a failing init container does not keep a
        debugger out), the next init container (a failing one stops here; a sidecar does
        not), then the regular containers; ``error``: none can be configured (each
        reports it)."""
        for index in actions.ephemeral_containers_to_start:
            ephemeral = pod.spec.ephemeral_containers[index]
            if error is not None:
                self._config_error(pod, ephemeral, progress, error)
                continue
            await self._start(pod, ephemeral, status, where, progress)
        for index in actions.init_containers_to_start:
            container = pod.spec.init_containers[index]
            if error is not None:
                self._config_error(pod, container, progress, error)
                return
            if not await self._start(
                pod, container, status, where, progress
            ) and not is_restartable_init_container(container):
                return  # a sidecar that cannot start blocks nothing else
        for index in actions.containers_to_start:
            container = pod.spec.containers[index]
            if error is not None:
                self._config_error(pod, container, progress, error)
                continue
            await self._start(pod, container, status, where, progress)

    def _sandbox_failed(self, pod: Pod, progress: _Progress, message: str) -> None:
        """Upstream's FailedCreatePodSandBox event; the sync fails and is retried."""
        self.recorder.record(
            pod_ref(pod),
            WARNING,
            "FailedCreatePodSandBox",
            f"Failed to create pod sandbox: {message}",
        )
        progress.errors.append(f"CreatePodSandbox for pod {pod.key} failed: {message}")

    def _config_error(
        self, pod: Pod, container: Container, progress: _Progress, message: str
    ) -> None:
        """The container cannot be configured: CreateContainerConfigError, retried."""
        self.recorder.record(pod_ref(pod, container), WARNING, "Failed", f"Error: {message}")
        progress.waiting[container.name] = (CREATE_CONTAINER_CONFIG_ERROR, message)
        progress.errors.append(f"{container.name}: {message}")

    async def _non_root_error(self, pod: Pod, container: Container, image_ref: str) -> str | None:
        """``runAsNonRoot`` checked against ``runAsUser`` or the image's user (ImageStatus)."""
        uid: int | None = None
        username = ""
        if needs_image_user(pod, container):
            try:
                image = await self.images.inspect(image_ref)
            except CriError as exc:
                return f'failed to inspect image "{image_ref}": {exc.message}'
            uid, username = image_user(image)
        return verify_run_as_non_root(pod, container, uid, username)

    async def _start(
        self,
        pod: Pod,
        container: Container,
        status: RuntimePodStatus,
        where: _Target,
        progress: _Progress,
    ) -> bool:
        """Start one container instance; False (and a waiting reason) if it could not."""
        if self._backing_off(pod, container, status, progress):
            return False
        try:
            image_ref = await self.images.ensure(pod, container, where.config, where.ahead)
        except ImageError as exc:
            progress.waiting[container.name] = (exc.reason, exc.message)
            progress.retry_in(exc.retry_after)
            return False
        readied = await where.ready.take(container.name) if where.ready is not None else None
        restart_count = next_restart_count(status, container.name)
        if restart_count is None and readied is not None:
            restart_count = readied.restart_count
        if restart_count is None:
            restart_count = await self._logged_restarts(where.config.log_directory, container)
        namespaces = where.config.linux.security_context.namespace_options
        if isinstance(container, EphemeralContainer) and container.target_container_name:
            target = status.current(container.target_container_name)
            if target is None or target.state is not ContainerRunState.RUNNING:
                message = f"unable to find target container {container.target_container_name}"
                self._config_error(pod, container, progress, message)
                return False
            namespaces = target_namespaces(namespaces, target.id)
        config = await self._container_config(
            pod, container, restart_count, image_ref, where, progress, namespaces, readied
        )
        if config is None:
            if readied is not None:
                readied.drop_message_file()
            return False
        progress.acted = True
        cid = await self._create_and_start(pod, container, where, config, progress)
        if cid is None or not await self._post_start(pod, container, cid, where, progress):
            return False
        log.debug(  # -v=4, as upstream's container start lines
            "pod %s: started container %s (%s, restart %d)",
            pod.key,
            container.name,
            cid[:13],
            restart_count,
        )
        await self._prune_dead(status, container.name)
        return True

    async def _logged_restarts(self, log_directory: str, container: Container) -> int:
        """The restart count of a container the runtime has no instance of, from its
        log files (upstream's); 0 when they cannot be read."""
        path = os.path.join(log_directory, container.name)
        read = functools.partial(file_names, path, MAX_LOG_FILES)
        try:
            return restart_count_from_logs(await self.log_io(read))
        except (OSError, InputRefused) as exc:
            log.info("restart count of %s not read from %s: %s", container.name, path, exc)
            return 0

    def _backing_off(
        self, pod: Pod, container: Container, status: RuntimePodStatus, progress: _Progress
    ) -> bool:
        """In crash-loop back-off: CrashLoopBackOff, and a sync when the back-off ends."""
        message = crash_loop_backoff(self.crash_backoff, pod, container, status)
        if message is None:
            return False
        self.recorder.record(
            pod_ref(pod, container),
            WARNING,
            "BackOff",
            f"Back-off restarting failed container {container.name} in pod {format_pod(pod)}",
        )
        progress.waiting[container.name] = (CRASH_LOOP_BACK_OFF, message)
        progress.retry_in(self._crash_loop_remaining(pod, container, status))
        return True

    async def _container_config(
        self,
        pod: Pod,
        container: Container,
        restart_count: int,
        image_ref: str,
        where: _Target,
        progress: _Progress,
        namespaces: api.NamespaceOption,
        readied: Readied | None = None,
    ) -> api.ContainerConfig | None:
        """Environment, user check, mounts, security context: the CRI config, or None
        (CreateContainerConfigError, reported) when one of them fails. ``namespaces``:
        the sandbox's, or an ephemeral container's with its target's PID namespace;
        ``readied``: what was made while the sandbox was created."""
        try:
            if readied is not None and readied.env is not None:
                if isinstance(readied.env, EnvError):
                    raise readied.env
                env, command_args = readied.env, readied.command_args
            else:
                env, command_args = await self._env_and_command(
                    pod, container, where.pod_ip, where.volumes
                )
        except EnvError as exc:
            self.recorder.record(
                pod_ref(pod, container), WARNING, "Failed", f"Error: {exc.message}"
            )
            progress.waiting[container.name] = (exc.reason, exc.message)
            progress.errors.append(f"{container.name}: {exc.message}")
            return None
        for warning in env.warnings:
            self.recorder.record(pod_ref(pod), WARNING, INVALID_ENV_NAMES_REASON, warning)
        non_root = await self._non_root_error(pod, container, image_ref)
        if non_root is not None:
            self._config_error(pod, container, progress, non_root)
            return None
        try:
            volume_mounts = self._container_mounts(
                pod, container, where.volumes, env.env, where.config, readied
            )
            return container_config(
                pod,
                container,
                restart_count,
                image_ref=image_ref,
                memory_capacity=self.cm.memory_capacity,
                env=env.env,
                mounts=[
                    *volume_mounts,
                    *self._hosts_mounts(pod, container, where.pod_ip),
                    *self._message_mounts(pod, container, readied),
                ],
                seccomp_profile_root=self._seccomp_root(),
                seccomp_default=self.seccomp_default,
                namespaces=namespaces,
                limits=self.cm.limits,
                command_args=command_args,
                contribution=self.cm.contribution(pod, container).merged(
                    self._volume_devices(pod, container, where.volumes)
                ),
            )
        except MountConfigError as exc:
            self._config_error(pod, container, progress, str(exc))
        except SecurityContextError as exc:
            self._config_error(pod, container, progress, exc.message)
        return None

    async def _create_and_start(
        self,
        pod: Pod,
        container: Container,
        where: _Target,
        config: api.ContainerConfig,
        progress: _Progress,
    ) -> str | None:
        """CreateContainer then StartContainer; the container ID, or None (reported)."""
        ref = pod_ref(pod, container)
        try:
            cid = await self.runtime.create_container(where.sandbox_id, config, where.config)
        except CriError as exc:
            self.recorder.record(ref, WARNING, "Failed", f"Error: {exc.message}")
            progress.waiting[container.name] = (CREATE_CONTAINER_ERROR, exc.message)
            progress.errors.append(f"CreateContainer {container.name}: {exc.message}")
            return None
        if not await self._pre_start(pod, container, cid, progress):
            return None
        self.recorder.record(ref, NORMAL, "Created", f"Created container: {container.name}")
        kind = "init_container" if container in pod.spec.init_containers else "container"
        if isinstance(container, EphemeralContainer):
            kind = "ephemeral_container"
        try:
            await self.runtime.start_container(cid)
            if self.metrics is not None:
                self.metrics.container_started(kind)
        except CriError as exc:
            if self.metrics is not None:
                self.metrics.container_started(kind, exc.code.name if exc.code else "Unknown")
            self.recorder.record(ref, WARNING, "Failed", f"Error: {exc.message}")
            progress.waiting[container.name] = (RUN_CONTAINER_ERROR, exc.message)
            progress.errors.append(f"StartContainer {container.name}: {exc.message}")
            return None
        self.recorder.record(ref, NORMAL, "Started", f"Started container {container.name}")
        link_container_log(
            self.containers_log_dir,
            cid,
            container.name,
            pod.metadata.name,
            pod.metadata.namespace,
            os.path.join(where.config.log_directory, config.log_path),
        )
        return cid

    async def _pre_start(
        self, pod: Pod, container: Container, cid: str, progress: _Progress
    ) -> bool:
        """The container manager's pre-start hook, between CreateContainer and
        StartContainer (upstream's PreStartContainer); False: it failed (reported)."""
        try:
            await self.cm.pre_start(pod, container, cid)
        except ResourceError as exc:
            message = f"Internal PreStartContainer hook failed: {exc.message}"
            self.recorder.record(pod_ref(pod, container), WARNING, "Failed", message)
            progress.waiting[container.name] = (PRE_START_HOOK_ERROR, exc.message)
            progress.errors.append(f"PreStartContainer {container.name}: {exc.message}")
            return False
        return True

    async def _post_start(
        self, pod: Pod, container: Container, cid: str, where: _Target, progress: _Progress
    ) -> bool:
        """The postStart hook; its failure kills the container (upstream: the restart
        policy decides what follows)."""
        failure = await run_post_start(
            self.runtime, pod, container, cid, pod_ip=where.pod_ip, http=self.http
        )
        if failure is None:
            return True
        self.recorder.record(
            pod_ref(pod, container), WARNING, EVENT_FAILED_POST_START_HOOK, failure
        )
        info = ContainerInfo(id=cid, name=container.name, state=ContainerRunState.RUNNING)
        await self.teardown.kill_one(
            pod, info, KillReason.FAILED_POST_START_HOOK, None, where.pod_ip
        )
        progress.waiting[container.name] = (POST_START_HOOK_ERROR, failure)
        progress.errors.append(f"PostStartHook {container.name}: {failure}")
        return False

    def _seccomp_root(self) -> str:
        """``<root-dir>/seccomp``: where Localhost seccomp profiles are read from."""
        return os.path.join(self.root_dir or DEFAULT_ROOT_DIR, "seccomp")

    def _container_mounts(
        self,
        pod: Pod,
        container: Container,
        volumes: PodVolumes | None,
        env: Collection[tuple[str, str]],
        config: api.PodSandboxConfig,
        readied: Readied | None = None,
    ) -> list[api.Mount]:
        """The container's volume mounts and its log directory (0755, as upstream; made
        already when ``readied``); raises MountConfigError, which keeps the container in
        CreateContainerConfigError."""
        mounts = []
        if self.volumes is not None and volumes is not None:
            mounts = self.volumes.mounts(pod, container, volumes, dict(env))
        try:
            if readied is None:
                make_log_dir(os.path.join(config.log_directory, container.name))
            elif readied.log_dir_error is not None:
                raise readied.log_dir_error
        except OSError as exc:
            raise MountConfigError(
                f"create container log directory for container {container.name} failed: {exc}"
            ) from exc
        return mounts

    def _volume_devices(
        self, pod: Pod, container: Container, volumes: PodVolumes | None
    ) -> ContainerContribution:
        """The container's volumeDevices (Block volumes), after the managers' devices
        as upstream orders them; raises MountConfigError."""
        if self.volumes is None or volumes is None or not container.volume_devices:
            return ContainerContribution()
        return ContainerContribution(devices=self.volumes.devices(pod, container, volumes))

    def _hosts_mounts(self, pod: Pod, container: Container, pod_ip: str) -> list[api.Mount]:
        """The kubelet-managed /etc/hosts, rewritten before each container start."""
        ips = list(self.dns.node_ips) if pod.spec.host_network else ([pod_ip] if pod_ip else [])
        if not self.root_dir or not should_mount_hosts_file(pod, container, ips):
            return []
        try:
            content = hosts_file_content(
                pod,
                pod_ips=ips,
                host_network=bool(pod.spec.host_network),
                # the node's /etc/hosts only serves hostNetwork pods: not read for the rest
                node_hosts=self.dns.node_hosts() if pod.spec.host_network else "",
                cluster_domain=self.dns.cluster_domain,
                override_enabled=self.dns.hostname_override_enabled,
            )
            path = hosts_file_path(pod_dir(self.root_dir, pod.uid))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_hosts_file(path, content)
        except (OSError, ValueError) as exc:
            log.warning("no managed /etc/hosts for %s in %s: %s", container.name, pod.key, exc)
            return []
        return [hosts_mount(path)]

    def _message_mounts(
        self, pod: Pod, container: Container, readied: Readied | None = None
    ) -> list[api.Mount]:
        """The termination-message file (made already when ``readied``), bind-mounted
        at terminationMessagePath."""
        path = readied.message_path if readied is not None else self._message_file(pod, container)
        return [message_mount(container, path)] if path is not None else []

    def _message_file(self, pod: Pod, container: Container) -> str | None:
        """A new termination-message file for the container; None: none wanted, or it
        could not be made (upstream starts the container without it)."""
        if not (self.root_dir and container.termination_message_path):
            return None
        try:
            return create_message_file(self.root_dir, pod.uid, container.name)
        except OSError as exc:
            log.warning(
                "no termination message file for %s in %s: %s", container.name, pod.key, exc
            )
            return None

    async def _env_and_command(
        self, pod: Pod, container: Container, pod_ip: str, volumes: PodVolumes | None
    ) -> tuple[EnvResult, tuple[list[str], list[str]]]:
        """The container's environment, and its command and args expanded against it
        (``pod_ip`` "" before the sandbox: the node's IPs stand in, for containers whose
        environment does not read it)."""
        env = await resolve_env(
            pod,
            container,
            node_name=self.node_name,
            host_ips=self.dns.node_ips,
            pod_ips=[pod_ip] if pod_ip else list(self.dns.node_ips),
            node_allocatable=self.cm.allocatable,
            lookup=self.env_lookup,
            service_env=self.service_env(pod) if self.service_env is not None else None,
            env_files=PodEnvFiles(pod, volumes) if self.env_files else None,
        )
        return env, await resolve_command(container, env.env)

    def _crash_loop_remaining(
        self, pod: Pod, container: Container, status: RuntimePodStatus
    ) -> float:
        key = crash_loop_key(pod, container)
        newest_exit = max(
            (
                c.finished_at
                for c in status.containers_named(container.name)
                if c.state is ContainerRunState.EXITED
            ),
            default=0,
        )
        return newest_exit / 1e9 + self.crash_backoff.get(key) - self.wall_clock()

    async def _prune_dead(self, status: RuntimePodStatus, name: str) -> None:
        """Keep the newest dead instance of a container (its logs, its restart count)."""
        dead = [c for c in status.containers_named(name) if c.state is ContainerRunState.EXITED]
        for old in dead[1:]:
            await self.teardown.remove_container(old, status)

    # -- teardown (``teardown.PodTeardown``) ------------------------------------------------

    async def kill(
        self, pod: Pod, status: RuntimePodStatus, grace_override: int | None = None
    ) -> None:
        """Stop every live container, then every sandbox (``PodTeardown.kill``)."""
        await self.teardown.kill(pod, status, grace_override)

    async def terminate(
        self, pod: Pod, status: RuntimePodStatus, grace_override: int | None = None
    ) -> None:
        """Kill the pod, then remove its containers and sandboxes."""
        await self.teardown.terminate(pod, status, grace_override)

    async def remove(self, status: RuntimePodStatus) -> None:
        """Remove a killed pod's containers, then its sandboxes."""
        await self.teardown.remove(status)

    async def remove_pod_files(self, pod: Pod) -> None:
        """Everything the pod left on the node's disk: its log directory and its
        directory under --root-dir (volumes, termination-message files, etc-hosts)."""
        await self._remove_log_directory(pod)
        self.isolation.release(pod.uid)
        volumes = self.volumes
        # a volume may hold a million files: removed off the event loop
        volumes_gone = True
        if volumes is not None:
            volumes_gone = await volumes.teardown_csi(pod.uid) and await self.log_io(
                lambda: volumes.cleanup(pod.uid)
            )
        if volumes_gone:  # else housekeeping's sweep removes the pod cgroup, later
            await self.cm.release_pod(pod)

    async def _remove_log_directory(self, pod: Pod) -> None:
        """The pod's log directory goes with the pod (upstream's container GC does this)."""
        meta = pod.metadata
        if not (meta.namespace and meta.name and meta.uid):
            return
        # a handful of small files on a local disk: removed in place (a worker thread
        # would only add latency, and under a fake clock look like idleness)
        shutil.rmtree(pod_log_directory(pod, self.pod_logs_dir), ignore_errors=True)
        await trio.lowlevel.checkpoint()


def _first_starts(pod: Pod, actions: PodActions) -> list[Container]:
    """The containers a sync that creates the sandbox starts for certain: the first init
    container to start, else the regular ones."""
    if actions.init_containers_to_start:
        return [pod.spec.init_containers[actions.init_containers_to_start[0]]]
    return [pod.spec.containers[i] for i in actions.containers_to_start]
