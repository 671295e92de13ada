"""The kubelet's logging: klog text or JSON lines, ``-v`` levels, structured pod fields.

``setup_logging(options.config.logging)`` once at start-up; modules log through the
stdlib (``logging.getLogger(__name__)``) or, for structured fields, ``get_logger``.
"""

from .fields import (
    ObjectRef,
    StructuredLogger,
    get_logger,
    kobj,
    log_fields,
    pod_fields,
    set_pod_fields,
    verbosity_level,
)
from .klog import KlogJSONFormatter, KlogTextFormatter
from .setup import flush_handlers, set_verbosity, setup_logging

__all__ = [
    "KlogJSONFormatter",
    "KlogTextFormatter",
    "ObjectRef",
    "StructuredLogger",
    "flush_handlers",
    "get_logger",
    "kobj",
    "log_fields",
    "pod_fields",
    "set_pod_fields",
    "set_verbosity",
    "setup_logging",
    "verbosity_level",
]
