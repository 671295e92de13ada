"""Writing a volume's files atomically, the way upstream's AtomicWriter does.

A volume directory filled from the API (configMap, secret, downwardAPI, projected)
looks like this::

    <target>/..2024_01_02_15_04_05.123456789/   the files of the current payload
    <target>/..data -> ..2024_01_02_15_04_05.123456789
    <target>/key    -> ..data/key                one symlink per top-level entry

An update writes a whole new timestamped directory, then swaps ``..data`` to it in one
``rename`` (a symlink made under a temporary name first), so a container reading the
volume sees either the old files or the new ones, never a mix. The old directory and
top-level entries no longer in the payload are removed afterwards. Nothing is written
when every file already has the wanted content and mode.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping

from .hostpath import VolumeError

DATA_DIR = "..data"
_DATA_DIR_TMP = "..data_tmp"
_MAX_PATH = 4096
_MAX_SEGMENT = 255

Payload = Mapping[str, tuple[bytes, int]]
"""Relative path → (content, permission bits)."""


def validate_path(path: str) -> None:
    """Upstream's checks on a payload path (relative, no ``..``, bounded lengths)."""
    if not path:
        raise VolumeError("invalid path: must not be empty")
    if len(path) > _MAX_PATH:
        raise VolumeError(f"invalid path: must be less than or equal to {_MAX_PATH} characters")
    if os.path.isabs(path):
        raise VolumeError(f"invalid path: must be relative path: {path}")
    segments = path.split("/")
    if any(len(segment) > _MAX_SEGMENT for segment in segments):
        raise VolumeError(f"invalid path: must not contain a segment longer than {_MAX_SEGMENT}")
    if ".." in segments:
        raise VolumeError(f"invalid path: must not contain '..': {path}")
    if path.startswith(".."):
        raise VolumeError(f"invalid path: must not start with '..': {path}")


def _clean(payload: Payload) -> dict[str, tuple[bytes, int]]:
    cleaned: dict[str, tuple[bytes, int]] = {}
    for path, (content, mode) in payload.items():
        validate_path(path)
        cleaned[os.path.normpath(path)] = (bytes(content), mode & 0o7777)
    return cleaned


def _old_paths(ts_dir: str) -> set[str]:
    """Every file and directory under the current timestamped directory, relative."""
    found: set[str] = set()
    if not ts_dir or not os.path.isdir(ts_dir):
        return found
    for dirpath, dirnames, filenames in os.walk(ts_dir):
        rel = os.path.relpath(dirpath, ts_dir)
        for name in (*dirnames, *filenames):
            found.add(name if rel == "." else os.path.join(rel, name))
    return found


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _unchanged(target_dir: str, payload: Mapping[str, tuple[bytes, int]]) -> bool:
    for path, (content, mode) in payload.items():
        visible = os.path.join(target_dir, path)
        try:
            info = os.stat(visible)
            if not os.path.isfile(visible) or info.st_mode & 0o7777 != mode:
                return False
            with open(visible, "rb") as fh:
                if fh.read() != content:
                    return False
        except OSError:
            return False
    return True


def _new_ts_dir(target_dir: str) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y_%m_%d_%H_%M_%S.")
    path = tempfile.mkdtemp(prefix=".." + stamp, dir=target_dir)
    os.chmod(path, 0o755)
    return path


def _write_files(
    ts_dir: str, payload: Mapping[str, tuple[bytes, int]], owners: Mapping[str, int]
) -> None:
    for path, (content, mode) in payload.items():
        full = os.path.join(ts_dir, path)
        os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
        with open(full, "wb") as fh:
            fh.write(content)
        os.chmod(full, mode)
        if path in owners:
            os.chown(full, owners[path], -1)


def _link_top_level(target_dir: str, files: Mapping[str, tuple[bytes, int]]) -> None:
    """``<target>/<name> -> ..data/<name>`` for every top-level name of the payload."""
    for top in sorted({path.split("/")[0] for path in files}):
        visible = os.path.join(target_dir, top)
        if not os.path.lexists(visible):
            os.symlink(os.path.join(DATA_DIR, top), visible)


def write_atomic(
    target_dir: str,
    payload: Payload,
    *,
    owners: Mapping[str, int] | None = None,
    set_perms: Callable[[str], None] | None = None,
) -> bool:
    """Make ``target_dir`` hold exactly ``payload``; True when anything was written.

    ``owners``: relative path → uid for files that belong to a user (a projected token
    with the pod's single runAsUser). ``set_perms(target_dir)`` runs after a new payload
    is written and before it becomes visible (fsGroup ownership), as upstream's writer.

    Raises ``VolumeError`` for an invalid path in the payload (nothing is written then)
    and when the files cannot be written.
    """
    files = _clean(payload)
    owned = {os.path.normpath(path): uid for path, uid in (owners or {}).items()}
    try:
        os.makedirs(target_dir, mode=0o755, exist_ok=True)
        data_link = os.path.join(target_dir, DATA_DIR)
        old_ts_name = os.readlink(data_link) if os.path.islink(data_link) else ""
        old_ts_dir = os.path.join(target_dir, old_ts_name) if old_ts_name else ""

        keep = set(files)
        for path in files:
            keep.update(_parents(path))
        to_remove = _old_paths(old_ts_dir) - keep

        written = False
        if (
            not old_ts_dir
            or not os.path.isdir(old_ts_dir)
            or to_remove
            or not _unchanged(target_dir, files)
        ):
            new_ts_dir = _new_ts_dir(target_dir)
            try:
                _write_files(new_ts_dir, files, owned)
                _link_top_level(target_dir, files)
                if set_perms is not None:
                    set_perms(target_dir)
                tmp_link = os.path.join(target_dir, _DATA_DIR_TMP)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp_link)
                os.symlink(os.path.basename(new_ts_dir), tmp_link)
                os.rename(tmp_link, data_link)
            except BaseException:
                shutil.rmtree(new_ts_dir, ignore_errors=True)
                raise
            written = True
            if old_ts_dir and os.path.realpath(old_ts_dir) != os.path.realpath(new_ts_dir):
                shutil.rmtree(old_ts_dir, ignore_errors=True)

        _link_top_level(target_dir, files)

        for path in sorted(to_remove):
            if "/" in path:  # only the top-level symlinks live in the volume root
                continue
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(target_dir, path))
    except OSError as err:
        raise VolumeError(f"write volume files in {target_dir}: {err}") from err
    return written
