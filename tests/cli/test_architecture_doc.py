"""docs/architecture.md's "Where to make a change" table, checked against the code.

Every file the table names exists (in ``src/topobind/`` or from the repository's root, with
``NAME``/``<site>`` standing for any name), every test file it names is in ``tests/``, and a
symbol given in parentheses right after a file (``plan/layouts.py`` (``REGISTRY``...)) is
defined or used in that file. Section 1's folder list names every folder of the package.
"""

from __future__ import annotations

import re
from pathlib import Path

from paths import REPO

PACKAGE = REPO / "src" / "topobind"
DOC = REPO / "docs" / "architecture.md"

PATH_RE = re.compile(r"`([\w./<>*-]+\.(?:py|c|h|json|md|yaml|conf)|[\w./<>-]+/)`")
FILE_SYMBOL_RE = re.compile(r"`([\w./<>-]+\.(?:py|c))` \(([^)]*)\)")
SYMBOL_RE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def _table() -> str:
    text = DOC.read_text()
    start = text.index("## 3. Where to make a change")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _candidates(token: str) -> list[Path]:
    pattern = re.sub(r"NAME|<site>", "*", token)
    found: list[Path] = []
    for base in (PACKAGE, REPO):
        found += [p for p in base.glob(pattern.rstrip("/")) if p.exists()]
    return found


def test_every_file_the_table_names_exists() -> None:
    missing = []
    for token in sorted(set(PATH_RE.findall(_table()))):
        if token.startswith("test_"):  # a test file: anywhere under tests/
            if not list((REPO / "tests").rglob(token)):
                missing.append(token)
        elif "/" not in token:  # a file a tool writes (references.yaml): named in the code
            if not any(token in p.read_text() for p in PACKAGE.rglob("*.py")):
                missing.append(token)
        elif not _candidates(token):
            missing.append(token)
    assert not missing, f"docs/architecture.md section 3 names files that do not exist: {missing}"


def test_symbols_named_after_a_file_are_in_that_file() -> None:
    wrong = []
    for token, inside in FILE_SYMBOL_RE.findall(_table()):
        files = _candidates(token)
        for symbol in SYMBOL_RE.findall(inside):
            if files and not any(re.search(rf"\b{symbol}\b", f.read_text()) for f in files):
                wrong.append(f"{token} ({symbol})")
    assert not wrong, f"docs/architecture.md section 3: symbols not in their files: {wrong}"


def test_section_one_names_every_folder_of_the_package() -> None:
    text = DOC.read_text()
    section = text[text.index("## 1.") : text.index("## 2.")]
    folders = sorted(
        p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    )
    absent = [f for f in folders if not re.search(rf"\b{f}/", section)]
    assert not absent, f"docs/architecture.md section 1 does not show these folders: {absent}"


def test_the_checker_catches_a_file_that_does_not_exist() -> None:
    """The path pattern finds the kinds of names the table uses (so the tests above can fail)."""
    row = "| x | `plan/no_such_module.py` (`REGISTRY`) -> tests: `test_nothing_here.py` |"
    tokens = PATH_RE.findall(row)
    assert tokens == ["plan/no_such_module.py", "test_nothing_here.py"]
    assert not _candidates("plan/no_such_module.py")
    [(token, inside)] = FILE_SYMBOL_RE.findall(row)
    assert token == "plan/no_such_module.py" and SYMBOL_RE.findall(inside) == ["REGISTRY"]
