"""The reference pages say what the code does: the command reference and the exit statuses
are generated from the code and committed current (scripts/gen-commands-doc.py,
scripts/gen-exit-status-doc.py); the environment-variable page is written by hand and
checked against the code here."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))  # the generators import scripts/docpaths.py

REFERENCE = REPO / "docs" / "reference"


def generator(name: str) -> ModuleType:
    path = REPO / "scripts" / f"gen-{name}-doc.py"
    spec = importlib.util.spec_from_file_location(f"gen_{name}_doc", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name, page", [("commands", "commands.md"), ("exit-status", "exit-status.md")]
)
def test_generated_page_is_current(name: str, page: str) -> None:
    text = generator(name).render()
    assert (REFERENCE / page).read_text() == text, f"run scripts/gen-{name}-doc.py"


def every_option(parser: argparse.ArgumentParser, inner: dict) -> set[str]:
    opts: set[str] = set()
    for action in parser._actions:  # noqa: SLF001
        opts.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for child in action.choices.values():
                opts |= every_option(child, inner)
    for p in inner.values():
        for action in p._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for child in action.choices.values():
                    opts |= {o for a in child._actions for o in a.option_strings}  # noqa: SLF001
    return opts


def test_the_command_reference_lists_every_command_and_option() -> None:
    gen = generator("commands")
    from topobind.cli.main import COMMANDS, build_parser

    text = (REFERENCE / "commands.md").read_text()
    for command in COMMANDS:
        assert f"### topobind {command}\n" in text
    for sub in ("stream", "hpl", "check", "externals", "list"):
        assert re.search(rf"^#### topobind \w+ {sub}$", text, re.M), sub
    options = every_option(build_parser(), gen.inner_parsers())
    assert {"--layout", "--each-node", "--fail-on-slow", "--n"} <= options
    missing = [o for o in sorted(options) if f"`{o}" not in text]
    assert not missing, missing


def test_a_new_option_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = generator("commands")
    real = gen.build_parser

    def with_extra() -> argparse.ArgumentParser:
        parser = real()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
        sub.choices["show"].add_argument("--brand-new", help="an option nobody documented")
        return parser

    monkeypatch.setattr(gen, "build_parser", with_extra)
    assert "`--brand-new BRAND_NEW`" in gen.render()
    assert gen.render() != (REFERENCE / "commands.md").read_text()


READ = re.compile(r"""(?:environ(?:\.get)?|getenv|env\.get)\s*[\(\[]\s*["']([A-Z][A-Z0-9_]+)["']""")
NAMED = re.compile(r"\bTOPOBIND_[A-Z0-9_]+\b")


def code_files() -> list[Path]:
    roots = [REPO / "src", REPO / "launchers", REPO / "reframe_tests"]
    files = [p for r in roots for p in r.rglob("*") if p.suffix in {".py", ".c", ".h", ""}]
    files += list((REPO / "kernels").glob("*.c")) + list((REPO / "kernels" / "common").glob("*.c"))
    files += list((REPO / "rankstep").glob("*.[ch]"))  # the per-rank step, shim and SPANK plugin
    files += list((REPO / "libtb").rglob("*.[ch]"))  # what they share (the evidence's roots)
    return [p for p in files if p.is_file() and "__pycache__" not in p.parts]


def test_the_environment_page_names_every_variable_the_code_reads_or_names() -> None:
    page = (REFERENCE / "environment.md").read_text()
    on_page = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", page))
    read: set[str] = set()
    named: set[str] = set()
    for path in code_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        read.update(READ.findall(text))
        named.update(NAMED.findall(text))
    assert {"TOPOBIND_WORKDIR", "SLURM_SUBMIT_DIR"} <= read  # the scan finds reads
    assert not read - on_page, f"read by the code, not on the page: {sorted(read - on_page)}"
    assert not named - on_page, f"named in the code, not on the page: {sorted(named - on_page)}"
    extra = {v for v in on_page if v.startswith("TOPOBIND_")} - named
    assert not extra, f"on the page, not in the code: {sorted(extra)}"
