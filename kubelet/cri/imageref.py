"""Docker-style image references: the normalisation containerd and the kubelet share."""

from __future__ import annotations

import re

DEFAULT_REGISTRY = "docker.io"
DEFAULT_TAG = "latest"
MAX_REFERENCE_LENGTH = 1024
"""Longer than any valid reference (a name of at most 255 characters, a tag of 128, a
digest), so refused as invalid without being parsed."""

_VALID = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)


def split_reference(ref: str) -> tuple[str, str, str, str]:
    """(registry, repository, tag, digest) of ``ref``; ValueError if it is invalid.

    ``busybox`` → (docker.io, library/busybox, "", ""). Tag and digest are "" when absent.
    """
    if len(ref) > MAX_REFERENCE_LENGTH:  # before the regexes: 8 MiB took them 4 s
        raise ValueError(f"invalid reference format: {len(ref)} characters is too long")
    if not ref or ref != ref.strip() or any(c.isspace() for c in ref):
        raise ValueError(f"invalid reference format: {ref!r}")
    name, _, digest = ref.partition("@")
    tag = ""
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, _, tag = name.rpartition(":")
        if not re.fullmatch(r"[\w][\w.-]{0,127}", tag):
            raise ValueError(f"invalid reference format: {ref!r}")
    if digest and not re.fullmatch(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}", digest):
        raise ValueError(f"invalid reference format: {ref!r}")
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        registry, repo = first, rest
    else:
        registry, repo = DEFAULT_REGISTRY, name
    if registry == DEFAULT_REGISTRY and "/" not in repo:
        repo = f"library/{repo}"
    if not _VALID.match(repo):
        raise ValueError(f"invalid reference format: {ref!r}")
    return registry, repo, tag, digest


def normalize(ref: str) -> str:
    """Fully qualified form: ``busybox`` → ``docker.io/library/busybox:latest``."""
    registry, repo, tag, digest = split_reference(ref)
    if digest:
        return f"{registry}/{repo}{':' + tag if tag else ''}@{digest}"
    return f"{registry}/{repo}:{tag or DEFAULT_TAG}"


