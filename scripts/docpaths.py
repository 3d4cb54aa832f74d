#!/usr/bin/env python3
"""Sample output shows what a user sees, not the paths of the machine that captured it.

:func:`user_paths` rewrites captured output: a checkout (``/work/main``, a work tree, this
repository) becomes ``/path/to/topobind``, the shared folder ``/path/to/shared``, a random
temporary name (``mkdtemp``'s 8 characters) ``XXXXXXXX``, and a scratch folder under
``/tmp`` the user's own folder under ``~`` (``/tmp/tbdoc/cluster`` -> ``~/job/cluster``).
The scripts that capture sample output for docs/ call it (scripts/gen-*-doc.py); run as a
command it rewrites Markdown files in place (output pasted by hand):

    scripts/docpaths.py docs/*.md       # rewrite; prints the files it changed

:data:`MACHINE_PATH` is what tests/docs/test_paths.py refuses anywhere in docs/.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: paths of a developer's or CI's machine: work trees, scratch folders, home directories
MACHINE_PATH = re.compile(
    r"/work/[\w.-]"
    r"|/tmp/(?!tb-slurm\.lock|tb-vm\.lock)(?![\w.-]*XXXXXXXX)[\w.-]"
    r"|/home/[\w.-]|/root/|/Users/|/builds/|/github/workspace|/runner/work"
)

#: scratch folders the docs' output was captured in, by the name a user would give them
SCRATCH = {
    "tbdoc": "job",
    "readme": "job",
    "jsdoc2": "job",
    "docex": "job",
    "spank-v": "spank",
    "rfx": "ci",
    "ra-rfm": "ci",
}

#: prefixes of temporary names made by topobind, ReFrame and tempfile (8 random characters)
RANDOM_TEMP = re.compile(r"(topobind-dry-run-|\.topobind-run-|/tmp/rfm-|/tmp/tmp)[a-z0-9_]{8}\b")

CHECKOUT = re.compile(r"/work/(?:main|wt/[\w.-]+)(?=/|\b)")
TMP = re.compile(r"(?<![\w~.])/tmp/(?!tb-slurm\.lock|tb-vm\.lock)([\w.-]+)")


def user_paths(text: str, repo: Path = REPO) -> str:
    """``text`` with this machine's paths replaced by what a user sees."""
    # the shared folder sits beside the checkout (X/p and X/shared); a work tree's may be one
    # level up (X/wt/NAME): only absolute paths of two or more parts, never a bare "/shared"
    for shared in (repo.parent / "shared", repo.parent.parent / "shared", Path("/work/shared")):
        if len(shared.parts) > 2:
            text = re.sub(rf"(?<![\w.]){re.escape(str(shared))}(?=/|\b)", "/path/to/shared", text)
    text = text.replace(str(repo), "/path/to/topobind")
    text = CHECKOUT.sub("/path/to/topobind", text)
    text = RANDOM_TEMP.sub(lambda m: m.group(1) + "XXXXXXXX", text)

    def scratch(m: re.Match[str]) -> str:
        name = m.group(1)
        if "XXXXXXXX" in name:
            return m.group(0)
        return "~/" + SCRATCH.get(name, name)

    return TMP.sub(scratch, text)


def write_page(target: Path, text: str, script: str, check: bool) -> int:
    """A generated page written to ``target``, or (``check``: ``--check``) 1 with one line on
    stderr when the committed page differs from ``text``; ``script``: what regenerates it."""
    where = target.relative_to(REPO)
    if check:
        if not target.is_file() or target.read_text() != text:
            print(f"{where} is stale: run {script}", file=sys.stderr)
            return 1
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print(f"wrote {where}")
    return 0


def main(paths: list[str]) -> int:
    for name in paths:
        path = Path(name)
        text = path.read_text()
        new = user_paths(text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
