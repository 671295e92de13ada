"""The kubelet's configuration: KubeletConfiguration, its file, its flags, and Options.

``resolve(argv)`` is the one entry point: command line (and ``--config`` file) in,
``Options`` out, or ``ConfigError`` naming the file, field or flag that is wrong.
"""

from kubelet.errors import ConfigError, Problem

from .duration import format_duration, parse_duration
from .flags import FLAGS, ParsedFlags, build_parser, parse_flags
from .kubeletconfig import (
    DEFAULT_EVICTION_HARD,
    CrashLoopBackOffConfig,
    KubeletAnonymousAuthentication,
    KubeletAuthentication,
    KubeletAuthorization,
    KubeletConfiguration,
    KubeletWebhookAuthentication,
    KubeletWebhookAuthorization,
    KubeletX509Authentication,
    LoggingConfiguration,
    Taint,
    VModuleItem,
)
from .loader import LoadedConfig, load_config_file, parse_config
from .options import Options, build_options, resolve
from .validation import validate
from .wire import encode

__all__ = [
    "DEFAULT_EVICTION_HARD",
    "FLAGS",
    "ConfigError",
    "CrashLoopBackOffConfig",
    "KubeletAnonymousAuthentication",
    "KubeletAuthentication",
    "KubeletAuthorization",
    "KubeletConfiguration",
    "KubeletWebhookAuthentication",
    "KubeletWebhookAuthorization",
    "KubeletX509Authentication",
    "LoadedConfig",
    "LoggingConfiguration",
    "Options",
    "ParsedFlags",
    "Problem",
    "Taint",
    "VModuleItem",
    "build_options",
    "build_parser",
    "encode",
    "format_duration",
    "load_config_file",
    "parse_config",
    "parse_duration",
    "parse_flags",
    "resolve",
    "validate",
]
