"""One call configures the process's logging from ``logging.format``/``verbosity``/``vmodule``.

Verbosity maps onto stdlib levels: ``V(0)`` is INFO, ``V(n)`` is ``INFO - n`` and
``logging.DEBUG`` counts as ``V(4)``; warnings and errors always pass. The root logger's
level is set so that records no ``-v``/``-vmodule`` could ever print are never even built
(cheap ``log.debug`` in hot paths); a handler filter then applies the exact rule, which
may depend on the file that logs (``-vmodule=podsync=4``).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import sys
from collections.abc import Sequence
from typing import Protocol, TextIO

import attrs

from .fields import TaskFieldsFilter, record_verbosity, verbosity_level
from .klog import KlogJSONFormatter, KlogTextFormatter

HANDLER_NAME = "kubelet-klog"

NOISY_LOGGERS = (
    "hpack",
    "h2",
    "grpclib",
    "asyncio",
    "trio_asyncio",
    "httpx",
    "httpcore",
)
"""Libraries whose own debug chatter would drown the kubelet's at high ``-v``."""


class VModuleItem(Protocol):
    """A per-file verbosity override (klog's ``-vmodule``; ``config.VModuleItem`` fits)."""

    @property
    def file_pattern(self) -> str: ...

    @property
    def verbosity(self) -> int: ...


class LoggingSettings(Protocol):
    """What logging reads of the configuration (``config.LoggingConfiguration`` fits)."""

    @property
    def format(self) -> str: ...

    @property
    def verbosity(self) -> int: ...

    @property
    def vmodule(self) -> Sequence[VModuleItem]: ...


@attrs.frozen
class _Defaults:
    format: str = "text"
    verbosity: int = 0
    vmodule: tuple[VModuleItem, ...] = ()


class VerbosityFilter(logging.Filter):
    """Passes a record if its verbosity is within ``-v``, or its file's ``-vmodule`` entry."""

    def __init__(self, verbosity: int, vmodule: Sequence[VModuleItem] = ()) -> None:
        super().__init__()
        self.verbosity = verbosity
        self.vmodule = tuple(vmodule)
        self._limits: dict[str, int] = {}
        """``limit_for`` by path, for the ``verbosity`` and ``vmodule`` in ``_limits_of``."""
        self._limits_of: tuple[int, tuple[VModuleItem, ...]] = (verbosity, self.vmodule)

    def limit_for(self, pathname: str) -> int:
        """The ``-v`` that applies to records from ``pathname``."""
        module = os.path.splitext(os.path.basename(pathname))[0]
        for item in self.vmodule:
            if fnmatch.fnmatchcase(module, item.file_pattern) or fnmatch.fnmatchcase(
                pathname, item.file_pattern
            ):
                return item.verbosity
        return self.verbosity

    def filter(self, record: logging.LogRecord) -> bool:
        needed = record_verbosity(record.levelno)
        if needed <= 0 <= self.verbosity and not self.vmodule:
            return True  # INFO and above at any -v: no file to look up
        of = self._limits_of
        if of[0] != self.verbosity or of[1] is not self.vmodule or len(self._limits) > 4096:
            self._limits = {}
            self._limits_of = (self.verbosity, self.vmodule)
        limit = self._limits.get(record.pathname)
        if limit is None:
            limit = self._limits[record.pathname] = self.limit_for(record.pathname)
        return needed <= limit


def root_level(verbosity: int, vmodule: Sequence[VModuleItem] = ()) -> int:
    """The lowest stdlib level any file may print at this ``-v`` and ``-vmodule``."""
    most = max([verbosity, *(item.verbosity for item in vmodule)])
    if most >= 10:
        return 1
    level = verbosity_level(most)
    return min(level, logging.DEBUG) if most >= 4 else level


def setup_logging(
    config: LoggingSettings | None = None, stream: TextIO | None = None
) -> logging.Handler:
    """Install the klog handler on the root logger (replacing a previous one); returns it.

    ``process.prepare`` calls it: ``setup_logging(options.config.logging)``.
    """
    config = config or _Defaults()
    verbosity = config.verbosity
    formatter: logging.Formatter
    if config.format == "json":
        formatter = KlogJSONFormatter(verbosity)
    else:
        formatter = KlogTextFormatter(verbosity)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(formatter)
    handler.addFilter(VerbosityFilter(verbosity, config.vmodule))
    handler.addFilter(TaskFieldsFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(root_level(verbosity, config.vmodule))
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbosity < 8 else logging.NOTSET)
    return handler


def flush_handlers() -> None:
    """Flush every root handler (the ``log`` health check proves logging is not stuck)."""
    for handler in logging.getLogger().handlers:
        handler.flush()


def set_verbosity(verbosity: int) -> None:
    """Change ``-v`` of the running process (``PUT /debug/flags/v``): the klog handler's
    filter and formatter, and the root logger's level, as ``setup_logging`` set them."""
    root = logging.getLogger()
    vmodule: tuple[VModuleItem, ...] = ()
    for handler in root.handlers:
        if handler.get_name() != HANDLER_NAME:
            continue
        for f in handler.filters:
            if isinstance(f, VerbosityFilter):
                f.verbosity = verbosity
                vmodule = f.vmodule
        formatter = handler.formatter
        if isinstance(formatter, KlogTextFormatter | KlogJSONFormatter):
            formatter.verbosity = verbosity
    root.setLevel(root_level(verbosity, vmodule))
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbosity < 8 else logging.NOTSET)
