"""Image pull credentials: docker config files, the keyring, pull secrets, pull records."""

from .dockercfg import DockerConfigEntry, DockerConfigError, parse_dockercfg, parse_dockerconfigjson
from .keyring import Keyring, repository_of, urls_match
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
    "DockerConfigEntry",
    "DockerConfigError",
    "Keyring",
    "MalformedPullSecret",
    "PullCredential",
    "PullSecret",
    "SecretSource",
    "SecretUnavailable",
    "keyring_from_secrets",
    "parse_dockercfg",
    "parse_dockerconfigjson",
    "pull_secret_names",
    "redact",
    "repository_of",
    "urls_match",
]
