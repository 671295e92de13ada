"""A new sandbox's first containers, readied while RunPodSandbox runs.

RunPodSandbox (the pause container and the pod's network) is most of a pod's start, and
whatever the kubelet does between the runtime's calls lengthens it. What a container's
start needs that the sandbox does not decide (its restart count from the log files, its
log directory, its termination-message file, its environment when no variable reads the
pod's IP) is made alongside that call instead of after PodSandboxStatus. The CRI calls
keep upstream's order.

Each result is taken once, by the start it was made for, which reports an error where it
would have had it made the thing itself (so events and waiting reasons stay the same);
what no start took (the sandbox failed, the container is backing off, its image could
not be had) is undone by :meth:`StartsAhead.discard`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterable

import attrs
import trio

from kubelet.api import Container
from kubelet.env import EnvError, EnvResult


@attrs.define
class Readied:
    """One container's start, made ahead; every field is set once ``done`` is."""

    done: trio.Event = attrs.field(factory=trio.Event)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    restart_count: int | None = None
    """from the log files, when the runtime had no instance (else None: from the status)"""
    log_dir_error: OSError | None = None
    """the container's log directory could not be made"""
    message_path: str | None = None
    """the termination-message file made (None: none wanted, or it could not be made)"""
    env: EnvResult | EnvError | None = None
    """the environment and command resolved, or why not (None: it reads the pod's IP)"""
    command_args: tuple[list[str], list[str]] = ([], [])
    failure: Exception | None = None
    """an unexpected error, raised again to the start that takes this"""

    def drop_message_file(self) -> None:
        """The start stopped before its config: the file goes, as if never made."""
        if self.message_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.message_path)
            self.message_path = None


Ready = Callable[[Container, Readied], Awaitable[None]]
"""Fills a container's ``Readied`` (the pod driver's part)."""


class StartsAhead:
    """The containers' starts readied while their sandbox is created, by name."""

    def __init__(self) -> None:
        self._readied: dict[str, Readied] = {}

    def start(self, nursery: trio.Nursery, containers: Iterable[Container], ready: Ready) -> None:
        """Ready each of ``containers`` in ``nursery`` (cancelled with the pod's start)."""
        for container in containers:
            if container.name not in self._readied:
                self._readied[container.name] = readied = Readied()
                nursery.start_soon(_run, ready, container, readied)

    async def take(self, name: str) -> Readied | None:
        """The container's readied start once made (None: it was not readied); raises
        what went wrong unexpectedly while it was made."""
        readied = self._readied.pop(name, None)
        if readied is None:
            return None
        await readied.done.wait()
        if readied.failure is not None:
            raise readied.failure
        return readied

    def cancel(self) -> None:
        """No start will come (the sandbox failed): stop readying."""
        for readied in self._readied.values():
            readied.scope.cancel()

    def discard(self) -> None:
        """Undo what no start took: the termination-message files made for nothing."""
        for readied in self._readied.values():
            readied.drop_message_file()
        self._readied.clear()


async def _run(ready: Ready, container: Container, readied: Readied) -> None:
    # an error must not cancel the sandbox's creation beside it: it is kept for the start
    try:
        with readied.scope:
            await ready(container, readied)
    except Exception as exc:
        readied.failure = exc
    finally:
        readied.done.set()
