"""The env files of ``fileKeyRef``: upstream's format, parsed without touching a disk.

Since 1.35 upstream's ``ParseEnv`` reads a strict subset of POSIX shell, so that a file
means to the kubelet what ``set -a; . file`` would mean to bash:

* lines are split on ``\\n`` (a trailing ``\\r`` is dropped, as Go's line scanner does);
  leading blanks and tabs are ignored, and so are blank lines and lines starting ``#``;
* each other line is ``NAME='value'``: nothing between the name and ``=``; the value in
  single quotes, taken literally (no escapes, no expansion) and allowed to span lines;
  after the closing quote only blanks and an optional ``# comment``;
* ``NAME= 'value'`` (a blank after ``=``) assigns the empty string, as bash does;
* the first assignment of the key wins and nothing after it is read; a key never
  assigned is the empty string (the caller tells "missing" from "empty" no better than
  upstream, which treats both as not found).

Everything else is an ``EnvFileFormatError`` with upstream's message (which names the
line); the user sees only "couldn't parse env file", as upstream, since the file may
hold secrets. A line of 64 KiB or more is an error too (Go's scanner limit), and so is
a file over ``MAX_ENV_FILE_BYTES``, the KEP's 64 KiB.
"""

from __future__ import annotations

__all__ = [
    "MAX_ENV_FILE_BYTES",
    "UNPARSABLE_ENV_FILE",
    "EnvFileFormatError",
    "env_file_value",
    "file_key_path_error",
]

MAX_ENV_FILE_BYTES = 64 * 1024
"""The largest env file read (KEP-3721's size limit); a larger one cannot be parsed."""

MAX_LINE_BYTES = 64 * 1024
"""Go's ``bufio.MaxScanTokenSize``: upstream's scanner fails on a line this long."""

UNPARSABLE_ENV_FILE = "couldn't parse env file"
"""Upstream's message for any file it cannot read or parse (the details go to the log)."""

_BLANKS = b" \t"
_QUOTE = b"'"


class EnvFileFormatError(ValueError):
    """The file is not a valid env file; the message is upstream's, for the log."""


def _lines(data: bytes) -> list[bytes]:
    """Go's ``bufio.ScanLines``: no empty last line, a ``\\r`` before ``\\n`` dropped."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for line in lines:
        if len(line) >= MAX_LINE_BYTES:
            raise EnvFileFormatError("bufio.Scanner: token too long")
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def _bad(number: int, why: str) -> EnvFileFormatError:
    return EnvFileFormatError(f"invalid environment variable format at line {number}: {why}")


def _quoted(lines: list[bytes], index: int, rest: bytes) -> tuple[bytes, int]:
    """The single-quoted value starting in ``rest`` (line ``index``), and the index of
    the line it ends on; raises when the quote never closes or text follows it."""
    start = index
    parts: list[bytes] = []
    while True:
        closing = rest.find(_QUOTE)
        if closing != -1:
            parts.append(rest[:closing])
            after = rest[closing + 1 :].lstrip(_BLANKS)
            if after and not after.startswith(b"#"):
                raise _bad(index + 1, "unexpected content after closing quote")
            return b"".join(parts), index
        parts.append(rest + b"\n")
        index += 1
        if index >= len(lines):
            raise EnvFileFormatError(
                "invalid environment variable format starting at line "
                f"{start + 1}: unclosed single quote"
            )
        rest = lines[index]


def env_file_value(data: bytes, key: str) -> str:
    """The value ``key`` is first assigned in the env file ``data``; "" when it is not.

    Raises ``EnvFileFormatError`` for a file upstream refuses (only what comes before
    the key's assignment is checked, as upstream stops reading there). Invalid UTF-8 is
    replaced, as a Secret's value is (a CRI string cannot carry it).
    """
    if len(data) > MAX_ENV_FILE_BYTES:
        raise EnvFileFormatError(f"env file larger than {MAX_ENV_FILE_BYTES} bytes")
    wanted = key.encode("utf-8")
    lines = _lines(data)
    index = 0
    while index < len(lines):
        line = lines[index].lstrip(_BLANKS)
        number = index + 1
        index += 1
        if not line or line.startswith(b"#"):
            continue
        name, eq, value = line.partition(b"=")
        if not eq:
            raise _bad(number, "missing '='")
        if not name.rstrip(_BLANKS):
            raise _bad(number, "empty variable name")
        if name != name.rstrip(_BLANKS):
            raise _bad(number, "whitespace before '=' is not allowed")
        if value != value.lstrip(_BLANKS):
            if name == wanted:  # bash: NAME= 'x' assigns "" and runs 'x'
                return ""
            continue
        if not value.startswith(_QUOTE):
            raise _bad(number, "value must be enclosed in single quotes")
        text, last = _quoted(lines, number - 1, value[1:])
        index = last + 1
        if name == wanted:
            return text.decode("utf-8", errors="replace")
    return ""


def file_key_path_error(path: str) -> str | None:
    """Why a ``fileKeyRef.path`` may not be used, or None (API validation refuses the
    same for API pods; a static pod only meets it here)."""
    if path.startswith("/"):
        return f'invalid path "{path}" in FileKeyRef: must be a relative path'
    if ".." in path.split("/"):
        return f"invalid path \"{path}\" in FileKeyRef: must not contain '..'"
    return None
