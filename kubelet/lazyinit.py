"""Loading on first use: a package face's lazy names (``lazy_names``), a library's
package ``__init__`` deferred until a name of the package itself is asked for
(``defer_package_init``), and a module a request needs imported in a worker thread
(``imported``).

prometheus_client's ``__init__`` imports every exposition path it offers (``http.server``,
``urllib.request``, ``wsgiref``, ``email``, the push gateway, ASGI): 58 modules and about
2.3 MiB of a standalone kubelet's 60 MiB, where the kubelet uses the registry, the metric
types and, only when ``/metrics`` is served, the text format. Deferring the ``__init__``
keeps the submodules as the library wrote them; the first ``prometheus_client.<name>``
that is not a submodule runs the real ``__init__`` once, so any other importer still gets
the whole package.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import trio


def defer_package_init(name: str) -> None:
    """Register ``name`` in ``sys.modules`` as a package whose ``__init__`` runs on first
    use of a name it defines. Does nothing when the package is already imported or is not
    an ordinary package on disk."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def first_use(attr: str) -> object:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if importlib.util.find_spec(f"{name}.{attr}") is not None:
            return importlib.import_module(f"{name}.{attr}")
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, attr)

    package.__dict__["__getattr__"] = first_use
    sys.modules[name] = package


def lazy_names(
    package: str, table: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], object]:
    """A face's module ``__getattr__``: ``table`` maps each lazy name to the submodule that
    defines it; the submodule is imported when the name is first read, and the value kept
    in the face's ``namespace`` so later reads never come here."""

    def first_read(name: str) -> object:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return first_read


async def imported(name: str) -> ModuleType:
    """Module ``name``, imported in a worker thread the first time: a server route that
    loads its handlers on first use (the stream ends, container logs, the metrics' text
    format: 15-150 ms of imports) must not hold the event loop meanwhile. Once loaded, no
    thread; a module another thread is still importing is waited for there."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if module is not None and not getattr(spec, "_initializing", False):
        return module
    return await trio.to_thread.run_sync(importlib.import_module, name)


__all__ = ["defer_package_init", "imported", "lazy_names"]
