"""Five minutes without a valid client certificate: exit (server answering) or say so."""

from __future__ import annotations

import logging

import attrs
import pytest
import trio

from kubelet.errors import FatalError
from kubelet.node.certificates import CertKeyPair, ClientCertificateWatch

EXITING = (
    "It has been 5m0s since a valid client cert was found and the server is responsive, exiting."
)
NOT_RESPONSIVE = (
    "It has been 5m0s since a valid client cert was found, but the server is not "
    "responsive. A restart may be necessary to retrieve new initial credentials."
)


@attrs.define
class Manager:
    """The manager as the watch sees it: a pair until ``valid_until`` (trio time)."""

    valid_until: float
    server_healthy: bool = True
    pair: CertKeyPair = attrs.field(factory=lambda: object())  # type: ignore[arg-type]

    def current(self) -> CertKeyPair | None:
        return self.pair if trio.current_time() < self.valid_until else None


async def test_exits_five_minutes_after_the_certificate_went(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    manager = Manager(valid_until=1000.0)
    watch = ClientCertificateWatch(manager, trio.current_time)
    with caplog.at_level(logging.INFO), pytest.raises(FatalError) as caught:
        await watch.run()
    assert str(caught.value) == EXITING
    # checked every 10 s: the last sight of a valid certificate was at most 10 s before
    assert 1000 + 290 < trio.current_time() <= 1000 + 310
    [record] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert record.getMessage() == EXITING


async def test_an_unresponsive_server_only_gets_an_error_every_10_s(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    manager = Manager(valid_until=0.0, server_healthy=False)
    watch = ClientCertificateWatch(manager, trio.current_time)
    with caplog.at_level(logging.INFO), trio.move_on_after(405):
        await watch.run()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [NOT_RESPONSIVE] * 10  # at 310, 320, ... 400 s
    # the server answers again (a 401 to the manager): exit on the next check
    manager.server_healthy = True
    with pytest.raises(FatalError):
        await watch.run()


async def test_a_valid_certificate_keeps_it_running(autojump_clock: trio.abc.Clock) -> None:
    manager = Manager(valid_until=float("inf"))
    with trio.move_on_after(3600) as scope:
        await ClientCertificateWatch(manager, trio.current_time).run()
    assert scope.cancelled_caught
