"""Making sure a container's image is on the node before it is created.

Pull policies as upstream: Never (must be present), IfNotPresent (ImageStatus first,
pull when absent), Always (pull every time; the runtime answers quickly when the layers
are already there). ImageStatus always comes first for Never/IfNotPresent because
containerd contacts the registry on every PullImage, even for an image it holds.

Failures carry upstream's reasons (ErrImagePull, ImagePullBackOff, ErrImageNeverPull,
InvalidImageName) and back off per pod and image: 10 s doubling to 5 min; while backing
off, the waiting message repeats the last failure, as upstream's does. Concurrent pulls
of the same image with the same credentials share one PullImage call; ``serialize``
makes pulls of different images wait for each other (upstream's serializeImagePulls
default).

Credentials (``credentials/``): the pod's pull secrets are read only when a pull (or a
credential check) needs them, matched to the image's registry by the keyring, and tried
in order until one pulls; no match pulls anonymously. Whatever the runtime answers is
cleaned of the credentials before it reaches an event, a log line or the pod's status.
With pull records (KubeletEnsureSecretPulledImages, on by default), an image present on
the node is used without a pull only when the verification policy allows it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from kubelet.api import Container, Pod
from kubelet.cri import CriError, ImageClient, ImagePullFailed, api, split_reference
from kubelet.decisions import Backoff, image_pull_key
from kubelet.events import NORMAL, WARNING, EventRecorder, ObjectRef, pod_ref
from kubelet.goformat import go_duration_ms

from .credentials import (
    MalformedPullSecret,
    NodeCredentials,
    PullCredential,
    PullRecords,
    SecretSource,
    SecretUnavailable,
    keyring_from_secrets,
    pull_secret_names,
    redact,
    repository_of,
)

if TYPE_CHECKING:
    from .credentials import PluginKeyring

log = logging.getLogger(__name__)

ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACKOFF = "ImagePullBackOff"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
INVALID_IMAGE_NAME = "InvalidImageName"
IMAGE_INSPECT_ERROR = "ImageInspectError"
FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET = "FailedToRetrieveImagePullSecret"
AFTER_PULL_FAILURE = 1.0
_PREV_ERRORS_PRUNE_AT = 256


class ImageError(Exception):
    """The image could not be made available; ``reason`` is the container's waiting reason."""

    def __init__(self, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


def with_default_tag(image: str) -> str:
    """``busybox`` → ``busybox:latest``; references with a tag or digest unchanged."""
    _, _, tag, digest = split_reference(image)
    return image if tag or digest else f"{image}:latest"


def pull_policy(container: Container) -> str:
    """The container's policy, defaulted as the API server would."""
    if container.image_pull_policy:
        return container.image_pull_policy
    _, _, tag, digest = split_reference(container.image)
    return "Always" if not digest and tag in ("", "latest") else "IfNotPresent"


@attrs.define
class _Pull:
    done: trio.Event = attrs.field(factory=trio.Event)
    ref: str | None = None
    used: PullCredential | None = None
    error: CriError | None = None
    took: float = 0.0
    """the PullImage calls' own time (the Pulled event's first duration)"""
    size: int = 0
    """the pulled image's size (ImageStatus after the pull; 0 when it cannot be read)"""


def aggregate_message(messages: list[str]) -> str:
    """Several failures as upstream's error aggregate prints them: distinct messages in
    order, bracketed when there is more than one."""
    distinct = list(dict.fromkeys(messages))
    return distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]"


@attrs.define
class _Status:
    done: trio.Event = attrs.field(factory=trio.Event)
    image: api.Image | None = None
    error: CriError | None = None


class StatusesAhead:
    """Image statuses read while a pod's sandbox is being created.

    Upstream reads a container's image status after RunPodSandbox and PodSandboxStatus;
    the read changes nothing, so the pod driver starts it alongside RunPodSandbox and
    ``ImageManager.ensure`` takes its answer instead of asking again: a pod start's chain
    of calls is one call shorter. Each answer is used once (a later sync asks afresh).
    ``warm_up`` (the pull records' one ListImages, before the first pod's image is
    checked) runs alongside too.
    """

    def __init__(
        self, images: ImageClient, warm_up: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self._images = images
        self._statuses: dict[str, _Status] = {}
        self._warm_up = warm_up

    def start(self, nursery: trio.Nursery, containers: list[Container]) -> None:
        """Read the images of ``containers`` that ``ensure`` would ask about."""
        if self._warm_up is not None:
            nursery.start_soon(self._warm_up)
            self._warm_up = None
        for container in containers:
            if pull_policy(container) == "Always":
                continue
            try:
                image = with_default_tag(container.image)
            except ValueError:
                continue
            if image not in self._statuses:
                self._statuses[image] = status = _Status()
                nursery.start_soon(self._read, image, status)

    async def _read(self, image: str, status: _Status) -> None:
        try:
            status.image = await self._images.image_status(image)
        except CriError as exc:
            status.error = exc
        finally:
            status.done.set()

    async def take(self, image: str) -> tuple[bool, api.Image | None]:
        """(True, the answer) once read, when ``image`` was read ahead; else (False, None).
        Raises the read's CriError."""
        status = self._statuses.pop(image, None)
        if status is None:
            return False, None
        await status.done.wait()
        if status.error is not None:
            raise status.error
        return True, status.image


class PullObserver(Protocol):
    """Hears of the pulls made for a pod (the pod startup SLI leaves their span out)."""

    def pull_started(self, uid: str) -> None: ...

    def pull_finished(self, uid: str) -> None: ...


class ImageManager:
    """Makes sure a container's image is on the node, the way its pull policy says.

    One place decides pull or not (policy, presence, the credentials checks of
    KubeletEnsureSecretPulledImages), shares a pull between pods that need the same
    image with the same credentials, and backs off failed pulls per pod and image.
    """

    def __init__(
        self,
        images: ImageClient,
        backoff: Backoff,
        *,
        serialize: bool = True,
        max_parallel: int | None = None,
        recorder: EventRecorder | None = None,
        secrets: SecretSource | None = None,
        records: PullRecords | None = None,
        node: NodeCredentials | None = None,
        plugins: PluginKeyring | None = None,
        pulls: PullObserver | None = None,
        on_pulled: Callable[[float, int], None] | None = None,
    ) -> None:
        self._images = images
        self._pull_observer = pulls
        self._on_pulled = on_pulled
        """(seconds including the wait for a turn, image size) of each pull made for a
        container (``kubelet_image_pull_duration_seconds``)"""
        self._recorder = recorder
        self._backoff = backoff
        self._secrets = secrets
        self._records = records
        self._node = node
        self._plugins = plugins
        self._records_lock = trio.Lock()
        limit = 1 if serialize else (max_parallel or math.inf)
        self._limiter = trio.CapacityLimiter(limit)
        self._pulls: dict[tuple[str, tuple[PullCredential, ...]], _Pull] = {}
        self._prev_errors: dict[str, str] = {}

    def statuses_ahead(self) -> StatusesAhead:
        """Image statuses to read while a sandbox is created (``ensure(ahead=...)``)."""
        records = self._records
        cold = records is not None and not records.initialized
        return StatusesAhead(self._images, self._records_ready if cold else None)

    async def ensure(
        self,
        pod: Pod,
        container: Container,
        sandbox_config: api.PodSandboxConfig | None = None,
        ahead: StatusesAhead | None = None,
    ) -> str:
        """The image reference to create ``container`` from; ``ImageError`` if there is none.
        ``ahead``: image statuses already being read for this sync."""
        ref = pod_ref(pod, container)
        try:
            image = with_default_tag(container.image)
        except ValueError:
            raise self._fail(
                ref,
                INVALID_IMAGE_NAME,
                f'Failed to apply default image tag "{container.image}": couldn\'t parse image '
                f'name "{container.image}": invalid reference format',
            ) from None
        policy = pull_policy(container)
        lookup = _Once(lambda: self._credentials(pod, image))
        if policy != "Always":
            try:
                read, present = await ahead.take(image) if ahead else (False, None)
                if not read:
                    present = await self._images.image_status(image)
            except CriError as exc:
                raise self._fail(
                    ref, IMAGE_INSPECT_ERROR, f'Failed to inspect image "{image}": {exc.message}'
                ) from exc
            if present is not None:
                if self._records is None:
                    self._event(
                        ref,
                        NORMAL,
                        "Pulled",
                        f'Container image "{container.image}" already present on machine',
                    )
                    return present.id
                await self._records_ready()
                if not await self._records.must_pull(container.image, present.id, lookup.get):
                    self._event(
                        ref,
                        NORMAL,
                        "Pulled",
                        f'Container image "{container.image}" already present on machine '
                        "and can be accessed by the pod",
                    )
                    return present.id
            if policy == "Never":
                # a present image the pod may not use looks absent, as upstream: its
                # presence is not revealed to a pod without the credentials
                raise self._fail(
                    ref,
                    ERR_IMAGE_NEVER_PULL,
                    f'Container image "{container.image}" is not present with pull policy of Never',
                )
        return await self._pull_for(pod, container, ref, image, lookup, sandbox_config)

    async def _pull_for(
        self,
        pod: Pod,
        container: Container,
        ref: ObjectRef,
        image: str,
        lookup: _Once,
        sandbox_config: api.PodSandboxConfig | None,
    ) -> str:
        """Pull for one container, within its back-off; the image reference. The pod's
        secrets are read after the back-off check: none are fetched while waiting."""
        key = image_pull_key(pod.uid, image)
        now = self._backoff.clock()
        if self._backoff.is_in_backoff_since_update(key, now):
            message = f'Back-off pulling image "{container.image}"'
            self._event(ref, NORMAL, "BackOff", message)
            previous = self._prev_errors.get(key)
            raise ImageError(
                IMAGE_PULL_BACKOFF,
                f"{message}: {previous}" if previous else message,
                self._backoff.remaining_since_update(key, now),
            )
        self._prev_errors.pop(key, None)
        credentials = await lookup.get()
        self._event(ref, NORMAL, "Pulling", f'Pulling image "{container.image}"')
        if self._records is not None:
            await self._records_ready()
            try:
                self._records.record_intent(container.image)
            except OSError as exc:
                message = (
                    f'Failed to record image pull intent for container image "{container.image}": '
                    f"{exc}"
                )
                raise self._fail(ref, ERR_IMAGE_PULL, message, AFTER_PULL_FAILURE) from None
        started = trio.current_time()
        if self._pull_observer is not None:
            self._pull_observer.pull_started(pod.uid)
        try:
            pulled = await self._pull(image, credentials, sandbox_config)
        except CriError as exc:
            if self._records is not None:
                self._records.record_failed(container.image)
            message = redact(exc.message, credentials)
            self._backoff.next(key, self._backoff.clock())
            self._event(
                ref, WARNING, "Failed", f'Failed to pull image "{container.image}": {message}'
            )
            self._remember_failure(key, f"{ERR_IMAGE_PULL}: {message}")
            # look again shortly: the container then shows ImagePullBackOff, as upstream's
            # status does between attempts, and the next pull waits for the back-off.
            # Not chained: the runtime's own text may hold what was just redacted.
            raise self._fail(ref, ERR_IMAGE_PULL, message, AFTER_PULL_FAILURE) from None
        except BaseException:
            if self._records is not None:
                self._records.record_failed(container.image)
            raise
        assert pulled.ref is not None
        if self._records is not None:
            self._records.record_pulled(container.image, pulled.ref, pulled.used)
        self._backoff.reset(key)
        if self._pull_observer is not None:
            self._pull_observer.pull_finished(pod.uid)
        took = trio.current_time() - started
        if self._on_pulled is not None:
            self._on_pulled(took, pulled.size)
        self._event(
            ref,
            NORMAL,
            "Pulled",
            f'Successfully pulled image "{container.image}" in {go_duration_ms(pulled.took)} '
            f"({go_duration_ms(took)} including waiting). Image size: {pulled.size} bytes.",
        )
        return pulled.ref

    async def inspect(self, image_ref: str) -> api.Image | None:
        """ImageStatus of a resolved image (its user, for ``runAsNonRoot``); None if absent."""
        return await self._images.image_status(image_ref)

    async def _credentials(self, pod: Pod, image: str) -> list[PullCredential]:
        """The credentials for ``image``: the pod's secrets' (best match first), then the
        node's docker config file's, then the credential provider plugins'. Secrets that
        cannot be fetched are left out with a log line and one
        FailedToRetrieveImagePullSecret event, as upstream's
        getPullSecretsForPod does; a fetched secret that is not a docker config fails the
        pull (ErrImagePull), as upstream's keyring does."""
        names = pull_secret_names(pod.spec.image_pull_secrets)
        namespace = pod.metadata.namespace
        secrets = []
        failed = []
        for name in names:
            try:
                if self._secrets is None:
                    raise SecretUnavailable("no API server to read secrets from")
                secrets.append(await self._secrets.pull_secret(namespace, name))
            except SecretUnavailable as exc:
                log.info(
                    'Unable to retrieve pull secret, the image pull may not succeed. pod="%s" '
                    'secret="%s/%s" err="%s"',
                    pod.key,
                    namespace,
                    name,
                    exc,
                )
                failed.append(name)
        if failed:
            self._event(
                pod_ref(pod),
                WARNING,
                FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET,
                f"Unable to retrieve some image pull secrets ({', '.join(failed)}); "
                "attempting to pull the image may not succeed.",
            )
        try:
            repository = repository_of(image)
        except ValueError:
            return []
        try:
            found = keyring_from_secrets(secrets).lookup(repository)
        except MalformedPullSecret as exc:
            # upstream fails the pull rather than go on without the secret; the back-off
            # keeps the kubelet from reading the secrets again every second
            key = image_pull_key(pod.uid, image)
            self._backoff.next(key, self._backoff.clock())
            self._remember_failure(key, f"{ERR_IMAGE_PULL}: {exc}")
            raise self._fail(pod_ref(pod), ERR_IMAGE_PULL, str(exc), AFTER_PULL_FAILURE) from None
        if self._node is not None:
            found += self._node.keyring().lookup(repository)
        if self._plugins is not None:  # --image-credential-provider-config
            found += await self._plugins.lookup(repository)
        return found

    async def _records_ready(self) -> None:
        """Turn pull intents of an earlier run into records, once, before first use."""
        assert self._records is not None
        if self._records.initialized:
            return
        async with self._records_lock:
            if self._records.initialized:
                return
            try:
                images = await self._images.list_images()
            except CriError as exc:
                log.error("image pull records: cannot list images: %s", exc.message)
                images = []
            self._records.initialize(images)

    @property
    def backoff(self) -> Backoff:
        """The image pull back-off (housekeeping trims it)."""
        return self._backoff

    def _remember_failure(self, key: str, message: str) -> None:
        """Keep the failure for the back-off message; entries whose back-off is gone
        (pod deleted, pull succeeded) are dropped once the map grows."""
        self._prev_errors[key] = message
        if len(self._prev_errors) > _PREV_ERRORS_PRUNE_AT:
            self._backoff.gc()
            for stale in [k for k in self._prev_errors if k not in self._backoff]:
                del self._prev_errors[stale]

    def _event(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            self._recorder.record(ref, event_type, reason, message)

    def _fail(
        self, ref: ObjectRef, reason: str, message: str, retry_after: float | None = None
    ) -> ImageError:
        """The error for the sync, and upstream's ``Failed`` event "Error: <reason>"."""
        self._event(ref, WARNING, "Failed", f"Error: {reason}")
        return ImageError(reason, message, retry_after)

    async def _pull(
        self,
        image: str,
        credentials: list[PullCredential],
        sandbox_config: api.PodSandboxConfig | None,
    ) -> _Pull:
        """One PullImage per image and credentials at a time; callers with the same
        image and credentials share its result (a pod never shares another's pull made
        with credentials it lacks)."""
        key = (image, tuple(credentials))
        shared = self._pulls.get(key)
        if shared is not None:
            await shared.done.wait()
        else:
            shared = self._pulls[key] = _Pull()
            try:
                async with self._limiter:
                    log.info('Pulling image "%s"', image)
                    began = trio.current_time()
                    shared.ref, shared.used = await self._try_credentials(
                        image, credentials, sandbox_config
                    )
                    shared.took = trio.current_time() - began
                    log.info('Successfully pulled image "%s"', image)
                shared.size = await self._size_of(shared.ref)
            except CriError as exc:
                shared.error = exc
            finally:
                shared.done.set()
                del self._pulls[key]
        if shared.error is not None:
            raise shared.error
        if shared.ref is None:  # the puller was cancelled: try ourselves
            return await self._pull(image, credentials, sandbox_config)
        return shared

    async def _size_of(self, image_ref: str) -> int:
        """The pulled image's size, as upstream's puller reads it for the Pulled event
        and the pull duration's bucket; 0 when the runtime cannot say."""
        try:
            found = await self._images.image_status(image_ref)
        except CriError as exc:
            log.info('Failed to get the size of image "%s": %s', image_ref, exc)
            return 0
        return found.size if found is not None else 0

    async def _try_credentials(
        self,
        image: str,
        credentials: list[PullCredential],
        sandbox_config: api.PodSandboxConfig | None,
    ) -> tuple[str, PullCredential | None]:
        """Anonymous when there are no credentials, else each in turn until one pulls
        (upstream's order: the best registry match first)."""
        if not credentials:
            ref = await self._images.pull_image(image, sandbox_config=sandbox_config)
            return ref, None
        failures: list[CriError] = []
        for credential in credentials:
            try:
                ref = await self._images.pull_image(
                    image, credential.auth_config(), sandbox_config=sandbox_config
                )
            except CriError as exc:
                failures.append(exc)
                continue
            return ref, credential
        raise ImagePullFailed(
            "PullImage", aggregate_message([f.message for f in failures]), failures[-1].code
        )


class _Once:
    """An async value computed at most once, on first ``get``."""

    def __init__(self, compute: Callable[[], Awaitable[list[PullCredential]]]) -> None:
        self._compute = compute
        self._value: list[PullCredential] | None = None

    async def get(self) -> list[PullCredential]:
        if self._value is None:
            self._value = await self._compute()
        return self._value
