"""Image garbage collection as decisions: which unused images go, and how many bytes.

Upstream (images/image_gc_manager.go), every 5 minutes:

- records: each image is "first detected" when the kubelet first lists it and "last
  used" whenever a container (running or not) refers to it;
- age: with ``imageMaximumGCAge`` set, once the kubelet has run that long, every unused
  image not used for longer than it goes, whatever the disk usage;
- space: when the image filesystem is at or above ``imageGCHighThresholdPercent`` used,
  unused images go, least recently used first (then first detected), skipping those
  detected less than ``imageMinimumGCAge`` ago, until usage is back at
  ``imageGCLowThresholdPercent``; freeing less than needed records ``FreeDiskSpaceFailed``;
- never: images in use, images the runtime pins, and (our rule, as containerd before
  1.7 does not pin it) the sandbox image;
- a failed collection is an ``ImageGCFailed`` event from the second failure in a row
  on. ``imageGCHighThresholdPercent: 100`` with no maximum age turns the collector off.

The eviction manager's "delete unused images" is the space pass with no byte target.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

__all__ = [
    "FREE_DISK_SPACE_FAILED",
    "IMAGE_GC_FAILED",
    "INVALID_DISK_CAPACITY",
    "FailureTracker",
    "ImageGCPolicy",
    "ImageInfo",
    "ImageRecord",
    "SpaceDecision",
    "detect",
    "eviction_order",
    "free_space_candidates",
    "ids_of",
    "old_images",
    "space_decision",
]

IMAGE_GC_FAILED = "ImageGCFailed"
FREE_DISK_SPACE_FAILED = "FreeDiskSpaceFailed"
INVALID_DISK_CAPACITY = "InvalidDiskCapacity"
CONTAINER_GC_FAILED = "ContainerGCFailed"
PERIOD = 300.0
"""seconds between image collections"""
CONTAINER_GC_PERIOD = 60.0


@attrs.frozen
class ImageGCPolicy:
    high_threshold_percent: int = 85
    low_threshold_percent: int = 80
    min_age: float = 120.0
    max_age: float = 0.0
    """0: no age-based collection"""

    def validate(self) -> None:
        """Upstream's ``NewImageGCManager`` checks; ValueError names the bad setting."""
        for name, value in (
            ("HighThresholdPercent", self.high_threshold_percent),
            ("LowThresholdPercent", self.low_threshold_percent),
        ):
            if not 0 <= value <= 100:
                raise ValueError(f"invalid {name} {value}, must be in range [0-100]")
        if self.low_threshold_percent > self.high_threshold_percent:
            raise ValueError(
                f"LowThresholdPercent {self.low_threshold_percent} can not be higher than "
                f"HighThresholdPercent {self.high_threshold_percent}"
            )

    @property
    def enabled(self) -> bool:
        return self.high_threshold_percent != 100 or self.max_age != 0


@attrs.frozen
class ImageInfo:
    """An image as ListImages reports it."""

    id: str
    size: int
    pinned: bool = False
    repo_tags: tuple[str, ...] = ()
    repo_digests: tuple[str, ...] = ()


@attrs.frozen
class ImageRecord:
    first_detected: float
    last_used: float | None = None
    """None: not seen in use since the kubelet started"""
    size: int = 0
    pinned: bool = False


def detect(
    records: Mapping[str, ImageRecord],
    images: Iterable[ImageInfo],
    in_use: Iterable[str],
    now: float,
) -> dict[str, ImageRecord]:
    """Records after a listing: new images detected now, used ones used now, gone ones dropped."""
    used = set(in_use)
    out: dict[str, ImageRecord] = {}
    for image in images:
        old = records.get(image.id) or ImageRecord(first_detected=now)
        out[image.id] = attrs.evolve(
            old,
            last_used=now if image.id in used else old.last_used,
            size=image.size,
            pinned=image.pinned,
        )
    return out


def eviction_order(
    records: Mapping[str, ImageRecord], in_use: Iterable[str], protected: Iterable[str] = ()
) -> list[tuple[str, ImageRecord]]:
    """Unused, unpinned, unprotected images: least recently used first, then first detected."""
    skip = set(in_use) | set(protected)
    candidates = [(i, r) for i, r in records.items() if i not in skip and not r.pinned]
    return sorted(
        candidates,
        key=lambda ir: (
            float("-inf") if ir[1].last_used is None else ir[1].last_used,
            ir[1].first_detected,
        ),
    )


def old_images(
    order: Sequence[tuple[str, ImageRecord]], policy: ImageGCPolicy, now: float, began: float
) -> list[str]:
    """Images past ``imageMaximumGCAge`` since last use (none until the kubelet ran that long).

    An image not used since the kubelet started counts as unused forever, as upstream's
    zero time does; the minimum age does not apply here.
    """
    if policy.max_age == 0 or now - began <= policy.max_age:
        return []
    return [i for i, r in order if r.last_used is None or now - r.last_used > policy.max_age]


@attrs.frozen
class SpaceDecision:
    usage_percent: int
    bytes_to_free: int
    """0: usage is below the high threshold"""


def space_decision(capacity: int, available: int, policy: ImageGCPolicy) -> SpaceDecision:
    """How much to free on the image filesystem; ValueError if its capacity is 0."""
    available = min(available, capacity)
    if capacity == 0:
        raise ValueError("invalid capacity 0 on image filesystem")
    usage = 100 - available * 100 // capacity
    if usage < policy.high_threshold_percent:
        return SpaceDecision(usage, 0)
    return SpaceDecision(usage, capacity * (100 - policy.low_threshold_percent) // 100 - available)


def free_space_candidates(
    order: Sequence[tuple[str, ImageRecord]], policy: ImageGCPolicy, now: float
) -> list[tuple[str, int]]:
    """(id, size) of the images the space pass may remove, in order.

    Skips an image used at or after ``now`` and one detected less than the minimum age
    ago (it may have just been pulled for a pod about to start).
    """
    out: list[tuple[str, int]] = []
    for image_id, record in order:
        if record.last_used is not None and record.last_used >= now:
            continue
        if now - record.first_detected < policy.min_age:
            continue
        out.append((image_id, record.size))
    return out


def not_enough_freed_message(wanted: int, freed: int) -> str:
    """The ``FreeDiskSpaceFailed`` event (and error) text."""
    return (
        f"Failed to garbage collect required amount of images. Attempted to free {wanted} "
        f"bytes, but only found {freed} bytes eligible to free."
    )


def deletion_errors_message(wanted: int, freed: int, errors: Sequence[str]) -> str:
    return (
        f"wanted to free {wanted} bytes, but freed {freed} bytes space with errors in image "
        f"deletion: {_aggregate(errors)}"
    )


def old_deletion_errors_message(max_age: str, errors: Sequence[str]) -> str:
    return (
        f"wanted to free images older than {max_age}, encountered errors in image "
        f"deletion: {_aggregate(errors)}"
    )


def _aggregate(errors: Sequence[str]) -> str:
    """apimachinery's ``NewAggregate(...).Error()``: one message, or "[a, b]"."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


@attrs.define
class FailureTracker:
    """Whether a failure is worth an event: upstream records only repeated failures."""

    failed_before: bool = False

    def failed(self) -> bool:
        """Note a failure; True when it is the second (or later) in a row."""
        repeated = self.failed_before
        self.failed_before = True
        return repeated

    def succeeded(self) -> bool:
        """Note a success; True when it follows a failure (log it at a higher level)."""
        recovered = self.failed_before
        self.failed_before = False
        return recovered


def ids_of(images: Iterable[ImageInfo], refs: Iterable[str]) -> set[str]:
    """IDs of the images ``refs`` name (by ID, tag or digest; "name" means "name:latest")."""
    wanted = set()
    for ref in refs:
        wanted.add(ref)
        last = ref.rsplit("/", 1)[-1]
        if "@" not in ref and ":" not in last:
            wanted.add(f"{ref}:latest")
    return {
        i.id
        for i in images
        if i.id in wanted or wanted.intersection(i.repo_tags) or wanted.intersection(i.repo_digests)
    }
