#!/usr/bin/env python3
"""Regenerate docs/reference/exit-status.md: the statuses every command shares (below) and,
from topobind.errors, every error class with the status it exits with.

    scripts/gen-exit-status-doc.py           # write docs/reference/exit-status.md
    scripts/gen-exit-status-doc.py --check   # exit 1 when it is stale
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from docpaths import user_paths, write_page  # noqa: E402  (scripts/)

from topobind import errors  # noqa: E402

TARGET = REPO / "docs" / "reference" / "exit-status.md"

HEAD_TEMPLATE = """# Exit statuses

What `topobind` exits with. Every failure also prints one line per problem on stderr,
`topobind: error: ...`, naming the input and the fix ([What topobind refuses](../bad-input.md)).
The kernels' own statuses (`kernels/bin/stream` and the others, and `topobind bench`, which
passes them through) are in [Kernel results format](../results-format.md#exit-statuses-all-kernels).

{shared}
The ReFrame checks' load wrapper (`reframe_tests/topobind_rfm/probe.py load OUT -- CMD`, around
every check's measurement) exits as a shell does: `CMD`'s status, 127 or 126 with one line
`topobind load: CMD: ...` when `CMD` does not exist or cannot be executed, 128 + N when
signal N ended it, and 2 (`CMD` not run) when `OUT` cannot be written.

## Statuses by error class

Generated from `src/topobind/errors.py` by `scripts/gen-exit-status-doc.py`: each kind of
error topobind raises, and the status the command exits with when it does.

| error | status | when |
| --- | --- | --- |
"""


#: (status, meaning, commands): the statuses every command shares
SHARED = [
    ("0", "done; every check passed", "all"),
    (
        "1",
        "ran, and found a difference: the placement differs from the plan, a check failed, "
        "a node drifted or is slow",
        "`verify`, `run --verify`, `validate`, `calibrate`, `report --fail-on-slow`, "
        "`site check --live`, `spack check`",
    ),
    (
        "2",
        "bad command line or bad input (a file, a topology, a plan that does not fit): "
        "nothing is launched or written",
        "all",
    ),
    ("3", "a kernel's `--strict` page size could not be obtained", "`bench`"),
    (
        "4",
        "ran, found nothing wrong, but did not judge: with `--each-node` a node NOT JUDGED "
        "(fewer than 3 nodes or 3 runs) or not tested (a `--nodelist` node the `--reports` do "
        "not hold); without it, performance checks ran and none of their figures had a "
        "reference (`performance NOT JUDGED`, the last line; some figures without one: a "
        "warning, exit 0)",
        "`validate`",
    ),
    (
        "5",
        "ran, found no bad node, and a site problem: the same failure on at least 3 judged "
        "nodes and more than half of them (the checks' programs missing, a check the site "
        "cannot run), said once with its fix; nothing drained "
        "([Causes](../explanation/causes.md#a-failure-every-node-shares-is-the-sites)). A bad "
        "node as well: 1",
        "`validate --each-node`",
    ),
    (
        "126, 127",
        "the program could not be started: 127 when it does not exist, 126 when it cannot "
        "be executed",
        "`run`, `verify`",
    ),
    (
        "128 + N",
        "interrupted by signal N while topobind itself waited (130 for SIGINT, 143 for SIGTERM)",
        "all",
    ),
    (
        "the program's",
        "`run` passes the launched program's exit status through (a program killed by "
        "signal N: 128 + N)",
        "`run`",
    ),
]

HEAD = HEAD_TEMPLATE.format(
    shared="\n".join(
        ["| status | meaning | commands |", "| --- | --- | --- |"]
        + [f"| {a} | {b} | {c} |" for a, b, c in SHARED]
    )
    + "\n"
)

#: the classes whose __init__ computes the status: how, in words
COMPUTED = {
    "CannotRun": "126 or 127",
    "Interrupted": "128 + signal",
    "ProbeFailed": "the probe's (1 if 0)",
    "Problems": "2 (1 for a live node check)",
}


def status_of(cls: type[errors.TopobindError]) -> str:
    """The class's status, or how __init__ computes it (COMPUTED)."""
    init = cls.__dict__.get("__init__")
    if init is not None and "exit_status =" in inspect.getsource(init):
        if cls.__name__ not in COMPUTED:
            raise SystemExit(f"{cls.__name__} sets its exit status: describe it in COMPUTED")
        return COMPUTED[cls.__name__]
    return str(cls.exit_status)


def render() -> str:
    classes = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.TopobindError) and c.__module__ == errors.__name__
    ]
    classes.sort(key=lambda c: (c is not errors.TopobindError, c.__name__))
    rows = []
    for c in classes:
        doc = " ".join((c.__doc__ or "").split()).replace("|", "\\|")
        rows.append(f"| `{c.__name__}` | {status_of(c)} | {doc} |")
    return user_paths(HEAD + "\n".join(rows) + "\n")


def main() -> int:
    return write_page(TARGET, render(), "scripts/gen-exit-status-doc.py", "--check" in sys.argv)


if __name__ == "__main__":
    sys.exit(main())
