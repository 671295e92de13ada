"""What the shutdown manager needs of logind without the D-Bus client (``logind.py``,
jeepney), which a node without a shutdown grace period never loads: the errors, and the
drop-in that raises logind's InhibitDelayMaxSec."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["LOGIND_DROPIN_DIR", "LogindError", "LogindUnavailable", "override_inhibit_delay"]

LOGIND_DROPIN_DIR = "/etc/systemd/logind.conf.d"
LOGIND_DROPIN = "99-kubelet.conf"


class LogindError(Exception):
    """A call to logind or systemd failed; the message says which and why."""


class LogindUnavailable(LogindError):
    """No system bus, or nobody owns org.freedesktop.login1 on it."""


def override_inhibit_delay(seconds: int, directory: str = LOGIND_DROPIN_DIR) -> Path:
    """Write the logind drop-in that raises InhibitDelayMaxSec to ``seconds``."""
    path = Path(directory) / LOGIND_DROPIN
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(f"# Kubelet logind override\n[Login]\nInhibitDelayMaxSec={seconds}\n")
        tmp.chmod(0o644)
        os.replace(tmp, path)
    except OSError as exc:
        raise LogindError(
            f"failed writing logind shutdown inhibit override file {path}: {exc}"
        ) from None
    return path
