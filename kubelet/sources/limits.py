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

import attrs
import yaml

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

_CHECK_EVERY = 4096
"""Events between two looks at the CPU clock."""


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


def _line(mark: Any) -> int | None:
    return int(mark.line) + 1 if mark is not None else None


@attrs.frozen
class YamlShape:
    """What the counting pass learnt about the first document."""

    nodes: int
    """Nodes, aliases counted as what they expand to."""
    extra_document_line: int | None = None
    """The line where a second document starts (it is ignored, with a warning)."""
    unparsable_rest: bool = False
    """What follows the first document does not parse (ignored, with a warning)."""


def _too_many(path: str, event: Any, distinct: int) -> ManifestError:
    if distinct > MAX_NODES:
        reason = f"the manifest has more than {MAX_NODES} nodes (values, lists and maps)"
    else:
        reason = f"YAML aliases expand this to more than {MAX_NODES} nodes"
    return ManifestError(path, _line(event.start_mark), reason)


def too_deep(limit: int = MAX_DEPTH) -> str:
    return f"the document is nested too deeply (more than {limit} levels)"


def measure_yaml(parser: Any, path: str, budget: Budget) -> YamlShape:
    """Count the first document's events from ``parser`` (a LibYAML loader), refusing it
    at the first event past ``MAX_NODES`` or ``MAX_DEPTH`` and at an alias inside its own
    anchor; syntax errors are left to the caller (they raise ``yaml.YAMLError``)."""
    expanded = distinct = depth = events = 0
    open_nodes: list[tuple[str | None, int]] = []
    sizes: dict[str, int] = {}
    opened: set[str] = set()
    while parser.check_event():
        event = parser.get_event()
        events += 1
        if events % _CHECK_EVERY == 0:
            budget.check("reading the YAML")
        if isinstance(event, yaml.DocumentEndEvent):
            try:
                if parser.check_event(yaml.DocumentStartEvent):
                    parser.get_event()
                    return YamlShape(expanded, _line(parser.peek_event().start_mark))
            except yaml.YAMLError:
                return YamlShape(expanded, unparsable_rest=True)
            break
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in opened:
                raise ManifestError(path, _line(event.start_mark), "a YAML alias refers to itself")
            expanded += sizes.get(str(event.anchor), 1)  # unknown: the composer names it
        elif isinstance(event, yaml.NodeEvent):  # a scalar, or a list or map opening
            distinct += 1
            expanded += 1
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ManifestError(path, _line(event.start_mark), too_deep())
                open_nodes.append((event.anchor, expanded - 1))
                if event.anchor is not None:
                    opened.add(event.anchor)
            elif event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, before = open_nodes.pop()
            if anchor is not None:
                sizes[anchor] = expanded - before
                opened.discard(anchor)
        if expanded > MAX_NODES:
            raise _too_many(path, event, distinct)
    return YamlShape(expanded)


def check_json_cost(data: bytes, path: str) -> None:
    """Refuse JSON that would build more than twice ``MAX_NODES`` objects, before
    ``json`` builds them: every node but the root needs a ',' or ':' or opens with '[' or
    '{' (a map entry needs one ':' for two nodes), so these bytes bound the count from
    above; C-speed counts, no Python per byte."""
    marks = data.count(b",") + 2 * data.count(b":") + data.count(b"[") + data.count(b"{")
    if marks > 2 * MAX_NODES:
        raise ManifestError(
            path,
            None,
            f"the JSON has {marks} separators and brackets (',', ':' counted twice, '[', "
            f"'{{'), more than a manifest of {MAX_NODES} nodes (values, lists and maps) "
            "can have",
        )


def measure_json(value: Any, path: str) -> int:
    """The nodes of a decoded JSON value; refuse more than ``MAX_NODES`` or ``MAX_DEPTH``."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        nodes += 1 + (len(item) if isinstance(item, dict) else 0)  # a map's keys too
        if nodes > MAX_NODES:
            raise ManifestError(
                path, None, f"the manifest has more than {MAX_NODES} nodes (values, lists and maps)"
            )
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise ManifestError(path, None, too_deep())
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return nodes
