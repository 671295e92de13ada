"""The debug console: a Python prompt inside the running kubelet (``kubelet debug``)."""

from .client import socket_path
from .console import serve_console
from .helpers import ConsoleTarget, tasks

__all__ = ["ConsoleTarget", "serve_console", "socket_path", "tasks"]
