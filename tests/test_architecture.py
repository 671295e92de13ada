"""The shape of the code, held as tests: layers, no package cycles, short functions.

The layers and the acyclic-packages contract live in pyproject.toml
(``[tool.importlinter]``); import-linter checks them over the real import graph, so an
upward import or a cycle between packages (at any depth) fails here, naming the import.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ("cri_api_pb2.py", "cri_api_grpc.py")
MAX_FUNCTION_LINES = 80


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
