"""What settings do to the kubelet process at start-up: the warnings, the OOM score."""

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


OOM_SCORE_ADJ = "/proc/self/oom_score_adj"


def apply_oom_score_adj(value: int, path: str = OOM_SCORE_ADJ) -> bool:
    """``oomScoreAdj``: the kubelet's own OOM score, as upstream sets it at start-up.

    A failure (not root, no /proc) is logged and start-up goes on, as upstream does.
    """
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(f"{value}\n")
    except OSError as exc:
        log.info("failed to set the kubelet's oom_score_adj to %d: %s", value, exc)
        return False
    return True
