"""The command's own modules load without docstrings, from a bytecode cache of their own."""

from __future__ import annotations

import ast
import os
import py_compile
import subprocess
import sys
import textwrap
import traceback
from collections import Counter
from pathlib import Path
from types import CodeType

import pytest

from kubelet.leanimport import TAG, strip_docstrings

ROOT = Path(__file__).resolve().parents[2]

SOURCE = textwrap.dedent(
    '''\
    """The module's docstring."""

    from __future__ import annotations

    NOT_A_DOCSTRING = "kept"


    def documented() -> str:
        """A function's docstring."""
        return "documented"


    def only_a_docstring() -> None:
        """Nothing else here."""


    class Documented:
        """A class's docstring."""

        def method(self) -> str:
            """A method's docstring."""
            "a string expression after the first statement stays"
            return "method"

        async def coroutine(self) -> str:
            """A coroutine's docstring."""
            return "coroutine"


    def fails() -> None:
        """Its line numbers stay the source's."""
        raise ValueError("line 32")


    def echoes() -> str:
        """echo"""
        return "echo"


    class Echo:
        """echo"""

        WORD = "echo"


    PICKED = [w for w in ("a", "b") if w == "a"]
    LAMBDA = lambda: "lam"  # noqa: E731
    '''
)


def _compiled(source: str) -> dict[str, object]:
    code = strip_docstrings(compile(source, "<lean>", "exec", dont_inherit=True))
    namespace: dict[str, object] = {}
    exec(code, namespace)
    return namespace


def test_docstrings_go_and_everything_else_stays() -> None:
    ns = _compiled(SOURCE)
    assert ns.get("__doc__") is None
    documented = ns["documented"]
    assert callable(documented) and documented() == "documented"
    assert documented.__doc__ is None
    only = ns["only_a_docstring"]
    assert callable(only) and only() is None and only.__doc__ is None
    cls = ns["Documented"]
    assert isinstance(cls, type) and cls.__doc__ is None
    method = vars(cls)["method"]
    assert cls().method() == "method" and method.__doc__ is None
    assert ns["NOT_A_DOCSTRING"] == "kept"
    fails = ns["fails"]
    assert callable(fails)
    try:
        fails()
    except ValueError as exc:
        assert traceback.extract_tb(exc.__traceback__)[-1].lineno == 32
    else:
        raise AssertionError("fails() did not raise")
    coroutine = vars(cls)["coroutine"]
    assert coroutine.__doc__ is None


def test_a_docstring_whose_text_the_code_also_uses_stays() -> None:
    """The same text as a literal shares the docstring's constant: both stay."""
    ns = _compiled(SOURCE)
    echoes, echo = ns["echoes"], ns["Echo"]
    assert callable(echoes) and echoes() == "echo" and echoes.__doc__ == "echo"
    assert isinstance(echo, type) and vars(echo)["WORD"] == "echo" and echo.__doc__ == "echo"
    lam = ns["LAMBDA"]
    assert ns["PICKED"] == ["a"] and callable(lam) and lam() == "lam"


def test_a_doc_the_code_assigns_after_a_statement_is_not_a_docstring() -> None:
    source = textwrap.dedent(
        """\
        VERSION = 1
        __doc__ = "assigned by the module's code"


        class Assigned:
            size = 2
            __doc__ = "assigned by the class's code"
        """
    )
    ns = _compiled(source)
    assigned = ns["Assigned"]
    assert ns["__doc__"] == "assigned by the module's code"
    assert isinstance(assigned, type) and assigned.__doc__ == "assigned by the class's code"


def test_the_kubelets_own_code_keeps_no_docstring_but_the_shared_ones() -> None:
    """Every module of the package, compiled and stripped: what string constants are left
    are the ones the code uses (the same as leaving out every docstring in the source)."""
    for path in sorted((ROOT / "kubelet").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lean = _strings(strip_docstrings(compile(source, str(path), "exec", dont_inherit=True)))
        bare = _strings(compile(_without_docstrings(source), str(path), "exec", dont_inherit=True))
        assert lean == bare, path


def _strings(code: CodeType) -> Counter[str]:
    found: Counter[str] = Counter()
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found += _strings(const)
        elif isinstance(const, str):
            found[const] += 1
    return found


def _without_docstrings(source: str) -> ast.Module:
    """The syntax tree of ``source`` with every docstring statement removed (the reference)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and _is_text(body[0]):
                del body[0]
                if not body or _is_text(body[0]):  # else the next would be one
                    body.insert(0, ast.Pass())
    return ast.fix_missing_locations(tree)


def _is_text(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _run(code: str, package_root: Path, **env: str) -> str:
    """``code`` in a fresh interpreter, bytecode written unless ``env`` says otherwise."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "PYTHONPATH": f"{package_root}{os.pathsep}{ROOT}", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _package(root: Path) -> Path:
    package = root / "leanpkg"
    package.mkdir()
    (package / "__init__.py").write_text('"""The package."""\n')
    (package / "mod.py").write_text(SOURCE)
    return package


LEAN = (
    "from kubelet import leanimport; leanimport.install('leanpkg'); "
    "import leanpkg.mod as m; print(m.__doc__, m.Documented.__doc__, m.documented(), "
    f"m.__cached__.endswith('.opt-{TAG}.pyc'))"
)
PLAIN = "import leanpkg.mod as m; print(m.Documented.__doc__)"


def test_an_installed_package_loads_lean_and_its_usual_bytecode_stays_whole(
    tmp_path: Path,
) -> None:
    package = _package(tmp_path)
    for _ in range(2):  # compiled and cached, then read from the cache
        assert _run(LEAN, tmp_path) == "None None documented True"
    cached = [p.name for p in (package / "__pycache__").iterdir()]
    assert f"mod.{sys.implementation.cache_tag}.opt-{TAG}.pyc" in cached
    assert _run(PLAIN, tmp_path) == "A class's docstring."  # the usual import: whole
    assert _run(LEAN, tmp_path) == "None None documented True"  # and each its own cache


def test_without_bytecode_writes_or_any_cache_a_module_compiles_lean(tmp_path: Path) -> None:
    """Nothing cached and nothing may be written: the source is compiled at every start
    either way, so it is compiled without its docstrings (and nothing is written)."""
    package = _package(tmp_path)
    lean = _run(LEAN, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert lean == "None None documented True"
    assert not (package / "__pycache__").exists()


def test_the_command_loads_the_kubelet_lean() -> None:
    """``python -m kubelet`` (and the console script, the same entry) installs the finder
    before the command's modules load; importing the package directly does not."""
    code = (
        "import sys, runpy; sys.argv = ['kubelet', '--version']\n"
        "try:\n"
        "    runpy.run_module('kubelet', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "import kubelet.cli, kubelet.config\n"
        "print(kubelet.cli.__doc__, kubelet.config.__doc__)"
    )
    assert _run(code, ROOT).splitlines()[-1] == "None None"
    import kubelet.cli

    assert kubelet.cli.__doc__  # this interpreter imported it normally


def test_set_up_compiles_every_module_even_where_bytecode_is_not_written(
    tmp_path: Path,
) -> None:
    package = _package(tmp_path)
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "deep.py").write_text('"""Deep."""\nVALUE = 1\n')
    code = "from kubelet import leanimport; print(leanimport.compile_package('leanpkg'))"
    assert _run(code, tmp_path, PYTHONDONTWRITEBYTECODE="1") == "4"
    tag = f"{sys.implementation.cache_tag}.opt-{TAG}.pyc"
    assert (package / "sub" / "__pycache__" / f"deep.{tag}").is_file()
    lean = _run(LEAN, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert lean == "None None documented True"  # the cache is there: used


def _change(package: Path) -> None:
    """The module's source changes (and its mtime moves on, so every cache is stale)."""
    mod = package / "mod.py"
    mod.write_text(SOURCE.replace('return "documented"', 'return "changed"'))
    stat = mod.stat()
    os.utime(mod, (stat.st_atime, stat.st_mtime + 10))


def test_a_stale_cache_that_cannot_be_rewritten_gives_way_to_usual_bytecode(
    tmp_path: Path,
) -> None:
    """The source changed after the cache was written, bytecode may not be written now,
    and the usual bytecode is up to date: the module loads from that (its new text),
    not compiled afresh at every start."""
    package = _package(tmp_path)
    assert _run(LEAN, tmp_path) == "None None documented True"
    _change(package)
    assert _run(PLAIN, tmp_path) == "A class's docstring."  # writes the usual bytecode
    lean = _run(LEAN, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert lean == "The module's docstring. A class's docstring. changed False"
    assert _run(LEAN, tmp_path) == "None None changed True"  # writable again: rewritten


@pytest.mark.parametrize(
    "mode",
    [py_compile.PycInvalidationMode.UNCHECKED_HASH, py_compile.PycInvalidationMode.CHECKED_HASH],
)
def test_hash_based_usual_bytecode_is_used_as_it_is(
    tmp_path: Path, mode: py_compile.PycInvalidationMode
) -> None:
    """Hash-based bytecode (a reproducible install's) is the usual loader's to check."""
    package = _package(tmp_path)
    py_compile.compile(str(package / "mod.py"), invalidation_mode=mode, doraise=True)
    lean = _run(LEAN, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert lean == "The module's docstring. A class's docstring. documented False"


def test_a_stale_cache_and_no_usual_bytecode_compile_lean_without_writing(
    tmp_path: Path,
) -> None:
    package = _package(tmp_path)
    assert _run(LEAN, tmp_path) == "None None documented True"
    cache = next((package / "__pycache__").glob(f"mod.*.opt-{TAG}.pyc"))
    written = cache.read_bytes()
    _change(package)
    lean = _run(LEAN, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert lean == "None None changed True"
    assert cache.read_bytes() == written  # still the old one: nothing may be written


def test_an_optimized_run_has_a_cache_of_its_own(tmp_path: Path) -> None:
    """``python -O`` compiles without asserts: its cache never serves a plain run."""
    _package(tmp_path)
    check = (
        "from kubelet import leanimport; leanimport.install('leanpkg'); "
        "import leanpkg.mod as m; print(m.__cached__.rsplit('.', 2)[-2])"
    )
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {**base, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    optimized = subprocess.run(
        [sys.executable, "-O", "-c", check], env=env, capture_output=True, text=True, check=True
    )
    assert optimized.stdout.strip() == f"opt-{TAG}o1"
    assert _run(check, tmp_path) == f"opt-{TAG}"
