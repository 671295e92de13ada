"""A container's environment: variables, service links, ``$(VAR)``, DNS and /etc/hosts.

What the package offers the pod driver and the pod lifecycle: ``resolve_env`` and
``resolve_command`` (a container's variables and its command with ``$(VAR)`` expanded,
``expand_env``/``expand_all`` under an ``ExpansionBudget``), ``EnvLookup``/``ApiEnvLookup``
(ConfigMaps and Secrets behind env and envFrom), ``ServiceStore`` and ``run_services``
(the service links), ``DnsSettings`` (what the sandboxes' resolv.conf and hostname are
made from) and the kubelet-managed ``/etc/hosts`` (``hosts_file_content``, ``write_hosts_file``,
``hosts_mount``), with the reasons and errors users see when one of them fails.
"""

from .dns import DnsSettings, DNSWarning
from .envfile import MAX_ENV_FILE_BYTES, UNPARSABLE_ENV_FILE
from .expand import ExpansionBudget, ExpansionTooLarge, expand_all, expand_env
from .hosts import (
    PodHostnameError,
    hosts_file_content,
    hosts_file_path,
    hosts_mount,
    kernel_hostname,
    should_mount_hosts_file,
    write_hosts_file,
)
from .lookup import ApiEnvLookup
from .services import ServiceStore, run_services
from .variables import (
    CREATE_CONTAINER_CONFIG_ERROR,
    INVALID_ENV_NAMES_REASON,
    EnvError,
    EnvLookup,
    EnvResult,
    needs_pod_ip,
    pod_field_value,
    resolve_command,
    resolve_env,
    resource_field_value,
)

__all__ = [
    "CREATE_CONTAINER_CONFIG_ERROR",
    "INVALID_ENV_NAMES_REASON",
    "MAX_ENV_FILE_BYTES",
    "UNPARSABLE_ENV_FILE",
    "ApiEnvLookup",
    "DNSWarning",
    "DnsSettings",
    "EnvError",
    "EnvLookup",
    "EnvResult",
    "ExpansionBudget",
    "ExpansionTooLarge",
    "PodHostnameError",
    "ServiceStore",
    "expand_all",
    "expand_env",
    "hosts_file_content",
    "hosts_file_path",
    "hosts_mount",
    "kernel_hostname",
    "needs_pod_ip",
    "pod_field_value",
    "resolve_command",
    "resolve_env",
    "resource_field_value",
    "run_services",
    "should_mount_hosts_file",
    "write_hosts_file",
]
