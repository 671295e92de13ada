"""The start-up warnings about settings, logged once logging is set up."""

from __future__ import annotations

import logging

from kubelet.logs.fields import verbosity_level

from .options import Options

log = logging.getLogger("kubelet")


def log_settings_warnings(options: Options) -> None:
    """Upstream's gate warnings and the one line naming what is accepted but not acted on;
    at -v=1 one line more per setting named, saying what is missing."""
    for warning in options.warnings:
        log.warning("%s", warning)
    for line in options.details:
        log.log(verbosity_level(1), "%s", line)
