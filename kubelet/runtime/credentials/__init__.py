"""Image pull credentials: docker config files, the keyring, pull secrets, pull records."""

from .apisecrets import ApiPullSecrets
from .dockercfg import DockerConfigEntry, DockerConfigError, parse_dockercfg, parse_dockerconfigjson
from .keyring import Keyring, repository_of, urls_match
from .node import NodeCredentials
from .plugins import PluginKeyring, PluginMetrics, load_provider_config
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
