"""The manual stays true to the code, and the repository speaks of the product only.

- README.md is the front door: at most 300 lines; the manual is docs/.
- The configuration reference and the README's support table are generated from
  ``kubelet/config`` (scripts/gen-config-reference.py); the committed text must equal
  what the script prints now.
- docs/architecture.md lists the layers of pyproject's import-linter contract.
- No text in the repository narrates how the work was organised (numbered issues,
  waves, sessions, section marks of files outside the repository): each fact is written
  where it is used.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 300
SCANNED = ("README.md", "CHANGELOG.md", "mkdocs.yml", "pyproject.toml")
SCANNED_DIRS = ("docs", "kubelet", "tests", "scripts", "deploy", "examples", "proto")
TEXT_SUFFIXES = {
    ".py",
    ".pyi",
    ".md",
    ".sh",
    ".yml",
    ".yaml",
    ".toml",
    ".json",
    ".proto",
    ".conf",
    ".service",
    ".txt",
    ".cfg",
    ".ini",
}

_ORDINALS = (
    "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|\d+(?:st|nd|rd|th)|earlier|previous|next|last|this"
)
FORBIDDEN = {
    "a numbered issue": r"\bissues? #?\d+|#\d+'s\b",
    "a wave": r"\bwaves?\b",
    "a numbered or ordinal session": rf"\b(?:{_ORDINALS}) sessions?\b|\bsessions? \d+\b"
    r"|\bas the session began\b",
    "a round of work": r"\b(?:wiring|review|merge) rounds?\b",
    "a section mark of an outside file": r"§\(?[a-z]\)?(?![\w.])",
    "an outside file": r"\.\./shared\b|\bshared/\w|\banchors\.md\b|\btest-vectors\b"
    r"|\bdesign\.md\b",
    "a work-log reference": r"\bturn-\d+|\bworktrees?\b|\ba helper's\b|\bother engineers\b"
    r"|\bthe main job\b|\bbase0\b",
}


def _generator() -> ModuleType:
    path = ROOT / "scripts" / "gen-config-reference.py"
    spec = importlib.util.spec_from_file_location("gen_config_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scanned_files() -> list[Path]:
    files = [ROOT / name for name in SCANNED if (ROOT / name).exists()]
    for folder in SCANNED_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return [path for path in files if path != Path(__file__).resolve()]


def offending_lines(text: str) -> list[str]:
    """Each line of ``text`` that narrates the work, with what it names."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in FORBIDDEN.items():
            if re.search(pattern, line, re.IGNORECASE):
                found.append(f"{number}: {what}: {line.strip()[:120]}")
    return found


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_the_configuration_reference_is_generated_from_the_code() -> None:
    generator = _generator()
    committed = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    assert committed == generator.render_reference(), "run scripts/gen-config-reference.py"


def test_the_readme_support_table_is_generated_from_the_code() -> None:
    generator = _generator()
    readme = (ROOT / "README.md").read_text()
    assert readme == generator.readme_with_table(readme), "run scripts/gen-config-reference.py"


def test_the_documented_layers_are_the_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    wanted = [layer.replace(" | ", ", ") for layer in contract["layers"]]
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## The layers", 1)[1].split("```", 2)[1]
    assert block.strip().splitlines() == wanted


def test_the_repository_speaks_of_the_product_only() -> None:
    found = []
    for path in _scanned_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}" for line in offending_lines(text)]
    assert found == []


@pytest.mark.parametrize(
    "line",
    [
        "Fourth session (wave 3, issue 19), measured on 2026-11-23",
        "the 50 ms that confirm a removal (#19's coalescing)",
        "Left for the wiring round (see the report)",
        "Upstream's applyDefaults (test-vectors §b, steps 1-7).",
        "The design map is in `../shared/design.md`.",
        "Twelfth session, as the session began",
    ],
)
def test_work_history_is_recognised(line: str) -> None:
    assert offending_lines(line)


@pytest.mark.parametrize(
    "line",
    [
        "Prepare a streaming exec session; the answer is a URL.",
        "the console session's own task",
        "value() and milli_value() round *up* (away from zero)",
        "reset with NO_ERROR, as Go's server does (RFC 9113 §8.1)",
        "try again next round rather than lose the log",
        "print(f'round {i + 1}: allocation start')",
    ],
)
def test_product_words_pass(line: str) -> None:
    assert offending_lines(line) == []
