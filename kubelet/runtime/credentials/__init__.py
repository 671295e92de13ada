"""Image pull credentials: docker config files, the keyring, pull secrets, pull records.

The credential provider plugins (``PluginKeyring``, ``PluginMetrics``,
``load_provider_config``) load on first use (``__getattr__``): only a kubelet given
``--image-credential-provider-config`` uses them.
"""

from typing import TYPE_CHECKING

from kubelet.lazyinit import lazy_names as _lazy_names

from .apisecrets import ApiPullSecrets
from .dockercfg import DockerConfigEntry, DockerConfigError, parse_dockercfg, parse_dockerconfigjson
from .keyring import Keyring, repository_of, urls_match
from .node import NodeCredentials
from .pullrecords import PullRecords, pull_records
from .secrets import (
    DOCKERCFG,
    DOCKERCFG_KEY,
    DOCKERCONFIGJSON,
    DOCKERCONFIGJSON_KEY,
    MalformedPullSecret,
    PullCredential,
    PullSecret,
    SecretSource,
    SecretUnavailable,
    keyring_from_secrets,
    pull_secret_names,
    redact,
)

__all__ = [
    "DOCKERCFG",
    "DOCKERCFG_KEY",
    "DOCKERCONFIGJSON",
    "DOCKERCONFIGJSON_KEY",
    "ApiPullSecrets",
    "DockerConfigEntry",
    "DockerConfigError",
    "Keyring",
    "MalformedPullSecret",
    "NodeCredentials",
    "PluginKeyring",
    "PluginMetrics",
    "PullCredential",
    "PullRecords",
    "PullSecret",
    "SecretSource",
    "SecretUnavailable",
    "keyring_from_secrets",
    "load_provider_config",
    "parse_dockercfg",
    "parse_dockerconfigjson",
    "pull_records",
    "pull_secret_names",
    "redact",
    "repository_of",
    "urls_match",
]

if TYPE_CHECKING:
    from .plugins import PluginKeyring, PluginMetrics, load_provider_config

_LAZY = {
    "PluginKeyring": "plugins",
    "PluginMetrics": "plugins",
    "load_provider_config": "plugins",
}
"""name -> the module that defines it, imported on first use (``__getattr__``)"""


__getattr__ = _lazy_names(__name__, _LAZY, globals())
