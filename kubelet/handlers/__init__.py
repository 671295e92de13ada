"""Container handlers: exec, HTTP GET, TCP and gRPC, run the same way for probes and hooks."""

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
