"""Which registry credentials apply to an image: upstream's docker keyring rules.

Restated from pkg/credentialprovider/keyring.go (Kubernetes 1.36):

* A key is read as a URL, ``https://`` assumed when it has no scheme. Its host (with
  port) and path form the index entry; a path of ``/v1/...`` or ``/v2/...`` loses that
  prefix and a path of ``/`` is dropped, so ``https://index.docker.io/v1/`` indexes as
  ``index.docker.io``. A key that is not a URL is skipped with a log line.
* The index is sorted in reverse lexical order, so a longer path under the same host
  (``quay.io/coreos``) comes before the bare host (``quay.io``).
* An image matches a key when both hosts have the same number of dot-separated labels,
  each image label matches the key's label as a glob (``*.example.com``,
  ``registry.*.io``), the ports are equal (none on both sides counts as equal), and the
  key's path is a string prefix of the image's path.
* Every matching key contributes its credentials, in index order. Only when none
  matches and the image lives on Docker Hub are the credentials under
  ``index.docker.io`` used.

The image is first reduced to its repository as upstream's image-name parser does:
``busybox:1.35`` → ``docker.io/library/busybox``, ``index.docker.io/x`` → ``docker.io/...``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Generic, TypeVar

from kubelet.cri import DEFAULT_REGISTRY, split_reference

from .dockercfg import safe_key

__all__ = [
    "DEFAULT_REGISTRY_HOST",
    "Keyring",
    "index_key",
    "is_default_registry_match",
    "repository_of",
    "urls_match",
]

log = logging.getLogger(__name__)

DEFAULT_REGISTRY_HOST = "index.docker.io"
_LEGACY_DEFAULT_DOMAIN = "index.docker.io"
_HOST_CHARS = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:\[\]<>\"%]*$")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def repository_of(image: str) -> str:
    """The repository an image is pulled from, tag and digest removed; ValueError if the
    reference is invalid."""
    registry, repo, _, _ = split_reference(image)
    if registry == _LEGACY_DEFAULT_DOMAIN:
        registry = DEFAULT_REGISTRY
        if "/" not in repo:
            repo = f"library/{repo}"
    return f"{registry}/{repo}"


def index_key(location: str) -> str | None:
    """The index entry a credential key stands for, None if it is not a URL."""
    value = location
    if not value.startswith(("https://", "http://")):
        value = "https://" + value
    parsed = _parse_url(value.partition("://")[2])
    if parsed is None:
        return None
    host, path = parsed
    if path.startswith(("/v2/", "/v1/")):
        path = path[3:]
    return host + path if path and path != "/" else host


def is_default_registry_match(image: str) -> bool:
    """True when ``image`` is pulled from Docker Hub, judged from its name alone."""
    first, sep, _ = image.partition("/")
    if not first:
        return False
    if not sep:
        return True
    if first in ("docker.io", "index.docker.io"):
        return True
    return "." not in first and ":" not in first


def urls_match(glob: str, target: str) -> bool:
    """Does ``target`` (a scheme-less URL) match the credential key ``glob``?"""
    glob_url, target_url = _parse_url(glob), _parse_url(target)
    if glob_url is None or target_url is None:
        return False
    glob_labels, glob_port = _split_host(glob_url[0])
    target_labels, target_port = _split_host(target_url[0])
    if glob_port != target_port or len(glob_labels) != len(target_labels):
        return False
    if not target_url[1].startswith(glob_url[1]):
        return False
    return all(_glob_match(g, t) for g, t in zip(glob_labels, target_labels, strict=True))


T = TypeVar("T")


class Keyring(Generic[T]):
    """Credentials indexed by registry key. ``add`` takes (key, credential) pairs;
    ``lookup`` returns every credential that applies to an image, best match first."""

    def __init__(self) -> None:
        self._creds: dict[str, list[T]] = {}
        self._index: list[str] = []

    def add(self, entries: Iterable[tuple[str, T]], *, origin: str = "") -> None:
        for location, credential in entries:
            key = index_key(location)
            if key is None:
                log.warning(
                    "entry %r in dockercfg%s is not a valid registry URL, ignoring",
                    safe_key(location),
                    f" of {origin}" if origin else "",
                )
                continue
            self._creds.setdefault(key, []).append(credential)
        self._index = sorted(self._creds, reverse=True)

    def __len__(self) -> int:
        return sum(len(v) for v in self._creds.values())

    def lookup(self, repository: str) -> list[T]:
        """``repository`` as ``repository_of`` gives it (``docker.io/library/busybox``)."""
        found: list[T] = []
        for key in self._index:
            if urls_match(key, repository):
                found.extend(self._creds[key])
        if not found and is_default_registry_match(repository):
            found.extend(self._creds.get(DEFAULT_REGISTRY_HOST, ()))
        return found


def _parse_url(text: str) -> tuple[str, str] | None:
    """(host with port, unescaped path) of ``https://`` + ``text``, None where Go's
    url.Parse would fail."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return None
    text = text.partition("#")[0].partition("?")[0]
    authority, slash, path = text.partition("/")
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        end = host.find("]")
        if end < 0 or not _valid_port(host[end + 1 :]):
            return None
    else:
        colon = host.rfind(":")
        if colon >= 0 and not _valid_port(host[colon:]):
            return None
    if not _HOST_CHARS.match(host) or _BAD_ESCAPE.search(host):
        return None
    path = slash + path
    if _BAD_ESCAPE.search(path):
        return None
    return _unescape(host), _unescape(path)


def _valid_port(port: str) -> bool:
    """Go's validOptionalPort: nothing, or a colon and digits (maybe none)."""
    return port == "" or (port[0] == ":" and all(c in "0123456789" for c in port[1:]))


def _unescape(text: str) -> str:
    if "%" not in text:
        return text
    raw = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)
    return raw.encode("latin-1", errors="replace").decode("utf-8", errors="replace")


def _split_host(host: str) -> tuple[list[str], str]:
    """Labels and port, as net.SplitHostPort (no port, or a malformed one: all host)."""
    name, port = host, ""
    if host.startswith("["):
        end = host.find("]")
        rest = host[end + 1 :]
        if rest.startswith(":") and ":" not in rest[1:]:
            name, port = host[1:end], rest[1:]
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
    return name.split("."), port


def _glob_match(pattern: str, name: str) -> bool:
    """Go's filepath.Match for one label: ``*``, ``?``, ``[...]`` (``^`` negates),
    ``\\`` escapes; a malformed pattern matches nothing."""
    regex = _glob_regex(pattern)
    return regex is not None and regex.fullmatch(name) is not None


def _glob_regex(pattern: str) -> re.Pattern[str] | None:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\":
            if i + 1 >= n:
                return None
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            parsed = _glob_class(pattern, i + 1)
            if parsed is None:
                return None
            text, i = parsed
            out.append(text)
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _glob_class(pattern: str, i: int) -> tuple[str, int] | None:
    """A ``[...]`` class starting after its ``[``: (regex, index after ``]``)."""
    n = len(pattern)
    negate = i < n and pattern[i] == "^"
    if negate:
        i += 1
    ranges: list[str] = []
    count = 0
    while True:
        if i >= n:
            return None
        if pattern[i] == "]" and count:
            i += 1
            break
        lo, i = _class_char(pattern, i)
        if lo is None:
            return None
        hi = lo
        if i < n and pattern[i] == "-":
            upper, i = _class_char(pattern, i + 1)
            if upper is None:
                return None
            hi = upper
        count += 1
        if lo <= hi:  # Go: a reversed range is not an error, it matches nothing
            ranges.append(f"{re.escape(lo)}-{re.escape(hi)}")
    if not ranges:
        return ("[^/]" if negate else "(?!)"), i
    body = "".join(ranges)
    return (f"[^{body}]" if negate else f"[{body}]"), i


def _class_char(pattern: str, i: int) -> tuple[str | None, int]:
    n = len(pattern)
    if i >= n or pattern[i] in "-]":
        return None, i
    if pattern[i] == "\\":
        i += 1
        if i >= n:
            return None, i
    return pattern[i], i + 1
