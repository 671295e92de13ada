"""The shape of the code, held as tests: layers, no package cycles, faces, short functions.

The layers and the acyclic-packages contract live in pyproject.toml
(``[tool.importlinter]``); import-linter checks them over the real import graph, so an
upward import or a cycle between packages (at any depth) fails here, naming the import.

Each package's ``__init__`` is its face: it lists in ``__all__`` what the package offers,
and code outside the package (in kubelet/ and scripts/) imports only that, never one of
the package's modules; kubelet/testing and tests/ may reach into modules.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ("cri_api_pb2.py", "cri_api_grpc.py")
MAX_FUNCTION_LINES = 80
MAX_AGENT_FUNCTION_LINES = 60
"""``agent.run`` reads as the task tree; what builds a component's parts is a helper"""
MAX_ENTRY_PARAMETERS = 6
"""a component takes its dependencies as one typed object, not a row of positionals"""
ENTRY_CLASSES = {
    "kubelet/pods/syncloop.py": "SyncLoop",
    "kubelet/runtime/podruntime.py": "PodRuntime",
}
"""classes whose ``__init__`` counts as an entry (the components' central objects)"""


LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"
)


def test_imports_point_down_the_layers_and_packages_have_no_cycles() -> None:
    # in a process of its own: import-linter reconfigures logging (it would silence the
    # loggers other tests capture)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", LINT], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"an import breaks a contract of pyproject.toml:\n{done.stdout}"


def long_functions(top: Path, base: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(top.rglob("*.py")):
        if path.name in GENERATED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(base)}:{node.lineno} {node.name} ({lines})")
    return found


def test_no_function_is_longer_than_80_lines() -> None:
    assert long_functions(ROOT / "kubelet") + long_functions(ROOT / "scripts") == []


def test_the_function_length_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def f() -> None:\n{body}\n")
    assert long_functions(tmp_path, tmp_path) == [f"long.py:1 f ({MAX_FUNCTION_LINES + 1})"]


def test_no_function_in_the_agent_is_longer_than_60_lines() -> None:
    tree = ast.parse((ROOT / "kubelet" / "agent.py").read_text())
    long = [
        f"{node.name} ({(node.end_lineno or node.lineno) - node.lineno + 1})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_AGENT_FUNCTION_LINES
    ]
    assert long == []


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Every parameter, keyword-only ones too, but ``self`` and ``task_status``."""
    args = fn.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    names = [a.arg for a in named if a.arg not in ("self", "task_status")]
    return names + [f"*{a.arg}" for a in (args.vararg, args.kwarg) if a is not None]


def started_entries(agent: Path) -> dict[str, str]:
    """The entries the agent starts (``nursery.start(run_x, ...)``, also through
    ``functools.partial``), each with the module the agent imports it from."""
    tree = ast.parse(agent.read_text())
    imported = {
        alias.asname or alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "start"
            and node.args
        ):
            continue
        target = node.args[0]
        if isinstance(target, ast.Call) and target.args:  # functools.partial(run_x, ...)
            target = target.args[0]
        if isinstance(target, ast.Name) and target.id in imported:
            found[target.id] = imported[target.id]
    return found


def wide_entries(entries: dict[str, Path], classes: dict[Path, str]) -> list[str]:
    """The entries (functions by name, classes' ``__init__``) over the parameter limit."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for name, path in sorted(entries.items()):
        found += [
            (name, node)
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) and node.name == name
        ]
    for path, cls in sorted(classes.items()):
        found += [
            (f"{cls}.__init__", item)
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ClassDef) and node.name == cls
            for item in node.body
            if isinstance(item, ast.FunctionDef) and item.name == "__init__"
        ]
    return [
        f"{name} ({len(parameters(fn))})"
        for name, fn in found
        if len(parameters(fn)) > MAX_ENTRY_PARAMETERS
    ]


def test_no_entry_takes_more_than_6_parameters() -> None:
    entries = {
        name: Path(inspect.getsourcefile(getattr(importlib.import_module(module), name)) or "")
        for name, module in started_entries(ROOT / "kubelet" / "agent.py").items()
    }
    assert {"run_runtime", "run_pod_lifecycle", "run_eviction", "run_gc", "serve"} <= set(entries)
    classes = {ROOT / path: cls for path, cls in ENTRY_CLASSES.items()}
    assert wide_entries(entries, classes) == []


def test_the_entry_check_sees_a_wide_entry(tmp_path: Path) -> None:
    (tmp_path / "wide.py").write_text(
        "async def run_wide(a, b, c, d, e, f, *, g, task_status=None): ...\n"
        "class Wide:\n"
        "    def __init__(self, a, b, c, d, e, f, g=0): ...\n"
    )
    agent = tmp_path / "agent.py"
    agent.write_text(
        "from kubelet.wide import run_wide\n"
        "async def run(root):\n"
        "    await root.start(functools.partial(run_wide, g=1), 1, 2, 3, 4, 5, 6)\n"
    )
    entries = {name: tmp_path / "wide.py" for name in started_entries(agent)}
    assert wide_entries(entries, {tmp_path / "wide.py": "Wide"}) == [
        "run_wide (7)",
        "Wide.__init__ (7)",
    ]


def _dotted(path: Path, base: Path) -> tuple[str, bool]:
    """A file's module name, and whether it is a package's ``__init__``."""
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _inside(package: str, other: str) -> bool:
    return package == other or package.startswith(other + ".")


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run on import (into ``if``/``try`` blocks, not into functions)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If | ast.Try):
            yield from _top_level([*stmt.body, *stmt.orelse])


def _face_all(init: Path) -> set[str]:
    for stmt in ast.parse(init.read_text()).body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets
        ):
            return set(ast.literal_eval(stmt.value))
    return set()


def reach_ins(base: Path, importers: list[Path]) -> list[str]:
    """Imports, in ``importers``, of a module of a package the importer is not inside
    (a module the face offers by name, as ``labels`` in ``from kubelet.cri import labels``,
    and a package's ``__main__`` are not reaching in)."""
    modules = dict(_dotted(p, base) for p in (base / "kubelet").rglob("*.py"))
    offered = {
        name: _face_all(base / name.replace(".", "/") / "__init__.py")
        for name, is_package in modules.items()
        if is_package
    }

    def outside(own: str, module: str) -> bool:
        package = module.rpartition(".")[0]
        if modules[module] or package == "kubelet" or module.endswith(".__main__"):
            return False  # a package (its face), a top-level module, an entry point
        return not _inside(own, package)

    found = []
    for path in importers:
        me, is_package = _dotted(path, base)
        own = me if is_package else me.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(base)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found += [
                    f"{where} {a.name}"
                    for a in node.names
                    if a.name in modules and outside(own, a.name)
                ]
            if not isinstance(node, ast.ImportFrom):
                continue
            target = node.module or ""
            if node.level:
                up = own.split(".")[: len(own.split(".")) - node.level + 1]
                target = ".".join(up + ([node.module] if node.module else []))
            if target in modules and not modules[target]:
                if outside(own, target):
                    found.append(f"{where} {target}")
                continue
            for alias in node.names:
                module = f"{target}.{alias.name}"
                unlisted = alias.name not in offered.get(target, set())
                if module in modules and unlisted and outside(own, module):
                    found.append(f"{where} {module}")
    return found


def test_other_packages_import_only_from_faces() -> None:
    importers = [
        *(p for p in (ROOT / "kubelet").rglob("*.py") if "testing" not in p.parts),
        *(ROOT / "scripts").glob("*.py"),
    ]
    assert reach_ins(ROOT, sorted(importers)) == []


def test_the_face_check_sees_imports_reaching_into_modules(tmp_path: Path) -> None:
    files = {
        "kubelet/__init__.py": "",
        "kubelet/a/__init__.py": "from . import ns\nfrom .mod import ok\n__all__ = ['ns', 'ok']\n",
        "kubelet/a/mod.py": "ok = 1\n",
        "kubelet/a/ns.py": "",
        "kubelet/a/hidden.py": "",
        "kubelet/a/inner.py": "from kubelet.a.mod import ok\nfrom . import hidden\n",
        "kubelet/a/__main__.py": "",
        "kubelet/b/__init__.py": "",
        "kubelet/b/sibling.py": "",
        "kubelet/b/user.py": (
            "from kubelet.a import ns, ok\n"
            "from kubelet.a.mod import ok\n"
            "from ..a.mod import ok\n"
            "from kubelet.a import hidden\n"
            "import kubelet.a.mod\n"
            "from . import sibling\n"
            "from kubelet.a.__main__ import main\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    importers = sorted((tmp_path / "kubelet").rglob("*.py"))
    assert sorted(reach_ins(tmp_path, importers)) == [
        "kubelet/b/user.py:2 kubelet.a.mod",
        "kubelet/b/user.py:3 kubelet.a.mod",
        "kubelet/b/user.py:4 kubelet.a.hidden",
        "kubelet/b/user.py:5 kubelet.a.mod",
    ]


def face_problems(source: str) -> list[str]:
    """What a face's ``__all__`` gets wrong: a public name it imports from kubelet (or
    defines) and does not list, a listed name it does not bind; for a lazy face (a
    ``_LAZY`` table and ``__getattr__``), a table that is not its ``TYPE_CHECKING``
    imports."""
    tree = ast.parse(source)
    problems = [] if ast.get_docstring(tree) else ["no docstring says what it offers"]
    bound: set[str] = set()
    offered: set[str] = set()
    listed: list[str] = []
    lazy: dict[str, str] = {}
    typing_only: dict[str, str] = {}
    for stmt in _top_level(tree.body):
        if isinstance(stmt, ast.ImportFrom):
            names = {a.asname or a.name: stmt.module or "" for a in stmt.names}
            bound |= set(names)
            if stmt.level or (stmt.module or "").startswith("kubelet"):
                offered |= set(names)
        elif isinstance(stmt, ast.Import):
            bound |= {(a.asname or a.name).partition(".")[0] for a in stmt.names}
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(stmt.name)
            offered.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                name = target.id if isinstance(target, ast.Name) else ""
                if name == "__all__":
                    listed = list(ast.literal_eval(stmt.value or ast.List([])))
                elif name == "_LAZY":
                    lazy = ast.literal_eval(stmt.value or ast.Dict([], []))
                bound.add(name)
                offered.add(name)
        if isinstance(stmt, ast.If) and getattr(stmt.test, "id", "") == "TYPE_CHECKING":
            for inner in stmt.body:
                if isinstance(inner, ast.ImportFrom) and inner.level == 1:
                    typing_only |= {a.asname or a.name: inner.module or "" for a in inner.names}
    public = {n for n in offered if not n.startswith("_")}
    problems += [f"{n} is offered but not in __all__" for n in sorted(public - set(listed))]
    problems += [f"{n} is in __all__ but not bound" for n in sorted(set(listed) - bound)]
    problems += [f"{n} is in __all__ twice" for n in sorted(set(listed)) if listed.count(n) > 1]
    if lazy or typing_only:
        problems += [
            f"_LAZY says {n} is in .{lazy.get(n)}, "
            f"TYPE_CHECKING imports it from .{typing_only.get(n)}"
            for n in sorted(set(lazy) | set(typing_only))
            if lazy.get(n) != typing_only.get(n)
        ]
    return problems


def test_each_face_lists_what_it_offers() -> None:
    problems = []
    for init in sorted((ROOT / "kubelet").rglob("__init__.py")):
        name, _ = _dotted(init, ROOT)
        if name == "kubelet":
            continue
        face = importlib.import_module(name)
        problems += [f"{name}: {p}" for p in face_problems(init.read_text())]
        problems += [
            f"{name}: {n} in __all__ cannot be read" for n in face.__all__ if not hasattr(face, n)
        ]
    assert problems == []


def test_the_face_check_sees_an_unlisted_and_a_missing_name() -> None:
    source = (
        '"""A face."""\n'
        "from typing import TYPE_CHECKING, Any\n"
        "from .mod import a, b\n"
        "from kubelet.x import c\n"
        "if TYPE_CHECKING:\n"
        "    from .heavy import d\n"
        "__all__ = ['a', 'e', 'a']\n"
        "_LAZY = {'d': 'other'}\n"
        "def f() -> None: ...\n"
    )
    assert face_problems(source) == [
        "b is offered but not in __all__",
        "c is offered but not in __all__",
        "d is offered but not in __all__",
        "f is offered but not in __all__",
        "e is in __all__ but not bound",
        "a is in __all__ twice",
        "_LAZY says d is in .other, TYPE_CHECKING imports it from .heavy",
    ]
    assert face_problems('"""A face."""\nfrom .mod import a\n__all__ = ["a"]\n') == []


LIGHT_ENTRIES = {
    # the API face is lazy: flag parsing reads its types, and ``kubelet --version`` must
    # not pay for httpx, the TLS stack, the CRI client or the agent
    "import kubelet.cli": (
        "httpx",
        "cryptography",
        "grpclib",
        "kubelet.agent",
        "kubelet.api.client",
    ),
    # a standalone kubelet (no kubeconfig, ports off) never loads the API client, TLS
    # bootstrap, the HTTP servers' apps and authentication, or httpx's command line; nor
    # prometheus_client's exposition servers (kubelet/lazyinit.py), the HTTP probe client
    # (h11) or the debug console before they are used; nor, until a CSI driver registers,
    # the CSI protobuf and its gRPC client
    "import kubelet.agent": (
        "httpx",
        "cryptography",
        "rich",
        "kubelet.api.client",
        "kubelet.node.certificates",
        "kubelet.server.app",
        "kubelet.server.auth",
        "prometheus_client.exposition",
        "http.server",
        "urllib.request",
        "h11",
        "kubelet.debug",
        "kubelet.cm.dra.dra_v1_api_pb2",
        "kubelet.cm.dra.dra_v1beta1_api_pb2",
        "kubelet.cm.dra.dra_health_v1alpha1_api_pb2",
        "jeepney",
        "grpclib.health",
        "kubelet.runtime.credentials.plugins",
        "kubelet.csi.csi_pb2",
        "kubelet.csi.client",
    ),
    # the TLS port of a standalone kubelet: the self-signed pair is made by a child process,
    # client certificates are read with cryptography only when one arrives, the metrics'
    # text format loads with the first scrape, the streaming ends (WebSocket, SPDY) with the
    # first exec, attach or port-forward, each debugging and metrics handler with its first
    # request, and certificate rotation's modules (httpx, the API client) only when it is
    # configured
    "import kubelet.agent; import kubelet.server.app, kubelet.server.auth, "
    "kubelet.server.servingcert, kubelet.server.tlsreload, kubelet.server.tlsprofile, "
    "kubelet.server.connection": (
        "cryptography",
        "httpx",
        "kubelet.api.client",
        "kubelet.node.certificates.bootstrap",
        "prometheus_client.exposition",
        "http.server",
        "urllib.request",
        "kubelet.server.streams",
        "kubelet.server.wstranslate",
        "wsproto",
        "html",
        "email",
        "kubelet.server.cadvisor",
        "kubelet.server.logs",
        "kubelet.server.pprof",
        "tracemalloc",
    ),
    # ``kubelet debug`` is a socket client: the console's helpers name the pod lifecycle's
    # types for mypy only
    "from kubelet.debug import main": ("kubelet.agent", "kubelet.pods.run", "kubelet.cri.runtime"),
}


@pytest.mark.parametrize("statement", sorted(LIGHT_ENTRIES))
def test_the_command_line_entries_start_light(statement: str) -> None:
    heavy = LIGHT_ENTRIES[statement]
    code = f"import sys; {statement}; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr
