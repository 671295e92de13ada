"""The shape of the code, held as tests: layers, no package cycles, short functions.

The layers and the acyclic-packages contract live in pyproject.toml
(``[tool.importlinter]``); import-linter checks them over the real import graph, so an
upward import or a cycle between packages (at any depth) fails here, naming the import.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

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
    """The ``run_*`` entries the agent starts (``nursery.start(run_x, ...)``, also through
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
        if isinstance(target, ast.Name) and target.id.startswith("run_"):
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
    assert {"run_runtime", "run_pod_lifecycle", "run_eviction", "run_gc"} <= set(entries)
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
