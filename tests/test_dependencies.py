"""What pyproject.toml declares against what the code imports, read from the code itself.

Every third-party module imported anywhere in ``kubelet/`` outside ``kubelet/testing``
must come from a distribution in ``[project].dependencies`` (a plain ``pip install .``
gets nothing else); the fakes in ``kubelet/testing`` may also use the ``testing`` extra,
which the ``test`` extra brings. Import names map to distributions through the metadata
of this environment, where every extra is installed. scripts/check-clean-install.sh
checks the same thing the slow way: a wheel in a fresh virtualenv.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kubelet"
TESTING = PACKAGE / "testing"


def top_level_imports(path: Path) -> set[str]:
    """The top-level names of a module's absolute imports (in functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def third_party(paths: Iterable[Path]) -> dict[str, set[str]]:
    """Third-party import name → the modules (relative paths) importing it."""
    found: dict[str, set[str]] = {}
    for path in paths:
        for name in top_level_imports(path):
            if name not in sys.stdlib_module_names and name not in ("kubelet", "__future__"):
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


EXTRA_MODULES = {"tracing": [PACKAGE / "tracing" / "otel.py"]}
"""Modules imported only when their extra is wanted (``tracing`` set: the SDK)."""


def production_modules() -> list[Path]:
    extra = {p for paths in EXTRA_MODULES.values() for p in paths}
    return [
        p for p in sorted(PACKAGE.rglob("*.py")) if not p.is_relative_to(TESTING) and p not in extra
    ]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution a requirement string names (``httpx[http2]>=0.28`` → httpx)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return normalize(match.group(1))


def declared() -> tuple[set[str], dict[str, list[str]]]:
    """The runtime distributions, and each extra's requirement strings."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {requirement_name(r) for r in project["dependencies"]}
    return runtime, project["optional-dependencies"]


def undeclared(imports: dict[str, set[str]], allowed: set[str]) -> list[str]:
    """The imports whose distribution is not in ``allowed``, with where they occur."""
    provides = importlib.metadata.packages_distributions()
    missing = []
    for name, where in sorted(imports.items()):
        distributions = {normalize(d) for d in provides.get(name, [])}
        if not distributions & allowed:
            sample = ", ".join(sorted(where)[:3])
            missing.append(f"{name} (from {sorted(distributions) or '?'}; {sample})")
    return missing


def test_every_production_import_is_a_runtime_dependency() -> None:
    runtime, _ = declared()
    assert undeclared(third_party(production_modules()), runtime) == []


def test_every_runtime_dependency_is_imported_by_production_code() -> None:
    provides = importlib.metadata.packages_distributions()
    imported = {
        normalize(d) for name in third_party(production_modules()) for d in provides.get(name, [])
    }
    runtime, _ = declared()
    assert sorted(runtime - imported) == []


def test_the_fakes_need_only_the_runtime_and_the_testing_extra() -> None:
    runtime, extras = declared()
    testing = {requirement_name(r) for r in extras["testing"]}
    assert undeclared(third_party(sorted(TESTING.rglob("*.py"))), runtime | testing) == []


def test_the_test_extra_brings_the_testing_extra() -> None:
    _, extras = declared()
    assert "kubelet[testing]" in [r.replace(" ", "") for r in extras["test"]]
    assert "kubelet[tracing]" in [r.replace(" ", "") for r in extras["test"]]


def test_extra_modules_need_only_the_runtime_and_their_extra() -> None:
    runtime, extras = declared()
    for extra, paths in EXTRA_MODULES.items():
        allowed = runtime | {requirement_name(r) for r in extras[extra]}
        assert undeclared(third_party(paths), allowed) == []
        assert third_party(paths), f"{extra}: its modules import nothing of it"


def test_the_import_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os.path\nfrom . import sibling\n"
        "def f():\n    import wsproto.frame_protocol\n    from yaml import safe_load\n"
    )
    assert top_level_imports(module) == {"os", "wsproto", "yaml"}
