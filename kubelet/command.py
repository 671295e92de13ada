"""The ``kubelet`` command's entry (the console script and ``python -m kubelet``).

It puts ``leanimport``'s finder in place before the command's modules load, so the
kubelet's own modules come without their docstrings; then it is the command line
(``cli.main``). Importing ``kubelet.cli`` directly (the tests, a tool) loads them as
usual.
"""

from __future__ import annotations

from kubelet import leanimport


def main() -> int:
    leanimport.install()
    from kubelet.cli import main as command_line  # after the finder: loaded without docstrings

    return command_line()
