"""DNS-1123 labels and subdomains as the API defines them, with upstream's messages.

One place for the rules behind ``IsDNS1123Label`` and ``IsDNS1123Subdomain``: pod
validation prints the messages as field errors, and the kubelet prints them when it
refuses a pod's hostname, as upstream does in both places.
"""

from __future__ import annotations

import re

__all__ = [
    "LABEL_FMT",
    "LABEL_MAX_LENGTH",
    "LABEL_MSG",
    "LABEL_RE",
    "SUBDOMAIN_FMT",
    "SUBDOMAIN_MAX_LENGTH",
    "SUBDOMAIN_MSG",
    "SUBDOMAIN_RE",
    "label_errors",
    "subdomain_errors",
]

LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
SUBDOMAIN_FMT = rf"{LABEL_FMT}(\.{LABEL_FMT})*"
LABEL_MAX_LENGTH = 63
SUBDOMAIN_MAX_LENGTH = 253

LABEL_RE = re.compile(LABEL_FMT)
SUBDOMAIN_RE = re.compile(SUBDOMAIN_FMT)

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    f"regex used for validation is '{LABEL_FMT}')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    f"regex used for validation is '{SUBDOMAIN_FMT}')"
)


def _errors(value: str, limit: int, regex: re.Pattern[str], message: str) -> list[str]:
    errors = []
    if len(value) > limit:
        errors.append(f"must be no more than {limit} characters")
    if not regex.fullmatch(value):
        errors.append(message)
    return errors


def label_errors(value: str) -> list[str]:
    """Why ``value`` is no DNS-1123 label (at most 63 characters); [] when it is one."""
    return _errors(value, LABEL_MAX_LENGTH, LABEL_RE, LABEL_MSG)


def subdomain_errors(value: str) -> list[str]:
    """Why ``value`` is no DNS-1123 subdomain (dot-separated labels, at most 253
    characters); [] when it is one."""
    return _errors(value, SUBDOMAIN_MAX_LENGTH, SUBDOMAIN_RE, SUBDOMAIN_MSG)
