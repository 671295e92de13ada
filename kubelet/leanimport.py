"""The ``kubelet`` command loads its own modules without their docstrings.

The docstrings are written for the reader of the source; the kubelet never reads its own
at run time, yet each one is a string object alive for the whole process: 0.8 MiB of a
standalone kubelet's 58 (its 359 modules loaded with and without them). Letting go of
them after the import gives nothing back until the heap is trimmed, and then 0.5 MiB:
the strings sit in the interpreter's memory pools between objects that stay. So they
are never kept: the command puts a finder in front of the import system (``install``)
that compiles ``kubelet`` modules as usual and takes the docstrings out of the code
(which costs a tenth of the compiling), and caches that code beside the usual bytecode
(``__pycache__/<module>.cpython-3XX.opt-nodoc2.pyc``), from which they are never made at
all. An interpreter importing the package normally (the tests, a tool) never meets that
cache, and the other way round.

Nothing else changes: asserts and line numbers stay (a traceback reads the source file),
other packages load as they always do, and ``python -OO`` (which would also take every
library's asserts and docstrings) is not needed. Where no such cache is up to date and
none can be written (``PYTHONDONTWRITEBYTECODE``, a read-only tree), a module with usual
bytecode loads from it (cheaper than compiling it at every start); one without any is
compiled from its source at every start either way, and so without its docstrings.
"""

from __future__ import annotations

import dis
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType
from typing import Any

__all__ = ["STRIPPING", "TAG", "compile_package", "install", "strip_docstrings"]

STRIPPING = 2
"""The version of what ``strip_docstrings`` does: a change to it leaves every cache of
the one before stale, whether or not the module's source changed."""

TAG = f"nodoc{STRIPPING}" + (f"o{sys.flags.optimize}" if sys.flags.optimize else "")
"""The bytecode cache's optimization tag for code compiled without docstrings (with the
interpreter's ``-O`` level in it: code without asserts never serves a run with them)."""

_LOAD_CONST = dis.opmap["LOAD_CONST"]
_CONST_USES = tuple(dis.opmap[name] for name in ("LOAD_CONST", "RETURN_CONST") if name in dis.opmap)
_STORE_NAME = dis.opmap["STORE_NAME"]
_EXTENDED_ARG = dis.EXTENDED_ARG
_OPTIMIZED = inspect.CO_OPTIMIZED
"""A function's code (module and class bodies are not optimized)."""
_HAS_DOCSTRING = getattr(inspect, "CO_HAS_DOCSTRING", 0)
"""Set on a function that has a docstring, where the first constant may be something else."""
_PROLOGUE = 40
"""Bytes of a module's or class body's code within which it stores its ``__doc__``."""
_BEFORE_THE_DOCSTRING = frozenset({"__module__", "__qualname__", "__firstlineno__"})
"""What a class body stores before its docstring."""


def strip_docstrings(code: CodeType) -> CodeType:
    """``code`` (a module's) with the docstrings of its module, classes and functions
    replaced by None, at any depth.

    Compiled code holds a function's docstring as its first constant (None when it has
    none), and a module or class body begins by storing a constant as ``__doc__``. A
    docstring whose constant the code also loads elsewhere (the same text written again
    as a literal) stays: it is alive either way.
    """
    consts = list(code.co_consts)
    changed = False
    for i, const in enumerate(consts):
        if isinstance(const, CodeType) and (inner := strip_docstrings(const)) is not const:
            consts[i], changed = inner, True
    doc = _docstring_index(code)
    if doc is not None:
        consts[doc], changed = None, True
    return code.replace(co_consts=tuple(consts)) if changed else code


def _docstring_index(code: CodeType) -> int | None:
    """Where the docstring of ``code`` itself is among its constants (None: it has none,
    or the constant has another use)."""
    consts, raw = code.co_consts, code.co_code
    if code.co_flags & _OPTIMIZED:  # a function; comprehensions and lambdas have none
        if code.co_name.startswith("<") or not consts or not isinstance(consts[0], str):
            return None
        if _HAS_DOCSTRING and not code.co_flags & _HAS_DOCSTRING:
            return None
        return 0 if _loads(raw, 0) == 0 else None
    for at in range(0, min(len(raw) - 2, _PROLOGUE), 2):
        if raw[at] != _STORE_NAME:
            continue
        name = code.co_names[raw[at + 1]]
        if name != "__doc__":
            if name in _BEFORE_THE_DOCSTRING:
                continue
            return None  # a statement came first: ``__doc__ = ...`` later is code's own
        if at < 2 or raw[at - 2] != _LOAD_CONST or (at >= 4 and raw[at - 4] == _EXTENDED_ARG):
            return None
        index = raw[at - 1]
        return index if isinstance(consts[index], str) and _loads(raw, index) == 1 else None
    return None


def _loads(raw: bytes, index: int) -> int:
    """How many instructions of the bytecode ``raw`` use constant ``index`` (< 256)."""
    count = 0
    for opcode in _CONST_USES:
        pattern = bytes((opcode, index))
        at = raw.find(pattern)
        while at != -1:
            if at % 2 == 0 and (at == 0 or raw[at - 2] != _EXTENDED_ARG):
                count += 1
            at = raw.find(pattern, at + 1)
    return count


class _Loader(importlib.machinery.SourceFileLoader):
    """A source loader whose code has no docstrings and whose bytecode cache is its own."""

    def source_to_code(  # type: ignore[override]
        self, data: Any, path: Any, *, _optimize: int = -1
    ) -> CodeType:
        code = compile(data, path, "exec", dont_inherit=True, optimize=_optimize)
        return strip_docstrings(code)

    def _cache(self, path: str) -> str:
        """The usual bytecode path of this module becomes ours; any other stays."""
        if path == importlib.util.cache_from_source(self.path):
            return importlib.util.cache_from_source(self.path, optimization=TAG)
        return path

    def get_data(self, path: str) -> bytes:
        return super().get_data(self._cache(path))

    def set_data(self, path: str, data: Any, *, _mode: int = 0o666) -> None:
        super().set_data(self._cache(path), data, _mode=_mode)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``package``'s modules as the path finder does, then loads them with ``_Loader``."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package and not fullname.startswith(self.package + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if spec is None or type(loader) is not importlib.machinery.SourceFileLoader:
            return spec
        cached = importlib.util.cache_from_source(loader.path, optimization=TAG)
        if (
            not _writable(cached)  # writable: no header read
            and not _fresh(_header(cached), loader.path)
            and _usable(_header(importlib.util.cache_from_source(loader.path)), loader.path)
        ):
            return spec  # loading the usual bytecode beats compiling at every start
        spec.loader = _Loader(loader.name, loader.path)
        spec.cached = cached
        return spec


def _header(cached: str) -> bytes:
    """The first 16 bytes of a bytecode cache file (magic, flags, then a timestamp-based
    file's source mtime and size); empty when it cannot be read."""
    try:
        with open(cached, "rb") as fh:
            return fh.read(16)
    except OSError:
        return b""


def _ours(header: bytes) -> bool:
    """The header of bytecode of this interpreter."""
    return len(header) == 16 and header[:4] == importlib.util.MAGIC_NUMBER


def _fresh(header: bytes, source: str) -> bool:
    """``header`` is a timestamp-based cache's for ``source`` as it is now."""
    if not _ours(header) or int.from_bytes(header[4:8], "little") != 0:
        return False
    try:
        stat = os.stat(source)
    except OSError:
        return False
    return (
        int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    )


def _usable(header: bytes, source: str) -> bool:
    """``header`` is of bytecode the usual loader would take without compiling: fresh,
    or hash-based (which that loader checks itself)."""
    return _ours(header) and (int.from_bytes(header[4:8], "little") != 0 or _fresh(header, source))


def _writable(cached: str) -> bool:
    """A cache file can be written there now (bytecode writes allowed, and the cache
    folder, or the source folder that would hold it, writable)."""
    if sys.dont_write_bytecode:
        return False
    folder = os.path.dirname(cached)
    if not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    return os.access(folder, os.W_OK)


def install(package: str = "kubelet") -> bool:
    """Put the finder first for ``package`` (once); its modules imported from now on come
    without docstrings. True when it was put there now."""
    if any(isinstance(f, _Finder) and f.package == package for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _Finder(package))
    return True


def compile_package(package: str = "kubelet") -> int:
    """Write the docstring-free bytecode of every module of ``package`` now (set-up runs
    it, so a kubelet started where bytecode is not written still finds it). Up-to-date
    caches are only read. How many modules there are."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package} is not a package")
    root = spec.submodule_search_locations[0]
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    count = 0
    try:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            parts = os.path.relpath(folder, root).split(os.sep)
            prefix = ".".join([package, *(p for p in parts if p != ".")])
            for name in sorted(f for f in files if f.endswith(".py")):
                stem = name[: -len(".py")]
                fullname = prefix if stem == "__init__" else f"{prefix}.{stem}"
                _Loader(fullname, os.path.join(folder, name)).get_code(fullname)
                count += 1
    finally:
        sys.dont_write_bytecode = writes
    return count


if __name__ == "__main__":
    print(f"{compile_package()} modules of kubelet compiled without docstrings")
