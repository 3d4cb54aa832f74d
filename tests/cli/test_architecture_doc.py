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


def _section(number: int) -> str:
    text = DOC.read_text()
    start = text.index(f"## {number}.")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def _module_rows() -> list[tuple[str, list[Path], str]]:
    """Section 2's table rows: (concept, the files its module column names, its notes)."""
    rows = []
    for line in _section(2).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("concept", "---"):
            continue
        files = [p for tok in PATH_RE.findall(cells[1]) for p in _candidates(tok)]
        rows.append((cells[0], files, cells[2]))
    return rows


def test_section_two_modules_exist_and_hold_what_the_row_says() -> None:
    """Section 2 ("Where each concept lives"): every module named exists, and every name in
    backticks in a row's notes (``JobShape``, ``build()``) is defined or used in one of the
    row's source files: a concept the row places in a module it has left fails here."""
    rows = _module_rows()
    assert len(rows) > 30
    wrong = []
    for concept, files, notes in rows:
        if not files:
            wrong.append(f"{concept}: no such module")
            continue
        sources = [f.read_text() for f in files if f.suffix in (".py", ".c", ".h")]
        if not sources:
            continue
        for symbol in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\(\))?`", notes):
            if not any(re.search(rf"\b{symbol}\b", s) for s in sources):
                wrong.append(f"{concept}: {symbol}")
    assert not wrong, f"docs/architecture.md section 2 names what its modules lack: {wrong}"


def test_section_two_says_where_launcher_detection_lives() -> None:
    """The drift that started these checks: launcher and MPI detection placed in
    ``launch/build.py``, which only builds the command."""
    for concept, files, notes in _module_rows():
        if "detect" in notes or "detection" in concept:
            assert all("def resolve" in f.read_text() or "def detect" in f.read_text()
                       for f in files if f.suffix == ".py"), concept  # fmt: skip


def _listed_tests() -> list[tuple[list[str], str]]:
    """Section 5's bullets ``- plan/: `test_x.py`, ...``: (the test folders, a file named)."""
    out = []
    for bullet in re.split(r"\n- ", _section(5)):
        head, sep, body = bullet.partition(":")
        folders = re.findall(r"\b(\w+)/", head) if sep else []
        if not folders or not re.fullmatch(r"[\w/ ]+", head.strip()):
            continue
        out += [(folders, token) for token in re.findall(r"`(test_[\w*]+\.py)`", body)]
    return out


def test_section_five_lists_each_test_file_under_its_folder() -> None:
    """Section 5: a test file listed under ``plan/:`` is in ``tests/plan/`` (or, for ``report/
    and draw/:``, in one of the folders named)."""
    listed = _listed_tests()
    assert len(listed) > 20
    wrong = [
        f"{'/, '.join(folders)}/: {name}"
        for folders, name in listed
        if not any(list((REPO / "tests" / f).glob(name)) for f in folders)
    ]
    assert not wrong, f"docs/architecture.md section 5 lists test files elsewhere: {wrong}"


def test_no_top_level_folder_shares_a_name_with_the_package() -> None:
    """Issue 38 item 6: a path names one thing. The repository's folders (kernels/, launchers/,
    spack/, reframe_tests/, ...) and the package's folders and modules have different names, so
    ``kernels/`` is the C programs and ``measure/`` their Python side. ``cli/commands/`` is left
    out: each module there is named after the command it implements (``topobind spack``)."""
    import subprocess

    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True,
                             text=True, check=True, timeout=60).stdout.splitlines()  # fmt: skip
    top = {line.split("/", 1)[0] for line in tracked if "/" in line}
    inside = set()
    for path in PACKAGE.rglob("*"):
        if "__pycache__" in path.parts or path.parent == PACKAGE / "cli" / "commands":
            continue
        if path.is_dir() or path.suffix == ".py":
            inside.add(path.stem)
    assert top, "git ls-files listed nothing"
    assert not top & inside, f"named twice: {sorted(top & inside)}"
