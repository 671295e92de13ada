"""The debug console: a Python prompt inside the running kubelet (``kubelet debug``)."""

from .client import main, socket_path
from .console import claim_socket_path, serve_console
from .helpers import ConsoleTarget, tasks

__all__ = [
    "ConsoleTarget",
    "claim_socket_path",
    "main",
    "serve_console",
    "socket_path",
    "tasks",
]
