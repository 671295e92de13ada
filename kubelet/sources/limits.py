"""What decoding one manifest may cost, and the cheap checks that refuse the rest early.

A manifest is untrusted input read by a node agent: a 10 MiB file of tiny maps made
millions of Python objects (7–36 s and 1–2 GB before these checks). So, before anything
is built, the YAML event stream of LibYAML's parser is counted (about 1 µs an event,
a tenth of what decoding an ordinary manifest costs) and the manifest refused at the
first event past a bound; JSON, which is only decoded by ``json`` when LibYAML cannot
read it, is bounded by counting its separators first. What passes is bounded by
``MAX_NODES``, and the whole decode by ``PARSE_CPU_SECONDS`` of CPU time.

The figures: real manifests have tens to a few thousand nodes (a kubeadm control-plane
manifest a few hundred) and are nested about 10 levels deep; the largest accepted manifest
(100,000 nodes, about 20,000 environment variables) decodes in about 1.3 s on the
2-core machine of docs/benchmarks.md, and a 10 MiB string in about 1.3 s (the UID hash).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubelet import boundedio
from kubelet.boundedio import DocumentRefused, YamlShape

from .errors import ManifestError

MAX_CONFIG_LENGTH = 10 * 1024 * 1024
"""Upstream's maxConfigLength: a manifest (file or URL body) larger than this is refused."""

MAX_NODES = 100_000
"""Values, lists and maps one manifest may have, each alias counted as what it expands to."""

MAX_DEPTH = 100
"""Levels of nesting one manifest may have (a Pod needs about 10)."""

PARSE_CPU_SECONDS = 5.0
"""CPU time (of the decoding thread, so a busy machine does not count) one manifest may
take to decode, default and validate: a backstop behind the counts above."""


def too_large(size: int) -> str:
    return f"manifest is {size} bytes, more than the {MAX_CONFIG_LENGTH} byte (10 MiB) limit"


def too_large_unknown() -> str:
    """For a body without a length, read up to the limit and no further."""
    return f"manifest is more than the {MAX_CONFIG_LENGTH} byte (10 MiB) limit"


class Budget:
    """The CPU time one manifest may take; :meth:`check` between steps refuses the rest.

    ``clock`` is the calling thread's CPU time, so the same bytes meet the same fate
    whatever else the machine does (a refused file is not read again until it changes).
    """

    def __init__(
        self,
        path: str,
        seconds: float = PARSE_CPU_SECONDS,
        clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self.path = path
        self.seconds = seconds
        self._clock = clock
        self._wall_start = time.monotonic() if clock is time.thread_time else None
        self._start = clock()

    def check(self, step: str) -> None:
        # A thread cannot have used more CPU time than has passed: the thread clock (a
        # system call made holding the GIL, which stalls the event loop whenever the
        # kernel switches away there) is read only once the wall clock (vDSO) says the
        # limit could have been reached.
        wall_start = self._wall_start
        if wall_start is not None and time.monotonic() - wall_start <= self.seconds:
            return
        if self._clock() - self._start > self.seconds:
            raise ManifestError(
                self.path,
                None,
                f"decoding took more than {self.seconds:g} s of CPU time ({step}); refused",
            )


def _refused(path: str, exc: DocumentRefused) -> ManifestError:
    return ManifestError(path, exc.line, exc.reason)


def too_deep(limit: int = MAX_DEPTH) -> str:
    return boundedio.too_deep(limit)


def measure_yaml(parser: Any, path: str, budget: Budget) -> YamlShape:
    """Count the first document's events from ``parser`` (a LibYAML loader), refusing it
    at the first event past ``MAX_NODES`` or ``MAX_DEPTH`` and at an alias inside its own
    anchor (:func:`kubelet.boundedio.measure_yaml`); syntax errors are left to the caller
    (they raise ``yaml.YAMLError``)."""
    try:
        return boundedio.measure_yaml(
            parser,
            max_nodes=MAX_NODES,
            max_depth=MAX_DEPTH,
            what="manifest",
            check=lambda _: budget.check("reading the YAML"),
        )
    except DocumentRefused as exc:
        raise _refused(path, exc) from None


def check_json_cost(data: bytes, path: str) -> None:
    """Refuse JSON that would build more than twice ``MAX_NODES`` objects, before
    ``json`` builds them (:func:`kubelet.boundedio.check_json_cost`)."""
    try:
        boundedio.check_json_cost(data, max_nodes=MAX_NODES, what="manifest")
    except DocumentRefused as exc:
        raise _refused(path, exc) from None


def measure_json(value: Any, path: str) -> int:
    """The nodes of a decoded JSON value; refuse more than ``MAX_NODES`` or ``MAX_DEPTH``."""
    try:
        return boundedio.measure_json(
            value, max_nodes=MAX_NODES, max_depth=MAX_DEPTH, what="manifest"
        )
    except DocumentRefused as exc:
        raise _refused(path, exc) from None
