"""When to ask for a new certificate, and how to back off when asking fails (pure).

Upstream's certificate manager rotates at a jittered 70-90 % of the certificate's
lifetime, counted from its NotBefore (``Jitter(total, 0.2) - 0.3 * total``), so that nodes
joined together do not all renew at the same moment. It rotates at once when there is
no certificate, or the current one no longer satisfies the template (a new node address
for the serving certificate). A failed attempt is retried after 2, 4, 8, 16 and 32 s
(each +0-10 % jitter), then every 32 s until one succeeds.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

__all__ = [
    "RETRY_BACKOFF",
    "RETRY_STEADY",
    "retry_delays",
    "rotation_deadline",
]

RETRY_BACKOFF = (2.0, 2.0, 0.1, 5)
"""(first delay, factor, jitter, steps): client-go's wait.Backoff for rotation."""
RETRY_STEADY = 32.0
"""After the back-off steps, one attempt every 32 s (wait.PollInfinite)."""


def rotation_deadline(not_before: float, not_after: float, rand: float) -> float:
    """The moment to rotate a certificate valid from ``not_before`` to ``not_after``
    (epoch seconds); ``rand`` in [0, 1) picks the point between 70 % and 90 %."""
    total = not_after - not_before
    return not_before + total * (0.7 + 0.2 * rand)


def retry_delays(rng: random.Random | None = None) -> Iterator[float]:
    """The waits between failed attempts: jittered doubling, then a steady 32 s."""
    rng = rng or random.Random()
    delay, factor, jitter, steps = RETRY_BACKOFF
    for _ in range(steps):
        yield delay + delay * jitter * rng.random()
        delay *= factor
    while True:
        yield RETRY_STEADY
