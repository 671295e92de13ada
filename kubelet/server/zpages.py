"""Debugging pages upstream's kubelet serves: ``/flagz``, ``/statusz``, ``/metrics/slis`` and
``PUT /debug/flags/v``.

``/flagz`` (ComponentFlagz) and ``/statusz`` (ComponentStatusz) are the z-pages of
component-base in their text/plain form: a header, a warning that the page is not
machine-parseable, then ``name<delimiter>value`` lines with a delimiter picked at random
per response (``:``, ``: ``, ``=`` or a space) so that nobody parses them. ``/flagz`` lists
every kubelet flag with its value as given on the command line, else its default;
``/statusz`` the start time, uptime, the interpreter (in the "Go version" line), binary and
emulation versions and the paths served. Other ``Accept`` types answer 406.

``/metrics/slis`` holds the health checks' SLIs (``kubernetes_healthcheck``,
``kubernetes_healthchecks_total``), recorded each time ``/healthz`` runs a check.
``PUT /debug/flags/v`` sets the log verbosity (``-v``) of the running kubelet.
"""

from __future__ import annotations

import platform
import random
import time
from collections.abc import Callable, Mapping, Sequence

from prometheus_client.metrics import Counter, Gauge
from prometheus_client.registry import CollectorRegistry

from kubelet.config import FLAGS, shown_default
from kubelet.logs import set_verbosity
from kubelet.version import KUBERNETES_VERSION

from .asgi import Request, Response, text
from .healthz import NamedCheck

__all__ = ["HealthSLIs", "flagz", "set_verbosity_handler", "statusz"]

DELIMITERS = (":", ": ", "=", " ")
WARNING = (
    "Warning: This endpoint is not meant to be machine parseable, has no formatting "
    "compatibility guarantees and is for debugging purposes only."
)
PATHS = (
    "/configz", "/debug/flags/v", "/debug/pprof/", "/flagz", "/healthz", "/logs/",
    "/metrics", "/metrics/cadvisor", "/metrics/probes", "/metrics/resource",
    "/metrics/slis", "/pods", "/runningpods/", "/spec/", "/stats/", "/statusz",
)  # fmt: skip


def _acceptable(accept: str) -> bool:
    """component-base's check: text/plain (or a wildcard), no parameter but charset=utf-8."""
    if not accept:
        return True
    for item in accept.split(","):
        media, *params = (p.strip() for p in item.split(";"))
        kind, _, sub = media.partition("/")
        if kind not in ("text", "*") or sub not in ("plain", "*"):
            continue
        named = [p for p in params if not p.startswith("q=")]
        if not named or (len(named) == 1 and named[0].lower() == "charset=utf-8"):
            return True
    return False


def _not_acceptable() -> Response:
    return text(406, "media type not acceptable, must be: text/plain\n")


def flag_values(given: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Every flag's value: the last given on the command line, else its default."""
    out = {}
    for spec in FLAGS:
        values = given.get(spec.name)
        if values:
            out[spec.name] = values[-1] if spec.combine == "last" else ",".join(values)
        else:
            out[spec.name] = shown_default(spec) if spec.field or spec.default else ""
    return out


def flagz(
    request: Request, given: Mapping[str, Sequence[str]], rng: random.Random | None = None
) -> Response:
    if not _acceptable(request.headers.get("accept", "")):
        return _not_acceptable()
    delim = (rng or random).choice(DELIMITERS)
    values = flag_values(given)
    lines = [f"{name}{delim}{values[name]}\n" for name in sorted(values)]
    return text(200, f"\nkubelet flagz\n{WARNING}\n" + "".join(lines))


def _uptime(seconds: float) -> str:
    up = max(int(seconds), 0)
    return f"{up // 3600} hr {(up // 60) % 60:02d} min {up % 60:02d} sec"


def statusz(
    request: Request,
    started: float,
    now: Callable[[], float] = time.time,
    rng: random.Random | None = None,
) -> Response:
    if not _acceptable(request.headers.get("accept", "")):
        return _not_acceptable()
    d = (rng or random).choice(DELIMITERS)
    stamp = time.strftime("%a %b %e %H:%M:%S UTC %Y", time.gmtime(started))
    binary = KUBERNETES_VERSION.removeprefix("v")
    emulation = ".".join(binary.split(".")[:2])
    body = (
        f"\nkubelet statusz\n{WARNING}\n\n"
        f"Started{d} {stamp}\n"
        f"Up{d} {_uptime(now() - started)}\n"
        f"Go version{d} {platform.python_implementation().lower()}{platform.python_version()}\n"
        f"Binary version{d} {binary}\n"
        f"Emulation version{d} {emulation}\n"
        f"Paths{d} {' '.join(PATHS)}\n"
    )
    return text(200, body)


def set_verbosity_handler(request: Request, body: bytes) -> Response:
    """``/debug/flags/v``: routes.StringFlagPutHandler with klog's GlogSetter."""
    if request.method != "PUT":
        return text(406, "unsupported http method\n", ("X-Content-Type-Options", "nosniff"))
    value = body.decode("utf-8", "replace")
    try:
        level = int(value, 10)
        if not 0 <= level < 2**32 or not value.isdigit():
            raise ValueError
    except ValueError:
        message = (
            f"failed set klog.logging.verbosity {value}: "
            f'strconv.ParseUint: parsing "{value}": invalid syntax'
        )
        return text(400, message + "\n", ("X-Content-Type-Options", "nosniff"))
    set_verbosity(level)
    return text(
        200,
        f"successfully set klog.logging.verbosity to {value}\n",
        ("X-Content-Type-Options", "nosniff"),
    )


class HealthSLIs:
    """The health checks' SLI metrics (component-base's slis), for ``/metrics/slis``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.healthcheck = Gauge(
            "kubernetes_healthcheck",
            "[STABLE] This metric records the result of a single healthcheck.",
            ["name", "type"],
            registry=self.registry,
        )
        self.healthchecks = Counter(
            "kubernetes_healthchecks",
            "[STABLE] This metric records the results of all healthcheck.",
            ["name", "status", "type"],
            registry=self.registry,
        )

    def observe(self, name: str, healthy: bool, kind: str = "healthz") -> None:
        self.healthcheck.labels(name, kind).set(1 if healthy else 0)
        self.healthchecks.labels(name, "success" if healthy else "error", kind).inc()

    def wrap(self, checks: Sequence[NamedCheck]) -> list[NamedCheck]:
        """The checks, each recording its result here when it runs."""

        def recording(check: NamedCheck) -> NamedCheck:
            def run() -> str | None:
                reason = check.check()
                self.observe(check.name, reason is None)
                return reason

            return NamedCheck(check.name, run)

        return [recording(c) for c in checks]
