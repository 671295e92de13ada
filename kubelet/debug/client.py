"""``kubelet debug [--socket PATH]``: a terminal for the running kubelet's debug console.

A plain blocking client (it is a command-line tool, not part of the Trio program):
prints what the kubelet sends, reads a line with readline editing and history when the
platform has it, sends it. Ctrl-C cancels the running command (or drops the current
input); Ctrl-D leaves.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
from collections.abc import Callable, Sequence

from kubelet.config import DEFAULT_ROOT_DIR

from .console import INTERRUPT, PROMPT_END, PROMPT_START

SOCKET_NAME = "debug.sock"


def socket_path(root_dir: str = DEFAULT_ROOT_DIR) -> str:
    """Where the agent serves the console: ``<root-dir>/debug.sock``."""
    return os.path.join(root_dir, SOCKET_NAME)


class Connection:
    """The client side of the console protocol over a connected socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def read_until_prompt(self, show: Callable[[str], None]) -> str | None:
        """Show output until the next prompt; returns the prompt, None at EOF."""
        end, start = PROMPT_END.encode(), PROMPT_START.encode()
        while end not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                if self.buf:
                    show(self.buf.decode(errors="replace"))
                return None
            self.buf += data
            # show output as it comes; keep back what may be the start of a prompt
            cut = self.buf.find(start)
            if cut == -1:
                show(self.buf.decode(errors="replace"))
                self.buf = b""
        frame, _, self.buf = self.buf.partition(end)
        output, _, prompt = frame.rpartition(start)
        if output:
            show(output.decode(errors="replace"))
        return prompt.decode(errors="replace")

    def send_line(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\n")


def _show(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def repl(conn: Connection, read: Callable[[str], str] = input) -> int:
    """The loop: show, prompt, send; returns the exit code."""
    while True:
        try:
            prompt = conn.read_until_prompt(_show)
        except KeyboardInterrupt:
            conn.send_line(INTERRUPT)
            continue
        if prompt is None:
            return 0
        try:
            line = read(prompt)
        except EOFError:
            _show("\n")
            return 0
        except KeyboardInterrupt:
            _show("\n")
            line = INTERRUPT
        conn.send_line(line)


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(
        prog="kubelet debug", description="Attach to the running kubelet's debug console."
    )
    parser.add_argument(
        "--socket", default="", help="console socket (default <root-dir>/debug.sock)"
    )
    parser.add_argument("--root-dir", default=DEFAULT_ROOT_DIR, help="the kubelet's --root-dir")
    args = parser.parse_args(list(argv))
    path = args.socket or socket_path(args.root_dir)
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401 - line editing and history for input()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        print(f"kubelet debug: cannot connect to {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    with sock:
        return repl(Connection(sock))
