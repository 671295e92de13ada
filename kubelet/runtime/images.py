"""Making sure a container's image is on the node before it is created.

Pull policies as upstream: Never (must be present), IfNotPresent (ImageStatus first,
pull when absent), Always (pull every time; the runtime answers quickly when the layers
are already there). ImageStatus always comes first for Never/IfNotPresent because
containerd contacts the registry on every PullImage, even for an image it holds.

Failures carry upstream's reasons (ErrImagePull, ImagePullBackOff, ErrImageNeverPull,
InvalidImageName) and back off per pod and image: 10 s doubling to 5 min. Concurrent
pulls of the same image share one PullImage call; ``serialize`` makes pulls of different
images wait for each other (upstream's serializeImagePulls default).
"""

from __future__ import annotations

import logging
import math

import attrs
import trio

from kubelet.api.pod import Container, Pod
from kubelet.cri import CriError, ImageClient, api
from kubelet.events import NORMAL, WARNING, EventRecorder, ObjectRef, pod_ref

from .backoff import Backoff, image_pull_key
from .imageref import split_reference

log = logging.getLogger(__name__)

ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACKOFF = "ImagePullBackOff"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
INVALID_IMAGE_NAME = "InvalidImageName"
IMAGE_INSPECT_ERROR = "ImageInspectError"
AFTER_PULL_FAILURE = 1.0
AFTER_PULL_FAILURE = 1.0


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
    error: CriError | None = None


class ImageManager:
    def __init__(
        self,
        images: ImageClient,
        backoff: Backoff,
        *,
        serialize: bool = True,
        max_parallel: int | None = None,
        recorder: EventRecorder | None = None,
    ) -> None:
        self._images = images
        self._recorder = recorder
        self._backoff = backoff
        limit = 1 if serialize else (max_parallel or math.inf)
        self._limiter = trio.CapacityLimiter(limit)
        self._pulls: dict[str, _Pull] = {}

    async def ensure(
        self, pod: Pod, container: Container, sandbox_config: api.PodSandboxConfig | None = None
    ) -> str:
        """The image reference to create ``container`` from; ``ImageError`` if there is none."""
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
        if policy != "Always":
            try:
                present = await self._images.image_status(image)
            except CriError as exc:
                raise self._fail(
                    ref, IMAGE_INSPECT_ERROR, f'Failed to inspect image "{image}": {exc.message}'
                ) from exc
            if present is not None:
                self._event(
                    ref,
                    NORMAL,
                    "Pulled",
                    f'Container image "{container.image}" already present on machine',
                )
                return present.id
            if policy == "Never":
                raise self._fail(
                    ref,
                    ERR_IMAGE_NEVER_PULL,
                    f'Container image "{container.image}" is not present with pull policy of Never',
                )
        key = image_pull_key(pod.uid, image)
        now = self._backoff.clock()
        if self._backoff.is_in_backoff_since_update(key, now):
            message = f'Back-off pulling image "{container.image}"'
            self._event(ref, NORMAL, "BackOff", message)
            raise ImageError(
                IMAGE_PULL_BACKOFF, message, self._backoff.remaining_since_update(key, now)
            )
        self._event(ref, NORMAL, "Pulling", f'Pulling image "{container.image}"')
        started = trio.current_time()
        try:
            image_ref = await self._pull(image, sandbox_config)
        except CriError as exc:
            self._backoff.next(key, self._backoff.clock())
            self._event(
                ref, WARNING, "Failed", f'Failed to pull image "{container.image}": {exc.message}'
            )
            # look again shortly: the container then shows ImagePullBackOff, as upstream's
            # status does between attempts, and the next pull waits for the back-off
            raise self._fail(ref, ERR_IMAGE_PULL, exc.message, AFTER_PULL_FAILURE) from exc
        self._backoff.reset(key)
        took = trio.current_time() - started
        self._event(
            ref, NORMAL, "Pulled", f'Successfully pulled image "{container.image}" in {took:.3f}s'
        )
        return image_ref

    async def inspect(self, image_ref: str) -> api.Image | None:
        """ImageStatus of a resolved image (its user, for ``runAsNonRoot``); None if absent."""
        return await self._images.image_status(image_ref)

    def _event(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            self._recorder.record(ref, event_type, reason, message)

    def _fail(
        self, ref: ObjectRef, reason: str, message: str, retry_after: float | None = None
    ) -> ImageError:
        """The error for the sync, and upstream's ``Failed`` event "Error: <reason>"."""
        self._event(ref, WARNING, "Failed", f"Error: {reason}")
        return ImageError(reason, message, retry_after)

    async def _pull(self, image: str, sandbox_config: api.PodSandboxConfig | None) -> str:
        """One PullImage per image at a time; callers of the same image share its result."""
        shared = self._pulls.get(image)
        if shared is not None:
            await shared.done.wait()
        else:
            shared = self._pulls[image] = _Pull()
            try:
                async with self._limiter:
                    log.info('Pulling image "%s"', image)
                    shared.ref = await self._images.pull_image(image, sandbox_config=sandbox_config)
                    log.info('Successfully pulled image "%s"', image)
            except CriError as exc:
                shared.error = exc
            finally:
                shared.done.set()
                del self._pulls[image]
        if shared.error is not None:
            raise shared.error
        if shared.ref is None:  # the puller was cancelled: try ourselves
            return await self._pull(image, sandbox_config)
        return shared.ref
