"""Structured fields on log lines: per call, or for everything a task (and its children) logs.

klog's structured calls (``InfoS("msg", "pod", klog.KObj(pod))``) become::

    log = get_logger(__name__)
    log.info("Started container", pod=pod, container="app")

and a pod worker marks its whole task once, so every line it (or anything it calls)
logs carries the pod, with its UID from ``-v=4``::

    with pod_fields(pod):
        ...

Task-wide fields live in a ``contextvars.ContextVar``: a Trio task inherits a copy of its
parent's context when spawned, so fields set in a pod task reach its child tasks and
never leak into sibling pods.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import attrs

FIELDS_ATTR = "kubelet_fields"
"""LogRecord attribute holding the per-call fields (a dict)."""

_task_fields: contextvars.ContextVar[tuple[tuple[str, Any], ...]] = contextvars.ContextVar(
    "kubelet_log_fields", default=()
)

UID_VERBOSITY = 4
"""From this ``-v`` on, pod fields carry the pod UID too."""


@attrs.frozen
class ObjectRef:
    """klog's ``KObj``: rendered ``"ns/name"`` in text, ``{"name":…,"namespace":…}`` in JSON."""

    name: str
    namespace: str = ""
    uid: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def kobj(obj: Any) -> ObjectRef:
    """An ``ObjectRef`` for anything with Kubernetes ``metadata`` (a Pod, ...)."""
    meta = obj.metadata
    return ObjectRef(meta.name, meta.namespace, meta.uid)


@contextlib.contextmanager
def log_fields(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every line logged in this block (and by tasks spawned in it)."""
    token = _task_fields.set(_task_fields.get() + tuple(fields.items()))
    try:
        yield
    finally:
        _task_fields.reset(token)


def pod_fields(pod: Any) -> contextlib.AbstractContextManager[None]:
    """``pod="ns/name"`` (and ``podUID`` at ``-v≥4``) on every line logged in this block."""
    return log_fields(pod=kobj(pod))


def set_pod_fields(pod: Any) -> None:
    """Mark the rest of the current task (e.g. a pod worker's task) with its pod."""
    _task_fields.set((*_task_fields.get(), ("pod", kobj(pod))))


class StructuredLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose keyword arguments become structured fields (klog's ``InfoS``)."""

    _RESERVED = frozenset({"exc_info", "stack_info", "stacklevel", "extra"})

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        fields = {k: kwargs.pop(k) for k in list(kwargs) if k not in self._RESERVED}
        extra = dict(kwargs.get("extra") or {})
        if fields:
            extra[FIELDS_ATTR] = {**extra.get(FIELDS_ATTR, {}), **fields}
        kwargs["extra"] = extra
        return msg, kwargs

    def v(self, level: int) -> VerboseLogger:
        """klog's ``V(n)``: ``log.v(4).info(...)`` logs only at ``-v≥4``."""
        return VerboseLogger(self, level)


@attrs.frozen
class VerboseLogger:
    """``StructuredLogger.v(n)``: info lines at verbosity ``n``."""

    parent: StructuredLogger
    level: int

    def enabled(self) -> bool:
        return self.parent.isEnabledFor(verbosity_level(self.level))

    def info(self, msg: str, *args: Any, **fields: Any) -> None:
        # stacklevel 2: the caller of this method, not this method, is the log site
        self.parent.log(verbosity_level(self.level), msg, *args, stacklevel=2, **fields)


def get_logger(name: str) -> StructuredLogger:
    """A ``StructuredLogger`` for module ``name`` (usually ``__name__``)."""
    return StructuredLogger(logging.getLogger(name), {})


def verbosity_level(v: int) -> int:
    """The stdlib level of klog's ``V(v)`` (``V(0)`` is INFO; ``logging.DEBUG`` counts as 4)."""
    return logging.INFO - max(0, min(v, 9))


def record_verbosity(levelno: int) -> int:
    """The ``-v`` a record needs: 0 for INFO and above, n for ``V(n)``, 4 for DEBUG."""
    if levelno >= logging.INFO:
        return 0
    if levelno == logging.DEBUG:
        return UID_VERBOSITY
    if levelno > logging.DEBUG:
        return logging.INFO - levelno
    return 10


def record_fields(record: logging.LogRecord) -> Mapping[str, Any]:
    """Task-wide fields first, then the call's own (a call may override a task field)."""
    fields: dict[str, Any] = dict(getattr(record, "kubelet_task_fields", ()))
    fields.update(getattr(record, FIELDS_ATTR, None) or {})
    return fields


class TaskFieldsFilter(logging.Filter):
    """Captures the task-wide fields on the record while still in the logging task."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.kubelet_task_fields = _task_fields.get()
        return True
