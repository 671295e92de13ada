"""Container handlers: exec, HTTP GET, TCP and gRPC, run the same way for probes and hooks.

What the package offers the prober and the lifecycle hooks: the modules ``exec``,
``http``, ``tcp`` and ``grpc`` (one handler kind each), ``run_in_container`` (a command
through CRI ExecSync, on an ``ExecRunner``), ``HttpGetter``/``build_request`` (one
HTTP GET path), and what a run produces: ``ProbeResult``, ``ProbeOutcome``,
``ProbeTarget`` and the errors whose text users see.
"""

from . import exec, grpc, http, tcp
from .exec import CommandExited, CommandTimedOut, ExecRunner, cri_error_text, run_in_container
from .http import HTTP_RESPONSE_TO_HTTPS_CLIENT, HttpGetError, HttpGetter, build_request
from .outcome import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget

__all__ = [
    "HTTP_RESPONSE_TO_HTTPS_CLIENT",
    "CommandExited",
    "CommandTimedOut",
    "ExecRunner",
    "HttpGetError",
    "HttpGetter",
    "ProbeError",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeTarget",
    "build_request",
    "cri_error_text",
    "exec",
    "grpc",
    "http",
    "run_in_container",
    "tcp",
]
