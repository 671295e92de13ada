"""The one error start-up configuration raises, naming where each bad value came from."""

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
