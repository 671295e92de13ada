"""The kubelet's configuration: KubeletConfiguration, its file, its flags, and Options.

``resolve(argv)`` is the one entry point: command line (and ``--config`` file) in,
``Options`` out, or ``ConfigError`` naming the file, field or flag that is wrong.
"""

from kubelet.errors import ConfigError, Problem

from . import features
from .duration import format_duration, parse_duration, parse_duration_ns
from .features import (
    CONTAINER_RESTART_RULES,
    ENV_FILES,
    EXTEND_WEBSOCKETS_TO_KUBELET,
    HOSTNAME_OVERRIDE,
    IN_PLACE_POD_VERTICAL_SCALING,
    KUBELET_CRASH_LOOP_BACK_OFF_MAX,
    KUBELET_REGISTRATION_GET_ON_EXISTS_ONLY,
    NODE_DECLARED_FEATURES,
    POD_LEVEL_RESOURCES,
    POD_READY_TO_START_CONTAINERS_CONDITION,
    REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY,
    RESTART_ALL_CONTAINERS,
    SHUTDOWN_BY_POD_PRIORITY,
    USER_NAMESPACES_SUPPORT,
    FeatureGates,
)
from .flags import (
    DEFAULT_ROOT_DIR,
    FLAGS,
    FlagSpec,
    ParsedFlags,
    build_parser,
    parse_flags,
    shown_default,
    support_key,
)
from .gatedata import GATES
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
    TracingConfiguration,
    VModuleItem,
)
from .loader import LoadedConfig, load_config_file, parse_config
from .options import Options, build_options, resolve
from .support import GATE_SUPPORT, IMPLEMENTED, NOT_IMPLEMENTED, PARTIAL, SETTINGS, Support
from .tlsnames import CURVES as TLS_CURVES
from .tlsnames import INSECURE_CIPHER_SUITES, OPENSSL_CIPHERS
from .validation import validate
from .wire import encode

__all__ = [
    "CONTAINER_RESTART_RULES",
    "DEFAULT_EVICTION_HARD",
    "DEFAULT_ROOT_DIR",
    "ENV_FILES",
    "EXTEND_WEBSOCKETS_TO_KUBELET",
    "FLAGS",
    "GATES",
    "GATE_SUPPORT",
    "HOSTNAME_OVERRIDE",
    "IMPLEMENTED",
    "INSECURE_CIPHER_SUITES",
    "IN_PLACE_POD_VERTICAL_SCALING",
    "KUBELET_CRASH_LOOP_BACK_OFF_MAX",
    "KUBELET_REGISTRATION_GET_ON_EXISTS_ONLY",
    "NODE_DECLARED_FEATURES",
    "NOT_IMPLEMENTED",
    "OPENSSL_CIPHERS",
    "PARTIAL",
    "POD_LEVEL_RESOURCES",
    "POD_READY_TO_START_CONTAINERS_CONDITION",
    "REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY",
    "RESTART_ALL_CONTAINERS",
    "SETTINGS",
    "SHUTDOWN_BY_POD_PRIORITY",
    "TLS_CURVES",
    "USER_NAMESPACES_SUPPORT",
    "ConfigError",
    "CrashLoopBackOffConfig",
    "FeatureGates",
    "FlagSpec",
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
    "Support",
    "Taint",
    "TracingConfiguration",
    "VModuleItem",
    "build_options",
    "build_parser",
    "encode",
    "features",
    "format_duration",
    "load_config_file",
    "parse_config",
    "parse_duration",
    "parse_duration_ns",
    "parse_flags",
    "resolve",
    "shown_default",
    "support_key",
    "validate",
]
