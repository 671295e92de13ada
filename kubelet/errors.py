"""The errors that stop the kubelet: a configuration it cannot start with (naming where
each bad value came from), and a fatal condition it exits on."""

from __future__ import annotations

import attrs


@attrs.frozen
class Problem:
    """One bad setting: ``source`` is the file or ``--flag`` it came from, ``field`` its path."""

    source: str
    field: str
    message: str

    def __str__(self) -> str:
        return ": ".join(part for part in (self.source, self.field, self.message) if part)


class ConfigError(Exception):
    """The kubelet cannot start with this configuration; every problem found is listed.

    All problems are collected before raising so an operator fixes a file in one pass,
    as upstream's aggregated validation errors allow.
    """

    def __init__(self, *problems: Problem) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems

    @classmethod
    def single(cls, source: str, field: str, message: str) -> ConfigError:
        """A configuration error with one problem."""
        return cls(Problem(source, field, message))


FATAL_EXIT_CODE = 255
"""What upstream's klog.Fatal exits with."""


class FatalError(Exception):
    """The kubelet cannot go on and exits with ``FATAL_EXIT_CODE`` (upstream's
    ``klog.Fatal``), so that its supervisor restarts it from the beginning. Raised from a
    component's task, it cancels the whole tree (pods keep running, as on SIGTERM); the
    message has been logged at FATAL level already."""
