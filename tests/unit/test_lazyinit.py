"""A package whose ``__init__`` is deferred: submodules load alone, the ``__init__`` runs
once on the first name it defines; a module a request needs is imported off the loop."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from kubelet import lazyinit
from kubelet.lazyinit import defer_package_init

INIT = """\
import sys
sys.modules[__name__].runs = getattr(sys.modules[__name__], "runs", 0) + 1
from . import heavy
from .light import VALUE as EXPORTED
"""


@pytest.fixture
def package(tmp_path: Path) -> Iterator[str]:
    name = f"lazypkg_{tmp_path.name.replace('-', '_')}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text(INIT)
    (root / "light.py").write_text("VALUE = 42\n")
    (root / "heavy.py").write_text("LOADED = True\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield name
    finally:
        sys.path.remove(str(tmp_path))
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]


def test_a_submodule_loads_without_the_package_init(package: str) -> None:
    defer_package_init(package)
    light = __import__(f"{package}.light", fromlist=["VALUE"])
    assert light.VALUE == 42
    assert f"{package}.heavy" not in sys.modules
    assert "runs" not in vars(sys.modules[package])


def test_the_first_name_of_the_package_runs_its_init_once(package: str) -> None:
    defer_package_init(package)
    module = sys.modules[package]
    assert module.EXPORTED == 42
    assert module.runs == 1
    assert f"{package}.heavy" in sys.modules
    assert module.heavy.LOADED is True
    assert module.runs == 1
    with pytest.raises(AttributeError):
        _ = module.missing


def test_an_imported_package_is_left_alone(package: str) -> None:
    __import__(package)
    before = sys.modules[package]
    defer_package_init(package)
    assert sys.modules[package] is before
    assert before.runs == 1


def test_the_kubelet_metrics_work_without_the_exposition_until_a_scrape() -> None:
    import subprocess

    code = (
        "import sys; from kubelet.metrics import KubeletMetrics, exposition; "
        "r = KubeletMetrics('node').registry; "
        "before = 'http.server' in sys.modules; text = exposition(r); "
        "print(before, b'kubelet_' in text, 'prometheus_client.exposition' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.stdout.split() == ["False", "True", "True"], done.stderr


def test_a_lazy_name_loads_its_module_on_first_read_and_is_kept(package: str) -> None:
    from kubelet.lazyinit import lazy_names

    __import__(package)
    namespace: dict[str, object] = {}
    first_read = lazy_names(package, {"VALUE": "light"}, namespace)
    assert f"{package}.light" in sys.modules  # the package's own __init__ imported it
    del sys.modules[f"{package}.light"]
    assert first_read("VALUE") == 42
    assert namespace == {"VALUE": 42}
    assert f"{package}.light" in sys.modules
    with pytest.raises(AttributeError, match="has no attribute 'OTHER'"):
        first_read("OTHER")


async def test_a_module_a_request_needs_is_imported_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slow_handlers.py").write_text(
        "import threading\nIMPORTED_IN = threading.get_ident()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_handlers", raising=False)
    module = await lazyinit.imported("slow_handlers")
    assert threading.get_ident() != module.IMPORTED_IN  # a worker thread's
    assert sys.modules["slow_handlers"] is module

    async def no_thread(*_: object) -> object:
        raise AssertionError("a loaded module needs no worker thread")

    monkeypatch.setattr(trio.to_thread, "run_sync", no_thread)
    assert await lazyinit.imported("slow_handlers") is module
