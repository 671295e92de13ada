"""DNS-1123 labels and subdomains and qualified names as the API defines them, with
upstream's messages.

One place for the rules behind ``IsDNS1123Label``, ``IsDNS1123Subdomain`` and
``IsQualifiedName``: pod
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
    "QUALIFIED_NAME_FMT",
    "QUALIFIED_NAME_MSG",
    "QUALIFIED_NAME_RE",
    "SUBDOMAIN_FMT",
    "SUBDOMAIN_MAX_LENGTH",
    "SUBDOMAIN_MSG",
    "SUBDOMAIN_RE",
    "is_qualified_name",
    "label_errors",
    "qualified_name_errors",
    "subdomain_errors",
]

LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
SUBDOMAIN_FMT = rf"{LABEL_FMT}(\.{LABEL_FMT})*"
LABEL_MAX_LENGTH = 63
SUBDOMAIN_MAX_LENGTH = 253

LABEL_RE = re.compile(LABEL_FMT)
SUBDOMAIN_RE = re.compile(SUBDOMAIN_FMT)

QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_MAX_LENGTH = 63
QUALIFIED_NAME_RE = re.compile(QUALIFIED_NAME_FMT)
QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    f"for validation is '{QUALIFIED_NAME_FMT}')"
)

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


def qualified_name_errors(value: str) -> list[str]:
    """Why ``value`` is no qualified name (``[prefix/]name``: the name at most 63
    characters of ``[A-Za-z0-9_.-]``, alphanumeric at both ends, the prefix a DNS-1123
    subdomain); [] when it is one."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend(f"prefix part {e}" for e in subdomain_errors(parts[0]))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append(f"name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} characters")
    if QUALIFIED_NAME_RE.fullmatch(name) is None:
        errs.append(f"name part {QUALIFIED_NAME_MSG}")
    return errs


def is_qualified_name(value: str) -> bool:
    return not qualified_name_errors(value)
