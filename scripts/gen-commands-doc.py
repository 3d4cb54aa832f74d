#!/usr/bin/env python3
"""Regenerate docs/reference/commands.md from topobind's argparse parser: every command,
subcommand and option, with its help text, default and choices, and the command's epilog
(examples) as --help prints it.

    scripts/gen-commands-doc.py           # write docs/reference/commands.md
    scripts/gen-commands-doc.py --check   # exit 1 when it is stale (tests/docs/test_reference.py)

Nothing here is written by hand: a new option appears on the page at the next 'make docs'.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from docpaths import user_paths, write_page  # noqa: E402  (scripts/)

from topobind.cli.main import build_parser  # noqa: E402

TARGET = REPO / "docs" / "reference" / "commands.md"

HEAD = """# Commands and options

Every command and option of `topobind`, generated from its argument parser by
`scripts/gen-commands-doc.py` (`make docs` regenerates this page; a test fails when it is
stale). `topobind COMMAND --help` prints the same, with the same examples. Exit statuses:
[Exit statuses](exit-status.md); environment variables: [Environment
variables](environment.md).

"""


def cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = ""
    if action.nargs != 0:
        fmt = argparse.HelpFormatter("x")
        metavar = " " + fmt._format_args(action, action.dest.upper())  # noqa: SLF001
    return ", ".join(f"`{o}{metavar}`" for o in action.option_strings)


def describe(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = parser._get_formatter()._expand_help(action) if action.help else ""  # noqa: SLF001
    extra = []
    if action.choices is not None and not isinstance(action.choices, dict):
        extra.append("choices: " + ", ".join(f"`{c}`" for c in action.choices))
    if (
        action.option_strings
        and action.nargs != 0
        and action.default not in (None, argparse.SUPPRESS, [], "")
        and "%(default)" not in (action.help or "")
    ):
        extra.append(f"default: `{action.default}`")
    if action.required and action.option_strings:
        extra.append("required")
    return cell(" ".join([text, *(f"({e})" for e in extra)]).strip())


def subparsers_of(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return action
    return None


def inner_parsers() -> dict[str, argparse.ArgumentParser]:
    """Commands that parse the rest of their command line with a second parser (argparse
    mishandles '--' below nested subparsers): their subcommands are listed from it."""
    from topobind.cli.commands import bench

    return {"topobind bench": bench.inner_parser()}


def section(
    name: str, parser: argparse.ArgumentParser, level: int, parent_epilog: str | None = None
) -> list[str]:
    out = [f"{'#' * level} {name}", ""]
    if parser.description:
        out += [parser.description.strip(), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    rows = [
        a
        for a in parser._actions  # noqa: SLF001
        if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)  # noqa: SLF001
    ]
    if rows:
        out += ["| argument | meaning |", "| --- | --- |"]
        out += [f"| {flags(a)} | {describe(parser, a)} |" for a in rows]
        out.append("")
    subs = subparsers_of(inner_parsers().get(name, parser))
    if subs is not None:
        helps = {c.dest: c.help or "" for c in subs._choices_actions}  # noqa: SLF001
        out += ["| subcommand | what it does |", "| --- | --- |"]
        for sub in subs.choices:
            anchor = f"{name} {sub}".replace(" ", "-").lower()
            out.append(f"| [`{sub}`](#{anchor}) | {cell(helps.get(sub, ''))} |")
        out.append("")
    if parser.epilog and parser.epilog != parent_epilog:
        out += ["```text", parser.epilog.strip("\n"), "```", ""]
    if subs is not None:
        for sub, child in subs.choices.items():
            out += section(f"{name} {sub}", child, min(level + 1, 4), parser.epilog)
    return out


def render() -> str:
    # argparse wraps usage lines at the terminal's width: 100 columns here, and only while
    # rendering (the tests import this module; the width must not leak into their process)
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        lines = [HEAD.rstrip("\n"), "", *section("topobind", build_parser(), 2)]
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    return user_paths("\n".join(lines).rstrip("\n") + "\n")


def main() -> int:
    return write_page(TARGET, render(), "scripts/gen-commands-doc.py", "--check" in sys.argv)


if __name__ == "__main__":
    sys.exit(main())
