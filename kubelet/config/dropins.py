"""``--config-dir``: KubeletConfiguration drop-ins merged over the ``--config`` file.

As upstream: every ``*.conf`` file under the directory (walked in lexical order, into
subdirectories as they come) is a KubeletConfiguration of its own (apiVersion and kind
checked, unknown fields refused, naming the file), merged over the configuration so far
as a JSON merge patch (RFC 7386: objects merged key by key, lists and scalars replaced,
``null`` removes a key). The base is the loaded ``--config`` file with its defaults, or
the flag defaults without one; flags are applied after, so they still win.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from kubelet.boundedio import InputRefused, read_regular_file
from kubelet.errors import ConfigError, Problem

from .document import parse_document
from .kubeletconfig import KubeletConfiguration
from .loader import MAX_CONFIG_BYTES, RELATIVE_TO_FILE, LoadedConfig, parse_config
from .wire import decode, encode

DROPIN_SUFFIX = ".conf"
MAX_DROPINS = 1000
"""Most drop-in files read (a node has a handful); more is refused, not read forever."""


def merge_dropins(
    base: LoadedConfig | None, default: KubeletConfiguration, directory: str
) -> LoadedConfig:
    """The configuration with every drop-in of ``directory`` merged over it, in order."""
    merged: dict[str, Any] = encode(base.config if base is not None else default)
    present = set(base.present) if base is not None else set()
    ignored = list(base.ignored) if base is not None else []
    unmodelled = dict(base.unmodelled) if base is not None else {}
    for path in dropin_files(directory):
        text = _read(path)
        loaded = parse_config(text, path)  # checks the file on its own, naming it
        present |= loaded.present
        ignored += [key for key in loaded.ignored if key not in ignored]
        unmodelled.update(loaded.unmodelled)
        merged = merge_patch(merged, _patch(text, path))
    decoded = decode(KubeletConfiguration, merged)
    if decoded.problems:
        raise ConfigError(*(Problem(directory, p, m) for p, m in decoded.problems))
    return LoadedConfig(
        path=base.path if base is not None else directory,
        config=decoded.value,
        present=frozenset(present),
        ignored=tuple(ignored),
        unmodelled=unmodelled,
    )


def dropin_files(directory: str) -> list[str]:
    """The ``*.conf`` files under ``directory`` in upstream's order (filepath.WalkDir)."""
    try:
        files = []
        for path in _walk(directory):
            files.append(path)
            if len(files) > MAX_DROPINS:
                raise ConfigError.single(directory, "", f"more than {MAX_DROPINS} drop-in files")
        return files
    except OSError as exc:
        raise ConfigError.single(
            directory, "", f"cannot read the drop-in directory: {exc.strerror}"
        ) from exc


def _walk(directory: str) -> Iterator[str]:
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(entry.path)
        elif entry.name.endswith(DROPIN_SUFFIX) and len(entry.name) > len(DROPIN_SUFFIX):
            yield entry.path


def _read(path: str) -> str:
    try:
        return read_regular_file(path, MAX_CONFIG_BYTES).decode("utf-8")
    except InputRefused as exc:
        raise ConfigError.single(path, "", f"cannot read the drop-in file: {exc}") from exc
    except OSError as exc:
        raise ConfigError.single(path, "", f"cannot read the drop-in file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError.single(path, "", "the drop-in file is not UTF-8 text") from exc


def _patch(text: str, path: str) -> dict[str, Any]:
    """The drop-in as a merge patch: its fields as written, relative paths made absolute
    against its own directory (as ``--config``'s are against the config file's)."""
    data = parse_document(text, path)
    patch = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
    base = os.path.dirname(os.path.abspath(path))
    for wire_path in RELATIVE_TO_FILE:
        holder: Any = patch
        for name in wire_path[:-1]:
            holder = holder.get(name) if isinstance(holder, Mapping) else None
        value = holder.get(wire_path[-1]) if isinstance(holder, dict) else None
        if isinstance(value, str) and value and not os.path.isabs(value):
            holder[wire_path[-1]] = os.path.join(base, value)
    return patch


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what upstream's jsonpatch.MergePatch does)."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
